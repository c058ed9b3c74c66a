// The chat in a real browser (issue 6): two pages in one room; a message typed in one
// appears in the other without a reload (long-poll), as text, never as HTML. Saves
// chat.png (see screenshotDir).
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const { check, run, screenshotDir, waitUntil } = require("./lib/harness");

run("chat", async ({ demo, browser }) => {
  const room = `${demo.baseUrl}/chat/lobby/`;
  const alice = await browser.newPage();
  const bob = await browser.newPage();
  await alice.goto(room);
  await bob.goto(room);
  // A marker in Bob's page's JS state: a reload (which keeps the URL) would lose it.
  await bob.evaluate(() => { window.__kagiMarker = 1; });

  // Both pages are long-polling: wait for the chat's own count of parked polls, so the
  // message below is delivered to parked polls, not picked up by a poll sent later.
  const parked = async () =>
    (await (await fetch(`${demo.baseUrl}/chat/stats.json`)).json()).parked;
  await waitUntil(async () => (await parked()) >= 2, 15000, "both pages' long-polls parked");
  // Say something in Alice's page.
  const text = "hello from Alice <b>not bold</b> & café";
  await alice.fill("#name", "alice");
  await alice.fill("#text", text);
  await alice.click("#say button[type=submit]");

  // It appears in Bob's page, which was not reloaded.
  const line = bob.locator("#messages li.chat-message", { hasText: "hello from Alice" });
  await line.waitFor({ timeout: 10000 });
  check((await line.locator(".chat-text").textContent()) === text, "Bob sees the exact text");
  check((await line.locator(".chat-name").textContent()) === "alice", "Bob sees the name");
  check((await line.locator("b:not(.chat-name)").count()) === 0, "the text was inserted as HTML");
  check(bob.url() === room, "Bob's page navigated away");
  check((await bob.evaluate(() => window.__kagiMarker)) === 1,
        "Bob's page was reloaded (its JS state is gone)");
  // Alice's own page shows it once (from the poll), and her input is cleared.
  await alice.locator("#messages li.chat-message", { hasText: "hello from Alice" }).waitFor();
  check((await alice.locator("#messages li.chat-message").count()) === 1, "Alice sees it once");
  check((await alice.inputValue("#text")) === "", "Alice's input is cleared after sending");

  // And back: Bob answers, Alice sees it.
  await bob.fill("#name", "bob");
  await bob.fill("#text", "hi Alice");
  await bob.press("#text", "Enter");
  await alice.locator("#messages li.chat-message", { hasText: "hi Alice" }).waitFor({ timeout: 10000 });

  // Presence: both names are listed after a reload.
  await bob.reload();
  const who = await bob.locator("#who").textContent();
  check(who.includes("alice") && who.includes("bob"), `presence lists both: '${who}'`);
  await bob.locator("#messages li.chat-message", { hasText: "hi Alice" }).waitFor();

  // Presence from the poll alone: Carol never says anything; her page's poll carries her
  // name and the CSRF token (X-CSRF-Token), and that marks her present. (A bare GET with a
  // name does not: tests/unit/chat/chat_app_test.cpp.)
  const carol = await browser.newPage();
  await carol.addInitScript(() => window.localStorage.setItem("kagi-chat-name", "carol"));
  await carol.goto(room);
  const whoUrl = `${demo.baseUrl}/chat/lobby/who`;
  await waitUntil(async () => (await (await fetch(whoUrl)).json()).who.includes("carol"), 10000,
                  "carol, who only polls, to be listed as present");

  for (const page of [alice, bob, carol]) {
    check(page.errors.length === 0, `page errors: ${page.errors}`);
  }

  const shot = path.join(screenshotDir(), "chat.png");
  fs.mkdirSync(path.dirname(shot), { recursive: true });
  await bob.screenshot({ path: shot, fullPage: true });
  const size = fs.statSync(shot).size;
  check(size > 5000, `the screenshot is only ${size} bytes`);
  console.log(`screenshot: ${shot} (${size} bytes)`);
});
