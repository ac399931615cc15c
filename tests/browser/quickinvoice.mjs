// A quick invoice's pay page in a real browser: the link from the mail
// opens the invoice, a test card pays it in full and the page then shows
// it paid; on a second invoice a partial payment, then a declined card.
// Environment: BASE, FULL (the mailed link), PARTIAL (a link that takes
// partial payments).
import { launch, check, onlyFrom, run } from "./lib.mjs";

const { BASE, FULL, PARTIAL } = process.env;

run(async () => {
  const browser = await launch();
  try {
    const context = await browser.newContext({ viewport: { width: 375, height: 800 } });
    const page = await context.newPage();
    const foreign = onlyFrom(page, BASE);

    // In full, from the mailed link.
    const opened = await page.goto(FULL);
    check(opened.status() === 200, `full: status ${opened.status()}`);
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    check(width <= 375, `the page is wider than a phone (${width}px)`);
    check((await page.locator("table.fg-items").textContent()).includes("Bread"), "the items are not shown");
    check((await page.locator("#fg-transaction_amount").getAttribute("readonly")) !== null, "a full payment's amount is editable");
    await page.fill("#fg-account_holder_name", "Pat Payer");
    await page.fill("#fg-account_number", "4111 1111 1111 1111");
    await page.fill("#fg-exp_date", "12/39");
    await page.click("button.fg-submit");
    await page.waitForSelector("#fg-result-box");
    const paid = await page.locator("#fg-result-box").textContent();
    check(paid.includes("Payment approved") && paid.includes("21.00"), `full: ${paid}`);
    await page.goto(FULL);
    const state = await page.locator(".fg-state").textContent();
    check(state.includes("paid in full"), `after paying, the page says: ${state}`);
    check((await page.locator("form.fg-form").count()) === 0, "a paid invoice still offers a form");

    // A partial payment, then a declined card.
    await page.goto(PARTIAL);
    await page.fill("#fg-transaction_amount", "4.00");
    await page.fill("#fg-account_number", "4111111111111111");
    await page.fill("#fg-exp_date", "1239");
    await page.click("button.fg-submit");
    await page.waitForSelector("#fg-result-box");
    check((await page.locator("#fg-result-box").textContent()).includes("Payment approved"), "partial: not approved");
    await page.goto(PARTIAL);
    const summary = await page.locator("dl.fg-details").textContent();
    check(summary.includes("17.00"), `partial: remaining ${summary}`);
    check((await page.locator(".fg-state").textContent()).includes("Part of this invoice is paid"), "partial: no state");
    await page.fill("#fg-transaction_amount", "5.00");
    await page.fill("#fg-account_number", "4111111111111111");
    await page.fill("#fg-exp_date", "1239");
    await page.click("button.fg-submit");
    await page.waitForSelector("#fg-result-box");
    const declined = await page.locator("#fg-result-box").textContent();
    check(declined.includes("Payment declined"), `declined: ${declined}`);
    check(foreign.length === 0, `external requests: ${foreign.join(", ")}`);
  } finally {
    await browser.close();
  }
});
