// kobo hosted checkout. Talks to the API with this payment's checkout
// credential only; keeps no card data after a submission. No dependencies.
(function () {
  "use strict";

  var cfg = JSON.parse(document.getElementById("checkout-config").textContent);
  var intent = cfg.intent;
  // The server's clock may differ from the browser's (test clocks do):
  // countdowns use the server's time.
  var clockOffset = Date.parse(cfg.server_now) - Date.now();
  var pollTimer = null;
  var countdownTimer = null;
  var busy = false;
  var returnStarted = false;

  function $(id) { return document.getElementById(id); }
  function show(el, on) { if (el) { el.hidden = !on; } }

  var fmt;
  try {
    fmt = new Intl.NumberFormat("en-NG", { style: "currency", currency: cfg.currency });
  } catch (e) {
    fmt = { format: function (n) { return cfg.currency + " " + n.toFixed(2); } };
  }
  function money(minor) { return fmt.format(minor / 100); }

  function newKey() {
    var b = new Uint8Array(16);
    window.crypto.getRandomValues(b);
    return Array.prototype.map.call(b, function (x) { return ("0" + x.toString(16)).slice(-2); }).join("");
  }

  function api(method, path, body) {
    var headers = { "Authorization": "Bearer " + cfg.credential };
    var init = { method: method, headers: headers, credentials: "omit", cache: "no-store" };
    if (method === "POST") {
      headers["Content-Type"] = "application/json";
      headers["Idempotency-Key"] = newKey();
      init.body = JSON.stringify(body || {});
    }
    return fetch(path, init).then(function (r) {
      return r.json().then(function (b) { return { status: r.status, body: b }; },
        function () { return { status: r.status, body: null }; });
    }, function () { return { status: 0, body: null }; });
  }

  var base = "/v1/payment_intents/" + cfg.id;

  // ---------------------------------------------------------------- notices

  function notice(text, kind) {
    var el = $("status");
    el.className = "notice" + (kind ? " " + kind : "");
    el.textContent = text || "";
    show(el, !!text);
  }

  var FAILURES = {
    card_declined: "Your card was declined. Try another card or pay by bank transfer.",
    incorrect_pin: "The PIN was not correct, so the card was not charged. Try again.",
    incorrect_otp: "The code was not correct, so the card was not charged. Try again.",
    incorrect_phone: "The phone number did not match your bank's records. Try again.",
    incorrect_birthday: "The birthday did not match your bank's records. Try again.",
    authentication_canceled: "You canceled the card verification. Choose how to pay.",
    authentication_declined: "Your bank did not approve the payment. Try again or use another way to pay."
  };
  function failureText(code) {
    return FAILURES[code] || "The payment did not go through" + (code ? " (" + code + ")" : "") + ". Please try again.";
  }

  // ---------------------------------------------------------------- views

  var SECTIONS = ["choose", "otp-step", "redirect-step", "waiting-step", "done"];
  function only(id) {
    SECTIONS.forEach(function (s) { show($(s), s === id); });
  }
  function focusHeading(id) {
    var h = $(id);
    if (h) { h.setAttribute("tabindex", "-1"); h.focus({ preventScroll: false }); }
  }

  function setAmount(channel) {
    var c = cfg.charges[channel] || cfg.charges.card;
    if (channel === "bank_transfer" && intent.bank_transfer) {
      c = { amount: intent.amount, total: intent.bank_transfer.amount };
    }
    $("amount").textContent = money(c.total);
    var b = $("breakdown");
    if (cfg.fee_bearer === "customer" && c.total > c.amount) {
      b.textContent = money(c.amount) + " + " + money(c.total - c.amount) + " fee";
      show(b, true);
    } else {
      show(b, false);
    }
  }

  function chooseMethod(method, focus) {
    var card = method === "card";
    $("method-card").checked = card;
    $("method-transfer").checked = !card;
    show($("card-form"), card);
    show($("transfer"), !card);
    setAmount(card ? "card" : "bank_transfer");
    if (card && focus) { $("card-number").focus(); }
  }

  function showChoose(method) {
    only("choose");
    var m = cfg.methods;
    show($("methods"), m.card && m.bank_transfer);
    show($("billing"), cfg.currency === "USD");
    if (!m.card && !m.bank_transfer) {
      notice("This business does not take payments online right now.", "error");
      show($("choose"), false);
      return;
    }
    method = method || (m.card ? "card" : "bank_transfer");
    if (method === "bank_transfer" && !m.bank_transfer) { method = "card"; }
    if (method === "card" && !m.card) { method = "bank_transfer"; }
    chooseMethod(method, false);
    if (method === "bank_transfer") { startTransfer(false); }
  }

  function showDone() {
    stopPolling();
    stopCountdown();
    only("done");
    notice("", null);
    var paid = intent.amount_charged ? intent.amount_charged.total : null;
    $("done-text").textContent = cfg.merchant + " has received your payment" +
      (paid ? " of " + money(paid) : "") + ".";
    if (cfg.success_message) {
      $("done-message").textContent = cfg.success_message;
      show($("done-message"), true);
    }
    focusHeading("done-title");
    if (cfg.return_url && !returnStarted) {
      returnStarted = true;
      var u;
      try { u = new URL(cfg.return_url); } catch (e) { return; }
      u.searchParams.set("payment_intent", intent.id);
      u.searchParams.set("status", intent.status);
      $("return-link").href = u.toString();
      show($("done-return"), true);
      $("done-text").textContent += " Taking you back to " + cfg.merchant + "…";
      window.setTimeout(function () { window.location.assign(u.toString()); }, 4000);
    }
  }

  function showOtp(action) {
    only("otp-step");
    var input = action.input || "otp";
    var labels = { otp: "Code", pin: "Card PIN", phone: "Phone number", birthday: "Date of birth" };
    $("otp-label").textContent = labels[input] || "Code";
    $("otp-message").textContent = action.message || "";
    var field = $("otp-input");
    field.value = "";
    field.dataset.input = input;
    field.type = input === "pin" ? "password" : (input === "birthday" ? "date" : "text");
    field.inputMode = input === "birthday" ? "" : (input === "phone" ? "tel" : "numeric");
    field.autocomplete = input === "otp" ? "one-time-code" : (input === "phone" ? "tel" : (input === "birthday" ? "bday" : "off"));
    field.maxLength = input === "pin" ? 4 : 15;
    fieldError("otp-input", "otp-error", null);
    focusHeading("otp-title");
    field.focus();
  }

  function showRedirect(url, go) {
    only("redirect-step");
    $("redirect-link").href = url;
    focusHeading("redirect-title");
    if (go) { window.location.assign(url); }
  }

  function showWaiting() {
    only("waiting-step");
    focusHeading("waiting-title");
    startPolling();
  }

  // Renders the payment as the API last described it.
  function render(next, opts) {
    intent = next;
    opts = opts || {};
    switch (intent.status) {
      case "successful":
        return showDone();
      case "canceled":
        stopPolling();
        only(null);
        notice("This payment was canceled by " + cfg.merchant + ". Nothing was charged.", "error");
        return;
      case "processing":
        var a = intent.next_action;
        if (a && a.type === "otp") { return showOtp(a); }
        if (a && a.type === "redirect") { return showRedirect(a.url, !!opts.fromSubmit); }
        if (intent.bank_transfer && !a) {
          showChoose("bank_transfer");
          return;
        }
        return showWaiting();
      case "failed":
        notice(failureText(intent.failure_code), "error");
        return showChoose(opts.method || "card");
      case "abandoned":
        notice("This payment timed out before any money arrived. You can still pay below.", null);
        return showChoose(opts.method);
      default:
        return showChoose(opts.method);
    }
  }

  // ---------------------------------------------------------------- polling

  function startPolling() {
    if (pollTimer) { return; }
    pollTimer = window.setInterval(poll, 2000);
  }
  function stopPolling() {
    if (pollTimer) { window.clearInterval(pollTimer); pollTimer = null; }
  }
  function poll() {
    if (busy) { return; }
    api("GET", base).then(function (r) {
      if (r.status !== 200 || !r.body) { return; }
      var before = intent.status;
      var b = r.body;
      if (b.status === "successful" || b.status === "canceled") {
        render(b);
      } else if (b.status !== before && !$("waiting-step").hidden) {
        render(b);
      } else {
        intent = b;
      }
    });
  }

  // ---------------------------------------------------------------- errors

  function fieldError(inputId, errorId, text) {
    var input = $(inputId), err = $(errorId);
    if (!input || !err) { return false; }
    if (text) {
      input.setAttribute("aria-invalid", "true");
      err.textContent = text;
      show(err, true);
    } else {
      input.removeAttribute("aria-invalid");
      err.textContent = "";
      show(err, false);
    }
    return true;
  }

  var PARAM_FIELDS = {
    number: ["card-number", "card-number-error"],
    exp_month: ["card-exp", "card-exp-error"],
    exp_year: ["card-exp", "card-exp-error"],
    cvc: ["card-cvc", "card-cvc-error"],
    "billing_address": ["bill-line1", "bill-line1-error"],
    "billing_address.line1": ["bill-line1", "bill-line1-error"],
    "billing_address.city": ["bill-city", "bill-city-error"],
    "billing_address.state": ["bill-state", "bill-state-error"],
    "billing_address.postal_code": ["bill-postal", "bill-postal-error"],
    "billing_address.country": ["bill-country", "bill-country-error"]
  };
  var PARAM_TEXT = {
    number: "Check the card number.",
    exp_month: "Check the expiry date.",
    exp_year: "Check the expiry date.",
    cvc: "Check the security code on the back of the card."
  };
  function clearCardErrors() {
    Object.keys(PARAM_FIELDS).forEach(function (k) { fieldError(PARAM_FIELDS[k][0], PARAM_FIELDS[k][1], null); });
  }

  // Handles an API answer that is not a payment intent.
  function apiError(r, where) {
    var e = r.body && r.body.error;
    if (r.status === 0) {
      notice("We could not reach the payment service. Check your connection and try again.", "error");
      return;
    }
    if (e && e.code === "payment_in_progress") {
      notice("Your payment is already being processed. Please wait…", null);
      showWaiting();
      return;
    }
    if (r.status === 401) {
      notice("This payment link is no longer valid. Ask the business for a new one.", "error");
      return;
    }
    if (r.status === 400 && e && e.param && where === "card" && PARAM_FIELDS[e.param]) {
      var f = PARAM_FIELDS[e.param];
      var text = e.message && e.message.indexOf("expired") >= 0 ? "This card has expired." :
        (PARAM_TEXT[e.param] || e.message);
      fieldError(f[0], f[1], text);
      $(f[0]).focus();
      notice("Please check the highlighted field.", "error");
      return;
    }
    if (r.status === 400 && e && where === "otp") {
      fieldError("otp-input", "otp-error", e.message);
      $("otp-input").focus();
      return;
    }
    if (r.status === 409) {
      // The payment moved on: show where it is now.
      api("GET", base).then(function (g) {
        if (g.status === 200 && g.body) { render(g.body); }
        if (e && e.code === "card_attempts_exceeded") {
          notice("Too many cards were declined on this payment, so it takes no more cards." +
            (cfg.methods.bank_transfer ? " Please pay by bank transfer." : " Ask the business for a new payment link."), "error");
          if (cfg.methods.bank_transfer) { chooseMethod("bank_transfer", false); }
        }
      });
      if (e && e.code === "card_api_unavailable") {
        notice("Card payments are not available right now. Please pay by bank transfer.", "error");
      }
      return;
    }
    notice((e && e.message) || "Something went wrong. Please try again.", "error");
  }

  // ---------------------------------------------------------------- card

  function digits(s) { return (s || "").replace(/\D/g, ""); }

  function readExpiry(v) {
    var m = /^\s*(\d{1,2})\s*\/?\s*(\d{2}|\d{4})\s*$/.exec(v) || /^(\d{2})(\d{2})$/.exec(digits(v));
    if (!m) { return null; }
    return { month: parseInt(m[1], 10), year: parseInt(m[2], 10) };
  }

  function submitCard(ev) {
    ev.preventDefault();
    if (busy) { return; }
    clearCardErrors();
    notice("", null);
    var number = digits($("card-number").value);
    var exp = readExpiry($("card-exp").value);
    var cvc = digits($("card-cvc").value);
    var bad = false;
    if (number.length < 12) { fieldError("card-number", "card-number-error", "Enter the card number."); bad = bad || "card-number"; }
    if (!exp) { fieldError("card-exp", "card-exp-error", "Enter the expiry date as MM/YY."); bad = bad || "card-exp"; }
    if (cvc.length < 3) { fieldError("card-cvc", "card-cvc-error", "Enter the 3-digit code on the back of the card."); bad = bad || "card-cvc"; }
    var body = {
      number: number,
      exp_month: exp ? exp.month : 0,
      exp_year: exp ? exp.year : 0,
      cvc: cvc
    };
    var name = $("card-name").value.trim();
    if (name) { body.name = name; }
    if (cfg.currency === "USD") {
      body.billing_address = {
        line1: $("bill-line1").value.trim(),
        city: $("bill-city").value.trim(),
        state: $("bill-state").value.trim(),
        postal_code: $("bill-postal").value.trim(),
        country: $("bill-country").value.trim()
      };
      var line2 = $("bill-line2").value.trim();
      if (line2) { body.billing_address.line2 = line2; }
    }
    if (bad) { $(bad).focus(); return; }
    busy = true;
    var button = $("card-submit");
    button.disabled = true;
    button.textContent = "Processing…";
    notice("Processing your card…", null);
    api("POST", base + "/card", body).then(function (r) {
      busy = false;
      button.disabled = false;
      setPayLabel();
      // The security code is never kept once sent.
      $("card-cvc").value = "";
      body = null;
      if (r.status === 200 && r.body) {
        if (r.body.status !== "failed") { notice("", null); }
        if (r.body.status === "successful") { $("card-number").value = ""; }
        render(r.body, { fromSubmit: true, method: "card" });
        if (r.body.status === "failed") { $("card-number").focus(); }
      } else {
        apiError(r, "card");
      }
    });
  }

  function submitOtp(ev) {
    ev.preventDefault();
    if (busy) { return; }
    var field = $("otp-input");
    var input = field.dataset.input || "otp";
    var value = field.value.trim();
    if (!value) { fieldError("otp-input", "otp-error", "Enter the " + $("otp-label").textContent.toLowerCase() + "."); field.focus(); return; }
    fieldError("otp-input", "otp-error", null);
    var body = {};
    body[input] = value;
    busy = true;
    $("otp-submit").disabled = true;
    notice("Checking…", null);
    api("POST", base + "/authenticate", body).then(function (r) {
      busy = false;
      $("otp-submit").disabled = false;
      field.value = "";
      if (r.status === 200 && r.body) {
        notice("", null);
        render(r.body, { fromSubmit: true, method: "card" });
      } else {
        notice("", null);
        apiError(r, "otp");
      }
    });
  }

  function cancelAuth() {
    if (busy) { return; }
    busy = true;
    api("POST", base + "/authenticate", { cancel: true }).then(function (r) {
      busy = false;
      if (r.status === 200 && r.body) { render(r.body, { method: "card" }); } else { apiError(r, "otp"); }
    });
  }

  function setPayLabel() {
    $("card-submit").textContent = "Pay " + money(cfg.charges.card.total);
  }

  // ---------------------------------------------------------------- transfer

  function startTransfer(force) {
    var bt = intent.bank_transfer;
    var open = bt && Date.parse(bt.expires_at) > Date.now() + clockOffset && intent.status === "processing" && !intent.next_action;
    if (open && !force) { showTransfer(bt); return; }
    if (busy) { return; }
    busy = true;
    $("transfer-account").textContent = "…";
    api("POST", base + "/bank_transfer", {}).then(function (r) {
      busy = false;
      if (r.status === 200 && r.body) {
        intent = r.body;
        if (intent.status === "successful") { showDone(); return; }
        showTransfer(intent.bank_transfer);
      } else {
        apiError(r, "transfer");
      }
    });
  }

  function showTransfer(bt) {
    if (!bt) { return; }
    show($("transfer"), true);
    $("transfer-amount").textContent = money(bt.amount);
    $("transfer-account").textContent = bt.account_number;
    $("transfer-bank").textContent = bt.bank_name;
    $("transfer-name").textContent = bt.account_name;
    setAmount("bank_transfer");
    startCountdown(bt.expires_at);
    startPolling();
  }

  function stopCountdown() {
    if (countdownTimer) { window.clearInterval(countdownTimer); countdownTimer = null; }
  }
  function startCountdown(expiresAt) {
    stopCountdown();
    var end = Date.parse(expiresAt);
    var el = $("transfer-countdown");
    function tick() {
      var left = Math.floor((end - (Date.now() + clockOffset)) / 1000);
      if (left <= 0) {
        el.textContent = "This account has expired. Money sent to it still reaches " + cfg.merchant + ", but get a new account for a new transfer.";
        el.classList.add("expired");
        show($("transfer-renew"), true);
        stopCountdown();
        return;
      }
      el.classList.remove("expired");
      show($("transfer-renew"), false);
      var m = Math.floor(left / 60), s = left % 60;
      el.textContent = "Use this account within " + m + ":" + (s < 10 ? "0" : "") + s;
    }
    tick();
    countdownTimer = window.setInterval(tick, 1000);
  }

  function copyAccount() {
    var text = $("transfer-account").textContent;
    var done = function () { notice("Account number copied.", "ok"); };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, fallback);
    } else {
      fallback();
    }
    function fallback() {
      var t = document.createElement("textarea");
      t.value = text;
      t.setAttribute("readonly", "");
      t.style.position = "absolute";
      t.style.left = "-9999px";
      document.body.appendChild(t);
      t.select();
      try { document.execCommand("copy"); done(); } catch (e) { notice("Copy the account number: " + text, null); }
      document.body.removeChild(t);
    }
  }

  // ---------------------------------------------------------------- wiring

  function formatNumber(ev) {
    var d = digits(ev.target.value).slice(0, 19);
    ev.target.value = d.replace(/(\d{4})(?=\d)/g, "$1 ");
  }
  function formatExpiry(ev) {
    if (ev.inputType && ev.inputType.indexOf("delete") === 0) { return; }
    var d = digits(ev.target.value).slice(0, 4);
    ev.target.value = d.length > 2 ? d.slice(0, 2) + "/" + d.slice(2) : d;
  }

  $("card-form").addEventListener("submit", submitCard);
  $("otp-form").addEventListener("submit", submitOtp);
  $("otp-cancel").addEventListener("click", cancelAuth);
  $("redirect-cancel").addEventListener("click", cancelAuth);
  $("card-number").addEventListener("input", formatNumber);
  $("card-exp").addEventListener("input", formatExpiry);
  $("copy-account").addEventListener("click", copyAccount);
  $("transfer-renew").addEventListener("click", function () { startTransfer(true); });
  $("method-card").addEventListener("change", function () { notice("", null); chooseMethod("card", true); });
  $("method-transfer").addEventListener("change", function () {
    notice("", null);
    chooseMethod("bank_transfer", false);
    startTransfer(false);
  });

  setPayLabel();
  render(intent, {});
  if (intent.status !== "successful" && intent.status !== "canceled") { startPolling(); }
})();
