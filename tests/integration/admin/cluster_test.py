"""The admin surfaces with the postgres lock backend: the locks of every web host.

Two kagi-demo processes play two web hosts on one private PostgreSQL: each has a locks.dir of
its own (so neither sees the other's registry) and an application_name of its own
("kagi/web-a/1", "kagi/web-b/2"). A request on web-a holds NAME while a request on web-b waits
for it. Then, read on web-b (which does not hold the lock):
  - /admin/locks.json: "cluster" has web-a's holder and web-b's waiter (host, pid, mode, route);
  - /admin/locks: the "Across hosts (PostgreSQL)" section lists both;
  - /metrics (strict parser): kagi_cluster_up 1, kagi_cluster_hosts 2, the held and waiting
    gauges per host;
  - kagi-locks with web-a's settings prints both, as text and as the same JSON document.
After PostgreSQL stops, web-b's pages still answer: the cluster's error in locks.json,
kagi_cluster_up 0 in /metrics, the notice on the page; kagi-locks prints the error, exit 0.
"""

import base64
import json
import os
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "frontends"))
sys.path.insert(0, HERE)
import harness  # noqa: E402
import pgcluster  # noqa: E402
import prometheus  # noqa: E402

NAME = "admin/pg/1"
HOLD_MS = 4000
AUTH = {"Authorization": "Basic " + base64.b64encode(b"admin:s3cret").decode()}


def host_settings(env, pg, host, pid, htpasswd):
    return pg.lock_settings() + [
        "admin.htpasswd=" + htpasswd,
        "locks.dir=" + env.path(host, "locks"),
        "data.dir=" + env.path(host, "data"),
        "locks.timeout_ms=%d" % (HOLD_MS * 5),
        "locks.postgres.application_name=kagi/%s/%d" % (host, pid),
    ]


def start_host(env, settings, host):
    port = harness.free_port()
    proc = env.start([env.demo, "--http", "127.0.0.1:%d" % port] + env.demo_settings(4, settings),
                     host + ".log")
    harness.wait_for_port(port, proc, "kagi-demo " + host)
    return port


def get(port, path):
    return harness.request(port, "GET", path, headers=AUTH)


def cluster_lock(doc):
    cluster = doc.get("cluster") or {}
    for lock in cluster.get("locks", []):
        if lock["name"] == NAME:
            return lock
    return None


def samples(text):
    """{(family sample name, frozen labels): value} of /metrics; ValueError if it is not strict."""
    out = {}
    for family in prometheus.parse(text).values():
        for name, labels, value in family["samples"]:
            out[(name, tuple(sorted(labels.items())))] = value
    return out


def kagi_locks(env, settings, *extra):
    """kagi-locks with a host's settings (its locks.dir, the server)."""
    argv = [env.args.locks]
    for item in settings:
        argv += ["--set", item]
    return subprocess.run(argv + list(extra), capture_output=True, text=True, timeout=20)


def check_both_hosts(env, fail, port_a, port_b, settings_a):
    results = {}

    def hold(key, port, ms):
        results[key] = harness.request(port, "GET", "/_test/hold?name=%s&ms=%d" % (NAME, ms),
                                       timeout=30)

    holder = threading.Thread(target=hold, args=("holder", port_a, HOLD_MS), daemon=True)
    holder.start()
    harness.wait_until("web-a's holder on the server",
                       lambda: (lambda l: l is not None and len(l["holders"]) == 1)(
                           cluster_lock(json.loads(get(port_b, "/admin/locks.json").body))),
                       timeout=HOLD_MS / 1000.0 * 0.5)
    waiter = threading.Thread(target=hold, args=("waiter", port_b, 10), daemon=True)
    waiter.start()
    harness.wait_until("web-b's waiter on the server",
                       lambda: (lambda l: l is not None and len(l["waiters"]) == 1)(
                           cluster_lock(json.loads(get(port_b, "/admin/locks.json").body))),
                       timeout=HOLD_MS / 1000.0 * 0.5)

    # Everything below is read while web-a still holds the lock (HOLD_MS is ample for it).
    doc = json.loads(get(port_b, "/admin/locks.json").body)
    lock = cluster_lock(doc)
    fail.check(lock is not None, "web-b's locks.json has %s under cluster" % NAME)
    if lock:
        h, w = lock["holders"][0], lock["waiters"][0]
        fail.equal((doc["cluster"]["backend"], doc["cluster"]["hosts"], doc["cluster"]["error"]),
                   ("postgres", 2, None), "cluster backend, hosts, error")
        fail.equal((h["host"], h["pid"], h["mode"], h["method"], h["path"]),
                   ("web-a", 1, "exclusive", "GET", "/_test/hold"), "the holder is web-a's")
        fail.equal((w["host"], w["pid"], w["mode"], w["method"], w["path"]),
                   ("web-b", 2, "exclusive", "GET", "/_test/hold"), "the waiter is web-b's")
        fail.check(len(h["request_id"]) >= 8 and h["request_id"] != w["request_id"],
                   "holder and waiter carry their request ids (%r, %r)"
                   % (h["request_id"], w["request_id"]))
    local = [l for l in doc["locks"] if l["name"] == NAME]
    fail.check(len(local) == 1 and not local[0]["holders"] and len(local[0]["waiters"]) == 1,
               "web-b's own registry shows only its waiter (%r)" % local)

    page = get(port_b, "/admin/locks").text()
    fail.check("Across hosts (PostgreSQL)" in page and "<td>web-a</td>" in page
               and "<td>web-b</td>" in page, "the page's cluster section lists both hosts")

    try:
        s = samples(get(port_b, "/metrics").text())
    except ValueError as e:
        fail.check(False, "/metrics parses strictly: %s" % e)
        s = {}
    fail.equal(s.get(("kagi_cluster_up", ())), 1.0, "kagi_cluster_up")
    fail.equal(s.get(("kagi_cluster_hosts", ())), 2.0, "kagi_cluster_hosts")
    fail.equal(s.get(("kagi_cluster_locks_held", (("host", "web-a"),))), 1.0,
               "kagi_cluster_locks_held{host=\"web-a\"}")
    fail.equal(s.get(("kagi_cluster_locks_waiting", (("host", "web-b"),))), 1.0,
               "kagi_cluster_locks_waiting{host=\"web-b\"}")

    out = kagi_locks(env, settings_a)
    fail.check(out.returncode == 0 and "across hosts (PostgreSQL)" in out.stdout
               and "web-a/1" in out.stdout and "web-b/2" in out.stdout,
               "kagi-locks prints both hosts:\n" + out.stdout + out.stderr)
    out = kagi_locks(env, settings_a, "--json")
    cli = cluster_lock(json.loads(out.stdout)) if out.returncode == 0 else None
    fail.check(cli is not None and len(cli["holders"]) == 1 and len(cli["waiters"]) == 1,
               "kagi-locks --json has the cluster's holder and waiter")

    holder.join(HOLD_MS / 1000.0 + 20)
    waiter.join(20)
    fail.check(results.get("waiter") is not None and results["waiter"].status == 200,
               "web-b's request got the lock after web-a's")


def check_server_down(env, fail, pg, port_b, settings_a):
    pg.stop()
    doc = json.loads(get(port_b, "/admin/locks.json").body)
    error = (doc.get("cluster") or {}).get("error")
    fail.check(isinstance(error, str) and error != "",
               "locks.json reports why the server could not be read (%r)" % error)
    r = get(port_b, "/admin/locks")
    fail.check(r.status == 200 and "The lock server could not be read" in r.text(),
               "the page still answers and shows the notice")
    try:
        s = samples(get(port_b, "/metrics").text())
    except ValueError as e:
        fail.check(False, "/metrics parses strictly: %s" % e)
        s = {}
    fail.equal(s.get(("kagi_cluster_up", ())), 0.0, "kagi_cluster_up with the server down")
    fail.check(("kagi_cluster_hosts", ()) not in s, "no kagi_cluster_hosts while unknown")
    out = kagi_locks(env, settings_a)
    fail.check(out.returncode == 0 and "error: cannot read the lock server" in out.stdout,
               "kagi-locks prints the error and exits 0 (%d):\n%s" % (out.returncode, out.stdout))


def run(env, fail):
    if not env.args.locks:
        raise AssertionError("cluster_test.py needs --locks PATH_OF_kagi-locks")
    htpasswd = env.path("admin.htpasswd")
    subprocess.run(["htpasswd", "-cbB", htpasswd, "admin", "s3cret"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with pgcluster.PgCluster(env) as pg:
        settings_a = host_settings(env, pg, "web-a", 1, htpasswd)
        port_a = start_host(env, settings_a, "web-a")
        port_b = start_host(env, host_settings(env, pg, "web-b", 2, htpasswd), "web-b")
        check_both_hosts(env, fail, port_a, port_b, settings_a)
        check_server_down(env, fail, pg, port_b, settings_a)


if __name__ == "__main__":
    harness.main(run, "admin-cluster")
