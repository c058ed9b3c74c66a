"""The chat behind a real Apache (mod_proxy_fcgi, the shipped conf/apache/kagi.conf) with
kagi-demo under spawn-fcgi: a parked long-poll is completed by a message said through
Apache, promptly, and while it waits other pages answer."""

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "frontends"))
import harness  # noqa: E402


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

    pollers = [threading.Thread(target=poll) for _ in range(1)]
    for t in pollers:
        t.start()
    time.sleep(0.5)  # let the poll park
    t0 = time.monotonic()
    fail.equal(harness.request(port, "GET", "/bbs/").status, 200, "other pages answer meanwhile")
    fail.check(time.monotonic() - t0 < 1.0, "promptly")
    r = harness.request(port, "POST", "/chat/lobby/say",
                        harness.form_body({"_csrf": token, "name": "ap", "text": "via apache"}),
                        {"Content-Type": "application/x-www-form-urlencoded",
                         "Cookie": "kagi_csrf=" + token, "Accept": "application/json"})
    fail.check(r.status in (200, 303), "say through Apache (got %d)" % r.status)
    for t in pollers:
        t.join(30)
    reply = got.get("reply")
    fail.check(reply is not None and reply.status == 200, "the parked poll was answered")
    if reply is not None:
        messages = json.loads(reply.body)["messages"]
        fail.check([m["text"] for m in messages] == ["via apache"],
                   "it carries the new message (%r)" % messages)
        fail.check(got["elapsed"] < 5.0, "long before its 20 s deadline (%.2fs)" % got["elapsed"])


if __name__ == "__main__":
    harness.main(test, "chat-apache")
