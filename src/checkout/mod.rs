//! The hosted checkout page (`checkout_url`, `/c/<code>`) and the sandbox
//! bank page of the redirect test card (`/sandbox/bank/<reference>`).
//!
//! Both are plain HTML rendered here; the checkout page's behaviour is one
//! script and one style sheet embedded in the binary (`include_str!`) and
//! served by kobo itself (`/checkout/assets/...`): no CDN, no third-party
//! request, and a Content-Security-Policy that allows only this origin.
//!
//! How the page gets its credential: the short-link handler renders a
//! checkout credential (`kobo_checkout_<intent>_<HMAC>`, see
//! [`kobo_actors::credential`]) into the page it serves for that one payment
//! (a JSON block, not executed). It is derived from the intent id with a
//! server key kept in the data directory ([`CHECKOUT_KEY_FILE`]), never
//! stored and never given to the merchant's server. The short link is
//! already a capability to pay that payment, so the credential it hands out
//! grants nothing more: it acts on that one payment only (retrieve, bank
//! transfer, card, authenticate), like the payment's `client_secret`, which
//! the page never sees. The page is served with `Cache-Control: no-store`
//! and `Referrer-Policy: no-referrer`, and the script calls the API with the
//! credential only, never a merchant key.

use crate::page_headers;
use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use kobo_actors::money::{Channel, Currency, FeeBearer};
use kobo_actors::payment_intent::actor::{Action, IntentMessage};
use kobo_actors::payment_intent::service::load_attempt;
use kobo_actors::payment_intent::{AttemptStatus, PaymentIntent, Status};
use kobo_actors::provider::parse_redirect_reference;
use kobo_actors::{DomainError, ErrorCode, ErrorKind, Mode};
use kobo_storage::Table;

use crate::api::{error_body, status_of, State};

pub mod bank;
pub mod forms;
pub mod invoice;
pub mod link;
pub mod mandate;
pub mod subscription;

/// The file (in the data directory, beside the store) holding the key of
/// checkout credentials.
pub const CHECKOUT_KEY_FILE: &str = "checkout-credential-key";

const CHECKOUT_JS: &str = include_str!("checkout.js");
const CHECKOUT_CSS: &str = include_str!("checkout.css");

/// Where the assets are served.
pub const JS_PATH: &str = "/checkout/assets/checkout.js";
pub const CSS_PATH: &str = "/checkout/assets/checkout.css";

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.route(JS_PATH, web::get().to(script))
        .route(CSS_PATH, web::get().to(style))
        .route("/c/{code}", web::get().to(page));
}

async fn script() -> HttpResponse {
    page_headers::script(CHECKOUT_JS)
}

async fn style() -> HttpResponse {
    page_headers::stylesheet(CHECKOUT_CSS)
}

/// Escapes text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON safe inside a `<script type="application/json">` block.
fn script_json(v: &Value) -> String {
    v.to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// `₦10,000.00`, `$25.50`.
pub fn money(amount: i64, currency: Currency) -> String {
    let symbol = match currency {
        Currency::NGN => "₦",
        Currency::USD => "$",
    };
    let (units, minor) = (amount / 100, amount % 100);
    let digits = units.to_string();
    let mut grouped = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("{symbol}{grouped}.{minor:02}")
}

/// Headers every page here carries.
pub(crate) fn html(status: u16, body: String, script_allowed: bool) -> HttpResponse {
    let csp = if script_allowed {
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    } else {
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    };
    page_headers::html_page(status, body, csp, "no-referrer")
}

/// A page's frame: head, the merchant bar, `main`, the footer.
pub(crate) fn frame(
    title: &str,
    merchant: &str,
    livemode: bool,
    main: &str,
    script: &str,
) -> String {
    let test_badge = if livemode {
        String::new()
    } else {
        r#"<span class="badge" title="No real money moves in test mode">Test mode</span>"#
            .to_string()
    };
    let initial = merchant
        .chars()
        .find(|c| c.is_alphanumeric())
        .map(|c| c.to_uppercase().to_string())
        .unwrap_or_else(|| "K".into());
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light">
<title>{title}</title>
<link rel="stylesheet" href="{CSS_PATH}">
</head>
<body>
<header class="bar">
  <span class="logo" aria-hidden="true">{initial}</span>
  <span class="merchant">{merchant}</span>
  {test_badge}
</header>
<main id="main" tabindex="-1">
{main}
</main>
<footer class="foot">Payments by <strong>kobo</strong></footer>
{script}
</body>
</html>
"#,
        title = esc(title),
        merchant = esc(merchant),
        initial = esc(&initial),
    )
}

/// A page that says one thing (unknown link, canceled payment, ...).
pub(crate) fn message_page(
    status: u16,
    title: &str,
    merchant: &str,
    livemode: bool,
    text: &str,
) -> HttpResponse {
    let main = format!(
        r#"<section class="card state" aria-labelledby="state-title">
  <h1 id="state-title">{}</h1>
  <p>{}</p>
</section>"#,
        esc(title),
        esc(text)
    );
    html(status, frame(title, merchant, livemode, &main, ""), false)
}

/// The payment intent of checkout code `code` (the `/c/{code}` page's).
pub(crate) fn load_by_code(
    kobo: &kobo_actors::Kobo,
    code: &str,
) -> Result<Option<PaymentIntent>, DomainError> {
    let read = kobo.store.read()?;
    Ok(kobo_actors::payment_intent::checkout_code::find(
        &read, code,
    )?)
}

fn merchant_name(
    state: &State,
    intent: &PaymentIntent,
) -> Result<(String, kobo_actors::merchant::Settings), DomainError> {
    let m = kobo_actors::admin::load_merchant(&state.kobo, intent.merchant)?
        .ok_or_else(|| DomainError::internal("payment of an unknown merchant"))?;
    Ok((m.name, m.settings))
}

fn charge_json(intent: &PaymentIntent, channel: Channel) -> Value {
    let (fee, vat, total) = intent.charge_on(channel);
    json!({"amount": intent.amount, "fee": fee, "vat": vat, "total": total})
}

pub(crate) fn server_error(e: DomainError) -> HttpResponse {
    tracing::error!(code = %e.code, message = %e.message, "checkout page failed");
    message_page(
        500,
        "Something went wrong",
        "kobo",
        true,
        "We could not load this payment. Please try again in a moment.",
    )
}

/// `GET /c/{code}`: the hosted checkout page of one payment intent.
async fn page(state: State, path: web::Path<String>) -> HttpResponse {
    let intent = match load_by_code(&state.kobo, &path) {
        Ok(Some(i)) => i,
        Ok(None) => {
            return message_page(
                404,
                "Payment link not found",
                "kobo",
                true,
                "This payment link is not valid. Check the link you were given, or ask the business for a new one.",
            )
        }
        Err(e) => return server_error(e),
    };
    let (mut merchant, settings) = match merchant_name(&state, &intent) {
        Ok(m) => m,
        Err(e) => return server_error(e),
    };
    if intent.payment_link.is_some() || intent.invoice.is_some() {
        // A payment link's or an invoice's payment goes on under the brand
        // its page showed.
        if let Ok(Some(b)) = state.kobo.store.read().and_then(|r| {
            r.get_decoded::<kobo_actors::merchant::Brand>(Table::Brands, intent.brand.as_bytes())
        }) {
            merchant = b.name;
        }
    }
    let livemode = intent.mode == Mode::Live;
    if intent.status == Status::Canceled {
        return message_page(
            200,
            "Payment canceled",
            &merchant,
            livemode,
            &format!(
                "{merchant} canceled this payment, so it can no longer be paid. Nothing was charged."
            ),
        );
    }
    let ngn = intent.currency == Currency::NGN;
    let methods = json!({
        "card": settings.payment_methods.card,
        "bank_transfer": settings.payment_methods.bank_transfer && ngn,
    });
    let card = charge_json(&intent, Channel::Card);
    let transfer = charge_json(&intent, Channel::BankTransfer);
    let now: DateTime<Utc> = state.kobo.clock.now();
    // A payment link's payment shows the link's success message when paid.
    let success_message = match intent.payment_link {
        Some(l) => kobo_actors::payment_link::service::load(&state.kobo, l)
            .ok()
            .flatten()
            .and_then(|l| l.success_message),
        None => None,
    };
    let config = json!({
        "id": intent.id,
        "credential": state.checkout_key.credential(intent.id),
        "merchant": merchant,
        "currency": intent.currency,
        "fee_bearer": intent.fee_bearer,
        "return_url": intent.return_url,
        "success_message": success_message,
        "server_now": now,
        "methods": methods,
        "charges": {"card": card, "bank_transfer": transfer},
        "intent": intent.to_api(None),
    });
    let (_, _, card_total) = intent.charge_on(Channel::Card);
    let fee_line = match intent.fee_bearer {
        FeeBearer::Customer if card_total > intent.amount => format!(
            r#"<p class="breakdown" id="breakdown">{} + {} fee</p>"#,
            esc(&money(intent.amount, intent.currency)),
            esc(&money(card_total - intent.amount, intent.currency))
        ),
        _ => r#"<p class="breakdown" id="breakdown" hidden></p>"#.to_string(),
    };
    let description = intent
        .description
        .as_deref()
        .map(|d| format!(r#"<p class="desc">{}</p>"#, esc(d)))
        .unwrap_or_default();
    let main = format!(
        r#"<section class="summary" aria-labelledby="amount-label">
  <p class="label" id="amount-label">Amount to pay</p>
  <p class="amount" id="amount">{amount}</p>
  {fee_line}
  {description}
</section>
<div id="status" class="notice" role="status" aria-live="polite" hidden></div>
<noscript><p class="notice error">This page needs JavaScript to take your payment.</p></noscript>
{body}"#,
        amount = esc(&money(card_total, intent.currency)),
        body = PAY_SECTIONS,
    );
    let script = format!(
        r#"<script type="application/json" id="checkout-config">{}</script>
<script src="{JS_PATH}" defer></script>"#,
        script_json(&config)
    );
    html(
        200,
        frame(
            &format!("Pay {merchant}"),
            &merchant,
            livemode,
            &main,
            &script,
        ),
        true,
    )
}

/// The page's sections; the script shows one at a time.
const PAY_SECTIONS: &str = r##"<section id="choose" class="card" hidden aria-labelledby="choose-title">
  <h1 id="choose-title" class="visually-hidden">Pay</h1>
  <fieldset class="methods" id="methods">
    <legend>Choose how to pay</legend>
    <div class="segmented">
      <input type="radio" name="method" id="method-card" value="card">
      <label for="method-card">Card</label>
      <input type="radio" name="method" id="method-transfer" value="bank_transfer">
      <label for="method-transfer">Bank transfer</label>
    </div>
  </fieldset>

  <form id="card-form" novalidate hidden aria-labelledby="card-title">
    <h2 id="card-title">Pay with card</h2>
    <div class="field">
      <label for="card-number">Card number</label>
      <input id="card-number" name="number" inputmode="numeric" autocomplete="cc-number" maxlength="23" placeholder="0000 0000 0000 0000" aria-describedby="card-number-error" required>
      <p class="field-error" id="card-number-error" hidden></p>
    </div>
    <div class="row">
      <div class="field">
        <label for="card-exp">Expiry (MM/YY)</label>
        <input id="card-exp" name="exp" inputmode="numeric" autocomplete="cc-exp" maxlength="7" placeholder="MM/YY" aria-describedby="card-exp-error" required>
        <p class="field-error" id="card-exp-error" hidden></p>
      </div>
      <div class="field">
        <label for="card-cvc">CVC</label>
        <input id="card-cvc" name="cvc" inputmode="numeric" autocomplete="cc-csc" maxlength="4" placeholder="123" aria-describedby="card-cvc-error" required>
        <p class="field-error" id="card-cvc-error" hidden></p>
      </div>
    </div>
    <div class="field">
      <label for="card-name">Name on card <span class="optional">(optional)</span></label>
      <input id="card-name" name="name" autocomplete="cc-name" maxlength="200">
    </div>
    <fieldset id="billing" class="billing" hidden>
      <legend>Billing address</legend>
      <div class="field"><label for="bill-line1">Address</label><input id="bill-line1" autocomplete="address-line1" maxlength="200" aria-describedby="bill-line1-error"><p class="field-error" id="bill-line1-error" hidden></p></div>
      <div class="field"><label for="bill-line2">Apartment, suite <span class="optional">(optional)</span></label><input id="bill-line2" autocomplete="address-line2" maxlength="200"></div>
      <div class="row">
        <div class="field"><label for="bill-city">City</label><input id="bill-city" autocomplete="address-level2" maxlength="100" aria-describedby="bill-city-error"><p class="field-error" id="bill-city-error" hidden></p></div>
        <div class="field"><label for="bill-state">State</label><input id="bill-state" autocomplete="address-level1" maxlength="100" aria-describedby="bill-state-error"><p class="field-error" id="bill-state-error" hidden></p></div>
      </div>
      <div class="row">
        <div class="field"><label for="bill-postal">Postal code</label><input id="bill-postal" autocomplete="postal-code" maxlength="20" aria-describedby="bill-postal-error"><p class="field-error" id="bill-postal-error" hidden></p></div>
        <div class="field"><label for="bill-country">Country code</label><input id="bill-country" autocomplete="country" maxlength="2" placeholder="US" aria-describedby="bill-country-error"><p class="field-error" id="bill-country-error" hidden></p></div>
      </div>
    </fieldset>
    <button type="submit" class="primary" id="card-submit">Pay</button>
  </form>

  <section id="transfer" hidden aria-labelledby="transfer-title">
    <h2 id="transfer-title">Pay by bank transfer</h2>
    <p class="hint">Send exactly this amount to the account below from your bank app. This page updates by itself when the money arrives.</p>
    <dl class="account">
      <div><dt>Amount</dt><dd><span id="transfer-amount" class="strong"></span></dd></div>
      <div><dt>Account number</dt><dd><span id="transfer-account" class="mono strong"></span>
        <button type="button" class="copy" id="copy-account" aria-describedby="transfer-account">Copy</button></dd></div>
      <div><dt>Bank</dt><dd id="transfer-bank"></dd></div>
      <div><dt>Account name</dt><dd id="transfer-name"></dd></div>
    </dl>
    <p class="countdown" id="transfer-countdown" aria-live="off"></p>
    <button type="button" class="secondary" id="transfer-renew" hidden>Get a new account</button>
    <p class="waiting"><span class="spinner" aria-hidden="true"></span> Waiting for your transfer…</p>
  </section>
</section>

<section id="otp-step" class="card" hidden aria-labelledby="otp-title">
  <h2 id="otp-title" tabindex="-1">Verify your card</h2>
  <form id="otp-form" novalidate>
    <div class="field">
      <label for="otp-input" id="otp-label">Code</label>
      <p class="hint" id="otp-message"></p>
      <input id="otp-input" autocomplete="one-time-code" aria-describedby="otp-message otp-error" required>
      <p class="field-error" id="otp-error" hidden></p>
    </div>
    <button type="submit" class="primary" id="otp-submit">Continue</button>
    <button type="button" class="link" id="otp-cancel">Cancel and choose another way to pay</button>
  </form>
</section>

<section id="redirect-step" class="card" hidden aria-labelledby="redirect-title">
  <h2 id="redirect-title" tabindex="-1">Verify with your bank</h2>
  <p>Your bank needs to confirm this payment on its own page.</p>
  <a class="primary button" id="redirect-link" href="#">Continue to your bank</a>
  <button type="button" class="link" id="redirect-cancel">Cancel and choose another way to pay</button>
</section>

<section id="waiting-step" class="card" hidden aria-labelledby="waiting-title">
  <h2 id="waiting-title" tabindex="-1">Waiting for your bank</h2>
  <p class="waiting"><span class="spinner" aria-hidden="true"></span> Your bank is confirming the payment. This page updates by itself.</p>
</section>

<section id="done" class="card state success" hidden aria-labelledby="done-title">
  <div class="tick" aria-hidden="true">✓</div>
  <h2 id="done-title" tabindex="-1">Payment successful</h2>
  <p id="done-text"></p>
  <p id="done-message" hidden></p>
  <p id="done-return" hidden><a class="primary button" id="return-link" href="#">Return to the business</a></p>
</section>"##;

/// The body of a customer's form POST (the payment link and invoice
/// pages), read as every other body is ([`crate::api::read_body`]: 413 past
/// the cap, 408 past the deadline); a refusal is a page, never an error
/// body.
pub(crate) async fn page_body(payload: web::Payload) -> Result<web::Bytes, HttpResponse> {
    crate::api::read_body(payload).await.map_err(|e| {
        let status = crate::api::status_of(e.0.kind).as_u16();
        message_page(status, "Please try again", "kobo", true, &e.0.message)
    })
}

/// What every sandbox button's POST passes before its answer is recorded:
/// the body, read as every other body is ([`crate::api::read_body`]: 413
/// past the cap, 408 past the deadline), and the page's form token (see
/// [`forms`]). `Err` is the refusal to send; nothing has changed.
pub(crate) async fn accept_form(
    key: &forms::FormKey,
    page: forms::Page,
    bank: &str,
    req: &HttpRequest,
    reference: &str,
    payload: web::Payload,
) -> Result<(), HttpResponse> {
    use actix_web::ResponseError;
    let body = crate::api::read_body(payload)
        .await
        .map_err(|e| e.error_response())?;
    if !key.allows(page, reference, req, &body) {
        return Err(form_refused(req, bank));
    }
    Ok(())
}

/// 403 for a sandbox form POST without its page's token (see [`forms`]):
/// a page for a browser, the error body for a program (`param` null, as on
/// every 403).
fn form_refused(req: &HttpRequest, bank: &str) -> HttpResponse {
    if forms::from_browser(req) {
        return message_page(
            403,
            "Form expired",
            bank,
            false,
            "This answer did not come from the bank page. Open the page again and use its buttons.",
        );
    }
    let e = DomainError::forbidden(
        ErrorCode::FormTokenInvalid,
        "form_token is not the token of this page; send the page's form_token or none",
    );
    HttpResponse::Forbidden().json(error_body(&e))
}

pub(crate) fn wants_html(req: &HttpRequest) -> bool {
    req.headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/html"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_is_grouped_with_two_decimals() {
        assert_eq!(money(0, Currency::NGN), "₦0.00");
        assert_eq!(money(1_026_875, Currency::NGN), "₦10,268.75");
        assert_eq!(money(100_000_000, Currency::USD), "$1,000,000.00");
        assert_eq!(money(5, Currency::USD), "$0.05");
    }

    #[test]
    fn text_and_json_are_escaped() {
        assert_eq!(
            esc(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        let v = json!({"name": "</script><script>alert(1)</script>"});
        let s = script_json(&v);
        assert!(!s.contains('<') && !s.contains('>'));
        assert_eq!(serde_json::from_str::<Value>(&s).unwrap(), v);
    }
}
