"""Issue 7: the lock-status admin page behind nginx with two kagi-demo processes.

A request holds `admin/test/1` for HOLD_MS through /_test/hold while a second one queues behind
it; /admin/locks.json served by the process that does NOT hold the lock shows the holder
(request id, route, client address, pid) and the waiter; kagi-locks prints the same from the
registry; afterwards both processes report one contended acquisition for prefix admin/test.
Then the access rules (401 / 403 / 404), /metrics through a strict Prometheus parser, and the
group commit rounds of durable posts in stats.storage, /metrics and the page.
"""

import base64
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "frontends"))
sys.path.insert(0, HERE)
import harness  # noqa: E402
import prometheus  # noqa: E402

LOCKS_BIN = None
NAME = "admin/test/1"
PREFIX = "admin/test"
# Long enough for a loaded machine to see the holder and the waiter from the other process;
# the test waits for states, so the hold is what it costs, not a guess of how fast things are.
HOLD_MS = 6000
AUTH = {"Authorization": "Basic " + base64.b64encode(b"admin:s3cret").decode()}


def make_htpasswd(env):
    path = env.path("admin.htpasswd")
    subprocess.run(["htpasswd", "-cbB", path, "admin", "s3cret"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return path


def start_stack(env, htpasswd):
    sock = env.path("kagi.sock")
    # The waiter must outlast the holder's HOLD_MS instead of giving up with a 503.
    pids = env.spawn_fcgi(sock, 2, 4, ["admin.htpasswd=" + htpasswd,
                                       "locks.timeout_ms=%d" % (HOLD_MS * 5)])
    harness.wait_for_unix(sock)
    port = harness.free_port()
    env.nginx(port, sock)
    return port, pids


def locks_json(port):
    r = harness.request(port, "GET", "/admin/locks.json", headers=AUTH)
    if r.status != 200:
        raise AssertionError("locks.json answered %d: %s" % (r.status, r.text()[:200]))
    return json.loads(r.body)


def several_locks_json(port, n=6):
    """n concurrent reads: nginx spreads them over its connections, so both workers answer."""
    return [d for d in harness.parallel([lambda: locks_json(port)] * n, timeout=20)
            if isinstance(d, dict)]


def find_lock(doc, name):
    for lock in doc["locks"]:
        if lock["name"] == name:
            return lock
    return None


def prefix_stats(doc, prefix):
    for p in doc["stats"]["prefixes"]:
        if p["prefix"] == prefix:
            return p
    return None


def check_hold_seen_from_other_process(env, fail, port, pids):
    results = {}

    def hold(key, ms):
        results[key] = harness.request(port, "GET", "/_test/hold?name=%s&ms=%d" % (NAME, ms),
                                       timeout=30)

    holder = threading.Thread(target=hold, args=("holder", HOLD_MS), daemon=True)
    holder.start()
    # The holder is in the registry before the waiter starts, so the waiter queues behind it.
    harness.wait_until("the holder in locks.json",
                       lambda: (lambda l: l is not None and len(l["holders"]) == 1)(
                           find_lock(locks_json(port), NAME)), timeout=HOLD_MS / 1000.0 * 0.8)
    waiter = threading.Thread(target=hold, args=("waiter", 10), daemon=True)
    waiter.start()

    seen = None
    while seen is None and holder.is_alive():
        for doc in several_locks_json(port):
            lock = find_lock(doc, NAME)
            if not lock or len(lock["holders"]) != 1 or len(lock["waiters"]) != 1:
                continue
            if doc["served_by"]["pid"] != lock["holders"][0]["pid"]:
                seen = (doc, lock)
                break
    fail.check(seen is not None,
               "locks.json from the process not holding the lock shows holder + 1 waiter")
    if seen:
        doc, lock = seen
        h, w = lock["holders"][0], lock["waiters"][0]
        fail.equal(doc["processes"], 2, "the registry lists both worker processes")
        fail.check("cluster" in doc and doc["cluster"] is None,
                   "the local backend has no cluster view (\"cluster\": null)")
        fail.check(h["pid"] in pids, "holder pid %d is one of the workers %r" % (h["pid"], pids))
        fail.equal((h["mode"], h["method"], h["path"], h["client_address"]),
                   ("exclusive", "GET", "/_test/hold", "127.0.0.1"),
                   "holder mode, method, path and the real client address (through nginx)")
        fail.check(len(h["request_id"]) >= 8, "holder has a request id (%r)" % h["request_id"])
        fail.check(w["request_id"] != h["request_id"] and w["path"] == "/_test/hold",
                   "the waiter is another request on /_test/hold")
        fail.check(0 <= h["for_ms"] <= HOLD_MS + 500 and w["for_ms"] <= h["for_ms"],
                   "held-for %d ms >= waiting-for %d ms" % (h["for_ms"], w["for_ms"]))

    # The CLI reads the same registry while the lock is still held.
    locks_dir = env.path("var", "locks")
    out = subprocess.run([LOCKS_BIN, "--set", "locks.dir=" + locks_dir], capture_output=True,
                         text=True, timeout=10)
    fail.equal(out.returncode, 0, "kagi-locks exits 0")
    fail.check(NAME in out.stdout and " held " in out.stdout and " waiting " in out.stdout
               and "GET /_test/hold" in out.stdout,
               "kagi-locks prints the holder and the waiter:\n" + out.stdout)
    fail.check("across hosts" not in out.stdout,
               "kagi-locks: no across-hosts section with the local backend")
    out = subprocess.run([LOCKS_BIN, "--set", "locks.dir=" + locks_dir, "--json"],
                         capture_output=True, text=True, timeout=10)
    cli_lock = find_lock(json.loads(out.stdout), NAME) if out.returncode == 0 else None
    fail.check(cli_lock is not None and len(cli_lock["holders"]) == 1,
               "kagi-locks --json shows the held lock")
    fail.check('"cluster":null' in out.stdout,
               "kagi-locks --json: no cluster view with the local backend")

    r = harness.request(port, "GET", "/admin/locks", headers=AUTH)
    fail.check(r.status == 200 and NAME in r.text() and 'class="waiter"' in r.text(),
               "the HTML page shows the lock and its waiter")

    holder.join(HOLD_MS / 1000.0 + 20)
    waiter.join(20)
    fail.check(results.get("holder") is not None and results["holder"].status == 200,
               "the holder finished")
    fail.check(results.get("waiter") is not None and results["waiter"].status == 200,
               "the waiter got the lock after the holder")

    # Every worker sums every worker's counters: both must report the one contended
    # acquisition (the publishers write every 250 ms).
    agreed = set()
    deadline = time.monotonic() + 15
    while len(agreed) < 2 and time.monotonic() < deadline:
        for doc in several_locks_json(port):
            p = prefix_stats(doc, PREFIX)
            if p and p["acquisitions"] == 2 and p["contended"] == 1 and p["wait"]["count"] == 2:
                agreed.add(doc["served_by"]["pid"])
        time.sleep(0.1)
    fail.equal(len(agreed), 2, "both processes report 2 acquisitions, 1 contended for " + PREFIX)

    doc = locks_json(port)
    fail.check(find_lock(doc, NAME) is None, "the lock is gone from the registry after release")
    slow = [e for e in doc["events"] if e["kind"] == "slow_hold" and e["name"] == NAME]
    fail.check(len(slow) == 1 and slow[0]["path"] == "/_test/hold",
               "one slow_hold event with its route (got %r)" % slow)


def check_access(env, fail, port):
    r = harness.request(port, "GET", "/admin/locks.json")
    fail.equal(r.status, 401, "no credentials → 401")
    fail.check((r.header("WWW-Authenticate") or "").startswith('Basic realm="kagi admin"'),
               "401 has WWW-Authenticate: Basic realm=\"kagi admin\" (got %r)"
               % r.header("WWW-Authenticate"))
    bad = {"Authorization": "Basic " + base64.b64encode(b"admin:wrong").decode()}
    fail.equal(harness.request(port, "GET", "/admin/locks", headers=bad).status, 401,
               "wrong password → 401")
    fail.equal(harness.request(port, "GET", "/metrics",
                               headers={"Authorization": "Basic !!"}).status, 401,
               "malformed Authorization → 401")


def metric_samples(port, family):
    """The samples of one metric family in /metrics (empty if it does not parse)."""
    r = harness.request(port, "GET", "/metrics", headers=AUTH)
    try:
        return prometheus.parse(r.text()).get(family, {"samples": []})["samples"]
    except ValueError:
        return []


def check_metrics(fail, port):
    # Wait for the state itself: the 401s just sent, and both hold requests, reach the stats
    # files (each worker's publisher writes every 250 ms, so the worker that served the 401s
    # may have published while the other has not yet), and /metrics counts them.
    def counted():
        samples = metric_samples(port, "kagi_requests_total")
        unauthorized = any(s[1].get("route") == "GET /admin/locks.json" and
                           s[1].get("code") == "401" for s in samples)
        holds = sum(s[2] for s in samples
                    if s[1].get("route") == "GET /_test/hold" and s[1].get("code") == "200")
        return unauthorized and holds >= 2
    try:
        harness.wait_until("the 401s and both holds in /metrics", counted, 15)
    except AssertionError as e:
        print("  " + str(e))  # the check below reports it
    r = harness.request(port, "GET", "/metrics")
    fail.equal(r.status, 401, "/metrics without credentials → 401")
    r = harness.request(port, "GET", "/metrics", headers=AUTH)
    fail.equal(r.status, 200, "/metrics with credentials")
    fail.check((r.header("Content-Type") or "").startswith("text/plain; version=0.0.4"),
               "/metrics Content-Type is the Prometheus text format")
    try:
        families = prometheus.parse(r.text())
    except ValueError as e:
        fail.check(False, "/metrics parses strictly: %s" % e)
        return
    fail.check(True, "/metrics parses strictly (%d families)" % len(families))
    fail.equal([f for f in families if f.startswith("kagi_cluster_")], [],
               "no kagi_cluster_* metrics with the local backend")
    acq = {s[1].get("prefix"): s[2] for s in
           families.get("kagi_lock_acquisitions_total", {"samples": []})["samples"]}
    fail.equal(acq.get(PREFIX), 2.0, "kagi_lock_acquisitions_total{prefix=%r}" % PREFIX)
    for fam, typ in (("kagi_lock_wait_seconds", "histogram"), ("kagi_lock_hold_seconds", "histogram"),
                     ("kagi_lock_timeouts_total", "counter"), ("kagi_lock_held", "gauge"),
                     ("kagi_requests_total", "counter"),
                     ("kagi_request_duration_seconds", "histogram")):
        fail.equal(families.get(fam, {}).get("type"), typ, "%s is a %s" % (fam, typ))
    # Request counts and latencies, summed over both workers: the holder and the waiter were
    # two 200s on the hold route, and the holder alone took HOLD_MS.
    route = "GET /_test/hold"
    hold_200 = [s[2] for s in families.get("kagi_requests_total", {"samples": []})["samples"]
                if s[1].get("route") == route and s[1].get("code") == "200"]
    fail.equal(hold_200, [2.0], "kagi_requests_total{route=%r,code=\"200\"}" % route)
    dur = {s[0]: s[2] for s in
           families.get("kagi_request_duration_seconds", {"samples": []})["samples"]
           if s[1].get("route") == route and "le" not in s[1]}
    fail.equal(dur.get("kagi_request_duration_seconds_count"), 2.0,
               "kagi_request_duration_seconds_count for %s" % route)
    fail.check(dur.get("kagi_request_duration_seconds_sum", 0) >= HOLD_MS / 1000.0,
               "the hold route's latencies add up to at least its %d ms hold (%r)"
               % (HOLD_MS, dur.get("kagi_request_duration_seconds_sum")))
    unauth = [s for s in families.get("kagi_requests_total", {"samples": []})["samples"]
              if s[1].get("route") == "GET /admin/locks.json" and s[1].get("code") == "401"]
    fail.check(len(unauth) == 1 and unauth[0][2] >= 1,
               "the 401s of the access checks are counted under their route (%r)" % unauth)


def check_storage(fail, port):
    """Durable posts (data.fsync = "always", the default) show up as group commit rounds in
    locks.json's stats.storage, in the kagi_store_* metrics and on the page, summed over both
    workers."""
    token = harness.request(port, "GET", "/").cookies()["kagi_csrf"]
    hdrs = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": "kagi_csrf=" + token}
    posts = 4
    for i in range(posts):  # the first creates the log (flushed at once), the others wait
        r = harness.request(port, "POST", "/bbs/general/post", harness.form_body(
            {"_csrf": token, "name": "admin-test", "body": "durable post %d" % i}), hdrs)
        fail.equal(r.status, 303, "durable post %d" % i)
    want = posts - 1

    def storage():
        return locks_json(port)["stats"].get("storage", {})
    try:
        harness.wait_until("%d group commit rounds in locks.json" % want,
                           lambda: storage().get("rounds", 0) >= want, 15)
    except AssertionError as e:
        print("  " + str(e))  # the checks below report it
    st = storage()
    fail.check(st.get("rounds", 0) >= want and st.get("round_requests", 0) >= st.get("rounds", 0),
               "stats.storage counts a round for each durable post after the first (%r)" % st)
    fail.check(st.get("flushes", 0) >= 1 and st.get("round_flush_us", 0) > 0,
               "stats.storage counts the rounds' flushes and their time (%r)" % st)
    fail.equal(sorted(st), sorted(["rounds", "round_requests", "round_flush_us", "flushes",
                                   "journal_rounds", "journal_checkpoints", "syncfs_declined",
                                   "replayed"]), "stats.storage's fields")
    rounds = [s[2] for s in metric_samples(port, "kagi_store_rounds_total")]
    fail.check(len(rounds) == 1 and rounds[0] >= want,
               "kagi_store_rounds_total counts the rounds (%r)" % rounds)
    page = harness.request(port, "GET", "/admin/locks", headers=AUTH).text()
    fail.check('<table id="storage">' in page and "Durable writes" in page,
               "the page shows the durable writes' table")


def check_forbidden_and_off(env, fail, htpasswd):
    """The embedded HTTP front end with other settings: 403 for a non-allowed client, 404 off."""
    for label, extra, want in (
            ("admin.allow without the client", ["admin.htpasswd=" + htpasswd,
                                                "admin.allow=192.0.2.1"], 403),
            ("no admin.htpasswd", ["admin.htpasswd="], 404)):
        port = harness.free_port()
        proc = env.start([env.demo, "--http", "127.0.0.1:%d" % port] +
                         env.demo_settings(2, extra + ["locks.dir=" + env.path("locks-" + str(want)),
                                                       "data.dir=" + env.path("data-" + str(want))]),
                         "demo-%d.log" % want)
        harness.wait_for_port(port, proc, "kagi-demo")
        for path in ("/admin/locks", "/admin/locks.json", "/metrics"):
            fail.equal(harness.request(port, "GET", path, headers=AUTH).status, want,
                       "%s: %s with good credentials" % (label, path))
        proc.terminate()
        proc.wait(10)


def run(env, fail):
    htpasswd = make_htpasswd(env)
    port, pids = start_stack(env, htpasswd)
    check_hold_seen_from_other_process(env, fail, port, pids)
    check_access(env, fail, port)
    check_metrics(fail, port)
    check_storage(fail, port)
    check_forbidden_and_off(env, fail, htpasswd)


if __name__ == "__main__":
    if "--locks" in sys.argv:
        i = sys.argv.index("--locks")
        LOCKS_BIN = sys.argv[i + 1]
        del sys.argv[i:i + 2]
    if not LOCKS_BIN:
        sys.exit("admin_test.py: --locks PATH_OF_kagi-locks is required")
    harness.main(run, "admin")
