// Drive the built page in headless Chromium (playwright-core, Debian's /usr/bin/chromium) and print
// what it shows, as JSON, for tests/web/test_web_page.py to compare with the CLI's --json.
// usage: node tools/web_check.mjs BASE_URL CASES_JSON SCREENSHOT_DIR   (NODE_MODULES: where playwright-core is)
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const [base, casesFile, shots] = process.argv.slice(2);
const require = createRequire(path.join(process.env.NODE_MODULES, "noop.js"));
const { chromium } = require("playwright-core");
const cases = JSON.parse(readFileSync(casesFile, "utf8"));
const flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const browser = await chromium.launchPersistentContext(process.env.USER_DATA_DIR, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true, args: flags,
  viewport: { width: 1300, height: 1000 },
});
const out = [];
let page = await browser.newPage();
const errors = [];
page.on("pageerror", (e) => errors.push(String(e)));
for (const [index, c] of cases.entries()) {
  const started = Date.now();
  if (index === 0) {
    await page.goto(`${base}/index.html?${c.query}`);
    await page.waitForSelector("body[data-ready]", { timeout: 120000 });
  } else {
    // a re-plan in the loaded page: the state from the case's query, then the button
    await page.evaluate((query) => { history.replaceState(null, "", "?" + query); }, c.query);
    const before = await page.evaluate((query) => {
      const params = new URLSearchParams(query);
      for (const el of document.querySelectorAll("#form [name]")) el.value = params.get(el.name) ?? {
        model: "llama-3.1-8b", gpu: "H100-80GB", count: "8", tp: "1", pp: "1", ep: "1", attn_dp: "1", engine: "sglang",
      }[el.name] ?? "";
      if (!params.get("release")) document.getElementById("release").selectedIndex = 0;
      if (!params.get("vllm_release")) document.getElementById("vllm_release").selectedIndex = 0;
      const done = window.kvTiming.done;
      document.getElementById(params.get("view") === "fit" ? "fit" : "plan").click();
      return done;
    }, c.query);
    // the answer is shown when the page counts it done (a Hub fetch finishes after the click)
    await page.waitForFunction((n) => window.kvTiming.done > n, before, { timeout: 120000 });
  }
  const shown = await page.evaluate(() => {
    const num = (t) => (t === undefined || t === null ? null : Number(String(t).replace(/,/g, "")));
    const cards = [...document.querySelectorAll("article.answer[data-engine]")].map((card) => ({
      engine: card.dataset.engine,
      argv: card.querySelector("[data-field=argv]")?.textContent,
      refused: !!card.querySelector("[data-field=refused]"),
      error: card.querySelector("[data-field=error]")?.textContent ?? null,
      tokens: num(card.querySelector("[data-field=tokens]")?.textContent),
      option_tokens: [...card.querySelectorAll("[data-field=option-tokens]")].map((e) => num(e.textContent)),
      requests: Object.fromEntries([...card.querySelectorAll("tr[data-length]")].map((tr) =>
        [tr.dataset.length, tr.querySelector("[data-field=requests]").textContent.replace(/,/g, "")])),
      command: card.querySelector("[data-field=command]")?.textContent ?? null,
      bars: card.querySelectorAll("svg rect").length,
    }));
    const fit = [...document.querySelectorAll("[data-field=fit-table] tr[data-model]")].map((tr) => ({
      model: tr.dataset.model,
      tokens: num(tr.querySelector("[data-field=fit-tokens]")?.textContent),
      requests: num(tr.querySelector("[data-field=fit-requests]")?.textContent),
      reason: tr.querySelector("[data-field=fit-reason]")?.textContent ?? null,
    }));
    return { cards, fit, timing: window.kvTiming, status: document.getElementById("status").textContent,
      url: location.search };
  });
  shown.name = c.name;
  shown.wall_ms = Date.now() - started;
  await page.screenshot({ path: path.join(shots, `${c.name}.png`), fullPage: true });
  out.push(shown);
}
shown_errors: {
  out.push({ name: "_page_errors", errors });
}
await browser.close();
console.log(JSON.stringify(out));
