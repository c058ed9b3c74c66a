"""The postgres backend's dead-peer bound: a web host that vanishes without a FIN.

A second "host" is a network namespace joined to this one by a veth pair; PostgreSQL listens on
this side's address too. A kagi-demo inside the namespace holds a lock (through /_test/hold)
over TCP; a kagi-demo on this side waits for the same name. Then the namespace's link goes
down: no FIN, no RST, its packets simply stop, as when a host loses power or its network.

The server learns that its client is gone only from TCP keepalives, which kagi sets on the
server's side of every connection (locks.postgres.keepalives_*; docs/DEPLOY.md). With idle 1 s,
interval 1 s and 2 probes, the bound is 1 + 1 x 2 = 3 s; the waiter must be granted within it
(plus a margin for the server's timers and the machine), and the time is printed.

Needs root (ip netns); without it the test is skipped (exit code 77) and says why.
"""

import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "frontends"))
import harness  # noqa: E402
import pgcluster  # noqa: E402

IDLE_S, INTERVAL_S, COUNT = 1, 1, 2
BOUND_S = IDLE_S + INTERVAL_S * COUNT
MARGIN_S = 3.0
NAME = "vanish/x"


def sh(*argv):
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


def lock_rows(pg, granted):
    return int(pg.sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted = %s"
                      % ("true" if granted else "false")) or 0)


def run(env, fail):
    tag = "%d" % (os.getpid() % 200 + 20)
    ns, here_if, there_if = "kagi-vanish-" + tag, "kvh" + tag, "kvt" + tag
    here_ip, there_ip = "10.213.%s.1" % tag, "10.213.%s.2" % tag
    try:
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", here_if, "type", "veth", "peer", "name", there_if)
        sh("ip", "link", "set", there_if, "netns", ns)
        sh("ip", "addr", "add", here_ip + "/24", "dev", here_if)
        sh("ip", "link", "set", here_if, "up")
        sh("ip", "netns", "exec", ns, "ip", "addr", "add", there_ip + "/24", "dev", there_if)
        sh("ip", "netns", "exec", ns, "ip", "link", "set", there_if, "up")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        with pgcluster.PgCluster(env, listen=here_ip) as pg:
            bounds = ["locks.postgres.keepalives_idle_s=%d" % IDLE_S,
                      "locks.postgres.keepalives_interval_s=%d" % INTERVAL_S,
                      "locks.postgres.keepalives_count=%d" % COUNT,
                      "locks.postgres.tcp_user_timeout_ms=%d" % (BOUND_S * 1000),
                      "locks.timeout_ms=60000", "locks.max_hold_ms=0"]
            # The vanishing host, over TCP to this side's address.
            far_port = harness.free_port()
            far_dsn = "host=%s port=%d dbname=postgres user=kagi" % (here_ip, pg.port)
            far = env.start(["ip", "netns", "exec", ns, env.demo, "--http",
                             "127.0.0.1:%d" % far_port] +
                            env.demo_settings(4, ["locks.backend=postgres",
                                                  "locks.postgres.dsn=" + far_dsn,
                                                  "locks.dir=" + env.path("far-locks"),
                                                  "data.dir=" + env.path("far-data")] + bounds),
                            "far.log")
            harness.wait_until("kagi-demo in the namespace", lambda: subprocess.run(
                ["ip", "netns", "exec", ns, "curl", "-sf", "-o", "/dev/null",
                 "http://127.0.0.1:%d/_test/hello" % far_port], capture_output=True).returncode
                == 0, timeout=30)
            holder = env.start(["ip", "netns", "exec", ns, "curl", "-s", "--max-time", "120",
                                "http://127.0.0.1:%d/_test/hold?name=%s&ms=60000"
                                % (far_port, NAME)], "far-curl.log")
            harness.wait_until("the far host to hold the lock", lambda: lock_rows(pg, True) == 1,
                               timeout=30)
            # This side's host waits for the name.
            port = harness.free_port()
            near = env.start([env.demo, "--http", "127.0.0.1:%d" % port] +
                             env.demo_settings(4, pg.lock_settings() + bounds), "near.log")
            harness.wait_for_port(port, near, "kagi-demo")
            answer = {}

            def wait():
                r = harness.request(port, "GET", "/_test/hold?name=%s&ms=0" % NAME, timeout=90)
                answer["at"] = time.monotonic()
                answer["status"] = r.status

            waiter = threading.Thread(target=wait, daemon=True)
            waiter.start()
            harness.wait_until("the near host to queue", lambda: lock_rows(pg, False) == 1,
                               timeout=30)
            time.sleep(0.5)
            fail.check("at" not in answer, "the waiter waits while the far host is there")
            cut_at = time.monotonic()
            sh("ip", "netns", "exec", ns, "ip", "link", "set", there_if, "down")
            waiter.join(60)
            fail.equal(answer.get("status"), 200, "the waiter is granted after the cut")
            if "at" in answer:
                took = answer["at"] - cut_at
                print("  lock of the vanished host free %.2f s after its network went (bound "
                      "%d s = idle %d + interval %d x %d probes)"
                      % (took, BOUND_S, IDLE_S, INTERVAL_S, COUNT), flush=True)
                fail.check(took < BOUND_S + MARGIN_S,
                           "granted within the bound plus %.0f s (%.2f s)" % (MARGIN_S, took))
                fail.check(took > IDLE_S * 0.5, "it took the keepalive path, not a FIN")
            harness.kill(holder.pid, 9)
            harness.kill(far.pid, 9)
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", here_if], capture_output=True)


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("skipped: needs root for ip netns (a second host in a network namespace)")
        sys.exit(77)
    harness.main(run, "postgres-vanish")
