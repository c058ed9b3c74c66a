// The lock admin page in a real browser (issue 7): while requests hold and wait for locks,
// /admin/locks (HTTP Basic) shows the holder, the queue behind it and the long hold
// highlighted; clicking a column sorts the table (static/admin.js, no inline script under
// the CSP). Saves admin.png (see screenshotDir); docs/screenshots/admin.png is one such run.
"use strict";

const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { execFileSync } = require("node:child_process");
const { check, run, screenshotDir, waitUntil } = require("./lib/harness");

const auth = "Basic " + Buffer.from("admin:s3cret").toString("base64");
const htpasswd = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "kagi-admin-")), "admin.htpasswd");
execFileSync("htpasswd", ["-cbB", htpasswd, "admin", "s3cret"], { stdio: "ignore" });

run("admin", async ({ demo, browser }) => {
  // The browser first: opening its first page can take seconds on a busy machine.
  const page = await browser.newPage();
  await page.setExtraHTTPHeaders({ Authorization: auth });
  const hold = (name, ms) => fetch(`${demo.baseUrl}/_test/hold?name=${name}&ms=${ms}`);
  // Some history for the statistics table, then the holds the screenshot shows.
  await hold("chat/room/lobby", 5);
  await hold("bbs/post/42", 20);
  // The page is checked while the hold lasts; the test waits for states, never for a guessed
  // time, so the hold only bounds how slow a machine may be (HOLD_MS is what the test costs).
  const HOLD_MS = 20000;
  const lockJson = async (name) => {
    const r = await fetch(`${demo.baseUrl}/admin/locks.json`, { headers: { Authorization: auth } });
    return (await r.json()).locks.find((l) => l.name === name);
  };
  const holds = [hold("bbs/board/3", HOLD_MS)];
  await waitUntil(async () => (await lockJson("bbs/board/3")) !== undefined, HOLD_MS / 2,
                  "bbs/board/3 held");
  holds.push(hold("bbs/board/3", 10), hold("bbs/board/3", 10), hold("chat/room/lobby", 5000));
  // Both waiters queued, and the hold past the 1 s long-hold mark, so the row is highlighted.
  await waitUntil(async () => {
    const l = await lockJson("bbs/board/3");
    return l !== undefined && l.waiters.length === 2 && l.holders.length === 1 && l.holders[0].long;
  }, HOLD_MS / 2, "bbs/board/3 held long with two waiters");

  await page.goto(`${demo.baseUrl}/admin/locks`);
  const row = page.locator("#held tbody tr", { hasText: "bbs/board/3" });
  check((await row.count()) === 1, "one row for bbs/board/3");
  check((await row.getAttribute("class")) === "long", "the 1 s+ hold is highlighted");
  check((await row.locator(".waiter").count()) === 2, "two waiters queue behind it");
  check((await row.innerText()).includes("GET /_test/hold"), "the holder's route is shown");
  check((await page.locator("#stats tbody tr", { hasText: "bbs/post" }).count()) === 1,
        "the statistics list prefix bbs/post");

  // Sort the held table by name, descending: bbs/board/3 ends up below chat/room/lobby.
  const nameHeader = page.locator("#held thead th").first();
  await nameHeader.click();
  await nameHeader.click();
  check((await nameHeader.getAttribute("class")) === "sorted-desc", "sorted descending");
  const first = await page.locator("#held tbody tr td.name").first().innerText();
  check(first === "chat/room/lobby",
        `first row after sorting: ${first}\n${await page.locator("#held").innerText()}`);

  const shot = path.join(screenshotDir(), "admin.png");
  await page.screenshot({ path: shot, fullPage: true });
  const size = fs.statSync(shot).size;
  check(size > 5000, `the screenshot is only ${size} bytes`);
  console.log(`screenshot: ${shot} (${size} bytes)`);
  await Promise.all(holds);
  check(page.errors.length === 0, `page errors: ${page.errors}`);
}, { timeoutMs: 100000,
     sets: ["test.routes=true", `admin.htpasswd=${htpasswd}`, "locks.timeout_ms=60000",
            "server.threads=8"] });
