"""The dir lock backend through kagi-demo: one site on two "hosts" sharing a folder and no
database, signals, and a SIGKILLed holder.

`--root DIR` runs everything inside DIR (tests/integration/lock/dir_nfs_test.py passes an NFS
mount); by default the test's temp dir.

  1. Two hosts (different locks.dir_host_id, 2 kagi-demo processes x 4 threads each under
     spawn-fcgi) on ONE shared locks.dir and ONE data.dir, behind one nginx
     (tests/integration/cluster/cluster_common.py). 16 clients x 100 posts to one board, each
     client posting to both hosts in turn: every acknowledged post stored exactly once, ids
     1..N, both hosts show the same board. The split-brain guard accepts both hosts (one lock
     domain: the shared folder's id) and refuses a process with another locks.dir (exit 2).
  2. kagi-locks on host 2 shows a lock held on host 1, from its owner record, with its lease;
     the chat on dir: a say on host 1 reaches polls parked on both hosts (within the 5 s
     recheck that carries wake-ups across hosts).
  3. SIGTERM, SIGINT, SIGHUP and SIGQUIT each end a kagi-demo holding a lock through the normal
     stop path (exit 0): its lock directory is gone afterwards.
  4. SIGKILL leaves the lock directory; the next process on the host takes the lock at once
     (the holder's pid is dead), without waiting for the lease.
  5. "Break stale lock" on /admin/locks: a process of another host SIGKILLed holding a lock
     (lease 1 s): once the lease expired by more than the admin process's clock-skew margin
     (locks.dir_max_clock_skew_ms, 200 ms here), the admin page of a process on another host shows
     the record with a Break button; posting it needs the admin login (401) and the CSRF
     token (403), then removes the record (303) and the name is free; a second post: 409; a
     live holder's record has no button, and posting it anyway is refused (409).
"""

import base64
import glob
import json
import re
import os
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
import cluster_common  # noqa: E402  (puts frontends/ and bbs/ on the path)
import cluster_bbs_test  # noqa: E402
import harness  # noqa: E402

BOARD = "cluster"


class DirCluster(cluster_common.Cluster):
    """cluster_common.Cluster with dir locks: every host on the same locks.dir and data.dir."""

    def __init__(self, env, root, hosts=2, processes=2, threads=4, extra=()):
        super().__init__(env, None, hosts=hosts, processes=processes, threads=threads,
                         extra=extra)
        self.root = root

    def settings(self, host):
        return ["locks.backend=dir",
                "locks.dir_host_id=" + host.name,
                "locks.dir=" + os.path.join(self.root, "locks"),
                "data.dir=" + os.path.join(self.root, "data"),
                "security.secret_file=" + self.secret_file] + self.extra


def check_posts(fail, env, root):
    with DirCluster(env, root, extra=["bbs.boards=" + BOARD, "bbs.keep=100000",
                                      "locks.timeout_ms=20000",
                                      "chat.say_per_minute=0"]) as cluster:
        ports = [h.port for h in cluster.hosts]
        t0 = time.monotonic()
        results = cluster_bbs_test.hammer(cluster, ports)
        took = time.monotonic() - t0
        print("  %d clients x %d posts over %d hosts sharing one folder in %.1f s (%.0f posts/s)"
              % (cluster_bbs_test.CLIENTS, cluster_bbs_test.POSTS, len(ports), took,
                 cluster_bbs_test.CLIENTS * cluster_bbs_test.POSTS / took))
        cluster_bbs_test.check_board(fail, cluster, results)
        record = open(os.path.join(root, "data", ".kagi-lock-domain")).read().strip()
        print("  data.dir records lock domain %r" % record)
        fail.check(record.startswith("dir id="), "both hosts write the data under one dir domain")

        # Another locks.dir on the same data: another domain, refused.
        code, out = cluster_common.run_demo(env, [
            "locks.backend=dir", "locks.dir=" + env.path("other-locks"),
            "data.dir=" + os.path.join(root, "data")])
        print("  another locks.dir on the shared data.dir: exit %s" % code)
        fail.equal(code, 2, "a process locking in another folder exits with")
        fail.check("lock in another domain" in out, "it says why")

        check_locks_view(fail, env, cluster, root)
        check_chat(fail, cluster)


def check_chat(fail, cluster):
    """The chat on dir: a say on host 1 wakes a poll parked on host 1 at once (inotify) and one
    parked on host 2 within the chat's 5 s recheck. (Both "hosts" here share one kernel, whose
    inotify sees both: host 2 is woken at once too. Across real hosts inotify sees only its own
    host's writes, and the recheck is the bound; the check allows for it.)"""
    host1, host2 = cluster.hosts[0], cluster.hosts[1]
    token = cluster_common.csrf_token(host1.port)
    headers = {"Cookie": "kagi_csrf=" + token, "X-CSRF-Token": token,
               "Content-Type": "application/json"}
    last = json.loads(harness.request(host1.port, "GET", "/chat/lobby/messages?since=0&wait=0")
                      .body)["last"]
    answers = {}

    def poll(host):
        r = harness.request(host.port, "GET", "/chat/lobby/messages?since=%d&wait=20" % last,
                            timeout=30)
        answers[host.name] = (time.monotonic(), r.status, json.loads(r.body))
    pollers = [threading.Thread(target=poll, args=(h,)) for h in (host1, host2)]
    for t in pollers:
        t.start()
    time.sleep(1.0)  # both parked
    said = time.monotonic()
    r = harness.request(host1.port, "POST", "/chat/lobby/say",
                        json.dumps({"name": "dir", "text": "across hosts"}).encode(), headers)
    fail.equal(r.status, 200, "a say on host 1")
    for t in pollers:
        t.join()
    for host, bound in ((host1, 1.0), (host2, 5.0 + 1.0)):
        when, status, doc = answers.get(host.name, (None, None, {}))
        texts = [m.get("text") for m in doc.get("messages", [])]
        late = (when - said) if when else None
        print("  chat: the poll parked on %s answered %s after the say: %s"
              % (host.name, "%.2f s" % late if late is not None else "never", texts))
        fail.check(status == 200 and "across hosts" in texts,
                   "the poll on %s gets the message" % host.name)
        fail.check(late is not None and late <= bound,
                   "within %.0f s on %s" % (bound, host.name))


def check_locks_view(fail, env, cluster, root):
    """A lock held on host 1, seen from host 2 through kagi-locks."""
    host1 = cluster.hosts[0]
    held = threading.Thread(target=lambda: harness.request(
        host1.port, "GET", "/_test/hold?name=view/x&ms=3000", timeout=30))
    held.start()
    try:
        harness.wait_until("the hold on host 1", lambda: glob.glob(
            os.path.join(root, "locks", "dirlocks", "view@x.d", "x.*")), timeout=10)
        out = subprocess.run(
            [env.args.locks, "--json", "--set", "locks.backend=dir",
             "--set", "locks.dir=" + os.path.join(root, "locks"),
             "--set", "locks.dir_host_id=host2"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        doc = json.loads(out.stdout.decode())
        rows = [r for r in doc["cluster"]["locks"] if r["name"] == "view/x"]
        holder = rows[0]["holders"][0] if rows and rows[0]["holders"] else {}
        print("  kagi-locks on host2: %s" % holder)
        fail.equal(doc["cluster"]["backend"], "dir", "kagi-locks' cluster view is dir's")
        fail.equal(holder.get("host"), "host1", "host 2 sees the holder's host")
        fail.check(holder.get("lease_left_ms", -1) > 0 and not holder.get("expired", True),
                   "with a live lease")
        fail.equal(holder.get("path"), "/_test/hold", "and its route")
    finally:
        held.join()


def lock_dirs(locks):
    return glob.glob(os.path.join(locks, "dirlocks", "sig@x.d"))


def start_demo(env, locks, name):
    port = harness.free_port()
    proc = env.start([env.demo, "--http", "127.0.0.1:%d" % port] + env.demo_settings(4, [
        "locks.backend=dir", "locks.dir=" + locks, "locks.dir_host_id=h",
        "data.dir=" + env.path("sig-data")]), name + ".log")
    harness.wait_for_port(port, proc, name)
    return proc, port


def check_signals(fail, env, root):
    locks = os.path.join(root, "sig-locks")
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        proc, port = start_demo(env, locks, "sig-%d" % sig)
        hold = threading.Thread(target=lambda: harness.request(
            port, "GET", "/_test/hold?name=sig/x&ms=1500", timeout=30))
        hold.start()
        harness.wait_until("the lock held", lambda: glob.glob(
            os.path.join(locks, "dirlocks", "sig@x.d", "x.*")), timeout=10)
        proc.send_signal(sig)
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = "still running"
        hold.join()
        print("  %s while holding: exit %s, lock directory left: %s"
              % (signal.Signals(sig).name, code, bool(lock_dirs(locks))))
        fail.equal(code, 0, "%s ends kagi-demo through its stop path" % signal.Signals(sig).name)
        fail.check(not lock_dirs(locks), "%s: the lock directory is gone"
                   % signal.Signals(sig).name)

    proc, port = start_demo(env, locks, "sig-kill")

    def doomed_hold():
        try:
            harness.request(port, "GET", "/_test/hold?name=sig/x&ms=60000", timeout=5)
        except OSError:
            pass  # killed mid-request: no answer, as expected
    hold = threading.Thread(target=doomed_hold)
    hold.start()
    harness.wait_until("the lock held", lambda: glob.glob(
        os.path.join(locks, "dirlocks", "sig@x.d", "x.*")), timeout=10)
    proc.kill()
    proc.wait(timeout=10)
    hold.join()
    fail.check(bool(lock_dirs(locks)), "SIGKILL leaves the lock directory behind")
    proc2, port2 = start_demo(env, locks, "sig-next")
    t0 = time.monotonic()
    r = harness.request(port2, "GET", "/_test/hold?name=sig/x&ms=10", timeout=30)
    took = time.monotonic() - t0
    print("  after SIGKILL: the next process got the lock in %.0f ms (lease 10 s)" % (took * 1000))
    fail.equal(r.status, 200, "the next process takes the dead holder's lock")
    fail.check(took < 2.0, "at once: the dead pid is seen, no lease wait")
    proc2.send_signal(signal.SIGTERM)
    proc2.wait(timeout=20)


AUTH = {"Authorization": "Basic " + base64.b64encode(b"admin:s3cret").decode()}


def post_break(port, fields, cookie, auth=True):
    hdrs = {"Content-Type": "application/x-www-form-urlencoded"}
    if cookie:
        hdrs["Cookie"] = "kagi_csrf=" + cookie
    if auth:
        hdrs.update(AUTH)
    return harness.request(port, "POST", "/admin/locks/break", harness.form_body(fields), hdrs)


def check_break(fail, env, root):
    locks = os.path.join(root, "brk-locks")
    common = ["locks.backend=dir", "locks.dir=" + locks, "data.dir=" + env.path("brk-data")]
    # The doomed holder: host "gone", a lease of 1 s, SIGKILLed while holding brk/x.
    port = harness.free_port()
    doomed = env.start([env.demo, "--http", "127.0.0.1:%d" % port] + env.demo_settings(
        4, common + ["locks.dir_host_id=gone", "locks.dir_lease_ms=1000"]), "brk-gone.log")
    harness.wait_for_port(port, doomed, "the doomed holder")

    def doomed_hold():
        try:
            harness.request(port, "GET", "/_test/hold?name=brk/x&ms=60000", timeout=5)
        except OSError:
            pass
    threading.Thread(target=doomed_hold, daemon=True).start()
    harness.wait_until("brk/x held", lambda: glob.glob(
        os.path.join(locks, "dirlocks", "brk@x.d", "x.*")), timeout=10)
    doomed.kill()
    doomed.wait(timeout=10)

    htpasswd = env.path("admin.htpasswd")
    subprocess.run(["htpasswd", "-cbB", htpasswd, "admin", "s3cret"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    admin_port = harness.free_port()
    admin = env.start([env.demo, "--http", "127.0.0.1:%d" % admin_port] + env.demo_settings(
        4, common + ["locks.dir_host_id=admin", "admin.htpasswd=" + htpasswd,
                     # The break needs a lease expired by more than the clock-skew margin
                     # (30 s by default): a short one, so as not to wait for it.
                     "locks.dir_max_clock_skew_ms=200"]), "brk-admin.log")
    harness.wait_for_port(admin_port, admin, "the admin's process")
    # A live holder on the admin's host: its record must not be breakable.
    live = threading.Thread(target=lambda: harness.request(
        admin_port, "GET", "/_test/hold?name=brk/live&ms=4000", timeout=30))
    live.start()
    harness.wait_until("brk/live held", lambda: glob.glob(
        os.path.join(locks, "dirlocks", "brk@live.d", "x.*")), timeout=10)
    time.sleep(1.5)  # the killed holder's lease of 1 s has expired, by more than 200 ms

    page = harness.request(admin_port, "GET", "/admin/locks", headers=AUTH)
    token = page.cookies().get("kagi_csrf")
    forms = [dict(re.findall(r'name="(\w+)" value="([^"]*)"', f)) for f in re.findall(
        r'<form method="post" action="/admin/locks/break".*?</form>', page.text())]
    print("  admin page: %d Break button(s): %s" % (len(forms), [f.get("record") for f in forms]))
    fail.check(page.status == 200 and len(forms) == 1 and
               forms[0].get("record", "").startswith("brk@x.d/x.") and
               forms[0].get("_csrf") == token and bool(token),
               "the page has one Break button, for the expired record, with the CSRF token")
    if len(forms) == 1:
        form = forms[0]
        fail.equal(post_break(admin_port, form, token, auth=False).status, 401,
                   "break without the admin login")
        no_csrf = {k: v for k, v in form.items() if k != "_csrf"}
        fail.equal(post_break(admin_port, no_csrf, token).status, 403, "break without the CSRF field")
        fail.check(bool(glob.glob(os.path.join(locks, "dirlocks", "brk@x.d", "x.*"))),
                   "the refused posts left the record")
        r = post_break(admin_port, form, token)
        fail.check(r.status == 303 and r.header("Location") == "/admin/locks",
                   "break with both → 303 to /admin/locks (got %d)" % r.status)
        fail.check(not glob.glob(os.path.join(locks, "dirlocks", "brk@x.d", "x.*")),
                   "the stale record is gone")
        fail.equal(post_break(admin_port, form, token).status, 409, "breaking it again")
        got = harness.request(admin_port, "GET", "/_test/hold?name=brk/x&ms=10", timeout=10)
        fail.equal(got.status, 200, "the name is free")
    live_record = [os.path.relpath(p, os.path.join(locks, "dirlocks")) for p in glob.glob(
        os.path.join(locks, "dirlocks", "brk@live.d", "x.*"))]
    if live_record and token:
        fail.equal(post_break(admin_port, {"record": live_record[0], "_csrf": token}, token).status,
                   409, "breaking a live holder's record")
    live.join()


def test(env, fail):
    root = os.path.abspath(env.args.root) if env.args.root else env.path("shared")
    os.makedirs(root, exist_ok=True)
    print("  shared folder: %s" % root)
    check_posts(fail, env, root)
    check_signals(fail, env, root)
    check_break(fail, env, root)


def parse_extra(argv):
    """--root is this test's own; the rest is harness.parse_args()'s."""
    extra = {"root": None}
    rest = []
    i = 0
    while i < len(argv):
        if argv[i] == "--root" and i + 1 < len(argv):
            extra["root"] = argv[i + 1]
            i += 2
        else:
            rest.append(argv[i])
            i += 1
    return extra, rest


if __name__ == "__main__":
    extra, sys.argv[1:] = parse_extra(sys.argv[1:])
    real_parse = harness.parse_args

    def parse_args():
        args = real_parse()
        args.root = extra["root"]
        return args
    harness.parse_args = parse_args
    harness.main(test, "dir-site")
