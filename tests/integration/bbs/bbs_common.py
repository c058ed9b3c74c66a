"""What the BBS integration tests share: a stack (nginx + kagi-demo under spawn-fcgi), a
poster client with its own CSRF cookie, and reading a whole board back through posts.json."""

import http.client
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "frontends"))
import harness  # noqa: E402


def start_stack(env, processes=2, threads=4, extra=()):
    """nginx in front of `processes` kagi-demo workers; returns (port, worker pids)."""
    sock = env.path("kagi.sock")
    pids = env.spawn_fcgi(sock, processes, threads,
                          ["bbs.keep=100000", "bbs.flood_interval_s=0"] + list(extra))
    harness.wait_for_unix(sock)
    port = harness.free_port()
    env.nginx(port, sock)
    return port, pids


class Poster:
    """One browser-like client: keep-alive connection, its own kagi_csrf cookie."""

    def __init__(self, port):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        r = self.get("/bbs/")
        self.token = r.cookies().get("kagi_csrf", "")
        assert self.token, "GET /bbs/ set no kagi_csrf cookie"

    def get(self, path):
        return self._send("GET", path, None, {})

    def post(self, board, fields, token=None):
        fields = dict(fields)
        fields.setdefault("_csrf", self.token if token is None else token)
        hdrs = {"Content-Type": "application/x-www-form-urlencoded",
                "Cookie": "kagi_csrf=" + self.token}
        return self._send("POST", "/bbs/%s/post" % board, harness.form_body(fields), hdrs)

    def delete(self, board, post_id, password):
        hdrs = {"Content-Type": "application/x-www-form-urlencoded",
                "Cookie": "kagi_csrf=" + self.token}
        body = harness.form_body({"id": str(post_id), "password": password, "_csrf": self.token})
        return self._send("POST", "/bbs/%s/delete" % board, body, hdrs)

    def _send(self, method, path, body, hdrs):
        try:
            return harness.request(self.port, method, path, body, hdrs, conn=self.conn)
        except (OSError, http.client.HTTPException):
            # The server side went away (a killed worker): reconnect for the next request.
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            raise

    def close(self):
        self.conn.close()


def all_posts(port, board):
    """Every stored post of `board`, ascending, paging through posts.json?since=."""
    posts, since = [], 0
    while True:
        r = harness.request(port, "GET", "/bbs/%s/posts.json?since=%d&limit=1000" % (board, since))
        if r.status != 200:
            raise AssertionError("posts.json answered %d: %s" % (r.status, r.text()[:200]))
        page = json.loads(r.body)
        posts += page["posts"]
        if not page["posts"]:
            return posts, page
        since = page["posts"][-1]["id"]
