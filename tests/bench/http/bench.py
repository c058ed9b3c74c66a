"""scripts/bench: kagi's apps through a real nginx, measured with wrk against baselines
measured in the same run, written to docs/BENCHMARKS.md.

Each scenario: a warm-up, then ROUNDS rounds; the table shows medians. Write scenarios also
count acknowledged writes (wrk's Lua counts 303/200 answers) and stored writes (read back
through the JSON APIs): lost = acknowledged - stored, which must be 0.
"""

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration", "frontends"))
import harness  # noqa: E402

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

    def scenario(self, name, url, script=None, script_env=None, stored=None):
        """Runs one scenario; `stored` returns the number of stored writes (for lost)."""
        before = stored() if stored else 0
        warm = wrk(url, self.args.warmup, script, script_env)
        rounds = [wrk(url, self.args.seconds, script, script_env) for _ in range(self.args.rounds)]
        row = {"name": name,
               "rps": statistics.median(r["rps"] for r in rounds),
               "p50": statistics.median(r["p50"] for r in rounds),
               "p99": statistics.median(r["p99"] for r in rounds),
               "errors": sum(r["errors"] for r in rounds)}
        if stored:
            # Every write the warm-up and the rounds got acknowledged, against every write
            # stored meanwhile.
            row["acked"] = sum(r["acked"] or 0 for r in [warm] + rounds)
            row["stored"] = stored() - before
        self.rows.append(row)
        print("  %-34s %9.0f req/s  p50 %7.2f ms  p99 %7.2f ms%s" % (
            name, row["rps"], row["p50"], row["p99"],
            "" if not stored else "  acked %d, stored %d" % (row["acked"], row["stored"])),
            flush=True)
        return row


PEERS = os.path.join(HERE, "..", "peers")


def start_c_hello(env):
    """The libfcgi C hello world (tests/bench/peers/hello_fcgi.c), one thread per connection
    nginx may keep open, so kept connections never starve it."""
    binary = env.path("hello_fcgi")
    subprocess.run(["cc", "-O2", "-pthread", os.path.join(PEERS, "hello_fcgi.c"), "-lfcgi",
                    "-o", binary], check=True)
    sock = env.path("hello.sock")
    env.start(["spawn-fcgi", "-n", "-s", sock, "-M", "0666", "--", binary, str(CONNECTIONS)],
              "hello_fcgi.out")
    harness.wait_for_unix(sock)
    return sock


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
    return """
    upstream c_hello { server unix:%s; keepalive %d; }
    server {
        listen 127.0.0.1:%d;
        location / { include fastcgi_params; fastcgi_pass c_hello; fastcgi_keep_conn on; }
    }
    server {
        listen 127.0.0.1:%d;%s
    }""" % (c_sock, CONNECTIONS, c_port, php_port, locations)


def start_nginx(env, port, base_port, sock, extra=""):
    """nginx with the shipped recipe, plus a baseline server answering `return 200`."""
    baseline = """
    server {
        listen 127.0.0.1:%d;
        location / { default_type text/plain; return 200 "hello\\n"; }
    }""" % base_port
    proc = env.nginx(port, sock, extra_http=baseline + extra, quiet=True)
    harness.wait_for_port(base_port, proc, "nginx baseline")


def run_kagi(env, fsync, extra=()):
    sock = env.path("kagi-%s.sock" % fsync)
    pids = env.spawn_fcgi(sock, 2, 4, ["log.access=false", "data.fsync=" + fsync,
                                       "bbs.flood_interval_s=0", "chat.say_per_minute=0",
                                       "chat.keep=200",
                                       "bbs.boards=general," + ",".join("b%d" % i for i in range(8)),
                                       "data.dir=" + env.path("data-" + fsync),
                                       "locks.dir=" + env.path("locks-" + fsync)] + list(extra))
    harness.wait_for_unix(sock)
    return sock, pids


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


def app_scenarios(bench, who, port, token, tag="", reads=True):
    """The app scenarios against one implementation (kagi or the PHP peer) on `port`."""
    url = "http://127.0.0.1:%d" % port
    post = os.path.join(HERE, "post.lua")
    rows = {}
    if reads:
        seed_board(port, token)
        rows["page"] = bench.scenario("%s BBS page read (20 posts)" % who, url + "/bbs/general/")
    rows["post1"] = bench.scenario(
        "%s BBS post, 1 board%s" % (who, tag), url, post,
        {"KAGI_CSRF": token, "KAGI_PATHS": "/bbs/general/post"},
        stored=lambda: bbs_total(port, "general"))
    boards = ["b%d" % i for i in range(8)]
    rows["post8"] = bench.scenario(
        "%s BBS post, 8 boards%s" % (who, tag), url, post,
        {"KAGI_CSRF": token, "KAGI_PATHS": ",".join("/bbs/%s/post" % b for b in boards)},
        stored=lambda: sum(bbs_total(port, b) for b in boards))
    rows["say"] = bench.scenario(
        "%s chat say%s" % (who, tag), url, post,
        {"KAGI_CSRF": token, "KAGI_PATHS": "/chat/lobby/say", "KAGI_FIELD": "text",
         "KAGI_OK": "200"},
        stored=lambda: chat_last(port))
    if reads:
        rows["poll"] = bench.scenario("%s chat poll (since=0, 200 messages)" % who,
                                      url + "/chat/lobby/messages?since=0&wait=0")
    return rows


def run_all(bench, env):
    """Everything behind one nginx: the baselines, the peers, kagi with data.fsync=never (the
    peers' durability: no fsync) and kagi with its default, always."""
    ports = {k: harness.free_port() for k in ("kagi", "base", "c", "php", "always")}
    sock, pids = run_kagi(env, "never")
    always_sock, _ = run_kagi(env, "always")
    c_sock = start_c_hello(env)
    php_sock, php_data = start_php_fpm(env, bench.args.php_children)
    extra = peer_servers(ports["c"], c_sock, ports["php"], php_sock, php_data)
    extra += """
    upstream kagi_always { server unix:%s; keepalive 32; }
    server {
        listen 127.0.0.1:%d;
        location / { include fastcgi_params; fastcgi_param REMOTE_ADDR $remote_addr;
                     fastcgi_pass kagi_always; fastcgi_keep_conn on; }
    }""" % (always_sock, ports["always"])
    start_nginx(env, ports["kagi"], ports["base"], sock, extra)
    for k in ("c", "php", "always"):
        harness.wait_for_port(ports[k], None, k)

    r = {}
    r["baseline"] = bench.scenario("nginx return 200 (upper bound)",
                                   "http://127.0.0.1:%d/" % ports["base"])
    r["c_hello"] = bench.scenario("libfcgi C hello (threaded, kept connections)",
                                  "http://127.0.0.1:%d/" % ports["c"])
    r["php_hello"] = bench.scenario("PHP-FPM hello", "http://127.0.0.1:%d/hello" % ports["php"])
    r["hello"] = bench.scenario("kagi hello", "http://127.0.0.1:%d/_test/hello" % ports["kagi"])
    r["php"] = app_scenarios(bench, "PHP-FPM", ports["php"], TOKEN)
    kagi_token = harness.request(ports["kagi"], "GET", "/").cookies()["kagi_csrf"]
    r["kagi"] = app_scenarios(bench, "kagi", ports["kagi"], kagi_token, " (data.fsync=never)")
    r["rss"] = peak_rss_kib(pids)
    always_token = harness.request(ports["always"], "GET", "/").cookies()["kagi_csrf"]
    r["always"] = app_scenarios(bench, "kagi", ports["always"], always_token,
                                " (data.fsync=always, the default)", reads=False)
    return r


def goals(r):
    """(goal, measured ratio, wanted, req/s the goal needs or None) for every ratio goal of the
    benchmark issue. The needed req/s is given for goals against another implementation, to be
    set beside the FastCGI floor (the C hello) of the same run."""
    k, php, always = r["kagi"], r["php"], r["always"]
    out = [("kagi hello vs libfcgi C hello", r["hello"]["rps"] / r["c_hello"]["rps"], 1.0,
            r["c_hello"]["rps"]),
           ("kagi hello vs PHP-FPM hello", r["hello"]["rps"] / r["php_hello"]["rps"], 3.0,
            3.0 * r["php_hello"]["rps"])]
    for key, what in (("page", "BBS page read"), ("post1", "BBS post, 1 board"),
                      ("post8", "BBS post, 8 boards"), ("say", "chat say"),
                      ("poll", "chat poll")):
        out.append(("kagi %s vs PHP-FPM" % what, k[key]["rps"] / php[key]["rps"], 5.0,
                    5.0 * php[key]["rps"]))
    out.append(("kagi BBS posts: 8 boards vs 1 board (data.fsync=never)",
                k["post8"]["rps"] / k["post1"]["rps"], 1.5, None))
    out.append(("kagi BBS posts: 8 boards vs 1 board (data.fsync=always, the default)",
                always["post8"]["rps"] / always["post1"]["rps"], 1.5, None))
    return out


def floor_note(needed, floor):
    """Whether a goal asks for more than the FastCGI floor measured in the same run."""
    if needed is None:
        return ""
    if needed > floor:
        return "%.0f req/s: above the floor" % needed
    return "%.0f req/s" % needed


def write_report(path, bench, results, command):
    base = results["baseline"]
    lines = [
        "# Benchmarks",
        "",
        "Regenerated by `%s` on %s (%s, %d cores). wrk -t%d -c%d through one nginx (the "
        "shipped `conf/nginx/kagi.conf` for kagi); kagi-demo (Release) under spawn-fcgi, "
        "2 processes x 4 threads, access log off; PHP-FPM 8.2 (opcache on, static pool of %d); "
        "the libfcgi C hello with %d threads. Each row: a %ds warm-up, then the median of %d "
        "rounds of %ds. Every ratio is between numbers measured in this same run." % (
            command, datetime.date.today().isoformat(), platform.machine(), os.cpu_count(),
            THREADS, CONNECTIONS, bench.args.php_children, CONNECTIONS, bench.args.warmup,
            bench.args.rounds, bench.args.seconds),
        "",
        "## Goals",
        "",
        "| goal | measured | wanted | met | the goal needs |",
        "|---|---:|---:|---|---|",
    ]
    floor = results["c_hello"]["rps"]
    for goal, got, want, needed in goals(results):
        lines.append("| %s | %.2f× | ≥ %.1f× | %s | %s |" % (
            goal, got, want, "yes" if got >= want else "**no**", floor_note(needed, floor)))
    lines += [
        "",
        "*The floor* is the libfcgi C hello of this run (%.0f req/s): a FastCGI program that "
        "does nothing but answer, behind the same nginx. A goal that needs more than the floor "
        "asks a FastCGI app that reads and writes data under locks to answer faster than one "
        "that does nothing; no FastCGI app behind this nginx on this machine can meet it." % floor,
    ]
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
        lines.append("| %s | %.0f | %.2f | %.2f | %.2f | %d | %s | %s | %s |" % (
            r["name"], r["rps"], r["rps"] / base["rps"], r["p50"], r["p99"], r["errors"],
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
    lines += ["The peers are in `tests/bench/peers/`: `hello_fcgi.c` (libfcgi, a thread per "
              "kept connection), and PHP (`php/`): a BBS that takes an exclusive `flock` before "
              "reading its board file and writes it back with temp + rename, and a chat that "
              "appends to its log under `flock`. Neither calls fsync, so kagi's comparable rows "
              "run with `data.fsync=never`; the `always` rows show kagi's default.", "",
              "The lock-layer and storage micro-benchmarks (Google Benchmark) follow: "
              "`scripts/bench --micro` regenerates that section alone.", ""]
    # Keep the micro-benchmark section (tests/bench/micro/micro_report.py writes it).
    old = open(path).read() if os.path.exists(path) else ""
    begin, end = "<!-- micro:begin -->", "<!-- micro:end -->"
    if begin in old and end in old:
        lines.append(old[old.index(begin):old.index(end) + len(end)])
        lines.append("")
    open(path, "w").write("\n".join(lines))


def run_smoke(bench, env):
    """--smoke: kagi alone behind nginx, one short round per write scenario; what the test
    suite runs to check that no acknowledged write is lost (no peers, no report)."""
    ports = {k: harness.free_port() for k in ("kagi", "base")}
    sock, _ = run_kagi(env, "never")
    start_nginx(env, ports["kagi"], ports["base"], sock)
    token = harness.request(ports["kagi"], "GET", "/").cookies()["kagi_csrf"]
    app_scenarios(bench, "kagi", ports["kagi"], token, " (data.fsync=never)", reads=False)


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
        if args.smoke:
            print("smoke: %d write scenarios, %d acknowledged writes, %s" % (
                len(writes), sum(r["acked"] for r in writes), "none lost" if ok else "FAILED"))
        else:
            print("\ngoals:")
            for goal, got, want, _ in goals(results):
                print("  %-40s %6.2fx  (want >= %.1fx) %s" % (
                    goal, got, want, "met" if got >= want else "NOT MET"))
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
