//! The customer's subscription page (`/s/<token>`, from `POST
//! /v1/subscriptions/{id}/manage_link`): the plan, its price and interval,
//! the status, the next charge (amount and date) or the end date, and a
//! form that cancels at the period's end. No script (its
//! Content-Security-Policy allows none), every value escaped.
//!
//! The token is `<subscription id>.<expiry (unix seconds)>.<HMAC>`: an
//! HMAC-SHA256 of the id and the expiry under the checkout credential key
//! (`CheckoutKey::manage_token`, a file in the data directory), made by
//! the manage link and never stored; a link past its `expires_at` (1 hour) or with a wrong MAC
//! is refused (403 page). The cancel form carries a nonce and its form
//! token (HMAC of the subscription id and the nonce); a POST without it is
//! refused (403) and changes nothing. Cancel at period end is idempotent:
//! a second submit changes nothing and shows the same page (303 back to
//! the page after the change).

use actix_web::http::header;
use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use kobo_actors::calendar::lagos_date;
use kobo_actors::ids::random_base62;
use kobo_actors::merchant::Brand;
use kobo_actors::payment_link::visit::valid_nonce;
use kobo_actors::plan::Interval;
use kobo_actors::subscription::actor::{SubscriptionAction, SubscriptionMessage};
use kobo_actors::subscription::machine::Command;
use kobo_actors::subscription::service as subs;
use kobo_actors::subscription::{Subscription, SubscriptionStatus};
use kobo_actors::{ErrorKind, Mode};
use kobo_storage::Table;

use super::forms::{self, FormKey, Page};
use super::{esc, frame, html, message_page, money, page_body, server_error};
use crate::api::State;

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(
        crate::api::resource("/s/{token}")
            .route(web::get().to(page))
            .route(web::post().to(submit)),
    );
}

fn expired() -> HttpResponse {
    message_page(
        403,
        "This link has expired",
        "kobo",
        true,
        "This subscription link is no longer valid. Ask the business to send you a new one.",
    )
}

struct Found {
    sub: Subscription,
    brand: String,
}

fn lookup(state: &State, id: Uuid) -> Result<Option<Found>, kobo_actors::DomainError> {
    let Some(sub) = subs::load_any(&state.kobo, id)? else {
        return Ok(None);
    };
    let brand: Option<Brand> = state
        .kobo
        .store
        .read()?
        .get_decoded(Table::Brands, sub.brand.as_bytes())?;
    Ok(Some(Found {
        sub,
        brand: brand.map(|b| b.name).unwrap_or_else(|| "kobo".into()),
    }))
}

/// `GET /s/{token}`.
async fn page(state: State, key: web::Data<FormKey>, path: web::Path<String>) -> HttpResponse {
    let Some(id) = state
        .checkout_key
        .verify_manage(&path, state.kobo.clock.now().timestamp())
    else {
        return expired();
    };
    match lookup(&state, id) {
        Ok(Some(f)) => render(&key, &f, 200),
        Ok(None) => expired(),
        Err(e) => server_error(e),
    }
}

/// `POST /s/{token}`: cancel at the period's end.
async fn submit(
    state: State,
    key: web::Data<FormKey>,
    path: web::Path<String>,
    payload: web::Payload,
) -> HttpResponse {
    let body = match page_body(payload).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    let Some(id) = state
        .checkout_key
        .verify_manage(&path, state.kobo.clock.now().timestamp())
    else {
        return expired();
    };
    let found = match lookup(&state, id) {
        Ok(Some(f)) => f,
        Ok(None) => return expired(),
        Err(e) => return server_error(e),
    };
    let (mut nonce, mut token) = (String::new(), String::new());
    for (k, v) in url::form_urlencoded::parse(&body) {
        match k.as_ref() {
            "nonce" => nonce = v.into_owned(),
            forms::FIELD => token = v.into_owned(),
            _ => {}
        }
    }
    let s = &found.sub;
    let livemode = s.mode == Mode::Live;
    let reference = format!("{}|{nonce}", s.id);
    if !valid_nonce(&nonce) || !key.verify(Page::Manage, &reference, &token) {
        return message_page(
            403,
            "Form expired",
            &found.brand,
            livemode,
            "This form did not come from this subscription's page. Open the page again and use its button.",
        );
    }
    if cancelable(s) {
        let msg = SubscriptionMessage {
            merchant: s.merchant,
            mode: s.mode,
            action: SubscriptionAction::Command(Command::Cancel {
                at_period_end: true,
            }),
            idem: None,
        };
        match state
            .kobo
            .subscriptions
            .send(s.id, msg)
            .await
            .and_then(|r| r)
        {
            Ok(_) => {}
            Err(e) if e.kind == ErrorKind::State => {}
            Err(e) if e.kind == ErrorKind::Overloaded => {
                return message_page(
                    503,
                    "Please try again",
                    &found.brand,
                    livemode,
                    "This page is busy right now. Please submit the form again in a moment.",
                )
            }
            Err(e) => return server_error(e),
        }
    }
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, format!("/s/{}", path.as_str())))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish()
}

fn cancelable(s: &Subscription) -> bool {
    !s.status.ended() && !s.cancel_at_period_end
}

fn long_date(t: DateTime<Utc>) -> String {
    lagos_date(t).format("%-d %B %Y").to_string()
}

fn every(s: &Subscription) -> String {
    let (n, unit) = (s.terms.interval_count, s.terms.interval);
    let word = match unit {
        Interval::Day => "day",
        Interval::Week => "week",
        Interval::Month => "month",
        Interval::Year => "year",
    };
    match n {
        1 => format!("every {word}"),
        n => format!("every {n} {word}s"),
    }
}

fn status_label(s: &Subscription) -> &'static str {
    match s.status {
        SubscriptionStatus::Scheduled => "Starts soon",
        SubscriptionStatus::Trialing => "Free trial",
        SubscriptionStatus::Incomplete => "Awaiting first payment",
        SubscriptionStatus::Active if s.cancel_at_period_end => "Ends at period end",
        SubscriptionStatus::Active => "Active",
        SubscriptionStatus::PastDue => "Payment overdue",
        SubscriptionStatus::Canceled => "Canceled",
        SubscriptionStatus::Completed => "Completed",
    }
}

fn render(key: &FormKey, f: &Found, status: u16) -> HttpResponse {
    let s = &f.sub;
    let c = s.terms.currency;
    let livemode = s.mode == Mode::Live;
    let next = match (s.next_charge(), s.status.ended()) {
        (_, true) => format!(
            r#"<div><dt>Ended</dt><dd id="ended">{}</dd></div>"#,
            s.ended_at.map(long_date).unwrap_or_default()
        ),
        (Some((at, amount)), false) => format!(
            r#"<div><dt>Next charge</dt><dd id="next-charge">{} on {}</dd></div>"#,
            esc(&money(amount, c)),
            long_date(at)
        ),
        (None, false) if s.cancel_at_period_end => format!(
            r#"<div><dt>Ends on</dt><dd id="ends-on">{}</dd></div>"#,
            long_date(s.current_period_end)
        ),
        (None, false) => r#"<div><dt>Next charge</dt><dd id="next-charge">None: every payment is made</dd></div>"#.to_string(),
    };
    let form = if cancelable(s) {
        let nonce = random_base62(22);
        let reference = format!("{}|{nonce}", s.id);
        format!(
            r#"<form method="post" class="card" novalidate>
  <h2>Cancel your subscription</h2>
  <p class="hint">It stays active until {end}; you will not be charged again.</p>
  <input type="hidden" name="nonce" value="{nonce}">
  {token}
  <button type="submit" class="primary" id="cancel">Cancel at period end</button>
</form>"#,
            end = long_date(s.current_period_end),
            nonce = esc(&nonce),
            token = forms::hidden_input(key, Page::Manage, &reference),
        )
    } else {
        String::new()
    };
    let main = format!(
        r#"<article class="card" aria-labelledby="plan-title">
  <p class="label">Your subscription with {brand}</p>
  <h1 id="plan-title">{plan}</h1>
  <p class="amount" id="price">{price} {every}</p>
  <dl class="meta">
    <div><dt>Status</dt><dd id="status">{status}</dd></div>
    {next}
  </dl>
</article>
{form}"#,
        brand = esc(&f.brand),
        plan = esc(&s.terms.name),
        price = esc(&money(s.terms.amount, c)),
        every = esc(&every(s)),
        status = esc(status_label(s)),
    );
    html(
        status,
        frame(
            &format!("Your {} subscription", s.terms.name),
            &f.brand,
            livemode,
            &main,
            "",
        ),
        false,
    )
}
