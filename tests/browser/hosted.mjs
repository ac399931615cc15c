// The hosted forms in a real browser: a merchant's page on another origin
// embeds the PayForm in an iframe, a payer fills a test card, the page
// receives the result by postMessage; keyboard-only completion at a
// phone's width; a declined card; an AccountForm; and the refusals of a
// wrong hash-key, an expired timestamp and a used one. Along the way: the
// error summary in page order, the focus outline's contrast, and a Close
// button only where it can close something.
// Environment: BASE (the gateway), and signed paths: EMBEDDED, KEYBOARD,
// DECLINED, ACCOUNT, WRONG_HASH, EXPIRED. Prints one JSON line of what
// the parent page received, for the Rust side to look up.
import { createServer } from "node:http";
import { launch, check, run } from "./lib.mjs";

const env = process.env;
const BASE = env.BASE;

/// The merchant's page: another origin (127.0.0.2, where the gateway is
/// 127.0.0.1) holding the form in an iframe and a listener that checks the
/// sender, as the reference tells integrators to.
function merchantPage(formUrl) {
  const gatewayOrigin = new URL(BASE).origin;
  return `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Shop</title></head><body>
<h1>Checkout</h1>
<iframe title="Payment" src="${formUrl}" width="420" height="720"></iframe>
<script>
window.received = [];
window.addEventListener("message", function (event) {
  if (event.origin !== ${JSON.stringify(gatewayOrigin)}) return;
  window.received.push(event.data);
});
</script></body></html>`;
}

/// The contrast ratio of two CSS rgb() colours (WCAG's formula).
function contrast(a, b) {
  const luminance = (css) => {
    const [r, g, bl] = css.match(/[\d.]+/g).slice(0, 3).map((v) => {
      const c = Number(v) / 255;
      return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * bl;
  };
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

function serve(html) {
  return new Promise((resolve) => {
    const server = createServer((req, res) => {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end(html);
    });
    server.listen(0, "127.0.0.2", () => resolve(server));
  });
}

/// Every request goes to the gateway or the merchant's own page.
function watchRequests(page, allowed) {
  const foreign = [];
  page.on("request", (r) => {
    const url = r.url();
    if (!allowed.some((a) => url.startsWith(a)) && !url.startsWith("data:") && !url.startsWith("about:")) {
      foreign.push(url);
    }
  });
  return foreign;
}

async function everyInputLabelled(frame, where) {
  const unlabelled = await frame.evaluate(() =>
    Array.from(document.querySelectorAll("input:not([type=hidden]), select"))
      .filter((el) => !el.labels || el.labels.length === 0)
      .map((el) => el.name)
  );
  check(unlabelled.length === 0, `${where}: fields without a label: ${unlabelled.join(", ")}`);
}

run(async () => {
  const browser = await launch();
  const out = {};
  try {
    // 1. Embedded in another site's page; the result comes by postMessage.
    const shop = await serve(merchantPage(`${BASE}${env.EMBEDDED}`));
    const shopOrigin = `http://127.0.0.2:${shop.address().port}`;
    const context = await browser.newContext();
    const page = await context.newPage();
    const foreign = watchRequests(page, [BASE, shopOrigin]);
    await page.goto(`${shopOrigin}/checkout`);
    const frame = page.frameLocator("iframe");
    await frame.locator("#fg-account_number").waitFor();
    const inner = page.frames().find((f) => f.url().startsWith(BASE));
    check(inner, "the form did not load in the iframe");
    await everyInputLabelled(inner, "embedded form");
    // An empty submit: the error summary takes the focus, fields say why.
    await frame.locator("button.fg-submit").click();
    await frame.locator("#fg-errors").waitFor();
    const focused = await inner.evaluate(() => document.activeElement && document.activeElement.id);
    check(focused === "fg-errors", `after an empty submit the focus is on ${focused}`);
    // The summary's links follow the fields' order on the page.
    const frameWithErrors = page.frames().find((f) => f.url().startsWith(BASE));
    const order = await frameWithErrors.evaluate(() => {
      const onPage = Array.from(document.querySelectorAll(".fg-form input, .fg-form select")).map((el) => "#" + el.id);
      const listed = Array.from(document.querySelectorAll("#fg-errors a")).map((a) => a.getAttribute("href"));
      return { onPage, listed };
    });
    const positions = order.listed.map((href) => order.onPage.indexOf(href));
    check(
      order.listed.length >= 3 && positions.every((p, i) => p >= 0 && (i === 0 || p > positions[i - 1])),
      `the error summary is not in page order: ${order.listed.join(", ")} (page: ${order.onPage.join(", ")})`
    );
    check((await frame.locator("#fg-account_number").getAttribute("aria-invalid")) === "true", "no aria-invalid");
    const describedBy = await frame.locator("#fg-account_number").getAttribute("aria-describedby");
    check(describedBy && describedBy.includes("fg-account_number-error"), `aria-describedby: ${describedBy}`);
    const frameAfterError = page.frames().find((f) => f.url().startsWith(BASE));
    await frame.locator("#fg-account_holder_name").fill("Pat Payer");
    await frame.locator("#fg-account_number").fill("4111 1111 1111 1111");
    await frame.locator("#fg-exp_date").fill("12/39");
    await frame.locator("#fg-cvv").fill("999");
    await frame.locator("#fg-billing_zip").fill("12345");
    await frame.locator("button.fg-submit").click();
    await page.waitForFunction(() => window.received.length > 0, null, { timeout: 15000 });
    const message = JSON.parse((await page.evaluate(() => window.received))[0]);
    check(message.transaction && message.transaction.id, `the message holds no transaction: ${JSON.stringify(message)}`);
    check(!JSON.stringify(message).includes("4111111111111111"), "the message holds the card number");
    check(frameAfterError, "frame lost");
    const resultText = await frame.locator("#fg-result-box").textContent();
    check(resultText.includes("Payment approved"), `embedded result: ${resultText}`);
    // In a frame the Close button works (it asks the parent page), so it shows.
    check(await frame.locator("#fg-result-box .fg-close").isVisible(), "no Close button in the frame");
    check(foreign.length === 0, `requests outside the gateway and the shop: ${foreign.join(", ")}`);
    out.embedded = { id: message.transaction.id, api_id: message.transaction.transaction_api_id };
    await context.close();
    shop.close();

    // 2. Keyboard only, at a phone's width.
    const phone = await browser.newContext({ viewport: { width: 360, height: 740 } });
    const kb = await phone.newPage();
    const kbForeign = watchRequests(kb, [BASE]);
    const opened = await kb.goto(`${BASE}${env.KEYBOARD}`);
    check(opened.status() === 200, `keyboard form: status ${opened.status()}`);
    const width = await kb.evaluate(() => document.documentElement.scrollWidth);
    check(width <= 360, `the form is wider than a phone (${width}px)`);
    // The focus outline stands out from the page behind it (WCAG 1.4.11: 3:1).
    const ring = await kb.evaluate(() => {
      const input = document.querySelector("#fg-account_number");
      input.focus();
      const style = getComputedStyle(input);
      let behind = input.parentElement;
      while (behind && getComputedStyle(behind).backgroundColor.match(/rgba\(.*, 0\)$|transparent/)) {
        behind = behind.parentElement;
      }
      const back = behind ? getComputedStyle(behind).backgroundColor : "rgb(255, 255, 255)";
      const seen = { style: style.outlineStyle, width: style.outlineWidth, color: style.outlineColor, back };
      input.blur();
      return seen;
    });
    const ratio = contrast(ring.color, ring.back);
    check(ring.style !== "none" && parseFloat(ring.width) >= 2, `no visible focus outline: ${JSON.stringify(ring)}`);
    check(ratio >= 3, `focus outline contrast ${ratio.toFixed(2)}:1 (${ring.color} on ${ring.back})`);
    const typeInto = async (id, text) => {
      for (let i = 0; i < 15; i++) {
        const at = await kb.evaluate(() => document.activeElement && document.activeElement.id);
        if (at === id) {
          await kb.keyboard.type(text);
          return;
        }
        await kb.keyboard.press("Tab");
      }
      throw new Error(`Tab never reached #${id}`);
    };
    await typeInto("fg-account_holder_name", "Kim Keys");
    await typeInto("fg-account_number", "5454545454545454");
    await typeInto("fg-exp_date", "0131");
    await kb.keyboard.press("Enter");
    await kb.waitForSelector("#fg-result-box");
    const kbText = await kb.locator("#fg-result-box").textContent();
    check(kbText.includes("Payment approved"), `keyboard result: ${kbText}`);
    const kbFocus = await kb.evaluate(() => document.activeElement && document.activeElement.id);
    check(kbFocus === "fg-result-box", `the result is not focused (${kbFocus})`);
    // Opened at the top level, not by a script: no window to close, so no
    // Close button that would do nothing.
    check((await kb.locator("#fg-result-box .fg-close").count()) === 1, "the close button is not in the page");
    check(!(await kb.locator("#fg-result-box .fg-close").isVisible()), "a Close button that cannot close");
    check(kbForeign.length === 0, `external requests: ${kbForeign.join(", ")}`);

    // 3. A declined card.
    await kb.goto(`${BASE}${env.DECLINED}`);
    await kb.fill("#fg-account_number", "4111111111111111");
    await kb.fill("#fg-exp_date", "1239");
    await kb.click("button.fg-submit");
    await kb.waitForSelector("#fg-result-box");
    const declined = await kb.locator("#fg-result-box").textContent();
    check(declined.includes("Payment declined"), `declined result: ${declined}`);

    // 4. An AccountForm stores a vault.
    await kb.goto(`${BASE}${env.ACCOUNT}`);
    await everyInputLabelled(kb, "account form");
    await kb.fill("#fg-account_holder_name", "Val Vault");
    await kb.fill("#fg-account_number", "4012888888881881");
    await kb.fill("#fg-exp_date", "0930");
    await kb.click("button.fg-submit");
    await kb.waitForSelector("#fg-result-box");
    const saved = await kb.locator("#fg-result-box").textContent();
    check(saved.includes("Card saved"), `account form result: ${saved}`);

    // 5. Refusals, each a page a person can read.
    const refusals = [
      [env.WRONG_HASH, 401, "Hash key is invalid"],
      [env.EXPIRED, 401, "timestamp has expired"],
      [env.KEYBOARD, 403, "already been used"],
    ];
    for (const [path, status, words] of refusals) {
      const r = await kb.goto(`${BASE}${path}`);
      const text = await kb.locator("main").textContent();
      check(r.status() === status, `${words}: status ${r.status()}`);
      check(text.includes(words), `${words}: page says ${text}`);
      check((await kb.locator("[role=alert]").count()) === 1, `${words}: no alert role`);
    }
    await phone.close();
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(out));
});
