// The dashboard's browser test, run by ui_browser_test.go: Debian's chromium,
// headless, driven by playwright-core (which downloads no browser). Each step
// logs a line; any failure exits non-zero.
import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import assert from "node:assert/strict";

const env = (k) => { const v = process.env[k]; if (!v) throw new Error(`${k} is not set`); return v; };
const BASE = env("WARREN_URL"), KEY = env("WARREN_KEY"), OTHER = env("WARREN_OTHER_KEY");
const SANDBOX = env("SANDBOX"), FORK = env("FORK"), ARTIFACTS = env("ARTIFACTS"), XSS_FILE = env("XSS_FILE");
const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
const T = 60_000; // generous: a loaded 2-core machine

const api = async (path, init = {}) => {
  const res = await fetch(BASE + path, { ...init, headers: { "X-API-Key": KEY, ...(init.headers ?? {}) } });
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return res;
};
const step = (s) => console.log(`ok  ${s}`);

const browser = await chromium.launch({ executablePath: env("CHROMIUM"), headless: true, args: ["--no-sandbox", "--disable-gpu"] });
const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
const page = await context.newPage();
page.setDefaultTimeout(T);
const requests = [];
page.on("request", (r) => requests.push(r.url()));
const errors = [];
page.on("pageerror", (e) => errors.push(String(e)));
page.on("console", (m) => { if (m.type() === "error") console.log(`console: ${m.text()}`); });

async function axe(name) {
  // Evaluated through the debugging protocol: the page's CSP (rightly)
  // refuses an injected inline script.
  await page.evaluate(axeSource);
  const res = await page.evaluate(async () => await window.axe.run(document, { resultTypes: ["violations"] }));
  const bad = res.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  for (const v of bad) console.log(`axe ${name}: ${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(" ")).join(", ")})`);
  assert.equal(bad.length, 0, `axe: ${bad.length} serious or critical violations on ${name}`);
  step(`axe on ${name}: no serious or critical violations (${res.violations.length} lesser)`);
}
const shot = async (name) => { await page.screenshot({ path: `${ARTIFACTS}/${name}.png`, fullPage: true }); step(`screenshot ${name}.png`); };
const xssFired = () => page.evaluate(() => window.__xss);

// 1. The page's headers: a strict CSP; nothing works without a key.
const first = await page.goto(`${BASE}/ui/`);
const csp = first.headers()["content-security-policy"] ?? "";
assert.match(csp, /default-src 'self'/); assert.match(csp, /script-src 'self';/); assert.match(csp, /frame-ancestors 'none'/);
assert.equal(first.headers()["x-content-type-options"], "nosniff");
await page.getByLabel("API key").waitFor();
const noKey = await page.evaluate(async () => (await fetch("/sandboxes")).status);
assert.equal(noKey, 401);
step("page served with a strict CSP; the API refuses a call without a key");
await axe("sign-in");
await shot("signin");

// 2. A wrong key is refused; another team's key sees none of this team's sandboxes.
await page.getByLabel("API key").fill("not-a-key");
await page.getByRole("button", { name: "Sign in" }).click();
await page.locator("#signin-error").waitFor();
step("a wrong key is refused");
await page.getByLabel("API key").fill(OTHER);
await page.getByRole("button", { name: "Sign in" }).click();
await page.getByRole("heading", { name: "Sandboxes" }).waitFor();
await page.locator("#status").filter({ hasText: "sandboxes on this page" }).waitFor();
assert.equal(await page.locator(`tr[data-id="${SANDBOX}"]`).count(), 0);
await page.goto(`${BASE}/ui/#/sandbox/${SANDBOX}`);
await page.locator("#status.error").waitFor();
step("another team's key sees neither the list's sandbox nor its page");
await page.getByRole("button", { name: "Sign out" }).click();

// 3. Sign in: the sandbox made through the API is listed, its planted metadata as text.
await page.getByLabel("API key").fill(KEY);
await page.getByRole("button", { name: "Sign in" }).click();
await page.locator(`tr[data-id="${SANDBOX}"]`).waitFor();
await page.locator(`tr[data-id="${FORK}"] .tag`).filter({ hasText: "onerror" }).waitFor();
assert.equal(await xssFired(), undefined, "metadata ran as HTML");
step("signed in; the sandbox is listed; metadata shown as text");
await axe("sandboxes");
await shot("sandboxes");

// 4. One sandbox: the terminal.
await page.locator(`tr[data-id="${SANDBOX}"] a`).first().click();
await page.locator("#term-state").filter({ hasText: "connected" }).waitFor();
const screen = () => page.evaluate(() => { const b = window.warrenTerm.buffer.active; const out = []; for (let i = 0; i < b.length; i++) out.push(b.getLine(i)?.translateToString(true) ?? ""); return out; });
const waitLine = async (pred, what) => {
  const end = Date.now() + T;
  while (Date.now() < end) { if ((await screen()).some(pred)) return; await page.waitForTimeout(100); }
  throw new Error(`terminal never showed ${what}:\n${(await screen()).join("\n")}`);
};
await page.locator("#terminal").click();
await page.keyboard.type("echo hi\n");
await waitLine((l) => l.trim() === "hi", "hi");
step("typed `echo hi`, read `hi`");
await page.keyboard.type("echo '<img src=x onerror=\"window.__xss=1\">'\n");
await waitLine((l) => l.startsWith("<img src=x"), "the planted output");
assert.equal(await xssFired(), undefined, "command output ran as HTML");
step("command output with markup shown as text");
await page.setViewportSize({ width: 900, height: 700 });
const size = await page.evaluate(() => new Promise((r) => setTimeout(() => r([window.warrenTerm.rows, window.warrenTerm.cols]), 500)));
await page.keyboard.type("stty size\n");
await waitLine((l) => l.trim() === `${size[0]} ${size[1]}`, `stty size ${size[0]} ${size[1]}`);
step(`resized: the shell sees ${size[0]} rows × ${size[1]} columns`);
await page.keyboard.type("sleep 300\n");
await page.waitForTimeout(500);
await page.keyboard.press("Control+C");
await page.keyboard.type("echo after-$((6*7))\n");
await waitLine((l) => l.trim() === "after-42", "after-42 (Ctrl-C did not stop sleep)");
step("Ctrl-C stopped a running command");

// Files: the planted name is text; open, edit, save, read back through the API.
const planted = page.locator("#file-list button").filter({ hasText: XSS_FILE });
await planted.waitFor();
assert.equal(await planted.getAttribute("data-path"), `/home/user/${XSS_FILE}`);
assert.equal(await xssFired(), undefined, "a file name ran as HTML");
step("a file name with markup shown as text");
await page.locator('button[data-path="/home/user/notes.txt"]').click();
await page.locator("#editor").waitFor();
assert.match(await page.locator("#editor").inputValue(), /version v3/);
await page.locator("#editor").fill("edited in the browser\n");
await page.locator("#save").click();
await page.locator("#status").filter({ hasText: "saved /home/user/notes.txt" }).waitFor();
const back = await (await api(`/sandboxes/${SANDBOX}/files?path=/home/user/notes.txt`)).text();
assert.equal(back, "edited in the browser\n");
step("edited a file in the browser and read it back through the API");
// Processes: follow one's output live (a new tick arrives while it is shown).
await page.locator("#h-procs").scrollIntoViewIfNeeded();
await page.getByRole("button", { name: /tick-/ }).click();
await page.locator("#proc-output").filter({ hasText: "tick-1" }).waitFor();
const ticks = async () => ((await page.locator("#proc-output").textContent()) ?? "").split("\n").filter((l) => l.startsWith("tick-")).length;
const seen = await ticks();
const until = Date.now() + T;
while ((await ticks()) <= seen && Date.now() < until) await page.waitForTimeout(200);
assert.ok((await ticks()) > seen, "the process's output did not follow");
step("followed a process's output live");
await axe("sandbox");
await shot("sandbox");

// 5. History: three turns in the timeline, the fork in the tree, a diff, a rollback.
await page.goto(`${BASE}/ui/#/history/${SANDBOX}`);
await page.locator("#timeline li").first().waitFor();
const marks = await page.locator("#timeline li").allTextContents();
for (const n of [1, 2, 3]) assert.ok(marks.some((m) => m.includes(`turn ${n}`)), `turn ${n} not in the timeline: ${marks}`);
assert.ok(marks.some((m) => m.includes("turn 3") && m.includes("tools: read")), `turn 3 does not show its tool call: ${marks}`);
assert.ok(marks.some((m) => m.includes("turn 2 ·") && m.includes("commands:") && m.includes("echo turn-two-command")), `turn 2 does not show its command: ${marks}`);
assert.ok(!marks.some((m) => !m.includes("turn 2 ·") && m.includes("turn-two-command")), `the command shows in another turn: ${marks}`);
step("three turns in the timeline, turn 2 with its command, turn 3 with its tool call");
await page.locator(`#tree g.node[data-id="${FORK}"]`).waitFor();
step("the fork is in the lineage tree");
const opts = await page.locator("#diff-from option").allTextContents();
await page.locator("#diff-from").selectOption({ label: opts.find((o) => o === "turn 1") });
await page.locator("#diff-to").selectOption({ label: opts.find((o) => o === "turn 2") });
await page.locator("#diff-go").click();
const table = page.locator('table.diff[data-path="/home/user/notes.txt"]');
await table.waitFor();
await table.locator("td.del").filter({ hasText: "version v1" }).waitFor();
await table.locator("td.add").filter({ hasText: "version v2" }).waitFor();
step("the diff of turn 1 → turn 2 shows the changed line side by side");
await axe("history");
await shot("history");
const turn1 = await page.locator("#timeline li").filter({ hasText: "turn 1 ·" }).getAttribute("data-snapshot");
const node = page.locator(`#tree g.node[data-id="${turn1}"]`);
await node.focus();
await page.keyboard.press("Enter"); // the tree works from the keyboard
await page.getByRole("button", { name: "Roll back to this" }).click();
const end = Date.now() + T;
let now = "";
while (Date.now() < end) {
  now = await (await api(`/sandboxes/${SANDBOX}/files?path=/home/user/notes.txt`)).text().catch(() => "");
  if (now.includes("version v1")) break;
  await new Promise((r) => setTimeout(r, 200));
}
assert.match(now, /version v1/, "the rollback from the tree did not bring turn 1's file back");
step("rolled back from the tree: the file is turn 1's again");
await page.waitForLoadState("load"); // the page reloads after the rollback
await page.locator("#tree line.rolled-back-to").first().waitFor({ state: "attached" });
step("the tree shows the rollback");

// 6. Nothing went to another origin; no script error; no XSS.
const origin = new URL(BASE).origin;
const foreign = requests.filter((u) => !u.startsWith(origin) && !u.startsWith("data:") && !u.startsWith("blob:"));
assert.deepEqual(foreign, [], "requests to other origins");
assert.equal(await xssFired(), undefined);
assert.deepEqual(errors, [], "page errors");
step(`${requests.length} requests, all to ${origin}`);
await browser.close();
