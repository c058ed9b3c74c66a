"""Hardening item 11: a hung holder never holds forever, and an admin can revoke a lock.

Three kagi-demo processes (embedded HTTP) share one locks.dir and data.dir, like the workers
of one site:

  A, B  locks.max_hold_ms = 600. A request on A takes `revoke/hung` and hangs (5 s) before
        its commit. A request on B for the same name gets it once A's watchdog revokes the
        hung hold (a real cross-process release), and commits; the hung request's commit is
        then refused (409 from the test route), and the file keeps B's value. The revocation
        is an event and a per-prefix count on the admin page and /metrics.
  C     locks.max_hold_ms = 0 (never). Two requests on C hang holding a lock each; the Revoke button of A's admin page
        (a POST to another process) is refused without the admin login (401) and without the
        CSRF token (403), leaving the lock held; with both, C's watchdog revokes it and C's
        commit is refused.
"""

import base64
import json
import os
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "frontends"))
sys.path.insert(0, HERE)
import harness  # noqa: E402
import prometheus  # noqa: E402

AUTH = {"Authorization": "Basic " + base64.b64encode(b"admin:s3cret").decode()}
MAX_HOLD_MS = 600
HUNG = "revoke/hung"
TARGET = "revoke/admin/a"
CONTROL = "revoke/admin/b"


def start_demo(env, label, htpasswd, max_hold_ms):
    port = harness.free_port()
    proc = env.start([env.demo, "--http", "127.0.0.1:%d" % port] +
                     env.demo_settings(4, ["admin.htpasswd=" + htpasswd,
                                           "locks.max_hold_ms=%d" % max_hold_ms]),
                     "demo-%s.log" % label)
    harness.wait_for_port(port, proc, "kagi-demo " + label)
    return port, proc.pid


def locks_json(port):
    r = harness.request(port, "GET", "/admin/locks.json", headers=AUTH)
    if r.status != 200:
        raise AssertionError("locks.json answered %d: %s" % (r.status, r.text()[:200]))
    return json.loads(r.body)


def holder_of(port, name):
    for lock in locks_json(port)["locks"]:
        if lock["name"] == name and lock["holders"]:
            return lock["holders"][0]
    return None


def refused(text):
    """The store's refusal of a commit through a revoked guard, naming the revocation whether
    it is seen at the commit's start or, if it lands during the write, at the fence."""
    return text.startswith("refused: commit ") and "the lock was revoked" in text


def in_background(results, key, port, path):
    def run():
        results[key] = harness.request(port, "GET", path, timeout=30)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def check_hung_holder(env, fail, a, b, pid_a):
    results = {}
    hung = in_background(results, "hung", a,
                         "/_test/hold_commit?name=%s&ms=5000&value=hung" % HUNG)
    # B's admin page reads A's registry: the hung request holds the name now.
    harness.wait_until("A holding " + HUNG, lambda: holder_of(b, HUNG) is not None, timeout=10)
    fail.equal(holder_of(b, HUNG)["pid"], pid_a, "the hung request runs in process A")

    started = time.monotonic()
    r = harness.request(b, "GET", "/_test/hold_commit?name=%s&ms=0&value=next" % HUNG, timeout=30)
    waited_ms = (time.monotonic() - started) * 1000
    print("  B got %s after %.0f ms (locks.max_hold_ms = %d, locks.timeout_ms = 3000)"
          % (HUNG, waited_ms, MAX_HOLD_MS), flush=True)
    fail.equal((r.status, r.text()), (200, "committed next\n"),
               "B gets the lock after max_hold_ms and commits (before the fix: 503 busy)")
    fail.check(waited_ms < 3000, "B's wait ended by the revocation, not by its own timeout")

    hung.join(30)
    h = results.get("hung")
    fail.check(h is not None and h.status == 409 and refused(h.text()),
               "the hung request's late commit is refused: %r"
               % (((h.status, h.text()) if h else None),))
    r = harness.request(a, "GET", "/_test/data?name=" + HUNG)
    fail.equal((r.status, r.text()), (200, "next"), "the file holds B's value, not the hung one")

    # The event and the count, summed over every worker (publishers write every 250 ms).
    def revoked_seen():
        doc = locks_json(b)
        events = [e for e in doc["events"] if e["kind"] == "revoked" and e["name"] == HUNG]
        counts = [p["revocations"] for p in doc["stats"]["prefixes"] if p["prefix"] == "revoke"]
        return events and counts == [1] and "max_hold_ms" in events[0]["detail"]
    try:
        harness.wait_until("the revoked event and count", revoked_seen, timeout=10)
        fail.check(True, "a 'revoked' event naming max_hold_ms, and revocations = 1 for 'revoke'")
    except AssertionError as e:
        fail.check(False, str(e) + ": " + json.dumps(locks_json(b)["events"])[:500])
    families = prometheus.parse(harness.request(a, "GET", "/metrics", headers=AUTH).text())
    samples = [s[2] for s in families.get("kagi_lock_revocations_total", {"samples": []})["samples"]
               if s[1].get("prefix") == "revoke"]
    fail.equal(samples, [1.0], 'kagi_lock_revocations_total{prefix="revoke"}')


def revoke_form(page, holder):
    """The hidden fields of the Revoke button of `holder`'s row on the HTML page."""
    for form in re.findall(r'<form method="post" action="/admin/locks/revoke".*?</form>', page):
        fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', form))
        if fields.get("slot") == str(holder["slot"]) and fields.get("pid") == str(holder["pid"]):
            return fields
    return None


def post_revoke(port, fields, cookie, headers=()):
    hdrs = {"Content-Type": "application/x-www-form-urlencoded"}
    if cookie:
        hdrs["Cookie"] = "kagi_csrf=" + cookie
    hdrs.update(dict(headers))
    return harness.request(port, "POST", "/admin/locks/revoke", harness.form_body(fields), hdrs)


def check_admin_revoke(env, fail, a, c, pid_c):
    results = {}
    # C's requests hang for 20 s, longer than any wait below: a lock gone from the registry
    # before then was revoked, not released by its request.
    threads = [in_background(results, name, c, "/_test/hold_commit?name=%s&ms=20000&value=c"
                             % name) for name in (TARGET, CONTROL)]
    harness.wait_until("C holding both locks", lambda: holder_of(a, TARGET) is not None
                       and holder_of(a, CONTROL) is not None, timeout=10)
    target, control = holder_of(a, TARGET), holder_of(a, CONTROL)
    fail.equal(target["pid"], pid_c, "the lock to revoke is held by process C")

    page = harness.request(a, "GET", "/admin/locks", headers=AUTH)
    token = page.cookies().get("kagi_csrf")
    form = revoke_form(page.text(), target)
    fail.check(page.status == 200 and form is not None and form.get("seq") == str(target["seq"])
               and bool(token) and form.get("_csrf") == token,
               "A's page has a Revoke button for C's lock with the CSRF token")
    if not form or not token:
        return
    bad_auth = {"Authorization": "Basic " + base64.b64encode(b"admin:wrong").decode()}
    fail.equal(post_revoke(a, form, token).status, 401, "revoke without the admin login → 401")
    fail.equal(post_revoke(a, form, token, bad_auth.items()).status, 401,
               "revoke with a wrong password → 401")
    no_csrf = {k: v for k, v in form.items() if k != "_csrf"}
    fail.equal(post_revoke(a, no_csrf, token, AUTH.items()).status, 403,
               "revoke without the CSRF field → 403")
    fail.equal(post_revoke(a, form, None, AUTH.items()).status, 403,
               "revoke without the CSRF cookie → 403")

    # A good revoke of the control lock: once C's watchdog has acted on it, it has also run a
    # pass after the refused requests above, which therefore must not have asked anything.
    control_form = revoke_form(page.text(), control)
    r = post_revoke(a, control_form, token, AUTH.items())
    fail.check(r.status == 303 and r.header("Location") == "/admin/locks",
               "the control revoke → 303 to /admin/locks (got %d)" % r.status)
    harness.wait_until("the control lock revoked", lambda: holder_of(a, CONTROL) is None,
                       timeout=10)
    still = holder_of(a, TARGET)
    fail.check(still is not None and still["seq"] == target["seq"],
               "after the refused revokes the lock is still held by the same request")

    r = post_revoke(a, form, token, AUTH.items())
    fail.equal(r.status, 303, "revoke with login and CSRF token → 303")
    harness.wait_until("C's lock revoked", lambda: holder_of(a, TARGET) is None, timeout=10)
    fail.check(True, "C's watchdog revoked the lock asked for through A")
    fail.equal(post_revoke(a, form, token, AUTH.items()).status, 409,
               "the same revoke again (a stale page) → 409")
    r = harness.request(a, "GET", "/_test/hold_commit?name=%s&ms=0&value=a" % TARGET)
    fail.equal((r.status, r.text()), (200, "committed a\n"), "the revoked name is free again")

    for t in threads:
        t.join(30)
    h = results.get(TARGET)
    fail.check(h is not None and h.status == 409 and refused(h.text()),
               "C's commit through the revoked lock is refused: %r"
               % (((h.status, h.text()) if h else None),))

    def admin_event():
        return [e for e in locks_json(a)["events"] if e["kind"] == "revoked"
                and e["name"] == TARGET and e["detail"].startswith("revoked from the admin page")]
    harness.wait_until("the admin revoke event", admin_event, timeout=10)
    page = harness.request(a, "GET", "/admin/locks", headers=AUTH).text()
    fail.check(TARGET in page and ">revoked<" in page, "the HTML page lists the revoked event")


def run(env, fail):
    htpasswd = env.path("admin.htpasswd")
    subprocess.run(["htpasswd", "-cbB", htpasswd, "admin", "s3cret"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    a, pid_a = start_demo(env, "a", htpasswd, MAX_HOLD_MS)
    b, _ = start_demo(env, "b", htpasswd, MAX_HOLD_MS)
    c, pid_c = start_demo(env, "c", htpasswd, 0)
    check_hung_holder(env, fail, a, b, pid_a)
    check_admin_revoke(env, fail, a, c, pid_c)


if __name__ == "__main__":
    harness.main(run, "revoke")
