"""No lost updates, through real nginx and 2 FastCGI processes x 4 threads:
16 clients x 100 posts to ONE board at once: every post answered 303 is stored, ids are
unique and increasing, none lost; then the same spread over 8 boards."""

import bbs_common
import harness

CLIENTS, POSTS = 16, 100


def hammer(port, boards):
    """Each client posts POSTS times, round-robin over `boards`; returns acknowledged bodies."""
    def client(c):
        poster = bbs_common.Poster(port)
        acked = {b: [] for b in boards}
        for i in range(POSTS):
            board = boards[(c + i) % len(boards)]
            body = "client %d post %d" % (c, i)
            r = poster.post(board, {"name": "c%d" % c, "subject": "s%d" % i, "body": body})
            if r.status == 303:
                acked[board].append(body)
            else:
                raise AssertionError("post answered %d: %s" % (r.status, r.text()[:200]))
        poster.close()
        return acked
    return harness.parallel([lambda c=c: client(c) for c in range(CLIENTS)], timeout=240)


def check_boards(fail, port, boards, results, label):
    errors = [r for r in results if isinstance(r, Exception)]
    fail.check(not errors, "%s: every client finished (%s)" % (label, errors[:1]))
    total_acked = 0
    for board in boards:
        acked = [body for r in results if isinstance(r, dict) for body in r[board]]
        total_acked += len(acked)
        stored, page = bbs_common.all_posts(port, board)
        ids = [p["id"] for p in stored]
        bodies = [p["body"] for p in stored]
        fail.equal(len(ids), len(set(ids)), "%s %s: ids unique" % (label, board))
        fail.check(ids == sorted(ids), "%s %s: ids ascending" % (label, board))
        fail.check(ids == list(range(1, len(ids) + 1)),
                   "%s %s: ids are 1..N without gaps" % (label, board))
        lost = set(acked) - set(bodies)
        fail.equal(len(lost), 0, "%s %s: acknowledged posts lost" % (label, board))
        fail.equal(len(stored), len(acked), "%s %s: stored == acknowledged" % (label, board))
        fail.equal(page["total"], len(acked), "%s %s: posts.json total" % (label, board))
        fail.equal(page["last_id"], len(acked), "%s %s: posts.json last_id" % (label, board))
    fail.equal(total_acked, CLIENTS * POSTS, "%s: every post acknowledged" % label)


def test(env, fail):
    boards = ["one"] + ["b%d" % i for i in range(8)]
    port, _ = bbs_common.start_stack(env, extra=["bbs.boards=" + ",".join(boards)])
    results = hammer(port, ["one"])
    check_boards(fail, port, ["one"], results, "1 board")
    results = hammer(port, boards[1:])
    check_boards(fail, port, boards[1:], results, "8 boards")
    r = harness.request(port, "GET", "/bbs/")
    fail.check(r.status == 200 and ">%d<" % (CLIENTS * POSTS) in r.text(),
               "the board list shows the post count of 'one'")


if __name__ == "__main__":
    harness.main(test, "bbs-concurrency")
