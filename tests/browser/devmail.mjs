// The development mailbox in a real browser: sign-in by HTTP Basic, the
// list at a phone's width, keyboard-only navigation to a message, the
// message's parts, and no external assets.
// Environment: BASE, DEVELOPER_ID, USER_ID, API_KEY, SUBJECT.
import { launch, check, onlyFrom, run } from "./lib.mjs";

const { BASE, DEVELOPER_ID, USER_ID, API_KEY, SUBJECT } = process.env;

run(async () => {
  const browser = await launch();
  try {
    // Without credentials: the browser is asked for them (a navigation
    // would show Chromium's prompt, so the request is made directly).
    const anonymous = await browser.newContext();
    const refused = await anonymous.request.get(`${BASE}/dev/mail?developer-id=${DEVELOPER_ID}`);
    check(refused.status() === 401, `anonymous: status ${refused.status()}`);
    check((refused.headers()["www-authenticate"] || "").startsWith("Basic"), "anonymous: no Basic challenge");
    await anonymous.close();

    const context = await browser.newContext({
      httpCredentials: { username: USER_ID, password: API_KEY },
      viewport: { width: 360, height: 740 },
    });
    const page = await context.newPage();
    const foreign = onlyFrom(page, BASE);
    const list = await page.goto(`${BASE}/dev/mail?developer-id=${DEVELOPER_ID}`);
    check(list.status() === 200, `list: status ${list.status()}`);
    check((await page.title()).includes("Development mailbox"), `list: title ${await page.title()}`);
    check(await page.locator("html[lang=en]").count() === 1, "list: no lang");
    const caption = await page.locator("table caption").textContent();
    check(caption && caption.includes("newest first"), `list: caption ${caption}`);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    check(width <= 360, `list: wider than a phone (${width}px)`);

    // Keyboard only: tab to the message's link and open it.
    let reached = false;
    for (let i = 0; i < 10 && !reached; i++) {
      await page.keyboard.press("Tab");
      reached = await page.evaluate((s) => document.activeElement && document.activeElement.textContent === s, SUBJECT);
    }
    check(reached, "the message link is not reachable with Tab");
    const outline = await page.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
    check(outline !== "none", "the focused link shows no focus outline");
    await Promise.all([page.waitForURL(/\/dev\/mail\/[0-9a-f]+/), page.keyboard.press("Enter")]);
    const heading = await page.locator("h1").textContent();
    check(heading === SUBJECT, `message: heading ${heading}`);
    const text = await page.locator("pre").textContent();
    check(text.includes("ending in 1111"), "message: the plain text part is missing");
    check(!(await page.content()).includes("4111111111111111"), "message: a full card number");
    const frame = page.locator("iframe");
    check((await frame.getAttribute("title")) === "HTML body of the message", "message: the iframe has no title");
    check((await frame.getAttribute("sandbox")) === "", "message: the HTML part is not sandboxed");
    const inner = await frame.contentFrame().locator("table").count();
    check(inner === 1, "message: the HTML part did not render");
    // Back to the list through the header link, by keyboard.
    await page.keyboard.press("Tab");
    await Promise.all([page.waitForURL(/\/dev\/mail\?developer-id=/), page.keyboard.press("Enter")]);
    check(foreign.length === 0, `external requests: ${foreign.join(", ")}`);
    await context.close();
  } finally {
    await browser.close();
  }
});
