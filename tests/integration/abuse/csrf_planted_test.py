"""Abuse: forged CSRF tokens in planted cookies, through real nginx.

An attacker who can set a cookie for the site (a sibling subdomain, a plain-HTTP man in the
middle) plants `kagi_csrf=<value>` and submits the same value in the form. Before the tokens
were signed, any well-formed value passed. Now the server accepts only tokens it signed
(HMAC under the server secret): every forged post is 403, stores nothing, and its answer
replaces the planted cookie. A normal browser flow (GET the form, POST it back with its
cookie and token) still works.

Bounded: 4 threads of 50..1000 forged posts each, for at least 3 s so the reader gets a
sample, 30 s at most; the reader's p99 (printed against the 50 ms goal) and the workers' RSS
are measured meanwhile.
"""

import os
import re
import secrets
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "bbs"))
import bbs_common  # noqa: E402
import harness  # noqa: E402
from probe import LatencyProbe, P99_BOUND_MS, P99_GOAL_MS, RssSampler  # noqa: E402

THREADS = 4
TRIES, MAX_TRIES = 50, 1000
MIN_SECONDS = 3.0
RSS_BOUND_KIB = 64 * 1024


def forged_post(port, conn, token):
    hdrs = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": "kagi_csrf=" + token}
    body = harness.form_body({"_csrf": token, "name": "mallory", "body": "forged " + token})
    return harness.request(port, "POST", "/bbs/general/post", body, hdrs, conn=conn)


def test(env, fail):
    port, pids = bbs_common.start_stack(env, processes=2, threads=4)
    answers, replaced = [], []
    lock = threading.Lock()
    started = time.monotonic()
    deadline = started + 30

    def attacker(n):
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
        try:
            for i in range(MAX_TRIES):
                now = time.monotonic()
                if now > deadline or (i >= TRIES and now - started >= MIN_SECONDS):
                    return
                # The shape of a signed token (64 hex), and the old unsigned one (32 hex).
                token = secrets.token_hex(32 if i % 2 == 0 else 16)
                r = forged_post(port, conn, token)
                new = r.cookies().get("kagi_csrf", "")
                with lock:
                    answers.append(r.status)
                    replaced.append(bool(new) and new != token)
        finally:
            conn.close()

    rss = RssSampler(lambda: pids).start()
    probe = LatencyProbe(port, "/bbs/general/").start()
    try:
        results = harness.parallel([lambda n=n: attacker(n) for n in range(THREADS)], timeout=90)
    finally:
        probe.stop()
        rss.stop()
    fail.equal([r for r in results if isinstance(r, Exception)], [], "attackers ran")
    print("attack: %d forged posts, %d refused with 403" % (len(answers), answers.count(403)))
    print("reader during the attack: %s (goal p99 %.0f ms)" % (probe.summary(), P99_GOAL_MS))
    print(rss.summary())
    fail.check(len(answers) >= THREADS * TRIES, "every attacker made its %d tries" % TRIES)
    fail.equal(answers.count(403), len(answers), "every forged post is 403")
    fail.check(all(replaced), "every 403 replaces the planted cookie with a signed one")
    stored, _ = bbs_common.all_posts(port, "general")
    fail.equal(len(stored), 0, "no forged post was stored")

    # A normal browser: GET the form (cookie + hidden field), POST it back.
    page = harness.request(port, "GET", "/bbs/general/")
    cookie = page.cookies().get("kagi_csrf", "")
    m = re.search(r'name="_csrf" value="([0-9a-f]+)"', page.text())
    fail.check(cookie and m and m.group(1) == cookie, "the form carries the cookie's token")
    if cookie and m:
        hdrs = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": "kagi_csrf=" + cookie}
        body = harness.form_body({"_csrf": m.group(1), "name": "alice", "body": "hello"})
        r = harness.request(port, "POST", "/bbs/general/post", body, hdrs)
        fail.equal(r.status, 303, "the browser's post is accepted")
    stored, _ = bbs_common.all_posts(port, "general")
    fail.check(len(stored) == 1 and stored[0]["body"] == "hello",
               "only the browser's post is stored (%d posts)" % len(stored))

    fail.equal(probe.failures, [], "the reader's requests all succeeded")
    fail.check(probe.p99() is not None and probe.p99() <= P99_BOUND_MS,
               "reader p99 %.1f ms <= %.0f ms (goal %.0f ms)"
               % (probe.p99() or -1, P99_BOUND_MS, P99_GOAL_MS))
    fail.check(rss.peak_kib - rss.first_kib < RSS_BOUND_KIB,
               "worker RSS grew by %d KiB (< %d)" % (rss.peak_kib - rss.first_kib, RSS_BOUND_KIB))


if __name__ == "__main__":
    harness.main(test, "abuse-csrf-planted")
