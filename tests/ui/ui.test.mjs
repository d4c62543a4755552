// Browser tests of wheelforge's web UI: the real binary on loopback, a corpus generated at test
// time, headless Chromium driven through playwright-core. Screenshots of every page (desktop
// and phone) go to $WF_UI_SCREENSHOTS (default: build/ui-screenshots).
//
//   (cd tests/ui && npm ci) && WHEELFORGE_BIN=$PWD/build/wheelforge tests/ui/run.sh
//   or: cd build && ctest -R '^ui$' --output-on-failure

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BIN = process.env.WHEELFORGE_BIN;
const PYTHON3 = process.env.WF_PYTHON3 || "/usr/bin/python3";
const CHROMIUM = process.env.WF_CHROMIUM || "/usr/bin/chromium";
const PYENV = "/root/.pyenv/versions";
const SHOTS = path.resolve(process.env.WF_UI_SCREENSHOTS || path.join(HERE, "..", "..", "build", "ui-screenshots"));
const DESKTOP = { width: 1280, height: 900 };
const PHONE = { width: 390, height: 844 };
const HOSTILE = '<script>window.__wf_xss = 1</script><img src=x onerror="window.__wf_xss = 2">';
const BUILD_TIMEOUT = 240_000;

if (!BIN) throw new Error("WHEELFORGE_BIN is not set (CTest sets it to the built wheelforge binary)");

let tmp;
let server;
let base;
let tokens = {};
let seed;
let browser;
let failed = false;

/** Runs a command to completion with a clean environment (no PIP_*, PYTHON*, proxies). */
function run(cmd, args, opts = {}) {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !k.startsWith("PIP_") && !k.startsWith("PYTHON") && !k.toLowerCase().endsWith("_proxy"),
    ),
  );
  Object.assign(env, { PIP_CONFIG_FILE: "/dev/null", PIP_NO_INPUT: "1", PYTHONNOUSERSITE: "1", NO_PROXY: "*" });
  const r = spawnSync(cmd, args, { encoding: "utf8", env, timeout: 180_000, ...opts });
  return r;
}

function token(scope) {
  const r = run(BIN, ["token", "create", "--data-dir", path.join(tmp, "data"), "--scope", scope]);
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim().split("\n").pop().trim();
}

function basic(tok) {
  return "Basic " + Buffer.from("__token__:" + tok).toString("base64");
}

async function startServer(configPath, dataDir = path.join(tmp, "data")) {
  const log = fs.openSync(path.join(tmp, "server.log"), "a");
  const proc = spawn(BIN, ["serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--config", configPath], {
    stdio: ["ignore", "pipe", log],
  });
  const url = await new Promise((resolve, reject) => {
    let buf = "";
    const timer = setTimeout(() => reject(new Error("serve printed nothing within 30 s")), 30_000);
    proc.stdout.on("data", (d) => {
      buf += d;
      const m = buf.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on("exit", (code) => reject(new Error(`serve exited with ${code}: ${fs.readFileSync(path.join(tmp, "server.log"), "utf8")}`)));
  });
  return { proc, url };
}

async function shoot(page, name) {
  fs.mkdirSync(SHOTS, { recursive: true });
  const original = page.viewportSize();
  for (const [suffix, size] of [["desktop", DESKTOP], ["phone", PHONE]]) {
    await page.setViewportSize(size);
    await page.screenshot({ path: path.join(SHOTS, `${name}-${suffix}.png`), fullPage: true });
  }
  await page.setViewportSize(original);
}

/** Every command block at this viewport: no text hidden (no sideways overflow of the block or
 *  the page) and no line running under the copy button. Returns the problems. */
async function clippedCommands(page) {
  return page.evaluate(() => {
    const out = [];
    if (document.documentElement.scrollWidth > window.innerWidth + 1) {
      out.push(`page wider than the viewport: ${document.documentElement.scrollWidth} > ${window.innerWidth}`);
    }
    for (const pre of document.querySelectorAll("pre.cmd")) {
      const code = pre.querySelector("code");
      if (pre.scrollWidth > pre.clientWidth + 1) out.push(`overflows: ${code.textContent.slice(0, 60)}`);
      const button = pre.querySelector("button.copy");
      if (!button) continue;
      const b = button.getBoundingClientRect();
      const range = document.createRange();
      range.selectNodeContents(code);
      for (const r of range.getClientRects()) {
        if (r.width === 0) continue;
        if (r.top < b.bottom && r.bottom > b.top && r.right > b.left + 1) {
          out.push(`under the copy button: ${code.textContent.slice(0, 60)}`);
          break;
        }
      }
    }
    return out;
  });
}

/** The page at desktop and phone size: no clipped command at either. */
async function checkCommands(page) {
  const original = page.viewportSize();
  for (const size of [DESKTOP, PHONE]) {
    await page.setViewportSize(size);
    const problems = await clippedCommands(page);
    assert.deepEqual(problems, [], `${page.url()} at ${size.width}px: ${problems.join("; ")}`);
  }
  await page.setViewportSize(original);
}

/** Basic validity of a rendered page: lang, one h1, labelled controls, unique ids. */
async function checkPage(page) {
  const problems = await page.evaluate(() => {
    const out = [];
    if (!document.documentElement.getAttribute("lang")) out.push("no lang on <html>");
    const h1 = document.querySelectorAll("h1").length;
    if (h1 !== 1) out.push(`${h1} <h1> elements`);
    if (!document.querySelector('meta[name="viewport"]')) out.push("no viewport meta");
    if (!document.title) out.push("no <title>");
    const ids = new Map();
    for (const el of document.querySelectorAll("[id]")) ids.set(el.id, (ids.get(el.id) || 0) + 1);
    for (const [id, n] of ids) if (n > 1) out.push(`id "${id}" used ${n} times`);
    for (const el of document.querySelectorAll("input, select, textarea")) {
      if (el.type === "hidden" || el.type === "submit") continue;
      const labelled = (el.id && document.querySelector(`label[for="${CSS.escape(el.id)}"]`)) ||
        el.closest("label") || el.getAttribute("aria-label") || el.getAttribute("aria-labelledby");
      if (!labelled) out.push(`unlabelled ${el.tagName.toLowerCase()} name=${el.name}`);
    }
    for (const a of document.querySelectorAll("a")) {
      if (!a.textContent.trim() && !a.getAttribute("aria-label")) out.push(`empty link ${a.href}`);
    }
    if (!document.querySelector("a.skip-link[href='#main']") || !document.getElementById("main")) out.push("no skip link to #main");
    return out;
  });
  assert.deepEqual(problems, [], `${page.url()}: ${problems.join("; ")}`);
}

async function newPage(options = {}) {
  const context = await browser.newContext({ viewport: DESKTOP, ...options });
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => {
    if (m.type() === "error" && !/status of 40[13]/.test(m.text())) errors.push(m.text());
  });
  page.errors = errors;
  return page;
}

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "wf-ui-"));
  fs.mkdirSync(path.join(tmp, "data"));
  const r = run(PYTHON3, [path.join(HERE, "seed.py"), tmp]);
  assert.equal(r.status, 0, r.stderr);
  seed = JSON.parse(r.stdout);
  for (const scope of ["admin", "upload", "read"]) tokens[scope] = token(scope);
  server = await startServer(seed.config);
  base = server.url;
  for (const file of [...seed.wheels, seed.torch]) {
    const res = await fetch(`${base}/upload/${path.basename(file)}`, {
      method: "PUT",
      headers: { Authorization: basic(tokens.upload) },
      body: fs.readFileSync(file),
    });
    assert.ok(res.status === 201 || res.status === 200, `upload ${file}: ${res.status} ${await res.text()}`);
  }
  // Hostile metadata: a yank reason is free text that reaches the pages.
  const yank = await fetch(`${base}/admin/yank`, {
    method: "POST",
    headers: { Authorization: `Bearer ${tokens.admin}`, "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ project: "flash-attn", version: "2.8.2+cu128torch2.8", reason: HOSTILE }).toString(),
  });
  assert.equal(yank.status, 200, await yank.text());
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking"],
  });
});

after(async () => {
  if (browser) await browser.close();
  if (server) {
    server.proc.kill("SIGTERM");
    await new Promise((resolve) => {
      const timer = setTimeout(() => { server.proc.kill("SIGKILL"); resolve(); }, 15_000);
      server.proc.on("exit", () => { clearTimeout(timer); resolve(); });
    });
  }
  // The cancelled fake build left no process behind (the runner kills whole process groups).
  if (seed && fs.existsSync(seed.pids)) {
    for (const pid of fs.readFileSync(seed.pids, "utf8").split(/\s+/).filter(Boolean)) {
      try { process.kill(Number(pid), "SIGKILL"); } catch { /* already gone */ }
    }
  }
  // Sanitizer builds report memory errors and undefined behaviour in the server's log.
  const log = tmp ? fs.readFileSync(path.join(tmp, "server.log"), "utf8") : "";
  if (/ERROR: AddressSanitizer|runtime error: |ERROR: LeakSanitizer/.test(log)) {
    failed = true;
    console.log(log.split("\n").slice(-80).join("\n"));
  }
  if (tmp && !failed) fs.rmSync(tmp, { recursive: true, force: true });
  else if (tmp) console.log(`wheelforge UI test directory kept: ${tmp}`);
  assert.ok(!/ERROR: AddressSanitizer|runtime error: |ERROR: LeakSanitizer/.test(log), "sanitizer report in the server log");
});

function track(fn) {
  return async (t) => {
    try {
      await fn(t);
    } catch (e) {
      failed = true;
      const logPath = tmp && path.join(tmp, "server.log");
      if (logPath && fs.existsSync(logPath)) {
        console.log("--- server log tail ---\n" + fs.readFileSync(logPath, "utf8").split("\n").slice(-40).join("\n"));
      }
      throw e;
    }
  };
}

test("home page shows counts and the search finds a project", track(async () => {
  const page = await newPage();
  await page.goto(base + "/");
  await checkPage(page);
  assert.match(await page.textContent("main"), /4\s+projects/);
  assert.match(await page.textContent("main"), new RegExp(`pip install --extra-index-url ${base}/simple/ --only-binary PROJECT PROJECT==VERSION`));
  assert.match(await page.textContent("main"), /cuda=torch\.version\.cuda/);
  assert.match(await page.textContent("main"), /poetry source add --secondary wheelforge/);
  await shoot(page, "home");
  await page.fill("#q", "flash");
  await Promise.all([page.waitForNavigation(), page.click("form.search button[type=submit]")]);
  assert.equal(new URL(page.url()).searchParams.get("q"), "flash");
  await checkPage(page);
  const results = await page.$$eval(".project-list a", (as) => as.map((a) => a.getAttribute("href")));
  assert.deepEqual(results, ["/project/flash-attn/"]);
  await shoot(page, "search-results");
  await page.click(".project-list a");
  assert.equal(new URL(page.url()).pathname, "/project/flash-attn/");
  assert.deepEqual(page.errors, []);
  await page.context().close();
}));

test("project page shows the coverage matrix of the seeded corpus, hostile metadata escaped", track(async () => {
  const page = await newPage();
  const res = await page.goto(base + "/project/Flash_Attn");
  assert.equal(res.status(), 200);
  assert.equal(new URL(page.url()).pathname, "/project/flash-attn/");
  await checkPage(page);
  const headers = await page.$$eval("#matrix thead th", (ths) => ths.map((t) => t.textContent.trim()));
  assert.deepEqual(headers, ["PyTorch", "cu126", "cu128", "cu130"]);
  const cells = await page.$$eval("#matrix tbody tr", (trs) =>
    trs.map((tr) => [tr.querySelector("th").textContent.trim(), ...[...tr.querySelectorAll("td")].map((td) =>
      td.classList.contains("missing") ? "-" : td.textContent.trim().split(/\s+/).join(" "))]));
  assert.deepEqual(cells, [
    ["torch 2.7", "-", "3.11", "-"],
    ["torch 2.8", "3.12", "3.11 3.12", "-"],
    ["torch 2.9", "-", "-", "3.12 3.13"],
  ]);
  // Versions newest first; the yanked one is marked and its (hostile) reason shown as text.
  const versions = await page.$$eval(".version-block h3", (hs) => hs.map((h) => h.textContent.trim()));
  assert.deepEqual(versions, ["2.8.3", "2.8.2 yanked"]);
  assert.ok((await page.textContent("#v-2\\.8\\.2")).includes(HOSTILE), "the yank reason is shown verbatim");
  assert.equal(await page.evaluate(() => window.__wf_xss), undefined, "hostile metadata ran as code");
  // Every file row has size, sha256, upload time and Requires-Python.
  const row = await page.$eval(".version-block tbody tr", (tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent.trim()));
  assert.match(row[0], /^flash_attn-2\.8\.3\+/);
  assert.equal(row[3], ">=3.9");
  assert.match(row[4], /^\d+(\.\d)? (B|KiB)$/);
  assert.match(row[5], /^\d{4}-\d\d-\d\d \d\d:\d\d UTC$/);
  assert.match(row[6], /^[0-9a-f]{64}$/);
  await shoot(page, "project");
  assert.deepEqual(page.errors, []);
  const missing = await page.goto(base + "/project/no-such-project/");
  assert.equal(missing.status(), 404);
  await checkPage(page);
  assert.match(await page.textContent("h1"), /Not found/);
  await page.context().close();
}));

test("a project page shows its description and facts, and nothing in it runs", track(async () => {
  const page = await newPage();
  const res = await page.goto(base + "/project/wf-described/");
  assert.equal(res.status(), 200);
  await checkPage(page);
  assert.equal(await page.textContent("#summary"), "Fused attention kernels, described in Markdown");
  assert.equal(await page.textContent("#license"), "Apache-2.0");
  assert.match(await page.textContent("#requires-python"), />=3\.9/);
  assert.match(await page.textContent("#requires-dist"), /einops-lite>=0\.7/);
  assert.equal(await page.getAttribute("#project-urls a", "href"), "https://example.com/wf-described");
  const headings = await page.$$eval("#description h3, #description h4", (hs) => hs.map((h) => `${h.tagName} ${h.textContent}`));
  assert.deepEqual(headings, ["H3 wf-described", "H4 Install"]);
  assert.match(await page.textContent("#description"), /pip install --extra-index-url https:\/\/a-rather-long-host-name/);
  // Nothing executable came through: no script, no handler, no javascript: link.
  assert.equal(await page.evaluate(() => window.__wf_xss), undefined, "the description ran code");
  const bad = await page.evaluate(() => [...document.querySelectorAll("#description *, #summary, #project-facts *")]
    .filter((el) => el.tagName === "SCRIPT" || [...el.attributes].some((a) => a.name.startsWith("on") || /^\s*javascript:/i.test(a.value)))
    .map((el) => el.outerHTML));
  assert.deepEqual(bad, []);
  // Long lines in the description wrap or scroll inside their block; the page itself does not.
  for (const size of [DESKTOP, PHONE]) {
    await page.setViewportSize(size);
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1), `page overflows at ${size.width}px`);
  }
  await page.setViewportSize(DESKTOP);
  await checkCommands(page);
  await shoot(page, "project-description");
  assert.deepEqual(page.errors, []);
  await page.context().close();
}));

test("commands wrap instead of hiding under the copy button, and the matrix fits or scrolls with its header fixed", track(async () => {
  const page = await newPage();
  for (const target of ["/", "/project/flash-attn/", "/project/flash-attn/?version=2.8.3&torch=2.8&backend=cu128&python=3.12", "/project/einops-lite/"]) {
    await page.goto(base + target);
    await checkCommands(page);
  }
  await page.goto(base + "/project/flash-attn/");
  for (const size of [DESKTOP, PHONE]) {
    await page.setViewportSize(size);
    const state = await page.evaluate(() => {
      const wrap = document.querySelector(".matrix-wrap");
      const fits = wrap.scrollWidth <= wrap.clientWidth + 1 && wrap.scrollHeight <= wrap.clientHeight + 1;
      wrap.scrollLeft = wrap.scrollWidth;
      wrap.scrollTop = wrap.scrollHeight;
      const w = wrap.getBoundingClientRect();
      const head = document.querySelector("#matrix thead th:nth-child(2)").getBoundingClientRect();
      const rowHead = document.querySelector("#matrix tbody tr:last-child th").getBoundingClientRect();
      return { fits, headTop: head.top - w.top, rowHeadLeft: rowHead.left - w.left, pageFits: document.documentElement.scrollWidth <= window.innerWidth + 1 };
    });
    assert.ok(state.pageFits, `the page overflows at ${size.width}px`);
    // Scrolled to the far corner, the header row and the torch column stay in view.
    assert.ok(state.fits || (Math.abs(state.headTop) <= 2 && Math.abs(state.rowHeadLeft) <= 2), JSON.stringify(state));
    await page.evaluate(() => { const w = document.querySelector(".matrix-wrap"); w.scrollLeft = 0; w.scrollTop = 0; });
  }
  await page.setViewportSize(PHONE);
  await page.evaluate(() => document.querySelector("#coverage").scrollIntoView());
  await page.screenshot({ path: path.join(SHOTS, "matrix-phone.png") });
  await page.context().close();
}));

test("the project list pages, sorts and searches, linked from the navigation", track(async () => {
  const page = await newPage();
  await page.goto(base + "/");
  await Promise.all([page.waitForNavigation(), page.click("nav[aria-label=Main] a[href='/projects/']")]);
  assert.equal(new URL(page.url()).pathname, "/projects/");
  await checkPage(page);
  const names = await page.$$eval("#project-list a", (as) => as.map((a) => a.textContent));
  assert.deepEqual(names, ["einops-lite", "flash-attn", "torch", "wf-described"]);
  await shoot(page, "projects");
  await Promise.all([page.waitForNavigation(), page.click("#sort-links a")]);
  assert.equal(new URL(page.url()).searchParams.get("sort"), "updated");
  const newest = await page.$$eval("#project-list a", (as) => as.map((a) => a.textContent));
  assert.equal(newest.length, 4);
  assert.notDeepEqual(newest, names);
  await page.fill("#list-q", "Flash_");
  await Promise.all([page.waitForNavigation(), page.click("form.search button[type=submit]")]);
  await checkPage(page);
  assert.deepEqual(await page.$$eval("#project-list a", (as) => as.map((a) => a.textContent)), ["flash-attn"]);
  // An unknown name's page offers the close ones.
  assert.deepEqual(page.errors, []);
  const missing = await page.goto(base + "/project/flash-atn/");
  assert.equal(missing.status(), 404);
  page.errors.length = 0;  // the browser reports the 404 itself
  await checkPage(page);
  assert.match(await page.textContent("#suggestions"), /Did you mean flash-attn\?/);
  await shoot(page, "not-found-suggestions");
  await Promise.all([page.waitForNavigation(), page.click("#suggestions a")]);
  assert.equal(new URL(page.url()).pathname, "/project/flash-attn/");
  assert.deepEqual(page.errors, []);
  await page.context().close();
}));

test("the navigation shows an admin signed in by HTTP Basic", track(async () => {
  // As a browser sends it once it has the credentials for this server (a private index asks).
  const page = await newPage({ extraHTTPHeaders: { Authorization: basic(tokens.admin) } });
  for (const target of ["/", "/projects/", "/project/flash-attn/", "/builds/"]) {
    const res = await page.goto(base + target);
    assert.equal(res.status(), 200, target);
    assert.equal(await page.textContent("#signed-in"), "Signed in: admin token (HTTP auth)", target);
    assert.equal(await page.$("nav a[href='/login']"), null, target);
  }
  await shoot(page, "builds-basic-admin");
  await page.context().close();
}));

test("an empty index's home page explains how to create a token and upload the first wheel", track(async () => {
  const dataDir = path.join(tmp, "empty-data");
  fs.mkdirSync(dataDir);
  const empty = await startServer(seed.config, dataDir);
  try {
    const page = await newPage();
    await page.goto(empty.url + "/");
    await checkPage(page);
    const steps = await page.textContent("#get-started");
    assert.match(steps, /wheelforge token create --data-dir \S+ --scope upload/);
    assert.match(steps, new RegExp(`twine upload --repository-url ${empty.url}/legacy/`));
    await checkCommands(page);
    await shoot(page, "home-empty");
    assert.deepEqual(page.errors, []);
    await page.context().close();
  } finally {
    empty.proc.kill("SIGTERM");
    await new Promise((resolve) => empty.proc.on("exit", resolve));
  }
}));

/** Runs the picker's command with a real pip into a fresh target directory. */
function runPipCommand(command) {
  const m = command.match(/^python(\d+\.\d+) -m pip install (.+)$/);
  assert.ok(m, `unexpected command: ${command}`);
  const version = fs.readdirSync(PYENV).find((v) => v.startsWith(m[1] + "."));
  assert.ok(version, `no Python ${m[1]} under ${PYENV}`);
  const target = fs.mkdtempSync(path.join(tmp, "pip-target-"));
  // The command as shown, plus where to install and no waiting on an unreachable PyPI.
  const args = ["-m", "pip", "install", ...m[2].split(" "), "--target", target, "--no-cache-dir",
    "--disable-pip-version-check", "--no-deps", "--retries", "0", "--timeout", "5"];
  const r = run(path.join(PYENV, version, "bin", "python"), args, { cwd: tmp });
  assert.equal(r.status, 0, `pip ${args.join(" ")}\n${r.stdout}\n${r.stderr}`);
  return target;
}

test("before a choice the project page shows a default command that pip installs, and how to find your torch", track(async () => {
  const page = await newPage();
  await page.goto(base + "/project/flash-attn/");
  // The newest torch series whose PyPI CUDA (2.9: 12.8) has no build is skipped; 2.8's has one.
  assert.match(await page.textContent("#picker-result"), /flash-attn 2\.8\.3 built for PyTorch 2\.8 from PyPI \(CUDA 12\.8\)/);
  const command = (await page.textContent("#default-command")).trim();
  assert.equal(command, `pip install --extra-index-url ${base}/cu128/torch2.8/simple/ --only-binary flash-attn flash-attn==2.8.3`);
  assert.equal((await page.textContent("#torch-check")).trim(), 'python -c "import torch; print(torch.__version__, torch.version.cuda)"');
  assert.match(await page.textContent("#resolve-command"), new RegExp(`${base}/api/resolve\\?project=flash-attn&.*cuda=torch\\.version\\.cuda`));
  // The CUDA menu speaks torch.version.cuda.
  const labels = await page.$$eval("#pick-backend option", (os) => os.map((o) => o.textContent.trim()));
  assert.deepEqual(labels, ["Choose…", "12.6 (cu126)", "12.8 (cu128)", "13.0 (cu130)"]);
  await checkPage(page);
  await shoot(page, "project-default");
  const target = runPipCommand("python3.12 -m " + command);
  assert.ok(fs.existsSync(path.join(target, "flash_attn-2.8.3+cu128torch2.8.dist-info")), fs.readdirSync(target).join(", "));
  // Once a choice is made the default gives way to the chosen command.
  await page.selectOption("#pick-torch", "2.9");
  await page.selectOption("#pick-backend", "cu130");
  await page.selectOption("#pick-python", "3.13");
  await page.waitForSelector("#pip-command:has-text('cu130/torch2.9')");
  assert.equal(await page.$("#default-command"), null);
  assert.deepEqual(page.errors, []);
  await page.context().close();
}));

test("the picker's command installs the expected file with pip", track(async () => {
  const page = await newPage();
  await page.goto(base + "/project/flash-attn/");
  await page.selectOption("#pick-torch", "2.8");
  await page.selectOption("#pick-backend", "cu128");
  await page.selectOption("#pick-python", "3.12");
  // With JavaScript the result updates in place.
  await page.waitForSelector("#pip-command:has-text('cu128/torch2.8')");
  const command = (await page.textContent("#pip-command")).trim();
  assert.equal(command, `python3.12 -m pip install --extra-index-url ${base}/cu128/torch2.8/simple/ --only-binary flash-attn flash-attn==2.8.3`);
  assert.match(page.url(), /torch=2\.8/);
  await checkPage(page);
  await shoot(page, "picker-result");
  const target = runPipCommand(command);
  assert.ok(fs.existsSync(path.join(target, "flash_attn-2.8.3+cu128torch2.8.dist-info")), fs.readdirSync(target).join(", "));
  assert.match(fs.readFileSync(path.join(target, "flash_attn", "__init__.py"), "utf8"), /2\.8\.3\+cu128torch2\.8/);
  assert.deepEqual(page.errors, []);
  await page.context().close();

  // Without JavaScript the form is a plain GET that re-renders the page.
  const plain = await newPage({ javaScriptEnabled: false });
  await plain.goto(base + "/project/flash-attn/");
  await plain.selectOption("#pick-torch", "2.9");
  await plain.selectOption("#pick-backend", "cu130");
  await plain.selectOption("#pick-python", "3.13");
  await Promise.all([plain.waitForNavigation(), plain.click("#picker-form button[type=submit]")]);
  const noJs = (await plain.textContent("#pip-command")).trim();
  assert.equal(noJs, `python3.13 -m pip install --extra-index-url ${base}/cu130/torch2.9/simple/ --only-binary flash-attn flash-attn==2.8.3`);
  // A missing cell says so.
  await plain.selectOption("#pick-torch", "2.7");
  await plain.selectOption("#pick-backend", "cu130");
  await Promise.all([plain.waitForNavigation(), plain.click("#picker-form button[type=submit]")]);
  assert.match(await plain.textContent("#no-build"), /No build of flash-attn 2\.8\.3 for torch 2\.7, CUDA 13\.0, Python 3\.13/);
  await plain.context().close();
}));

async function waitForState(page, states, timeout) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const state = await page.getAttribute("#job-state", "data-state").catch(() => null);
    if (states.includes(state)) return state;
    if (Date.now() > deadline) throw new Error(`job state ${state}, expected ${states}; log:\n${await page.textContent("#log").catch(() => "")}`);
    await page.waitForTimeout(500);
  }
}

test("a wheel's contents link opens the inspector: members, and its extension module's findings and exports", track(async () => {
  const page = await newPage();
  await page.goto(base + "/project/flash-attn/");
  const name = "flash_attn-2.8.2+cu128torch2.8-cp312-cp312-linux_x86_64.whl";
  await page.click(`a.inspect-link[aria-label="Contents of ${name}"]`);
  assert.match(new URL(page.url()).pathname, /^\/inspect\/[0-9a-f]{64}$/);
  assert.equal((await page.textContent("h1")).trim(), name);
  const members = await page.$$eval("table.members tbody td:first-child", (tds) => tds.map((t) => t.textContent.trim()));
  assert.ok(members.includes("flash_attn/_C.so"), members.join(", "));
  assert.ok(members.includes("flash_attn-2.8.2+cu128torch2.8.dist-info/METADATA"), members.join(", "));
  const binary = await page.textContent("section.binary");
  assert.match(binary, /flash_attn\/_C\.so/);
  assert.match(binary, /extension module/);
  assert.match(binary, /stable-abi \(aoti_torch_get_device_type\)/);
  const exported = await page.$$eval("table.symbols tbody td:first-child", (tds) => tds.map((t) => t.textContent.trim()));
  assert.ok(exported.includes("PyInit__C") && exported.includes("device_of"), exported.join(", "));
  // The JSON link answers the same facts.
  const json = await (await fetch(base + (await page.getAttribute("a[href^='/api/files/']", "href")))).json();
  assert.equal(json.binaries[0].torch_binding, "stable-abi");
  await checkPage(page);
  await shoot(page, "inspect");
  assert.deepEqual(page.errors, []);
  await page.context().close();
}));

test("an admin logs in, starts a build and watches its log reach success; cancel and retry", track(async () => {
  const page = await newPage();
  await page.goto(base + "/builds/");
  assert.equal(new URL(page.url()).pathname, "/login");
  await checkPage(page);
  await shoot(page, "login");
  // A wrong token is refused with a message.
  await page.fill("#token", "wf_not-a-token");
  await Promise.all([page.waitForNavigation(), page.click("main form button[type=submit]")]);
  assert.match(await page.textContent("#login-error"), /Unknown or revoked token/);
  await page.fill("#token", tokens.admin);
  await Promise.all([page.waitForNavigation(), page.click("main form button[type=submit]")]);
  assert.equal(new URL(page.url()).pathname, "/builds/");
  const cookies = await page.context().cookies();
  const session = cookies.find((c) => c.name === "wf_session");
  assert.ok(session && session.httpOnly && session.sameSite === "Strict", JSON.stringify(cookies));
  await checkPage(page);

  await page.selectOption("#recipe", "demo");
  await page.fill("#version", "1.0.0");
  await page.fill("#python", "3.11");
  await Promise.all([page.waitForNavigation(), page.click("#trigger-form button[type=submit]")]);
  assert.match(await page.textContent(".notice"), /Build \d+ was started/);
  const jobLink = page.locator(".build").first().locator("a[href^='/jobs/']").first();
  await Promise.all([page.waitForNavigation(), jobLink.click()]);
  assert.match(new URL(page.url()).pathname, /^\/jobs\/\d+$/);
  await checkPage(page);
  // job.js follows the log and reloads the page once the job has ended.
  const state = await waitForState(page, ["succeeded", "failed", "cancelled"], BUILD_TIMEOUT);
  assert.equal(state, "succeeded", await page.textContent("#log"));
  assert.match(await page.textContent("#log"), /fake_wheel: wrote wf_ui_demo-1\.0\.0\+cu130torch2\.8-py3-none-any\.whl/);
  await checkPage(page);
  await shoot(page, "job");
  await page.goto(base + "/builds/");
  const row = await page.locator(".build").first().locator("tbody tr").first().textContent();
  assert.match(row, /succeeded/);
  assert.match(row, /\d+(\.\d)? s/);  // duration
  await checkPage(page);
  await shoot(page, "builds");

  // A build that hangs: cancel it, retry it, cancel it again.
  await page.selectOption("#recipe", "slow");
  await page.fill("#version", "1.0.0");
  await Promise.all([page.waitForNavigation(), page.click("#trigger-form button[type=submit]")]);
  await Promise.all([page.waitForNavigation(), page.locator(".build").first().locator("a[href^='/jobs/']").first().click()]);
  await waitForState(page, ["building"], 60_000);
  await page.waitForFunction(() => document.getElementById("log").textContent.includes("fake build: starting"), null, { timeout: 30_000 });
  await Promise.all([page.waitForNavigation(), page.click("button:has-text('Cancel job')")]);
  await waitForState(page, ["cancelled"], 30_000);
  await shoot(page, "job-cancelled");
  await Promise.all([page.waitForNavigation(), page.click("button:has-text('Retry job')")]);
  assert.notEqual(await waitForState(page, ["queued", "preparing", "building"], 30_000), "cancelled");
  await page.goto(page.url());
  await Promise.all([page.waitForNavigation(), page.click("button:has-text('Cancel job')")]);
  await waitForState(page, ["cancelled"], 30_000);

  // Logging out ends the session.
  await Promise.all([page.waitForNavigation(), page.click("header button:has-text('Log out')")]);
  await page.goto(base + "/builds/");
  assert.equal(new URL(page.url()).pathname, "/login");
  assert.deepEqual(page.errors, []);
  await page.context().close();
}));

test("an admin adds a trusted publisher, sees it listed and removes it", track(async () => {
  const page = await newPage();
  await page.goto(base + "/publishers/");
  assert.equal(new URL(page.url()).pathname, "/login");
  await page.fill("#token", tokens.admin);
  await Promise.all([page.waitForNavigation(), page.click("main form button[type=submit]")]);
  assert.equal(new URL(page.url()).pathname, "/publishers/");
  await checkPage(page);
  assert.ok(await page.$("nav a[href='/publishers/']"));
  // A claim the exchange ignores is refused, and the form comes back as it was.
  await page.fill("#project", "flash-attn");
  await page.selectOption("#issuer", "github");
  await page.fill("#claims", "aud=wheelforge");
  await Promise.all([page.waitForNavigation(), page.click("#publisher-form button[type=submit]")]);
  assert.match(await page.textContent(".error"), /The publisher was not added: .*aud/);
  assert.equal(await page.inputValue("#project"), "flash-attn");
  // The refusal's 400 is the answer asked for, not a broken resource.
  assert.deepEqual(page.errors, ["Failed to load resource: the server responded with a status of 400 (Bad Request)"]);
  page.errors.length = 0;
  await page.fill("#claims", "repository=org/flash-attention\nworkflow_ref=org/flash-attention/.github/workflows/release.yml@refs/tags/v2.8.3");
  await page.fill("#description", "release workflow");
  await Promise.all([page.waitForNavigation(), page.click("#publisher-form button[type=submit]")]);
  assert.match(await page.textContent(".notice"), /Publisher \d+ was added/);
  const row = await page.textContent("table.publishers tbody tr");
  assert.match(row, /flash-attn/);
  assert.match(row, /repository=org\/flash-attention/);
  assert.match(row, /release workflow/);
  await checkPage(page);
  await shoot(page, "publishers");
  await Promise.all([page.waitForNavigation(), page.click("table.publishers button[type=submit]")]);
  assert.match(await page.textContent(".notice"), /Publisher \d+ was removed/);
  assert.equal(await page.$("table.publishers"), null);
  assert.deepEqual(page.errors, []);
  await page.context().close();
}));

test("a read token cannot see the builds pages", track(async () => {
  const page = await newPage();
  await page.goto(base + "/login");
  await page.fill("#token", tokens.read);
  await Promise.all([page.waitForNavigation(), page.click("main form button[type=submit]")]);
  const res = await page.goto(base + "/builds/");
  assert.equal(res.status(), 403);
  assert.match(await page.textContent("main"), /needs a token of scope admin; yours has scope read/);
  await checkPage(page);
  await page.context().close();
}));

test("every link and asset reachable from / works, and every page is valid", track(async () => {
  const page = await newPage();
  const origin = new URL(base).origin;
  const seen = new Set();
  const queue = ["/"];
  const broken = [];
  let pages = 0;
  while (queue.length && seen.size < 600) {
    const target = queue.shift();
    if (seen.has(target)) continue;
    seen.add(target);
    const url = origin + target;
    // Files, assets, the APIs and provenance objects (JSON) are fetched, not checked as pages.
    const isPage = !["/files/", "/static/", "/api/", "/integrity/"].some((p) => target.startsWith(p));
    if (!isPage) {
      const res = await fetch(url, { method: target.startsWith("/files/") ? "HEAD" : "GET" });
      if (res.status < 200 || res.status >= 300) broken.push(`${target} -> ${res.status}`);
      continue;
    }
    const res = await page.goto(url);
    if (!res || res.status() < 200 || res.status() >= 300) {
      broken.push(`${target} -> ${res ? res.status() : "no answer"}`);
      continue;
    }
    pages += 1;
    const ui = !/\/simple\//.test(new URL(page.url()).pathname);
    if (ui) await checkPage(page);
    // Browsers ask for /favicon.ico on the simple pages, which name no icon; that 404 is no link.
    if (!ui) page.errors.length = 0;
    const refs = await page.evaluate(() => [
      ...[...document.querySelectorAll("a[href]")].map((a) => a.href),
      ...[...document.querySelectorAll("link[href]")].map((l) => l.href),
      ...[...document.querySelectorAll("script[src]")].map((s) => s.src),
      ...[...document.querySelectorAll("img[src]")].map((i) => i.src),
    ]);
    for (const ref of refs) {
      const u = new URL(ref);
      if (u.origin !== origin) continue;
      const key = u.pathname + u.search;
      if (!seen.has(key)) queue.push(key);
    }
  }
  assert.deepEqual(broken, []);
  assert.ok(pages >= 8, `only ${pages} pages crawled`);
  assert.deepEqual(page.errors, []);
  await page.context().close();
}));
