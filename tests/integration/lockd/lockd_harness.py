"""Shared by the kagi-lockd integration tests: start a real kagi-lockd, talk to it with raw
sockets, read its memory, stop it.

    with Lockd(binary, ["--set", "lockd.line_timeout_ms=500"]) as server:
        s = connect(server.port)
        s.sendall(b"LOCK k\\n")
        assert read_line(s) == b"ok"
"""

import argparse
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time


class Lockd:
    def __init__(self, binary, extra=(), fd_limit=None):
        self.dir = tempfile.mkdtemp(prefix="kagi-lockd-it-")
        self.log_path = os.path.join(self.dir, "lockd.log")
        self.unix_path = os.path.join(self.dir, "lockd.sock")
        log = open(self.log_path, "w")

        def limits():
            if fd_limit:
                resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

        self.proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:0", "--listen", "unix:" + self.unix_path, *extra],
            stdout=subprocess.DEVNULL, stderr=log, preexec_fn=limits)
        log.close()
        deadline = time.monotonic() + 10
        self.port = None
        while time.monotonic() < deadline and self.port is None:
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", open(self.log_path).read())
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        if self.port is None:
            raise RuntimeError("kagi-lockd did not start: " + open(self.log_path).read())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def rss_kib(self):
        for line in open("/proc/%d/status" % self.proc.pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def log(self):
        return open(self.log_path).read()

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def connect(port, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_line(sock, limit=1 << 20):
    """One answer line without its newline; b"" if the server closed first."""
    out = bytearray()
    while len(out) < limit:
        c = sock.recv(1)
        if not c:
            return bytes(out)
        if c == b"\n":
            return bytes(out)
        out += c
    raise RuntimeError("answer line too long")


def call(sock, line):
    sock.sendall(line + b"\n")
    return read_line(sock)


def status(port):
    """kagi-lockd's STATUS lines (without "end")."""
    s = connect(port)
    s.sendall(b"STATUS\n")
    lines = []
    while True:
        line = read_line(s)
        if line in (b"end", b""):
            break
        lines.append(line)
    s.close()
    return lines


class Checks:
    """Counts checks; the closing line is 'N passed, N failed' (scripts/test reads it)."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what):
        if ok:
            self.passed += 1
            print("ok   " + what, flush=True)
        else:
            self.failed += 1
            print("FAIL " + what, flush=True)
        return ok

    def finish(self):
        print("%d passed, %d failed" % (self.passed, self.failed), flush=True)
        sys.exit(1 if self.failed or not self.passed else 0)


def parse_args():
    """The command line every suite of this folder takes (tests/integration/lockd/CMakeLists.txt)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--lockd", required=True, help="the kagi-lockd binary")
    ap.add_argument("--locks", help="kagi-locks, which shows the server's holders")
    ap.add_argument("--source", help="the source tree (the PHP client)")
    ap.add_argument("--php", default="php")
    return ap.parse_args()
