// One site on two web hosts sharing one PostgreSQL, in a real browser. Host A and host B are
// two kagi-demo processes (HTTP front end each), each with a locks.dir and a data.dir of its
// own (what two machines would have), both with locks and data on a private PostgreSQL
// (tests/support/pgcluster) and one shared security.secret_file.
//
//   1. The BBS: a post made through host A's form is on host B's board (after a reload), the
//      same text and the same id; and back, a post made on host B is on host A's board. The
//      CSRF cookie minted by one host is accepted by the other (both hosts are 127.0.0.1, so
//      the browser sends one cookie to both: the shared secret is what makes that work).
//   2. The chat: a page on host B's room is long-polling host B; a message said in a page on
//      host A appears in it without a reload, delivered by the poll that was parked on host B
//      before the say: host B's wait was woken by host A's say (LISTEN/NOTIFY).
//
// Skipped (77) when Chromium or node_modules is missing (as every browser test) or when the
// PostgreSQL server binaries are missing; with KAGI_PG_REQUIRED=1 (scripts/test) a missing
// PostgreSQL is a failure instead. Saves cluster.png (host B's chat page; see screenshotDir).
//
// Usage: node cluster_test.js KAGI_DEMO SOURCE_DIR   (KAGI_KEEP_TMP=1 keeps the temp dirs)
"use strict";

const { execFile } = require("node:child_process");
const crypto = require("node:crypto");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { check, freePort, launchBrowser, screenshotDir, startDemo, waitUntil, SKIP } =
  require("./lib/harness");

const NAME = "cluster";
const TIMEOUT_MS = 90000;     // the whole test; ctest's own TIMEOUT (120 s) is above it
const CLEANUP_MS = 25000;     // the cleanup after a failure or a timeout
const CHROMIUM = process.env.KAGI_CHROMIUM || "/usr/bin/chromium";  // as lib/harness.js
// A missing PostgreSQL fails where it is required (scripts/test installs it), else skips.
const PG_SKIP = process.env.KAGI_PG_REQUIRED === "1" ? 1 : 77;

// The folder of Debian's PostgreSQL server binaries (what tests/support/pgcluster uses), or "".
function postgresBin() {
  const complete = (dir) =>
    ["postgres", "initdb", "pg_ctl"].every((b) => fs.existsSync(path.join(dir, b)));
  const forced = process.env.KAGI_PG_BIN;
  if (forced) return complete(forced) ? forced : "";
  let versions = [];
  try {
    versions = fs.readdirSync("/usr/lib/postgresql");
  } catch (e) {
    return "";
  }
  return versions.map((v) => `/usr/lib/postgresql/${v}/bin`).find(complete) || "";
}

// Runs tests/support/pgcluster; resolves to its stdout, rejects with its stderr.
function pgcluster(sourceDir, args, timeoutMs) {
  const script = path.join(sourceDir, "tests", "support", "pgcluster");
  return new Promise((resolve, reject) => {
    execFile(script, args, { timeout: timeoutMs }, (error, stdout, stderr) => {
      if (error) reject(new Error(`pgcluster ${args.join(" ")}: ${error.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

function tail(file, chars = 3000) {
  try {
    return fs.readFileSync(file, "utf8").slice(-chars);
  } catch (e) {
    return `(${file}: ${e.message})`;
  }
}

// What the test started, stopped in reverse order by cleanup(): the browser, then the hosts
// (before the PostgreSQL they use, so their logs do not fill with its shutdown), then the
// PostgreSQL server, then the temp dir.
const cleanups = [];
const hosts = [];
let pgDir = "";

// Returns how many steps failed.
async function cleanup() {
  let errors = 0;
  while (cleanups.length) {
    const { what, stop } = cleanups.pop();
    try {
      await stop();
    } catch (e) {
      errors++;
      console.error(`cleanup: ${what}: ${e.message || e}`);
    }
  }
  return errors;
}

function printLogs() {
  for (const host of hosts) console.error(`--- ${host.name} (kagi-demo) log ---\n${host.log()}`);
  if (pgDir) {
    console.error(`--- PostgreSQL server log ---\n${tail(path.join(pgDir, "server.log"))}`);
  }
}

async function screenshot(page, name) {
  const shot = path.join(screenshotDir(), name);
  await page.screenshot({ path: shot, fullPage: true });
  const size = fs.statSync(shot).size;
  check(size > 5000, `the screenshot is only ${size} bytes`);
  console.log(`screenshot: ${shot} (${size} bytes)`);
}

// Submits the BBS post form on `page` and waits for the 303 back to the board.
async function post(page, { name, subject, body, password }) {
  await page.fill("#name", name);
  await page.fill("#subject", subject);
  await page.fill("#body", body);
  await page.fill("#password", password);
  await Promise.all([page.waitForNavigation(), page.click("form.post-form button[type=submit]")]);
}

// The board's posts as the page shows them, newest first.
async function boardPosts(page) {
  return page.locator("article.post").evaluateAll((articles) => articles.map((a) => ({
    id: a.id,
    subject: a.querySelector(".subject").textContent,
    name: a.querySelector(".meta bdi").textContent,
    body: a.querySelector(".body").innerText,
  })));
}

async function csrfCookies(browser) {
  return (await browser.context.cookies()).filter((c) => c.name === "kagi_csrf")
    .map((c) => c.value);
}

async function testBbs(browser, a, b) {
  // Host B's board first: empty, and host B mints the browser's CSRF cookie.
  const pageB = await browser.newPage();
  await pageB.goto(`${b.baseUrl}/bbs/general/`);
  check((await pageB.locator("article.post").count()) === 0, "host B's board starts empty");
  const cookie = await csrfCookies(browser);
  check(cookie.length === 1, `one kagi_csrf cookie after host B's page: ${cookie}`);

  // Post through host A's form, with the cookie host B minted.
  const pageA = await browser.newPage();
  await pageA.goto(`${a.baseUrl}/bbs/general/`);
  const fromA = {
    name: "Ann on A",
    subject: "Posted on host A <i>not italic</i>",
    body: "Hello from host A — café <b>not bold</b>\nsecond line",
    password: "s3cret",
  };
  await post(pageA, fromA);
  check(pageA.url() === `${a.baseUrl}/bbs/general/`, `303 back to host A's board: ${pageA.url()}`);
  check(JSON.stringify(await csrfCookies(browser)) === JSON.stringify(cookie),
        "host A replaced host B's CSRF cookie: it does not accept host B's signature " +
        "(is security.secret_file shared?)");
  const onA = await boardPosts(pageA);
  check(onA.length === 1 && onA[0].subject === fromA.subject,
        `host A shows its post: ${JSON.stringify(onA)}`);

  // Host B, reloaded, has it: the same id and text.
  await pageB.reload();
  const onB = await boardPosts(pageB);
  check(onB.length === 1,
        `host B shows ${onB.length} posts after the reload, not 1: ${JSON.stringify(onB)}`);
  check(JSON.stringify(onB[0]) === JSON.stringify(onA[0]),
        `host B shows the post as ${JSON.stringify(onB[0])}, host A as ${JSON.stringify(onA[0])}`);
  check(onB[0].name === fromA.name && onB[0].body.includes("<b>not bold</b>") &&
        onB[0].body.includes("second line") && onB[0].body.includes("café"),
        `host B shows the post's text: ${JSON.stringify(onB[0])}`);

  // And back: a post on host B is on host A's board, above the first, with the next id.
  await post(pageB, { name: "Ben on B", subject: "Answered on host B", body: "Seen on B.",
                      password: "other" });
  check(pageB.url() === `${b.baseUrl}/bbs/general/`, `303 back to host B's board: ${pageB.url()}`);
  await pageA.reload();
  const bothOnA = await boardPosts(pageA);
  const bothOnB = await boardPosts(pageB);
  check(bothOnA.length === 2 && bothOnA[0].subject === "Answered on host B",
        `host A shows host B's post on top: ${JSON.stringify(bothOnA)}`);
  check(JSON.stringify(bothOnA) === JSON.stringify(bothOnB),
        `the hosts' boards differ: A ${JSON.stringify(bothOnA)}, B ${JSON.stringify(bothOnB)}`);
  check(bothOnA[0].id !== bothOnA[1].id, `two posts with one id: ${bothOnA[0].id}`);

  for (const page of [pageA, pageB]) {
    check(page.errors.length === 0, `page errors: ${page.errors}`);
  }
  await pageA.close();
  await pageB.close();
}

async function testChat(browser, a, b) {
  // Host B's room, long-polling host B. Every request of the page is stamped with when it
  // was sent, to tell below which poll delivered the message.
  const roomB = `${b.baseUrl}/chat/lobby/`;
  const pageB = await browser.newPage();
  const sentAt = new Map();
  pageB.on("request", (r) => sentAt.set(r, Date.now()));
  const polls = [];  // host B's answers to the page's polls: { sent, answered, body }
  pageB.on("response", async (r) => {
    if (!r.url().includes("/chat/lobby/messages?")) return;
    const answered = Date.now();
    try {
      polls.push({ sent: sentAt.get(r.request()), answered, body: await r.text() });
    } catch (e) {
      // the page went away
    }
  });
  await pageB.goto(roomB);
  await pageB.evaluate(() => { window.__kagiMarker = 1; });  // a reload would lose it
  // Host B's own count of parked polls: only this page polls host B.
  const parkedOnB = async () =>
    (await (await fetch(`${b.baseUrl}/chat/stats.json`)).json()).parked;
  await waitUntil(async () => (await parkedOnB()) >= 1, 15000,
                  "host B's page's poll parked on host B");

  // Say it in a page on host A.
  const pageA = await browser.newPage();
  await pageA.goto(`${a.baseUrl}/chat/lobby/`);
  const text = "said on host A <b>not bold</b> & café";
  await pageA.fill("#name", "alice-on-A");
  await pageA.fill("#text", text);
  const said = Date.now();
  const sayAnswer = pageA.waitForResponse((r) => r.url().endsWith("/chat/lobby/say"));
  await pageA.click("#say button[type=submit]");
  const sayStatus = (await sayAnswer).status();
  const sayMs = Date.now() - said;
  check(sayStatus === 200, `the say on host A: HTTP ${sayStatus}`);

  // It appears on host B's page, not reloaded, within a few seconds.
  const line = pageB.locator("#messages li.chat-message", { hasText: "said on host A" });
  await line.waitFor({ timeout: 5000 });
  const shownMs = Date.now() - said;
  check((await line.locator(".chat-text").textContent()) === text,
        "host B's page shows the exact text");
  check((await line.locator(".chat-name").textContent()) === "alice-on-A",
        "host B's page shows the name");
  check(pageB.url() === roomB, `host B's page navigated away: ${pageB.url()}`);
  check((await pageB.evaluate(() => window.__kagiMarker)) === 1,
        "host B's page was reloaded (its JS state is gone)");

  // The poll that delivered it was sent before the say and parked on host B until then: it
  // was woken by the say on host A, not answered by a poll sent later.
  await waitUntil(async () => polls.some((p) => p.body.includes("said on host A")), 2000,
                  "the poll answer carrying the message");
  const delivery = polls.find((p) => p.body.includes("said on host A"));
  check(delivery.sent !== undefined && delivery.sent < said,
        `the message came in a poll sent ${delivery.sent - said} ms after the say, not in the ` +
        "poll parked before it");
  check(delivery.answered - said < 5000,
        `host B's parked poll answered ${delivery.answered - said} ms after the say`);
  console.log(`host A's say reached host B's page in ${shownMs} ms (the say answered in ` +
              `${sayMs} ms; host B's parked poll, sent ${said - delivery.sent} ms before the ` +
              `say, answered ${delivery.answered - said} ms after it)`);

  // Host A's own page has it too (its poll on host A).
  await pageA.locator("#messages li.chat-message", { hasText: "said on host A" })
    .waitFor({ timeout: 5000 });

  for (const page of [pageA, pageB]) {
    check(page.errors.length === 0, `page errors: ${page.errors}`);
  }
  await screenshot(pageB, "cluster.png");
}

async function main(demoPath, sourceDir) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "kagi-cluster-"));
  // Run as root, pgcluster runs the server as `postgres`, which must reach its folder inside.
  fs.chmodSync(tmp, 0o755);
  cleanups.push({ what: `remove ${tmp}`, stop: async () => {
    if (!process.env.KAGI_KEEP_TMP) fs.rmSync(tmp, { recursive: true, force: true });
    else console.log(`kept ${tmp}`);
  } });

  pgDir = path.join(tmp, "pg");
  const started = Date.now();
  cleanups.push({ what: "stop PostgreSQL",
                  stop: () => pgcluster(sourceDir, ["stop", pgDir], 20000) });
  const out = await pgcluster(sourceDir, ["start", pgDir, String(await freePort())], 60000);
  const dsn = out.trim().split("\n").pop();
  console.log(`PostgreSQL up in ${Date.now() - started} ms: ${dsn}`);

  // One secret for both hosts: a CSRF token minted by one is accepted by the other.
  const secretFile = path.join(tmp, "secret.key");
  fs.writeFileSync(secretFile, crypto.randomBytes(32).toString("hex") + "\n",
                   { mode: 0o600, flag: "wx" });

  const hostSettings = (name, n) => [
    "locks.backend=postgres",
    `locks.postgres.dsn=${dsn}`,
    `locks.postgres.application_name=kagi/${name}/${n}`,
    "data.backend=postgres",
    `locks.dir=${tmp}/${name}/locks`,
    `data.dir=${tmp}/${name}/data`,
    `security.secret_file=${secretFile}`,
    "bbs.flood_interval_s=0",
  ];
  // One after the other: the first creates the schema (a race there is not this test's).
  for (const [name, n] of [["hostA", 1], ["hostB", 2]]) {
    const demo = await startDemo(demoPath, sourceDir, hostSettings(name, n));
    demo.name = name;
    hosts.push(demo);
    cleanups.push({ what: `stop ${name}`, stop: () => demo.stop() });
  }
  const [a, b] = hosts;
  console.log(`host A ${a.baseUrl}, host B ${b.baseUrl}`);

  const browser = await launchBrowser();
  cleanups.push({ what: "close Chromium", stop: () => browser.close() });

  await testBbs(browser, a, b);
  await testChat(browser, a, b);
}

function run() {
  const [demoPath, sourceDir] = process.argv.slice(2);
  if (!demoPath || !sourceDir) {
    console.error(`usage: node ${process.argv[1]} KAGI_DEMO SOURCE_DIR`);
    process.exit(2);
  }
  if (!fs.existsSync(CHROMIUM)) {
    console.log(`SKIP ${NAME}: ${CHROMIUM} is missing (apt-get install chromium)`);
    process.exit(SKIP);
  }
  try {
    require.resolve("playwright-core");
  } catch (e) {
    console.log(`SKIP ${NAME}: playwright-core is missing (cd tests/browser && npm ci)`);
    process.exit(SKIP);
  }
  if (!postgresBin()) {
    const what = PG_SKIP === 1 ? "FAIL" : "SKIP";
    const where = process.env.KAGI_PG_BIN || "/usr/lib/postgresql/*/bin";
    console.log(`${what} ${NAME}: no PostgreSQL server binaries in ${where} ` +
                "(apt-get install postgresql)");
    process.exit(PG_SKIP);
  }

  const started = Date.now();
  let finished = false;
  // Ends the run: stops everything (bounded, even if a stop hangs), then exits. A cleanup that
  // failed fails the run: it may have left a process behind.
  const finish = async (failure) => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    if (failure) {
      console.error(`FAIL ${NAME}: ${failure}`);
      printLogs();
    }
    setTimeout(() => { console.error(`FAIL ${NAME}: cleanup did not finish`); process.exit(1); },
               CLEANUP_MS).unref();
    const errors = await cleanup();
    if (!failure && errors) console.error(`FAIL ${NAME}: ${errors} cleanup step(s) failed`);
    if (!failure && !errors) {
      console.log(`PASS ${NAME} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    }
    process.exit(failure || errors ? 1 : 0);
  };
  const timer = setTimeout(() => finish(`no result after ${TIMEOUT_MS} ms`), TIMEOUT_MS);
  for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => finish(`got ${signal}`));
  main(demoPath, sourceDir).then(() => finish(null), (e) => finish(e.stack || String(e)));
}

run();
