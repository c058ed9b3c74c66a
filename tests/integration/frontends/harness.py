"""Shared pieces of the front-end integration tests (Python 3 standard library only).

Starts real processes (kagi-demo, spawn-fcgi, nginx, Apache) in a temp dir on loopback
ports, talks HTTP and raw FastCGI to them, and kills every process it started when the test
ends, pass or fail.
"""

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--demo", required=True, help="path of the kagi-demo binary")
    parser.add_argument("--source", required=True, help="the kagi source tree")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    parser.add_argument("--locks", default=os.environ.get("KAGI_LOCKS"),
                        help="path of the kagi-locks binary, for tests that read the lock "
                        "registry (default: $KAGI_LOCKS)")
    return parser.parse_args()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(what, predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of ours counts as gone.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


class Failures:
    """Collects failed checks so one run reports all of them."""

    def __init__(self):
        self.failed = []

    def check(self, ok, message):
        if ok:
            print("  ok   " + message, flush=True)
        else:
            print("  FAIL " + message, flush=True)
            self.failed.append(message)

    def equal(self, got, want, message):
        self.check(got == want, "%s (got %r, want %r)" % (message, got, want))


class Env:
    """A temp dir plus every process started in it; close() kills them all."""

    def __init__(self, args, name):
        self.args = args
        self.demo = os.path.abspath(args.demo)
        self.source = os.path.abspath(args.source)
        self.dir = tempfile.mkdtemp(prefix="kagi-%s-" % name)
        # Web server workers may run as another user (tests run as root in CI): they must
        # reach the socket inside.
        os.chmod(self.dir, 0o755)
        self.procs = []  # Popen objects
        self.pids = []  # daemonised pids (spawn-fcgi children)
        self.groups = []  # web servers, each leading its own process group with its workers

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def demo_settings(self, threads=4, extra=()):
        """--set options every test run of kagi-demo gets."""
        sets = {
            "test.routes": "true",
            "server.threads": str(threads),
            "server.shutdown_timeout_ms": "10000",
            "templates.dir": os.path.join(self.source, "templates"),
            "locks.dir": self.path("var", "locks"),
            "data.dir": self.path("var", "data"),
            "log.access": "false",
            "bbs.flood_interval_s": "0",
        }
        for item in extra:
            key, value = item.split("=", 1)
            sets[key] = value
        out = []
        for key, value in sets.items():
            out += ["--set", "%s=%s" % (key, value)]
        return out

    def start(self, argv, log_name, **kwargs):
        log = open(self.path(log_name), "ab")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir, **kwargs)
        self.procs.append(proc)
        return proc

    def spawn_fcgi(self, socket_path, processes, threads, extra=()):
        """kagi-demo under spawn-fcgi: `processes` children on one unix socket (fd 0)."""
        argv = ["spawn-fcgi", "-s", socket_path, "-M", "0666", "-F", str(processes), "-d",
                self.dir, "--", self.demo] + self.demo_settings(threads, extra)
        out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=20)
        text = out.stdout.decode(errors="replace")
        pids = [int(p) for p in re.findall(r"PID:\s*(\d+)", text)]
        self.pids += pids
        if out.returncode != 0 or len(pids) != processes:
            raise AssertionError("spawn-fcgi failed (%d): %s" % (out.returncode, text))
        return pids

    def nginx(self, port, socket_path, extra_http="", quiet=False):
        """Real nginx with conf/nginx/kagi.conf, substituted for this temp dir. `extra_http`
        is added to the http block (the benchmark's baseline server); `quiet` turns the
        access log off and the error log down (benchmarks)."""
        shipped = open(os.path.join(self.source, "conf/nginx/kagi.conf")).read()
        conf = substitute(shipped, [
            ("server unix:/run/kagi/kagi.sock;", "server unix:%s;" % socket_path),
            ("listen 80;", "listen 127.0.0.1:%d;" % port),
            ("listen [::]:80;", ""),
        ])
        for sub in ("logs", "body", "fastcgi", "proxy", "uwsgi", "scgi"):
            os.makedirs(self.path("nginx", sub), exist_ok=True)
        open(self.path("nginx", "kagi.conf"), "w").write(conf)
        # The stock Debian fastcgi_params, unchanged: the recipe must work with it.
        shutil.copy("/etc/nginx/fastcgi_params", self.path("nginx", "fastcgi_params"))
        main = """
%(user)s
worker_processes 1;
daemon off;
pid %(d)s/nginx.pid;
error_log %(d)s/logs/error.log %(level)s;
events { worker_connections 4096; }
http {
    access_log %(access)s;
    client_body_temp_path %(d)s/body;
    fastcgi_temp_path %(d)s/fastcgi;
    proxy_temp_path %(d)s/proxy;
    uwsgi_temp_path %(d)s/uwsgi;
    scgi_temp_path %(d)s/scgi;
    include %(d)s/kagi.conf;
%(extra)s
}
""" % {"d": self.path("nginx"), "user": "user root root;" if os.getuid() == 0 else "",
       "level": "warn" if quiet else "info", "extra": extra_http,
       "access": "off" if quiet else self.path("nginx", "logs", "access.log")}
        open(self.path("nginx", "nginx.conf"), "w").write(main)
        proc = self.start(["nginx", "-p", self.path("nginx"), "-c", self.path("nginx", "nginx.conf")],
                          "nginx.out", start_new_session=True)
        self.groups.append(proc)
        wait_for_port(port, proc, "nginx")
        return proc

    def apache(self, port, socket_path):
        """Real Apache (mod_proxy_fcgi) with conf/apache/kagi.conf, substituted."""
        shipped = open(os.path.join(self.source, "conf/apache/kagi.conf")).read()
        conf = substitute(shipped, [
            ("<VirtualHost *:80>", "<VirtualHost 127.0.0.1:%d>" % port),
            ("unix:/run/kagi/kagi.sock|", "unix:%s|" % socket_path),
        ])
        d = self.path("apache")
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, "kagi.conf"), "w").write(conf)
        mods = "/usr/lib/apache2/modules"
        user = ""
        if os.getuid() == 0:
            # Apache refuses to serve as root; its children run as www-data.
            user = "User www-data\nGroup www-data\n"
        main = """
ServerRoot "%(d)s"
ServerName 127.0.0.1
Listen 127.0.0.1:%(port)d
PidFile %(d)s/httpd.pid
ErrorLog %(d)s/error.log
LogLevel warn
DefaultRuntimeDir %(d)s
LoadModule mpm_event_module %(m)s/mod_mpm_event.so
LoadModule authz_core_module %(m)s/mod_authz_core.so
LoadModule proxy_module %(m)s/mod_proxy.so
LoadModule proxy_fcgi_module %(m)s/mod_proxy_fcgi.so
%(user)s
StartServers 1
ServerLimit 1
ThreadsPerChild 64
MaxRequestWorkers 64
KeepAlive On
Include %(d)s/kagi.conf
""" % {"d": d, "port": port, "m": mods, "user": user}
        open(os.path.join(d, "httpd.conf"), "w").write(main)
        env = dict(os.environ, APACHE_RUN_DIR=d, APACHE_LOCK_DIR=d, APACHE_LOG_DIR=d)
        proc = self.start(["apache2", "-f", os.path.join(d, "httpd.conf"), "-DFOREGROUND"],
                          "apache.out", env=env, start_new_session=True)
        self.groups.append(proc)
        wait_for_port(port, proc, "apache2")
        return proc

    def close(self):
        for pid in self.pids:
            kill(pid, signal.SIGKILL)
        # Web servers: a polite stop first (their workers exit with them), then the whole
        # group, so no worker is left behind as an orphan.
        for proc in self.groups:
            killpg(proc.pid, signal.SIGTERM)
        for proc in self.groups:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            killpg(proc.pid, signal.SIGKILL)
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        # Apache children (www-data) die with their parent; nginx workers too.
        if not self.args.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            print("kept " + self.dir)

    def dump_logs(self):
        for root, _, files in os.walk(self.dir):
            for name in files:
                if name.endswith((".out", ".log")):
                    p = os.path.join(root, name)
                    text = open(p, errors="replace").read()[-3000:]
                    print("---- %s (tail)\n%s" % (p, text))


def kill(pid, sig):
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def killpg(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def recipe_buffers(source):
    """The FastCGI buffer sizes of the shipped recipe (conf/nginx/kagi.conf under `source`), as
    directives for an nginx server of a test's or benchmark's own: what it measures is then
    read through the buffers kagi is read through in production."""
    shipped = open(os.path.join(source, "conf", "nginx", "kagi.conf")).read()
    lines = re.findall(r"^\s*(fastcgi_(?:busy_)?buffers?(?:_size)?\s[^;]*;|"
                       r"fastcgi_temp_file_write_size\s[^;]*;)", shipped, re.MULTILINE)
    if not lines:
        raise AssertionError("conf/nginx/kagi.conf sets no fastcgi_buffer_size; update the test")
    return " ".join(lines)


def substitute(text, pairs):
    """Replaces each (old, new); a missing `old` means the recipe changed: fail loudly."""
    for old, new in pairs:
        if old not in text:
            raise AssertionError("recipe no longer contains %r; update the test" % old)
        text = text.replace(old, new)
    return text


def wait_for_port(port, proc, name, timeout=10.0):
    def up():
        if proc is not None and proc.poll() is not None:
            raise AssertionError("%s exited with %s" % (name, proc.returncode))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return False
    wait_until("%s on port %d" % (name, port), up, timeout)


def wait_for_unix(path, timeout=10.0):
    def up():
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)
            s.close()
            return True
        except OSError:
            return False
    wait_until("socket " + path, up, timeout)


def lock_holders(locks_bin, locks_dir):
    """(lock name, holder) pairs of every lock held right now by any kagi process on this
    host, from the status registry (kagi-locks --json; a holder has "pid", "mode",
    "request_id", "path"...): an out-of-band view that needs no free kagi thread."""
    if not locks_bin:
        raise AssertionError("this test reads the lock registry: pass --locks PATH_OF_kagi-locks "
                             "or set KAGI_LOCKS")
    out = subprocess.run([locks_bin, "--set", "locks.dir=" + locks_dir, "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
    if out.returncode != 0:
        raise AssertionError("kagi-locks failed (%d): %s" % (out.returncode, out.stderr[:300]))
    return [(lock["name"], h) for lock in json.loads(out.stdout)["locks"]
            for h in lock["holders"]]


def held_locks(locks_bin, locks_dir):
    """The names of the locks held right now (see lock_holders)."""
    return {name for name, _ in lock_holders(locks_bin, locks_dir)}


def wait_all_held(locks_bin, locks_dir, names, timeout=20.0):
    """Waits until every lock in `names` has been seen held (not necessarily all at once: a
    request queued behind a busy worker shows up when it starts). Requests to
    /_test/hold?name=N are thus known to be inside their handler, not merely sent."""
    want = set(names)
    seen = set()

    def all_seen():
        seen.update(held_locks(locks_bin, locks_dir) & want)
        return seen == want
    try:
        wait_until("holds in the lock registry", all_seen, timeout)
    except AssertionError:
        raise AssertionError("after %.0fs only %d of %d holds were seen in the lock registry: %s"
                             % (timeout, len(seen), len(want), sorted(want - seen)))


# ---- HTTP helpers -------------------------------------------------------------------------

class Reply:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # list of (name, value)
        self.body = body

    def header(self, name):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def cookies(self):
        out = {}
        for k, v in self.headers:
            if k.lower() == "set-cookie":
                name, _, rest = v.partition("=")
                out[name.strip()] = rest.split(";")[0]
        return out

    def text(self):
        return self.body.decode(errors="replace")


def recv_until(s, done=lambda data: False, data=b""):
    """Reads from the raw socket `s` onto `data` until done(data), the server closes, or the
    socket's timeout passes; returns all of it."""
    try:
        while not done(data):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    return data


def split_answer(data):
    """(status, {lower-case field name: value}, what follows the head) of the HTTP answer at the
    start of `data`; (None, {}, b"") when it holds no whole head."""
    if b"\r\n\r\n" not in data or not data.startswith(b"HTTP/1."):
        return None, {}, b""
    head, _, rest = data.partition(b"\r\n\r\n")
    fields = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return int(data.split(b" ", 2)[1]), fields, rest


def read_answer_parts(s):
    """One whole HTTP answer read from the raw socket `s` (by its Content-Length): split_answer's
    (status, fields, body); the status is None when the server closed (or the timeout passed)
    before a whole head came."""
    status, fields, body = split_answer(recv_until(s, lambda d: b"\r\n\r\n" in d))
    length = int(fields.get("content-length", "0"))
    return status, fields, recv_until(s, lambda d: len(d) >= length, body)


def read_answer(s):
    """The status of one whole HTTP answer read from the raw socket `s` (read_answer_parts), or
    None when the server closed first."""
    return read_answer_parts(s)[0]


def request(port, method, path, body=None, headers=None, conn=None, timeout=15.0):
    """One request; on `conn` (an http.client.HTTPConnection) when given (keep-alive)."""
    own = conn is None
    if own:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return Reply(r.status, r.getheaders(), data)
    finally:
        if own:
            conn.close()


def form_body(fields):
    from urllib.parse import urlencode
    return urlencode(fields).encode()


def round_trip(fail, port, label):
    """GET sets the CSRF cookie; POST with cookie + field passes; without → 403."""
    r = request(port, "GET", "/_test/echo?x=1&y=%C3%A9")
    fail.equal(r.status, 200, label + " GET /_test/echo status")
    fail.check("method GET" in r.text() and "arg x=1" in r.text() and "arg y=\u00e9" in r.text(),
               label + " GET echo body lists method and decoded query args")
    fail.check("client 127.0.0.1\n" in r.text(), label + " the client's address reaches the app")
    token = r.cookies().get("kagi_csrf")
    fail.check(bool(token), label + " GET sets cookie kagi_csrf")
    token = token or "none"
    hdrs = {"Content-Type": "application/x-www-form-urlencoded",
            "Cookie": "kagi_csrf=" + token}
    r = request(port, "POST", "/_test/echo", form_body({"_csrf": token, "msg": "hi there"}), hdrs)
    fail.equal(r.status, 200, label + " POST with CSRF cookie + field")
    fail.check("method POST" in r.text() and "field msg=hi there" in r.text()
               and "cookie kagi_csrf" in r.text(), label + " POST echo body lists the form field")
    r = request(port, "POST", "/_test/echo", form_body({"msg": "x"}),
                {"Content-Type": "application/x-www-form-urlencoded", "Cookie": "kagi_csrf=" + token})
    fail.equal(r.status, 403, label + " POST without _csrf field")
    r = request(port, "POST", "/_test/echo", form_body({"msg": "x"}),
                {"Content-Type": "application/x-www-form-urlencoded",
                 "Cookie": "kagi_csrf=" + token, "X-CSRF-Token": token})
    fail.equal(r.status, 200, label + " POST with X-CSRF-Token header")
    r = request(port, "GET", "/no/such/page")
    fail.equal(r.status, 404, label + " unknown path")
    r = request(port, "DELETE", "/_test/echo", headers={"Cookie": "kagi_csrf=" + token})
    fail.equal(r.status, 405, label + " DELETE on a GET|POST route")
    fail.check("GET" in (r.header("Allow") or "") and "POST" in (r.header("Allow") or ""),
               label + " 405 has Allow: GET, POST (got %r)" % r.header("Allow"))
    return token


def parallel(fns, timeout=60.0):
    """Runs each fn in a thread; returns their results (an exception object on failure)."""
    results = [None] * len(fns)

    def run(i):
        try:
            results[i] = fns[i]()
        except Exception as e:  # noqa: BLE001 - reported by the caller
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    return results


def abort_mid_response(port, path, read_bytes=65536):
    """Sends GET `path`, reads a little of the answer, then resets the connection."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % path).encode())
    got = 0
    while got < read_bytes:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += len(chunk)
    # RST instead of FIN: the harshest way to go away.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    return got


def main(test_fn, name):
    args = parse_args()
    env = Env(args, name)
    fail = Failures()
    started = time.monotonic()
    try:
        test_fn(env, fail)
    except Exception:  # noqa: BLE001 - any crash of the test is a failure
        traceback.print_exc()
        fail.failed.append("test crashed")
    finally:
        if fail.failed:
            env.dump_logs()
        env.close()
    print("%s: %d failure(s) in %.1fs" % (name, len(fail.failed), time.monotonic() - started))
    sys.exit(1 if fail.failed else 0)
