"""Open files. kagi-demo raises its soft RLIMIT_NOFILE to the hard limit at start and logs
it (every connection costs a descriptor; shells and systemd give 1024 by default). And when
it runs out anyway (EMFILE on accept), the FastCGI front end pauses accepting and retries
without spinning or flooding its log, and serves again once descriptors are free."""

import os
import resource
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "frontends"))

import fcgi_client  # noqa: E402
import harness  # noqa: E402

LOW_LIMIT = 64  # soft = hard: kagi cannot raise it
CONNECTIONS = 200  # far more than fit
WINDOW_S = 2.0
# Over the window, a spinning accept loop burns about the whole window in CPU time; one
# retry every 100 ms costs next to nothing. Generous: the machine is shared.
CPU_BOUND_S = 0.4
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / float(TICK)  # utime + stime


def soft_nofile(pid):
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    return None


def with_nofile(soft, hard):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def log_text(env, name):
    return open(env.path(name), errors="replace").read()


def test(env, fail):
    # 1. The soft limit is raised to the hard one, and the log says so.
    sock = env.path("raise.sock")
    proc = env.start([env.demo, "--fcgi", "unix:" + sock] + env.demo_settings(2), "raise.out",
                     preexec_fn=with_nofile(256, 2048))
    harness.wait_for_unix(sock)
    fail.equal(soft_nofile(proc.pid), 2048, "soft open-file limit raised to the hard limit")
    fail.check("open files limit 2048 (raised from 256)" in log_text(env, "raise.out"),
               "the raise is logged")
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=15)

    # 2. Out of descriptors: no spin, one log line, recovery.
    sock = env.path("low.sock")
    proc = env.start([env.demo, "--fcgi", "unix:" + sock] + env.demo_settings(2), "low.out",
                     preexec_fn=with_nofile(LOW_LIMIT, LOW_LIMIT))
    harness.wait_for_unix(sock)
    fail.check("low for a busy site" in log_text(env, "low.out"), "a low limit is warned about")
    held = []
    for _ in range(CONNECTIONS):
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(2)
        try:
            s.connect(sock)
        except OSError:
            s.close()
            break  # the backlog is full too: enough
        held.append(s)
    harness.wait_until("kagi out of descriptors", lambda: "pausing accepts" in
                       log_text(env, "low.out"), 10)
    print("held %d connections; kagi hit its limit of %d descriptors" % (len(held), LOW_LIMIT))
    # One client goes away: kagi closes that connection, and the descriptor it frees lets one
    # queued connection in before the next accept fails again. Still the same episode: at
    # the limit, descriptors come and go; one line for it, not two per flap.
    held.pop(0).close()
    cpu0 = cpu_seconds(proc.pid)
    wall0 = time.monotonic()
    # A measuring window, not a synchronisation: how much CPU and log does the stuck state
    # cost per unit of time.
    time.sleep(WINDOW_S)
    used = cpu_seconds(proc.pid) - cpu0
    wall = time.monotonic() - wall0
    lines = log_text(env, "low.out").count("pausing accepts")
    print("while out of descriptors: %.2f s CPU in %.2f s, %d 'pausing accepts' log line(s)"
          % (used, wall, lines))
    fail.check(used <= CPU_BOUND_S, "no spinning: %.2f s CPU in %.1f s (bound %.1f s)"
               % (used, wall, CPU_BOUND_S))
    fail.check(lines == 1, "one log line for the episode, not one per retry (%d)" % lines)

    for s in held:
        s.close()

    def served():
        try:
            return fcgi_client.Conn(sock, timeout=2).request("GET", "/_test/echo").status == 200
        except OSError:
            return False
    try:
        harness.wait_until("a request served again", served, 15)
        fail.check(True, "serves again once descriptors are free")
    except AssertionError as e:
        fail.check(False, "serves again once descriptors are free: %s" % e)
    # The episode ends (one line) once accepts have worked for a second without a failure.
    try:
        harness.wait_until("the recovery log line",
                           lambda: "accepting again" in log_text(env, "low.out"), 5)
    except AssertionError:
        pass
    fail.check("accepting again" in log_text(env, "low.out"), "the recovery is logged")
    fail.check(proc.poll() is None, "kagi still running")


if __name__ == "__main__":
    harness.main(test, "fcgi-fd-limit")
