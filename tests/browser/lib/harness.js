// tests/browser/lib/harness.js — what every kagi browser test needs: kagi-demo on the
// embedded HTTP front end in a temp directory, Debian's headless Chromium with a fresh
// profile, and a runner that exits 0 (pass), 1 (fail) or 77 (skipped: a tool is missing).
//
//   const h = require("./lib/harness");
//   h.run("chat", async ({ demo, browser }) => { const page = await browser.newPage(); ... });
//
// Usage of a test file: node TEST.js KAGI_DEMO SOURCE_DIR
"use strict";

const { spawn } = require("node:child_process");
const fs = require("node:fs");
const net = require("node:net");
const os = require("node:os");
const path = require("node:path");

const CHROMIUM = process.env.KAGI_CHROMIUM || "/usr/bin/chromium";
// ctest SKIP_RETURN_CODE; scripts/test sets KAGI_BROWSER_REQUIRED=1 so a missing tool fails
// there instead of hiding behind a skip.
const SKIP = process.env.KAGI_BROWSER_REQUIRED === "1" ? 1 : 77;

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// Polls `condition` (async, returns truthy when done) until `timeoutMs`; throws naming `what`.
async function waitUntil(condition, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const value = await condition();
      if (value) return value;
    } catch (e) {
      // not ready yet
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// Starts kagi-demo --http on a free loopback port with its data in a temp directory.
async function startDemo(demoPath, sourceDir, sets = []) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "kagi-browser-"));
  const port = await freePort();
  const args = [
    "--http", `127.0.0.1:${port}`,
    "--set", `templates.dir=${sourceDir}/templates`,
    "--set", `data.dir=${tmp}/data`,
    "--set", `locks.dir=${tmp}/locks`,
    "--set", "data.fsync=never",
  ];
  for (const s of sets) args.push("--set", s);
  const log = fs.openSync(path.join(tmp, "kagi-demo.log"), "w");
  const child = spawn(demoPath, args, { stdio: ["ignore", log, log] });
  const baseUrl = `http://127.0.0.1:${port}`;
  const demo = {
    baseUrl,
    tmp,
    log: () => fs.readFileSync(path.join(tmp, "kagi-demo.log"), "utf8").slice(-4000),
    stop: async () => {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        await Promise.race([new Promise((r) => child.once("exit", r)),
                            new Promise((r) => setTimeout(r, 10000))]);
        if (child.exitCode === null) child.kill("SIGKILL");
      }
      fs.closeSync(log);
      if (!process.env.KAGI_KEEP_TMP) fs.rmSync(tmp, { recursive: true, force: true });
    },
  };
  try {
    await waitUntil(async () => (await fetch(baseUrl + "/")).ok, 15000, `kagi-demo on ${baseUrl}`);
  } catch (e) {
    const out = demo.log();
    await demo.stop();
    throw new Error(`${e.message}\n${out}`);
  }
  return demo;
}

// Debian's Chromium, headless, with a fresh profile. Returns a browser context (pages share
// cookies, like tabs of one browser) and a close().
async function launchBrowser() {
  const { chromium } = require("playwright-core");
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "kagi-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 900, height: 700 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  return {
    context,
    newPage: async () => {
      const page = await context.newPage();
      page.errors = [];
      page.on("pageerror", (e) => page.errors.push(String(e)));
      // Failed requests are checked by URL below (the console text has none); browsers ask
      // for /favicon.ico on their own, which the demo need not have.
      page.on("console", (m) => {
        if (m.type() === "error" && !m.text().startsWith("Failed to load resource")) {
          page.errors.push(m.text());
        }
      });
      page.on("response", (r) => {
        if (r.status() >= 400 && !r.url().endsWith("/favicon.ico")) {
          page.errors.push(`HTTP ${r.status()} for ${r.url()}`);
        }
      });
      return page;
    },
    close: async () => {
      await context.close();
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

// Where screenshots go: $KAGI_SCREENSHOT_DIR (ctest sets the build's screenshots/ folder),
// so test runs never rewrite tracked files. To refresh the ones in the docs:
//   KAGI_SCREENSHOT_DIR=$PWD/docs/screenshots ctest --test-dir build -L browser
function screenshotDir() {
  const dir = process.env.KAGI_SCREENSHOT_DIR || path.join(os.tmpdir(), "kagi-screenshots");
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

function check(condition, message) {
  if (!condition) throw new Error(message);
}

// Runs one browser test: skips (77) when Chromium or playwright-core is missing, fails (1)
// with the server log on any error, passes (0) otherwise. Every run is bounded.
function run(name, body, { timeoutMs = 60000, sets = [] } = {}) {
  const [demoPath, sourceDir] = process.argv.slice(2);
  if (!demoPath || !sourceDir) {
    console.error(`usage: node ${process.argv[1]} KAGI_DEMO SOURCE_DIR`);
    process.exit(2);
  }
  if (!fs.existsSync(CHROMIUM)) {
    console.log(`SKIP ${name}: ${CHROMIUM} is missing (apt-get install chromium)`);
    process.exit(SKIP);
  }
  try {
    require.resolve("playwright-core");
  } catch (e) {
    console.log(`SKIP ${name}: playwright-core is missing (cd tests/browser && npm ci)`);
    process.exit(SKIP);
  }
  const timer = setTimeout(() => {
    console.error(`FAIL ${name}: no result after ${timeoutMs} ms`);
    process.exit(1);
  }, timeoutMs);
  (async () => {
    let demo;
    let browser;
    try {
      demo = await startDemo(demoPath, sourceDir, sets);
      browser = await launchBrowser();
      await body({ demo, browser, sourceDir });
      console.log(`PASS ${name}`);
      process.exitCode = 0;
    } catch (e) {
      console.error(`FAIL ${name}: ${e.stack || e}`);
      if (demo) console.error(demo.log());
      process.exitCode = 1;
    } finally {
      if (browser) await browser.close().catch(() => {});
      if (demo) await demo.stop().catch(() => {});
      clearTimeout(timer);
    }
  })();
}

module.exports = { check, freePort, launchBrowser, run, startDemo, waitUntil, SKIP, screenshotDir };
