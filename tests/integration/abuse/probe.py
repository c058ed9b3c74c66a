"""What every abuse test measures while its attack runs (Python 3 standard library only).

LatencyProbe: a normal client sending plain GETs one after another, recording each one's
latency (a request that fails or times out counts as the timeout), so a test can assert the
p99 a real user saw during the attack. RssSampler: the peak resident set size of a set of
processes, sampled from /proc, so a test can assert memory stayed bounded.

Both are bounded: they run until stop() and never longer than their own max_seconds.
"""

import http.client
import threading
import time


def percentile(values, p):
    """The p-th percentile (0..100) of values, nearest rank; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, int(round(p / 100.0 * len(ordered) + 0.5)) - 1))
    return ordered[rank]


class LatencyProbe:
    """GETs `path` on 127.0.0.1:`port` in a loop on its own thread, one request at a time."""

    def __init__(self, port, path="/", timeout=5.0, max_seconds=120.0, want_status=200):
        self.port = port
        self.path = path
        self.timeout = timeout
        self.max_seconds = max_seconds
        self.want_status = want_status
        self.latencies_ms = []
        self.failures = []  # (status or exception text) of requests that did not succeed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(self.timeout + 5)
        return self

    def _one(self):
        started = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        try:
            conn.request("GET", self.path)
            resp = conn.getresponse()
            resp.read()
            if resp.status != self.want_status:
                self.failures.append("status %d" % resp.status)
        except Exception as exc:  # noqa: BLE001 - any failure is what we measure
            self.failures.append(type(exc).__name__)
            # A failed request counts as the whole timeout: it is what the user waited.
            self.latencies_ms.append(self.timeout * 1000.0)
            return
        finally:
            conn.close()
        self.latencies_ms.append((time.monotonic() - started) * 1000.0)

    def _run(self):
        deadline = time.monotonic() + self.max_seconds
        while not self._stop.is_set() and time.monotonic() < deadline:
            self._one()
            self._stop.wait(0.01)  # a user clicking, not a load generator

    def p50(self):
        return percentile(self.latencies_ms, 50)

    def p99(self):
        return percentile(self.latencies_ms, 99)

    def summary(self):
        return "%d requests, p50 %.1f ms, p99 %.1f ms, %d failed" % (
            len(self.latencies_ms), self.p50() or 0.0, self.p99() or 0.0, len(self.failures))


def rss_kib(pid):
    """Resident set size of pid in KiB (0 if it is gone)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class RssSampler:
    """Samples the summed RSS of `pids_fn()` every 50 ms on its own thread; keeps the peak."""

    def __init__(self, pids_fn, max_seconds=120.0):
        self.pids_fn = pids_fn
        self.max_seconds = max_seconds
        self.peak_kib = 0
        self.first_kib = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.first_kib = sum(rss_kib(p) for p in self.pids_fn())
        self.peak_kib = self.first_kib
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(5)
        return self

    def _run(self):
        deadline = time.monotonic() + self.max_seconds
        while not self._stop.is_set() and time.monotonic() < deadline:
            self.peak_kib = max(self.peak_kib, sum(rss_kib(p) for p in self.pids_fn()))
            self._stop.wait(0.05)

    def summary(self):
        return "RSS %d KiB at start, peak %d KiB (+%d KiB)" % (
            self.first_kib or 0, self.peak_kib, self.peak_kib - (self.first_kib or 0))


def serve_behind_nginx(env, fail, threads, extra_settings):
    """kagi-demo on its own FastCGI socket (--fcgi unix:) behind a real nginx, checked to
    answer before any attack starts. Returns (the kagi-demo process, its socket, nginx's
    port)."""
    import harness  # the front-end harness, on the path of every test that starts a site

    sock = env.path("kagi.sock")
    settings = env.demo_settings(threads, extra_settings)
    kagi = env.start([env.demo, "--fcgi", "unix:" + sock] + settings, "kagi.out")
    harness.wait_for_unix(sock)
    port = harness.free_port()
    env.nginx(port, sock)
    fail.equal(harness.request(port, "GET", "/_test/echo").status, 200, "served before the attack")
    return kagi, sock, port


# The goal every abuse test reports against: a normal request's p99 during the attack.
P99_GOAL_MS = 50.0
# What the tests assert: 5x the goal, because the test machine is shared by builds and other
# test runs; the measured p99 is printed against the goal either way.
P99_BOUND_MS = 5 * P99_GOAL_MS
RSS_GROWTH_BOUND_KIB = 64 * 1024


def check_normal_service(check, latency, rss, where, rss_bound_kib=RSS_GROWTH_BOUND_KIB,
                         p99_bound_ms=P99_BOUND_MS):
    """Prints and checks what a normal user saw during an attack: no request failed, the p99
    within its bound, and the server's RSS growth within its bound. `check(ok, message)`
    records one check (e.g. harness.Failures.check); `where` says how the probe came in."""
    print("normal GET %s during the attack: %s (goal p99 <= %.0f ms)"
          % (where, latency.summary(), P99_GOAL_MS))
    print(rss.summary())
    check(len(latency.failures) == 0,
          "no normal request failed during the attack (%d failed)" % len(latency.failures))
    p99 = latency.p99() or 0.0
    check(p99 <= p99_bound_ms, "normal p99 %.1f ms <= %.0f ms (goal %.0f ms)"
          % (p99, p99_bound_ms, P99_GOAL_MS))
    growth = rss.peak_kib - (rss.first_kib or 0)
    check(growth <= rss_bound_kib, "RSS grew by %d KiB (bound %d KiB)" % (growth, rss_bound_kib))
