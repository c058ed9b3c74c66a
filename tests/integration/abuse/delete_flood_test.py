"""Abuse: a flood of wrong delete passwords against one board, through real nginx.

Eight clients send wrong-password deletes for one post in parallel, for at least 3 s so the
reader gets a sample (bounded: 25..1000 tries each, 30 s at most). Each check of a delete password costs ~35 ms of CPU, so the board throttles
them (bbs.delete_tries_per_client / _per_post, 10 a minute each, per worker process) and
answers the rest 429 + Retry-After without hashing. Meanwhile a normal reader loads the board
page: it must not queue behind the attack (the hash never runs under the board's lock).

Asserts: every answer is 403 or 429; at most 2 processes x 10 were checked (403), the rest
are 429 with a Retry-After within the minute; the post survives; the reader's p99 stays
under a generous bound (printed against the 50 ms goal); worker RSS grows by < 64 MiB.
"""

import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "bbs"))
import bbs_common  # noqa: E402
import harness  # noqa: E402  (on the path through bbs_common)
from probe import LatencyProbe, P99_BOUND_MS, P99_GOAL_MS, RssSampler  # noqa: E402

ATTACKERS = 8
TRIES, MAX_TRIES = 25, 1000
MIN_SECONDS = 3.0
THREADS = 4
PROCESSES = 2
LIMIT = 10  # the shipped default of both delete limits
# A yescrypt check (Debian's default cost) works in 16 MiB; each worker thread that runs one
# keeps that memory in its malloc arena. So the bound is one hash per thread, plus 16 MiB:
# what must not happen is growth with the number of attempts.
RSS_BOUND_KIB = (PROCESSES * THREADS + 1) * 16 * 1024


def test(env, fail):
    port, pids = bbs_common.start_stack(env, processes=PROCESSES, threads=THREADS, extra=[
        "bbs.delete_tries_per_client=%d" % LIMIT, "bbs.delete_tries_per_post=%d" % LIMIT])
    owner = bbs_common.Poster(port)
    fail.equal(owner.post("general", {"body": "mine", "password": "correct horse"}).status, 303,
               "the post under attack")
    posts, _ = bbs_common.all_posts(port, "general")
    post_id = posts[0]["id"]

    statuses, retry_after = [], []
    lock = threading.Lock()
    started = time.monotonic()
    deadline = started + 30  # well inside the limits' one-minute window

    def attacker(n):
        p = bbs_common.Poster(port)
        try:
            for i in range(MAX_TRIES):
                now = time.monotonic()
                if now > deadline or (i >= TRIES and now - started >= MIN_SECONDS):
                    return
                r = p.delete("general", post_id, "guess-%d-%d" % (n, i))
                with lock:
                    statuses.append(r.status)
                    if r.status == 429:
                        retry_after.append(int(r.header("Retry-After") or "0"))
        finally:
            p.close()

    rss = RssSampler(lambda: pids).start()
    probe = LatencyProbe(port, "/bbs/general/").start()
    try:
        results = harness.parallel([lambda n=n: attacker(n) for n in range(ATTACKERS)], timeout=90)
    finally:
        probe.stop()
        rss.stop()
    crashed = [r for r in results if isinstance(r, Exception)]
    fail.equal(crashed, [], "attackers ran without errors")

    n403, n429 = statuses.count(403), statuses.count(429)
    print("attack: %d deletes, %d checked (403), %d throttled (429)" % (len(statuses), n403, n429))
    print("reader during the attack: %s (goal p99 %.0f ms)" % (probe.summary(), P99_GOAL_MS))
    print(rss.summary())
    fail.check(len(statuses) >= ATTACKERS * TRIES, "every attacker made its %d tries" % TRIES)
    fail.equal(n403 + n429, len(statuses), "answers are only 403 and 429")
    fail.check(n403 <= PROCESSES * LIMIT,
               "at most %d password checks (%d)" % (PROCESSES * LIMIT, n403))
    fail.check(retry_after and all(1 <= s <= 60 for s in retry_after),
               "every 429 carries Retry-After within the minute")
    fail.equal(len(bbs_common.all_posts(port, "general")[0]), 1, "the post survives")
    fail.equal(probe.failures, [], "the reader's requests all succeeded")
    fail.check(probe.p99() is not None and probe.p99() <= P99_BOUND_MS,
               "reader p99 %.1f ms <= %.0f ms (goal %.0f ms)"
               % (probe.p99() or -1, P99_BOUND_MS, P99_GOAL_MS))
    fail.check(rss.peak_kib - rss.first_kib < RSS_BOUND_KIB,
               "worker RSS grew by %d KiB (< %d)" % (rss.peak_kib - rss.first_kib, RSS_BOUND_KIB))


if __name__ == "__main__":
    harness.main(test, "abuse-delete-flood")
