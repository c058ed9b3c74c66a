"""kagi's embedded HTTP front end (Boost.Beast), spoken to directly: the same round trip as
through FastCGI, keep-alive, 413, 431, client abort, SIGTERM during load."""

import http.client
import json
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

    # Parked requests (chat long-polls) hold no io thread: twice as many as there are threads
    # are parked (the chat's own counter says so), a new request is still served, a message
    # said then wakes every one of them, and their connections are reused afterwards.
    def chat_stats():
        return json.loads(harness.request(port, "GET", "/chat/stats.json").body)

    last = json.loads(harness.request(port, "GET", "/chat/lobby/messages?since=0&wait=0").body)["last"]
    before = chat_stats()
    parked = []
    for _ in range(THREADS * 2):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("GET", "/chat/lobby/messages?since=%d&wait=20" % last)
        parked.append(c)
    try:
        harness.wait_until("%d long-polls parked" % len(parked),
                           lambda: chat_stats()["parked"] == len(parked), 15)
        fail.check(True, "%d long-polls parked (the chat's parked counter)" % len(parked))
    except AssertionError as e:
        fail.check(False, "%s; stats %r" % (e, chat_stats()))
    # Were they holding io threads, this would wait for their 20 s: a sanity bound only.
    t0 = time.monotonic()
    r = harness.request(port, "GET", "/_test/echo", timeout=10)
    took = time.monotonic() - t0
    fail.check(r.status == 200 and took < 5.0,
               "served beside %d parked long-polls (%.3fs)" % (len(parked), took))
    r = harness.request(port, "POST", "/chat/lobby/say",
                        harness.form_body({"_csrf": token, "name": "http", "text": "wake up"}),
                        dict(form, Accept="application/json"))
    fail.equal(r.status, 200, "a message said to the parked long-polls' room")
    texts = []
    reused = 0
    for c in parked:
        resp = c.getresponse()
        body = resp.read()
        texts.append([m["text"] for m in json.loads(body)["messages"]]
                     if resp.status == 200 else resp.status)
        reused += harness.request(port, "GET", "/_test/echo", conn=c).status == 200
        c.close()
    fail.equal(texts, [["wake up"]] * len(parked), "every parked long-poll got the message")
    fail.equal(reused, len(parked), "parked long-polls' connections reused")
    after = chat_stats()
    fail.equal((after["parked_total"] - before["parked_total"],
                after["delivered"] - before["delivered"], after["parked"]),
               (len(parked), len(parked), 0), "(parked, woken by delivery, still parked)")

    # Client aborts mid-response, more often than there are threads.
    for _ in range(THREADS * 2):
        harness.abort_mid_response(port, "/_test/big?bytes=20000000")
    t0 = time.monotonic()
    r = harness.request(port, "GET", "/_test/echo", timeout=10)
    took = time.monotonic() - t0
    fail.check(r.status == 200 and took < 5.0,
               "served after %d aborted responses (%.3fs)" % (THREADS * 2, took))

    # SIGTERM during load: in-flight requests finish, then exit 0. Each holds a lock of its
    # own, so the registry tells when all are inside their handler.
    idle = socket.create_connection(("127.0.0.1", port))  # an idle keep-alive connection
    out = {}
    names = ["sigterm/%d" % i for i in range(THREADS)]
    calls = [lambda n=n: harness.request(port, "GET", "/_test/hold?ms=1500&name=" + n, timeout=15)
             for n in names]
    runner = threading.Thread(target=lambda: out.setdefault("r", harness.parallel(calls)))
    runner.start()
    harness.wait_all_held(env.args.locks, env.path("var", "locks"), names)
    proc.send_signal(signal.SIGTERM)
    runner.join(30)
    good = sum(1 for x in out.get("r", []) if isinstance(x, harness.Reply) and x.status == 200
               and b"held sigterm/" in x.body)
    fail.equal(good, len(names), "in-flight requests answered during SIGTERM")
    try:
        code = proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        code = "still running"
    fail.equal(code, 0, "exit status after SIGTERM (idle connection closed, not waited for)")
    idle.close()

if __name__ == "__main__":
    harness.main(test, "http")
