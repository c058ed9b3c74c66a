"""Delete passwords through real nginx: the slow password hash never runs under a lock, and
never before the cheap refusals.

- A wrong-password delete answers 403 while another process holds the board's lock SHARED
  (a reader): it read the post under a shared lock and verified with no lock held. (Hashing
  under the exclusive lock, it would wait for the reader and answer 503.)
- A right-password delete still takes the exclusive lock to write (503 while the reader
  holds it, 303 once it is gone).
- A post refused by flood control costs no hash: its fastest answer is well under the fastest
  wrong-password delete (which hashes once).
- A NUL byte in a delete password is a 400, on post and on delete.
"""

import fcntl
import glob
import os
import time

import bbs_common
import harness


def timed(fn):
    started = time.monotonic()
    reply = fn()
    return reply, (time.monotonic() - started) * 1000.0


def test(env, fail):
    port, _ = bbs_common.start_stack(env, extra=[
        "bbs.flood_interval_s=60", "locks.timeout_ms=1500", "bbs.delete_tries_per_client=0",
        "bbs.delete_tries_per_post=0"])
    p = bbs_common.Poster(port)

    # NUL in the delete password: refused before anything else (it was a 500: crypt(3) cannot
    # hash it).
    r = p.post("general", {"body": "nul", "password": "a\0b"})
    fail.equal(r.status, 400, "a post with NUL in its delete password")
    fail.check("NUL" in r.text(), "the 400 page names the NUL")

    fail.equal(p.post("general", {"body": "keep me", "password": "right"}).status, 303,
               "first post (with a delete password)")
    posts, _ = bbs_common.all_posts(port, "general")
    fail.equal(len(posts), 1, "one post stored")
    post_id = posts[0]["id"]
    fail.equal(p.delete("general", post_id, "x\0y").status, 400, "a delete with NUL in it")

    # Flood-refused posts carry a password too: they must be answered before hashing it.
    refused_ms, wrong_ms = [], []
    for i in range(5):
        r, ms = timed(lambda: p.post("general", {"body": "too soon %d" % i, "password": "pw"}))
        fail.equal(r.status, 429, "a post within the flood interval")
        refused_ms.append(ms)
        r, ms = timed(lambda: p.delete("general", post_id, "wrong"))
        fail.equal(r.status, 403, "a wrong delete password")
        wrong_ms.append(ms)
    print("fastest flood-refused post %.1f ms, fastest wrong-password delete %.1f ms"
          % (min(refused_ms), min(wrong_ms)))
    fail.check(min(refused_ms) < min(wrong_ms) / 2,
               "a flood-refused post hashes nothing (%.1f ms vs %.1f ms for one hash)"
               % (min(refused_ms), min(wrong_ms)))

    # Another process reads the board: it holds the board's lock file shared, as a kagi
    # reader would.
    files = glob.glob(os.path.join(env.path("var", "locks"), "**", "bbs@board@general.lock"),
                      recursive=True)
    fail.equal(len(files), 1, "the board's lock file")
    if len(files) != 1:
        return
    fd = os.open(files[0], os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        r, ms = timed(lambda: p.delete("general", post_id, "wrong"))
        fail.equal(r.status, 403, "a wrong password is checked while a reader holds the board "
                                  "(no exclusive lock taken for it)")
        fail.check(ms < 1000, "answered at once, not after a lock wait (%.0f ms)" % ms)
        fail.equal(p.get("/bbs/general/").status, 200, "the board page reads meanwhile")
        r = p.delete("general", post_id, "right")
        fail.equal(r.status, 503, "the delete itself waits for the reader (bounded: 503)")
    finally:
        os.close(fd)  # releases the flock
    fail.equal(p.delete("general", post_id, "right").status, 303, "deleted once the reader left")
    posts, _ = bbs_common.all_posts(port, "general")
    fail.equal(posts, [], "the post is gone")
    fail.equal(p.delete("general", post_id, "right").status, 404, "a second delete: no such post")


if __name__ == "__main__":
    harness.main(test, "bbs-delete")
