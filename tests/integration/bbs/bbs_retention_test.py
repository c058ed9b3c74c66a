"""Retention through real nginx: only the newest bbs.keep posts are kept (the log is
compacted atomically once it holds four times bbs.keep records), total and last_id say so,
and ids are never reused."""

import json

import bbs_common
import harness


def test(env, fail):
    port, _ = bbs_common.start_stack(env, extra=["bbs.keep=5"])
    p = bbs_common.Poster(port)
    for i in range(22):  # the 21st compacts (4 x 5 records before it)
        fail.equal(p.post("general", {"body": "post %d" % i}).status, 303, "post %d" % i)
    stored, page = bbs_common.all_posts(port, "general")
    fail.equal([x["body"] for x in stored], ["post %d" % i for i in range(17, 22)],
               "the newest 5 posts are kept")
    fail.equal([x["id"] for x in stored], list(range(18, 23)), "with their ids")
    fail.equal(page["total"], 5, "total counts the kept posts")
    fail.equal(page["last_id"], 22, "last_id counts every post ever made")
    fail.equal(p.post("general", {"body": "one more"}).status, 303, "a post after compaction")
    stored, _ = bbs_common.all_posts(port, "general")
    fail.equal(stored[-1]["id"], 23, "ids are not reused after compaction")
    newest = json.loads(p.get("/bbs/general/posts.json?limit=2").body)["posts"]
    fail.equal([x["id"] for x in newest], [22, 23], "without since: the newest N, ascending")



if __name__ == "__main__":
    harness.main(test, "bbs-retention")
