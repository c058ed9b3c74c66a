"""The embedded HTTP front end refuses what it must not accept, with bounded buffers, and
notices a client that leaves while its request is parked.

- Framing a proxy in front could read differently (request smuggling): a Transfer-Encoding
  other than a single `chunked`, Transfer-Encoding with Content-Length, obs-fold header
  lines, HTTP/1.1 without exactly one Host → 400 and the connection closed, and the bytes
  behind the bad request are never served as a request of their own.
- A chunk extension or a trailer that never ends → 400 after a bounded number of bytes
  (they used to grow the read buffer without limit).
- A pipelining client gets its answers without waiting for delayed ACKs (TCP_NODELAY), and a
  batch of pipelined requests is answered in one write, not one per answer (the server
  socket's data_segs_out, from `ss`: 32 before, 1 now); answers behind an incomplete request
  are not held back for it.
- A parked long-poll whose client closes is freed and its socket closed within the chat's
  sweep period (it used to stay until its deadline); a request pipelined behind a parked one
  is served after it, in order.
"""

import os
import re
import select
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "frontends"))
import harness  # noqa: E402

HEADER_LIMIT = 8192
BODY_LIMIT = 65536
SMUGGLED = b"GET /_test/echo?smuggled=1 HTTP/1.1\r\nHost: x\r\n\r\n"


def exchange(port, raw, timeout=5.0):
    """Sends `raw`, then reads until the server closes or `timeout` passes.
    Returns (bytes read, whether the server closed)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(raw)
        data = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                return data, False
            except ConnectionResetError:
                return data, True
            if not chunk:
                return data, True
            data += chunk
        return data, False
    finally:
        s.close()


def status_of(data):
    if not data.startswith(b"HTTP/1."):
        return None
    return int(data.split(b" ", 2)[1])


def statuses(data, whole=False):
    """The status of each response in `data`, walking them by their Content-Length; with
    `whole`, only those whose body is all there."""
    out = []
    while data.startswith(b"HTTP/1."):
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            break
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if whole and len(rest) < length:
            break
        out.append(int(head.split(b" ", 2)[1]))
        data = rest[length:]
    return out


def read_answers(s, count):
    """Reads from `s` until `count` whole answers are in, or the server closes."""
    return harness.recv_until(s, lambda data: len(statuses(data, whole=True)) >= count)


def check_refused(fail, port, label, raw):
    data, closed = exchange(port, raw + SMUGGLED)
    fail.equal(statuses(data), [400], label + ": one answer, 400 (nothing smuggled)")
    fail.check(closed, label + ": connection closed after the 400")


def endless(port, head, filler, limit_bytes=8 << 20, seconds=10.0):
    """Sends `head`, then `filler` over and over (at most limit_bytes, seconds). Returns
    (status of the answer or None, bytes of filler sent before the server answered/closed)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(head)
    sent = 0
    deadline = time.monotonic() + seconds
    s.setblocking(False)
    data = b""
    try:
        while sent < limit_bytes and time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                if b"\r\n\r\n" in data:
                    break
            except BlockingIOError:
                pass
            except ConnectionResetError:
                break
            try:
                sent += s.send(filler)
            except BlockingIOError:
                # The socket buffers are full: wait until the server reads or answers.
                select.select([s], [s], [], max(0.0, deadline - time.monotonic()))
            except (BrokenPipeError, ConnectionResetError):
                break
        # What the server answered (if anything) once the sending stops.
        s.setblocking(True)
        s.settimeout(3)
        try:
            while b"\r\n\r\n" not in data:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        except (socket.timeout, ConnectionResetError):
            pass
    finally:
        s.close()
    return status_of(data), sent


def server_side_state(server_port, client_port):
    """The TCP state (hex, as in /proc/net/tcp) of the server's end of the connection from
    client_port, or None once it is gone. "08" is CLOSE_WAIT: the client closed and the
    server has not closed its socket yet."""
    want_local = ":%04X" % server_port
    want_remote = ":%04X" % client_port
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1].endswith(want_local) and fields[2].endswith(want_remote):
                return fields[3]
    return None


def stats(port):
    import json
    return json.loads(harness.request(port, "GET", "/chat/stats.json").text())


def test(env, fail):
    port = harness.free_port()
    proc = env.start([env.demo, "--http", "127.0.0.1:%d" % port]
                     + env.demo_settings(4, ["limits.max_body_bytes=%d" % BODY_LIMIT,
                                             "limits.max_header_bytes=%d" % HEADER_LIMIT]),
                     "kagi-http.out")
    harness.wait_for_port(port, proc, "kagi-demo --http")

    # Controls: what must keep working.
    data, _ = exchange(port, b"POST /_test/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                             b"Connection: close\r\n\r\n3;ext=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\n")
    fail.equal(status_of(data), 403, "chunked POST with an extension and a trailer is read "
               "(403: no CSRF token)")
    data, _ = exchange(port, b"GET /_test/echo HTTP/1.0\r\n\r\n")
    fail.equal(status_of(data), 200, "HTTP/1.0 without Host")
    data, _ = exchange(port, b"GET /_test/echo HTTP/1.1\r\nHost: x\r\nX-Tab:\tv\r\n"
                             b"Connection: close\r\n\r\n")
    fail.equal(status_of(data), 200, "a tab inside a field value is not a fold")

    # Framing that must be refused.
    post = b"POST /_test/echo HTTP/1.1\r\nHost: x\r\n"
    check_refused(fail, port, "TE: gzip", post + b"Transfer-Encoding: gzip\r\n\r\n")
    check_refused(fail, port, "TE: identity", post + b"Transfer-Encoding: identity\r\n\r\n")
    check_refused(fail, port, "TE: chunked, gzip",
                  post + b"Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n")
    check_refused(fail, port, "TE: gzip, chunked",
                  post + b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n")
    check_refused(fail, port, "TE: gzip then TE: chunked",
                  post + b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    check_refused(fail, port, "TE: chunked twice",
                  post + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    check_refused(fail, port, "TE: gzip + Content-Length",
                  post + b"Transfer-Encoding: gzip\r\nContent-Length: 0\r\n\r\n")
    check_refused(fail, port, "TE: chunked + Content-Length",
                  post + b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n")
    check_refused(fail, port, "Content-Length + TE: chunked",
                  post + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    check_refused(fail, port, "HTTP/1.0 with TE: chunked",
                  b"POST /_test/echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    check_refused(fail, port, "obs-fold (space)",
                  b"GET /_test/echo HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n")
    check_refused(fail, port, "obs-fold (tab)",
                  b"GET /_test/echo HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\tfolded\r\n\r\n")
    check_refused(fail, port, "obs-fold hiding a Transfer-Encoding",
                  post + b"X-A: 1\r\n Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n")
    check_refused(fail, port, "HTTP/1.1 without Host", b"GET /_test/echo HTTP/1.1\r\n\r\n")
    check_refused(fail, port, "HTTP/1.1 with two Host fields",
                  b"GET /_test/echo HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")

    # Bounded buffers: chunked framing that never ends.
    chunked = post + b"Transfer-Encoding: chunked\r\n\r\n"
    rss0 = rss_kib(proc.pid)
    status, sent = endless(port, chunked + b"5;", b"a" * 4096)
    fail.check(status == 400 and sent < 4 << 20,
               "endless chunk extension: 400 after %d bytes (status %r)" % (sent, status))
    status, sent = endless(port, chunked + b"3\r\nabc\r\n0\r\nX-Trailer: ", b"b" * 4096)
    fail.check(status == 400 and sent < 4 << 20,
               "endless trailer: 400 after %d bytes (status %r)" % (sent, status))
    status, sent = endless(port, b"GET /_test/echo HTTP/1.1\r\nHost: x\r\nX-Long: ", b"c" * 4096)
    fail.check(status == 431 and sent < 4 << 20,
               "endless header line: 431 after %d bytes (status %r)" % (sent, status))
    grew = rss_kib(proc.pid) - rss0
    fail.check(grew < 64 * 1024, "RSS grew %d KiB during the endless requests" % grew)
    # The limits still hold inside the chunked body itself.
    data, _ = exchange(port, chunked + b"%x\r\n" % (BODY_LIMIT + 1) + b"z" * (BODY_LIMIT + 1))
    fail.equal(status_of(data), 413, "a chunk larger than limits.max_body_bytes")

    # A parked long-poll whose client leaves is freed, and its socket closed, promptly.
    before = stats(port)
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    client_port = s.getsockname()[1]
    s.sendall(b"GET /chat/lobby/messages?since=0&wait=30 HTTP/1.1\r\nHost: x\r\n\r\n")
    harness.wait_until("the long-poll to park", lambda: stats(port)["parked"] == 1, 5)
    s.close()
    t0 = time.monotonic()
    try:
        harness.wait_until("the gone long-poll to be freed",
                           lambda: stats(port)["gone"] == before["gone"] + 1
                           and stats(port)["parked"] == 0, 5)
        fail.check(True, "long-poll of a closed client freed in %.2fs" % (time.monotonic() - t0))
    except AssertionError as e:
        fail.check(False, str(e))
    try:
        harness.wait_until("the server to close its socket",
                           lambda: server_side_state(port, client_port) != "08", 5)
        fail.check(True, "its socket closed by the server in %.2fs" % (time.monotonic() - t0))
    except AssertionError as e:
        fail.check(False, "%s (still in CLOSE_WAIT)" % e)

    # A request pipelined behind a parked one is answered after it, in order, intact.
    data, _ = exchange(port, b"GET /chat/lobby/messages?since=0&wait=1 HTTP/1.1\r\nHost: x\r\n\r\n"
                             b"GET /_test/echo?after=parked HTTP/1.1\r\nHost: x\r\n"
                             b"Connection: close\r\n\r\n", timeout=10)
    fail.check(statuses(data) == [200, 200] and data.find(b"arg after=parked") > data.find(b"["),
               "pipelined request behind a parked one: two 200s in order (%r)" % statuses(data))
    # And a client that sends its next request while the first is parked is not taken for gone.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /chat/lobby/messages?since=0&wait=1 HTTP/1.1\r\nHost: x\r\n\r\n")
    harness.wait_until("the long-poll to park", lambda: stats(port)["parked"] >= 1, 5)
    s.sendall(b"GET /_test/echo?n=2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = harness.recv_until(s)
    s.close()
    fail.check(statuses(data) == [200, 200] and b"arg n=2" in data,
               "next request sent while parked: both answered (%r)" % statuses(data))
    answer_heads(fail, port)
    pipelined_rounds(fail, port)
    coalesced_answers(fail, port)
    continue_after_answers(fail, port)
    idle_output_memory(fail, port)
    fail.check(proc.poll() is None, "kagi-demo still running")


def answer_heads(fail, port):
    """How the front end frames its answers: the length, the connection, bodiless statuses."""
    for code in (204, 304):
        data, closed = exchange(port, b"GET /_test/status?code=%d HTTP/1.1\r\nHost: x\r\n"
                                b"Connection: close\r\n\r\n" % code)
        status, fields, rest = harness.split_answer(data)
        fail.equal(status, code, "GET /_test/status?code=%d" % code)
        fail.check("content-length" not in fields and rest == b"" and closed,
                   "a %d answer has no Content-Length and no body: %r" % (code, data[:300]))
    data, closed = exchange(port, b"GET /_test/status?code=200 HTTP/1.1\r\nHost: x\r\n"
                            b"Connection: close\r\n\r\n")
    status, fields, rest = harness.split_answer(data)
    fail.check(status == 200 and fields.get("content-length") == "0" and rest == b"",
               "an empty 200 says Content-Length: 0: %r" % data[:300])
    fail.check(fields.get("connection") == "close" and closed,
               "Connection: close is answered with Connection: close, then the close")
    data, closed = exchange(port, b"HEAD /_test/hello HTTP/1.1\r\nHost: x\r\n"
                            b"Connection: close\r\n\r\n")
    status, fields, rest = harness.split_answer(data)
    fail.check(status == 200 and fields.get("content-length") == "6" and rest == b"",
               "HEAD states the GET's length and sends no body: %r" % data[:300])
    # HTTP/1.0 keeps the connection only when asked, and says so.
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        for i in range(2):
            s.sendall(b"GET /_test/hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            status, fields, body = harness.read_answer_parts(s)
            fail.check(status == 200 and body == b"hello\n" and
                       fields.get("connection", "").lower() == "keep-alive",
                       "HTTP/1.0 keep-alive answer %d: %r %r" % (i + 1, status, fields))
    finally:
        s.close()
    data, closed = exchange(port, b"GET /_test/hello HTTP/1.0\r\n\r\n")
    status, fields, rest = harness.split_answer(data)
    fail.check(status == 200 and "connection" not in fields and rest == b"hello\n" and closed,
               "HTTP/1.0 without keep-alive: answered, then closed: %r" % data[:300])


def heap_in_use(port):
    import json
    return json.loads(harness.request(port, "GET", "/_test/heap").text())["in_use"]


def idle_output_memory(fail, port, count=100):
    """A kept-alive connection holds no more memory after a big answer than after a small one:
    the buffer its answers were written from is given back (it was kept, answer-sized, on every
    idle connection)."""
    def per_connection(path):
        time.sleep(0.3)  # connections of the last round closed and freed
        before = heap_in_use(port)
        kept = []
        for _ in range(count):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
            read_answers(s, 1)
            kept.append(s)
        time.sleep(0.3)
        grown = heap_in_use(port) - before
        for s in kept:
            s.close()
        return grown / count
    small = per_connection("/_test/hello")
    big = per_connection("/_test/echo?x=" + "a" * 8000)
    fail.check(big - small < 2048, "an idle connection after an 8 KB answer holds %.0f B more "
               "than after a 6-byte one (%.0f against %.0f; want < 2048)" % (big - small, big,
                                                                             small))


def continue_after_answers(fail, port):
    """A request that expects 100-continue, pipelined behind one being answered: the 100 goes
    out after that answer, through the same output (it used to be written on its own, ahead of
    the answer still queued, and could interleave with a write in progress)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /_test/hello HTTP/1.1\r\nHost: x\r\n\r\n"
              b"POST /_test/echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
              b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 3\r\n"
              b"Connection: close\r\n\r\n")
    s.settimeout(5)
    data = harness.recv_until(s, lambda d: b"100 Continue" in d)
    hello, cont = data.find(b"HTTP/1.1 200"), data.find(b"HTTP/1.1 100 Continue")
    fail.check(0 <= hello < cont, "the 100 Continue follows the answer before it (200 at %d, "
               "100 at %d)" % (hello, cont))
    s.sendall(b"a=1")
    data = harness.recv_until(s, data=data)
    s.close()
    fail.check(data.count(b"HTTP/1.1 ") == 3, "then the body's request is answered (%d "
               "answers in all, want 3)" % data.count(b"HTTP/1.1 "))


def server_data_segments(port, client_port):
    """data_segs_out of the server's side of one connection (ss, from iproute2)."""
    out = subprocess.run(["ss", "-tinH", "state", "established",
                          "( sport = :%d and dport = :%d )" % (port, client_port)],
                         stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
    found = re.search(r"data_segs_out:(\d+)", out)
    return int(found.group(1)) if found else None


def coalesced_answers(fail, port, depth=32):
    """A batch of pipelined requests that arrives at once leaves as one write of all the answers
    (each answer its own write was `depth` segments). The answers before a request that is not
    complete yet are written at once, not held back until it is."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /_test/hello HTTP/1.1\r\nHost: x\r\n\r\n" * depth)
    data = read_answers(s, depth)
    fail.equal(len(statuses(data)), depth, "a pipelined batch: every answer")
    segments = server_data_segments(port, s.getsockname()[1])
    fail.check(segments is not None and segments <= 2,
               "a batch of %d pipelined answers left in %s data segments (one write each: %d)"
               % (depth, segments, depth))
    s.sendall(b"GET /_test/echo?first=1 HTTP/1.1\r\nHost: x\r\n\r\nGET /_test/echo?second")
    s.settimeout(5)
    data = harness.recv_until(s, lambda d: b"first=1" in d)
    fail.check(statuses(data) == [200], "the answer before an incomplete request is written "
               "without waiting for it (%r)" % statuses(data))
    s.sendall(b"=2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = harness.recv_until(s, data=data)
    s.close()
    fail.check(statuses(data) == [200, 200] and b"second=2" in data,
               "then the completed request is answered (%r)" % statuses(data))


def pipelined_rounds(fail, port, rounds=20, depth=8):
    """A pipelining client sends `depth` requests at once and waits for all the answers before
    its next batch. Answers written one by one must not wait for the ACK of the one before
    (Nagle): the client delays that ACK (up to 40 ms) while it waits for the rest, so each
    round took 40 ms and 20 rounds 0.8 s. Now each round is a few ms."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    batch = b"GET /_test/hello HTTP/1.1\r\nHost: x\r\n\r\n" * depth
    answered = 0
    t0 = time.monotonic()
    for _ in range(rounds):
        s.sendall(batch)
        answered += len(statuses(read_answers(s, depth)))
    took = time.monotonic() - t0
    s.close()
    fail.equal(answered, rounds * depth, "pipelined batches all answered")
    fail.check(took < 0.4, "%d rounds of %d pipelined requests took %.0f ms (Nagle would make "
               "it about %d ms: under 400)" % (rounds, depth, took * 1000, rounds * 40))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


if __name__ == "__main__":
    harness.main(test, "http-framing")
