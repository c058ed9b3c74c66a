"""Abuse: hung holders on a hot lock name (hardening item 11).

The attack: 4 clients for 9 s keep sending requests that take the hot name `abuse/hot`
exclusively and then hang for 3 s before their commit (a stuck handler, a slow disk; through
the test route /_test/hold_commit). Each hold alone would outlast locks.timeout_ms (3 s): without
revocation every other request for the name waits out its timeout and answers 503.

With locks.max_hold_ms = 300 each hung hold is revoked after 300-400 ms. Measured while the
attack runs:
  - a normal request on another route (/_test/hello): p99 against the 50 ms goal;
  - a normal request for the hot name itself (take it, commit, answer): every one must succeed
    (200, never 503), its p99 bounded by the holds queued ahead of it;
  - the attack's own answer: every hung request's commit is refused (409 from the test route,
    the store's fence), never applied;
  - the RSS of the server.
"""

import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "frontends"))
sys.path.insert(0, HERE)
import harness  # noqa: E402
import probe  # noqa: E402

HOT = "abuse/hot"
MAX_HOLD_MS = 300
ATTACKERS = 4
ATTACK_SECONDS = 9.0
HANG_MS = 3000
# Asserted bound for the unrelated route's p99: the 50 ms goal times 5, as the machine running
# the suite is shared and loaded (the measured value is printed against the goal).
# A hot-name request queues behind at most every attacker's hold (300 ms + a 100 ms watchdog
# pass each) plus its own work; the bound is its own lock timeout, i.e. it never got a 503.
HOT_P99_BOUND_MS = 3000.0
RSS_BOUND_KIB = 64 * 1024


def attacker(port, answers, stop_at):
    while time.monotonic() < stop_at:
        try:
            r = harness.request(port, "GET", "/_test/hold_commit?name=%s&ms=%d&value=attack"
                                % (HOT, HANG_MS), timeout=HANG_MS / 1000.0 + 10)
            answers.append((r.status, r.text()))
        except Exception as e:  # noqa: BLE001 - reported as an answer
            answers.append((None, type(e).__name__))


def run(env, fail):
    port = harness.free_port()
    proc = env.start([env.demo, "--http", "127.0.0.1:%d" % port] +
                     env.demo_settings(16, ["locks.max_hold_ms=%d" % MAX_HOLD_MS]), "demo.log")
    harness.wait_for_port(port, proc, "kagi-demo")

    rss = probe.RssSampler(lambda: [proc.pid], max_seconds=60).start()
    other = probe.LatencyProbe(port, "/_test/hello", max_seconds=60).start()
    hot = probe.LatencyProbe(port, "/_test/hold_commit?name=%s&ms=0&value=user" % HOT,
                             max_seconds=60).start()
    answers = []
    stop_at = time.monotonic() + ATTACK_SECONDS
    threads = [threading.Thread(target=attacker, args=(port, answers, stop_at), daemon=True)
               for _ in range(ATTACKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(ATTACK_SECONDS + HANG_MS / 1000.0 + 20)
    other.stop()
    hot.stop()
    rss.stop()

    print("  attack: %d hung requests (%d clients x %.0f s, each hanging %d ms); "
          "locks.max_hold_ms = %d" % (len(answers), ATTACKERS, ATTACK_SECONDS, HANG_MS,
                                      MAX_HOLD_MS), flush=True)
    print("  other route /_test/hello: %s (goal p99 <= %.0f ms)"
          % (other.summary(), probe.P99_GOAL_MS), flush=True)
    print("  hot name %s: %s" % (HOT, hot.summary()), flush=True)
    print("  " + rss.summary(), flush=True)

    refused = [a for a in answers if a[0] == 409 and a[1].startswith("refused: commit ")]
    fail.check(len(answers) >= ATTACKERS * 2 and len(refused) == len(answers),
               "every hung request's commit is refused (409): %d of %d; others: %r"
               % (len(refused), len(answers),
                  [(a[0], a[1][:80]) for a in answers if a not in refused][:3]))
    fail.check(len(hot.latencies_ms) >= 10 and not hot.failures,
               "every hot-name request during the attack succeeded (%d, failures %r)"
               % (len(hot.latencies_ms), hot.failures[:5]))
    fail.check(hot.p99() is not None and hot.p99() <= HOT_P99_BOUND_MS,
               "hot-name p99 %.1f ms <= %.0f ms (its lock timeout: no 503)"
               % (hot.p99() or -1, HOT_P99_BOUND_MS))
    fail.check(not other.failures and other.p99() is not None and other.p99() <= probe.P99_BOUND_MS,
               "other route p99 %.1f ms <= %.0f ms (goal %.0f ms), failures %r"
               % (other.p99() or -1, probe.P99_BOUND_MS, probe.P99_GOAL_MS, other.failures[:5]))
    fail.check(rss.peak_kib - rss.first_kib <= RSS_BOUND_KIB,
               "RSS grew %d KiB <= %d KiB" % (rss.peak_kib - rss.first_kib, RSS_BOUND_KIB))
    r = harness.request(port, "GET", "/_test/data?name=" + HOT)
    fail.equal((r.status, r.text()), (200, "user"),
               "the hot file holds a normal request's value, never the attack's")
    log = open(env.path("demo.log"), errors="replace").read()
    fail.check(log.count("lock: revoked: '%s'" % HOT) >= len(answers),
               "each hung hold was revoked and logged (%d)" % log.count("lock: revoked: "))


if __name__ == "__main__":
    harness.main(run, "abuse-hung-holder")
