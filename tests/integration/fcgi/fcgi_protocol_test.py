"""kagi's FastCGI record reader against a raw peer: what nginx and Apache never send but a
broken or hostile peer on the socket can. Garbage closes the connection (and only it);
FCGI_GET_VALUES is answered; params over the limit get 431; a body slower than
limits.body_timeout_ms gets 408 and the connection carries the next request. And what the
edge-triggered watch of a connection must not lose: a request sent along with the one before
it, and a body more than one read takes (256 KiB) sent at once, are answered at once; a
request sent with the end of its connection's input is answered and the connection closed; and
input that waits while a response is backed up is answered after it, no worker spinning on it
meanwhile."""

import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "frontends"))

import fcgi_client  # noqa: E402
import harness  # noqa: E402

BODY_TIMEOUT_MS = 1000
HEADER_LIMIT = 4096  # limits.max_header_bytes: params may be 2 x this + 8 KiB


def closed_by_kagi(sock, timeout=5.0):
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
        return True
    except ConnectionError:
        return True
    except OSError:
        return False


def cpu_seconds(pid):
    """User + system CPU time of process `pid` so far."""
    fields = open("/proc/%d/stat" % pid).read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_edges(env, fail):
    """No event announces bytes that are already waiting: kagi must look again by itself."""
    port = harness.free_port()
    kagi = env.start([env.demo, "--fcgi", "127.0.0.1:%d" % port] + env.demo_settings(
        2, ["limits.body_timeout_ms=%d" % BODY_TIMEOUT_MS, "limits.max_body_bytes=4194304",
            "limits.max_field_bytes=4194304"]),
        "kagi-tcp.out")
    harness.wait_for_port(port, kagi, "kagi")
    c = fcgi_client.Conn(("127.0.0.1", port))
    # Two requests in one write: the second is read along with the first, and buffered.
    for i in range(20):
        t0 = time.monotonic()
        c.sock.sendall(fcgi_client.request_bytes("GET", "/_test/echo?n=%d" % (2 * i))
                       + fcgi_client.request_bytes("GET", "/_test/echo?n=%d" % (2 * i + 1)))
        first, second = c.read_response(), c.read_response()
        took = time.monotonic() - t0
        ok = (first.status == 200 and b"arg n=%d\n" % (2 * i) in first.body
              and second.status == 200 and b"arg n=%d\n" % (2 * i + 1) in second.body)
        if not ok or took > 0.5 or i == 19:
            fail.check(ok and took <= 0.5, "two requests in one write: both answered, in order, "
                       "at once (round %d, %.3f s)" % (i, took))
            break
    # Bodies of 3 MiB sent at once: a worker reads 256 KiB per event, then must look again
    # (over TCP, the kernel holds far more than that before kagi reads).
    token = c.request("GET", "/_test/echo").body.split(b"csrf ")[1].split(b"\n")[0].decode()
    body = ("_csrf=%s&a=" % token).encode() + b"x" * (3 * 1024 * 1024)
    form = {"Content-Type": "application/x-www-form-urlencoded", "Cookie": "kagi_csrf=" + token}
    for i in range(5):
        t0 = time.monotonic()
        c.sock.sendall(fcgi_client.request_bytes("POST", "/_test/echo", body, form))
        r = c.read_response()
        took = time.monotonic() - t0
        ok = r.status == 200 and b"field a=xxxx" in r.body
        if not ok or took > BODY_TIMEOUT_MS / 2000.0 or i == 4:
            fail.check(ok and took <= BODY_TIMEOUT_MS / 2000.0,
                       "a 3 MiB body sent at once is read to its end at once (try %d: %d "
                       "after %.3f s)" % (i, r.status, took))
            break
    c.close()

    # A request and then the end of the input, at once: answered, then the connection closed
    # (the edge that said the input ended came with the request's bytes).
    for i in range(10):
        h = fcgi_client.Conn(("127.0.0.1", port))
        h.sock.sendall(fcgi_client.request_bytes("GET", "/_test/echo?half=%d" % i))
        h.sock.shutdown(socket.SHUT_WR)
        r = h.read_response()
        closed = closed_by_kagi(h.sock, 3.0)
        h.close()
        if r.status != 200 or not closed or i == 9:
            fail.check(r.status == 200 and closed, "a request sent with the end of the input is "
                       "answered and its connection closed (try %d: %d, closed %s)"
                       % (i, r.status, closed))
            break

    # A response the client does not read (3 MiB, a small receive buffer) while its next
    # request waits: no worker spins meanwhile, and both are answered once it reads.
    b = fcgi_client.Conn(("127.0.0.1", port), rcvbuf=4096)
    b.sock.sendall(fcgi_client.request_bytes("POST", "/_test/echo", body, form))
    time.sleep(0.5)  # kagi has written what the buffers take, and waits for the rest
    b.sock.sendall(fcgi_client.request_bytes("GET", "/_test/echo?n=after"))
    before = cpu_seconds(kagi.pid)
    time.sleep(1.0)
    spent = cpu_seconds(kagi.pid) - before
    fail.check(spent < 0.3, "no worker spins on a response backed up while input waits "
               "(%.2f s of CPU in 1 s)" % spent)
    big, after = b.read_response(), b.read_response()
    fail.check(big.status == 200 and len(big.body) > 3 * 1024 * 1024
               and after.status == 200 and b"arg n=after" in after.body,
               "the backed-up response and the request sent meanwhile are both answered "
               "(%d, %d bytes; %d)" % (big.status, len(big.body), after.status))
    b.close()
    fail.check(kagi.poll() is None, "kagi (TCP) still running")


def test(env, fail):
    test_edges(env, fail)
    path = env.path("kagi.sock")
    kagi = env.start([env.demo, "--fcgi", "unix:" + path] + env.demo_settings(
        2, ["limits.body_timeout_ms=%d" % BODY_TIMEOUT_MS,
            "limits.max_header_bytes=%d" % HEADER_LIMIT]), "kagi.out")
    harness.wait_for_unix(path)

    # Garbage: an HTTP request on the FastCGI socket.
    g = socket.socket(socket.AF_UNIX)
    g.connect(path)
    g.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    fail.check(closed_by_kagi(g), "HTTP spoken to the FastCGI socket: connection closed")
    g.close()
    fail.equal(fcgi_client.Conn(path).request("GET", "/_test/echo").status, 200,
               "others are served after it")

    # FCGI_GET_VALUES (management record, request id 0).
    c = fcgi_client.Conn(path)
    c.sock.sendall(fcgi_client._record(9, 0, b"\x0f\x00FCGI_MPXS_CONNS"))
    header = c._read(8)
    _, rtype, rid, length, pad = struct.unpack("!BBHHBx", header)
    content = c._read(length)
    c._read(pad)
    fail.check(rtype == 10 and rid == 0 and content == b"\x0f\x01FCGI_MPXS_CONNS0",
               "FCGI_GET_VALUES answered: no multiplexing (%r)" % content)
    fail.equal(c.request("GET", "/_test/echo").status, 200, "the connection then serves requests")

    # Params over the limit: 431, and the connection goes on.
    r = c.request("GET", "/_test/echo", headers={"X-Big": "v" * (3 * HEADER_LIMIT + 8192)})
    fail.equal(r.status, 431, "params over 2 x limits.max_header_bytes + 8 KiB")
    fail.equal(c.request("GET", "/_test/echo").status, 200, "same connection works after 431")

    # A body that stops coming: 408 at the deadline; the rest of it is skipped and the
    # connection carries the next request (Apache reuses it after the 408).
    params = {"REQUEST_METHOD": "POST", "REQUEST_URI": "/_test/echo", "CONTENT_LENGTH": "100",
              "CONTENT_TYPE": "application/x-www-form-urlencoded"}
    data = fcgi_client._record(fcgi_client.BEGIN_REQUEST, 1,
                               struct.pack("!HB5x", fcgi_client.RESPONDER, fcgi_client.KEEP_CONN))
    data += fcgi_client._record(fcgi_client.PARAMS, 1, fcgi_client._params(params))
    data += fcgi_client._record(fcgi_client.PARAMS, 1)
    data += fcgi_client._record(fcgi_client.STDIN, 1, b"a=" + b"x" * 8)
    t0 = time.monotonic()
    c.sock.sendall(data)
    r = c.read_response()
    took = time.monotonic() - t0
    fail.check(r.status == 408 and BODY_TIMEOUT_MS / 1000.0 * 0.9 <= took <= BODY_TIMEOUT_MS / 1000.0 + 2,
               "a stalled body gets 408 at limits.body_timeout_ms (%d after %.2f s)"
               % (r.status, took))
    c.sock.sendall(fcgi_client._record(fcgi_client.STDIN, 1, b"y" * 90)
                   + fcgi_client._record(fcgi_client.STDIN, 1))
    r = c.request("GET", "/_test/echo?after=408")
    fail.check(r.status == 200 and b"arg after=408" in r.body,
               "the rest of that body is skipped; the next request on the connection is served")
    c.close()
    fail.check(kagi.poll() is None, "kagi still running")


if __name__ == "__main__":
    harness.main(test, "fcgi-protocol")
