// Factline console: behaviour every page shares.
(function () {
  "use strict";
  // A form is sent once: a second press of its button while the first
  // request is on its way made a second key or webhook, whose secret
  // nobody saw.
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (form.dataset.sent) {
      e.preventDefault();
      e.stopImmediatePropagation();
      return;
    }
    form.dataset.sent = "1";
  }, true);
  window.addEventListener("pageshow", function (e) {
    if (!e.persisted) {
      return;
    }
    // A page marked once (a key shown a single time) is asked for again
    // when the back/forward cache restores it: the server says it is gone.
    if (document.body.dataset.once) {
      window.location.reload();
      return;
    }
    // Forms of a restored page can be sent again.
    document.querySelectorAll("form[data-sent]").forEach(function (f) { delete f.dataset.sent; });
  });
  window.addEventListener("pagehide", function () {
    document.querySelectorAll("[data-secret]").forEach(function (el) { el.textContent = ""; });
  });
})();
