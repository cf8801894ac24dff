// The ui bench's first meaningful paint (warren bench --suite ui runs it):
// load the dashboard signed in, PAINTS times, and print as JSON each time
// from navigation start to the sandbox list's first row drawn, and the list
// call's own time within it: {"paints": [ms…], "lists": [ms…]}.
import { chromium } from "playwright-core";

const { WARREN_URL, WARREN_KEY, CHROMIUM } = process.env;
const paints = Number(process.env.PAINTS || 5);
const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu"] });
const out = { paints: [], lists: [] };
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
await browser.close();
console.log(JSON.stringify(out));
