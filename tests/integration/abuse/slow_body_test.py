"""Attack: slow uploads behind Apache. mod_proxy_fcgi streams a request body to kagi as its
client sends it; 4 clients sending 600 B/s (above Debian's mod_reqtimeout default minimum
rate of 500 B/s) used to pin every kagi worker in a blocking read, and the site stopped
answering. Now kagi reads bodies without holding a worker and answers a body that does not
arrive within limits.body_timeout_ms with 408.

kagi runs under spawn-fcgi behind a real Apache started with the shipped recipe
(conf/apache/kagi.conf). SLOW clients keep uploading at ~600 B/s for the attack window
(each starts again when its upload ends); meanwhile a normal client GETs a page through
Apache. Checks: the probe's p99 (printed against the 50 ms goal; a generous bound asserted),
every slow upload ended by kagi's 408 (or the connection closed) and none served, kagi's RSS
bounded. Also: the shipped recipe's mod_reqtimeout settings pass `apache2 -t` with the
module loaded.
"""

import os
import select
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "frontends"))
sys.path.insert(0, HERE)

import harness  # noqa: E402
import probe  # noqa: E402

THREADS = 4
SLOW = 8  # twice the workers
RATE_BYTES = 60  # per tick: 600 B/s
TICK_S = 0.1
BODY_BYTES = 30000  # would take 50 s at that rate
BODY_TIMEOUT_MS = 3000
ATTACK_S = 8.0
RSS_GROWTH_BOUND_KIB = 32 * 1024


def slow_upload(port, stop_at):
    """One upload at ~600 B/s. Returns the HTTP status Apache answered, or "closed"."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(("POST /_test/echo HTTP/1.1\r\nHost: localhost\r\n"
                   "Content-Type: application/x-www-form-urlencoded\r\n"
                   "Content-Length: %d\r\n\r\n" % BODY_BYTES).encode())
        sent = 0
        # Bounded: the body's size, and the attack window plus the deadline and a margin.
        hard_stop = stop_at + BODY_TIMEOUT_MS / 1000.0 + 10.0
        while sent < BODY_BYTES and time.monotonic() < hard_stop:
            # The pacing of the attack (600 B/s), and a look for an early answer.
            ready, _, _ = select.select([s], [], [], TICK_S)
            if ready:
                break
            try:
                s.sendall(b"a" * RATE_BYTES)
            except OSError:
                return "closed"
            sent += RATE_BYTES
        data = b""
        while b"\r\n" not in data:
            try:
                chunk = s.recv(4096)
            except OSError:
                chunk = b""
            if not chunk:
                break
            data += chunk
        if not data.startswith(b"HTTP/"):
            return "closed"
        return int(data.split(b" ", 2)[1])
    finally:
        s.close()


def attacker(port, stop_at, outcomes, lock):
    while time.monotonic() < stop_at:
        t0 = time.monotonic()
        try:
            result = slow_upload(port, stop_at)
        except OSError as e:
            result = "error " + type(e).__name__
        with lock:
            outcomes.append((result, time.monotonic() - t0))


def check_reqtimeout_recipe(env, fail):
    """The shipped recipe with mod_reqtimeout loaded (Debian enables it by default) parses."""
    d = env.path("apache-t")
    os.makedirs(d, exist_ok=True)
    shipped = open(os.path.join(env.source, "conf/apache/kagi.conf")).read()
    fail.check("RequestReadTimeout" in shipped, "the Apache recipe sets RequestReadTimeout")
    m = "/usr/lib/apache2/modules"
    conf = os.path.join(d, "httpd.conf")
    open(conf, "w").write(
        "ServerRoot %s\nServerName 127.0.0.1\nListen 127.0.0.1:%d\nDefaultRuntimeDir %s\n"
        "PidFile %s/httpd.pid\nErrorLog %s/error.log\n"
        "LoadModule mpm_event_module %s/mod_mpm_event.so\n"
        "LoadModule authz_core_module %s/mod_authz_core.so\n"
        "LoadModule proxy_module %s/mod_proxy.so\n"
        "LoadModule proxy_fcgi_module %s/mod_proxy_fcgi.so\n"
        "LoadModule reqtimeout_module %s/mod_reqtimeout.so\n"
        "Include %s/conf/apache/kagi.conf\n"
        % (d, harness.free_port(), d, d, d, m, m, m, m, m, env.source))
    env_vars = dict(os.environ, APACHE_RUN_DIR=d, APACHE_LOCK_DIR=d, APACHE_LOG_DIR=d)
    out = subprocess.run(["apache2", "-t", "-f", conf], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, env=env_vars, timeout=30)
    fail.check(out.returncode == 0, "apache2 -t with mod_reqtimeout loaded accepts the recipe (%s)"
               % out.stdout.decode(errors="replace").strip()[-200:])


def test(env, fail):
    check_reqtimeout_recipe(env, fail)
    sock = env.path("kagi.sock")
    pids = env.spawn_fcgi(sock, 1, THREADS, ["limits.body_timeout_ms=%d" % BODY_TIMEOUT_MS])
    harness.wait_for_unix(sock)
    port = harness.free_port()
    env.apache(port, sock)
    fail.equal(harness.request(port, "GET", "/_test/echo").status, 200, "served before the attack")

    rss = probe.RssSampler(lambda: pids, max_seconds=60).start()
    latency = probe.LatencyProbe(port, "/_test/echo", timeout=5.0, max_seconds=60).start()
    stop_at = time.monotonic() + ATTACK_S
    outcomes = []
    lock = threading.Lock()
    threads = [threading.Thread(target=attacker, args=(port, stop_at, outcomes, lock), daemon=True)
               for _ in range(SLOW)]
    for t in threads:
        t.start()
    print("attack: %d clients uploading %d-byte bodies at %d B/s for %.0f s"
          % (SLOW, BODY_BYTES, int(RATE_BYTES / TICK_S), ATTACK_S))
    for t in threads:
        t.join(ATTACK_S + BODY_TIMEOUT_MS / 1000.0 + 20.0)
    harness.wait_until("40 probe samples", lambda: len(latency.latencies_ms) >= 40, 30)
    latency.stop()
    rss.stop()

    fail.check(not any(t.is_alive() for t in threads), "every slow client finished")
    results = [r for r, _ in outcomes]
    took = sorted(d for _, d in outcomes)
    print("slow uploads: %d ended: %s" % (len(results), {str(r): results.count(r)
                                                          for r in set(results)}))
    if took:
        print("each lasted %.1f..%.1f s (limits.body_timeout_ms = %d)"
              % (took[0], took[-1], BODY_TIMEOUT_MS))
    fail.check(len(results) >= SLOW, "each slow client got an answer (%d)" % len(results))
    fail.check(all(r in (408, "closed") for r in results),
               "every slow upload got 408 or a closed connection")
    fail.check(results.count(408) >= 1, "kagi's 408 reaches the client through Apache")
    fail.check(all(d <= BODY_TIMEOUT_MS / 1000.0 + 3.0 for d in took),
               "no upload outlived the body deadline by more than 3 s")
    probe.check_normal_service(fail.check, latency, rss, "through Apache", RSS_GROWTH_BOUND_KIB)
    fail.equal(harness.request(port, "GET", "/_test/echo").status, 200, "served after the attack")
    fail.check(all(harness.pid_alive(p) for p in pids), "kagi still running")


if __name__ == "__main__":
    harness.main(test, "abuse-slow-body")
