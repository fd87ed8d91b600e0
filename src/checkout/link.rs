//! A payment link's page (`/p/<slug>`): the brand's name, the
//! description, the amount (or an amount field with its bounds and
//! suggestions), the custom fields, the customer's email (and phone when
//! asked). A plain HTML form: it works without JavaScript, and the page
//! carries none (its Content-Security-Policy allows no script).
//!
//! The POST checks the answers (each wrong one is shown next to its field,
//! 400), then asks the link's actor for a payment intent on behalf of the
//! link's merchant in the link's mode, and sends the browser (303) to that
//! payment's hosted checkout (`/c/<code>`). The form carries a nonce and
//! its form token (HMAC of the link id and the nonce, [`forms`]): a POST
//! without a token this server made is refused (403 page), and a second
//! submit of the same form lands on the payment the first one made. An
//! inactive link answers 410 "no longer accepting payments".

use std::collections::BTreeMap;

use actix_web::http::header;
use actix_web::{web, HttpResponse};

use kobo_actors::idempotency::Outcome;
use kobo_actors::ids::random_base62;
use kobo_actors::merchant::Brand;
use kobo_actors::money::{Currency, FeeBearer, MAX_AMOUNT};
use kobo_actors::payment_intent::link::PAYMENTS;
use kobo_actors::payment_intent::PaymentIntentView;
use kobo_actors::payment_link::actor::send_visit;
use kobo_actors::payment_link::service;
use kobo_actors::payment_link::visit::{self, valid_nonce, VisitInput};
use kobo_actors::payment_link::{
    AmountType, CustomField, FieldType, InactiveReason, LinkStatus, PaymentLink,
};
use kobo_actors::{DomainError, ErrorCode, ErrorKind, Mode};
use kobo_storage::Table;

use super::forms::{self, FormKey};
use super::{esc, frame, html, message_page, money, page_body, server_error};
use crate::api::State;

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(
        crate::api::resource("/p/{slug}")
            .route(web::get().to(page))
            .route(web::post().to(submit)),
    );
}

/// What the visitor typed, kept to show the form again.
#[derive(Default)]
struct Answers {
    nonce: String,
    amount: String,
    suggested: String,
    email: String,
    phone: String,
    fields: BTreeMap<String, String>,
}

/// Messages by field (`amount`, `email`, `phone`, `custom_fields.<key>`).
type Problems = BTreeMap<String, String>;

fn not_found() -> HttpResponse {
    message_page(
        404,
        "Payment page not found",
        "kobo",
        true,
        "This payment page does not exist. Check the link you were given, or ask the business for a new one.",
    )
}

fn gone(brand: &str, livemode: bool, reason: Option<InactiveReason>) -> HttpResponse {
    let why = match reason {
        Some(InactiveReason::Expired) => "This payment page has expired.",
        Some(InactiveReason::MaxPaymentsReached) => {
            "This payment page has taken all the payments it was set up for."
        }
        _ => "The business has turned this payment page off.",
    };
    message_page(
        410,
        "No longer accepting payments",
        brand,
        livemode,
        &format!("{why} Nothing was charged. Contact {brand} if you still want to pay."),
    )
}

fn full(brand: &str, livemode: bool) -> HttpResponse {
    message_page(
        409,
        "Please try again shortly",
        brand,
        livemode,
        "Every place on this payment page is held by a payment in progress. Places free up when payments are not finished; try again in a few minutes.",
    )
}

/// A page's link, its brand's name, and its status now.
struct Found {
    link: PaymentLink,
    brand: String,
    status: LinkStatus,
    reason: Option<InactiveReason>,
}

/// The link of `/p/<slug>`, if any.
fn lookup(state: &State, slug: &str) -> Result<Option<Found>, DomainError> {
    let Some(link) = service::by_slug(&state.kobo, slug)? else {
        return Ok(None);
    };
    let brand: Option<Brand> = state
        .kobo
        .store
        .read()?
        .get_decoded(Table::Brands, link.brand.as_bytes())?;
    let name = brand.map(|b| b.name).unwrap_or_else(|| "kobo".into());
    let payments = service::counters(&state.kobo, link.id)?[PAYMENTS];
    let (status, reason) = link.effective_status(payments, state.kobo.clock.now());
    Ok(Some(Found {
        link,
        brand: name,
        status,
        reason,
    }))
}

/// `GET /p/{slug}`.
async fn page(state: State, key: web::Data<FormKey>, path: web::Path<String>) -> HttpResponse {
    let Found {
        link,
        brand,
        status,
        reason,
    } = match lookup(&state, &path) {
        Ok(Some(found)) => found,
        Ok(None) => return not_found(),
        Err(e) => return server_error(e),
    };
    let livemode = link.mode == Mode::Live;
    if status == LinkStatus::Inactive {
        return gone(&brand, livemode, reason);
    }
    let answers = Answers {
        nonce: random_base62(22),
        ..Default::default()
    };
    render(&key, &link, &brand, &answers, &Problems::new(), 200)
}

/// `POST /p/{slug}`: the form.
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
    let found = match lookup(&state, &path) {
        Ok(Some(found)) => found,
        Ok(None) => return not_found(),
        Err(e) => return server_error(e),
    };
    let (link, brand) = (&found.link, found.brand.as_str());
    let livemode = link.mode == Mode::Live;
    let form = read_form(&body);
    let reference = format!("{}|{}", link.id, form.nonce);
    let token = url::form_urlencoded::parse(&body)
        .find(|(k, _)| k == forms::FIELD)
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    if !valid_nonce(&form.nonce) || !key.verify(forms::Page::Link, &reference, &token) {
        return message_page(
            403,
            "Form expired",
            brand,
            livemode,
            "This form did not come from this payment page, or it is too old. Open the page again and fill it in.",
        );
    }
    if found.status == LinkStatus::Inactive {
        return gone(brand, livemode, found.reason);
    }
    let (input, mut problems) = to_input(link, &form);
    if let Err(errors) = visit::check(link, &input) {
        for e in errors {
            let param = e.param.clone().unwrap_or_default();
            problems
                .entry(param.clone())
                .or_insert_with(|| explain(link, &param, &e));
        }
    }
    if !problems.is_empty() {
        return render(&key, link, brand, &form, &problems, 400);
    }
    let made = send_visit(&state.kobo.payment_links, link, input).await;
    answer(&key, &found, &form, made)
}

/// The answer to a form the link's actor took (`made`): on to the
/// payment's checkout, or the page that says why not.
fn answer(
    key: &FormKey,
    found: &Found,
    form: &Answers,
    made: Result<Outcome<PaymentIntentView>, DomainError>,
) -> HttpResponse {
    let Found {
        link,
        brand,
        reason,
        ..
    } = found;
    let (brand, reason) = (brand.as_str(), *reason);
    let livemode = link.mode == Mode::Live;
    match made {
        Ok(made) => {
            let url = made.view().checkout_url.as_deref().unwrap_or_default();
            let at = url.find("/c/").unwrap_or(0);
            HttpResponse::SeeOther()
                .insert_header((header::LOCATION, &url[at..]))
                .insert_header((header::CACHE_CONTROL, "no-store"))
                .finish()
        }
        Err(e) if e.code == ErrorCode::PaymentLinkInactive => gone(brand, livemode, reason),
        Err(e) if e.code == ErrorCode::PaymentLinkFull => full(brand, livemode),
        Err(e) if e.kind == ErrorKind::InvalidRequest => {
            let param = e.param.clone().unwrap_or_default();
            let problems = Problems::from([(param.clone(), explain(link, &param, &e))]);
            render(key, link, brand, form, &problems, 400)
        }
        Err(e) if e.kind == ErrorKind::Overloaded => message_page(
            503,
            "Please try again",
            brand,
            livemode,
            "This page is busy right now. Please submit the form again in a moment.",
        ),
        Err(e) => server_error(e),
    }
}

fn read_form(body: &[u8]) -> Answers {
    let mut a = Answers::default();
    for (k, v) in url::form_urlencoded::parse(body) {
        let v = v.into_owned();
        match k.as_ref() {
            "nonce" => a.nonce = v,
            "amount" => a.amount = v,
            "suggested" => a.suggested = v,
            "email" => a.email = v,
            "phone" => a.phone = v,
            other => {
                if let Some(key) = other.strip_prefix("cf_") {
                    a.fields.insert(key.to_string(), v);
                }
            }
        }
    }
    a
}

/// `2500`, `2,500.50`, `₦2 500`: an amount in major units, as minor units.
pub(crate) fn parse_major(s: &str) -> Option<i64> {
    let kept: String = s
        .chars()
        .filter(|c| !matches!(c, ',' | ' ' | '₦' | '$'))
        .collect();
    let (whole, frac) = kept.split_once('.').unwrap_or((&kept, ""));
    if whole.is_empty()
        || whole.len() > 12
        || frac.len() > 2
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let minor = format!("{frac:0<2}").parse::<i64>().ok()?;
    whole
        .parse::<i64>()
        .ok()?
        .checked_mul(100)?
        .checked_add(minor)
        .filter(|a| *a <= MAX_AMOUNT)
}

/// The form as a visit; an amount that is not a number is a problem of
/// its own.
fn to_input(link: &PaymentLink, form: &Answers) -> (VisitInput, Problems) {
    let mut problems = Problems::new();
    let amount = match (link.amount.amount_type, form.amount.trim()) {
        (AmountType::Fixed, _) => None,
        (_, "") => form.suggested.parse::<i64>().ok(),
        (_, typed) => {
            let parsed = parse_major(typed);
            if parsed.is_none() {
                let unit = match link.currency {
                    Currency::NGN => "naira",
                    Currency::USD => "dollars",
                };
                problems.insert(
                    "amount".into(),
                    format!("Enter the amount in {unit}, like 2500 or 2,500.50."),
                );
            }
            parsed
        }
    };
    let input = VisitInput {
        amount,
        email: Some(form.email.clone()),
        phone: link.collect_phone.then(|| form.phone.clone()),
        answers: form
            .fields
            .iter()
            .filter(|(_, v)| !v.trim().is_empty())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        nonce: Some(form.nonce.clone()),
    };
    (input, problems)
}

/// A person's words for a visit's error on `param`.
fn explain(link: &PaymentLink, param: &str, e: &DomainError) -> String {
    let missing = e.code == ErrorCode::ParameterMissing;
    match param {
        "amount" if missing => "Enter an amount.".into(),
        "amount" => match (link.amount.min_amount, link.amount.max_amount) {
            (Some(min), Some(max)) => format!(
                "Enter an amount from {} to {}.",
                money(min, link.currency),
                money(max, link.currency)
            ),
            (Some(min), None) => format!("Enter at least {}.", money(min, link.currency)),
            _ => "Enter a valid amount.".into(),
        },
        "email" if missing => "Enter your email address.".into(),
        "email" => "Enter a valid email address, like name@example.com.".into(),
        "phone" if missing => "Enter your phone number.".into(),
        "phone" => "Enter a phone number of 7 to 15 digits.".into(),
        _ if missing => "This field is required.".into(),
        _ => {
            let key = param.strip_prefix("custom_fields.").unwrap_or(param);
            match link.custom_fields.iter().find(|f| f.key == key) {
                Some(f) => match f.field_type {
                    FieldType::Number => "Enter a number.".into(),
                    FieldType::Phone => "Enter a phone number of 7 to 15 digits.".into(),
                    FieldType::Dropdown => "Choose one of the options.".into(),
                    FieldType::Text => "Use at most 500 characters.".into(),
                },
                None => e.message.clone(),
            }
        }
    }
}

/// A labelled field: `control` is the input (its `id` is `id`), with its
/// error below it.
pub(crate) fn field(
    id: &str,
    label: &str,
    optional: bool,
    control: &str,
    error: Option<&String>,
) -> String {
    let optional = if optional {
        r#" <span class="optional">(optional)</span>"#
    } else {
        ""
    };
    let error = match error {
        Some(m) => format!(r#"<p class="field-error" id="{id}-error">{}</p>"#, esc(m)),
        None => String::new(),
    };
    format!(
        r#"<div class="field"><label for="{id}">{}{optional}</label>{control}{error}</div>"#,
        esc(label)
    )
}

/// The attributes that tie an input to its error.
pub(crate) fn invalid(id: &str, error: Option<&String>) -> String {
    match error {
        Some(_) => format!(r#" aria-invalid="true" aria-describedby="{id}-error""#),
        None => String::new(),
    }
}

fn amount_section(link: &PaymentLink, form: &Answers, problems: &Problems) -> String {
    let c = link.currency;
    let fee = match link.fee_bearer {
        FeeBearer::Customer => {
            r#"<p class="breakdown">A payment fee is added at the next step.</p>"#
        }
        FeeBearer::Merchant => "",
    };
    let a = &link.amount;
    if a.amount_type == AmountType::Fixed {
        return format!(
            r#"<p class="label">Amount to pay</p><p class="amount" id="amount">{}</p>{fee}"#,
            esc(&money(a.amount.unwrap_or_default(), c))
        );
    }
    let min = a.min_amount.unwrap_or_default();
    let bounds = match a.max_amount {
        Some(max) => format!("From {} to {}", money(min, c), money(max, c)),
        None => format!("At least {}", money(min, c)),
    };
    let error = problems.get("amount");
    let suggestions: String = a
        .suggested_amounts
        .iter()
        .map(|s| {
            let checked = if form.suggested == s.to_string() { " checked" } else { "" };
            format!(
                r#"<input type="radio" name="suggested" id="suggested-{s}" value="{s}"{checked}><label for="suggested-{s}">{}</label>"#,
                esc(&money(*s, c))
            )
        })
        .collect();
    let suggestions = if suggestions.is_empty() {
        String::new()
    } else {
        format!(
            r#"<fieldset class="suggestions"><legend>Choose an amount</legend><div class="choices">{suggestions}</div></fieldset>"#
        )
    };
    let label = if a.suggested_amounts.is_empty() {
        "Amount"
    } else {
        "Or enter an amount"
    };
    let control = format!(
        r#"<p class="hint" id="amount-hint">{bounds}</p><input id="amount-input" name="amount" inputmode="decimal" autocomplete="transaction-amount" value="{}"{}>"#,
        esc(&form.amount),
        invalid("amount-input", error)
    );
    format!(
        "{suggestions}{}{fee}",
        field("amount-input", label, false, &control, error)
    )
}

fn custom_field(f: &CustomField, form: &Answers, problems: &Problems) -> String {
    let id = format!("cf-{}", f.key);
    let error = problems.get(&format!("custom_fields.{}", f.key));
    let value = form.fields.get(&f.key).map(String::as_str).unwrap_or("");
    let aria = invalid(&id, error);
    let name = format!("cf_{}", f.key);
    let control = match f.field_type {
        FieldType::Dropdown => {
            let options: String = f
                .options
                .iter()
                .flatten()
                .map(|o| {
                    let selected = if o == value { " selected" } else { "" };
                    format!(r#"<option value="{0}"{selected}>{0}</option>"#, esc(o))
                })
                .collect();
            format!(
                r#"<select id="{id}" name="{name}"{aria}><option value="">Choose…</option>{options}</select>"#
            )
        }
        t => {
            let kind = match t {
                FieldType::Phone => r#"type="tel" autocomplete="tel""#,
                FieldType::Number => r#"type="text" inputmode="decimal""#,
                _ => r#"type="text" maxlength="500""#,
            };
            format!(
                r#"<input {kind} id="{id}" name="{name}" value="{}"{aria}>"#,
                esc(value)
            )
        }
    };
    field(&id, &f.label, !f.required, &control, error)
}

/// The email, the phone when asked, and the custom fields.
fn answer_fields(link: &PaymentLink, form: &Answers, problems: &Problems) -> String {
    let email_error = problems.get("email");
    let email = format!(
        r#"<input type="email" id="email" name="email" autocomplete="email" value="{}"{}>"#,
        esc(&form.email),
        invalid("email", email_error)
    );
    let mut fields = field("email", "Email address", false, &email, email_error);
    if link.collect_phone {
        let error = problems.get("phone");
        let phone = format!(
            r#"<input type="tel" id="phone" name="phone" autocomplete="tel" value="{}"{}>"#,
            esc(&form.phone),
            invalid("phone", error)
        );
        fields.push_str(&field("phone", "Phone number", false, &phone, error));
    }
    for f in &link.custom_fields {
        fields.push_str(&custom_field(f, form, problems));
    }
    fields
}

fn render(
    key: &FormKey,
    link: &PaymentLink,
    brand: &str,
    form: &Answers,
    problems: &Problems,
    status: u16,
) -> HttpResponse {
    let reference = format!("{}|{}", link.id, form.nonce);
    let summary = if problems.is_empty() {
        String::new()
    } else {
        r#"<div class="notice error" role="alert" id="form-errors">Please check the fields marked below.</div>"#.to_string()
    };
    let description = link
        .description
        .as_deref()
        .map(|d| format!(r#"<p class="desc">{}</p>"#, esc(d)))
        .unwrap_or_default();
    let fields = answer_fields(link, form, problems);
    let other: Vec<&String> = problems
        .iter()
        .filter(|(p, _)| {
            !matches!(p.as_str(), "amount" | "email" | "phone")
                && !link
                    .custom_fields
                    .iter()
                    .any(|f| **p == format!("custom_fields.{}", f.key))
        })
        .map(|(_, m)| m)
        .collect();
    let other: String = other
        .iter()
        .map(|m| format!(r#"<p class="field-error">{}</p>"#, esc(m)))
        .collect();
    let main = format!(
        r#"<section class="summary" aria-labelledby="link-title">
  <h1 id="link-title">{name}</h1>
  {description}
</section>
{summary}
<form method="post" class="card link-form" novalidate>
  <input type="hidden" name="nonce" value="{nonce}">
  {token}
  {amount}
  {fields}
  {other}
  <button type="submit" class="primary" id="pay">Continue to payment</button>
</form>"#,
        name = esc(&link.name),
        nonce = esc(&form.nonce),
        token = forms::hidden_input(key, forms::Page::Link, &reference),
        amount = amount_section(link, form, problems),
    );
    html(
        status,
        frame(
            &format!("Pay {brand}"),
            brand,
            link.mode == Mode::Live,
            &main,
            "",
        ),
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_read_in_major_units() {
        assert_eq!(parse_major("2500"), Some(250_000));
        assert_eq!(parse_major("2,500.5"), Some(250_050));
        assert_eq!(parse_major("₦ 2 500.05"), Some(250_005));
        assert_eq!(parse_major("0.99"), Some(99));
        for bad in ["", "abc", "1.234", "-5", "1e3", "99999999999999", ".5"] {
            assert_eq!(parse_major(bad), None, "{bad}");
        }
    }
}
