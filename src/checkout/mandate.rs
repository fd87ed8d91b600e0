//! The sandbox mandate authorization page (`authorization_url` in test
//! mode, `/sandbox/mandates/<reference>`): what the customer's bank would
//! show, with Approve and Decline buttons posting to `<url>/approve` and
//! `<url>/decline` (a client may POST there directly and gets JSON).
//!
//! An answer is the sandbox provider's record, not a change of the mandate:
//! the mandate moves at the next provider check (`refresh`, or the periodic
//! check), as with a real provider. After approving, a browser is sent to
//! the mandate's `callback_url`.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use kobo_actors::mandate::service::by_authorization_reference;
use kobo_actors::mandate::{Mandate, MandateStatus};
use kobo_actors::{DomainError, ErrorCode, ErrorKind, Mode};

use super::forms::{self, FormKey};
use super::{accept_form, esc, frame, html, message_page, wants_html};
use crate::api::{error_body, status_of, State};

const BANK: &str = "Kobo Sandbox Bank";

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.route("/sandbox/mandates/{reference}", web::get().to(page))
        .route(
            "/sandbox/mandates/{reference}/approve",
            web::post().to(form::<true>),
        )
        .route(
            "/sandbox/mandates/{reference}/decline",
            web::post().to(form::<false>),
        );
}

fn lookup(state: &State, reference: &str) -> Result<Option<Mandate>, DomainError> {
    Ok(by_authorization_reference(&state.kobo, reference)?.filter(|m| m.mode == Mode::Test))
}

fn not_found() -> HttpResponse {
    message_page(
        404,
        "Authorization not found",
        BANK,
        false,
        "This direct debit authorization address is not valid.",
    )
}

fn failed(e: DomainError) -> HttpResponse {
    tracing::error!(code = %e.code, message = %e.message, "sandbox mandate page failed");
    message_page(
        500,
        "Something went wrong",
        BANK,
        false,
        "We could not load this authorization. Please try again in a moment.",
    )
}

fn merchant_name(state: &State, m: &Mandate) -> String {
    kobo_actors::admin::load_merchant(&state.kobo, m.merchant)
        .ok()
        .flatten()
        .map(|m| m.name)
        .unwrap_or_else(|| "the business".into())
}

/// `GET /sandbox/mandates/{reference}`.
async fn page(state: State, key: web::Data<FormKey>, path: web::Path<String>) -> HttpResponse {
    let m = match lookup(&state, &path) {
        Ok(Some(m)) => m,
        Ok(None) => return not_found(),
        Err(e) => return failed(e),
    };
    let answered = match state.kobo.mandate_providers.test.answer_of(m.id) {
        Ok(a) => a,
        Err(e) => return failed(e),
    };
    let merchant = merchant_name(&state, &m);
    let actions = match (&answered, m.status) {
        (None, MandateStatus::Pending) => format!(
            r#"<div class="actions">
    <form method="post" action="{base}/approve">{token}<button type="submit" class="primary" id="approve">Approve</button></form>
    <form method="post" action="{base}/decline">{token}<button type="submit" class="secondary" id="decline">Decline</button></form>
  </div>"#,
            base = esc(&format!("/sandbox/mandates/{}", path.as_str())),
            token = forms::hidden_input(&key, forms::Page::Mandate, path.as_str()),
        ),
        (Some(a), _) if a.approved => {
            r#"<p class="notice">You approved this mandate.</p>"#.to_string()
        }
        (Some(_), _) => r#"<p class="notice">You declined this mandate.</p>"#.to_string(),
        (None, _) => r#"<p class="notice">This authorization is closed.</p>"#.to_string(),
    };
    let main = format!(
        r#"<section class="card bank" aria-labelledby="bank-title">
  <p class="label">{BANK} · Direct debit</p>
  <h1 id="bank-title">Allow {merchant} to debit your account?</h1>
  <dl class="account">
    <div><dt>Business</dt><dd>{merchant}</dd></div>
    <div><dt>Customer</dt><dd>{customer}</dd></div>
  </dl>
  <p class="hint">This is a test page: no real bank is involved. Approve lets the business debit this account again and again until the mandate is canceled; Decline refuses it.</p>
  {actions}
</section>"#,
        merchant = esc(&merchant),
        customer = esc(m
            .customer_name
            .as_deref()
            .or(m.customer_email.as_deref())
            .unwrap_or("")),
    );
    html(200, frame(BANK, BANK, false, &main, ""), false)
}

/// A button's POST (`APPROVED`: Approve, else Decline): the body (cap and
/// deadline), the page's form token, then the answer.
async fn form<const APPROVED: bool>(
    state: State,
    key: web::Data<FormKey>,
    req: HttpRequest,
    path: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    if let Err(refused) = accept_form(&key, forms::Page::Mandate, BANK, &req, &path, payload).await
    {
        return refused;
    }
    answer(state, req, &path, APPROVED).await
}

/// Records the customer's answer with the sandbox provider. A browser
/// that approved goes to `callback_url` (when set); a program gets
/// `{object: "sandbox_mandate_answer", mandate, approved}`.
async fn answer(state: State, req: HttpRequest, reference: &str, approved: bool) -> HttpResponse {
    let browser = wants_html(&req);
    let m = match lookup(&state, reference) {
        Ok(Some(m)) => m,
        Ok(None) if browser => return not_found(),
        Ok(None) => {
            let e = DomainError::of(
                ErrorCode::ResourceMissing,
                "no such sandbox mandate authorization",
            );
            return HttpResponse::NotFound().json(error_body(&e));
        }
        Err(e) => return failed(e),
    };
    let outcome = if m.status != MandateStatus::Pending {
        Err(DomainError::state(
            ErrorCode::MandateUnexpectedState,
            format!(
                "this mandate is {}; it no longer takes an answer",
                m.status.as_str()
            ),
        ))
    } else {
        let now = state.kobo.clock.now();
        state
            .kobo
            .mandate_providers
            .test
            .record_answer(m.id, approved, now)
            .await
    };
    reply(browser, &m, approved, outcome)
}

/// The answer to a button: a browser sees where it goes next, a program
/// gets the record (or the error).
fn reply(
    browser: bool,
    m: &Mandate,
    approved: bool,
    outcome: Result<(), DomainError>,
) -> HttpResponse {
    match outcome {
        Ok(()) if browser => match (&m.callback_url, approved) {
            (Some(url), true) => HttpResponse::SeeOther()
                .insert_header((header::LOCATION, url.as_str()))
                .insert_header((header::CACHE_CONTROL, "no-store"))
                .finish(),
            (_, true) => message_page(
                200,
                "Mandate approved",
                BANK,
                false,
                "You approved the direct debit. You can close this page.",
            ),
            (_, false) => message_page(
                200,
                "Mandate declined",
                BANK,
                false,
                "You declined the direct debit. No debit will be taken.",
            ),
        },
        Ok(()) => HttpResponse::Ok().json(json!({
            "object": "sandbox_mandate_answer",
            "mandate": m.id,
            "approved": approved,
        })),
        Err(e) if browser && e.kind != ErrorKind::Internal => message_page(
            409,
            "Authorization already answered",
            BANK,
            false,
            &e.message,
        ),
        Err(e) => {
            if e.kind == ErrorKind::Internal {
                tracing::error!(code = %e.code, message = %e.message, "sandbox mandate answer failed");
            }
            HttpResponse::build(status_of(e.kind)).json(error_body(&e))
        }
    }
}
