"""The embedded HTTP front end's deadlines (server.idle_timeout_ms), per phase and not per read.

A connection's deadline moves with every request, and moving it costs no timer operation: the
connection's one timer wait wakes when it was set for and waits again if the deadline moved
later meanwhile. These checks hold it to what the deadline promises, with the timeout at 1 s:

- a connection that sends nothing is closed after about the timeout;
- a client dripping its header block one byte at a time (each read well inside the timeout)
  is still closed after about the timeout: the deadline is the whole header block's;
- a kept-alive client that sends a request every 0.3 s for 3 s (three timeouts) is served
  every time: each request moves the deadline later, and the timer's earlier wake-ups only
  wait again;
- after its last answer, that connection is closed about one timeout later.
"""

import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "frontends"))
import harness  # noqa: E402

TIMEOUT_S = 1.0


def closed_after(s, limit):
    """Seconds until the server closes `s` (reading and dropping what it sends), or None when
    it is still open after `limit` seconds."""
    t0 = time.monotonic()
    s.settimeout(0.05)
    while time.monotonic() - t0 < limit:
        try:
            if not s.recv(65536):
                return time.monotonic() - t0
        except socket.timeout:
            continue
        except ConnectionResetError:
            return time.monotonic() - t0
    return None


def test(env, fail):
    port = harness.free_port()
    proc = env.start([env.demo, "--http", "127.0.0.1:%d" % port] + env.demo_settings(
        2, ["server.idle_timeout_ms=%d" % (TIMEOUT_S * 1000)]), "kagi-deadline.out")
    harness.wait_for_port(port, proc, "kagi-demo --http")

    silent = socket.create_connection(("127.0.0.1", port))
    took = closed_after(silent, 5 * TIMEOUT_S)
    fail.check(took is not None and 0.5 * TIMEOUT_S <= took <= 2.5 * TIMEOUT_S,
               "a connection that sends nothing: closed after %s s (timeout %.1f s)"
               % ("%.2f" % took if took is not None else "no close", TIMEOUT_S))

    drip = socket.create_connection(("127.0.0.1", port))
    header = b"GET /_test/hello HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
    t0 = time.monotonic()
    sent = 0
    try:
        while time.monotonic() - t0 < 5 * TIMEOUT_S and sent < len(header):
            drip.sendall(header[sent:sent + 1])
            sent += 1
            time.sleep(0.1)
    except (BrokenPipeError, ConnectionResetError):
        pass
    rest = closed_after(drip, 5 * TIMEOUT_S)
    took = time.monotonic() - t0 if rest is not None else None
    fail.check(took is not None and took <= 2.5 * TIMEOUT_S,
               "a header dripped a byte per 0.1 s: closed after %s s, not kept open by its reads"
               % ("%.2f" % took if took is not None else "no close"))

    kept = socket.create_connection(("127.0.0.1", port))
    statuses = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3 * TIMEOUT_S:
        try:
            kept.sendall(b"GET /_test/hello HTTP/1.1\r\nHost: x\r\n\r\n")
            kept.settimeout(5)
            statuses.append(harness.read_answer(kept))
        except OSError as e:  # closed under the client: the deadline did not move
            statuses.append(str(e))
            break
        time.sleep(0.3)
    fail.check(len(statuses) >= 8 and all(s == 200 for s in statuses),
               "a request every 0.3 s for %.0f timeouts on one connection: all answered (%s)"
               % (3, statuses))
    took = closed_after(kept, 5 * TIMEOUT_S)
    fail.check(took is not None and took <= 2.5 * TIMEOUT_S,
               "then idle: closed after %s s" % ("%.2f" % took if took is not None else "no close"))
    fail.check(proc.poll() is None, "kagi-demo still running")


if __name__ == "__main__":
    harness.main(test, "http-deadline")
