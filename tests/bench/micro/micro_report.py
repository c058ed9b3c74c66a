"""The lock and store micro-benchmarks (Google Benchmark) as ratios to the bare system calls
measured in the same run, written into docs/BENCHMARKS.md between the markers
<!-- micro:begin --> and <!-- micro:end --> (the rest of the file is scripts/bench's HTTP run,
left as it is).

    python3 micro_report.py --build BUILD_DIR [--out docs/BENCHMARKS.md] [--repetitions N]

BUILD_DIR is a Release build with bench_lock, bench_lock_postgres, bench_store and bench_app
built (scripts/bench makes one); bench_lock_postgres starts a private PostgreSQL (tests/support).
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

BEGIN, END = "<!-- micro:begin -->", "<!-- micro:end -->"

# (row, benchmark, baseline, goal or None): each ratio is benchmark / baseline, same run.
LOCK_ROWS = [
    ("exclusive acquire + release (ctx.locks.exclusive)", "BM_ContextExclusive",
     "BM_BareFlockOpenFd", 1.2),
    ("the same, status registry off", "BM_ContextExclusiveNoRegistry", "BM_BareFlockOpenFd", None),
    ("a whole request context with one lock", "BM_RequestWithOneLock", "BM_BareFlockOpenFd", None),
    ("shared acquire of a name the request holds shared (no system call)",
     "BM_SharedAlreadyHeldShared", "BM_BareFlockOpenFd", None),
]
# The postgres lock backend against the same statements on raw libpq, one connection.
POSTGRES_ROWS = [
    ("lock + unlock (ctx.locks.exclusive, then release)", "BM_KagiLockUnlock",
     "BM_RawLibpqLockUnlock", 1.1),
    ("a whole request with one lock (a pooled connection taken and given back)",
     "BM_KagiRequestWithOneLock", "BM_RawLibpqLockUnlock", None),
    ("a set of 4 names in one round trip, against 4 single locks", "BM_KagiSetOf4",
     "BM_Kagi4Singles", None),
]
POSTGRES_THROUGHPUT = [
    ("8 threads, one name", "BM_KagiContended/1"),
    ("8 threads, 8 names", "BM_KagiContended/8"),
]
# The dir backend and the seeds' lock-file mechanisms, against a bare mkdir + rmdir on the same
# filesystem (each run twice: on the disk's filesystem and on tmpfs).
DIR_ROWS = [
    ("dir: exclusive lock + unlock (ctx.locks.exclusive)", "BM_DirContextExclusive",
     "BM_BareMkdirRmdir", 1.3),
    ("the floor of any lock directory with an owner record: mkdir, symlink, unlink, rmdir",
     "BM_BareMkdirRecordRmdir", "BM_BareMkdirRmdir", None),
    ("dir against that floor", "BM_DirContextExclusive", "BM_BareMkdirRecordRmdir", None),
    ("dir's steps: made whole and renamed into place, removed (5 calls)", "BM_StepStagePublish",
     "BM_BareMkdirRmdir", None),
    ("dir's steps: the fencing counter (open, write 1 byte, fstat, close)",
     "BM_StepCounterAppend", "BM_BareMkdirRmdir", None),
    ("local: exclusive lock + unlock (flock)", "BM_ContextExclusive", "BM_BareMkdirRmdir", None),
]
SEED_ROWS = [
    ("symlink + unlink (seed 002)", "BM_SeedSymlink", "BM_BareMkdirRmdir", None),
    ("rename away + back (seed 002)", "BM_SeedRename", "BM_BareMkdirRmdir", None),
    ("open(O_CREAT|O_EXCL) + close + unlink", "BM_SeedOpenExcl", "BM_BareMkdirRmdir", None),
    ("TOP-LOCK: append id, read first line, unlink (seed 000)", "BM_SeedTopLock",
     "BM_BareMkdirRmdir", None),
    ("flock on an open descriptor", "BM_BareFlockOpenFd", "BM_BareMkdirRmdir", None),
]
DIR_FILTER = "Dir|BareMkdir|Seed|Step|BM_ContextExclusive$|BM_BareFlockOpenFd"

STORE_ROWS = [
    ("commit 4 KiB, no fsync", "BM_Commit/4096/0", "BM_BareReplace/4096/0", 1.1),
    ("commit 4 KiB, fsync", "BM_Commit/4096/1", "BM_BareReplace/4096/1", 1.1),
    ("commit 256 KiB, no fsync", "BM_Commit/262144/0", "BM_BareReplace/262144/0", 1.1),
    ("commit 256 KiB, fsync", "BM_Commit/262144/1", "BM_BareReplace/262144/1", 1.1),
    ("append 100 B, no fsync", "BM_Append/0", "BM_BareAppend/0", None),
    ("append 100 B, fsync", "BM_Append/1", "BM_BareAppend/1", None),
    ("a post's log work: lock, read what is new, append 100 B, unlock (no fsync), against "
     "flock + write + unlock", "BM_PostLog", "BM_BareLockedAppend", None),
    ("statx of the path asking the file's times, then append 108 B, against the same statx "
     "without times (multigrain timestamps: the write dirties the inode)",
     "BM_BareStatAppend/1", "BM_BareStatAppend/0", None),
    ("group commit round over 8 logs: one syncfs, against an fsync per log",
     "BM_GroupRound8/3", "BM_GroupRound8/0", None),
    ("the same round with one syncfs, against one append + fsync", "BM_GroupRound8/3",
     "BM_BareAppend/1", None),
    ("the same round with one syncfs, against one device flush (8 records over a preallocated "
     "file's blocks + fdatasync: a write-ahead journal's floor)", "BM_GroupRound8/3",
     "BM_BareFlush", None),
    ("the same round through the journal (data.journal, the default), against one syncfs",
     "BM_GroupRound8Journal", "BM_GroupRound8/3", None),
    ("the same round through the journal, against one device flush", "BM_GroupRound8Journal",
     "BM_BareFlush", None),
]

# The demo site's routes in this process (tests/bench/app: TestClient, no front end, no socket),
# each against its hello route; the last row sets the post's lock and log work (bench_store's
# BM_PostLog) against the whole post.
APP_ROWS = [
    ("GET /_test/hello: parse, route, answer", "BM_Hello", "BM_Hello"),
    ("BBS page read (20 posts, the rendered page cached)", "BM_Page", "BM_Hello"),
    ("BBS post (data.fsync=never)", "BM_Post", "BM_Hello"),
    ("chat say (data.fsync=never)", "BM_Say", "BM_Hello"),
    ("the post's lock and log work alone (the storage row above), against the whole post",
     "BM_PostLog", "BM_Post"),
]


def app_table(times):
    lines = ["| route | in process | ratio | against |", "|---|---:|---:|---|"]
    names = {"BM_Hello": "the hello route", "BM_Post": "the post"}
    for label, name, base in APP_ROWS:
        if name not in times or base not in times:
            raise SystemExit("benchmark %s or %s missing from the run" % (name, base))
        ratio = "—" if name == base else "%.2f×" % (times[name] / times[base])
        lines.append("| %s | %s | %s | %s |" % (label, fmt(times[name]), ratio,
                                                "" if name == base else names[base]))
    return lines


def run(binary, repetitions, bench_filter=None, env_dir=None):
    # The binaries print through kagi's checked reporter (it fails the run on a benchmark
    # error); the JSON goes to a file beside it.
    env = dict(os.environ)
    if env_dir:
        env["KAGI_BENCH_DIR"] = env_dir
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(
            [binary, "--benchmark_out=" + out.name, "--benchmark_out_format=json",
             "--benchmark_repetitions=%d" % repetitions,
             "--benchmark_enable_random_interleaving=true",
             "--benchmark_report_aggregates_only=true", "--benchmark_min_time=0.2"] +
            (["--benchmark_filter=" + bench_filter] if bench_filter else []),
            stdout=subprocess.DEVNULL, check=True, timeout=1800, env=env)
        results = json.load(open(out.name))
    # The fastest repetition where the benchmark reports one ("min": the lock rows, a few
    # hundred nanoseconds each, where a timer interrupt in a repetition is most of the
    # spread), else the median.
    times = {}
    for b in results["benchmarks"]:
        kind = b.get("aggregate_name")
        if kind not in ("min", "median"):
            continue
        name = b["run_name"].split("/real_time")[0]
        ns = b["real_time"] * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]
        if kind == "min" or name not in times:
            times[name] = ns
        if kind == "median" and "items_per_second" in b:
            times[name + ":rate"] = b["items_per_second"]
    return times


def table(medians, rows):
    lines = ["| path | kagi | bare | ratio | goal |", "|---|---:|---:|---:|---|"]
    worst = []
    for label, name, base, goal in rows:
        if name not in medians or base not in medians:
            raise SystemExit("benchmark %s or %s missing from the run" % (name, base))
        # Judged as shown: to two decimals.
        ratio = round(medians[name] / medians[base], 2)
        verdict = ""
        if goal is not None:
            verdict = "≤ %.1f×: %s" % (goal, "met" if ratio <= goal else "**not met**")
            worst.append(ratio <= goal)
        lines.append("| %s | %s | %s | %.2f× | %s |" % (label, fmt(medians[name]),
                                                        fmt(medians[base]), ratio, verdict))
    return lines


def fmt(ns):
    if ns >= 1e6:
        return "%.2f ms" % (ns / 1e6)
    if ns >= 1e3:
        return "%.1f µs" % (ns / 1e3)
    return "%.0f ns" % ns


def section(build, repetitions):
    lock = run(os.path.join(build, "tests", "bench", "lock", "bench_lock"), repetitions)
    store = run(os.path.join(build, "tests", "bench", "store", "bench_store"), repetitions)
    pg = run(os.path.join(build, "tests", "bench", "lock", "bench_lock_postgres"), repetitions)
    app = run(os.path.join(build, "tests", "bench", "app", "bench_app"), repetitions)
    lock_bin = os.path.join(build, "tests", "bench", "lock", "bench_lock")
    dir_disk = run(lock_bin, repetitions, DIR_FILTER, "/tmp")
    dir_tmpfs = run(lock_bin, repetitions, DIR_FILTER, "/dev/shm")
    disk_fs = subprocess.run(["stat", "-f", "-c", "%T", "/tmp"], stdout=subprocess.PIPE,
                             text=True).stdout.strip() or "disk"
    load = os.getloadavg()[0]
    lines = [
        BEGIN,
        "## Lock and store micro-benchmarks",
        "",
        "Regenerated by `scripts/bench --micro` (or a full `scripts/bench`) on %s (%s, %d cores, "
        "load average %.1f at the start). Google Benchmark, Release build, %d repetitions in "
        "random interleaving; each lock time is the fastest repetition, each storage time the "
        "median, and each ratio is between two rows of the same run: the absolute times move "
        "with the machine's load, the ratios much less."
        % (datetime.date.today().isoformat(), platform.machine(), os.cpu_count() or 1, load,
           repetitions),
        "",
        "**Locks** (`tests/bench/lock`), against a bare `flock(LOCK_EX)` + `flock(LOCK_UN)` pair "
        "on an open descriptor:",
        "",
    ]
    lines += table(lock, LOCK_ROWS)
    lines += ["",
              "**The postgres lock backend** (`tests/bench/lock/postgres_bench.cpp`), against "
              "the same two statements (`SELECT pg_advisory_lock(k)`, `SELECT "
              "pg_advisory_unlock(k)`) issued with raw libpq on one connection, to a private "
              "PostgreSQL 15 on a unix socket of the same machine:",
              ""]
    lines += table(pg, POSTGRES_ROWS)
    lines += ["", "| contended requests (each: context, lock, unlock) | requests/s |", "|---|---:|"]
    for label, name in POSTGRES_THROUGHPUT:
        if name + ":rate" not in pg:
            raise SystemExit("benchmark %s missing from the run" % name)
        lines.append("| %s | %.0f |" % (label, pg[name + ":rate"]))
    lines += ["",
              "An uncontended lock is two round trips either way (kagi's try, then its unlock), "
              "so the round trip is the cost and kagi adds nothing measurable to it. A set takes "
              "its names in one statement but gives them back one by one (each guard is "
              "released on its own), so 4 names cost 5 round trips instead of 8. On one name, "
              "eight threads queue in the server and each grant waits for the previous "
              "holder's unlock to reach it: about one grant per two round trips.",
              "",
              "**Storage** (`tests/bench/store`), against the same protocol written by hand "
              "(temp file, write, [fsync], close, rename, [fsync dir]; for append, a bare "
              "`write(O_APPEND)` of the same framed bytes on a descriptor kept open):",
              ""]
    lines += table(store, STORE_ROWS)
    lines += ["",
              "Append without fsync checks the log on every call (the tail may have been "
              "written by another process, the log may have been replaced) where the bare loop "
              "writes blindly: an `fstat` of the descriptor its thread keeps, then a `pwrite` at "
              "the end it verified; its ratio is the price of that, by design "
              "([STORAGE.md](STORAGE.md)). With fsync on, the flush dominates both. A post "
              "reads the log under its lock and then appends, each under a new grant: the read "
              "finds the thread's kept descriptor after one `statx` of the path, so a post's log "
              "work is the lock, that `statx`, a `pread` of what is new, an `fstat` and the "
              "`pwrite`, with no open and no close (the post row, against the floor's locked "
              "append of the HTTP benchmarks)."]
    lines += ["",
              "**The apps in this process** (`tests/bench/app`): the demo site's routes run "
              "through the whole pipeline by a `TestClient`, with no front end and no socket, "
              "one thread, so what a route costs beyond the hello route is the app's own work "
              "(form, CSRF check, locks, the log's read and append, the answer), apart from "
              "nginx, FastCGI records and the kernel's sockets:",
              ""]
    lines += app_table(dict(app, **store))
    lines += ["",
              "**The dir backend and the seeds' lock files** (`tests/bench/lock`, dir rows), "
              "against a bare `mkdir` + `rmdir` on the same filesystem, in one run per "
              "filesystem: %s on disk, and tmpfs (`/dev/shm`), where the calls themselves "
              "are all there is. What each mechanism guarantees and where it breaks: "
              "[LOCKING.md](LOCKING.md#the-seeds-lock-files-compared)." % disk_fs, ""]
    for label, times in (("on disk (%s)" % disk_fs, dir_disk), ("on tmpfs", dir_tmpfs)):
        lines += ["*%s*" % label, ""]
        lines += table(times, DIR_ROWS)
        lines += [""]
        lines += table(times, SEED_ROWS)
        lines += [""]
    lines += ["A lock directory with an owner record costs at least four metadata calls where "
              "a bare lock costs two (the floor row); kagi's dir lock makes its directory "
              "whole under a private name and renames it into place (one call more, so that "
              "nobody ever sees a lock without its record) and appends a byte to the name's "
              "fencing counter. The 1.3× goal against a bare `mkdir` + `rmdir` is below that "
              "floor; the steps rows are the profile of where the time goes."]
    lines += [END]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--repetitions", type=int, default=10)
    args = ap.parse_args()
    text = section(args.build, args.repetitions)
    doc = open(args.out, encoding="utf-8").read() if os.path.exists(args.out) else ""
    if BEGIN in doc and END in doc:
        doc = doc[:doc.index(BEGIN)] + text + doc[doc.index(END) + len(END):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    open(args.out, "w", encoding="utf-8").write(doc)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
