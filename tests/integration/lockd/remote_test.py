"""kagi-lockd and clients on another host: the access rules and the dead-peer bound.

A second "host" is a network namespace joined to this one by a veth pair; kagi-lockd listens
on this side's address too, with lockd.allow naming the other host and a lockd.secret_file.
From the other host:
  - a client without AUTH is answered "error auth required ..." and closed;
  - a wrong secret is answered "error bad secret" and closed;
  - with the right AUTH a client locks;
  - with the other host's address left out of lockd.allow (a second server), it is refused at
    accept ("error not allowed ...").
  - lockd.max_connections_per_address bounds the other host's connections (loopback's are not
    counted there).
Then the other host holds a lock, a client on this side waits for it, and the other host's
link goes down: no FIN, no RST. kagi-lockd learns that the client is gone only from the TCP
keepalives it sets on accepted sockets. With TCP_USER_TIMEOUT set (lockd.user_timeout_ms, as by
default), Linux ends the connection at the first probe at least user_timeout after the peer
was last heard, and ignores the probe count: with idle 1 s, interval 1 s, 2 probes and a user
timeout of 5 s the bound is 1 + 1 x 4 = 5 s, not the 3 s the count alone would give. The
waiter must be granted after more than the count's 3 s and within 5 s plus a margin (printed).

Needs root (ip netns); without it the test is skipped (exit code 77) and says why.

    python3 remote_test.py --lockd BUILD/apps/lockd/kagi-lockd
"""

import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lockd_harness import Checks, Lockd, connect, parse_args, read_line, status  # noqa: E402

IDLE_S, INTERVAL_S, COUNT, USER_TIMEOUT_S = 1, 1, 2, 5
COUNT_BOUND_S = IDLE_S + INTERVAL_S * COUNT  # what the probe count alone would give: 3 s
# The first probe at least USER_TIMEOUT_S after the peer was last heard: 5 s.
BOUND_S = IDLE_S + INTERVAL_S * max(1, -(-(USER_TIMEOUT_S - IDLE_S) // INTERVAL_S))
MARGIN_S = 3.0
PER_ADDRESS = 2

# Run inside the namespace: connect, send the lines, print each answer line (hex), then hold
# the connection until killed.
FAR_CLIENT = r"""
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
s.sendall(sys.argv[3].encode().replace(b"|", b"\n"))
buf = b""
while buf.count(b"\n") < int(sys.argv[4]):
    c = s.recv(1)
    if not c:
        break
    buf += c
print(buf.hex(), flush=True)
time.sleep(600)
"""


def sh(*argv):
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


def far(ns, host, port, lines, answers):
    """A client in the namespace: its answers (as text) once they are in, and its process."""
    p = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", FAR_CLIENT, host,
                          str(port), lines, str(answers)], stdout=subprocess.PIPE, text=True)
    out = bytes.fromhex(p.stdout.readline().strip()).decode(errors="replace")
    return out, p


def main():
    args = parse_args()
    if os.geteuid() != 0:
        print("skipped: needs root for ip netns (a second host in a network namespace)")
        sys.exit(77)
    checks = Checks()
    tag = "%d" % (os.getpid() % 200 + 20)
    ns, here_if, there_if = "kagi-lockd-" + tag, "klh" + tag, "klt" + tag
    here_ip, there_ip = "10.214.%s.1" % tag, "10.214.%s.2" % tag
    secret = os.path.join(tempfile.mkdtemp(prefix="kagi-lockd-remote-"), "secret")
    with open(secret, "w") as f:
        f.write("s3cret\n")
    procs = []
    try:
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", here_if, "type", "veth", "peer", "name", there_if)
        sh("ip", "link", "set", there_if, "netns", ns)
        sh("ip", "addr", "add", here_ip + "/24", "dev", here_if)
        sh("ip", "link", "set", here_if, "up")
        sh("ip", "netns", "exec", ns, "ip", "addr", "add", there_ip + "/24", "dev", there_if)
        sh("ip", "netns", "exec", ns, "ip", "link", "set", there_if, "up")
        port = 7000 + int(tag)
        settings = ["--listen", "%s:%d" % (here_ip, port),
                    "--set", "lockd.secret_file=" + secret,
                    "--set", "lockd.keepalive_idle_s=%d" % IDLE_S,
                    "--set", "lockd.keepalive_interval_s=%d" % INTERVAL_S,
                    "--set", "lockd.keepalive_count=%d" % COUNT,
                    "--set", "lockd.user_timeout_ms=%d" % (USER_TIMEOUT_S * 1000),
                    "--set", "lockd.max_connections_per_address=%d" % PER_ADDRESS]
        # Refused: the other host is not in lockd.allow.
        with Lockd(args.lockd, settings) as closed:
            out, p = far(ns, here_ip, port, "PING|", 1)
            procs.append(p)
            checks.check(out.startswith("error not allowed: %s" % there_ip),
                         "a host not in lockd.allow is refused at accept: %r" % out)
            checks.check(call_local(closed.port) == b"pong", "loopback is always allowed")
        with Lockd(args.lockd, settings + ["--set", "lockd.allow=%s/32" % there_ip]) as server:
            out, p = far(ns, here_ip, port, "LOCK remote/x 0|", 1)
            procs.append(p)
            checks.check(out.startswith("error auth required"),
                         "from another host, a command before AUTH: %r" % out)
            out, p = far(ns, here_ip, port, "AUTH guess|", 1)
            procs.append(p)
            checks.check(out == "error bad secret\n", "a wrong secret: %r" % out)
            out, holder = far(ns, here_ip, port, "AUTH s3cret|LOCK remote/x|", 2)
            procs.append(holder)
            checks.check(out == "ok\nok\n", "with the secret, the other host locks: %r" % out)
            out, p = far(ns, here_ip, port, "AUTH s3cret|PING|", 2)
            procs.append(p)
            checks.check(out == "ok\npong\n", "a second connection from the other host: %r" % out)
            out, p = far(ns, here_ip, port, "AUTH s3cret|PING|", 1)
            procs.append(p)
            checks.check(out.startswith("error too many connections from %s" % there_ip),
                         "a third is over lockd.max_connections_per_address = %d: %r" %
                         (PER_ADDRESS, out))
            checks.check(all(call_local(server.port) == b"pong" for _ in range(5)),
                         "loopback is not counted with it")
            near = connect(server.port)
            near.sendall(b"LOCK remote/x 60000\n")
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and b'"waiting_ms"' not in b"".join(status(server.port)):
                time.sleep(0.01)
            lines = b"".join(status(server.port))
            checks.check(there_ip.encode() in lines and b'"waiting_ms"' in lines,
                         "STATUS shows the other host holding (by its address) and us waiting")
            time.sleep(0.5)
            cut_at = time.monotonic()
            sh("ip", "netns", "exec", ns, "ip", "link", "set", there_if, "down")
            near.settimeout(BOUND_S + MARGIN_S + 10)
            answer = read_line(near)
            took = time.monotonic() - cut_at
            print("     the vanished host's lock was free %.2f s after its network went (bound %d s:"
                  " the first probe (idle %d s, then every %d s) past user_timeout %d s; the %d"
                  " probes of keepalive_count alone would say %d s)" %
                  (took, BOUND_S, IDLE_S, INTERVAL_S, USER_TIMEOUT_S, COUNT, COUNT_BOUND_S),
                  flush=True)
            checks.check(answer.startswith(b"ok "), "the waiter is granted after the cut")
            checks.check(took < BOUND_S + MARGIN_S,
                         "within the keepalive bound plus %.0f s (%.2f s)" % (MARGIN_S, took))
            # The peer was last heard at most one interval before the cut (its last probe).
            checks.check(took > COUNT_BOUND_S + 0.5,
                         "after more than the count's %d s: TCP_USER_TIMEOUT decides (%.2f s)" %
                         (COUNT_BOUND_S, took))
    finally:
        for p in procs:
            p.kill()
            p.wait()
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", here_if], capture_output=True)
    checks.finish()


def call_local(port):
    s = connect(port)
    s.sendall(b"PING\n")
    answer = read_line(s)
    s.close()
    return answer


if __name__ == "__main__":
    main()
