"""Workers SIGKILLed while clients post: no acknowledged post is lost, the survivors serve
on, and the board still reads (a torn append left by a killed writer is skipped)."""

import os
import signal
import threading
import time

import bbs_common
import harness

CLIENTS, POSTS = 8, 150


def test(env, fail):
    port, pids = bbs_common.start_stack(env, processes=3, threads=4)
    stop = threading.Event()
    # The kills are paced by progress, not by the clock, so they land mid-load on any machine.
    progress = threading.Semaphore(0)

    def client(c):
        poster = bbs_common.Poster(port)
        acked, failed = [], 0
        for i in range(POSTS):
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

    def killer():
        # Two of the three workers die at different moments of the load: after a quarter and
        # after half of all posts were started.
        for pid in pids[:2]:
            for _ in range(CLIENTS * POSTS // 4):
                while not progress.acquire(timeout=0.1):
                    if stop.is_set():
                        return
            os.kill(pid, signal.SIGKILL)

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
    fail.check(not harness.pid_alive(pids[0]) and not harness.pid_alive(pids[1]),
               "the two workers were killed")
    fail.check(harness.pid_alive(pids[2]), "the third worker survived")
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
    fail.equal(r.status, 303, "a post after the kills")
    fail.check(time.monotonic() - t0 < 2.0, "and it did not wait for a dead holder")


if __name__ == "__main__":
    harness.main(test, "bbs-crash")
