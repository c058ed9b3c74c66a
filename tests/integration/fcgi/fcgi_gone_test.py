"""A parked request (a chat long-poll) whose client goes away must be freed promptly, not
held until its wait runs out: through a real nginx (the client disconnects, nginx closes
its FastCGI connection), and spoken directly (the web server sends FCGI_ABORT_REQUEST and
keeps the connection open). Seen in the chat's `parked` counter (/chat/stats.json)."""

import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "frontends"))

import fcgi_client  # noqa: E402
import harness  # noqa: E402

THREADS = 4
CLIENTS = 6
WAIT_S = 30  # the long-poll's own wait: far beyond what the checks below allow
# The chat frees gone clients on its sweep (every second); nginx notices at once.
FREED_WITHIN_S = 5.0


def chat_stats(sock):
    r = fcgi_client.Conn(sock, timeout=5).request("GET", "/chat/stats.json")
    return json.loads(r.body)


def parked(sock):
    return chat_stats(sock)["parked"]


def test(env, fail):
    sock = env.path("kagi.sock")
    kagi = env.start([env.demo, "--fcgi", "unix:" + sock] + env.demo_settings(THREADS), "kagi.out")
    harness.wait_for_unix(sock)
    port = harness.free_port()
    env.nginx(port, sock)

    # Through nginx: clients park, then hang up.
    clients = []
    for _ in range(CLIENTS):
        c = socket.create_connection(("127.0.0.1", port), timeout=10)
        c.sendall(("GET /chat/lobby/messages?since=0&wait=%d HTTP/1.1\r\nHost: localhost\r\n\r\n"
                   % WAIT_S).encode())
        clients.append(c)
    harness.wait_until("%d parked long-polls" % CLIENTS, lambda: parked(sock) == CLIENTS, 10)
    fail.check(True, "%d long-polls parked through nginx" % CLIENTS)
    t0 = time.monotonic()
    for c in clients:
        c.close()
    try:
        harness.wait_until("parked back to 0", lambda: parked(sock) == 0, FREED_WITHIN_S)
        fail.check(True, "clients that hung up were freed in %.2f s (their wait: %d s)"
                   % (time.monotonic() - t0, WAIT_S))
    except AssertionError as e:
        fail.check(False, "clients that hung up behind nginx were freed: %s (parked %d)"
                   % (e, parked(sock)))

    # Directly: FCGI_ABORT_REQUEST on a connection the web server keeps open.
    conn = fcgi_client.Conn(sock, timeout=10)
    conn.send_request("GET", "/chat/lobby/messages?since=0&wait=%d" % WAIT_S, request_id=1)
    harness.wait_until("the long-poll parked", lambda: parked(sock) == 1, 10)
    gone_before = chat_stats(sock)["gone"]
    t0 = time.monotonic()
    conn.sock.sendall(fcgi_client._record(fcgi_client.ABORT_REQUEST, 1))
    try:
        harness.wait_until("parked back to 0", lambda: parked(sock) == 0, FREED_WITHIN_S)
        fail.check(True, "FCGI_ABORT_REQUEST freed the parked request in %.2f s"
                   % (time.monotonic() - t0))
    except AssertionError as e:
        fail.check(False, "FCGI_ABORT_REQUEST freed the parked request: %s" % e)
    fail.equal(chat_stats(sock)["gone"], gone_before + 1, "counted as gone, not delivered")
    # The request still ends properly: its FCGI_END_REQUEST, or the connection closed by
    # kagi (a timeout here is a request left hanging).
    conn.sock.settimeout(FREED_WITHIN_S)
    try:
        r = conn.read_response()
        fail.check(r.status == 200, "the aborted request was ended (status %d)" % r.status)
    except ConnectionError as e:
        fail.check(True, "the aborted request's connection was closed (%s)" % type(e).__name__)
    except OSError as e:
        fail.check(False, "the aborted request was ended or closed (%s)" % type(e).__name__)
    conn.close()

    fail.equal(fcgi_client.Conn(sock, timeout=5).request("GET", "/_test/echo").status, 200,
               "served afterwards")
    fail.check(kagi.poll() is None, "kagi still running")


if __name__ == "__main__":
    harness.main(test, "fcgi-gone")
