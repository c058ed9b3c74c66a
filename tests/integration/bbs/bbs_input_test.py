"""The BBS against hostile and broken input, through real nginx: XSS payloads in every
field come back escaped (page and JSON), CSRF is enforced, validation answers 400 with the
form re-shown, unknown boards are 404, delete needs the right password, paging works."""

import json

import bbs_common
import harness

XSS = [
    "<script>alert(1)</script>",
    "\"><img src=x onerror=alert(1)>",
    "'><svg onload=alert(1)>",
    "javascript:alert(1)",
    "http://x.org/\"onmouseover=alert(1)",
]


def test(env, fail):
    port, _ = bbs_common.start_stack(env, extra=["bbs.boards=general,other", "bbs.page_size=5"])
    p = bbs_common.Poster(port)

    # XSS in every field.
    for i, payload in enumerate(XSS):
        r = p.post("general", {"name": payload, "subject": payload, "body": payload + " %d" % i})
        fail.equal(r.status, 303, "post with payload %d accepted" % i)
    page = p.get("/bbs/general/").text()
    for bad in ["<script>alert", "<img src=x", "<svg onload", "\"onmouseover", "href=\"javascript"]:
        fail.check(bad not in page, "page does not contain raw %r" % bad)
    fail.check("&lt;script&gt;alert(1)&lt;/script&gt;" in page, "payload shown escaped")
    js = p.get("/bbs/general/posts.json")
    fail.check("<" not in js.text() and json.loads(js.body)["posts"][0]["name"] == XSS[0],
               "JSON escapes < and round-trips the text")
    fail.check(js.header("Content-Type") == "application/json", "JSON content type")

    # CSRF.
    r = p.post("general", {"body": "no token"}, token="")
    fail.equal(r.status, 403, "missing _csrf")
    r = p.post("general", {"body": "forged"}, token="0" * 32)
    fail.equal(r.status, 403, "forged _csrf")
    r = harness.request(port, "POST", "/bbs/general/post", harness.form_body({"body": "x"}),
                        {"Content-Type": "application/x-www-form-urlencoded"})
    fail.equal(r.status, 403, "no cookie at all")

    # Validation.
    r = p.post("general", {"name": "A", "subject": "kept", "body": "   "})
    fail.equal(r.status, 400, "empty body")
    fail.check("Please write a message" in r.text() and 'value="kept"' in r.text(),
               "400 re-shows the form with the message and the input")
    r = p.post("general", {"body": "x" * 9000})
    fail.equal(r.status, 400, "body over bbs.max_body_chars")
    r = harness.request(port, "POST", "/bbs/general/post",
                        b"body=%FF%FE&_csrf=" + p.token.encode(),
                        {"Content-Type": "application/x-www-form-urlencoded",
                         "Cookie": "kagi_csrf=" + p.token})
    fail.equal(r.status, 400, "invalid UTF-8")
    r = harness.request(port, "POST", "/bbs/general/post", b"body=%zz&_csrf=" + p.token.encode(),
                        {"Content-Type": "application/x-www-form-urlencoded",
                         "Cookie": "kagi_csrf=" + p.token})
    fail.equal(r.status, 400, "broken %-escape")
    r = p.post("general", {"body": "ok", "zz": "y" * 2_000_000})
    fail.equal(r.status, 413, "body over limits.max_body_bytes")

    # Boards that do not exist touch nothing.
    for path in ["/bbs/nope/", "/bbs/GENERAL/", "/bbs/con/"]:
        fail.equal(p.get(path).status, 404, "GET " + path)
    for path in ["/bbs/..%2F..%2Fetc/", "/bbs/%00/", "/bbs/%2e%2e/", "/bbs/a%2Fb/"]:
        status = p.get(path).status
        fail.check(status in (400, 404), "GET %s is a clear 4xx (got %d)" % (path, status))
    fail.equal(p.post("nope", {"body": "x"}).status, 404, "POST to an unknown board")
    fail.equal(p.get("/bbs/general/posts.json?limit=1001").status, 400, "limit > 1000")
    fail.equal(p.get("/bbs/general/?page=x").status, 400, "page not a number")

    # Duplicate refusal and delete.
    fail.equal(p.post("other", {"body": "same", "password": "pw1"}).status, 303, "first post")
    fail.equal(p.post("other", {"body": "same"}).status, 409, "the same post again")
    posts, _ = bbs_common.all_posts(port, "other")
    pid = posts[-1]["id"]
    fail.check("pw1" not in json.dumps(posts) and "password" not in json.dumps(posts),
               "no password or hash in the JSON")
    fail.equal(p.delete("other", pid, "wrong").status, 403, "delete with a wrong password")
    fail.equal(p.delete("other", pid, "pw1").status, 303, "delete with the right password")
    fail.equal(len(bbs_common.all_posts(port, "other")[0]), 0, "the post is gone")
    fail.equal(p.post("other", {"body": "next"}).status, 303, "post after delete")
    fail.equal(bbs_common.all_posts(port, "other")[0][0]["id"], pid + 1, "ids are not reused")

    # Paging: newest first, 5 per page.
    for i in range(12):
        p.post("other", {"body": "page post %d" % i})
    first = p.get("/bbs/other/").text()
    third = p.get("/bbs/other/?page=3").text()
    fail.check("page post 11" in first and "page post 7" in first and "page post 6" not in first,
               "page 1 holds the 5 newest")
    fail.check("page post 1" in third and "page post 0" in third and "older \u2192" not in third,
               "page 3 holds the oldest, no older link")


if __name__ == "__main__":
    harness.main(test, "bbs-input")
