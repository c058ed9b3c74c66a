"""Flood control through real nginx: a second post from the same client within
bbs.flood_interval_s is refused with 429 + Retry-After, on any board (the flood record is
site-wide), and the refused posts are not stored."""

import bbs_common
import harness


def test(env, fail):
    port, _ = bbs_common.start_stack(env, extra=["bbs.boards=general,other",
                                                 "bbs.flood_interval_s=30", "bbs.keep=5"])
    p = bbs_common.Poster(port)
    fail.equal(p.post("general", {"body": "first"}).status, 303, "first post")
    r = p.post("general", {"body": "second, too soon"})
    fail.equal(r.status, 429, "a second post within the interval")
    wait = int(r.header("Retry-After") or "0")
    fail.check(0 < wait <= 30, "429 says when to retry (Retry-After %d)" % wait)
    fail.check("posting too fast" in r.text(), "the page explains it")
    fail.equal(p.post("other", {"body": "on another board"}).status, 429,
               "the flood record is site-wide, not per board")
    stored, _ = bbs_common.all_posts(port, "general")
    fail.equal([x["body"] for x in stored], ["first"], "the refused posts were not stored")


if __name__ == "__main__":
    harness.main(test, "bbs-flood")
