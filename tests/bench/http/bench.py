"""scripts/bench: kagi's apps through a real nginx, measured with wrk against baselines
measured in the same run, written to docs/BENCHMARKS.md.

Each scenario: a warm-up, then ROUNDS rounds; the table shows medians. Write scenarios also
count acknowledged writes (wrk's Lua counts 303/200 answers) and stored writes (read back
through the JSON APIs): lost = acknowledged - stored, which must be 0.

Besides one kagi host on files, one site on two kagi hosts sharing a private PostgreSQL on
this machine (locks and data on it, tests/support/pgcluster with KAGI_PG_DURABLE=1, so
synchronous_commit = on waits for the WAL flush), behind one nginx upstream.
"""

import argparse
import base64
import glob
import datetime
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration", "frontends"))
import harness  # noqa: E402
import pgcluster  # noqa: E402

THREADS, CONNECTIONS = 2, 32


def parse_wrk(text):
    """req/s, p50 ms, p99 ms, errors, ACKED (or None) from wrk --latency output."""
    def ms(value, unit):
        return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    lat = dict((p, ms(v, u)) for p, v, u in re.findall(r"\s(50|99)%\s+([\d.]+)(us|ms|s|m)\b", text))
    errors = sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", text))
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    acked = re.search(r"ACKED (\d+)", text)
    return {"rps": rps, "p50": lat.get("50"), "p99": lat.get("99"),
            "errors": errors + (int(non2xx.group(1)) if non2xx else 0),
            "acked": int(acked.group(1)) if acked else None}


def wrk(url, seconds, script=None, env=None):
    argv = ["wrk", "-t%d" % THREADS, "-c%d" % CONNECTIONS, "-d%ds" % seconds, "--latency", url]
    if script:
        argv[1:1] = ["-s", script]
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         env=dict(os.environ, **(env or {})), timeout=seconds + 60)
    return parse_wrk(out.stdout.decode(errors="replace"))


class Bench:
    def __init__(self, args, env):
        self.args, self.env = args, env
        self.rows = []
        self.pg_server = None  # "15.x (fsync=on, ...)", once pg_scenarios asked the server
        self.pg_floor = {}  # {"post1": tps, "post8": tps}: pg_floor's raw libpq numbers
        # Server processes by the port nginx serves them on: a row on that port also measures
        # what they spent per request (ProcessCost).
        self.processes = {}

    def watch(self, port, pids):
        self.processes[port] = list(pids)

    def start_profile(self, name, paired=False):
        """--perf 'A|B': a system-wide `perf record -g` over the rounds of every scenario whose
        name contains A or B, into --perf-dir (perf report -i FILE reads it). A paired row's
        profile holds its baseline's rounds too."""
        if not self.args.perf or not any(w in name for w in self.args.perf.split("|")):
            return None
        os.makedirs(self.args.perf_dir, exist_ok=True)
        out = os.path.join(self.args.perf_dir, re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-") +
                           ".perf.data")
        seconds = self.args.seconds * self.args.rounds * (2 if paired else 1)
        return subprocess.Popen(["perf", "record", "-q", "-a", "-g", "-e", "cpu-clock", "-o", out,
                                 "--", "sleep", str(seconds)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def scenario(self, name, url, script=None, script_env=None, stored=None, timed=True,
                 inside=None, paired=None):
        """Runs one scenario; `stored` returns the number of stored writes (for lost). timed=False:
        wrk's latencies mean nothing for it (a pipelined batch is timed as one request), and the
        report shows none. `inside` returns kagi's own statistics (kagi_stats): the row then
        also says what kagi measured of the rounds (inside_kagi). `paired` (a Baseline): each
        round runs right after a round of that baseline, and the row keeps the median of the
        round-by-round ratios (row["paired"]), which a drift of the machine over the run moves
        much less than a ratio to a baseline measured minutes before."""
        before = stored() if stored else 0
        warm = wrk(url, self.args.warmup, script, script_env)
        profiler = self.start_profile(name, paired is not None)
        pids = self.processes.get(urllib.parse.urlsplit(url).port, [])
        cost = ProcessCost(pids) if pids else None
        inside_before = inside() if inside else None
        rounds, baseline = [], []
        for _ in range(self.args.rounds):
            if paired:
                baseline.append(wrk(paired.url, self.args.seconds, paired.script, paired.env))
            rounds.append(wrk(url, self.args.seconds, script, script_env))
        inside_after = inside() if inside else None
        if profiler:
            profiler.wait()
        row = {"name": name,
               "rps": statistics.median(r["rps"] for r in rounds),
               "p50": statistics.median(r["p50"] for r in rounds),
               "p99": statistics.median(r["p99"] for r in rounds),
               "errors": sum(r["errors"] for r in rounds), "timed": timed}
        if paired:
            row["paired"] = {"ratio": statistics.median(r["rps"] / b["rps"]
                                                        for r, b in zip(rounds, baseline)),
                             "baseline": [b["rps"] for b in baseline], "what": paired.what,
                             "errors": sum(b["errors"] for b in baseline)}
        if cost:
            row["cost"] = cost.per_request(sum(r["rps"] for r in rounds) * self.args.seconds)
        if inside:
            row["inside"] = inside_kagi(inside_before, inside_after)
        if stored:
            # Every write the warm-up and the rounds got acknowledged, against every write
            # stored meanwhile.
            row["acked"] = sum(r["acked"] or 0 for r in [warm] + rounds)
            row["stored"] = stored() - before
        self.rows.append(row)
        print("  %-34s %9.0f req/s  p50 %7.2f ms  p99 %7.2f ms%s%s%s" % (
            name, row["rps"], row["p50"], row["p99"],
            "" if not paired else "  (%.2fx %s, round by round)" % (row["paired"]["ratio"],
                                                                    paired.what),
            "" if not stored else "  acked %d, stored %d" % (row["acked"], row["stored"]),
            "" if not inside else "  (inside kagi: handling p99 <= %s, %s waits p99 <= %s)" % (
                duration_text(row["inside"]["handling_p99_us"]), row["inside"]["prefix"],
                duration_text(row["inside"]["wait_p99_us"]))), flush=True)
        return row


class Baseline:
    """What a paired row's rounds alternate with (Bench.scenario): `what` names it, and wrk runs
    `url` with `script` and `env` as for any row."""

    def __init__(self, what, url, script=None, env=None):
        self.what, self.url, self.script, self.env = what, url, script, env


class ProcessCost:
    """What server processes spend from now on, read back per request: CPU time (user +
    system, from /proc/PID/stat) and context switches (voluntary and not, summed over the
    threads in /proc/PID/task). The kernel's work for the process counts; nginx's and wrk's
    does not."""

    def __init__(self, pids):
        self.pids = pids
        self.start = self.read()

    def read(self):
        ticks = switches = 0
        for pid in self.pids:
            try:
                fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])
                for task in os.listdir("/proc/%d/task" % pid):
                    for line in open("/proc/%d/task/%s/status" % (pid, task)):
                        if line.startswith(("voluntary_ctxt", "nonvoluntary_ctxt")):
                            switches += int(line.split()[1])
            except OSError:
                pass  # a thread that ended meanwhile
        return ticks, switches

    def per_request(self, requests):
        ticks, switches = self.read()
        n = max(requests, 1)
        return {"cpu_us": (ticks - self.start[0]) * 1e6 / os.sysconf("SC_CLK_TCK") / n,
                "switches": (switches - self.start[1]) / n}


ADMIN_USER, ADMIN_PASSWORD = "bench", "bench-only-password"


def admin_htpasswd(env):
    """An htpasswd file for kagi's admin routes, which the rows read kagi's statistics from."""
    path = env.path("admin.htpasswd")
    if not os.path.exists(path):
        subprocess.run(["htpasswd", "-cbB", path, ADMIN_USER, ADMIN_PASSWORD], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return path


def kagi_stats(port):
    """The "stats" object of kagi's /admin/locks.json on `port` (docs/ADMIN.md): the sums of
    every process of the host since it started."""
    auth = base64.b64encode(("%s:%s" % (ADMIN_USER, ADMIN_PASSWORD)).encode()).decode()
    r = harness.request(port, "GET", "/admin/locks.json",
                        headers={"Authorization": "Basic " + auth})
    if r.status != 200:
        raise RuntimeError("/admin/locks.json: %d %s" % (r.status, r.text()[:200]))
    return json.loads(r.body)["stats"]


def bucket_delta(after, before):
    """A histogram's buckets (log scale: bucket i counts durations below 2^i µs) gained between
    two snapshots; `before` may be None (the histogram was new)."""
    old = before["buckets"] if before else [0] * len(after["buckets"])
    return [a - b for a, b in zip(after["buckets"], old)]


def bound_us(buckets, q):
    """The bucket bound below which at least `q` of the samples fall (None without samples)."""
    total = sum(buckets)
    if total == 0:
        return None
    seen = 0
    for i, n in enumerate(buckets):
        seen += n
        if seen >= q * total:
            return 2 ** i
    return 2 ** (len(buckets) - 1)


def inside_kagi(before, after):
    """What kagi itself measured between two kagi_stats snapshots: its handling of the busiest
    route (from its request read to its answer's last byte handed to the front end) and the
    waits for the busiest lock prefix, each as a p99 bucket bound."""
    def busiest(items, key, hist):
        """(the item that gained most samples in `hist`, its gained buckets, its old self)."""
        old = dict((item[key], item) for item in before[items])
        gained = [(item, bucket_delta(item[hist], old.get(item[key], {}).get(hist)))
                  for item in after[items]]
        item, buckets = max(gained, key=lambda g: sum(g[1]))
        return item, buckets, old.get(item[key], {})
    route, handled, _ = busiest("requests", "route", "duration")
    prefix, waits, old_prefix = busiest("prefixes", "prefix", "wait")
    acquisitions = sum(waits)
    contended = prefix["contended"] - old_prefix.get("contended", 0)
    # Group commit's counters (stats.storage), gained over the rounds; none when a process
    # restarted meanwhile (its counters started over, so the sums went down).
    storage = {key: value - before.get("storage", {}).get(key, 0)
               for key, value in after.get("storage", {}).items()}
    if any(v < 0 for v in storage.values()):
        storage = {}
    return {"route": route["route"], "requests": sum(handled),
            "handling_p99_us": bound_us(handled, 0.99),
            "prefix": prefix["prefix"], "acquisitions": acquisitions,
            "contended": contended / float(max(acquisitions, 1)),
            "wait_p99_us": bound_us(waits, 0.99), "storage": storage}


PEERS = os.path.join(HERE, "..", "peers")


def start_c_hello(env, name="hello", args=()):
    """The libfcgi C hello world (tests/bench/peers/hello_fcgi.c), one thread per connection
    nginx may keep open, so kept connections never starve it; on env.path(name + ".sock").
    `args` after the thread count: [FILE] answers that file's bytes instead, ["--append", LOG]
    appends each request's body to LOG under flock (the floor of a locked write). Returns the
    socket's path and the program's pid."""
    binary = env.path("hello_fcgi")
    if not os.path.exists(binary):
        subprocess.run(["cc", "-O2", "-pthread", os.path.join(PEERS, "hello_fcgi.c"), "-lfcgi",
                        "-o", binary], check=True)
    sock = env.path(name + ".sock")
    proc = env.start(["spawn-fcgi", "-n", "-s", sock, "-M", "0666", "--", binary,
                      str(CONNECTIONS)] + list(args), name + "_fcgi.out")
    harness.wait_for_unix(sock)
    return sock, proc.pid  # -n: spawn-fcgi becomes the program (no fork)


# Every server of the benchmark's own reads its FastCGI program through the recipe's buffers.
RECIPE_BUFFERS = harness.recipe_buffers(os.path.join(HERE, "..", "..", ".."))


def c_server(upstream, sock, port):
    """An nginx server on `port` in front of a C peer on `sock`, with kept connections and the
    buffers of kagi's recipe."""
    return """
    upstream %s { server unix:%s; keepalive %d; }
    server {
        listen 127.0.0.1:%d;
        %s
        location / { include fastcgi_params; fastcgi_pass %s; fastcgi_keep_conn on; }
    }""" % (upstream, sock, CONNECTIONS, port, RECIPE_BUFFERS, upstream)


# The reads whose answers are big: their floor is also measured answering the same bytes.
SAME_BYTES = {"page": "BBS page", "poll": "chat poll"}


def same_bytes_floors(bench, env, ports):
    """A function(key, body) that, just before kagi's read row `key`, measures a floor answering
    `body` (what kagi answered to it): the C program behind nginx (FastCGI), or nginx itself
    serving it as a static file (the embedded front end, against nginx `return 200`)."""
    def c_floor(key, body):
        path = env.path("same-bytes-" + key)
        open(path, "wb").write(body)
        start_c_hello(env, "c-" + key, [path])
        return bench.scenario("libfcgi C program answering the %s's %d bytes" % (SAME_BYTES[key],
                                                                           len(body)),
                              "http://127.0.0.1:%d/" % ports["c_" + key])

    def static_floor(key, body):
        open(env.path("same-bytes-" + key), "wb").write(body)
        return bench.scenario("nginx serving the %s's %d bytes (a static file)" % (SAME_BYTES[key],
                                                                             len(body)),
                              "http://127.0.0.1:%d/same-bytes-%s" % (ports["base"], key))
    return c_floor, static_floor


def write_floor(bench, port, log, paired=None):
    """The floor of a locked write: the C program behind nginx on `port` appending each posted
    body to `log` under flock (hello_fcgi.c --append), sent the same posts as kagi's write rows
    (post.lua), each counted back as a line of the file. `paired` (the C hello, a Baseline):
    its rounds alternate with the baseline's, as the rows with a goal against it do."""
    def lines():
        return open(log, "rb").read().count(b"\n") if os.path.exists(log) else 0

    return bench.scenario("libfcgi C program: flock, append the body, unlock (1 file)",
                          "http://127.0.0.1:%d" % port, os.path.join(HERE, "post.lua"),
                          {"KAGI_CSRF": TOKEN, "KAGI_PATHS": "/", "KAGI_OK": "303"},
                          stored=lines, paired=paired)


def start_php_fpm(env, children):
    """Debian's php8.2-fpm with opcache on (timestamps not checked: production settings), a
    static pool of `children` processes."""
    d = env.path("php")
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    sock = os.path.join(d, "php.sock")
    root = os.getuid() == 0
    conf = """
[global]
pid = %(d)s/php-fpm.pid
error_log = %(d)s/php-fpm.log
daemonize = no
[bench]
%(user)s
listen = %(sock)s
listen.mode = 0666
pm = static
pm.max_children = %(children)d
pm.max_requests = 0
php_admin_value[opcache.enable] = 1
php_admin_value[opcache.validate_timestamps] = 0
php_admin_value[display_errors] = 0
php_admin_value[log_errors] = 1
""" % {"d": d, "sock": sock, "children": children,
       "user": "user = root\ngroup = root" if root else ""}
    open(os.path.join(d, "php-fpm.conf"), "w").write(conf)
    argv = ["php-fpm8.2", "-F", "-y", os.path.join(d, "php-fpm.conf")] + (["-R"] if root else [])
    # Its own process group, stopped as a group by env.close(): a SIGKILL to the master alone
    # would leave its workers running.
    env.groups.append(env.start(argv, "php-fpm.out", start_new_session=True))
    harness.wait_for_unix(sock)
    return sock, os.path.join(d, "data")


def peer_servers(c_port, c_sock, php_port, php_sock, php_data):
    """nginx servers for the peers: the C hello with kept connections (as kagi's recipe),
    PHP-FPM the way Debian ships it (a new connection per request: php-fpm's children
    would each sit on a kept connection)."""
    php = os.path.realpath(os.path.join(PEERS, "php"))
    locations = "".join("""
        location %s {
            include fastcgi_params;
            fastcgi_param SCRIPT_FILENAME %s/%s;
            fastcgi_param PEER_DATA %s;
            fastcgi_pass unix:%s;
        }""" % (where, php, script, php_data, php_sock)
        for where, script in (("= /hello", "hello.php"), ("/bbs/", "bbs.php"),
                              ("/chat/", "chat.php")))
    return c_server("c_hello", c_sock, c_port) + """
    server {
        listen 127.0.0.1:%d;
        %s%s
    }""" % (php_port, RECIPE_BUFFERS, locations)


def start_nginx(env, port, base_port, sock, extra=""):
    """nginx with the shipped recipe, plus a baseline server answering `return 200` (and the
    same-bytes files, as static files)."""
    statics = "".join("""
        location = /same-bytes-%s { default_type text/html; alias %s; }""" % (
        key, env.path("same-bytes-" + key)) for key in SAME_BYTES)
    baseline = """
    server {
        listen 127.0.0.1:%d;
        location / { default_type text/plain; return 200 "hello\\n"; }%s
    }""" % (base_port, statics)
    proc = env.nginx(port, sock, extra_http=baseline + extra, quiet=True)
    harness.wait_for_port(base_port, proc, "nginx baseline")


def kagi_settings(env, fsync, name):
    """The --set items of one kagi host (data and locks in folders named after `name`)."""
    return ["log.access=false", "data.fsync=" + fsync, "bbs.flood_interval_s=0",
            "chat.say_per_minute=0", "chat.keep=200",
            "bbs.boards=general," + ",".join("b%d" % i for i in range(8)),
            "data.dir=" + env.path("data-" + name), "locks.dir=" + env.path("locks-" + name)]


def run_kagi(env, fsync, extra=(), processes=2, name=None):
    """One kagi host under spawn-fcgi: `processes` x 4 threads, data and locks of its own
    (`name`, by default `fsync`)."""
    name = name or fsync
    sock = env.path("kagi-%s.sock" % name)
    pids = env.spawn_fcgi(sock, processes, 4, kagi_settings(env, fsync, name) + list(extra) +
                          ["admin.htpasswd=" + admin_htpasswd(env)])
    harness.wait_for_unix(sock)
    return sock, pids


def kagi_server(name, sockets, port):
    """An nginx upstream over `sockets` (kept connections and buffers, as the shipped recipe)
    and a server on `port` in front of it."""
    return """
    upstream %s { %s keepalive 32; }
    server {
        listen 127.0.0.1:%d;
        %s
        location / { include fastcgi_params; fastcgi_param REMOTE_ADDR $remote_addr;
                     fastcgi_pass %s; fastcgi_keep_conn on; }
    }""" % (name, " ".join("server unix:%s;" % s for s in sockets), port, RECIPE_BUFFERS, name)


ONE_PROCESS = "1 process x 4 threads"
PG_HOSTS = 2
PG_TAG = "2 hosts, PostgreSQL, synchronous_commit=%s"  # data.fsync never/always: off/on
SYNC = {"never": "off", "always": "on"}


def pg_sockets(env, fsync):
    """The sockets of the PostgreSQL site's hosts for `fsync` (known before they start, so
    nginx's config can name them up front)."""
    return [env.path("kagi-pg-%s-host%d.sock" % (fsync, h + 1)) for h in range(PG_HOSTS)]


def secret_file(env):
    """The secret every host of the PostgreSQL sites shares (a CSRF cookie minted by one is
    then accepted by the other): 64 lowercase hex digits, mode 0600."""
    path = env.path("secret.key")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, os.urandom(32).hex().encode() + b"\n")
    os.close(fd)
    return path


def run_pg_hosts(env, pg, fsync, secret):
    """One site on PG_HOSTS kagi hosts (each as run_kagi: 2 processes x 4 threads, its own
    data.dir and locks.dir) with locks and data in a database of its own on `pg`, so the
    sites of the two data.fsync settings share no boards. Returns every pid."""
    db = "bench_" + fsync
    pg.sql("CREATE DATABASE " + db)
    shared = ["locks.backend=postgres", "locks.postgres.dsn=" + pg.dsn.replace(
        "dbname=postgres", "dbname=" + db), "data.backend=postgres",
        "security.secret_file=" + secret]
    pids = []
    for h, sock in enumerate(pg_sockets(env, fsync)):
        name = "pg-%s-host%d" % (fsync, h + 1)
        pids += env.spawn_fcgi(sock, 2, 4, kagi_settings(env, fsync, name) + shared)
    for sock in pg_sockets(env, fsync):
        harness.wait_for_unix(sock, timeout=20)
    return pids


def stop_pids(pids):
    """SIGKILLs kagi processes and waits for them, before their PostgreSQL stops (so their
    logs do not fill with the server's shutdown)."""
    for pid in pids:
        harness.kill(pid, signal.SIGKILL)
    for pid in pids:
        harness.wait_until("kagi-demo %d to die" % pid, lambda: not harness.pid_alive(pid))


def pgbench_binary():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pgbench"))
    return found[-1] if found else None


def pg_floor(env, pg, db, seconds):
    """The PostgreSQL floor of a BBS post: raw libpq (pgbench, CONNECTIONS clients, the simple
    protocol kagi speaks) sending the statements a post sends — take the board's advisory lock
    (drawing its epoch), read what is new in the log (nothing), append through kagi_append
    (stamping the epoch), unlock — on the same server, without HTTP or kagi. One lock (one
    board) and eight. Returns {"post1": tps, "post8": tps}, or {} without pgbench."""
    binary = pgbench_binary()
    if binary is None:
        return {}
    args = dict(item.split("=", 1) for item in pg.dsn.split())
    paths = ["floor/one.log"] + ["floor/b%d.log" % i for i in range(1, 9)]
    for path in paths:  # each log exists, so its generation is known
        harness_sql(pg, db, "SELECT kagi_append('%s', 'floor', 0, decode('00', 'hex'), false)" % path)
    gens = {path: harness_sql(pg, db, "SELECT generation FROM kagi_logs WHERE path = '%s'" % path)
            for path in paths}
    first = int(gens["floor/b1.log"])
    if [int(gens["floor/b%d.log" % i]) for i in range(1, 9)] != list(range(first, first + 8)):
        raise RuntimeError("the floor's logs did not get consecutive generations: %s" % gens)
    one = ("SELECT pg_advisory_lock(700001) AS l, nextval('kagi_lock_epochs') AS e \\gset\n"
           "SELECT out_generation, out_seq, encode(out_record, 'hex') FROM kagi_read_since("
           "'floor/one.log', %s, 9000000000000000000);\n"
           "SELECT kagi_append('floor/one.log', 'floor/one', :e, decode('7772', 'hex'), false);\n"
           "SELECT pg_advisory_unlock(700001);\n" % gens["floor/one.log"])
    eight = "\\set b random(1, 8)\n"
    eight += "SELECT pg_advisory_lock(700100 + :b) AS l, nextval('kagi_lock_epochs') AS e \\gset\n"
    # The generation of log b<N> is the first one's plus N - 1 (made in that order above).
    eight += ("SELECT out_generation, out_seq, encode(out_record, 'hex') FROM kagi_read_since("
              "'floor/b' || :b || '.log', %s + :b - 1, 9000000000000000000);\n"
              "SELECT kagi_append('floor/b' || :b || '.log', 'floor/b' || :b, :e, "
              "decode('7772', 'hex'), false);\n"
              "SELECT pg_advisory_unlock(700100 + :b);\n" % gens["floor/b1.log"])
    out = {}
    for key, script in (("post1", one), ("post8", eight)):
        path = env.path("floor-%s.sql" % key)
        open(path, "w").write(script)
        run = subprocess.run([binary, "-n", "-M", "simple", "-f", path, "-T", str(seconds),
                              "-c", str(CONNECTIONS), "-j", str(THREADS), "-h", args["host"],
                              "-p", args["port"], "-U", args["user"], db],
                             capture_output=True, text=True, timeout=seconds + 60)
        m = re.search(r"tps = ([0-9.]+)", run.stdout)
        if run.returncode != 0 or not m:
            raise RuntimeError("pgbench failed: %s %s" % (run.stdout[-400:], run.stderr[-400:]))
        out[key] = float(m.group(1))
        print("  %-60s %7.0f posts/s" % ("raw libpq floor (pgbench), " + key, out[key]), flush=True)
    return out


def harness_sql(pg, db, sql):
    """The first field `sql` returns, in database `db` of `pg` (psql as the cluster's user)."""
    args = dict(item.split("=", 1) for item in pg.dsn.split())
    run = subprocess.run(["psql", "-X", "-At", "-h", args["host"], "-p", args["port"], "-U",
                          args["user"], "-d", db, "-c", sql], capture_output=True, text=True,
                         timeout=60, check=True)
    return run.stdout.strip().split("\n")[0]


def pg_scenarios(bench, env, ports, settings, durable, reads):
    """Starts a private PostgreSQL (durable: the server's durability defaults), a site of
    PG_HOSTS hosts per data.fsync setting in `settings` (nginx already fronts their sockets
    on ports[fsync]), runs app_scenarios against each (the read rows, when `reads`, on the
    first only: they do not depend on synchronous_commit), and stops it all. Returns
    {fsync: rows}."""
    out = {}
    pg = pgcluster.PgCluster(env)
    if durable:
        pg.env["KAGI_PG_DURABLE"] = "1"
    with pg:
        version, fsync_on, fpw = pg.sql("SELECT current_setting('server_version'), "
                                        "current_setting('fsync'), "
                                        "current_setting('full_page_writes')").split("|")
        bench.pg_server = "%s (fsync=%s, full_page_writes=%s)" % (version.split()[0], fsync_on,
                                                                   fpw)
        secret = secret_file(env)
        pids = []
        try:
            for fsync in settings:
                pids += run_pg_hosts(env, pg, fsync, secret)
            for i, fsync in enumerate(settings):
                token = csrf_token(ports[fsync])
                out[fsync] = app_scenarios(bench, "kagi", ports[fsync], token,
                                           " (%s)" % (PG_TAG % SYNC[fsync]),
                                           reads=reads and i == 0,
                                           read_tag=", 2 hosts, PostgreSQL")
            if reads:  # the full run: the floor too, on the first setting's database
                bench.pg_floor = pg_floor(env, pg, "bench_" + settings[0],
                                          bench.args.seconds)
        finally:
            stop_pids(pids)
    return out


def bbs_total(port, board):
    """Posts ever stored on `board`: ids are never reused, so the last id counts them even
    after retention dropped old ones."""
    r = harness.request(port, "GET", "/bbs/%s/posts.json?limit=1" % board)
    return json.loads(r.body)["last_id"]


def chat_last(port):
    r = harness.request(port, "GET", "/chat/lobby/messages?since=0&wait=0")
    return json.loads(r.body)["last"]


def peak_rss_kib(pids):
    out = []
    for pid in pids:
        try:
            for line in open("/proc/%d/status" % pid):
                if line.startswith("VmHWM:"):
                    out.append(int(line.split()[1]))
        except OSError:
            pass
    return out


TOKEN = "0123456789abcdef0123456789abcdef"  # the peers' CSRF cookie + field (kagi's is asked for)


def seed_board(port, token, path="/bbs/general/post"):
    """A board page with 20 posts to render."""
    for i in range(20):
        r = harness.request(port, "POST", path, harness.form_body(
            {"_csrf": token, "name": "seed", "body": "seed post %d with some text" % i}),
            {"Content-Type": "application/x-www-form-urlencoded", "Cookie": "kagi_csrf=" + token})
        if r.status != 303:
            raise RuntimeError("seeding %s: %d %s" % (path, r.status, r.text()[:200]))


def csrf_token(port):
    """The CSRF token kagi on `port` sets in its cookie: what wrk's posts send back."""
    return harness.request(port, "GET", "/").cookies()["kagi_csrf"]


def same_bytes(port, token, path):
    """What `path` answers (with the client's CSRF cookie, as wrk's page reads are not)."""
    return harness.request(port, "GET", path, headers={"Cookie": "kagi_csrf=" + token}).body


# The rows with a goal against the C hello, and the goal: paired with it (app_scenarios), and
# set against it (goals).
C_HELLO_GOALS = (("page", "BBS page read", 0.9), ("post1", "BBS post, 1 board", 0.9),
                 ("say", "chat say", 0.9), ("poll", "chat poll (200 messages)", 0.75))


def app_scenarios(bench, who, port, token, tag="", reads=True, read_tag="", floor=None,
                  append_floor=None, inside=None, paired=None, never=None):
    """The app scenarios against one implementation (kagi or the PHP peer) on `port`. `tag`
    ends the write rows' names, `read_tag` goes inside the read rows' parentheses. `floor`
    (same_bytes_floors) measures a floor answering the same bytes before each big read,
    `append_floor()` (write_floor) the floor of a locked write before the writes. `inside`
    (kagi_stats, for kagi) adds what kagi measured of its write rows. `paired` (the C hello, a
    Baseline) pairs the rows that have a goal against it (Bench.scenario); `never` (the port
    and token of the same host with data.fsync=never) pairs each write row with the same writes
    to that host, for the group commit goals."""
    url = "http://127.0.0.1:%d" % port
    post = os.path.join(HERE, "post.lua")
    rows = {}

    def pairing(key, script_env=None):
        """What row `key` is paired with: the same writes to the `never` host on a durable
        host, else `paired` for a row with a goal against the C hello (C_HELLO_GOALS)."""
        if never:
            env = dict(script_env, KAGI_CSRF=never[1])
            return Baseline("data.fsync=never", "http://127.0.0.1:%d" % never[0], post, env)
        return paired if key in [k for k, _, _ in C_HELLO_GOALS] else None
    if reads:
        seed_board(port, token)
        if floor:
            rows["page_floor"] = floor("page", same_bytes(port, token, "/bbs/general/"))
        rows["page"] = bench.scenario("%s BBS page read (20 posts%s)" % (who, read_tag),
                                      url + "/bbs/general/", paired=pairing("page"))
    if append_floor:
        rows["write_floor"] = append_floor()
    one_board = {"KAGI_CSRF": token, "KAGI_PATHS": "/bbs/general/post"}
    rows["post1"] = bench.scenario(
        "%s BBS post, 1 board%s" % (who, tag), url, post, one_board,
        stored=lambda: bbs_total(port, "general"), inside=inside,
        paired=pairing("post1", one_board))
    boards = ["b%d" % i for i in range(8)]
    eight_boards = {"KAGI_CSRF": token,
                    "KAGI_PATHS": ",".join("/bbs/%s/post" % b for b in boards)}
    rows["post8"] = bench.scenario(
        "%s BBS post, 8 boards%s" % (who, tag), url, post, eight_boards,
        stored=lambda: sum(bbs_total(port, b) for b in boards), inside=inside,
        paired=pairing("post8", eight_boards))
    say = {"KAGI_CSRF": token, "KAGI_PATHS": "/chat/lobby/say", "KAGI_FIELD": "text",
           "KAGI_OK": "200"}
    rows["say"] = bench.scenario(
        "%s chat say%s" % (who, tag), url, post, say,
        stored=lambda: chat_last(port), inside=inside, paired=pairing("say", say))
    if reads:
        if floor:
            rows["poll_floor"] = floor("poll", same_bytes(
                port, token, "/chat/lobby/messages?since=0&wait=0"))
        rows["poll"] = bench.scenario("%s chat poll (since=0, 200 messages%s)" % (who, read_tag),
                                      url + "/chat/lobby/messages?since=0&wait=0",
                                      paired=pairing("poll"))
    return rows


def start_http_floor(env, port):
    """The HTTP floor (tests/bench/peers/http_floor.c): a C epoll server, one thread per core,
    answering every request head with fixed bytes, on `port`."""
    binary = env.path("http_floor")
    subprocess.run(["cc", "-O2", "-pthread", os.path.join(PEERS, "http_floor.c"), "-o", binary],
                   check=True)
    proc = env.start([binary, str(port)], "http_floor.out")
    harness.wait_for_port(port, proc, "http_floor")


def embedded_scenarios(bench, env, base_port, floor=None):
    """kagi-demo's own HTTP front end (Boost.Beast), no nginx in front: one process with as many
    threads as cores, the same app rows as behind nginx, and hellos kept-alive and pipelined next
    to nginx `return 200` and a Node.js `http` hello (one process per core, `cluster`)."""
    cores = os.cpu_count() or 1
    port, node_port = harness.free_port(), harness.free_port()
    proc = env.start([env.demo, "--http", "127.0.0.1:%d" % port] +
                     env.demo_settings(cores, kagi_settings(env, "never", "http")), "kagi-http.out")
    harness.wait_for_port(port, proc, "kagi-demo --http")
    node = env.start(["node", os.path.join(PEERS, "node_hello.js"), str(node_port)], "node.out")
    harness.wait_for_port(node_port, node, "node")
    floor_port = harness.free_port()
    start_http_floor(env, floor_port)
    floor_url = "http://127.0.0.1:%d/" % floor_port
    pipe = os.path.join(HERE, "pipeline.lua")
    base = "http://127.0.0.1:%d/" % base_port
    node_url = "http://127.0.0.1:%d/" % node_port
    hello = "http://127.0.0.1:%d/_test/hello" % port
    r = {}
    # nginx `return 200` again, right beside the rows it is the baseline of: minutes after the
    # first one, on a shared machine, the same nginx measured 25% apart.
    r["base"] = bench.scenario("nginx return 200 (beside the embedded rows)", base)
    r["node"] = bench.scenario("Node.js http hello (cluster, %d processes)" % cores, node_url)
    r["floor"] = bench.scenario("C epoll HTTP hello (the floor: fixed bytes per request head)",
                                floor_url)
    r["hello"] = bench.scenario("kagi hello (embedded HTTP, no nginx)", hello)
    r["base_pipe"] = bench.scenario("nginx return 200, pipelined x16", base, pipe, timed=False)
    r["node_pipe"] = bench.scenario("Node.js http hello, pipelined x16", node_url, pipe,
                                    timed=False)
    r["floor_pipe"] = bench.scenario("C epoll HTTP hello (the floor), pipelined x16", floor_url,
                                     pipe, timed=False)
    r["hello_pipe"] = bench.scenario("kagi hello (embedded HTTP), pipelined x16", hello, pipe,
                                     timed=False)
    token = csrf_token(port)
    r["app"] = app_scenarios(bench, "kagi", port, token, " (embedded HTTP, data.fsync=never)",
                             read_tag=", embedded HTTP", floor=floor)
    r["rss"] = peak_rss_kib([proc.pid])
    return r


def run_all(bench, env):
    """Everything behind one nginx: the baselines, the peers, kagi with data.fsync=never (the
    peers' durability: no fsync) and kagi with its default, always; then kagi on two hosts
    sharing PostgreSQL, with each of the two."""
    ports = {k: harness.free_port() for k in ("kagi", "base", "c", "php", "always", "one",
                                               "one_always", "c_page", "c_poll", "c_append")}
    pg_ports = {fsync: harness.free_port() for fsync in SYNC}
    sock, pids = run_kagi(env, "never")
    # Beside it, each behind an nginx server of its own: kagi's default durability, and the
    # same host as one process (its locks never cross processes) with each of the two.
    hosts = {"always": run_kagi(env, "always"),
             "one": run_kagi(env, "never", processes=1, name="one"),
             "one_always": run_kagi(env, "always", processes=1, name="one-always")}
    c_sock, c_pid = start_c_hello(env)
    append_log = env.path("c-append.log")
    append_sock, append_pid = start_c_hello(env, "c-append", ["--append", append_log])
    bench.watch(ports["kagi"], pids)
    bench.watch(ports["c"], [c_pid])
    bench.watch(ports["c_append"], [append_pid])
    php_sock, php_data = start_php_fpm(env, bench.args.php_children)
    extra = peer_servers(ports["c"], c_sock, ports["php"], php_sock, php_data)
    extra += c_server("c_append", append_sock, ports["c_append"])
    for key, (host_sock, host_pids) in hosts.items():
        bench.watch(ports[key], host_pids)
        extra += kagi_server("kagi_" + key, [host_sock], ports[key])
    # The same-bytes C peers start when kagi's answers are known (same_bytes_floors).
    for key in SAME_BYTES:
        extra += c_server("c_" + key, env.path("c-%s.sock" % key), ports["c_" + key])
    # The PostgreSQL sites' hosts start after the other rows (pg_scenarios): until then
    # nothing listens on these sockets and nothing asks these ports.
    for fsync, port in pg_ports.items():
        extra += kagi_server("kagi_pg_" + fsync, pg_sockets(env, fsync), port)
    start_nginx(env, ports["kagi"], ports["base"], sock, extra)
    for port in [ports[k] for k in ["c", "php", "c_page", "c_poll", "c_append"] + list(hosts)] + \
            list(pg_ports.values()):
        harness.wait_for_port(port, None, "nginx")

    r = {}
    r["baseline"] = bench.scenario("nginx return 200 (upper bound)",
                                   "http://127.0.0.1:%d/" % ports["base"])
    r["c_hello"] = bench.scenario("libfcgi C hello (threaded, kept connections)",
                                  "http://127.0.0.1:%d/" % ports["c"])
    r["php_hello"] = bench.scenario("PHP-FPM hello", "http://127.0.0.1:%d/hello" % ports["php"])
    # The rows with a goal against the C hello run each round right after one of it (paired).
    c_url = Baseline("the C hello", "http://127.0.0.1:%d/" % ports["c"])
    r["hello"] = bench.scenario("kagi hello", "http://127.0.0.1:%d/_test/hello" % ports["kagi"],
                                paired=c_url)
    r["php"] = app_scenarios(bench, "PHP-FPM", ports["php"], TOKEN)
    kagi_token = csrf_token(ports["kagi"])
    c_floor, static_floor = same_bytes_floors(bench, env, ports)
    r["kagi"] = app_scenarios(bench, "kagi", ports["kagi"], kagi_token, " (data.fsync=never)",
                              floor=c_floor,
                              append_floor=lambda: write_floor(bench, ports["c_append"],
                                                               append_log, paired=c_url),
                              inside=lambda: kagi_stats(ports["kagi"]), paired=c_url)
    r["rss"] = peak_rss_kib(pids)
    r["hello_one"] = bench.scenario("kagi hello (%s)" % ONE_PROCESS,
                                    "http://127.0.0.1:%d/_test/hello" % ports["one"],
                                    paired=c_url)
    one_token = csrf_token(ports["one"])
    r["one"] = app_scenarios(bench, "kagi", ports["one"], one_token,
                             " (data.fsync=never, %s)" % ONE_PROCESS, read_tag=", " + ONE_PROCESS,
                             inside=lambda: kagi_stats(ports["one"]), paired=c_url)
    always_token = csrf_token(ports["always"])
    # What the rows before wrote without fsync is still dirty (tens of MB): written out now, so
    # that the durable rows flush their own posts, not the never rows' leftovers.
    os.sync()
    # Each durable row's rounds alternate with the same writes to the same shape with
    # data.fsync=never (paired), for the group commit goals.
    r["always"] = app_scenarios(bench, "kagi", ports["always"], always_token,
                                " (data.fsync=always, the default)", reads=False,
                                inside=lambda: kagi_stats(ports["always"]),
                                never=(ports["kagi"], kagi_token))
    one_always_token = csrf_token(ports["one_always"])
    r["one_always"] = app_scenarios(
        bench, "kagi", ports["one_always"], one_always_token,
        " (data.fsync=always, %s)" % ONE_PROCESS, reads=False,
        inside=lambda: kagi_stats(ports["one_always"]), never=(ports["one"], one_token))
    r["pg"] = pg_scenarios(bench, env, pg_ports, ("never", "always"), durable=True, reads=True)
    r["http"] = embedded_scenarios(bench, env, ports["base"], static_floor)
    return r


def vs_c_hello(row, r):
    """A row against the libfcgi C hello: the median of its round-by-round ratios when its rounds
    were paired with the C hello's (Bench.scenario), else against the C hello's own row."""
    return paired_ratio(row, r["c_hello"])


def paired_ratio(row, baseline):
    """`row` against `baseline`: the median of the round-by-round ratios when the row's rounds
    alternated with the baseline's (Bench.scenario), else the ratio of the two rows' medians."""
    if "paired" in row:
        return row["paired"]["ratio"]
    return row["rps"] / baseline["rps"]


def paired_spread(bench):
    """(lowest, highest) req/s of the C hello's rounds run beside paired rows, or None."""
    rounds = [b for row in bench.rows if row.get("paired", {}).get("what") == "the C hello"
              for b in row["paired"]["baseline"]]
    return (min(rounds), max(rounds)) if rounds else None


def goals(r):
    """(goal, measured ratio, wanted, what the goal needs or None) for every ratio goal of the
    benchmark issue. What a goal against another implementation needs is (its req/s, the req/s
    of the floor it is set beside, that floor's name), all of the same run: the FastCGI floor
    (the C hello) for the FastCGI rows, the HTTP floor (http_floor.c) for the embedded ones."""
    k, php, always = r["kagi"], r["php"], r["always"]

    def fastcgi(rps):
        return (rps, r["c_hello"]["rps"], "the floor")
    out = [("kagi hello vs libfcgi C hello", vs_c_hello(r["hello"], r), 1.0,
            fastcgi(r["c_hello"]["rps"])),
           ("kagi hello vs PHP-FPM hello", r["hello"]["rps"] / r["php_hello"]["rps"], 3.0,
            fastcgi(3.0 * r["php_hello"]["rps"]))]
    for key, what in (("page", "BBS page read"), ("post1", "BBS post, 1 board"),
                      ("post8", "BBS post, 8 boards"), ("say", "chat say"),
                      ("poll", "chat poll")):
        out.append(("kagi %s vs PHP-FPM" % what, k[key]["rps"] / php[key]["rps"], 5.0,
                    fastcgi(5.0 * php[key]["rps"])))
    out.append(("kagi BBS posts: 8 boards vs 1 board (data.fsync=never)",
                k["post8"]["rps"] / k["post1"]["rps"], 1.5, None))
    out.append(("kagi BBS posts: 8 boards vs 1 board (data.fsync=always, the default)",
                always["post8"]["rps"] / always["post1"]["rps"], 1.5, None))
    # The usual host (two processes), and the same host as one process (ONE_PROCESS), whose
    # locks never cross processes: (its rows with fsync never, with always, what names them).
    shapes = [(k, always, "")]
    if "one" in r:
        shapes.append((r["one"], r["one_always"], ONE_PROCESS))
        out.append(("kagi hello (%s) vs libfcgi C hello" % ONE_PROCESS,
                    vs_c_hello(r["hello_one"], r), 1.0, None))
    for never, durable, shape in shapes:
        # Group commit: the default durability against no fsync at all, same run.
        for key, what, want in (("post1", "BBS post, 1 board", 0.5),
                                ("post8", "BBS post, 8 boards", 0.7),
                                ("say", "chat say, 1 room", 0.5)):
            out.append(("kagi %s: data.fsync=always vs never (group commit%s)" % (
                what, ", " + shape if shape else ""), paired_ratio(durable[key], never[key]),
                want, None))
        # The FastCGI path against its floor, the libfcgi C hello behind the same nginx.
        for key, what, want in C_HELLO_GOALS:
            out.append(("kagi %s (data.fsync=never%s) vs libfcgi C hello" % (
                what, ", " + shape if shape else ""), vs_c_hello(never[key], r), want, None))
    # The embedded HTTP front end, against nginx `return 200` and Node.js, same run; what each
    # goal needs is set beside the HTTP floor (http_floor.c) of the same run.
    h = r["http"]
    for what, key, peer, peer_key, want in (
            ("kagi hello (embedded HTTP) vs nginx return 200", "hello", "base", "floor", 0.8),
            ("kagi hello (embedded HTTP) vs Node.js http hello", "hello", "node", "floor", 2.0),
            ("kagi hello (embedded HTTP), pipelined vs nginx return 200 pipelined", "hello_pipe",
             "base_pipe", "floor_pipe", 0.8),
            ("kagi hello (embedded HTTP), pipelined vs Node.js pipelined", "hello_pipe",
             "node_pipe", "floor_pipe", 2.0)):
        out.append((what, h[key]["rps"] / h[peer]["rps"], want,
                    (want * h[peer]["rps"], h[peer_key]["rps"], "the HTTP floor")))
    out.append(("kagi BBS page read (embedded HTTP) vs nginx return 200",
                h["app"]["page"]["rps"] / h["base"]["rps"], 0.5, None))
    for fsync in ("never", "always"):
        for key, what in (("post1", "BBS post, 1 board"), ("post8", "BBS post, 8 boards")):
            out.append(("kagi %s (%s) vs PHP-FPM" % (what, PG_TAG % SYNC[fsync]),
                        r["pg"][fsync][key]["rps"] / php[key]["rps"], 3.0,
                        fastcgi(3.0 * php[key]["rps"])))
    return out


def same_bytes_ratios(r):
    """(read, kagi / the floor answering the same bytes, that floor / the hello floor) for each
    big read: how much of a read's distance to its hello floor is the size of its answer."""
    out = []
    for key, what in SAME_BYTES.items():
        for rows, front, floor, hello in (
                (r["kagi"], "FastCGI", "the C program", r["c_hello"]),
                (r["http"]["app"], "embedded HTTP", "nginx, a static file", r["http"]["base"])):
            if key + "_floor" in rows:
                same = rows[key + "_floor"]["rps"]
                out.append(("kagi %s (%s) vs %s answering the same bytes" % (what, front, floor),
                            rows[key]["rps"] / same, same / hello["rps"]))
    return out


# The writes whose floor is the C program's locked append (write_floor).
SAME_WORK = {"post1": "BBS post, 1 board", "say": "chat say"}


def same_work_ratios(r):
    """(write, kagi / the floor doing a locked append, that floor / the C hello) for the FastCGI
    writes, of both host shapes. Each is taken against the C hello rounds run beside it (paired,
    where it was), so rows measured minutes apart compare: kagi / the floor is the quotient of
    the two rows' ratios to the C hello."""
    k = r["kagi"]
    if "write_floor" not in k:
        return []
    floor = vs_c_hello(k["write_floor"], r)
    shapes = [(k, "")] + ([(r["one"], ", " + ONE_PROCESS)] if "one" in r else [])
    return [("kagi %s (FastCGI, data.fsync=never%s)" % (what, shape),
             vs_c_hello(rows[key], r) / floor, floor)
            for rows, shape in shapes for key, what in SAME_WORK.items()]


def floor_note(needed):
    """What a goal needs (goals()), and whether that is more than its floor measured in the
    same run."""
    if needed is None:
        return ""
    rps, floor, name = needed
    if rps > floor:
        return "%.0f req/s: above %s (%.0f)" % (rps, name, floor)
    return "%.0f req/s" % rps


def ratio_table(lines, header, ratios):
    """Appends to `lines` a table of (what, kagi / its floor, that floor / its hello) rows."""
    lines += [header, "|---|---:|---:|"]
    lines += ["| %s | %.2f× | %.2f× |" % ratio for ratio in ratios]


def duration_text(us):
    """A bucket bound in µs as text: 512 µs, 2 ms."""
    if us is None:
        return "—"
    return "%d µs" % us if us < 1000 else "%g ms" % (us / 1000.0)


def write_report(path, bench, results, command):
    base = results["baseline"]
    lines = [
        "# Benchmarks",
        "",
        "Regenerated by `%s` on %s (%s, %d cores). wrk -t%d -c%d through one nginx (the "
        "shipped `conf/nginx/kagi.conf` for kagi); kagi-demo (Release) under spawn-fcgi, "
        "2 processes x 4 threads (rows marked `%s`: one), access log off; PHP-FPM 8.2 "
        "(opcache on, static pool of %d); the libfcgi C hello with %d threads. Each row: a %ds "
        "warm-up, then the median of %d rounds of %ds. Every ratio is between numbers measured "
        "in this same run." % (
            command, datetime.date.today().isoformat(), platform.machine(), os.cpu_count(),
            THREADS, CONNECTIONS, ONE_PROCESS, bench.args.php_children, CONNECTIONS,
            bench.args.warmup, bench.args.rounds, bench.args.seconds),
        "",
        "## Goals",
        "",
        "| goal | measured | wanted | met | the goal needs |",
        "|---|---:|---:|---|---|",
    ]
    floor = results["c_hello"]["rps"]
    for goal, got, want, needed in goals(results):
        lines.append("| %s | %.2f× | ≥ %.2g× | %s | %s |" % (
            goal, got, want, "yes" if got >= want else "**no**", floor_note(needed)))
    lines += [
        "",
        "*The floor* is the libfcgi C hello of this run (%.0f req/s): a FastCGI program that "
        "does nothing but answer, behind the same nginx. A goal that needs more than the floor "
        "asks a FastCGI app that reads and writes data under locks to answer faster than one "
        "that does nothing; no FastCGI app behind this nginx on this machine can meet it." % floor,
    ]
    spread = paired_spread(bench)
    if spread:
        lines += [
            "",
            "*Paired rounds.* The goals of kagi's FastCGI rows against the C hello are each the "
            "median of %d round-by-round ratios: every round of the kagi row ran right after "
            "a %ds round of the C hello. The machine drifts over a run (the C hello's rounds "
            "beside the paired rows made %.0f to %.0f req/s in this run, %.0f%% apart), and a "
            "ratio to a C hello measured minutes earlier would carry that drift. The group "
            "commit goals are paired the same way: every round of a data.fsync=always row ran "
            "right after a round of the same writes to the same shape of host with "
            "data.fsync=never." % (
                bench.args.rounds, bench.args.seconds, spread[0], spread[1],
                100.0 * (spread[1] / spread[0] - 1)),
        ]
    if "http" in results and "floor" in results["http"]:
        lines += [
            "",
            "*The HTTP floor* is the same for the embedded front end: a C program "
            "(`tests/bench/peers/http_floor.c`, epoll, one thread per core) that answers every "
            "request head it reads with fixed bytes, no parsing, on the same cores as wrk "
            "(%.0f req/s kept alive, %.0f pipelined). A goal above it asks a server that parses "
            "and routes to answer faster than one that does neither, on the same cores." % (results["http"]["floor"]["rps"],
                                                    results["http"]["floor_pipe"]["rps"]),
        ]
    lines += [
        "",
        "### The same bytes from the floor",
        "",
        "The page and the poll answer kilobytes where the hellos answer six bytes, and moving "
        "those bytes through nginx, the sockets and wrk costs on these two cores whoever makes "
        "them. So the run also measures each floor answering exactly the bytes kagi answered "
        "(fetched from kagi just before its row): the C program behind the same nginx, and "
        "nginx serving them as a static file for the embedded front end.",
        "",
    ]
    ratio_table(lines, "| read | kagi / the floor answering the same bytes | that floor / its hello "
                "floor |", same_bytes_ratios(results))
    if same_work_ratios(results):
        lines += [
            "",
            "### The same work from the floor",
            "",
            "A post or a say must take its board's or room's exclusive lock and append under it, "
            "so every write to one board waits for the one before it. The run measures that "
            "floor too, right before kagi's write rows: the C program behind the same nginx, "
            "sent the same posts, appending each body to one file under an exclusive `flock` "
            "(`hello_fcgi.c --append`: no parsing, no read of the file, no check, no fsync). "
            "Its rounds alternate with the C hello's, as the rows with a goal against the C hello "
            "do, and each ratio below is taken against the C hello rounds run beside its row: "
            "where the floor's own ratio is below a write's goal (0.9×), a locked append alone "
            "does not reach that goal on this machine.",
            "",
        ]
        ratio_table(lines, "| write | kagi / the floor's locked append | that floor / the C hello |",
                    same_work_ratios(results))
    costs = [r for r in bench.rows if r.get("cost")]
    if costs:
        lines += [
            "",
            "### What the FastCGI program spends per request",
            "",
            "Over each row's timed rounds, the server processes' own CPU time (user + system, "
            "the kernel's work on their behalf included; nginx and wrk not) and their context "
            "switches, from /proc, divided by the requests served. On two cores shared with "
            "nginx and wrk, this is what a row's rate is made of. The data.fsync=always rows "
            "include their flushes (the syscalls, not the writes the kernel's own threads make).",
            "",
            "| row | CPU µs per request | context switches per request |",
            "|---|---:|---:|",
        ]
        lines += ["| %s | %.1f | %.2f |" % (r["name"], r["cost"]["cpu_us"], r["cost"]["switches"])
                  for r in costs]
    insides = [r for r in bench.rows if r.get("inside")]
    if insides:
        lines += [
            "",
            "### Where the write rows' tails are",
            "",
            "Over each kagi write row's timed rounds, kagi's own statistics (`/admin/locks.json`, "
            "summed over the host's processes): how long kagi took to handle the row's route, "
            "from the complete request in hand to its finished answer, and how long its requests "
            "waited for the lock prefix taken most, each as the bound of the log-scale bucket "
            "(powers of two, in µs) under which 99% fall. A tail that wrk sees and kagi's "
            "handling does not have was spent before kagi had the request: in nginx, in the "
            "sockets, or waiting for one of the two cores.",
            "",
            "| row | wrk p50 / p99 ms | kagi's handling p99 | lock waits p99 "
            "| waited for the lock |",
            "|---|---:|---:|---:|---:|",
        ]
        for r in insides:
            i = r["inside"]
            lines.append("| %s | %.2f / %.2f | ≤ %s (`%s`) | ≤ %s (`%s`) | %.0f%% |" % (
                r["name"], r["p50"], r["p99"], duration_text(i["handling_p99_us"]), i["route"],
                duration_text(i["wait_p99_us"]), i["prefix"], 100 * i["contended"]))
        durable = [r for r in insides if r["inside"]["storage"].get("rounds")]
        if durable:
            lines += [
                "",
                "### Group commit in the durable rows",
                "",
                "Over each data.fsync=always row's timed rounds, kagi's own counters "
                "(`stats.storage` of `/admin/locks.json`, summed over the host's processes): the "
                "group commit rounds, how many requests each made durable at once, how long a "
                "round's flush took on average (the journal's `fdatasync`, or the logs' own "
                "flushes), the flush calls per request, and the share of rounds that went "
                "through the journal.",
                "",
                "| row | rounds | requests per round | flush µs (mean) | flush calls per request "
                "| through the journal |",
                "|---|---:|---:|---:|---:|---:|",
            ]
            for r in durable:
                st = r["inside"]["storage"]
                rounds = float(st["rounds"])
                lines.append("| %s | %d | %.1f | %.0f | %.2f | %.0f%% |" % (
                    r["name"], st["rounds"], st["round_requests"] / rounds,
                    st["round_flush_us"] / rounds,
                    st["flushes"] / float(max(st["round_requests"], 1)),
                    100 * st["journal_rounds"] / rounds))
    lines += [
        "",
        "## All rows",
        "",
        "| scenario | req/s | × nginx return 200 | p50 ms | p99 ms | errors | acknowledged | stored | lost |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in bench.rows:
        acked = r.get("acked")
        lost = "" if acked is None else str(acked - r["stored"])
        lines.append("| %s | %.0f | %.2f | %s | %s | %d | %s | %s | %s |" % (
            r["name"], r["rps"], r["rps"] / base["rps"],
            "%.2f" % r["p50"] if r["timed"] else "—", "%.2f" % r["p99"] if r["timed"] else "—",
            r["errors"],
            "" if acked is None else str(acked),
            "" if acked is None else str(r["stored"]), lost))
    lines += ["", "Write rows count the warm-up and the rounds: `acknowledged` = answers 303 (BBS) "
              "or 200 (chat) seen by wrk, `stored` = writes found afterwards through the JSON "
              "APIs, `lost` = acknowledged − stored (0 or negative means none lost; negative counts writes "
              "stored whose answer wrk stopped waiting for when a run ended: at most one per "
              "connection per run).", ""]
    if results.get("rss"):
        lines.append("Peak RSS per kagi worker process after the BBS and chat load "
                     "(data.fsync=never): %s." % ", ".join(
                         "%.1f MiB" % (k / 1024.0) for k in results["rss"]))
        lines.append("")
    if results.get("http", {}).get("rss"):
        lines.append("Peak RSS of the embedded HTTP front end's one process after its rows: %s." %
                     ", ".join("%.1f MiB" % (k / 1024.0) for k in results["http"]["rss"]))
        lines.append("")
    lines += ["The peers are in `tests/bench/peers/`: `hello_fcgi.c` (libfcgi, a thread per "
              "kept connection), `http_floor.c` (the HTTP floor: epoll, a thread per core, fixed "
              "bytes for each request head), `node_hello.js` (Node's `http`, a process per core "
              "through `cluster`), and PHP (`php/`): a BBS that takes an exclusive `flock` before "
              "reading its board file and writes it back with temp + rename, and a chat that "
              "appends to its log under `flock`. nginx reads every FastCGI program, kagi and the "
              "peers alike, through the shipped recipe's buffers (`%s`). Neither PHP program "
              "calls fsync, so kagi's comparable rows "
              "run with `data.fsync=never`; the `always` rows show kagi's default. Before them the "
              "run syncs the filesystem (the `never` rows leave tens of MB dirty, which a "
              "`syncfs` would otherwise have to write, and the default declines a `syncfs` above "
              "`data.syncfs_max_dirty_kb`)." % RECIPE_BUFFERS, ""]
    if results.get("pg"):
        lines += ["The rows marked `2 hosts, PostgreSQL` are one site on two kagi hosts, each "
                  "like the one above (2 processes x 4 threads, a `data.dir` and `locks.dir` of "
                  "its own), sharing one `security.secret_file`, behind one nginx upstream "
                  "spanning both hosts' sockets; locks and data (`locks.backend` = "
                  "`data.backend` = `postgres`) on one private PostgreSQL %s on this same "
                  "machine (`tests/support/pgcluster` with `KAGI_PG_DURABLE=1`: the server's "
                  "durability defaults), a database per setting. `data.fsync=never` commits "
                  "each write with "
                  "`synchronous_commit=off` (the peers' durability: a crash of the server may "
                  "lose its last moments of acknowledged writes), `always` (kagi's default) "
                  "with `synchronous_commit=on` (each commit waits for the WAL flush). The read "
                  "rows ran once, with `off`: a read commits nothing. Writes are read back "
                  "through the same nginx port, whichever host answers: `lost` counts writes "
                  "lost by either host." % bench.pg_server, ""]
    if bench.pg_floor:
        php = results["php"]
        lines += ["*The PostgreSQL floor*: raw libpq (pgbench, %d clients, the simple protocol "
                  "kagi speaks) sending, on the same server and database as the `synchronous_"
                  "commit=off` rows, exactly the statements a post sends — the board's advisory "
                  "lock drawing its epoch, the read of what is new (nothing), `kagi_append` "
                  "stamping the epoch, the unlock — with no HTTP and no kagi: %.0f posts/s on "
                  "one board (one lock), %.0f on eight. kagi's rows are %.2f× and %.2f× that "
                  "floor. The goal of 3× PHP-FPM's posts needs %.0f and %.0f posts/s: %s the "
                  "floor. What a post costs there is the server's work per statement (four "
                  "round trips, one a write), which the floor pays too ([STORAGE.md](STORAGE.md"
                  "#data-on-postgresql))." % (
                      CONNECTIONS, bench.pg_floor["post1"], bench.pg_floor["post8"],
                      results["pg"]["never"]["post1"]["rps"] / bench.pg_floor["post1"],
                      results["pg"]["never"]["post8"]["rps"] / bench.pg_floor["post8"],
                      3.0 * php["post1"]["rps"], 3.0 * php["post8"]["rps"],
                      "above" if (3.0 * php["post1"]["rps"] > bench.pg_floor["post1"] and
                                  3.0 * php["post8"]["rps"] > bench.pg_floor["post8"])
                      else "within"), ""]
    lines += ["The lock-layer and storage micro-benchmarks (Google Benchmark) follow: "
              "`scripts/bench --micro` regenerates that section alone.", ""]
    # Keep the micro-benchmark and kagi-lockd sections (tests/bench/micro/micro_report.py and
    # tests/bench/lockd/lockd_bench.py write them) and the profiles (written by hand from
    # `bench.py --perf` runs).
    old = open(path).read() if os.path.exists(path) else ""
    for begin, end in (("<!-- micro:begin -->", "<!-- micro:end -->"),
                       ("<!-- lockd:begin -->", "<!-- lockd:end -->"),
                       ("<!-- waiters:begin -->", "<!-- waiters:end -->"),
                       ("<!-- profile:begin -->", "<!-- profile:end -->")):
        if begin in old and end in old:
            lines.append(old[old.index(begin):old.index(end) + len(end)])
            lines.append("")
    open(path, "w").write("\n".join(lines))


def run_smoke(bench, env):
    """--smoke: kagi alone behind nginx, one short round per write scenario, on files and on
    two hosts sharing PostgreSQL (synchronous_commit=off, the server's durability off as in
    the tests); what the test suite runs to check that no acknowledged write is lost (no
    peers, no report). The file rows with a goal against a baseline are paired with nginx
    `return 200`, so that the pairing the full run relies on runs here too (paired_rounds_ok)."""
    ports = {k: harness.free_port() for k in ("kagi", "base")}
    pg_ports = {"never": harness.free_port()}
    sock, _ = run_kagi(env, "never")
    start_nginx(env, ports["kagi"], ports["base"], sock,
                kagi_server("kagi_pg_never", pg_sockets(env, "never"), pg_ports["never"]))
    harness.wait_for_port(pg_ports["never"], None, "nginx")
    token = csrf_token(ports["kagi"])
    app_scenarios(bench, "kagi", ports["kagi"], token, " (data.fsync=never)", reads=False,
                  inside=lambda: kagi_stats(ports["kagi"]),
                  paired=Baseline("nginx return 200", "http://127.0.0.1:%d/" % ports["base"]))
    pg_scenarios(bench, env, pg_ports, ("never",), durable=False, reads=False)


def paired_rounds_ok(bench):
    """Whether some rows were paired and each has a baseline round per round, a ratio, and a
    baseline that answered without errors (a baseline refusing its requests, a wrong CSRF token
    say, answers fast and would make any row look slow)."""
    paired = [r["paired"] for r in bench.rows if "paired" in r]
    return bool(paired) and all(len(p["baseline"]) == bench.args.rounds and p["ratio"] > 0 and
                                p["errors"] == 0 for p in paired)


def survivors(groups):
    """Pids still alive in the process groups of `groups` (Popen objects that led a group)."""
    pgids = set(p.pid for p in groups)
    alive = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = open("/proc/%s/stat" % entry).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) in pgids:
            alive.append(int(entry))
    return alive


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--demo", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--php-children", type=int, default=os.cpu_count() or 1,
                    help="PHP-FPM static pool size (default: the cores, as the benchmark "
                         "issue sets it up; twice that measured within 3%%)")
    ap.add_argument("--out", default=None, help="report path (default docs/BENCHMARKS.md)")
    ap.add_argument("--perf", default=None,
                    help="profile (perf record -a -g) the rounds of scenarios whose name contains "
                         "one of these |-separated texts")
    ap.add_argument("--perf-dir", default="perf-profiles", help="where --perf writes")
    ap.add_argument("--smoke", action="store_true",
                    help="kagi's write scenarios only, one short round, no report: the test "
                         "suite's lost-write check")
    args = ap.parse_args()
    if args.smoke:
        args.warmup, args.seconds, args.rounds = 1, 1, 1
    env = harness.Env(args, "bench")
    bench = Bench(args, env)
    ok = True
    try:
        if args.smoke:
            run_smoke(bench, env)
        else:
            results = run_all(bench, env)
        writes = [r for r in bench.rows if r.get("acked") is not None]
        for r in writes:
            if r["acked"] > r["stored"]:
                print("LOST WRITES in %s: acknowledged %d, stored %d" % (r["name"], r["acked"], r["stored"]))
                ok = False
        if not writes or any(r["acked"] == 0 for r in writes):
            print("a write scenario acknowledged nothing: the check above proved nothing")
            ok = False
        if not paired_rounds_ok(bench):
            print("a paired row lacks its baseline rounds or its ratio, or its baseline answered "
                  "with errors: its goal proves nothing")
            ok = False
        if args.smoke:
            print("smoke: %d write scenarios, %d acknowledged writes, %s" % (
                len(writes), sum(r["acked"] for r in writes), "none lost" if ok else "FAILED"))
        else:
            print("\ngoals:")
            for goal, got, want, _ in goals(results):
                print("  %-40s %6.2fx  (want >= %.2gx) %s" % (
                    goal, got, want, "met" if got >= want else "NOT MET"))
            for title, ratios in (("the same bytes", same_bytes_ratios(results)),
                                  ("the same work", same_work_ratios(results))):
                print("\nagainst %s:" % title)
                for ratio in ratios:
                    print("  %-40s %6.2fx  (that floor: %.2fx its hello floor)" % ratio)
            write_report(args.out or os.path.join(args.source, "docs", "BENCHMARKS.md"), bench,
                         results, "scripts/bench")
    except Exception:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        env.dump_logs()
        ok = False
    finally:
        groups = list(env.groups)
        env.close()
        left = survivors(groups)
        if left:
            print("processes left running after the benchmark: %s" % left)
            ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
