// The operator console's one script: the actor health page refreshes its
// charts and tables by fetching the server-drawn fragment every few
// seconds (same origin, the session cookie). No other page loads it.
(function () {
  "use strict";
  var box = document.getElementById("health-live");
  if (!box) return;
  var src = box.getAttribute("data-src");
  var busy = false;
  function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    fetch(src, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (r.status === 401) { window.location.reload(); return null; }
        return r.ok ? r.text() : null;
      })
      .then(function (html) {
        if (html !== null) {
          box.innerHTML = html;
          box.setAttribute("data-refreshed", String(Date.now()));
        }
      })
      .catch(function () {})
      .then(function () { busy = false; });
  }
  window.setInterval(refresh, 3000);
})();
