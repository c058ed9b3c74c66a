"""Test harness for the chat's integration tests (stdlib only, reusable by other apps).

Site: kagi-demo processes under spawn-fcgi, each on its own FastCGI unix socket, behind a
real nginx on a free loopback port, in a temp directory that is removed afterwards. Each
process can also be asked directly over FastCGI (fcgi_get), to read that process's own
counters without the load balancer choosing for us.

http(): one HTTP/1.1 request over a raw asyncio socket (many thousands can run at once).
"""

import asyncio
import importlib.util
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import resource
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "..", "..")


def recipe_buffers(source):
    """The shipped recipe's FastCGI buffers: the frontends' harness reads them (it shares this
    module's name, so it is loaded under another)."""
    spec = importlib.util.spec_from_file_location(
        "frontends_harness", os.path.join(HERE, "..", "frontends", "harness.py"))
    frontends = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(frontends)
    return frontends.recipe_buffers(source)

NGINX_CONF = """
{user}
worker_processes {workers};
worker_rlimit_nofile 20000;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
daemon off;
events {{ worker_connections 16000; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/client_body;
  fastcgi_temp_path {tmp}/fastcgi;
  proxy_temp_path {tmp}/proxy;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
  upstream kagi {{
{servers}
    keepalive 64;
  }}
  server {{
    listen 127.0.0.1:{port}{reuseport};
    {buffers}
    location / {{
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_NAME "";
      fastcgi_param PATH_INFO $uri;
      fastcgi_pass kagi;
      fastcgi_keep_conn on;
      fastcgi_buffering off;
      fastcgi_read_timeout 60s;
    }}
  }}
}}
"""


def check(condition, message):
    """A test's assertion: raises AssertionError(message) when `condition` is false."""
    if not condition:
        raise AssertionError(message)


def percentile(values, p):
    """The p-th percentile of `values` (nearest rank)."""
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, timeout, what, interval=0.05):
    """Polls `condition` until it returns a true value; raises naming `what` at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))
        time.sleep(interval)


def run_site(demo, source, run, processes=2, threads=4, sets=(), nginx_workers=1):
    """Raises the open-file limit to the hard one (many parked polls), starts a Site, runs
    run(site) and returns the exit code: 0 (PASS), or 1 with the failure and the logs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with Site(demo, source, processes=processes, threads=threads, sets=sets,
              nginx_workers=nginx_workers) as site:
        try:
            run(site)
        except AssertionError as e:
            print("FAIL:", e)
            print(site.logs())
            return 1
    print("PASS")
    return 0


class Site:
    """kagi-demo × `processes` behind nginx. Use as a context manager."""

    def __init__(self, demo, source, processes=2, threads=4, sets=(), nginx_workers=1):
        # More than one nginx worker (reuseport spreads the clients) when one worker's open
        # files cannot hold every parked client plus its upstream connection.
        self.nginx_workers = nginx_workers
        self.demo = demo
        self.source = source
        self.processes = processes
        self.threads = threads
        self.sets = list(sets)
        self.tmp = tempfile.mkdtemp(prefix="kagi-site-")
        self.port = free_port()
        self.sockets = [os.path.join(self.tmp, "kagi%d.sock" % i) for i in range(processes)]
        self.procs = []
        self.nginx = None

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def demo_args(self):
        args = [
            "--set", "server.threads=%d" % self.threads,
            "--set", "templates.dir=%s/templates" % self.source,
            "--set", "data.dir=%s/data" % self.tmp,
            "--set", "locks.dir=%s/locks" % self.tmp,
            "--set", "log.access=false",
        ]
        for s in self.sets:
            args += ["--set", s]
        return args

    def start(self):
        for i, path in enumerate(self.sockets):
            log = open(os.path.join(self.tmp, "kagi%d.log" % i), "wb")
            self.procs.append(subprocess.Popen(
                ["spawn-fcgi", "-n", "-s", path, "--", self.demo] + self.demo_args(),
                stdout=log, stderr=subprocess.STDOUT))
        for path in self.sockets:
            wait_until(lambda: os.path.exists(path), 10, "socket " + path)
        servers = "\n".join("    server unix:%s;" % p for p in self.sockets)
        conf = os.path.join(self.tmp, "nginx.conf")
        with open(conf, "w") as f:
            # As root, nginx's workers would drop to `nobody` and lose the temp dir (0700).
            user = "user root;" if os.geteuid() == 0 else ""
            f.write(NGINX_CONF.format(user=user, tmp=self.tmp, port=self.port, servers=servers,
                                      workers=self.nginx_workers,
                                      buffers=recipe_buffers(SOURCE),
                                      reuseport=" reuseport" if self.nginx_workers > 1 else ""))
        self.nginx = subprocess.Popen(["nginx", "-c", conf, "-p", self.tmp],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)

        def up():
            try:
                status, _, _ = asyncio.run(http(self.port, "GET", "/chat/"))
                return status == 200
            except OSError:
                return False

        wait_until(up, 15, "nginx and kagi-demo to answer /chat/")

    def pids(self):
        return [p.pid for p in self.procs]

    def each_process_json(self, path):
        """GET `path` from every kagi process over its own FastCGI socket (not through nginx,
        which picks one): the parsed JSON answers, in process order."""
        out = []
        for sock in self.sockets:
            status, body = fcgi_get(sock, path)
            check(status == 200, "%s: HTTP %d" % (path, status))
            out.append(json.loads(body))
        return out

    def logs(self):
        out = []
        for name in sorted(os.listdir(self.tmp)):
            if name.endswith(".log"):
                with open(os.path.join(self.tmp, name), "rb") as f:
                    out.append("--- %s\n%s" % (name, f.read()[-3000:].decode("utf-8", "replace")))
        return "\n".join(out)

    def stop(self):
        for p in ([self.nginx] if self.nginx else []) + self.procs:
            if p.poll() is None:
                p.terminate()
        for p in ([self.nginx] if self.nginx else []) + self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if os.environ.get("KAGI_KEEP_TMP"):
            print("kept", self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def fd_count(self, pid):
        return len(os.listdir("/proc/%d/fd" % pid))

    def rss_kb(self, pid):
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0


async def http(port, method, path, headers=None, body=b"", timeout=60):
    """One request on a fresh connection. Returns (status, headers dict lower-case, body)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" % (method, path)
        for k, v in (headers or {}).items():
            head += "%s: %s\r\n" % (k, v)
        if body or method == "POST":
            head += "Content-Length: %d\r\n" % len(body)
        writer.write(head.encode() + b"\r\n" + body)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()
    return parse_response(data)


def parse_response(data):
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    m = re.match(r"HTTP/1\.[01] (\d+)", lines[0])
    if not m:
        raise AssertionError("not an HTTP response: %r" % data[:200])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = dechunk(body)
    return int(m.group(1)), headers, body


def dechunk(body):
    out = b""
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2:]
    return out


# --- a minimal FastCGI client: ask one process directly ----------------------------------

def _record(rtype, request_id, content):
    return struct.pack(">BBHHBx", 1, rtype, request_id, len(content), 0) + content


def _params(pairs):
    out = b""
    for k, v in pairs.items():
        k, v = k.encode(), v.encode()
        for n in (len(k), len(v)):
            out += bytes([n]) if n < 128 else struct.pack(">I", n | 0x80000000)
        out += k + v
    return out


def fcgi_get(sock_path, path, query="", timeout=10):
    """GET `path` from the FastCGI process listening on `sock_path`: (status, body)."""
    params = {
        "REQUEST_METHOD": "GET", "REQUEST_URI": path + ("?" + query if query else ""),
        "SCRIPT_NAME": "", "PATH_INFO": path, "QUERY_STRING": query,
        "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1", "SERVER_NAME": "test",
        "SERVER_PORT": "80", "HTTP_HOST": "test", "CONTENT_LENGTH": "0",
    }
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout)
        s.connect(sock_path)
        s.sendall(_record(1, 1, struct.pack(">HB5x", 1, 0)) + _record(4, 1, _params(params)) +
                  _record(4, 1, b"") + _record(5, 1, b""))
        data = b""
        stdout = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            while len(data) >= 8:
                _, rtype, _, clen, plen = struct.unpack(">BBHHB", data[:7])
                if len(data) < 8 + clen + plen:
                    break
                content = data[8:8 + clen]
                data = data[8 + clen + plen:]
                if rtype == 6:
                    stdout += content
                elif rtype == 3:
                    head, _, body = stdout.partition(b"\r\n\r\n")
                    m = re.search(rb"Status: (\d+)", head)
                    return (int(m.group(1)) if m else 200), body
    raise AssertionError("FastCGI connection to %s closed before the end" % sock_path)
