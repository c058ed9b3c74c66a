"""kagi-fsck end to end: a board with one flipped bit 10% into its log, behind real nginx.

A fresh worker must serve every intact post after the damage and number the next post above
every id stored (before the fix it stopped at the damage, reused ids and its first append cut
the log there). kagi-fsck reports the damage (exit 1), repairs it while the site runs (exit
3: backup beside the log, byte for byte; the log rewritten with the intact records under the
board's lock), finds nothing afterwards (exit 0), and the running worker serves the repaired
board with every intact post. Run with another lock backend than the site's, it refuses
(exit 2) and repairs nothing. Every file below data.dir is 0600, every folder 0700 (the
chat's rooms folder, which its watcher makes, included)."""

import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbs"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "frontends"))
import bbs_common  # noqa: E402
import harness  # noqa: E402

POSTS = 300
LOG = os.path.join("bbs", "boards", "general.log")
SETTINGS = ["bbs.keep=100000", "data.fsync=never"]


def start(env, name):
    """One kagi-demo worker under spawn-fcgi behind nginx; returns (port, pid)."""
    sock = env.path(name + ".sock")
    pids = env.spawn_fcgi(sock, 1, 4, SETTINGS)
    harness.wait_for_unix(sock)
    port = harness.free_port()
    env.nginx(port, sock)
    return port, pids[0]


def fsck(env, *extra):
    argv = [os.environ["KAGI_FSCK"], "--data", env.path("var", "data"),
            "--set", "locks.dir=" + env.path("var", "locks")] + list(extra)
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    text = out.stdout.decode(errors="replace")
    print("  $ kagi-fsck " + " ".join(extra) + "  → exit %d\n    " % out.returncode
          + text.strip().replace("\n", "\n    "), flush=True)
    return out.returncode, text


def test(env, fail):
    port, first = start(env, "a")
    p = bbs_common.Poster(port)
    for i in range(1, POSTS + 1):
        r = p.post("general", {"body": "post %d" % i})
        if r.status != 303:
            fail.equal(r.status, 303, "post %d" % i)
            return
    p.close()
    stored, _ = bbs_common.all_posts(port, "general")
    fail.check([x["id"] for x in stored] == list(range(1, POSTS + 1)),
               "every post stored (%d)" % len(stored))

    # The first worker goes; a flipped bit 10% into the log.
    harness.kill(first, signal.SIGTERM)
    harness.wait_until("the first worker to exit", lambda: not harness.pid_alive(first))
    log = env.path("var", "data", LOG)
    with open(log, "rb") as f:
        data = bytearray(f.read())
    at = len(data) // 10
    data[at] ^= 0x08
    with open(log, "wb") as f:
        f.write(data)
    damaged = bytes(data)

    code, text = fsck(env)
    fail.equal(code, 1, "kagi-fsck exits 1 on damage")
    fail.check("DAMAGED " + LOG.replace(os.sep, "/") in text, "the report names the log")
    fail.check("damaged span at offset" in text, "and the damaged span's offset")
    fail.check("%d records kept" % (POSTS - 1) in text, "and the records kept")

    # A fresh worker: every intact post, and a new post numbered above all of them.
    port, _ = start(env, "b")
    stored, page = bbs_common.all_posts(port, "general")
    ids = [x["id"] for x in stored]
    fail.equal(len(ids), POSTS - 1, "a fresh worker serves every post but the damaged one")
    fail.equal(page["last_id"], POSTS, "last_id counts the posts after the damage")
    lost = sorted(set(range(1, POSTS + 1)) - set(ids))
    fail.equal(len(lost), 1, "one post lost")
    fail.check(all(x["body"] == "post %d" % x["id"] for x in stored), "bodies match their ids")
    p = bbs_common.Poster(port)
    fail.equal(p.post("general", {"body": "post %d" % (POSTS + 1)}).status, 303,
               "a post to the damaged board")
    p.close()
    with open(log, "rb") as f:
        fail.check(f.read().startswith(damaged), "the append cut nothing")

    # With the data on PostgreSQL there are no files to check: said, not a scan of data.dir.
    out = subprocess.run([os.environ["KAGI_FSCK"], "--set", "data.dir=" + env.path("var", "data"),
                          "--set", "data.backend=postgres"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    fail.equal(out.returncode, 2, "kagi-fsck with data.backend = postgres is refused")
    fail.check(b"checks its own integrity" in out.stdout, "and says why")

    # A repair takes the site's locks in the site's lock backend, not local ones of its own: run
    # with another backend than the site's (whose server is not even there), it repairs nothing.
    code, text = fsck(env, "--repair", "--set", "locks.backend=postgres", "--set",
                      "locks.postgres.dsn=host=127.0.0.1 port=1 dbname=site user=kagi")
    fail.equal(code, 2, "kagi-fsck --repair in another lock domain than the site's is refused")
    fail.check("data.adopt_lock_domain" in text, "and says why")
    with open(log, "rb") as f:
        fail.check(f.read().startswith(damaged), "nothing was repaired there")

    code, text = fsck(env, "--repair")
    fail.equal(code, 3, "kagi-fsck --repair exits 3 when it repaired everything")
    backups = [n for n in os.listdir(os.path.dirname(log)) if n.startswith("general.log.bak-")]
    fail.equal(len(backups), 1, "one backup beside the log")
    if backups:
        with open(os.path.join(os.path.dirname(log), backups[0]), "rb") as f:
            fail.check(f.read().startswith(damaged), "the backup holds the damaged bytes")
    code, _ = fsck(env)
    fail.equal(code, 0, "kagi-fsck finds no damage after the repair")

    # The running worker notices the replaced log and serves every intact post.
    stored, page = bbs_common.all_posts(port, "general")
    want = [i for i in range(1, POSTS + 2) if i not in lost]
    got = [x["id"] for x in stored]
    fail.check(got == want, "the repaired board serves every intact post (%d of %d, want %d)"
               % (len(got), POSTS + 1, len(want)))
    fail.equal(page["last_id"], POSTS + 1, "and its last_id")

    # Everything kagi-demo and kagi-fsck created below data.dir is the owner's alone.
    data_dir = env.path("var", "data")
    modes = {".": os.lstat(data_dir).st_mode & 0o777}
    for root, dirs, files in os.walk(data_dir):
        for name in dirs + files:
            path = os.path.join(root, name)
            modes[os.path.relpath(path, data_dir)] = os.lstat(path).st_mode & 0o777
    wrong = {p: oct(m) for p, m in modes.items()
             if m != (0o700 if os.path.isdir(os.path.join(data_dir, p)) else 0o600)}
    fail.check(os.path.join("chat", "rooms") in modes and LOG in modes,
               "the chat's and the board's files are there (%d paths)" % len(modes))
    fail.equal(wrong, {}, "files 0600 and folders 0700 below data.dir")


if __name__ == "__main__":
    harness.main(test, "store-fsck")
