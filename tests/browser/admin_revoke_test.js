// The Revoke button of the lock admin page in a real browser (hardening item 11): a request
// hangs holding bbs/board/9 for 20 s; clicking its row's Revoke button (a form post with the
// page's CSRF token, under HTTP Basic) brings the browser back to /admin/locks, the lock is
// gone long before the 20 s are up, a "revoked" event is listed, and the hung request's
// commit is refused.
"use strict";

const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { execFileSync } = require("node:child_process");
const { check, run, waitUntil } = require("./lib/harness");

const auth = "Basic " + Buffer.from("admin:s3cret").toString("base64");
const htpasswd = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "kagi-admin-")), "admin.htpasswd");
execFileSync("htpasswd", ["-cbB", htpasswd, "admin", "s3cret"], { stdio: "ignore" });
const NAME = "bbs/board/9";

run("admin_revoke", async ({ demo, browser }) => {
  const page = await browser.newPage();
  await page.setExtraHTTPHeaders({ Authorization: auth });
  const held = async () => {
    const r = await fetch(`${demo.baseUrl}/admin/locks.json`, { headers: { Authorization: auth } });
    return (await r.json()).locks.some((l) => l.name === NAME && l.holders.length === 1);
  };
  const hung = fetch(`${demo.baseUrl}/_test/hold_commit?name=${NAME}&ms=20000&value=late`);
  await waitUntil(held, 5000, `${NAME} held`);

  await page.goto(`${demo.baseUrl}/admin/locks`);
  const row = page.locator("#held tbody tr", { hasText: NAME });
  check((await row.count()) === 1, `one row for ${NAME}`);
  const started = Date.now();
  await Promise.all([page.waitForURL(`${demo.baseUrl}/admin/locks`, { waitUntil: "load" }),
                     row.getByRole("button", { name: "Revoke" }).click()]);
  await waitUntil(async () => !(await held()), 5000, `${NAME} revoked`);
  const ms = Date.now() - started;
  check(ms < 5000, `revoked ${ms} ms after the click (the hold would last 20 s)`);

  const answer = await hung;
  const text = await answer.text();
  check(answer.status === 409 && text.startsWith("refused: commit "),
        `the hung request's commit is refused: ${answer.status} ${text}`);
  await waitUntil(async () => {
    await page.reload();
    return (await page.locator("#events tbody tr.revoked", { hasText: NAME }).count()) === 1;
  }, 5000, "the revoked event on the page");
  check(page.errors.length === 0, `page errors: ${page.errors}`);
}, { sets: ["test.routes=true", `admin.htpasswd=${htpasswd}`, "locks.max_hold_ms=0",
             "server.threads=8"] });
