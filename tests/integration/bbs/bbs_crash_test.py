"""Workers SIGKILLed while clients post, each while it holds the board's write lock (known
from the lock registry, read while the worker is stopped): no acknowledged post is lost, the
survivors serve on, the lock is not waited for, and the board still reads (a torn append
left by a killed writer is skipped)."""

import itertools
import os
import signal
import threading
import time

import bbs_common
import harness

CLIENTS, POSTS = 8, 150
BOARD_LOCK = "bbs/board/general"
MAX_TRIES = 400  # stop-and-look attempts per kill
MAX_LOAD = 20  # clients post at most this many times POSTS while the killer looks


def process_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def kill_if_holding(env, pid):
    """Stops `pid` (SIGSTOP freezes its registry entries), reads the lock registry, and
    SIGKILLs it if it holds the board's lock; else lets it run on. True if killed."""
    os.kill(pid, signal.SIGSTOP)
    try:
        # A worker that is still exiting from an earlier kill never stops: it only disappears.
        harness.wait_until("worker %d stopped or gone" % pid,
                           lambda: process_state(pid) in ("T", "t", "Z", "X", None), 10)
        if process_state(pid) not in ("T", "t"):
            return False
        holding = any(name == BOARD_LOCK and h["pid"] == pid and h["mode"] == "exclusive"
                      for name, h in harness.lock_holders(env.args.locks,
                                                          env.path("var", "locks")))
        if holding:
            os.kill(pid, signal.SIGKILL)
            return True
    finally:
        if harness.pid_alive(pid):
            os.kill(pid, signal.SIGCONT)
    return False


def test(env, fail):
    port, pids = bbs_common.start_stack(env, processes=3, threads=4)
    stop = threading.Event()
    # The clients post until the killer is done (at least POSTS each): a post holds the board's
    # lock only for its read and append (its fsync comes after, group commit), so the load must
    # last as long as the killer needs to catch a worker holding it.
    killer_done = threading.Event()
    # The kills are paced by progress, not by the clock, so they land mid-load on any machine.
    progress = threading.Semaphore(0)

    def client(c):
        poster = bbs_common.Poster(port)
        acked, failed = [], 0
        for i in itertools.count():
            if i >= POSTS and (killer_done.is_set() or i >= POSTS * MAX_LOAD):
                break
            body = "client %d post %d" % (c, i)
            progress.release()
            try:
                r = poster.post("general", {"name": "c%d" % c, "body": body})
                if r.status == 303:
                    acked.append(body)
                else:
                    failed += 1  # 502/504 from nginx while a worker died: not acknowledged
            except Exception:  # noqa: BLE001 - a connection cut by the kill: not acknowledged
                failed += 1
        return acked, failed

    held_at_kill = []  # per kill: did the registry show the victim holding the board lock

    def killer():
        try:
            kill_two()
        finally:
            killer_done.set()

    def kill_two():
        # Two of the three workers die at different moments of the load: from a quarter and
        # from half of all posts started on, each at a moment it holds the board's lock. The
        # victim is whichever live worker is caught holding it: nginx need not send posts to
        # every worker (its kept connections may all be on the others), and a worker chosen in
        # advance was once looked at 400 times without holding it.
        for _ in range(2):
            for _ in range(CLIENTS * POSTS // 4):
                while not progress.acquire(timeout=0.1):
                    if stop.is_set():
                        return
            victim, holding, tries = None, False, 0
            while not holding and tries < MAX_TRIES and not stop.is_set():
                tries += 1
                victim = next((pid for pid in pids
                               if harness.pid_alive(pid) and kill_if_holding(env, pid)), None)
                holding = victim is not None
                if not holding:
                    progress.acquire(timeout=1)  # let the load move on before the next look
            if not holding:  # the rest of the test still wants two of them dead
                victim = next(pid for pid in pids if harness.pid_alive(pid))
                os.kill(victim, signal.SIGKILL)
            # Its threads may take a while to exit (one may be in fdatasync): the next look
            # must not pick it as alive.
            harness.wait_until("worker %d gone" % victim,
                               lambda: not harness.pid_alive(victim), 10)
            print("  worker %d killed %s after %d look(s)"
                  % (victim, "holding " + BOARD_LOCK if holding else "NOT holding a lock", tries))
            held_at_kill.append(holding)

    k = threading.Thread(target=killer)
    k.start()
    results = harness.parallel([lambda c=c: client(c) for c in range(CLIENTS)], timeout=240)
    stop.set()
    k.join()

    errors = [r for r in results if isinstance(r, Exception)]
    fail.check(not errors, "every client finished (%s)" % errors[:1])
    acked = [b for r in results if isinstance(r, tuple) for b in r[0]]
    failed = sum(r[1] for r in results if isinstance(r, tuple))
    print("  acknowledged %d, failed %d" % (len(acked), failed))
    alive = [pid for pid in pids if harness.pid_alive(pid)]
    fail.equal(len(alive), 1, "two of the three workers were killed")
    fail.equal(held_at_kill, [True, True],
               "each worker was killed while it held %s (from the registry)" % BOARD_LOCK)

    fail.check(len(acked) > CLIENTS * POSTS // 2, "most posts were acknowledged")

    stored, _ = bbs_common.all_posts(port, "general")
    bodies = [p["body"] for p in stored]
    ids = [p["id"] for p in stored]
    fail.equal(len(set(acked) - set(bodies)), 0, "acknowledged posts lost")
    fail.equal(len(ids), len(set(ids)), "ids unique")
    r = harness.request(port, "GET", "/bbs/general/")
    fail.equal(r.status, 200, "the board page still reads")
    # The survivor still takes posts: the killed workers' locks were released by the kernel.
    poster = bbs_common.Poster(port)
    t0 = time.monotonic()
    r = poster.post("general", {"body": "after the crash"})
    took = time.monotonic() - t0
    # Waiting on a dead holder would end in a 503 after locks.timeout_ms (3 s): the status
    # says it; the time is a sanity bound for a loaded machine.
    fail.equal(r.status, 303, "a post after the kills")
    fail.check(took < 10.0, "and it did not wait for a dead holder (%.3fs)" % took)


if __name__ == "__main__":
    harness.main(test, "bbs-crash")
