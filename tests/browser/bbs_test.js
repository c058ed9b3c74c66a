// The BBS in a real browser (issue 5): open the board, post through the form (the CSRF
// field comes from the page), see the post — its markup shown as text, its URL linked —
// then delete it with its password. Saves bbs.png (see screenshotDir).
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const { check, run, screenshotDir } = require("./lib/harness");

run("bbs", async ({ demo, browser }) => {
  const page = await browser.newPage();
  await page.goto(`${demo.baseUrl}/bbs/`);
  await page.click("text=general");
  check(page.url() === `${demo.baseUrl}/bbs/general/`, `on the board page: ${page.url()}`);

  const body = "Hello from a browser <b>not bold</b>\nsecond line, see https://example.org/kagi";
  await page.fill("#name", "Ann");
  await page.fill("#subject", "First post <i>here</i>");
  await page.fill("#body", body);
  await page.fill("#password", "s3cret");
  await Promise.all([page.waitForNavigation(), page.click("form.post-form button[type=submit]")]);
  check(page.url() === `${demo.baseUrl}/bbs/general/`, "303 back to the board");

  const post = page.locator("article.post").first();
  check((await post.locator(".subject").textContent()) === "First post <i>here</i>",
        "the subject is shown as text");
  check((await post.locator("b, i").count()) === 0, "markup in the post became elements");
  const text = await post.locator(".body").innerText();
  check(text.includes("second line") && text.includes("<b>not bold</b>"), `body text: ${text}`);
  const link = post.locator(".body a");
  check((await link.getAttribute("href")) === "https://example.org/kagi", "the URL is linked");
  check((await link.getAttribute("rel")).includes("nofollow"), "links are nofollow");

  // A second post, so the screenshot shows a board with some life in it.
  await page.fill("#name", "Ben");
  await page.fill("#subject", "Locks");
  await page.fill("#body", "Two requests posted at once here: both kept, in order.");
  await Promise.all([page.waitForNavigation(), page.click("form.post-form button[type=submit]")]);
  check((await page.locator("article.post").count()) === 2, "two posts on the board");

  const shot = path.join(screenshotDir(), "bbs.png");
  fs.mkdirSync(path.dirname(shot), { recursive: true });
  await page.screenshot({ path: shot, fullPage: true });
  const size = fs.statSync(shot).size;
  check(size > 5000, `the screenshot is only ${size} bytes`);
  console.log(`screenshot: ${shot} (${size} bytes)`);

  // Delete Ann's post with its password.
  const ann = page.locator("article.post", { hasText: "First post" });
  await ann.locator("input[name=password]").fill("s3cret");
  await Promise.all([page.waitForNavigation(), ann.locator("button").click()]);
  check((await page.locator("article.post").count()) === 1, "the post was deleted");
  check(page.errors.length === 0, `page errors: ${page.errors}`);
}, { sets: ["bbs.flood_interval_s=0"] });
