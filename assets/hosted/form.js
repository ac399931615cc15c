// Ferrogate hosted forms. The pages work without this script; it adds
// what only a browser can do: focus the first problem, stop a second
// submit, tell the embedding page the result (postMessage), close and
// redirect after the delays the request asked for.
(function () {
  "use strict";
  var config = document.getElementById("fg-config");
  if (!config) return;
  var data = config.dataset;

  // The page that embeds this one: from the request that opened the
  // form, else what the browser says; never a wildcard.
  function parentOrigin() {
    if (data.parentOrigin) return data.parentOrigin;
    var ancestors = window.location.ancestorOrigins;
    if (ancestors && ancestors.length) return ancestors[0];
    return null;
  }
  var embedded = window.parent && window.parent !== window;

  function tellParent(message) {
    var origin = parentOrigin();
    if (!embedded || !origin) return false;
    window.parent.postMessage(message, origin);
    return true;
  }

  function close() {
    if (embedded) {
      tellParent(JSON.stringify({ event: "close" }));
    } else {
      window.close();
    }
  }

  // A page may close only a window a script opened, or ask the page
  // that frames it to: elsewhere the button could do nothing, so it
  // stays hidden (as it is without this script).
  var closable = embedded || !!window.opener;
  Array.prototype.forEach.call(document.querySelectorAll("[data-fg-close]"), function (button) {
    if (!closable) return;
    button.hidden = false;
    button.addEventListener("click", close);
  });

  var errors = document.getElementById("fg-errors");
  if (errors) errors.focus();

  var form = document.querySelector("form.fg-form");
  if (form) {
    form.addEventListener("submit", function (event) {
      if (form.dataset.sent) {
        event.preventDefault();
        return;
      }
      form.dataset.sent = "1";
      var button = form.querySelector(".fg-submit");
      if (button) {
        button.disabled = true;
        button.setAttribute("aria-busy", "true");
      }
    });
  }

  var result = document.getElementById("fg-result");
  if (!result) return;
  var box = document.getElementById("fg-result-box");
  if (box) box.focus();
  if (data.sendMessage === "true") tellParent(result.textContent);
  if (data.parentClose === "true") {
    window.setTimeout(close, Number(data.closeDelay || 0) * 1000);
  }
})();
