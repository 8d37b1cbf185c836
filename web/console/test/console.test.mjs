// The console in a real browser: Debian's Chromium, headless, driven by playwright-core, against
// the airlock serve that test/e2e's TestConsole started (docs/tests.md). Every case saves a
// screenshot in AIRLOCK_ARTIFACTS (printed); with AIRLOCK_DOC_SCREENSHOTS set, the main views are
// also written there (docs/img: the README's). At the end, every request the page made is checked
// against the API's route table (its OpenAPI document): no request bypasses the API.
//
// Environment: AIRLOCK_URL, AIRLOCK_KEY (tenant t1), AIRLOCK_KEY_T2 (tenant t2), AIRLOCK_ADMIN_KEY,
// AIRLOCK_ARTIFACTS; CHROMIUM (default /usr/bin/chromium).

import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { chromium } from "playwright-core";

const env = (k, d) => process.env[k] ?? d ?? assert.fail(`${k} is not set: this suite runs from test/e2e's TestConsole`);
const base = env("AIRLOCK_URL");
const key = env("AIRLOCK_KEY");
const keyT2 = env("AIRLOCK_KEY_T2");
const adminKey = env("AIRLOCK_ADMIN_KEY");
const artifacts = env("AIRLOCK_ARTIFACTS");
const docShots = process.env.AIRLOCK_DOC_SCREENSHOTS;
mkdirSync(artifacts, { recursive: true });

/** api calls the daemon directly, as a test's own client (not the page). */
async function api(method, path, body, k = key) {
  const r = await fetch(base + path, { method, headers: { Authorization: `Bearer ${k}`, "Content-Type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  const j = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(j)}`);
  return j.data;
}
const create = (spec) => api("POST", "/api/v1/sandboxes?wait=true", { resources: { memoryMb: 256, diskMb: 256 }, ...spec });
const exec = (id, command) => api("POST", `/api/v1/sandboxes/${id}/exec`, { command });

let browser;
let page;
let shots = 0;
/** Every request the page made: method, URL, headers (the browser's own, as sent). */
const requests = [];
/** What each response weighed on the wire (headers and the body as sent: gzipped), by request. */
const loads = new Map();

/** shot saves a screenshot of the page as an artifact (and for the docs when named so). */
async function shot(name, doc) {
  await page.evaluate(() => document.getElementById("toast")?.remove()); // the last action's word
  const file = join(artifacts, `${String(++shots).padStart(2, "0")}-${name}.png`);
  await page.screenshot({ path: file });
  console.log(`screenshot: ${file}`);
  if (doc && docShots) {
    mkdirSync(docShots, { recursive: true });
    await page.screenshot({ path: join(docShots, `${doc}.png`) });
  }
}

/** signIn opens the console with a key in the fragment, as `make run` prints it. */
async function signIn(k = key) {
  await page.goto("about:blank");
  await page.goto(`${base}/ui/#key=${k}`);
  await page.waitForSelector("#who");
}

describe("the console in Chromium", { timeout: 10 * 60_000 }, () => {
  const ids = {};
  before(async () => {
    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await ctx.grantPermissions(["clipboard-read", "clipboard-write"], { origin: base });
    page = await ctx.newPage();
    page.on("pageerror", (e) => console.log(`page error: ${e.message}`));
    page.on("console", (m) => m.type() === "error" && console.log(`console error: ${m.text()}`));
    page.on("request", async (r) => {
      requests.push({ method: r.method(), url: r.url(), headers: await r.allHeaders().catch(() => r.headers()) });
    });
    // WebSocket handshakes, with their headers, from the browser's own network log.
    const cdp = await ctx.newCDPSession(page);
    await cdp.send("Network.enable");
    cdp.on("Network.responseReceived", (e) => loads.set(e.requestId, { url: e.response.url, bytes: 0 }));
    cdp.on("Network.loadingFinished", (e) => {
      const l = loads.get(e.requestId);
      if (l) l.bytes = e.encodedDataLength;
    });
    const sockets = new Map();
    cdp.on("Network.webSocketCreated", (e) => sockets.set(e.requestId, e.url));
    cdp.on("Network.webSocketWillSendHandshakeRequest", (e) => requests.push({ method: "GET", url: sockets.get(e.requestId) ?? "", headers: lower(e.request.headers), websocket: true }));
    ids.a = (await create({ name: "alpha" })).id;
    ids.b = (await create({ name: "beta" })).id;
  });
  after(async () => {
    await browser?.close();
  });

  it("signs in through the URL fragment, which leaves the address bar at once", async () => {
    await signIn();
    assert.equal(new URL(page.url()).hash, "#/");
    assert.doesNotMatch(page.url(), /alk_/);
    assert.equal(await page.evaluate(() => sessionStorage.getItem("airlock.key")), key);
    assert.equal(await page.evaluate(() => document.cookie), "");
    assert.match(await page.textContent("#who"), /tenant t1/);
    // The first load (an empty cache): the page and its assets, as the wire carried them.
    const ui = [...loads.values()].filter((l) => new URL(l.url).pathname.startsWith("/ui/"));
    const total = ui.reduce((n, l) => n + l.bytes, 0);
    const report = `first load: ${total} B over the wire (${ui.map((l) => `${new URL(l.url).pathname} ${l.bytes} B`).join(", ")}); budget ${300 * 1024} B`;
    console.log(report);
    writeFileSync(join(artifacts, "first-load.txt"), report + "\n");
    assert.ok(ui.length >= 3 && total < 300 * 1024, report);
    await shot("signed-in");
  });

  it("lists the two sandboxes the API made, and a third as it appears", async () => {
    await page.waitForSelector(`tr[data-id="${ids.a}"]`);
    await page.waitForSelector(`tr[data-id="${ids.b}"]`);
    assert.equal(await page.locator("#sandbox-rows tr[data-id]").count(), 2);
    await shot("list-two");
    ids.c = (await create({ name: "gamma", metadata: { team: "console" } })).id;
    await page.waitForSelector(`tr[data-id="${ids.c}"]`, { timeout: 15_000 });
    assert.equal(await page.locator("#sandbox-rows tr[data-id]").count(), 3);
    // The small charts draw from the metrics.
    await page.waitForFunction((id) => (document.querySelector(`tr[data-id="${id}"] .spark-mem polyline`)?.getAttribute("points") ?? "") !== "", ids.c, { timeout: 15_000 });
    // A filter on metadata keeps only the third.
    await page.fill("#f-meta", "team=console");
    await page.dispatchEvent("#f-meta", "change");
    await page.waitForFunction(() => document.querySelectorAll("#sandbox-rows tr[data-id]").length === 1);
    await shot("list-filtered");
    await page.fill("#f-meta", "");
    await page.dispatchEvent("#f-meta", "change");
    await page.waitForFunction(() => document.querySelectorAll("#sandbox-rows tr[data-id]").length === 3);
    // Some work, so that the charts have something to show.
    const busy = [exec(ids.a, "timeout 4 sh -c 'while :; do :; done'; true"), exec(ids.c, "python3 -c 'import time; x = bytearray(48 << 20); time.sleep(4)'")];
    await page.waitForFunction((id) => Number.parseFloat(document.querySelector(`tr[data-id="${id}"] .spark-value`)?.textContent ?? "0") >= 20, ids.a, { timeout: 15_000 });
    await new Promise((r) => setTimeout(r, 2500));
    await page.locator("#f-meta").blur();
    await shot("list", "sandboxes");
    await Promise.all(busy);
  });

  it("creates a sandbox with the API's validation messages", async () => {
    await page.click("#new-sandbox");
    await page.fill('input[name="resources.memoryMb"]', "999999");
    await page.click("#create-submit");
    await page.waitForSelector("#create-error:not([hidden])");
    const msg = await page.textContent("#create-error");
    assert.match(msg, /resources\.memoryMb/);
    assert.match(msg, /400 invalid_argument/);
    assert.equal(await page.getAttribute('input[name="resources.memoryMb"]', "aria-invalid"), "true");
    await shot("create-invalid");
    await page.fill('input[name="resources.memoryMb"]', "256");
    await page.fill('input[name="name"]', "made-in-the-console");
    await page.click("#create-submit");
    await page.waitForSelector("#create-box[hidden]", { state: "attached" });
    await page.waitForFunction(() => [...document.querySelectorAll("#sandbox-rows a.sbx-link")].some((a) => a.textContent === "made-in-the-console"), null, { timeout: 15_000 });
  });

  it("pauses and resumes a sandbox from the list", async () => {
    await page.click(`tr[data-id="${ids.b}"] button[data-action="pause"]`);
    await page.waitForSelector(`tr[data-id="${ids.b}"][data-status="paused"]`, { timeout: 15_000 });
    await page.click(`tr[data-id="${ids.b}"] button[data-action="resume"]`);
    await page.waitForSelector(`tr[data-id="${ids.b}"][data-status="running"]`, { timeout: 15_000 });
  });

  it("opens a sandbox: its charts draw and update", async () => {
    await page.click(`tr[data-id="${ids.a}"] a.sbx-link`);
    await page.waitForSelector("#chart-memory");
    const drawn = (sel) => page.waitForFunction((s) => (document.querySelector(`${s} polyline`)?.getAttribute("points") ?? "") !== "", sel, { timeout: 15_000 });
    for (const c of ["#chart-cpu", "#chart-memory", "#chart-disk", "#chart-network", "#chart-pids"]) await drawn(c);
    const before = await page.getAttribute("#chart-memory", "data-samples");
    const points = await page.getAttribute("#chart-cpu polyline", "points");
    await exec(ids.a, "(timeout 4 sh -c 'while :; do :; done') & python3 -c 'import time; x = bytearray(64 << 20); time.sleep(4)'; wait; true");
    await page.waitForFunction((n) => Number(document.querySelector("#chart-memory")?.dataset.samples) > Number(n), before, { timeout: 15_000 });
    assert.notEqual(await page.getAttribute("#chart-cpu polyline", "points"), points, "the CPU chart did not change");
    await shot("resources", "resources");
  });

  it("runs echo hi in a real terminal and shows hi", async () => {
    await page.click('a[data-tab="terminal"]');
    await page.waitForFunction(() => /^connected/.test(document.querySelector("#term-state")?.textContent ?? ""), null, { timeout: 20_000 });
    await page.click("#terminal");
    await page.keyboard.type("echo hi\n");
    await page.waitForFunction(() => [...document.querySelectorAll("#terminal .xterm-rows > div")].some((r) => r.textContent?.trim() === "hi"), null, { timeout: 15_000 });
    // Resize: the terminal follows its box, and the shell sees the new size.
    const was = await page.textContent("#term-state");
    await page.setViewportSize({ width: 1000, height: 700 });
    await page.waitForFunction((w) => document.querySelector("#term-state")?.textContent !== w, was, { timeout: 10_000 });
    await page.keyboard.type("stty size\n");
    await page.waitForFunction(() => [...document.querySelectorAll("#terminal .xterm-rows > div")].some((r) => /^\d+ \d+$/.test(r.textContent?.trim() ?? "")), null, { timeout: 15_000 });
    const size = await page.evaluate(() => [...document.querySelectorAll("#terminal .xterm-rows > div")].map((r) => r.textContent?.trim() ?? "").find((t) => /^\d+ \d+$/.test(t)));
    const state = await page.textContent("#term-state");
    const [cols, rows] = /\((\d+)×(\d+)\)/.exec(state).slice(1);
    assert.equal(size, `${rows} ${cols}`, `stty size in the sandbox is the terminal's (${state})`);
    // Copy: a selection goes to the clipboard with Ctrl+Shift+C; paste sends it back as input.
    await page.evaluate(() => navigator.clipboard.writeText("echo pasted\n"));
    await page.click('button:text("Paste")');
    await page.waitForFunction(() => [...document.querySelectorAll("#terminal .xterm-rows > div")].some((r) => r.textContent?.trim() === "pasted"), null, { timeout: 15_000 });
    await page.setViewportSize({ width: 1280, height: 800 });
    await shot("terminal", "terminal");
  });

  it("follows the sandbox's log", async () => {
    await page.click('a[data-tab="logs"]');
    await page.waitForSelector("#log-state");
    await exec(ids.a, "echo from-the-log");
    await page.waitForFunction(() => (document.querySelector("#log")?.textContent ?? "").includes("from-the-log"), null, { timeout: 15_000 });
    assert.match(await page.textContent("#log"), /exec\.exited/);
    await shot("log");
  });

  it("uploads a file and lists it, with each exec's changes marked", async () => {
    await exec(ids.a, "mkdir -p /workspace && echo made > /workspace/by-exec.txt");
    await page.click('a[data-tab="files"]');
    await page.waitForSelector("#files-rows");
    await page.setInputFiles("#files-upload", { name: "upload.txt", mimeType: "text/plain", buffer: Buffer.from("from the browser\n") });
    await page.waitForSelector('tr[data-path="/workspace/upload.txt"]', { timeout: 15_000 });
    const got = await api("GET", `/api/v1/sandboxes/${ids.a}/files/stat?path=/workspace/upload.txt`);
    assert.equal(got.size, 17);
    await page.waitForSelector('tr[data-path="/workspace/by-exec.txt"] .b-created');
    assert.ok(await page.locator('#changes .change code:text("echo made > /workspace/by-exec.txt")').count() >= 1 ||
      (await page.textContent("#changes")).includes("by-exec.txt"));
    await shot("files");
  });

  it("shows a denied host in the network log, and changes the policy live", async () => {
    const n = await create({ name: "netted", network: { egressPolicy: "restricted", allowedDomains: ["allowed.example"] } });
    ids.net = n.id;
    await page.goto(`${base}/ui/#/sandboxes/${n.id}/network`);
    await page.waitForSelector("#net-state");
    await exec(n.id, "curl -s -m 5 -o /dev/null -w '%{http_code}' http://denied.example/ || true");
    await page.waitForSelector('#net-rows tr[data-decision="deny"]', { timeout: 20_000 });
    assert.match(await page.textContent('#net-rows tr[data-decision="deny"]'), /denied\.example/);
    await page.fill("#policy-domains", "allowed.example, also.example");
    await page.click("#policy-save");
    await page.waitForSelector('#net-rows tr[data-kind="policy"]', { timeout: 15_000 });
    const sb = await api("GET", `/api/v1/sandboxes/${n.id}`);
    assert.deepEqual(sb.network.allowedDomains, ["allowed.example", "also.example"]);
    await shot("network");
  });

  it("takes a snapshot and restores it", async () => {
    await page.goto(`${base}/ui/#/sandboxes/${ids.a}/snapshots`);
    await page.fill("#snap-name", "before");
    await page.click("#snap-take");
    await page.waitForSelector("#snapshot-rows tr[data-snapshot]", { timeout: 30_000 });
    await exec(ids.a, "rm /workspace/upload.txt");
    await page.click('#snapshot-rows button[data-action="restore"]');
    for (let i = 0; i < 100; i++) {
      try {
        await api("GET", `/api/v1/sandboxes/${ids.a}/files/stat?path=/workspace/upload.txt`);
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 200));
      }
      if (i === 99) assert.fail("the restore did not bring the file back");
    }
    await shot("snapshots");
  });

  it("replays a terminated sandbox: its commands in order, the chain verified", async () => {
    const r = await create({ name: "replayed" });
    for (const w of ["one", "two", "three"]) await exec(r.id, `echo ${w}`);
    await api("POST", `/api/v1/sandboxes/${r.id}/terminate`);
    await page.goto(`${base}/ui/#/replay/${r.id}`);
    await page.waitForSelector("#timeline li");
    const cmds = await page.$$eval("#timeline li[data-type='exec.exited'] .cmd code", (els) => els.map((e) => e.textContent));
    assert.deepEqual(cmds, ["echo one", "echo two", "echo three"]);
    const outs = await page.$$eval("#timeline li[data-type='exec.exited'] pre.out", (els) => els.map((e) => e.textContent));
    assert.deepEqual(outs, ["one\n", "two\n", "three\n"]);
    await page.waitForSelector('#chain[data-intact="true"]', { timeout: 20_000 });
    // The scrubber: back to the start, nothing has run yet; to the end, all three have.
    await page.$eval("#scrubber", (s) => { s.value = "0"; s.dispatchEvent(new Event("input")); });
    assert.match(await page.textContent("#scrub-at"), /0 commands done/);
    const future = await page.locator("#timeline li.future[data-type='exec.exited']").count();
    assert.equal(future, 3);
    await page.$eval("#scrubber", (s) => { s.value = s.max; s.dispatchEvent(new Event("input")); });
    assert.match(await page.textContent("#scrub-at"), /3 commands done/);
    await shot("replay", "replay");
  });

  it("shows the daemon: levels, tenants and quotas, pools, images, webhooks (admin key)", async () => {
    await signIn(adminKey);
    await page.goto(`${base}/ui/#/admin`);
    await page.waitForSelector("#tenants-table");
    await page.waitForSelector("#levels table");
    await page.fill("#pool-name", "console-pool");
    await page.fill("#pool-size", "1");
    await page.fill("#pool-mem", "128");
    await page.click('#pools button[type="submit"]');
    await page.waitForSelector('#pools-table td:text("console-pool")', { timeout: 15_000 });
    await shot("daemon");
    await page.click('#pools-table button:text("delete")');
    await page.waitForSelector('#pools-table td:text("console-pool")', { state: "detached", timeout: 15_000 });
  });

  it("lists the tools the key may call, and calls run_code", async () => {
    await signIn();
    await page.goto(`${base}/ui/#/admin`);
    await page.waitForSelector('#tools-table td:text("run_code")', { timeout: 15_000 });
    await page.selectOption("#tool-name", "run_code");
    await page.fill("#tool-args", '{"language": "python", "code": "print(6*7)"}');
    await page.click('#tools button[type="submit"]');
    await page.waitForFunction(() => /^ok in \d+ ms\n[\s\S]*42/.test(document.querySelector("#tool-result")?.textContent ?? ""), null, { timeout: 60_000 });
    await page.fill("#tool-args", '{"code": 7}');
    await page.click('#tools button[type="submit"]');
    await page.waitForFunction(() => /run_code called failed: .*invalid_arguments/.test(document.querySelector("#toast")?.textContent ?? ""), null, { timeout: 15_000 });
    await page.locator("#tools-table").scrollIntoViewIfNeeded();
    await shot("tools");
  });

  it("with another tenant's key, sees none of t1's sandboxes", async () => {
    const own = await api("POST", "/api/v1/sandboxes?wait=true", { name: "t2-own", resources: { memoryMb: 128, diskMb: 64 } }, keyT2);
    await signIn(keyT2);
    assert.match(await page.textContent("#who"), /tenant t2/);
    await page.waitForSelector("#sandbox-count");
    await page.waitForSelector(`tr[data-id="${own.id}"]`);
    const shown = await page.$$eval("#sandbox-rows tr[data-id]", (rs) => rs.map((r) => r.dataset.id));
    for (const id of Object.values(ids)) assert.ok(!shown.includes(id), `t2 sees t1's ${id}`);
    // Nor by its address: another tenant's sandbox is the API's 404.
    await page.goto(`${base}/ui/#/sandboxes/${ids.a}`);
    await page.waitForSelector("main .error");
    assert.match(await page.textContent("main .error"), /404 not_found/);
    await shot("other-tenant");
  });

  it("says clearly that a bad key is not accepted", async () => {
    await page.goto("about:blank");
    await page.goto(`${base}/ui/#key=alk_notakey`);
    await page.waitForSelector("#signin-error:not([hidden])");
    assert.match(await page.textContent("#signin-error"), /not accepted: the API key is unknown or revoked \[401 unauthorized\]/);
    assert.equal(await page.evaluate(() => sessionStorage.getItem("airlock.key")), null);
    assert.doesNotMatch(page.url(), /alk_/);
    await shot("bad-key");
  });

  it("made no request but the API's routes, each with the key as the API takes it", async () => {
    const doc = await (await fetch(`${base}/api/v1/openapi.json`)).json();
    const ops = [];
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(methods)) {
        const re = new RegExp(`^${path.replace(/\{ref\}/g, ".+").replace(/\{[^}]+\}/g, "[^/]+")}$`);
        ops.push({ method: method.toUpperCase(), re, id: op.operationId, public: Array.isArray(op.security) && op.security.length === 0 });
      }
    }
    const keys = new Set([key, keyT2, adminKey, "alk_notakey"]);
    const used = new Set();
    const problems = [];
    for (const r of requests) {
      const u = new URL(r.url);
      if (u.origin !== new URL(base).origin.replace(/^http/, r.websocket ? "ws" : "http")) {
        problems.push(`${r.method} ${r.url}: not the daemon`);
        continue;
      }
      if (u.pathname === "/ui/" || /^\/ui\/[\w.-]+$/.test(u.pathname)) {
        if (r.method !== "GET" || r.headers?.authorization) problems.push(`${r.method} ${u.pathname}: an asset fetched otherwise than by a plain GET`);
        continue;
      }
      const op = ops.find((o) => o.method === r.method && o.re.test(u.pathname));
      if (!op) {
        problems.push(`${r.method} ${u.pathname}: no route of the API`);
        continue;
      }
      used.add(op.id);
      if (r.headers.cookie) problems.push(`${r.method} ${u.pathname}: sent a cookie`);
      if (op.public) {
        problems.push(`${r.method} ${u.pathname}: a route that needs no key`);
        continue;
      }
      if (r.websocket) {
        const offered = (r.headers["sec-websocket-protocol"] ?? "").split(",").map((x) => x.trim());
        const bearer = offered.find((p) => p.startsWith("airlock.bearer."));
        if (!offered.includes("airlock.v1") || !bearer || !keys.has(bearer.slice("airlock.bearer.".length)) || r.headers.authorization) {
          problems.push(`WebSocket ${u.pathname}: offered ${offered.join(", ")}, want airlock.v1 and airlock.bearer.<the key>`);
        }
        continue;
      }
      const auth = /^Bearer (.+)$/.exec(r.headers.authorization ?? "")?.[1];
      if (!auth || !keys.has(auth)) problems.push(`${r.method} ${u.pathname}: Authorization ${r.headers.authorization ?? "(none)"}, want Bearer <the key>`);
    }
    writeFileSync(join(artifacts, "requests.json"), JSON.stringify({ used: [...used].sort(), requests: requests.map((r) => ({ ...r, headers: undefined })) }, null, 1));
    console.log(`requests: ${requests.length}, API operations used: ${[...used].sort().join(" ")}`);
    assert.deepEqual(problems, []);
    for (const id of ["get-api-v1-sandboxes", "get-api-v1-sandboxes-by-id-exec", "get-api-v1-sandboxes-by-id-logs", "put-api-v1-sandboxes-by-id-files", "get-api-v1-sandboxes-by-id-replay", "get-api-v1-audit-verify"]) {
      assert.ok(used.has(id), `the console never called ${id}`);
    }
  });
});

function lower(h) {
  return Object.fromEntries(Object.entries(h ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
}
