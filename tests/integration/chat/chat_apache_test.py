"""The chat behind a real Apache (mod_proxy_fcgi, the shipped conf/apache/kagi.conf) with
kagi-demo under spawn-fcgi: a long-poll that a kagi process reports parked is completed by a
message said through Apache (a wake-up: that process counts it delivered), and while it
waits other pages answer."""

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "frontends"))
import fcgi_client  # noqa: E402
import harness  # noqa: E402


def chat_stats(sock):
    """/chat/stats.json of whichever kagi process accepts a new FastCGI connection (both
    processes accept on the one socket, so repeated calls see both)."""
    conn = fcgi_client.Conn(sock, timeout=10)
    try:
        return json.loads(conn.request("GET", "/chat/stats.json").body)
    finally:
        conn.close()


def test(env, fail):
    sock = env.path("kagi.sock")
    env.spawn_fcgi(sock, 2, 4)
    harness.wait_for_unix(sock)
    port = harness.free_port()
    env.apache(port, sock)

    r = harness.request(port, "GET", "/chat/lobby/")
    fail.equal(r.status, 200, "the room page through Apache")
    token = r.cookies().get("kagi_csrf", "")
    last = json.loads(harness.request(port, "GET", "/chat/lobby/messages?since=0&wait=0").body)["last"]

    got = {}

    def poll():
        t0 = time.monotonic()
        reply = harness.request(port, "GET", "/chat/lobby/messages?since=%d&wait=20" % last,
                                timeout=30)
        got["elapsed"] = time.monotonic() - t0
        got["reply"] = reply

    poller = threading.Thread(target=poll)
    poller.start()
    # Wait for the state itself: a kagi process counts the poll parked. (Only our poll parks
    # here, so a process's counters do not move between two looks at them.)
    seen = {}

    def parked():
        stats = chat_stats(sock)
        seen[stats["pid"]] = stats
        return stats if stats["parked"] == 1 else None
    try:
        harness.wait_until("a kagi process to report the poll parked", parked, 15)
    except AssertionError as e:
        print("  " + str(e))
    where = next((s for s in seen.values() if s["parked"] == 1), {})
    fail.check(bool(where), "the poll is parked in kagi process %s (stats seen: %r)"
               % (where.get("pid"), list(seen.values())))
    t0 = time.monotonic()
    fail.equal(harness.request(port, "GET", "/bbs/").status, 200, "other pages answer meanwhile")
    took = time.monotonic() - t0
    fail.check(took < 5.0, "promptly (%.3fs; a sanity bound)" % took)
    r = harness.request(port, "POST", "/chat/lobby/say",
                        harness.form_body({"_csrf": token, "name": "ap", "text": "via apache"}),
                        {"Content-Type": "application/x-www-form-urlencoded",
                         "Cookie": "kagi_csrf=" + token, "Accept": "application/json"})
    fail.check(r.status in (200, 303), "say through Apache (got %d)" % r.status)
    poller.join(30)
    reply = got.get("reply")
    fail.check(reply is not None and reply.status == 200, "the parked poll was answered")
    if reply is not None:
        messages = json.loads(reply.body)["messages"]
        fail.check([m["text"] for m in messages] == ["via apache"],
                   "it carries the message said after it parked (%r)" % messages)
        fail.check(got["elapsed"] < 15.0, "before its 20 s deadline (%.2fs)" % got["elapsed"])
    if where:
        # The process it parked in delivered it (a wake-up, not an expiry or a closing).
        latest = {}

        def from_that_process():
            stats = chat_stats(sock)
            latest.update(stats)
            return stats["pid"] == where["pid"]
        try:
            harness.wait_until("process %d's stats" % where["pid"], from_that_process, 15)
            now = latest
            fail.equal((now["delivered"] - where["delivered"], now["expired"] - where["expired"],
                        now["parked"]), (1, 0, 0),
                       "process %d: (delivered, expired, still parked)" % where["pid"])
        except AssertionError as e:
            fail.check(False, str(e))


if __name__ == "__main__":
    harness.main(test, "chat-apache")
