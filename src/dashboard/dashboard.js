// The merchant dashboard's one script (served from this origin; the pages'
// Content-Security-Policy allows no other). Everything works without it;
// it adds: confirmations on dangerous forms, the brand switch submitting on
// change, and live rows from the session's event stream.
(function () {
  "use strict";

  // Forms marked data-confirm ask first.
  document.querySelectorAll("form[data-confirm]").forEach(function (form) {
    form.addEventListener("submit", function (e) {
      if (!window.confirm(form.getAttribute("data-confirm"))) {
        e.preventDefault();
      }
    });
  });

  // The brand switch submits when changed.
  document.querySelectorAll("form[data-autosubmit] select").forEach(function (select) {
    select.addEventListener("change", function () {
      select.form.submit();
    });
  });

  // Live rows: a tbody with data-live="<fragment url>" is reloaded when the
  // event stream says something happened (debounced).
  var live = document.querySelectorAll("tbody[data-live]");
  if (!live.length || !window.EventSource) {
    return;
  }
  var timer = null;
  function refresh() {
    timer = null;
    live.forEach(function (tbody) {
      fetch(tbody.getAttribute("data-live"), { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          if (html !== null) {
            // Server-rendered rows; every merchant string in them is escaped.
            tbody.innerHTML = html;
            tbody.setAttribute("data-updated", String(Date.now()));
          }
        })
        .catch(function () {});
    });
  }
  function soon() {
    if (timer === null) {
      timer = window.setTimeout(refresh, 150);
    }
  }
  var source = new EventSource("/dashboard/live");
  source.onmessage = soon;
  ["payment_intent.successful", "payment_intent.failed", "payment_intent.abandoned",
   "payment_intent.canceled", "refund.succeeded", "refund.failed", "dispute.created",
   "resync"].forEach(function (type) {
    source.addEventListener(type, soon);
  });
  source.addEventListener("open", function () {
    document.body.setAttribute("data-live", "open");
  });
})();
