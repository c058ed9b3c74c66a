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


def start_nginx(env, port, base_port, sock):
    """nginx with the shipped recipe, plus a baseline server answering `return 200`."""
    baseline = """
    server {
        listen 127.0.0.1:%d;
        location / { default_type text/plain; return 200 "hello\\n"; }
    }""" % base_port
    proc = env.nginx(port, sock, extra_http=baseline, quiet=True)
    harness.wait_for_port(base_port, proc, "nginx baseline")


def run_kagi(env, fsync, extra=()):
    sock = env.path("kagi-%s.sock" % fsync)
    pids = env.spawn_fcgi(sock, 2, 4, ["log.access=false", "data.fsync=" + fsync,
                                       "bbs.flood_interval_s=0",
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


def suite(bench, env, fsync):
    port, base = harness.free_port(), harness.free_port()
    sock, pids = run_kagi(env, fsync)
    start_nginx(env, port, base, sock)
    url = "http://127.0.0.1:%d" % port
    token = bench_token = harness.request(port, "GET", "/").cookies()["kagi_csrf"]
    post = os.path.join(HERE, "post.lua")
    tag = " (data.fsync=%s)" % fsync
    rows = {}
    if fsync == "never":
        rows["baseline"] = bench.scenario("nginx return 200 (upper bound)", "http://127.0.0.1:%d/" % base)
        rows["hello"] = bench.scenario("kagi hello", url + "/_test/hello")
        # A board page with 20 posts to render.
        p = harness.form_body
        for i in range(20):
            harness.request(port, "POST", "/bbs/general/post",
                            p({"_csrf": token, "name": "seed", "body": "seed post %d with some text" % i}),
                            {"Content-Type": "application/x-www-form-urlencoded",
                             "Cookie": "kagi_csrf=" + token})
        rows["page"] = bench.scenario("BBS page read (20 posts)", url + "/bbs/general/")
    rows["post1"] = bench.scenario(
        "BBS post, 1 board" + tag, url, post,
        {"KAGI_CSRF": token, "KAGI_PATHS": "/bbs/general/post"},
        stored=lambda: bbs_total(port, "general"))
    boards = ["b%d" % i for i in range(8)]
    rows["post8"] = bench.scenario(
        "BBS post, 8 boards" + tag, url, post,
        {"KAGI_CSRF": token, "KAGI_PATHS": ",".join("/bbs/%s/post" % b for b in boards)},
        stored=lambda: sum(bbs_total(port, b) for b in boards))
    rows["rss"] = peak_rss_kib(pids)
    rows["say"] = bench.scenario(
        "chat say" + tag, url, post,
        {"KAGI_CSRF": bench_token, "KAGI_PATHS": "/chat/lobby/say", "KAGI_FIELD": "text",
         "KAGI_OK": "200"},
        stored=lambda: chat_last(port))
    if fsync == "never":
        rows["poll"] = bench.scenario("chat poll (since=0, 200 messages)",
                                      url + "/chat/lobby/messages?since=0&wait=0")
    return rows


def write_report(path, bench, command):
    base = next(r for r in bench.rows if r["name"].startswith("nginx return"))
    lines = [
        "# Benchmarks",
        "",
        "Regenerated by `%s` on %s (%s, %d cores). wrk -t%d -c%d through nginx with the "
        "shipped `conf/nginx/kagi.conf`; kagi-demo (Release) under spawn-fcgi, 2 processes x 4 "
        "threads, access log off. Each row: a %ds warm-up, then the median of %d rounds of %ds. "
        "Ratios are to the nginx `return 200` baseline measured in the same run." % (
            command, datetime.date.today().isoformat(), platform.machine(), os.cpu_count(),
            THREADS, CONNECTIONS, bench.args.warmup, bench.args.rounds, bench.args.seconds),
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
    if bench.rss:
        lines.append("Peak RSS per worker process after the BBS post load: %s." % ", ".join(
            "%.1f MiB" % (k / 1024.0) for k in bench.rss))
        lines.append("")
    lines += ["Lock-layer and storage micro-benchmarks (Google Benchmark) are in "
              "[LOCKING.md](LOCKING.md) and [STORAGE.md](STORAGE.md).", ""]
    open(path, "w").write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--demo", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None, help="report path (default docs/BENCHMARKS.md)")
    args = ap.parse_args()
    env = harness.Env(args, "bench")
    bench = Bench(args, env)
    bench.rss = []
    ok = True
    try:
        never = suite(bench, env, "never")
        bench.rss = never["rss"]
        suite(bench, env, "always")
        for r in bench.rows:
            if r.get("acked") is not None and r["acked"] > r["stored"]:
                print("LOST WRITES in %s: acknowledged %d, stored %d" % (r["name"], r["acked"], r["stored"]))
                ok = False
        write_report(args.out or os.path.join(args.source, "docs", "BENCHMARKS.md"), bench,
                     "scripts/bench")
    except Exception:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        env.dump_logs()
        ok = False
    finally:
        env.close()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
