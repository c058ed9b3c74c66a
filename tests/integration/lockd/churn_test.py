"""Mutual exclusion under churn: 32 client processes x 200 cycles of lock / read the counter
file / sleep / write it / unlock, on one key, while clients are killed with SIGKILL at random.
Half the clients speak the seed's form (a connection per lock, closed to unlock), half keep
one connection (LOCK <key> <ms> ... UNLOCK <key>).

Checks:
  - the counter file holds the values 1..N in order (every read saw the previous write: no
    lost update), and N = the increments acknowledged by their clients + at most one
    unacknowledged write per killed client (one that wrote and died before it could say so);
  - the history (every grant and release, CLOCK_MONOTONIC ns, written by each client as it
    happens) has no two holders of the key at once, ever. A killed holder's hold is taken to
    end when the kill was sent (before it died: the check can only be stricter).

    python3 churn_test.py --lockd BUILD/apps/lockd/kagi-lockd
"""

import os
import random
import signal
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockd_harness import Checks, Lockd, parse_args, read_line  # noqa: E402

CLIENTS, CYCLES, KILLS = 32, 200, 8
RECORD = 32  # "%010d %010d %09d\n": value, pid, cycle
KEY = b"churn/counter"


def client(port, index, counter, history_path):
    rnd = random.Random(index)
    fd = os.open(counter, os.O_RDWR)
    hist = os.open(history_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    pid = os.getpid()
    kept = None
    seed_form = index % 2 == 0
    for cycle in range(CYCLES):
        if seed_form:
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"LOCK " + KEY + b"\n")
            answer = read_line(s)
            if answer != b"ok":
                os.write(hist, b"E %d %d bad answer %r\n" % (pid, cycle, answer))
                return 2
        else:
            if kept is None:
                kept = socket.create_connection(("127.0.0.1", port))
                kept.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            kept.sendall(b"LOCK " + KEY + b" 60000\n")
            answer = read_line(kept)
            if not answer.startswith(b"ok "):
                os.write(hist, b"E %d %d bad answer %r\n" % (pid, cycle, answer))
                return 2
        os.write(hist, b"G %d %d %d\n" % (pid, cycle, time.monotonic_ns()))
        size = os.fstat(fd).st_size
        n = size // RECORD
        if size % RECORD or (n and int(os.pread(fd, RECORD, size - RECORD)[:10]) != n):
            os.write(hist, b"E %d %d torn or wrong counter at %d\n" % (pid, cycle, size))
            return 3
        time.sleep(rnd.random() * 0.0003)
        record = b"%010d %010d %09d\n" % (n + 1, pid, cycle)
        os.pwrite(fd, record, n * RECORD)
        os.write(hist, b"A %d %d %d\n" % (pid, cycle, n + 1))
        os.write(hist, b"R %d %d %d\n" % (pid, cycle, time.monotonic_ns()))
        if seed_form:
            s.close()
        else:
            kept.sendall(b"UNLOCK " + KEY + b"\n")
            if read_line(kept) != b"ok":
                return 4
    return 0


def main():
    args = parse_args()
    checks = Checks()
    work = tempfile.mkdtemp(prefix="kagi-lockd-churn-")
    counter = os.path.join(work, "counter")
    open(counter, "wb").close()
    with Lockd(args.lockd) as server:
        started = time.monotonic()
        children = {}
        for i in range(CLIENTS):
            hist = os.path.join(work, "history-%d" % i)
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    code = client(server.port, i, counter, hist)
                finally:
                    os._exit(code)
            children[pid] = hist
        rnd = random.Random(1)
        kills = {}
        running = set(children)
        while len(kills) < KILLS and running:
            time.sleep(rnd.uniform(0.02, 0.15))
            for pid in list(running):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    running.discard(pid)
            if not running:
                break
            victim = rnd.choice(sorted(running))
            kills[victim] = time.monotonic_ns()
            os.kill(victim, signal.SIGKILL)
            running.discard(victim)
        codes = {}
        for pid in children:
            try:
                _, status = os.waitpid(pid, 0)
                codes[pid] = status
            except ChildProcessError:
                codes[pid] = 0  # reaped above: it had finished
        elapsed = time.monotonic() - started
        checks.check(server.alive(), "the server survived the churn")

    # The counter file.
    data = open(counter, "rb").read()
    records = [data[i:i + RECORD] for i in range(0, len(data), RECORD)]
    values = [int(r[:10]) for r in records]
    checks.check(len(data) % RECORD == 0 and values == list(range(1, len(values) + 1)),
                 "the counter file holds 1..%d in order: no lost or torn update" % len(values))
    # Histories.
    acked, intervals, errors = {}, [], []
    for pid, path in children.items():
        grants = {}
        for line in open(path, "rb").read().splitlines():
            parts = line.split()
            kind = parts[0]
            if kind == b"E":
                errors.append(line)
            elif kind == b"G":
                grants[int(parts[2])] = int(parts[3])
            elif kind == b"A":
                acked[int(parts[3])] = (pid, int(parts[2]))
            elif kind == b"R":
                intervals.append((grants.pop(int(parts[2])), int(parts[3]), pid))
        for cycle, start in grants.items():  # held when killed
            intervals.append((start, kills.get(pid, start), pid))
    checks.check(not errors, "no client saw a bad answer or a wrong counter (%s)" % errors[:3])
    killed = set(kills)
    unacked = []
    for i, r in enumerate(records):
        pid, cycle = int(r[11:21]), int(r[22:31])
        if acked.get(i + 1) != (pid, cycle):
            unacked.append((pid, cycle))
    per_killed = {}
    for pid, _ in unacked:
        per_killed[pid] = per_killed.get(pid, 0) + 1
    checks.check(all(p in killed and n == 1 for p, n in per_killed.items()),
                 "every unacknowledged write is the last of a killed client (%d)" % len(unacked))
    checks.check(len(values) == len(acked) + len(unacked),
                 "final count %d = %d acknowledged increments + %d writes of killed clients" %
                 (len(values), len(acked), len(unacked)))
    intervals.sort()
    overlaps = [(a, b) for a, b in zip(intervals, intervals[1:]) if b[0] < a[1]]
    checks.check(not overlaps, "no two overlapping holders in %d grants (%s)" %
                 (len(intervals), overlaps[:2]))
    normal = sum(1 for pid, st in codes.items() if pid not in killed and st == 0)
    checks.check(normal == CLIENTS - len(killed), "every client not killed finished cleanly "
                 "(%d of %d)" % (normal, CLIENTS - len(killed)))
    print("     %d clients x %d cycles, %d killed, %d grants in %.1f s" %
          (CLIENTS, CYCLES, len(killed), len(intervals), elapsed))
    checks.finish()


if __name__ == "__main__":
    main()
