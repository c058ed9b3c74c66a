"""What the cluster integration tests share: one site on several web hosts sharing PostgreSQL.

A "host" here is a group of kagi-demo processes with a locks.dir and a data.dir of its own
(what a separate machine would have), all on one private PostgreSQL (pgcluster.PgCluster) with

    locks.backend = "postgres", data.backend = "postgres" (the locks' database),

and one shared security.secret_file, so a CSRF cookie minted by one host is accepted by all.

Each process runs under its own `spawn-fcgi -F 1` on a unix socket of its own (so a test can
ask one process for its counters over FastCGI, and knows every pid). The process is started
through `sh -c 'exec ...'`, so the pid spawn-fcgi prints is kagi-demo's, its output lands in
hostN-pM.log in the test's temp dir (spawn-fcgi would send it to /dev/null), and its
locks.postgres.application_name is "kagi/hostN/<pid>" (the admin pages and pg_stat_activity
tell the hosts apart although they share one machine).

ONE nginx fronts the site (the config is written here, after the shipped conf/nginx/kagi.conf's
location block, without its per-client rate limits, which would refuse a load test from
127.0.0.1):
  - `site_port`: an upstream spanning every process of every host (a load balancer in front
    of the cluster); each answer carries X-Kagi-Upstream, the socket that served it;
  - `host.port`, one per host: an upstream of that host's processes only (a client that talks
    to one host directly).
"""

import http.client
import importlib.util
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# bbs/ after frontends/ in the path: its bbs_common imports frontends/harness.py. The chat's
# harness.py (another module of the same name) is loaded by load_chat_harness().
sys.path.insert(0, os.path.join(HERE, "..", "bbs"))
sys.path.insert(0, os.path.join(HERE, "..", "frontends"))
import harness  # noqa: E402

NGINX_CONF = """
%(user)s
worker_processes 1;
worker_rlimit_nofile 16384;
daemon off;
pid %(d)s/nginx.pid;
error_log %(d)s/logs/error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    client_body_temp_path %(d)s/body;
    fastcgi_temp_path %(d)s/fastcgi;
    proxy_temp_path %(d)s/proxy;
    uwsgi_temp_path %(d)s/uwsgi;
    scgi_temp_path %(d)s/scgi;
%(upstreams)s
%(servers)s
}
"""

UPSTREAM = """
    upstream %(name)s {
%(servers)s
        keepalive 32;
        keepalive_timeout 60s;
    }
"""

SERVER = """
    server {
        listen 127.0.0.1:%(port)d;
        client_max_body_size 1m;
        location / {
            include fastcgi_params;
            fastcgi_param REMOTE_ADDR $remote_addr;
            fastcgi_pass %(upstream)s;
            fastcgi_keep_conn on;
            fastcgi_buffering off;
            fastcgi_read_timeout 75s;
            add_header X-Kagi-Upstream $upstream_addr always;
        }
    }
"""


class Host:
    def __init__(self, env, index, processes):
        self.index = index
        self.name = "host%d" % index
        self.locks_dir = env.path(self.name, "locks")
        self.data_dir = env.path(self.name, "data")
        self.sockets = [env.path("%s-p%d.sock" % (self.name, p)) for p in range(processes)]
        self.pids = []
        self.port = None  # this host's own nginx server

    def socket_of(self, upstream_addr):
        """True if nginx's $upstream_addr (e.g. "unix:/tmp/.../host1-p0.sock") is ours."""
        return any(upstream_addr.endswith(s) for s in self.sockets)


class Cluster:
    """`hosts` hosts × `processes` kagi-demo processes × `threads` threads on `pg`. A context
    manager: its processes are killed on the way out, before the PgCluster around it stops
    (so their logs do not fill with the server's shutdown)."""

    def __init__(self, env, pg, hosts=3, processes=2, threads=4, extra=()):
        self.env = env
        self.pg = pg
        self.threads = threads
        self.extra = list(extra)
        self.secret_file = env.path("secret.key")
        fd = os.open(self.secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, os.urandom(32).hex().encode() + b"\n")
        os.close(fd)
        self.hosts = [Host(env, i + 1, processes) for i in range(hosts)]
        self.site_port = None

    def settings(self, host):
        """The --set items of one host's processes."""
        return self.pg.lock_settings() + [
            "data.backend=postgres",
            "locks.dir=" + host.locks_dir,
            "data.dir=" + host.data_dir,
            "security.secret_file=" + self.secret_file,
        ] + self.extra

    def start(self):
        for host in self.hosts:
            for p, sock in enumerate(host.sockets):
                host.pids.append(self.spawn(host, p, sock))
        for host in self.hosts:
            for sock in host.sockets:
                harness.wait_for_unix(sock, timeout=20)
        self.start_nginx()
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.kill()
        return False

    def kill(self):
        """SIGKILLs every kagi-demo process (nginx is the Env's to stop)."""
        for host in self.hosts:
            for pid in host.pids:
                harness.kill(pid, signal.SIGKILL)
        for host in self.hosts:
            for pid in host.pids:
                harness.wait_until("kagi-demo %d to die" % pid,
                                   lambda: not harness.pid_alive(pid), timeout=10)

    def spawn(self, host, p, sock):
        """One kagi-demo under spawn-fcgi on `sock`; returns its pid."""
        log = self.env.path("%s-p%d.log" % (host.name, p))
        # $0 is kagi-demo, "$@" its arguments; $$ is the shell's pid, which exec hands on.
        script = ('exec "$0" "$@" --set locks.postgres.application_name=kagi/%s/$$ >>%s 2>&1'
                  % (host.name, shlex.quote(log)))
        argv = ["spawn-fcgi", "-s", sock, "-M", "0666", "-F", "1", "-d", self.env.dir, "--",
                "/bin/sh", "-c", script, self.env.demo] + \
            self.env.demo_settings(self.threads, self.settings(host))
        out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        text = out.stdout.decode(errors="replace")
        pids = [int(x) for x in re.findall(r"PID:\s*(\d+)", text)]
        self.env.pids += pids
        if out.returncode != 0 or len(pids) != 1:
            raise AssertionError("spawn-fcgi for %s failed (%d): %s" % (sock, out.returncode, text))
        return pids[0]

    def start_nginx(self):
        d = self.env.path("nginx")
        for sub in ("logs", "body", "fastcgi", "proxy", "uwsgi", "scgi"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)

        def upstream(name, sockets):
            return UPSTREAM % {"name": name,
                               "servers": "\n".join("        server unix:%s;" % s
                                                    for s in sockets)}
        upstreams = [upstream("site", [s for h in self.hosts for s in h.sockets])]
        self.site_port = harness.free_port()
        servers = [SERVER % {"port": self.site_port, "upstream": "site"}]
        for host in self.hosts:
            host.port = harness.free_port()
            upstreams.append(upstream(host.name, host.sockets))
            servers.append(SERVER % {"port": host.port, "upstream": host.name})
        # The stock Debian fastcgi_params, unchanged, as the shipped recipe includes it.
        shutil.copy("/etc/nginx/fastcgi_params", os.path.join(d, "fastcgi_params"))
        conf = NGINX_CONF % {"d": d, "user": "user root root;" if os.getuid() == 0 else "",
                             "upstreams": "".join(upstreams), "servers": "".join(servers)}
        path = os.path.join(d, "nginx.conf")
        with open(path, "w") as f:
            f.write(conf)
        proc = self.env.start(["nginx", "-p", d, "-c", path], "nginx.out", start_new_session=True)
        self.env.groups.append(proc)
        for port in [self.site_port] + [h.port for h in self.hosts]:
            harness.wait_for_port(port, proc, "nginx")

    def host_of(self, reply):
        """The host whose process served `reply` (from X-Kagi-Upstream), or None."""
        addr = reply.header("X-Kagi-Upstream") or ""
        for host in self.hosts:
            if host.socket_of(addr):
                return host
        return None


def csrf_token(port, path="/bbs/"):
    """A kagi_csrf token minted by the host behind `port`."""
    r = harness.request(port, "GET", path)
    token = r.cookies().get("kagi_csrf", "")
    if r.status != 200 or not token:
        raise AssertionError("GET %s on port %d: %d, no kagi_csrf cookie" % (path, port, r.status))
    return token


class Client:
    """A browser-like client of several hosts: one keep-alive connection per port, one
    kagi_csrf cookie (minted by whichever host it first asked) sent to all of them."""

    def __init__(self, ports, token, timeout=30):
        self.token = token
        self.timeout = timeout
        self.conns = {port: None for port in ports}

    def post(self, port, board, fields):
        fields = dict(fields)
        fields.setdefault("_csrf", self.token)
        hdrs = {"Content-Type": "application/x-www-form-urlencoded",
                "Cookie": "kagi_csrf=" + self.token}
        return self.send(port, "POST", "/bbs/%s/post" % board, harness.form_body(fields), hdrs)

    def send(self, port, method, path, body=None, hdrs=None):
        conn = self.conns.get(port)
        if conn is None:
            conn = self.conns[port] = http.client.HTTPConnection("127.0.0.1", port,
                                                                 timeout=self.timeout)
        try:
            return harness.request(port, method, path, body, hdrs or {}, conn=conn)
        except (OSError, http.client.HTTPException):
            conn.close()
            self.conns[port] = None  # reconnect for the next request
            raise

    def close(self):
        for conn in self.conns.values():
            if conn is not None:
                conn.close()


def run_demo(env, settings, timeout=30):
    """kagi-demo in the foreground (HTTP front end on a free port) that is expected to refuse
    to start: (exit code or None if it kept running, its output)."""
    port = harness.free_port()
    argv = [env.demo, "--http", "127.0.0.1:%d" % port] + env.demo_settings(2, settings)
    try:
        out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             timeout=timeout, cwd=env.dir)
    except subprocess.TimeoutExpired as e:
        return None, (e.output or b"").decode(errors="replace")
    return out.returncode, out.stdout.decode(errors="replace")


def load_chat_harness():
    """tests/integration/chat/harness.py, as module chat_harness (async http(), fcgi_get())."""
    spec = importlib.util.spec_from_file_location(
        "chat_harness", os.path.join(HERE, "..", "chat", "harness.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))]
