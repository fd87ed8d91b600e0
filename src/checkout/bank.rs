//! The sandbox bank page (`/sandbox/bank/<reference>`): the test
//! customer's bank asking to approve or decline a redirected card payment,
//! and its two buttons.

use super::*;
use kobo_actors::idempotency::{render, Answer};
use kobo_actors::payment_intent::PaymentIntentView;

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.route("/sandbox/bank/{reference}", web::get().to(bank_page))
        .route(
            "/sandbox/bank/{reference}/approve",
            web::post().to(bank_form::<true>),
        )
        .route(
            "/sandbox/bank/{reference}/decline",
            web::post().to(bank_form::<false>),
        );
}

/// The test payment and attempt behind a sandbox bank page address.
fn bank_lookup(
    state: &State,
    reference: &str,
) -> Result<
    Option<(
        PaymentIntent,
        u32,
        kobo_actors::payment_intent::ChargeAttempt,
    )>,
    DomainError,
> {
    let Some((id, number)) = parse_redirect_reference(reference) else {
        return Ok(None);
    };
    let read = state.kobo.store.read()?;
    let Some(intent): Option<PaymentIntent> =
        read.get_decoded(Table::PaymentIntents, id.as_bytes())?
    else {
        return Ok(None);
    };
    drop(read);
    if intent.mode != Mode::Test {
        return Ok(None);
    }
    let Some(attempt) = load_attempt(&state.kobo, id, number)? else {
        return Ok(None);
    };
    if attempt.provider_reference.as_deref() != Some(reference) {
        return Ok(None);
    }
    Ok(Some((intent, number, attempt)))
}

fn bank_not_found() -> HttpResponse {
    message_page(
        404,
        "Verification not found",
        "Kobo Sandbox Bank",
        false,
        "This bank verification address is not valid.",
    )
}

/// `GET /sandbox/bank/{reference}`: the sandbox bank's verification page.
async fn bank_page(
    state: State,
    key: web::Data<forms::FormKey>,
    path: web::Path<String>,
) -> HttpResponse {
    let (intent, _, attempt) = match bank_lookup(&state, &path) {
        Ok(Some(found)) => found,
        Ok(None) => return bank_not_found(),
        Err(e) => return server_error(e),
    };
    let merchant = match merchant_name(&state, &intent) {
        Ok((name, _)) => name,
        Err(e) => return server_error(e),
    };
    let (_, _, total) = intent.charge_on(Channel::Card);
    let card = attempt
        .card
        .as_ref()
        .map(|c| format!("{} •••• {}", brand_name(&c.brand), c.last4))
        .unwrap_or_default();
    let checkout = format!("/c/{}", intent.checkout_code);
    let waiting = attempt.status == AttemptStatus::Pending
        && matches!(intent.status, Status::Processing)
        && intent.pending_attempt == Some(attempt.number);
    let actions = if waiting {
        format!(
            r#"<div class="actions">
    <form method="post" action="{base}/approve">{token}<button type="submit" class="primary" id="approve">Approve</button></form>
    <form method="post" action="{base}/decline">{token}<button type="submit" class="secondary" id="decline">Decline</button></form>
  </div>"#,
            base = esc(&format!("/sandbox/bank/{}", path.as_str())),
            token = forms::hidden_input(&key, forms::Page::Bank, path.as_str()),
        )
    } else {
        format!(
            r#"<p class="notice">This verification is already finished.</p>
  <p><a class="button secondary" href="{}">Back to the payment</a></p>"#,
            esc(&checkout)
        )
    };
    let main = format!(
        r#"<section class="card bank" aria-labelledby="bank-title">
  <p class="label">Kobo Sandbox Bank · 3-D Secure</p>
  <h1 id="bank-title">Approve this payment?</h1>
  <dl class="account">
    <div><dt>Merchant</dt><dd>{merchant}</dd></div>
    <div><dt>Amount</dt><dd class="strong">{amount}</dd></div>
    <div><dt>Card</dt><dd>{card}</dd></div>
  </dl>
  <p class="hint">This is a test page: no real bank is involved. Approve completes the payment; Decline fails it.</p>
  {actions}
</section>"#,
        merchant = esc(&merchant),
        amount = esc(&money(total, intent.currency)),
        card = esc(&card),
    );
    html(
        200,
        frame("Kobo Sandbox Bank", "Kobo Sandbox Bank", false, &main, ""),
        false,
    )
}

fn brand_name(brand: &str) -> &str {
    match brand {
        "visa" => "Visa",
        "mastercard" => "Mastercard",
        "verve" => "Verve",
        "amex" => "American Express",
        "discover" => "Discover",
        "jcb" => "JCB",
        "diners" => "Diners Club",
        "unionpay" => "UnionPay",
        _ => "Card",
    }
}

/// A button's POST (`APPROVED`: Approve, else Decline): the body (cap and
/// deadline), the page's form token, then the answer.
async fn bank_form<const APPROVED: bool>(
    state: State,
    key: web::Data<forms::FormKey>,
    req: HttpRequest,
    path: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    let page = forms::Page::Bank;
    if let Err(refused) = accept_form(&key, page, "Kobo Sandbox Bank", &req, &path, payload).await {
        return refused;
    }
    bank_answer(state, req, &path, APPROVED).await
}

/// `POST .../approve` or `.../decline`: a browser (the page's buttons) is
/// sent back to the checkout page; a program gets the payment intent (or
/// the error) as JSON.
async fn bank_answer(
    state: State,
    req: HttpRequest,
    reference: &str,
    approved: bool,
) -> HttpResponse {
    let browser = wants_html(&req);
    let found = match bank_lookup(&state, reference) {
        Ok(Some(found)) => found,
        Ok(None) if browser => return bank_not_found(),
        Ok(None) => {
            let e = DomainError::of(
                ErrorCode::ResourceMissing,
                "no such sandbox bank verification",
            );
            return HttpResponse::NotFound().json(error_body(&e));
        }
        Err(e) => return server_error(e),
    };
    let (intent, number, _) = found;
    let merchant = match kobo_actors::admin::load_merchant(&state.kobo, intent.merchant) {
        Ok(Some(m)) => m,
        Ok(None) => return server_error(DomainError::internal("payment of an unknown merchant")),
        Err(e) => return server_error(e),
    };
    let msg = IntentMessage {
        merchant: intent.merchant,
        mode: intent.mode,
        merchant_name: merchant.name.clone(),
        bank_transfer_enabled: merchant.settings.payment_methods.bank_transfer,
        action: Action::RedirectResult {
            attempt: number,
            reference: reference.to_string(),
            approved,
        },
        idem: None,
    };
    let outcome = match state.kobo.payment_intents.send(intent.id, msg).await {
        Ok(r) => r,
        Err(e) => Err(e),
    };
    bank_reply(browser, &format!("/c/{}", intent.checkout_code), outcome)
}

/// The answer to a button: a browser goes back to the checkout page (or
/// sees why not), a program gets the payment intent or the error.
fn bank_reply(
    browser: bool,
    checkout: &str,
    outcome: Result<Answer<PaymentIntentView>, DomainError>,
) -> HttpResponse {
    match outcome {
        Ok(_) if browser => HttpResponse::SeeOther()
            .insert_header((header::LOCATION, checkout))
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .finish(),
        Ok(answer) => HttpResponse::Ok().json(render(answer.view())),
        Err(e) if browser && e.kind != ErrorKind::Internal => {
            let main = format!(
                r#"<section class="card state" aria-labelledby="state-title">
  <h1 id="state-title">Verification already finished</h1>
  <p>{}</p>
  <p><a class="button secondary" href="{}">Back to the payment</a></p>
</section>"#,
                esc(&e.message),
                esc(checkout)
            );
            html(
                409,
                frame("Kobo Sandbox Bank", "Kobo Sandbox Bank", false, &main, ""),
                false,
            )
        }
        Err(e) => {
            if e.kind == ErrorKind::Internal {
                tracing::error!(code = %e.code, message = %e.message, "sandbox bank answer failed");
            }
            HttpResponse::build(status_of(e.kind)).json(error_body(&e))
        }
    }
}
