"""kagi's embedded HTTP front end (Boost.Beast), spoken to directly: the same round trip as
through FastCGI, keep-alive, 413, 431, client abort, SIGTERM during load."""

import http.client
import signal
import socket
import subprocess
import threading
import time

import harness

THREADS = 4
BODY_LIMIT = 65536


def test(env, fail):
    port = harness.free_port()
    proc = env.start([env.demo, "--http", "127.0.0.1:%d" % port]
                     + env.demo_settings(THREADS, ["limits.max_body_bytes=%d" % BODY_LIMIT,
                                                   "limits.max_header_bytes=8192"]),
                     "kagi-http.out")
    harness.wait_for_port(port, proc, "kagi-demo --http")

    token = harness.round_trip(fail, port, "http")
    form = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": "kagi_csrf=" + token}

    # Keep-alive: many requests on one connection, the server never closes it.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    statuses = [harness.request(port, "GET", "/_test/echo?i=%d" % i, conn=conn).status
                for i in range(20)]
    fail.equal(statuses, [200] * 20, "20 requests on one kept-alive connection")
    r = harness.request(port, "POST", "/_test/echo", harness.form_body({"_csrf": token, "a": "1"}),
                        form, conn=conn)
    fail.equal(r.status, 200, "POST on the same connection")
    r = harness.request(port, "HEAD", "/_test/big?bytes=1000", conn=conn)
    fail.check(r.status == 200 and r.body == b"" and r.header("Content-Length") in (None, "1000"),
               "HEAD: no body; Content-Length absent or that of the GET body (got %r)"
               % r.header("Content-Length"))
    fail.equal(harness.request(port, "GET", "/_test/echo", conn=conn).status, 200,
               "connection still usable after HEAD")
    conn.close()

    # 413: refused from Content-Length before the body is read.
    body = harness.form_body({"_csrf": token, "text": "x" * (BODY_LIMIT + 100)})
    r = harness.request(port, "POST", "/_test/echo", body, form)
    fail.equal(r.status, 413, "body over limits.max_body_bytes")
    # Chunked, so only the reading notices.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/_test/echo", body=iter([body[:40000], body[40000:]]),
                 headers=form, encode_chunked=True)
    fail.equal(conn.getresponse().status, 413, "chunked body over the limit")
    conn.close()

    # 431: a header block over limits.max_header_bytes.
    r = harness.request(port, "GET", "/_test/echo", headers={"X-Big": "y" * 10000})
    fail.equal(r.status, 431, "headers over limits.max_header_bytes")
    # Not HTTP at all.
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"BLAH\x01 / HTTP/9\r\n\r\n")
    fail.check(s.recv(100).startswith(b"HTTP/1.1 400"), "garbage request gets 400")
    s.close()

    # Parked requests (chat long-polls) hold no io thread.
    parked = []
    for _ in range(THREADS * 2):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/chat/lobby/messages?since=0&wait=2")
        parked.append(c)
    time.sleep(0.2)  # let them park; what is checked is that others are not held up
    t0 = time.monotonic()
    r = harness.request(port, "GET", "/_test/echo", timeout=5)
    took = time.monotonic() - t0
    fail.check(r.status == 200 and took < 1.0,
               "served at once beside %d parked long-polls (%.3fs)" % (len(parked), took))
    ok = 0
    for c in parked:
        resp = c.getresponse()
        resp.read()
        ok += resp.status == 200 and harness.request(port, "GET", "/_test/echo", conn=c).status == 200
        c.close()
    fail.equal(ok, len(parked), "parked long-polls answered, their connections reused")

    # Client aborts mid-response, more often than there are threads.
    for _ in range(THREADS * 2):
        harness.abort_mid_response(port, "/_test/big?bytes=20000000")
    t0 = time.monotonic()
    r = harness.request(port, "GET", "/_test/echo", timeout=5)
    fail.check(r.status == 200 and time.monotonic() - t0 < 3.0,
               "served after %d aborted responses" % (THREADS * 2))

    # SIGTERM during load: in-flight requests finish, then exit 0.
    idle = socket.create_connection(("127.0.0.1", port))  # an idle keep-alive connection
    out = {}
    calls = [lambda: harness.request(port, "GET", "/_test/sleep?ms=1000", timeout=15)
             for _ in range(6)]
    runner = threading.Thread(target=lambda: out.setdefault("r", harness.parallel(calls)))
    runner.start()
    time.sleep(0.5)  # the requests reach kagi; what is checked is their outcome
    proc.send_signal(signal.SIGTERM)
    runner.join(30)
    good = sum(1 for x in out.get("r", []) if isinstance(x, harness.Reply) and x.status == 200)
    fail.equal(good, 6, "in-flight requests answered during SIGTERM")
    try:
        code = proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        code = "still running"
    fail.equal(code, 0, "exit status after SIGTERM (idle connection closed, not waited for)")
    idle.close()


if __name__ == "__main__":
    harness.main(test, "http")
