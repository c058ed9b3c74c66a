"""The shipped nginx recipe's per-client limits (conf/nginx/kagi.conf): one address sending
requests faster than limit_req allows gets 429 after its burst, one address holding more
connections than limit_conn allows gets 429, and requests from the host itself (127.0.0.1:
health checks, benchmarks) are not limited. The "other client" is 127.0.0.2, a loopback
address nginx sees as a different $binary_remote_addr."""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "frontends"))

import harness  # noqa: E402

THREADS = 4
BURST = 60  # limit_req burst in the recipe
CONN_LIMIT = 100  # limit_conn in the recipe
RATE = 30  # requests per second limit_req allows


def get(port, path, source):
    """One GET from `source`; returns the status."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    try:
        s.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
                   % path).encode())
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        return int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else None
    finally:
        s.close()


def test(env, fail):
    sock = env.path("kagi.sock")
    # The chat's own caps answer long-polls beyond 16 per address at once (429): lift them, so
    # the polls below stay parked and it is nginx's limit_conn that is tested.
    chat_caps = ["chat.max_waiters=1000", "chat.max_waiters_per_client=1000"]
    env.start([env.demo, "--fcgi", "unix:" + sock] + env.demo_settings(THREADS, chat_caps),
              "kagi.out")
    harness.wait_for_unix(sock)
    port = harness.free_port()
    env.nginx(port, sock)

    # limit_req: as fast as one client can go, twice the burst.
    statuses = [get(port, "/_test/echo", "127.0.0.2") for _ in range(BURST * 2)]
    ok, limited = statuses.count(200), statuses.count(429)
    print("127.0.0.2, %d requests back to back: %d x 200, %d x 429" % (len(statuses), ok, limited))
    fail.check(ok >= BURST, "the burst is served (%d >= %d)" % (ok, BURST))
    fail.check(limited >= 1 and ok + limited == len(statuses),
               "beyond it: 429 (%d), nothing else" % limited)
    local = [get(port, "/_test/echo", "127.0.0.1") for _ in range(BURST * 2)]
    fail.equal(local.count(200), len(local), "requests from the host itself are not limited")

    # limit_conn: long-polls from one address, paced under the request rate. A fresh address,
    # so no request-rate budget is left over from the part above.
    held = []
    try:
        for _ in range(CONN_LIMIT):
            s = socket.create_connection(("127.0.0.1", port), timeout=10,
                                         source_address=("127.0.0.3", 0))
            s.sendall(b"GET /chat/lobby/messages?since=0&wait=20 HTTP/1.1\r\nHost: x\r\n\r\n")
            held.append(s)
            time.sleep(1.0 / (RATE - 5))  # the attack's pace: under limit_req
        status = get(port, "/_test/echo", "127.0.0.3")
        fail.equal(status, 429, "connection %d from one address" % (CONN_LIMIT + 1))
        log = open(env.path("nginx", "logs", "error.log"), errors="replace").read()
        fail.check('limiting connections by zone "kagi_conn"' in log,
                   "that 429 came from limit_conn (nginx's error log)")
        fail.equal(get(port, "/_test/echo", "127.0.0.1"), 200,
                   "meanwhile another client is served")
    finally:
        for s in held:
            s.close()


if __name__ == "__main__":
    harness.main(test, "nginx-limits")
