// Factline console: behaviour every page shares.
(function () {
  "use strict";
  // A form is sent once while its answer is awaited: a second press of
  // its button while the first request was on its way made a second key
  // or webhook, whose secret nobody saw. Past the server's deadline for
  // a request (30 s) and a margin, the first has been answered or cut,
  // and a press sends again: a page whose loading was stopped during a
  // stall never sent its form again.
  var resendAfter = 35000;
  document.addEventListener("submit", function (e) {
    var form = e.target;
    var waited = Date.now() - Number(form.dataset.sent || 0);
    if (form.dataset.sent && waited >= 0 && waited < resendAfter) {
      e.preventDefault();
      e.stopImmediatePropagation();
      netError("This form was sent and its answer has not come yet. Wait for it; the form can be sent again in " +
        Math.ceil((resendAfter - waited) / 1000) + " s if it does not come.");
      return;
    }
    form.dataset.sent = String(Date.now());
  }, true);
  window.addEventListener("pageshow", function (e) {
    if (!e.persisted) {
      return;
    }
    // A page the back/forward cache restores is asked for again: the
    // session may have ended (Back after signing out showed the tenant's
    // page), the page may have been shown once (a new key), and its
    // forms come back unsent.
    window.location.reload();
  });
  // A view loaded in place (htmx) shows that it is on its way, and says
  // so when the server cannot be reached or does not answer: a click
  // must not leave the screen unchanged.
  var busy = 0;
  function setBusy(on) {
    busy = Math.max(0, busy + (on ? 1 : -1));
    document.documentElement.classList.toggle("loading", busy > 0);
    var el = document.getElementById("busy");
    if (!el) {
      el = document.createElement("div");
      el.id = "busy";
      el.setAttribute("role", "status");
      el.textContent = "Loading…";
      document.documentElement.appendChild(el);
    }
    el.hidden = busy === 0;
  }
  function netError(text) {
    var old = document.getElementById("net-error");
    if (old) old.remove();
    var box = document.createElement("div");
    box.id = "net-error";
    box.className = "problem";
    box.setAttribute("role", "alert");
    box.textContent = text;
    var main = document.querySelector("main") || document.body;
    main.insertBefore(box, main.firstChild);
  }
  document.addEventListener("htmx:beforeRequest", function () {
    var old = document.getElementById("net-error");
    if (old) old.remove();
    setBusy(true);
  });
  document.addEventListener("htmx:afterRequest", function () { setBusy(false); });
  document.addEventListener("htmx:sendError", function () {
    netError("The console could not be reached: the server is down or the network is out. Nothing changed; try again.");
  });
  document.addEventListener("htmx:timeout", function () {
    netError("The console did not answer in time. Nothing changed; try again, or reload the page.");
  });
  // fitPlot keeps a chart (uPlot) as wide as its box, up to 1100 px, as
  // the window narrows or widens: drawn once at the width of the first
  // layout, a chart overflowed a narrowed window. chart.js and
  // timechart.js call it; this script runs before them.
  window.fitPlot = function (box, u) {
    if (box.fitter) box.fitter.disconnect();
    if (typeof ResizeObserver === "undefined") return;
    box.fitter = new ResizeObserver(function () {
      var w = Math.min(box.clientWidth || 900, 1100);
      if (w !== u.width) u.setSize({ width: w, height: u.height });
    });
    box.fitter.observe(box);
  };
  window.addEventListener("pagehide", function () {
    document.querySelectorAll("[data-secret]").forEach(function (el) { el.textContent = ""; });
  });
})();
