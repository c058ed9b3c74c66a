#!/usr/bin/env python3
"""Many parked long-polls on one host: through nginx (2 kagi-demo processes) and on the
embedded HTTP front end (one kagi-demo process).

  usage: chat_waiters_test.py KAGI_DEMO SOURCE_DIR [--count N] [--strict] [--front nginx|http]

For each front end: N clients park GET /chat/lobby/messages?since=LAST&wait=120 (opened in
batches, each batch parked before the next). While they wait, other pages are asked one after
another and their p50/p99 printed. Then one message is said, and every waiter must get exactly
that message; p50/p99 of its arrival, counted from the say request, are printed. The heap that
kagi's processes hold per parked request is printed too: malloc's bytes in use (mallinfo2,
through /_test/heap) while parked minus before, divided by N; kernel socket buffers are not in
it.

The goals (issue: 10,000 waiters, delivery p99 <= 500 ms, other pages p99 <= 20 ms, <= 4 KiB of
heap per parked request) are asserted only with --strict (scripts/bench runs --count 10000
--strict). Without it (scripts/test: --count 2000) the same is printed and only correctness is
asserted, with sanity bounds a loaded machine keeps: every waiter answered exactly once with
the message, p99 under 10 s, pages under 5 s. The heap goal is asserted in both.

The machine's open-file limit bounds N: nginx holds a client and an upstream connection per
waiter, so it runs 2 workers (reuseport), each below the 20,000 limit; docs/DEPLOY.md gives the
production settings.
"""

import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import shutil
import select
import signal
import socket
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (check, free_port, http, parse_response, percentile, run_site,  # noqa: E402
                     wait_until)

ROOM = "lobby"
SETS = ["data.fsync=never", "chat.rooms=lobby,other", "test.routes=true",
        "chat.say_per_minute=0", "chat.max_waiters=20000",
        "chat.max_waiters_per_client=20000"]
BATCH = 500


class Front:
    """What the measurement needs from one front end: its port, how to read its processes'
    counters and heap, and its CSRF token."""

    def __init__(self, name, port, stats, heap):
        self.name, self.port, self.stats, self.heap = name, port, stats, heap
        status, headers, _ = asyncio.run(http(port, "GET", "/chat/"))
        m = re.search(r"kagi_csrf=([0-9a-f]+)", headers.get("set-cookie", ""))
        check(status == 200 and m, "%s: GET /chat/ sets a kagi_csrf cookie" % name)
        token = m.group(1)
        self.post_headers = {"Cookie": "kagi_csrf=" + token, "X-CSRF-Token": token,
                             "Content-Type": "application/json"}

    def parked_total(self):
        return sum(s["parked_total"] for s in self.stats())

    def parked(self):
        return sum(s["parked"] for s in self.stats())


def start_profile(front_name):
    """KAGI_WAITERS_PERF=DIR: a system-wide `perf record -g` from the say until the last waiter
    has its answer, into DIR/waiters-<front>.perf.data (where the delivery's time goes)."""
    out_dir = os.environ.get("KAGI_WAITERS_PERF")
    if not out_dir:
        return None
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "waiters-%s.perf.data" % re.sub(r"[^a-z]+", "-", front_name))
    proc = subprocess.Popen(["perf", "record", "-q", "-a", "-g", "-e", "cpu-clock", "-o", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)  # perf is recording once it has opened its events
    return proc


def stop_profile(proc):
    if proc:
        proc.send_signal(signal.SIGINT)
        proc.wait()


class ParkedPolls:
    """The parked long-polls, each on a connection of its own: bare non-blocking sockets in one
    epoll set, read by a plain loop. The client shares the machine's two cores with the server
    it measures, so each waiter must cost it as little as possible: no event-loop transport,
    protocol or callback per waiter (with asyncio protocols this client took a third of the
    cores during the delivery, more than kagi). A waiter's arrival time is when the loop got to
    its answer's first bytes; its answer is complete when the server closes (Connection:
    close)."""

    def __init__(self, port, request):
        self.port, self.request = port, request
        self.epoll = select.epoll()
        self.socks, self.data, self.arrived = {}, {}, {}
        self.closed = 0

    def park(self, n):
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", self.port))
            s.sendall(self.request)
            s.setblocking(False)
            fd = s.fileno()
            self.socks[fd], self.data[fd] = s, bytearray()
            self.epoll.register(fd, select.EPOLLIN | select.EPOLLRDHUP)

    def __len__(self):
        return len(self.socks)

    def answered_early(self):
        """The first bytes of an answer (or a close) that came before any message, or None."""
        for fd, _ in self.epoll.poll(0):
            self._read(fd)
            return bytes(self.data[fd][:200]) or b"(closed)"
        return None

    def collect(self, timeout):
        """Reads until every waiter's connection closed or `timeout` seconds passed."""
        deadline = time.monotonic() + timeout
        while self.closed < len(self.socks):
            left = deadline - time.monotonic()
            if left <= 0:
                return
            for fd, _ in self.epoll.poll(min(left, 1.0), 1024):
                self._read(fd)

    def _read(self, fd):
        s = self.socks[fd]
        while True:
            try:
                chunk = s.recv(65536)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if chunk and fd not in self.arrived:
                self.arrived[fd] = time.monotonic()
            if not chunk:
                s.close()  # which takes it out of the epoll set too
                self.closed += 1
                return
            self.data[fd] += chunk

    def answers(self):
        """(arrival time or None, bytes) per waiter, in parking order."""
        return [(self.arrived.get(fd), bytes(self.data[fd])) for fd in self.socks]

    def close(self):
        for s in self.socks.values():
            s.close()  # a second close of an answered one does nothing
        self.epoll.close()


def measure(front, count, strict):
    port = front.port
    status, _, body = asyncio.run(http(port, "GET", "/chat/%s/messages?since=0&wait=0" % ROOM))
    check(status == 200, "first poll: HTTP %d" % status)
    last = json.loads(body)["last"]
    heap0 = sum(front.heap())
    parked0 = front.parked_total()
    request = ("GET /chat/%s/messages?since=%d&wait=120 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               "Connection: close\r\n\r\n" % (ROOM, last)).encode()
    waiters = ParkedPolls(port, request)
    try:
        measure_parked(front, count, strict, waiters, parked0, heap0)
    finally:
        waiters.close()
    wait_until(lambda: front.parked() == 0, 20, "%s: the lot to empty" % front.name)


def measure_parked(front, count, strict, waiters, parked0, heap0):
    port = front.port

    def check_none_answered(when):
        early = waiters.answered_early()
        check(early is None, "%s: a poll was answered %s: %r" % (front.name, when, early))

    t_park = time.monotonic()
    while len(waiters) < count:
        waiters.park(min(BATCH, count - len(waiters)))
        target = parked0 + len(waiters)
        deadline = time.monotonic() + 60
        while front.parked_total() < target:
            check(time.monotonic() < deadline, "%s: %d of %d polls parked after 60 s" % (
                front.name, front.parked_total() - parked0, len(waiters)))
            check_none_answered("before any message")
            time.sleep(0.05)
    print("%s: %d long-polls parked in %.1f s" % (front.name, count, time.monotonic() - t_park))
    heap1 = sum(front.heap())
    per = (heap1 - heap0) / count
    print("%s: kagi heap per parked request %.0f B (goal <= 4096; malloc in use, "
          "kernel socket buffers not included)" % (front.name, per))

    # Other pages while they all wait.
    async def pages():
        times = []
        for path in ["/chat/", "/chat/%s/who" % ROOM, "/bbs/"] * 40:
            t = time.monotonic()
            st, _, _ = await http(port, "GET", path)
            times.append(time.monotonic() - t)
            check(st == 200, "%s: %s: HTTP %d while %d polls wait" % (front.name, path, st, count))
        return times

    times = asyncio.run(pages())
    page_p99 = percentile(times, 99)
    print("%s: other pages while parked: p50 %.1f ms, p99 %.1f ms (goal p99 <= 20 ms)" % (
        front.name, percentile(times, 50) * 1000, page_p99 * 1000))
    check_none_answered("before any message")

    # The say runs on a thread of its own, so that this one reads the answers as they come.
    profiler = start_profile(front.name)
    said = {}

    def say():
        body = json.dumps({"name": "tester", "text": "to %d waiters" % count}).encode()
        said["answer"] = asyncio.run(http(port, "POST", "/chat/%s/say" % ROOM,
                                          front.post_headers, body))

    t0 = time.monotonic()
    sayer = threading.Thread(target=say)
    sayer.start()
    waiters.collect(120)
    sayer.join()
    stop_profile(profiler)
    st, _, out = said["answer"]
    check(st == 200, "%s: say: HTTP %d %r" % (front.name, st, out[:200]))
    mid = json.loads(out)["id"]
    latencies = []
    for i, (arrived, data) in enumerate(waiters.answers()):
        check(arrived is not None, "%s: waiter %d got no answer in 120 s" % (front.name, i))
        st, _, out = parse_response(data)
        check(st == 200, "%s: waiter %d: HTTP %d" % (front.name, i, st))
        ids = [m["id"] for m in json.loads(out)["messages"]]
        check(ids == [mid], "%s: waiter %d got %r, expected [%d]" % (front.name, i, ids, mid))
        latencies.append(arrived - t0)
    check(len(latencies) == count, "%s: %d of %d waiters answered" % (
        front.name, len(latencies), count))
    p99 = percentile(latencies, 99)
    print("%s: one message reached all %d waiters, each exactly once: p50 %.0f ms, "
          "p99 %.0f ms, max %.0f ms (goal p99 <= 500 ms)" % (
              front.name, count, percentile(latencies, 50) * 1000, p99 * 1000,
              max(latencies) * 1000))
    if strict:
        check(p99 <= 0.5, "%s: delivery p99 %.0f ms > 500 ms" % (front.name, p99 * 1000))
        check(page_p99 <= 0.02, "%s: page p99 %.1f ms > 20 ms" % (front.name, page_p99 * 1000))
    else:
        check(p99 < 10.0, "%s: delivery p99 %.1f s over the 10 s sanity bound" % (
            front.name, p99))
        check(max(times) < 5.0, "%s: a page took %.1f s" % (front.name, max(times)))
    # The memory goal holds at any count, loaded machine or not: asserted always. Before
    # parked requests released their request state it was 4,438 B behind nginx and
    # 19,036 B on the embedded front end.
    check(per <= 4096, "%s: %.0f B of heap per parked request > 4096" % (front.name, per))


def behind_nginx(demo, source, count, strict):
    def run(site):
        measure(Front("nginx", site.port, lambda: site.each_process_json("/chat/stats.json"),
                      lambda: [d["in_use"] for d in site.each_process_json("/_test/heap")]),
                count, strict)

    return run_site(demo, source, run, processes=2, threads=4, sets=SETS, nginx_workers=2)


def embedded(demo, source, count, strict):
    tmp = tempfile.mkdtemp(prefix="kagi-waiters-")
    port = free_port()
    args = [demo, "--http", "127.0.0.1:%d" % port,
            "--set", "server.threads=4", "--set", "server.max_connections=20000",
            "--set", "templates.dir=%s/templates" % source,
            "--set", "data.dir=%s/data" % tmp, "--set", "locks.dir=%s/locks" % tmp,
            "--set", "log.access=false"]
    for s in SETS:
        args += ["--set", s]
    log = open(os.path.join(tmp, "kagi.log"), "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        def up():
            try:
                return asyncio.run(http(port, "GET", "/chat/"))[0] == 200
            except OSError:
                return False

        wait_until(up, 15, "kagi-demo --http to answer")

        def get_json(path):
            # Blocking: short, and no event loop runs meanwhile.
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=30) as r:
                check(r.status == 200, "%s: HTTP %d" % (path, r.status))
                return json.loads(r.read())

        measure(Front("embedded HTTP", port, lambda: [get_json("/chat/stats.json")],
                      lambda: [get_json("/_test/heap")["in_use"]]), count, strict)
    except AssertionError as e:
        print("FAIL:", e)
        log.flush()
        with open(os.path.join(tmp, "kagi.log"), "rb") as f:
            print(f.read()[-3000:].decode("utf-8", "replace"))
        return 1
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print("PASS")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("demo")
    ap.add_argument("source")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--front", choices=["nginx", "http", "both"], default="both")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    rc = 0
    if args.front in ("nginx", "both"):
        rc |= behind_nginx(args.demo, args.source, args.count, args.strict)
    if args.front in ("http", "both"):
        rc |= embedded(args.demo, args.source, args.count, args.strict)
    return rc


if __name__ == "__main__":
    sys.exit(main())
