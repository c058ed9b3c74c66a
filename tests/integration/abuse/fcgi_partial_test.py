"""Attack: peers on kagi's FastCGI socket that send 3 bytes of a record header and stall.

Before kagi read records itself, a worker that took such a connection blocked in read()
with no deadline: four of them froze a 4-thread process. Now the stalled connections wait
in epoll without a worker and are dropped limits.fcgi_read_timeout_ms after their first
byte. Meanwhile a normal client keeps GETting a page through a real nginx (the shipped
recipe) and raw FastCGI requests on fresh connections are answered.

Checks: the probe's p99 during the attack (printed against the 50 ms goal; asserted with a
generous bound, the machine is shared), every stalled peer closed by kagi after the deadline
and not long after it, kagi's RSS bounded, and kagi still serving afterwards.
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
STALLED = 32  # eight times the workers
READ_TIMEOUT_MS = 2000
# The machine is shared by parallel builds: the 50 ms goal is printed, this is asserted.
RSS_GROWTH_BOUND_KIB = 32 * 1024
CPU_BOUND_S = 0.5
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """utime + stime of pid, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(TICK)


def open_stalled(sock_path, count):
    """`count` connections that each sent the first 3 bytes of an FCGI_BEGIN_REQUEST header."""
    conns = []
    for _ in range(count):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(5)
        s.connect(sock_path)
        s.sendall(b"\x01\x01\x00")
        conns.append(s)
    return conns


def wait_all_closed(conns, started, timeout):
    """Waits until kagi closed every connection; returns {socket: seconds after `started`}."""
    closed = {}
    deadline = started + timeout
    while len(closed) < len(conns) and time.monotonic() < deadline:
        open_ones = [s for s in conns if s not in closed]
        ready, _, _ = select.select(open_ones, [], [], max(0.0, deadline - time.monotonic()))
        for s in ready:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                closed[s] = time.monotonic() - started
    return closed


def test(env, fail):
    kagi, sock, port = probe.serve_behind_nginx(
        env, fail, THREADS, ["limits.fcgi_read_timeout_ms=%d" % READ_TIMEOUT_MS])

    rss = probe.RssSampler(lambda: [kagi.pid], max_seconds=60).start()
    latency = probe.LatencyProbe(port, "/_test/echo", timeout=5.0, max_seconds=60).start()
    attack_started = time.monotonic()
    cpu_before = cpu_seconds(kagi.pid)
    stalled = open_stalled(sock, STALLED)
    print("attack: %d connections sent 3 bytes of a record header and stalled" % STALLED)

    # While they stall (and before their deadline), raw FastCGI on fresh connections.
    raw_ok = 0
    for i in range(THREADS * 2):
        t0 = time.monotonic()
        try:
            r = fcgi_client.Conn(sock, timeout=5).request("GET", "/_test/echo?raw=%d" % i)
            if r.status == 200 and time.monotonic() - t0 < 2.0:
                raw_ok += 1
        except OSError as e:
            print("  raw request %d: %s" % (i, e))
    within = time.monotonic() - attack_started
    fail.check(raw_ok == THREADS * 2 and within < READ_TIMEOUT_MS / 1000.0,
               "%d/%d raw FastCGI requests answered beside %d stalled peers, before their "
               "deadline (%.2fs)" % (raw_ok, THREADS * 2, STALLED, within))

    closed = wait_all_closed(stalled, attack_started, timeout=READ_TIMEOUT_MS / 1000.0 + 10.0)
    cpu_used = cpu_seconds(kagi.pid) - cpu_before
    stall_s = time.monotonic() - attack_started
    # A few more probe samples after the drop, so the probe spans the whole attack.
    harness.wait_until("40 probe samples", lambda: len(latency.latencies_ms) >= 40, 30)
    latency.stop()
    rss.stop()
    for s in stalled:
        s.close()

    times = sorted(closed.values())
    fail.equal(len(closed), STALLED, "every stalled peer was dropped by kagi")
    if times:
        print("stalled peers dropped after %.2f..%.2f s (deadline %.1f s, checked every 0.2 s)"
              % (times[0], times[-1], READ_TIMEOUT_MS / 1000.0))
        fail.check(times[0] >= READ_TIMEOUT_MS / 1000.0 * 0.9,
                   "no peer dropped before its deadline (first at %.2fs)" % times[0])
        fail.check(times[-1] <= READ_TIMEOUT_MS / 1000.0 + 3.0,
                   "all dropped soon after the deadline (last at %.2fs)" % times[-1])
    # Stalled peers wait in epoll: they must cost no CPU (a worker woken for them again and
    # again would spin). The probe's requests cost a little; the bound is generous.
    print("kagi's CPU time while the peers stalled: %.2f s in %.2f s" % (cpu_used, stall_s))
    fail.check(cpu_used <= CPU_BOUND_S, "stalled peers cost no CPU (%.2f s in %.1f s, bound %.1f s)"
               % (cpu_used, stall_s, CPU_BOUND_S))
    probe.check_normal_service(fail.check, latency, rss, "through nginx", RSS_GROWTH_BOUND_KIB)
    log = open(env.path("kagi.out"), errors="replace").read()
    fail.check("limits.fcgi_read_timeout_ms" in log, "the drop is logged with the key to tune")
    fail.equal(harness.request(port, "GET", "/_test/echo").status, 200, "served after the attack")
    fail.check(kagi.poll() is None, "kagi still running")


if __name__ == "__main__":
    harness.main(test, "abuse-fcgi-partial")
