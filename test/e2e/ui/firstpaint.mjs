// The ui bench's first meaningful paint (warren bench --suite ui runs it):
// load the dashboard signed in, PAINTS times, and print as JSON each time
// from navigation start to the sandbox list's first row drawn, and the list
// call's own time within it; then, in one sandbox's terminal, each of ECHOES
// keystrokes until xterm.js has drawn its echo:
// {"paints": [ms…], "lists": [ms…], "echoes": [ms…], "history": [ms…]}
// (history: with HISTORY_ID, the history page of that sandbox, see below).
import { chromium } from "playwright-core";

const { WARREN_URL, WARREN_KEY, CHROMIUM } = process.env;
const paints = Number(process.env.PAINTS || 5);
const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu"] });
const out = { paints: [], lists: [], echoes: [] };
const echoes = Number(process.env.ECHOES || 30);
for (let i = 0; i <= paints; i++) {
  const context = await browser.newContext();
  await context.addInitScript((key) => sessionStorage.setItem("warren.apiKey", key), WARREN_KEY);
  const page = await context.newPage();
  await page.goto(`${WARREN_URL}/ui/`, { waitUntil: "commit" });
  await page.locator("tr[data-id]").first().waitFor({ timeout: 60_000 });
  // The frame after the rows are in the DOM is when they are painted.
  const ms = await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r(performance.now()))));
  const list = await page.evaluate(() => performance.getEntriesByType("resource").find((e) => e.name.includes("/sandboxes?"))?.duration ?? -1);
  if (i > 0) { // the first load warms caches
    out.paints.push(Math.round(ms * 100) / 100);
    out.lists.push(Math.round(list * 100) / 100);
  }
  await context.close();
}
// The history page of a sandbox with HISTORY_TURNS turns: navigation to
// the timeline's rows and the lineage tree drawn.
out.history = [];
if (process.env.HISTORY_ID) {
  for (let i = 0; i <= paints; i++) {
    const context = await browser.newContext();
    await context.addInitScript((key) => sessionStorage.setItem("warren.apiKey", key), WARREN_KEY);
    const page = await context.newPage();
    await page.goto(`${WARREN_URL}/ui/#/history/${process.env.HISTORY_ID}`, { waitUntil: "commit" });
    await page.locator("#timeline li").first().waitFor({ timeout: 120_000 });
    await page.locator("#tree g.node").first().waitFor({ timeout: 120_000 });
    const ms = await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r(performance.now()))));
    if (i > 0) out.history.push(Math.round(ms * 100) / 100);
    await context.close();
  }
}
const context = await browser.newContext();
await context.addInitScript((key) => sessionStorage.setItem("warren.apiKey", key), WARREN_KEY);
const page = await context.newPage();
await page.goto(`${WARREN_URL}/ui/`);
const id = await page.locator("tr[data-id]").first().getAttribute("data-id");
await page.goto(`${WARREN_URL}/ui/#/sandbox/${id}`);
await page.locator("#term-state").filter({ hasText: "connected" }).waitFor({ timeout: 60_000 });
await page.waitForTimeout(1000); // the prompt
out.echoes = await page.evaluate(async (n) => {
  const term = window.warrenTerm;
  const times = [];
  for (let i = 0; i < n; i++) {
    const ch = String.fromCharCode(97 + (i % 26));
    const t0 = performance.now();
    await new Promise((resolve) => {
      const d = term.onWriteParsed(() => {
        const b = term.buffer.active;
        if ((b.getLine(b.baseY + b.cursorY)?.translateToString(true) ?? "").endsWith(ch)) { d.dispose(); resolve(); }
      });
      term.input(ch); // as if typed: onData sends it
    });
    times.push(Math.round((performance.now() - t0) * 100) / 100);
  }
  return times;
}, echoes);
await browser.close();
console.log(JSON.stringify(out));
