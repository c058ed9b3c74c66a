"""A web host dies mid-load (every worker SIGKILLed): no acknowledged post is lost, the other
hosts serve on, and the dead host's locks are free for the others at once.

Three hosts (cluster_common.Cluster: 2 kagi-demo processes × 4 threads each, locks and data on
one private PostgreSQL, one shared secret) behind ONE nginx with a server per host and one
balancing over all six processes. Load: 4 clients post through the balancing server and 2
more straight to each host's own server, all to one board, each post with a unique body.

Mid-load, host1 is made to hold a known lock: GET /_test/hold?name=cluster/kill&ms=30000 on
host1 (test.routes), seen held by host1 on the lock server (kagi-locks' cluster view, which
reads pg_locks), and a request on host2 for the same lock is seen waiting there. Then both of
host1's processes are SIGKILLed. The takeover time is from the kill to host2's answer (the lock
was released by the server when host1's connections closed, granted to host2's waiter, and the
answer came back through nginx): printed against the 50 ms goal, beside what an uncontended
lock request on host2 takes under the same load, and asserted under 1 s.

Checked after 3 s more of load: every post answered 303 is on the board exactly once (read
through host2, host3 and the balancing server, which show the same board), no post is stored
twice, ids are unique and ascending; after the kill, posts through host2, host3 and the
balancing server are acknowledged, and from 1 s after it every one of them is; the balancing
server's posts were served by all three hosts before the kill and, once host1's workers are seen
dead, by host2 and host3 only (nginx's X-Kagi-Upstream).
"""

import json
import os
import signal
import subprocess
import threading
import time

import cluster_common  # first: it puts frontends/ and bbs/ on the path
import bbs_common  # noqa: E402
import harness  # noqa: E402
import pgcluster  # noqa: E402

BOARD = "cluster"
LOCK = "cluster/kill"
SITE_CLIENTS, DIRECT_CLIENTS_PER_HOST = 4, 2
BEFORE_KILL = 300  # posts acknowledged before the kill
AFTER_KILL_S = 3.0
TAKEOVER_GOAL_MS, TAKEOVER_BOUND_MS = 50, 1000


class Load:
    """Clients posting to `ports` (one port each) until stop(); every attempt is logged as
    (body, port, sent, answered, status or exception name, name of the host that served it)."""

    def __init__(self, cluster, ports, token):
        self.cluster = cluster
        self.log = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.client, args=(c, port, token), daemon=True)
                        for c, port in enumerate(ports)]
        for t in self.threads:
            t.start()

    def client(self, c, port, token):
        cl = cluster_common.Client([port], token)
        i = 0
        while not self.stopping.is_set():
            body = "client %d post %d" % (c, i)
            i += 1
            sent = time.monotonic()
            served_by = None
            try:
                r = cl.post(port, BOARD, {"name": "c%d" % c, "body": body})
                status = r.status
                served_by = getattr(self.cluster.host_of(r), "name", None)
            except Exception as e:  # noqa: BLE001 - a cut connection: not acknowledged
                status = type(e).__name__
            with self.lock:
                self.log.append((body, port, sent, time.monotonic(), status, served_by))
            if status != 303:
                time.sleep(0.05)  # a dead host answers 502 at once: do not spin on it
        cl.close()

    def acked(self):
        with self.lock:
            return sum(1 for e in self.log if e[4] == 303)

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(60)


def cluster_lock(env, cluster, host):
    """(holders, waiters) of LOCK on the lock server, as kagi-locks with `host`'s settings
    reads them (each entry has "host" and "pid" from the connection's application_name)."""
    argv = [env.args.locks]
    for item in cluster.settings(host):
        argv += ["--set", item]
    out = subprocess.run(argv + ["--json"], capture_output=True, text=True, timeout=20)
    if out.returncode != 0:
        raise AssertionError("kagi-locks failed (%d): %s" % (out.returncode, out.stderr[:300]))
    doc = json.loads(out.stdout)
    for lock in (doc.get("cluster") or {}).get("locks", []):
        if lock["name"] == LOCK:
            return lock["holders"], lock["waiters"]
    return [], []


def take_over(env, fail, cluster, victim, heir):
    """Has `victim` hold LOCK and `heir` wait for it, kills every worker of `victim`; returns
    (the time just before the first kill, the time every worker was seen dead). The takeover
    is measured and checked here."""
    results = {}

    def hold(key, port, ms):
        try:
            results[key] = harness.request(port, "GET", "/_test/hold?name=%s&ms=%d" % (LOCK, ms),
                                           timeout=60)
        except Exception as e:  # noqa: BLE001 - the holder's connection dies with its host
            results[key] = e
        results[key + "_at"] = time.monotonic()

    holder = threading.Thread(target=hold, args=("holder", victim.port, 30000), daemon=True)
    holder.start()
    harness.wait_until("%s holding %s on the lock server" % (victim.name, LOCK),
                       lambda: any(h["host"] == victim.name
                                   for h in cluster_lock(env, cluster, heir)[0]), timeout=20)
    waiter = threading.Thread(target=hold, args=("waiter", heir.port, 0), daemon=True)
    waiter.start()
    harness.wait_until("%s waiting for %s on the lock server" % (heir.name, LOCK),
                       lambda: any(w["host"] == heir.name
                                   for w in cluster_lock(env, cluster, heir)[1]), timeout=20)
    holders, waiters = cluster_lock(env, cluster, heir)
    print("  %s held by %s, %s waiting (lock server's view)"
          % (LOCK, [(h["host"], h["pid"]) for h in holders],
             [(w["host"], w["pid"]) for w in waiters]))
    fail.check(len(holders) == 1 and holders[0]["pid"] in victim.pids,
               "%s is held by a worker of %s at the kill" % (LOCK, victim.name))

    # What an answer costs without the takeover, under the same load: the baseline the
    # takeover time below includes (the waiter's answer travels the same way).
    times = []
    for _ in range(5):
        t = time.monotonic()
        harness.request(heir.port, "GET", "/_test/hold?name=cluster/free&ms=0", timeout=30)
        times.append((time.monotonic() - t) * 1000)
    baseline_ms = sorted(times)[len(times) // 2]

    killed_at = time.monotonic()
    for pid in victim.pids:
        os.kill(pid, signal.SIGKILL)
    # Every worker must die (else the test fails here). Between killed_at and a kill this
    # thread may lose the interpreter to a client, whose post then goes to a victim still
    # alive: only what is sent once they are seen dead is "after the kill" for the balancing
    # server's choice of host.
    harness.wait_until("every worker of %s dead" % victim.name,
                       lambda: not any(harness.pid_alive(p) for p in victim.pids), timeout=10)
    dead_at = time.monotonic()
    waiter.join(30)
    holder.join(30)
    answer = results.get("waiter")
    took_ms = (results.get("waiter_at", killed_at) - killed_at) * 1000
    print("  %s's waiter got %s %.1f ms after %s was killed (goal: %d ms; an uncontended "
          "/_test/hold on %s answers in %.1f ms under this load, median of 5)"
          % (heir.name, LOCK, took_ms, victim.name, TAKEOVER_GOAL_MS, heir.name, baseline_ms))
    fail.check(isinstance(answer, harness.Reply) and answer.status == 200,
               "%s's request for %s is served once %s is dead (%r)"
               % (heir.name, LOCK, victim.name, getattr(answer, "status", answer)))
    fail.check(took_ms < TAKEOVER_BOUND_MS, "the takeover took %.1f ms (bound %d ms)"
               % (took_ms, TAKEOVER_BOUND_MS))
    fail.check(not isinstance(results.get("holder"), harness.Reply)
               or results["holder"].status != 200,
               "the killed holder's request was not answered 200")
    return killed_at, dead_at


def check_board(fail, cluster, load, survivors):
    acked = [e[0] for e in load.log if e[4] == 303]
    readings = {}
    for label, port in [(h.name, h.port) for h in survivors] + [("site", cluster.site_port)]:
        stored, _ = bbs_common.all_posts(port, BOARD)
        readings[label] = [(p["id"], p["body"]) for p in stored]
    first = next(iter(readings))
    board = readings[first]
    for label, reading in readings.items():
        fail.check(reading == board, "%s shows the same board as %s" % (label, first))
    ids = [i for i, _ in board]
    counts = {}
    for _, body in board:
        counts[body] = counts.get(body, 0) + 1
    lost = [b for b in acked if b not in counts]
    twice = [b for b, n in counts.items() if n > 1]
    print("  board: %d posts, %d acknowledged, %d stored without an acknowledgement; ids %s"
          % (len(board), len(acked), len(board) - len(acked) + len(lost),
             "1..N without gaps" if ids == list(range(1, len(ids) + 1)) else "WITH GAPS"))
    fail.equal(len(lost), 0, "acknowledged posts lost (e.g. %r)" % lost[:3])
    fail.equal(len(twice), 0, "posts stored more than once (e.g. %r)" % twice[:3])
    fail.check(len(ids) == len(set(ids)) and ids == sorted(ids), "ids unique and ascending")


def test(env, fail):
    if not env.args.locks:
        raise AssertionError("cluster_kill_test.py needs --locks PATH_OF_kagi-locks")
    with pgcluster.PgCluster(env) as pg, cluster_common.Cluster(env, pg, extra=[
            "bbs.boards=" + BOARD, "bbs.keep=100000", "locks.timeout_ms=10000"]) as cluster:
        victim, survivors = cluster.hosts[0], cluster.hosts[1:]
        token = cluster_common.csrf_token(cluster.site_port)
        ports = [cluster.site_port] * SITE_CLIENTS + \
            [h.port for h in cluster.hosts for _ in range(DIRECT_CLIENTS_PER_HOST)]
        load = Load(cluster, ports, token)
        try:
            harness.wait_until("%d posts before the kill" % BEFORE_KILL,
                               lambda: load.acked() >= BEFORE_KILL, timeout=60)
            killed_at, dead_at = take_over(env, fail, cluster, victim, survivors[0])
            time.sleep(AFTER_KILL_S)
        finally:
            load.stop()

        log = load.log
        for label, port in [(h.name, h.port) for h in survivors] + [("site", cluster.site_port)]:
            after = [e for e in log if e[1] == port and e[2] > killed_at]
            ok = [e for e in after if e[4] == 303]
            settled = [e for e in after if e[2] > killed_at + 1.0]
            in_flight = [e for e in log if e[1] == port and e[2] < killed_at < e[3]]
            print("  %s after the kill: %d of %d posts acknowledged; slowest post in flight at "
                  "the kill answered %.0f ms after it" % (
                      label, len(ok), len(after),
                      max([(e[3] - killed_at) * 1000 for e in in_flight] or [0])))
            fail.check(len(ok) > 0, "posts through %s are acknowledged after the kill" % label)
            fail.check(all(e[4] == 303 for e in settled),
                       "from 1 s after the kill every post through %s is acknowledged (%s)"
                       % (label, sorted({str(e[4]) for e in settled})))
        site = [e for e in log if e[1] == cluster.site_port and e[4] == 303]
        before = sorted({e[5] for e in site if e[3] < killed_at})
        after = sorted({e[5] for e in site if e[2] > dead_at})
        print("  the balancing server's posts were served by %s before the kill, by %s after"
              % (before, after))
        fail.equal(before, [h.name for h in cluster.hosts],
                   "before the kill, the balancing server's posts were served by every host")
        fail.equal(after, [h.name for h in survivors],
                   "after the kill, only by the survivors")
        dead = [e for e in log if e[1] == victim.port and e[2] > killed_at + 0.5]
        print("  %s after the kill: %s" % (victim.name, sorted({str(e[4]) for e in dead})))
        print("  %d posts acknowledged in all, %d attempts failed"
              % (sum(1 for e in log if e[4] == 303), sum(1 for e in log if e[4] != 303)))
        check_board(fail, cluster, load, survivors)


if __name__ == "__main__":
    harness.main(test, "cluster-kill")
