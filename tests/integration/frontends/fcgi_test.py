"""kagi's FastCGI front end spoken to directly (no web server in between), to pin down what
nginx and Apache would mask: idle kept connections must not pin worker threads, unread
bodies are drained, a vanished peer costs no worker, SIGTERM finishes in-flight requests,
and systemd socket activation (LISTEN_FDS, fd 3) works."""

import json
import os
import signal
import socket
import stat
import subprocess
import time

import fcgi_client
import harness

THREADS = 4
BODY_LIMIT = 65536


def test(env, fail):
    sock = env.path("kagi.sock")
    proc = env.start([env.demo, "--fcgi", "unix:" + sock]
                     + env.demo_settings(THREADS, ["limits.max_body_bytes=%d" % BODY_LIMIT]),
                     "kagi-fcgi.out")
    harness.wait_for_unix(sock)
    fail.equal(stat.S_IMODE(os.stat(sock).st_mode), 0o660, "socket created with mode 0660")

    # Round trip: Status header, REQUEST_URI routing, CSRF with cookie + field.
    c = fcgi_client.Conn(sock)
    r = c.request("GET", "/_test/echo?x=1")
    fail.equal(r.status, 200, "GET /_test/echo")
    fail.check(r.header("Status") == "200 OK", "Status: 200 OK header (got %r)" % r.header("Status"))
    fail.check(b"arg x=1" in r.body and b"client 192.0.2.7" in r.body,
               "query arg and REMOTE_ADDR reach the app")
    cookie = [v for k, v in r.headers if k.lower() == "set-cookie" and v.startswith("kagi_csrf=")]
    token = cookie[0].split(";")[0].split("=", 1)[1] if cookie else "missing"
    fail.check(bool(cookie), "GET sets kagi_csrf")
    form = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": "kagi_csrf=" + token}
    r = c.request("POST", "/_test/echo", ("_csrf=%s&a=b" % token).encode(), form)
    fail.equal(r.status, 200, "POST with CSRF on the same kept connection")
    fail.check(b"field a=b" in r.body, "form field parsed")
    r = c.request("POST", "/_test/echo", b"a=b", form)
    fail.equal(r.status, 403, "POST without token")
    fail.equal(c.request("GET", "/nope").status, 404, "unknown path")
    fail.equal(c.request("PUT", "/_test/echo", b"", form).status, 405, "PUT on GET|POST route")

    # Unread body drained: a refused body leaves the kept connection usable.
    big = b"a=" + b"x" * (BODY_LIMIT + 10)
    r = c.request("POST", "/_test/echo", big, form)
    fail.equal(r.status, 413, "body over limits.max_body_bytes (CONTENT_LENGTH given)")
    fail.equal(c.request("GET", "/_test/echo").status, 200, "same connection works after 413")
    r = c.request("POST", "/_test/echo", big, form, content_length=False)
    fail.equal(r.status, 413, "body over the limit without CONTENT_LENGTH")
    fail.equal(c.request("GET", "/_test/echo").status, 200, "same connection works after that 413")

    # The libfcgi trap: 32 idle kept connections, 4 threads; new requests must not wait.
    kept = []
    for _ in range(32):
        k = fcgi_client.Conn(sock)
        fail_status = k.request("GET", "/_test/echo").status
        if fail_status != 200:
            fail.check(False, "kept connection request answered 200")
        kept.append(k)
    # Pinned workers would never serve it (a 10 s timeout); the bound is a sanity bound for a
    # loaded machine, the time is printed.
    t0 = time.monotonic()
    fresh = fcgi_client.Conn(sock, timeout=10)
    r = fresh.request("GET", "/_test/echo")
    first = time.monotonic() - t0
    fail.check(r.status == 200 and first < 5.0,
               "with 32 idle kept connections a new connection is served (%.3fs)" % first)
    # 8 parallel sleeps on new connections: 2 rounds of 4 threads, not a timeout.
    t0 = time.monotonic()
    results = harness.parallel([lambda: fcgi_client.Conn(sock, timeout=10).request(
        "GET", "/_test/sleep?ms=200") for _ in range(8)])
    took = time.monotonic() - t0
    ok = all(isinstance(x, fcgi_client.Response) and x.status == 200 for x in results)
    fail.check(ok and took < 8.0, "8 parallel requests beside 32 idle connections (%.2fs)" % took)
    ok = all(k.request("GET", "/_test/echo").status == 200 for k in kept)
    fail.check(ok, "all 32 kept connections still serve requests")
    for k in kept:
        k.close()

    # Parked requests (chat long-polls) hold no worker: twice as many as there are threads
    # are parked (the chat's own counter says so), a new request is still served, a message
    # said then wakes every one of them, and each parked connection is reusable afterwards.
    def chat_stats():
        conn = fcgi_client.Conn(sock, timeout=10)
        try:
            return json.loads(conn.request("GET", "/chat/stats.json").body)
        finally:
            conn.close()

    r = fcgi_client.Conn(sock).request("GET", "/chat/lobby/messages?since=0&wait=0")
    last = json.loads(r.body)["last"]
    before = chat_stats()
    parked = []
    for _ in range(THREADS * 2):
        p = fcgi_client.Conn(sock, timeout=30)
        p.send_request("GET", "/chat/lobby/messages?since=%d&wait=20" % last)
        parked.append(p)
    try:
        harness.wait_until("%d long-polls parked" % len(parked),
                           lambda: chat_stats()["parked"] == len(parked), 15)
        fail.check(True, "%d long-polls parked (the chat's parked counter)" % len(parked))
    except AssertionError as e:
        fail.check(False, "%s; stats %r" % (e, chat_stats()))
    # Were they holding workers, this would wait for their 20 s: the bound is a sanity one.
    t0 = time.monotonic()
    r = fcgi_client.Conn(sock, timeout=10).request("GET", "/_test/echo")
    took = time.monotonic() - t0
    fail.check(r.status == 200 and took < 5.0,
               "served beside %d parked long-polls (%.3fs)" % (len(parked), took))
    say = fcgi_client.Conn(sock).request(
        "POST", "/chat/lobby/say", ("_csrf=%s&name=fcgi&text=wake+up" % token).encode(),
        dict(form, Accept="application/json"))
    fail.equal(say.status, 200, "a message said to the parked long-polls' room")
    answers = [p.read_response() for p in parked]
    texts = [[m["text"] for m in json.loads(a.body)["messages"]] if a.status == 200 else a.status
             for a in answers]
    fail.equal(texts, [["wake up"]] * len(parked), "every parked long-poll got the message")
    after = chat_stats()
    fail.equal((after["parked_total"] - before["parked_total"],
                after["delivered"] - before["delivered"], after["parked"]),
               (len(parked), len(parked), 0), "(parked, woken by delivery, still parked)")
    fail.check(all(p.request("GET", "/_test/echo").status == 200 for p in parked),
               "parked connections reused after their answer")
    for p in parked:
        p.close()

    # A peer that vanishes mid-response, more times than there are threads.
    for _ in range(THREADS * 2):
        a = fcgi_client.Conn(sock)
        a.send_request("GET", "/_test/big?bytes=20000000")
        a.sock.recv(4096)
        a.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
        a.close()
    t0 = time.monotonic()
    r = fcgi_client.Conn(sock, timeout=10).request("GET", "/_test/echo")
    took = time.monotonic() - t0
    fail.check(r.status == 200 and took < 5.0,
               "served after %d aborted responses (%.3fs)" % (THREADS * 2, took))
    fail.check(proc.poll() is None, "kagi still running after aborts")

    # SIGTERM while requests are in flight: all of them finish; exit 0; socket removed. Each
    # holds a lock of its own, so the registry tells when all are inside their handler.
    idle = fcgi_client.Conn(sock)
    idle.request("GET", "/_test/echo")
    names = ["sigterm/%d" % i for i in range(THREADS)]
    calls = [lambda n=n: fcgi_client.Conn(sock, timeout=15).request(
        "GET", "/_test/hold?ms=1500&name=" + n) for n in names]
    import threading
    out = {}
    runner = threading.Thread(target=lambda: out.setdefault("r", harness.parallel(calls)))
    runner.start()
    harness.wait_all_held(env.args.locks, env.path("var", "locks"), names)
    proc.send_signal(signal.SIGTERM)
    runner.join(30)
    results = out.get("r", [])
    good = [x for x in results if isinstance(x, fcgi_client.Response) and x.status == 200
            and b"held sigterm/" in x.body]
    fail.equal(len(good), len(names), "in-flight requests answered during SIGTERM")
    try:
        code = proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        code = "still running"
    fail.equal(code, 0, "exit status after SIGTERM")
    fail.check(not os.path.exists(sock), "socket file removed on exit")
    idle.close()

    # systemd socket activation: listening socket on fd 3, LISTEN_FDS=1, LISTEN_PID=self.
    sd_path = env.path("sd.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(sd_path)
    listener.listen(16)
    lfd = listener.fileno()

    def as_systemd_child():
        os.dup2(lfd, 3)
        os.environ["LISTEN_FDS"] = "1"
        os.environ["LISTEN_PID"] = str(os.getpid())

    log = open(env.path("kagi-systemd.out"), "ab")
    sd = subprocess.Popen([env.demo] + env.demo_settings(THREADS), stdin=subprocess.DEVNULL,
                          stdout=log, stderr=subprocess.STDOUT, close_fds=False,
                          preexec_fn=as_systemd_child, cwd=env.dir)
    env.procs.append(sd)
    listener.close()
    try:
        r = fcgi_client.Conn(sd_path, timeout=10).request("GET", "/_test/echo?sd=1")
        fail.check(r.status == 200 and b"arg sd=1" in r.body, "served on systemd's fd 3")
    except OSError as e:
        fail.check(False, "served on systemd's fd 3 (%s)" % e)
    sd.send_signal(signal.SIGTERM)
    try:
        fail.equal(sd.wait(timeout=15), 0, "socket-activated kagi exits 0 on SIGTERM")
    except subprocess.TimeoutExpired:
        fail.check(False, "socket-activated kagi exits on SIGTERM")


if __name__ == "__main__":
    harness.main(test, "fcgi")
