"""Scale: 20,000 connections on loopback, 1,000 holding a key each and 19,000 waiting on those
1,000 keys, on one kagi-lockd process (one thread). Prints the RSS per waiting connection, and
checks that after every connection closed the RSS is back within 10% of where it started; the
same for a burst of 900 connections on a fresh server, fewer closes than the server's trim batch.

"Where it started" is measured after a first small round (100 connections on 10 keys,
opened and closed, and a STATUS), so that the buffers every server fills on its first
requests are in both numbers; the RSS right after start is printed beside it.

    python3 scale_test.py --lockd BUILD/apps/lockd/kagi-lockd
"""

import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockd_harness import Checks, Lockd, connect, parse_args, read_line, status  # noqa: E402

WANTED, KEYS = 20_000, 1_000
SMALL_BURST = 900
CLIENT_PROCESSES = 2  # each opens its share: a process's descriptors are bounded too


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def client(port, indices, rd, wr):
    """Opens one waiting connection per index (LOCK scale/<index % KEYS>), reports, holds them
    until told to close, closes them all, reports again."""
    socks = []
    for i in indices:
        s = connect(port, timeout=60)
        s.sendall(b"LOCK scale/%d\n" % (i % KEYS))
        socks.append(s)
    os.write(wr, b"0\n")
    os.read(rd, 1)
    for s in socks:
        s.close()
    os.write(wr, b"c")
    os._exit(0)


def one_round(server, checks, label, base_fds, connections):
    started = time.monotonic()
    # The holders first, here: each key granted before anyone queues for it.
    holders = []
    bad = 0
    for i in range(KEYS):
        s = connect(server.port, timeout=60)
        s.sendall(b"LOCK scale/%d\n" % i)
        bad += read_line(s) != b"ok"
        holders.append(s)
    checks.check(bad == 0, "%s: the %d holders are granted" % (label, KEYS))
    kids = []
    share = (connections - KEYS + CLIENT_PROCESSES - 1) // CLIENT_PROCESSES
    for k in range(CLIENT_PROCESSES):
        to_kid, from_parent = os.pipe()
        to_parent, from_kid = os.pipe()
        pid = os.fork()
        if pid == 0:
            client(server.port, range(KEYS + k * share, min(connections, KEYS + (k + 1) * share)),
                   to_kid, from_kid)
        kids.append((pid, from_parent, to_parent))
    for _, _, r in kids:
        os.read(r, 32)
    deadline = time.monotonic() + 60
    waiters = 0
    while time.monotonic() < deadline:
        lines = status(server.port)
        waiters = sum(line.count(b'"waiting_ms"') for line in lines)
        if len(lines) == KEYS and waiters == connections - KEYS:
            break
        time.sleep(0.05)
    checks.check(waiters == connections - KEYS, "%s: %d connections: %d holding, %d waiting "
                 "(opened in %.1f s)" % (label, connections, KEYS, waiters,
                                          time.monotonic() - started))
    rss = server.rss_kib()
    start = time.monotonic()
    for s in holders:
        s.close()
    for _, w, _ in kids:
        os.write(w, b"x")
    for pid, _, r in kids:
        os.read(r, 1)
        os.waitpid(pid, 0)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and open_fds(server.proc.pid) > base_fds:
        time.sleep(0.05)
    checks.check(status(server.port) == [], "%s: every key is gone once all closed (%.1f s)" %
                 (label, time.monotonic() - start))
    time.sleep(1.5)  # the sweep hands freed memory back (malloc_trim) within a second
    return rss


def warm_up(server, base_fds):
    """A first small round (100 connections on 10 keys, opened and closed, and a STATUS); then
    the RSS the checks start from."""
    warm = []
    for i in range(100):
        s = connect(server.port)
        s.sendall(b"LOCK scale/warm/%d\n" % (i % 10))
        warm.append(s)
    status(server.port)
    for s in warm:
        s.close()
    while open_fds(server.proc.pid) > base_fds:
        time.sleep(0.05)
    time.sleep(1.5)
    return server.rss_kib()


def small_burst(args, checks, limit):
    """900 connections holding a key each, then closed: with the warm-up's 100, fewer closes
    than the server's trim batch (1,024), so only a trim once the closes stop gives their
    memory back."""
    with Lockd(args.lockd, [], fd_limit=limit) as server:
        time.sleep(0.2)
        base_fds = open_fds(server.proc.pid)
        start = warm_up(server, base_fds)
        burst = []
        for i in range(SMALL_BURST):
            s = connect(server.port, timeout=60)
            s.sendall(b"LOCK scale/burst/%d\n" % i)
            burst.append(s)
        granted = sum(read_line(s) == b"ok" for s in burst)
        peak = server.rss_kib()
        for s in burst:
            s.close()
        while open_fds(server.proc.pid) > base_fds:
            time.sleep(0.05)
        time.sleep(1.5)  # a sweep or two after the last close
        after = server.rss_kib()
        checks.check(granted == SMALL_BURST, "small burst: the %d holders are granted" % granted)
        print("     RSS: start %d KiB; with %d connections %d KiB; all closed %d KiB" %
              (start, SMALL_BURST, peak, after))
        checks.check(abs(after - start) <= start * 0.10,
                     "small burst: RSS after all closed (%d KiB) is within 10%% of the start "
                     "(%d KiB)" % (after, start))


def main():
    args = parse_args()
    # The server needs a descriptor per connection plus a few of its own. Raise the limit as
    # far as this machine lets a process (without CAP_SYS_RESOURCE the hard limit is the cap).
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    limit = WANTED + 64
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    except (ValueError, OSError):
        limit = hard
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    connections = min(WANTED, limit - 64)
    if connections < WANTED:
        print("     this machine caps a process at %d descriptors (hard limit; raising it needs "
              "CAP_SYS_RESOURCE): %d connections instead of %d" % (hard, connections, WANTED))
    checks = Checks()
    with Lockd(args.lockd, ["--set", "lockd.max_connections_per_address=%d" % WANTED,
                            "--set", "lockd.max_connections=%d" % WANTED],
               fd_limit=limit) as server:
        time.sleep(0.2)
        cold = server.rss_kib()
        base_fds = open_fds(server.proc.pid)
        start = warm_up(server, base_fds)
        peak = one_round(server, checks, "20,000 round", base_fds, connections)
        after = server.rss_kib()
        per_conn = (peak - start) * 1024 / connections
        print("     RSS: right after start %d KiB; start (after 100 connections) %d KiB; with %d "
              "connections %d KiB (%.0f bytes per connection); all closed %d KiB" %
              (cold, start, connections, peak, per_conn, after))
        checks.check(abs(after - start) <= start * 0.10,
                     "RSS after all closed (%d KiB) is within 10%% of the start (%d KiB)" %
                     (after, start))
        checks.check(server.alive(), "the server is alive")
    small_burst(args, checks, limit)
    checks.finish()


if __name__ == "__main__":
    main()
