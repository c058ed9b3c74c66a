"""One BBS board on three web hosts sharing PostgreSQL: no lost updates across hosts, and the
split-brain guard.

Three hosts (cluster_common.Cluster: 2 kagi-demo processes × 4 threads each under spawn-fcgi,
a locks.dir and a data.dir of its own, locks and data on one private PostgreSQL, one shared
secret file) behind ONE nginx that has a server per host plus one balancing over all six
processes.

  1. 16 clients × 100 posts to one board. Each client takes its CSRF cookie from one host and
     posts to the three hosts' servers in turn (so every host serves every client, and every
     host accepts another host's cookie). Then the board is read back (posts.json) through
     each host and through the balancing server. Checked: every post answered 303 is stored
     exactly once (matched by its unique body), the ids are 1..N without gaps, every host
     answered posts, and all four readings are the same board.
  2. The split-brain guard, files data: a kagi-demo on a fresh data.dir D with local locks in
     folder A claims D; one with local locks in folder B on the same D exits with 2, saying
     why; one more with folder A again starts.
  3. The same for the data in PostgreSQL (claimed by the cluster's postgres lock domain): a
     kagi-demo with data.backend = postgres on that database but local locks exits with 2.
"""

import os
import time

import cluster_common  # first: it puts frontends/ and bbs/ on the path
import bbs_common  # noqa: E402
import harness  # noqa: E402
import pgcluster  # noqa: E402

CLIENTS, POSTS = 16, 100
BOARD = "cluster"
REFUSAL = ("lock in another domain", "lose updates")


def hammer(cluster, ports):
    """Each client posts POSTS times, to `ports` in turn; returns [(body, port)] acknowledged
    (303) per client, or the exception that stopped it."""
    def client(c):
        token = cluster_common.csrf_token(ports[c % len(ports)])
        cl = cluster_common.Client(ports, token)
        acked = []
        try:
            for i in range(POSTS):
                port = ports[(c + i) % len(ports)]
                body = "client %d post %d" % (c, i)
                r = cl.post(port, BOARD, {"name": "c%d" % c, "subject": "s%d" % i, "body": body})
                if r.status != 303:
                    raise AssertionError("post %r to port %d answered %d: %s"
                                         % (body, port, r.status, r.text()[:300]))
                acked.append((body, port))
        finally:
            cl.close()
        return acked
    return harness.parallel([lambda c=c: client(c) for c in range(CLIENTS)], timeout=240)


def check_board(fail, cluster, results):
    errors = [r for r in results if isinstance(r, Exception)]
    fail.check(not errors, "every client finished (%s)" % errors[:1])
    acked = [a for r in results if isinstance(r, list) for a in r]
    fail.equal(len(acked), CLIENTS * POSTS, "posts acknowledged (303)")
    per_host = {h.name: sum(1 for _, port in acked if port == h.port) for h in cluster.hosts}
    print("  acknowledged per host: %s" % per_host)
    fail.check(all(n > 0 for n in per_host.values()), "every host answered posts")

    readings = {}
    for label, port in [(h.name, h.port) for h in cluster.hosts] + [("site", cluster.site_port)]:
        stored, page = bbs_common.all_posts(port, BOARD)
        readings[label] = ([(p["id"], p["body"]) for p in stored], page["total"],
                           page["last_id"])
    board, total, last_id = readings["host1"]
    ids = [i for i, _ in board]
    bodies = [b for _, b in board]
    fail.check(ids == list(range(1, len(ids) + 1)), "ids are 1..N without gaps (N = %d)"
               % len(ids))
    counts = {}
    for b in bodies:
        counts[b] = counts.get(b, 0) + 1
    lost = [b for b, _ in acked if b not in counts]
    twice = [b for b, n in counts.items() if n > 1]
    fail.equal(len(lost), 0, "acknowledged posts lost (e.g. %r)" % lost[:3])
    fail.equal(len(twice), 0, "posts stored more than once (e.g. %r)" % twice[:3])
    fail.equal(len(board), len(acked), "stored == acknowledged")
    fail.equal((total, last_id), (len(acked), len(acked)), "posts.json total and last_id")
    for label, reading in readings.items():
        fail.check(reading == readings["host1"], "%s shows the same board as host1" % label)


def refusal(out):
    """The line of kagi-demo's output that says why it would not start (or all of it)."""
    lines = [line for line in out.splitlines() if REFUSAL[0] in line]
    return lines[0] if lines else out.strip()


def check_files_refusal(fail, env):
    """The claim in a files data.dir: local locks in another folder are refused."""
    data = env.path("split", "data")
    first = ["data.backend=files", "locks.backend=local", "data.dir=" + data,
             "locks.dir=" + env.path("split", "locks-a")]
    port = harness.free_port()
    proc = env.start([env.demo, "--http", "127.0.0.1:%d" % port] + env.demo_settings(2, first),
                     "split-a.log")
    harness.wait_for_port(port, proc, "kagi-demo on locks-a")
    fail.check(os.path.exists(os.path.join(data, ".kagi-lock-domain")),
               "the first process recorded its lock domain in data.dir")

    code, out = cluster_common.run_demo(env, first[:3] + ["locks.dir=" + env.path("split",
                                                                                   "locks-b")])
    print("  locks-b on the same data.dir: exit %s: %s" % (code, refusal(out)))
    fail.equal(code, 2, "a process with another locks.dir on that data.dir exits with")
    fail.check(all(w in out for w in REFUSAL), "it says why (%r)" % (REFUSAL,))
    fail.check(proc.poll() is None, "the first process runs on")

    # The same domain again is welcome (a second process of the same host).
    port2 = harness.free_port()
    again = env.start([env.demo, "--http", "127.0.0.1:%d" % port2] + env.demo_settings(2, first),
                      "split-a2.log")
    harness.wait_for_port(port2, again, "a second kagi-demo on locks-a")
    fail.check(again.poll() is None, "a second process with the same locks.dir starts")


def check_postgres_refusal(fail, env, pg):
    """The claim in the database: written by the cluster's postgres lock domain."""
    recorded = pg.sql("SELECT domain FROM kagi_lock_domain")
    print("  the database records lock domain %r" % recorded)
    fail.check(recorded.startswith("postgres"), "the database records the postgres lock domain")
    code, out = cluster_common.run_demo(env, [
        "data.backend=postgres", "data.postgres.dsn=" + pg.dsn, "locks.backend=local",
        "locks.dir=" + env.path("split", "locks-pg"), "data.dir=" + env.path("split", "data-pg")])
    print("  local locks on the cluster's database: exit %s: %s" % (code, refusal(out)))
    fail.equal(code, 2, "a process with local locks on the cluster's database exits with")
    fail.check(all(w in out for w in REFUSAL), "it says why (%r)" % (REFUSAL,))
    fail.check("the data in PostgreSQL" in out, "it names the data in PostgreSQL")


def test(env, fail):
    with pgcluster.PgCluster(env) as pg, cluster_common.Cluster(env, pg, extra=[
            "bbs.boards=" + BOARD, "bbs.keep=100000", "locks.timeout_ms=10000"]) as cluster:
        ports = [h.port for h in cluster.hosts]
        t0 = time.monotonic()
        results = hammer(cluster, ports)
        took = time.monotonic() - t0
        print("  %d clients x %d posts over %d hosts in %.1f s (%.0f posts/s)"
              % (CLIENTS, POSTS, len(ports), took, CLIENTS * POSTS / took))
        check_board(fail, cluster, results)
        check_files_refusal(fail, env)
        check_postgres_refusal(fail, env, pg)


if __name__ == "__main__":
    harness.main(test, "cluster-bbs")
