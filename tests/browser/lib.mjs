// Shared by the page checks: a headless Chromium (the system's, or
// CHROMIUM_PATH) and small assertions that fail with a readable message.
import { chromium } from "playwright-core";
import { existsSync } from "node:fs";

export function chromiumPath() {
  const candidates = [
    process.env.CHROMIUM_PATH,
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
    "/usr/bin/google-chrome",
  ].filter(Boolean);
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new Error(`no Chromium found (tried ${candidates.join(", ")})`);
  return found;
}

export async function launch() {
  return chromium.launch({
    executablePath: chromiumPath(),
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
}

export function check(condition, message) {
  if (!condition) throw new Error(message);
}

/// Every request the page makes must go to `base`: no external assets.
export function onlyFrom(page, base) {
  const foreign = [];
  page.on("request", (r) => {
    const url = r.url();
    if (!url.startsWith(base) && !url.startsWith("data:") && !url.startsWith("about:")) foreign.push(url);
  });
  return foreign;
}

export async function run(main) {
  try {
    await main();
    console.log("ok");
  } catch (e) {
    console.error(e && e.stack ? e.stack : String(e));
    process.exit(1);
  }
}
