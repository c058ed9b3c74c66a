"""Compatibility with the classic clients: kagi-lockd driven by a client that speaks exactly
the seed's bytes (seed_client.py) and by the project's PHP client (clients/php/KagiLock.php,
through hold.php), each as separate processes: one holds, another is granted only after the
first closes; a holder killed with SIGKILL hands the lock to the waiter within 50 ms (printed).
The classic one-liner `printf 'LOCK k\n' | nc -N host port` (the line and the half-close back
to back, often in one segment) is granted, then released, 200 times over (and through nc
itself where it is installed).

    python3 compat_test.py --lockd BUILD/apps/lockd/kagi-lockd --source SRC [--php php]
"""

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockd_harness import Checks, Lockd, connect, parse_args, read_line, status  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def spawn(kind, args, port, key):
    if kind == "seed":
        cmd = [sys.executable, os.path.join(HERE, "seed_client.py"), str(port), key]
    else:
        cmd = [args.php, os.path.join(HERE, "hold.php"),
               os.path.join(args.source, "clients", "php", "KagiLock.php"),
               "127.0.0.1:%d" % port, key]
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def line_within(proc, seconds):
    """The process's next stdout line, or None if none comes within `seconds`."""
    ready, _, _ = select.select([proc.stdout], [], [], seconds)
    return proc.stdout.readline().strip() if ready else None


def waiting(port, key, n):
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for line in status(port):
            if line.startswith(b'{"key":"%s"' % key.encode()) and line.count(b'"waiting_ms"') == n:
                return True
        time.sleep(0.005)
    return False


def run(kind_holder, kind_waiter, args, server, checks):
    key = "compat/%s-%s" % (kind_holder, kind_waiter)
    what = "%s holder, %s waiter" % (kind_holder, kind_waiter)
    holder = spawn(kind_holder, args, server.port, key)
    first = line_within(holder, 10)
    if kind_holder == "seed":
        # The exact bytes the classic client reads: "ok" and one '\n'.
        checks.check(first is not None and first.split()[1] == b"ok\n".hex(),
                     "%s: the holder reads exactly b'ok\\n' (%s)" % (what, first))
    else:
        checks.check(first is not None and first.startswith("granted"),
                     "%s: the holder is granted (%s)" % (what, first))
    waiter = spawn(kind_waiter, args, server.port, key)
    checks.check(waiting(server.port, key, 1), "%s: the waiter queues in STATUS" % what)
    checks.check(line_within(waiter, 0.3) is None, "%s: the waiter is not granted while the "
                 "holder holds" % what)
    holder.stdin.write("close\n")
    holder.stdin.flush()
    closed = line_within(holder, 5)
    granted = line_within(waiter, 5)
    ok = closed is not None and granted is not None
    if ok:
        t_closed = int(closed.split()[1])
        t_granted = int(granted.split()[-1])
        ok = t_granted >= t_closed
        print("     granted %.2f ms after the holder closed" % ((t_granted - t_closed) / 1e6))
    checks.check(ok, "%s: the waiter is granted only after the holder closes (%s, %s)" %
                 (what, closed, granted))
    holder.stdin.close()
    holder.wait()
    # Now the waiter holds: a third process waits, and the holder is killed with SIGKILL.
    third = spawn(kind_holder, args, server.port, key)
    checks.check(waiting(server.port, key, 1), "%s: a third process queues" % what)
    t_kill = time.monotonic_ns()
    os.kill(waiter.pid, signal.SIGKILL)
    got = line_within(third, 5)
    ok = got is not None
    if ok:
        latency_ms = (int(got.split()[-1]) - t_kill) / 1e6
        print("     SIGKILL of the holder -> waiter granted in %.2f ms (goal 50 ms)" % latency_ms)
        ok = latency_ms < 50
    checks.check(ok, "%s: SIGKILL of the holder frees the lock within 50 ms" % what)
    waiter.wait()
    third.stdin.close()
    third.wait()
    checks.check(status(server.port) == [], "%s: nothing is left on the server" % what)


def half_close(server, checks):
    """LOCK and the half-close back to back: each is answered "ok", then closed and released."""
    clients = []
    for i in range(200):
        s = connect(server.port)
        s.sendall(b"LOCK compat/half/%d\n" % i)
        s.shutdown(socket.SHUT_WR)
        clients.append(s)
    answered = 0
    for s in clients:
        s.settimeout(5)
        try:
            answered += read_line(s) == b"ok"
        except OSError:
            pass
    # Then the server closes each (its end of file), all within two seconds.
    open_ = list(clients)
    deadline = time.monotonic() + 2
    while open_ and time.monotonic() < deadline:
        ready, _, _ = select.select(open_, [], [], 0.1)
        for s in ready:
            try:
                if s.recv(10) == b"":
                    open_.remove(s)
            except OSError:
                open_.remove(s)
    closed = len(clients) - len(open_)
    for s in clients:
        s.close()
    deadline = time.monotonic() + 2
    while status(server.port) and time.monotonic() < deadline:
        time.sleep(0.01)
    left = len(status(server.port))
    checks.check(answered == 200 and closed == 200 and left == 0,
                 "LOCK + half-close back to back, 200 times: %d answered ok, %d closed by the "
                 "server, %d keys left held" % (answered, closed, left))
    nc = shutil.which("nc")
    if nc is None:
        print("     (no nc here: the one-liner itself is not run)")
        return
    out = subprocess.run("printf 'LOCK compat/nc\\n' | %s -N 127.0.0.1 %d" % (nc, server.port),
                         shell=True, capture_output=True, timeout=10).stdout
    checks.check(out == b"ok\n" and status(server.port) == [],
                 "printf 'LOCK k\\n' | nc -N: %r, and the key is free after" % out)


def main():
    args = parse_args()
    checks = Checks()
    with Lockd(args.lockd) as server:
        for holder, waiter in (("seed", "seed"), ("php", "php"), ("seed", "php"), ("php", "seed")):
            run(holder, waiter, args, server, checks)
        half_close(server, checks)
    checks.finish()


if __name__ == "__main__":
    main()
