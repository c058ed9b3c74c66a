"""Attack: peers that ask for a big response and never read it.

Behind nginx this is a client that stops reading under a `fastcgi_buffering off` location
(the chat's): nginx then stops reading from kagi too. A kagi worker that writes a response
with blocking writes waits for the reader; twice as many such peers as workers stopped the
process. Now what the web server does not take at once is written from the epoll set as it
takes it, and a peer that takes nothing for limits.fcgi_read_timeout_ms is dropped.

kagi on a FastCGI socket, 8 raw FastCGI peers (4 workers) each ask for /_test/big (4 MB)
and read nothing. Meanwhile a normal client GETs a page through the shipped nginx. Checks:
the probe's p99 (printed against the 50 ms goal; a generous bound asserted), every stalled
reader dropped after the deadline, kagi's RSS bounded (the unsent responses are held: 8 x 4
MB at most), kagi still serving.
"""

import os
import select
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "frontends"))
sys.path.insert(0, HERE)

import fcgi_client  # noqa: E402
import harness  # noqa: E402
import probe  # noqa: E402

THREADS = 4
READERS = 8
# Far more than a socket buffers (about 200 KB), so every reader stalls its response. At 20 MB
# the 4 workers spent half a second building the attack's 8 answers (two copies each), which
# put a normal request's p99 over its bound on a quiet machine now and then: what that
# measured was memory bandwidth, not the stall.
BIG = 4 * 1000 * 1000
READ_TIMEOUT_MS = 2000
# The held responses (READERS x BIG) and their encoding; far below what a leak per retry
# would reach, and the bound the test names.
RSS_GROWTH_BOUND_KIB = (READERS * 2 * BIG) // 1024 + 64 * 1024


def test(env, fail):
    kagi, sock, port = probe.serve_behind_nginx(
        env, fail, THREADS, ["limits.fcgi_read_timeout_ms=%d" % READ_TIMEOUT_MS])

    rss = probe.RssSampler(lambda: [kagi.pid], max_seconds=60).start()
    latency = probe.LatencyProbe(port, "/_test/echo", timeout=5.0, max_seconds=60).start()
    started = time.monotonic()
    readers = []
    for _ in range(READERS):
        c = fcgi_client.Conn(sock, timeout=10)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.send_request("GET", "/_test/big?bytes=%d" % BIG)
        readers.append(c.sock)
    print("attack: %d peers asked for %d MB each and read nothing" % (READERS, BIG // 1000000))

    t0 = time.monotonic()
    try:
        status = fcgi_client.Conn(sock, timeout=5).request("GET", "/_test/echo?during=1").status
    except OSError as e:
        status = type(e).__name__
    took = time.monotonic() - t0
    # Answered before the stalled readers' deadline: so not because kagi dropped them first.
    fail.check(status == 200 and took < READ_TIMEOUT_MS / 1000.0,
               "a raw FastCGI request beside %d stalled readers (%s after %.3f s)"
               % (READERS, status, took))

    # Wait for kagi to give up on them. Without reading (that would be taking the
    # response): kagi closing its end shows as POLLHUP / POLLRDHUP on ours.
    closed = {}
    watch = select.poll()
    by_fd = {}
    for s in readers:
        watch.register(s, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
        by_fd[s.fileno()] = s
    deadline = started + READ_TIMEOUT_MS / 1000.0 + 15.0
    while len(closed) < len(readers) and time.monotonic() < deadline:
        for fd, _ in watch.poll(100):
            if by_fd[fd] not in closed:
                closed[by_fd[fd]] = time.monotonic() - started
                watch.unregister(fd)
    harness.wait_until("40 probe samples", lambda: len(latency.latencies_ms) >= 40, 30)
    latency.stop()
    rss.stop()
    for s in readers:
        s.close()

    times = sorted(closed.values())
    fail.equal(len(closed), READERS, "every reader that took nothing was dropped")
    if times:
        print("stalled readers dropped after %.2f..%.2f s (limits.fcgi_read_timeout_ms = %d)"
              % (times[0], times[-1], READ_TIMEOUT_MS))
        fail.check(times[0] >= READ_TIMEOUT_MS / 1000.0 * 0.9,
                   "none dropped before the deadline (first at %.2f s)" % times[0])
    probe.check_normal_service(fail.check, latency, rss, "through nginx", RSS_GROWTH_BOUND_KIB)
    log = open(env.path("kagi.out"), errors="replace").read()
    fail.check("took nothing of a response" in log, "the drop is logged with the key to tune")
    fail.equal(harness.request(port, "GET", "/_test/echo").status, 200, "served after the attack")
    fail.check(kagi.poll() is None, "kagi still running")


if __name__ == "__main__":
    harness.main(test, "abuse-slow-reader")
