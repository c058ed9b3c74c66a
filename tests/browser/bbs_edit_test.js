// Editing a post with an offline lock, in two real browsers (two Chromium profiles: two
// sessions). A opens the editor with the post's password; B sees "being edited by A" and the
// current text read-only; A saves and B can then edit. Then A opens the editor again and the
// page keeps the lock past its TTL while it is open; A closes the tab, and B gets the post once
// the TTL has run out. Saves bbs-edit.png (B's view while A edits).
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const { check, launchBrowser, run, screenshotDir, waitUntil } = require("./lib/harness");

const TTL_S = 3;

async function openEditor(page, baseUrl, name) {
  await page.goto(`${baseUrl}/bbs/general/edit/1`);
  check(await page.locator("#open").isVisible(), `${name}: the password form is shown`);
  await page.fill("#password", "pw");
  await page.fill("#name", name);
  await Promise.all([page.waitForNavigation(), page.click("#open button[type=submit]")]);
  check(page.url() === `${baseUrl}/bbs/general/edit/1`, `${name}: back on the edit page`);
  check(await page.locator("#editor").isVisible(), `${name}: the editor is shown`);
}

run("bbs_edit", async ({ demo, browser }) => {
  const base = demo.baseUrl;
  const a = await browser.newPage();
  const other = await launchBrowser();  // another browser: its own cookies, its own session
  try {
    const b = await other.newPage();

    // A posts with a password, then opens the editor from the post's edit link.
    await a.goto(`${base}/bbs/general/`);
    await a.fill("#name", "Ann");
    await a.fill("#body", "The first version.");
    await a.fill("#password", "pw");
    await Promise.all([a.waitForNavigation(), a.click("form.post-form button[type=submit]")]);
    await Promise.all([a.waitForNavigation(), a.click("article.post a.edit")]);
    check(a.url() === `${base}/bbs/general/edit/1`, `the edit link leads to ${a.url()}`);
    await openEditor(a, base, "Alice");

    // B is told at once who edits, and sees the current text read-only.
    await b.goto(`${base}/bbs/general/edit/1`);
    const held = await b.locator("#held").innerText();
    check(held.includes("Being edited by Alice since") && held.includes("free at"),
          `B's notice: ${held}`);
    check((await b.locator("#current .body").innerText()).includes("The first version."),
          "B sees the text");
    check((await b.locator("#editor").count()) === 0 && (await b.locator("#open").count()) === 0,
          "B has no editor and no way to open one");
    const shot = path.join(screenshotDir(), "bbs-edit.png");
    await b.screenshot({ path: shot, fullPage: true });
    console.log(`screenshot: ${shot} (${fs.statSync(shot).size} bytes)`);

    // A saves: back on the board, the post shows the new text and that it was edited.
    await a.fill("#body", "The second version, by Alice.");
    await Promise.all([a.waitForNavigation(), a.click("#editor button[type=submit]")]);
    check(a.url().startsWith(`${base}/bbs/general/`), `after the save: ${a.url()}`);
    const post = a.locator("article.post").first();
    check((await post.locator(".body").innerText()).includes("The second version, by Alice."),
          "the new text is on the board");
    check((await post.locator(".meta").innerText()).includes("edited"), "marked edited");

    // B can edit now, and gives the post back.
    await openEditor(b, base, "Bob");
    check((await b.inputValue("#body")) === "The second version, by Alice.",
          "B edits the saved text");
    await Promise.all([b.waitForNavigation(), b.click("form.cancel button")]);

    // A opens the editor again and keeps the page open past the TTL: the page renews it.
    await openEditor(a, base, "Alice");
    await new Promise((r) => setTimeout(r, (TTL_S + 2) * 1000));
    await b.goto(`${base}/bbs/general/edit/1`);
    check(await b.locator("#held").isVisible(), "still held after the TTL while A's page is open");

    // A closes the tab: the renewals stop, and the post is free within one TTL.
    await a.close();
    const closed = Date.now();
    await waitUntil(async () => {
      await b.goto(`${base}/bbs/general/edit/1`);
      return (await b.locator("#open").count()) === 1;
    }, (TTL_S + 5) * 1000, "the post to be free after A closed the tab");
    const freed = (Date.now() - closed) / 1000;
    console.log(`the post was free ${freed.toFixed(1)} s after A closed the tab (TTL ${TTL_S} s)`);
    check(freed <= TTL_S + 2, `freed ${freed} s after the tab closed`);
    await openEditor(b, base, "Bob");
    check(b.errors.length === 0, `B's page errors: ${b.errors}`);
  } finally {
    await other.close();
  }
}, { sets: ["bbs.flood_interval_s=0", `bbs.edit_ttl_s=${TTL_S}`], timeoutMs: 90000 });
