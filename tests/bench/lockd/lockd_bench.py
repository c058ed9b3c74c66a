"""kagi-lockd against Redis (SET key val NX + DEL) and PostgreSQL advisory locks
(pg_try_advisory_lock + pg_advisory_unlock): lock + unlock pairs per second over kept
connections, and the latency of a pair, with one client program (bench_lockd_pairs) and one
pattern for all three, each server started here on loopback in a temp folder. Rounds are
interleaved (lockd, redis, pg, lockd, ...) and the median round of each is reported, so that
the machine's load moves all three alike.

    python3 lockd_bench.py --lockd BIN --pairs BIN --source SRC [--rounds 3] [--seconds 5]
                           [--connections 32] [--out docs/BENCHMARKS.md]
    python3 lockd_bench.py ... --smoke     one short round each, no report: fails on an error

The report goes into docs/BENCHMARKS.md between <!-- lockd:begin --> and <!-- lockd:end -->.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

BEGIN, END = "<!-- lockd:begin -->", "<!-- lockd:end -->"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, what, proc=None):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc is not None and proc.poll() is not None:
                break
            time.sleep(0.05)
    raise RuntimeError("%s did not start on port %d" % (what, port))


class Servers:
    def __init__(self, args):
        self.tmp = tempfile.mkdtemp(prefix="kagi-lockd-bench-")
        if os.geteuid() == 0:
            os.chmod(self.tmp, 0o755)
        self.procs = []
        self.lockd_port = free_port()
        self.procs.append(subprocess.Popen(
            [args.lockd, "--listen", "127.0.0.1:%d" % self.lockd_port],
            stderr=open(os.path.join(self.tmp, "lockd.log"), "w")))
        wait_port(self.lockd_port, "kagi-lockd", self.procs[-1])
        redis = shutil.which("redis-server")
        if not redis:
            raise RuntimeError("redis-server is missing (apt-get install redis-server)")
        self.redis_port = free_port()
        self.procs.append(subprocess.Popen(
            [redis, "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.tmp, "--daemonize", "no"],
            stdout=open(os.path.join(self.tmp, "redis.log"), "w"), stderr=subprocess.STDOUT))
        wait_port(self.redis_port, "redis-server", self.procs[-1])
        self.redis_version = subprocess.run([redis, "--version"], capture_output=True,
                                            text=True).stdout.split()[2].replace("v=", "")
        self.pg_dir = os.path.join(self.tmp, "pg")
        self.pg_port = free_port()
        self.pgcluster = os.path.join(args.source, "tests", "support", "pgcluster")
        subprocess.run([self.pgcluster, "start", self.pg_dir, str(self.pg_port)], check=True,
                       stdout=subprocess.DEVNULL)
        self.pg_dsn = "host=127.0.0.1 port=%d dbname=postgres user=kagi" % self.pg_port

    def target(self, proto):
        return {"lockd": "127.0.0.1:%d" % self.lockd_port,
                "redis": "127.0.0.1:%d" % self.redis_port, "pg": self.pg_dsn}[proto]

    def stop(self):
        subprocess.run([self.pgcluster, "stop", self.pg_dir], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        for p in self.procs:
            p.terminate()
            p.wait(10)
        shutil.rmtree(self.tmp, ignore_errors=True)


def build_type(binary):
    """CMAKE_BUILD_TYPE of the build tree the binary is in ("?" if not found)."""
    d = os.path.dirname(os.path.abspath(binary))
    while d != "/":
        cache = os.path.join(d, "CMakeCache.txt")
        if os.path.exists(cache):
            m = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", open(cache).read(), re.M)
            return m.group(1) if m and m.group(1) else "?"
        d = os.path.dirname(d)
    return "?"


def run_pairs(args, servers, proto, seconds, warmup):
    out = subprocess.run([args.pairs, "--proto", proto, "--target", servers.target(proto),
                          "--connections", str(args.connections), "--seconds", str(seconds),
                          "--warmup", str(warmup)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("bench_lockd_pairs --proto %s failed: %s %s" %
                           (proto, out.stdout, out.stderr))
    return json.loads(out.stdout)


NAMES = {"lockd": "kagi-lockd", "redis": "Redis (SET NX + DEL)",
         "pg": "PostgreSQL advisory locks"}


def report(args, servers, results):
    med = {}
    for proto, runs in results.items():
        runs = sorted(runs, key=lambda r: r["pairs_per_s"])
        med[proto] = runs[len(runs) // 2]
    l, r, p = med["lockd"], med["redis"], med["pg"]
    vs_redis = l["pairs_per_s"] / r["pairs_per_s"]
    vs_pg = l["pairs_per_s"] / p["pairs_per_s"]
    load = args.load_at_start
    lines = [BEGIN, "## kagi-lockd against Redis and PostgreSQL", "",
             "Regenerated by `scripts/bench --lockd` (or a full `scripts/bench`) on %s (%s, %d "
             "cores, load average %.1f at the start): `python3 tests/bench/lockd/lockd_bench.py "
             "--rounds %d --seconds %g --connections %d`. One client program "
             "(`tests/bench/lockd/pairs.cpp`, one thread, one epoll set) keeps %d connections "
             "to each server on 127.0.0.1, each with a key of its own, and sends the lock, then "
             "the unlock, each when the answer to the last command is in. Rounds of %g s (after "
             "1 s of warm-up) interleave the three servers; each row is the median of %d rounds, "
             "and each ratio is between two rows of this run." %
             (datetime.date.today().isoformat(), platform.machine(), os.cpu_count(), load,
              args.rounds, args.seconds, args.connections, args.connections, args.seconds,
              args.rounds), "",
             "| server | the pair | pairs/s | p50 µs | p99 µs | errors |",
             "|---|---|---:|---:|---:|---:|"]
    pattern = {"lockd": "`LOCK k 0` + `UNLOCK k`", "redis": "`SET k 1 NX` + `DEL k`",
               "pg": "`SELECT pg_try_advisory_lock(k)` + `SELECT pg_advisory_unlock(k)`"}
    for proto in ("lockd", "redis", "pg"):
        m = med[proto]
        lines.append("| %s | %s | %.0f | %.0f | %.0f | %d |" %
                     (NAMES[proto], pattern[proto], m["pairs_per_s"], m["p50_us"], m["p99_us"],
                      m["errors"]))
    lines += ["", "| goal | measured | wanted | met |", "|---|---:|---:|---|",
              "| kagi-lockd pairs/s vs Redis | %.2f× | ≥ 1.5× | %s |" %
              (vs_redis, "yes" if vs_redis >= 1.5 else "**no**"),
              "| kagi-lockd pairs/s vs PostgreSQL | %.2f× | ≥ 3× | %s |" %
              (vs_pg, "yes" if vs_pg >= 3 else "**no**"),
              "| kagi-lockd p99 below Redis's and PostgreSQL's | %.0f µs vs %.0f / %.0f µs | "
              "below both | %s |" %
              (l["p99_us"], r["p99_us"], p["p99_us"],
               "yes" if l["p99_us"] < r["p99_us"] and l["p99_us"] < p["p99_us"] else "**no**"),
              "", "Servers: kagi-lockd (%s build, defaults), redis-server %s (Debian; "
              "`--save \"\" --appendonly no`), PostgreSQL 15 (`tests/support/pgcluster`, "
              "durability off: advisory locks write nothing) over TCP. All rounds:" %
              (build_type(args.lockd), servers.redis_version), ""]
    for proto in ("lockd", "redis", "pg"):
        lines.append("- %s: %s pairs/s" % (NAMES[proto], ", ".join(
            "%.0f" % x["pairs_per_s"] for x in results[proto])))
    lines += ["", "How the machine bounds these numbers, and where the time goes, is in "
              "[LOCKD.md](LOCKD.md#performance).", END]
    text = "\n".join(lines)
    print(text)
    if args.out:
        doc = open(args.out).read() if os.path.exists(args.out) else "# Benchmarks\n"
        if BEGIN in doc and END in doc:
            doc = doc[:doc.index(BEGIN)] + text + doc[doc.index(END) + len(END):]
        else:
            doc = doc.rstrip("\n") + "\n\n" + text + "\n"
        open(args.out, "w").write(doc)
    return vs_redis, vs_pg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lockd", required=True)
    ap.add_argument("--pairs", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--out")
    ap.add_argument("--smoke", action="store_true")
    args = ap.parse_args()
    args.load_at_start = os.getloadavg()[0]
    servers = Servers(args)
    try:
        if args.smoke:
            failed = 0
            for proto in ("lockd", "redis", "pg"):
                r = run_pairs(args, servers, proto, 1, 0.2)
                print(json.dumps(r))
                failed += r["errors"] != 0 or r["pairs"] == 0
            print("%d passed, %d failed" % (3 - failed, failed))
            sys.exit(1 if failed else 0)
        results = {"lockd": [], "redis": [], "pg": []}
        for i in range(args.rounds):
            for proto in ("lockd", "redis", "pg"):
                results[proto].append(run_pairs(args, servers, proto, args.seconds, 1))
                print(json.dumps(results[proto][-1]), flush=True)
        report(args, servers, results)
    finally:
        servers.stop()


if __name__ == "__main__":
    main()
