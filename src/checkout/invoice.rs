//! The hosted invoice page (`hosted_url`, `/i/<code>`): the invoice as a
//! document (the brand's name, the number, the line items, subtotal, tax,
//! total, the due date, what was paid and what remains, its status) and a
//! "Pay" form. A plain HTML form: it works without JavaScript, and the page
//! carries none (its Content-Security-Policy allows no script). A print
//! stylesheet (`@media print` in the checkout's style sheet) hides the form.
//!
//! The POST makes a payment intent for what remains (or, when the invoice
//! takes partial payments, the amount typed: at least `minimum_payment`,
//! at most what remains; a wrong one is shown next to the field, 400)
//! through the same checks and parameters as the API's pay (the invoice
//! set on the intent, its customer the invoice's), then sends the browser
//! (303) to that payment's hosted checkout (`/c/<code>`). The form carries
//! a nonce and its form token (HMAC of the invoice id and the nonce,
//! [`forms`]): a POST without a token this server made is refused (403
//! page), and the nonce's row is claimed in the intent's own batch, so a
//! second submit of one form lands on the payment the first one made.
//!
//! A paid invoice shows "Paid"; a void one answers 410, an unknown code
//! 404 (a draft has no page: its code is made at finalize).

use actix_web::http::header;
use actix_web::{web, HttpResponse};
use chrono::NaiveDate;

use kobo_actors::calendar::lagos_date;
use kobo_actors::customer::Customer;
use kobo_actors::ids::random_base62;
use kobo_actors::invoice::book::check_amount;
use kobo_actors::invoice::service as invoices;
use kobo_actors::invoice::{Invoice, InvoiceStatus};
use kobo_actors::merchant::Brand;
use kobo_actors::money::{Currency, FeeBearer};
use kobo_actors::payment_intent::service::create_for_invoice_page;
use kobo_actors::payment_link::visit::valid_nonce;
use kobo_actors::{DomainError, ErrorCode, ErrorKind, Mode};
use kobo_storage::Table;

use super::forms::{self, FormKey};
use super::link::{field, invalid, parse_major};
use super::{esc, frame, html, message_page, money, page_body, server_error};
use crate::api::State;

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(
        crate::api::resource("/i/{code}")
            .route(web::get().to(page))
            .route(web::post().to(submit)),
    );
}

/// What the payer typed, kept to show the form again.
#[derive(Default)]
struct Answers {
    nonce: String,
    amount: String,
}

fn not_found() -> HttpResponse {
    message_page(
        404,
        "Invoice not found",
        "kobo",
        true,
        "This invoice does not exist. Check the link you were given, or ask the business for a new one.",
    )
}

fn void_page(brand: &str, livemode: bool, number: &str) -> HttpResponse {
    message_page(
        410,
        "This invoice was canceled",
        brand,
        livemode,
        &format!(
            "{brand} voided invoice {number}: there is nothing to pay on it. Contact {brand} if you think this is a mistake."
        ),
    )
}

/// A page's invoice, its brand's name and the customer's name or email.
struct Found {
    invoice: Invoice,
    brand: String,
    billed_to: Option<String>,
}

/// The invoice of `/i/<code>`, if any.
fn lookup(state: &State, code: &str) -> Result<Option<Found>, DomainError> {
    let Some(invoice) = invoices::by_code(&state.kobo, code)? else {
        return Ok(None);
    };
    let read = state.kobo.store.read()?;
    let brand: Option<Brand> = read.get_decoded(Table::Brands, invoice.brand.as_bytes())?;
    let customer: Option<Customer> =
        read.get_decoded(Table::Customers, invoice.customer.as_bytes())?;
    let billed_to = customer.and_then(|c| c.name.or(c.email));
    Ok(Some(Found {
        invoice,
        brand: brand.map(|b| b.name).unwrap_or_else(|| "kobo".into()),
        billed_to,
    }))
}

/// `GET /i/{code}`.
async fn page(state: State, key: web::Data<FormKey>, path: web::Path<String>) -> HttpResponse {
    let found = match lookup(&state, &path) {
        Ok(Some(f)) => f,
        Ok(None) => return not_found(),
        Err(e) => return server_error(e),
    };
    let answers = Answers {
        nonce: random_base62(22),
        amount: String::new(),
    };
    render(&state, &key, &found, &answers, None, 200)
}

/// `POST /i/{code}`: the Pay form.
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
        Ok(Some(f)) => f,
        Ok(None) => return not_found(),
        Err(e) => return server_error(e),
    };
    let (i, brand) = (&found.invoice, found.brand.as_str());
    let livemode = i.mode == Mode::Live;
    let mut form = Answers::default();
    let mut token = String::new();
    for (k, v) in url::form_urlencoded::parse(&body) {
        match k.as_ref() {
            "nonce" => form.nonce = v.into_owned(),
            "amount" => form.amount = v.into_owned(),
            forms::FIELD => token = v.into_owned(),
            _ => {}
        }
    }
    let reference = format!("{}|{}", i.id, form.nonce);
    if !valid_nonce(&form.nonce) || !key.verify(forms::Page::Invoice, &reference, &token) {
        return message_page(
            403,
            "Form expired",
            brand,
            livemode,
            "This form did not come from this invoice's page, or it is too old. Open the invoice again and pay from there.",
        );
    }
    if !payable(i) {
        return render(&state, &key, &found, &form, None, 409);
    }
    // What remains, unless the invoice takes part payments and one was typed.
    let amount = match (i.allow_partial_payments, form.amount.trim()) {
        (false, _) | (true, "") => None,
        (true, typed) => match parse_major(typed) {
            Some(a) => Some(a),
            None => {
                let message = format!(
                    "Enter the amount in {}, like 2500 or 2,500.50.",
                    unit(i.currency)
                );
                return render(&state, &key, &found, &form, Some(message), 400);
            }
        },
    };
    let amount = match check_amount(i, amount) {
        Ok(a) => a,
        Err(e) if e.code == ErrorCode::InvoiceNotPayable => {
            return render(&state, &key, &found, &form, None, 409)
        }
        Err(e) if e.code == ErrorCode::AmountExceedsRemaining => {
            let message = format!(
                "Enter at most {}, the amount that remains.",
                money(i.remaining(), i.currency)
            );
            return render(&state, &key, &found, &form, Some(message), 400);
        }
        Err(e) if e.kind == ErrorKind::InvalidRequest => {
            return render(&state, &key, &found, &form, Some(bounds_message(i)), 400)
        }
        Err(e) => return server_error(e),
    };
    let merchant = match kobo_actors::admin::load_merchant(&state.kobo, i.merchant) {
        Ok(Some(m)) => m,
        Ok(None) => return server_error(DomainError::internal("an invoice of no merchant")),
        Err(e) => return server_error(e),
    };
    let params = crate::api::invoices::intent_params(&state.kobo.config.base_url, i, amount);
    let made = create_for_invoice_page(
        &state.kobo,
        &state.kobo.customers,
        &merchant,
        (i.mode, params, i.id),
        &form.nonce,
    )
    .await;
    match made {
        Ok(made) => {
            let url = made.view().checkout_url.as_deref().unwrap_or_default();
            let at = url.find("/c/").unwrap_or(0);
            HttpResponse::SeeOther()
                .insert_header((header::LOCATION, &url[at..]))
                .insert_header((header::CACHE_CONTROL, "no-store"))
                .finish()
        }
        Err(e) if e.kind == ErrorKind::Overloaded => message_page(
            503,
            "Please try again",
            brand,
            livemode,
            "This page is busy right now. Please submit the form again in a moment.",
        ),
        Err(e) if e.kind == ErrorKind::State => message_page(
            409,
            "This invoice cannot be paid here",
            brand,
            livemode,
            &format!("{} Contact {brand} for another way to pay.", e.message),
        ),
        Err(e) => server_error(e),
    }
}

/// Whether the page offers its Pay form.
fn payable(i: &Invoice) -> bool {
    i.status.payable() && i.remaining() > 0
}

fn unit(c: Currency) -> &'static str {
    match c {
        Currency::NGN => "naira",
        Currency::USD => "dollars",
    }
}

/// The least a part payment may be (`minimum_payment`, else one minor
/// unit), never more than what remains.
fn least(i: &Invoice) -> i64 {
    i.minimum_payment
        .unwrap_or(1)
        .clamp(1, i.remaining().max(1))
}

fn bounds_message(i: &Invoice) -> String {
    format!(
        "Enter an amount from {} to {}.",
        money(least(i), i.currency),
        money(i.remaining(), i.currency)
    )
}

fn long_date(d: NaiveDate) -> String {
    d.format("%-d %B %Y").to_string()
}

/// The status as the payer reads it, and its badge's class.
fn status_label(i: &Invoice) -> (&'static str, &'static str) {
    match i.status {
        InvoiceStatus::Paid => ("Paid", "paid"),
        InvoiceStatus::Open if i.overdue => ("Overdue", "overdue"),
        InvoiceStatus::Open => ("Open", "open"),
        InvoiceStatus::Uncollectible => ("Past due", "overdue"),
        InvoiceStatus::Void => ("Void", "void"),
        InvoiceStatus::Draft => ("Draft", "void"),
    }
}

fn document(found: &Found) -> String {
    let Found {
        invoice: i,
        brand,
        billed_to,
    } = found;
    let c = i.currency;
    let (label, class) = status_label(i);
    let number = i.number.as_deref().unwrap_or_default();
    let billed = billed_to
        .as_deref()
        .map(|b| format!(r#"<div><dt>Billed to</dt><dd>{}</dd></div>"#, esc(b)))
        .unwrap_or_default();
    let issued = i
        .finalized_at
        .map(|t| {
            format!(
                r#"<div><dt>Issued</dt><dd>{}</dd></div>"#,
                long_date(lagos_date(t))
            )
        })
        .unwrap_or_default();
    let lines: String = i
        .line_items
        .iter()
        .map(|l| {
            let unit_price = esc(&money(l.unit_amount, c));
            format!(
                r#"<tr><td><span class="line-desc">{desc}</span><span class="line-detail">{q} × {unit_price}</span></td><td class="num wide">{q}</td><td class="num wide">{unit_price}</td><td class="num">{amount}</td></tr>"#,
                desc = esc(&l.description),
                q = l.quantity,
                amount = esc(&money(l.amount, c)),
            )
        })
        .collect();
    let rate = i.tax_rate_bps;
    let tax_label = if rate % 100 == 0 {
        format!("Tax ({}%)", rate / 100)
    } else {
        format!("Tax ({}.{:02}%)", rate / 100, rate % 100)
    };
    let tax_label = tax_label.replace(".50%", ".5%");
    let memo = i
        .memo
        .as_deref()
        .map(|m| format!(r#"<p class="memo" id="invoice-memo">{}</p>"#, esc(m)))
        .unwrap_or_default();
    let paid = match (i.status, i.paid_at) {
        (InvoiceStatus::Paid, Some(at)) => format!(
            r#"<div class="notice ok" role="status" id="paid-notice"><strong>Paid</strong> in full on {}. Thank you.</div>"#,
            long_date(lagos_date(at))
        ),
        _ => String::new(),
    };
    format!(
        r#"{paid}<article class="card invoice-doc" aria-labelledby="invoice-title">
  <div class="doc-head">
    <div><p class="label">Invoice from {brand}</p><h1 id="invoice-title">{number}</h1></div>
    <span class="status status-{class}" id="invoice-status">{label}</span>
  </div>
  <dl class="meta">
    {billed}
    {issued}
    <div><dt>Due</dt><dd id="due-date">{due}</dd></div>
  </dl>
  <table class="lines">
    <thead><tr><th scope="col">Item</th><th scope="col" class="num wide">Qty</th><th scope="col" class="num wide">Unit price</th><th scope="col" class="num">Amount</th></tr></thead>
    <tbody>{lines}</tbody>
  </table>
  <dl class="totals">
    <div><dt>Subtotal</dt><dd id="subtotal">{subtotal}</dd></div>
    <div><dt>{tax_label}</dt><dd id="tax">{tax}</dd></div>
    <div class="total"><dt>Total</dt><dd id="total">{total}</dd></div>
    <div><dt>Amount paid</dt><dd id="amount-paid">{amount_paid}</dd></div>
    <div class="remaining"><dt>Amount remaining</dt><dd id="amount-remaining">{remaining}</dd></div>
  </dl>
  {memo}
</article>"#,
        brand = esc(brand),
        number = esc(number),
        due = long_date(i.due_date),
        subtotal = esc(&money(i.subtotal, c)),
        tax = esc(&money(i.tax, c)),
        total = esc(&money(i.total, c)),
        amount_paid = esc(&money(i.amount_paid, c)),
        remaining = esc(&money(i.remaining(), c)),
    )
}

fn pay_form(key: &FormKey, i: &Invoice, form: &Answers, problem: Option<&String>) -> String {
    let c = i.currency;
    let reference = format!("{}|{}", i.id, form.nonce);
    let fee = match i.fee_bearer {
        FeeBearer::Customer => {
            r#"<p class="breakdown">A payment fee is added at the next step.</p>"#
        }
        FeeBearer::Merchant => "",
    };
    let summary = if problem.is_some() {
        r#"<div class="notice error" role="alert" id="form-errors">Please check the amount.</div>"#
    } else {
        ""
    };
    let amount = if i.allow_partial_payments {
        let hint = format!(
            "Pay all that remains, or part of it: from {} to {}.",
            money(least(i), c),
            money(i.remaining(), c)
        );
        let typed = if form.amount.is_empty() {
            format!("{}.{:02}", i.remaining() / 100, i.remaining() % 100)
        } else {
            form.amount.clone()
        };
        let control = format!(
            r#"<p class="hint" id="amount-hint">{}</p><input id="amount-input" name="amount" inputmode="decimal" autocomplete="transaction-amount" value="{}"{}>"#,
            esc(&hint),
            esc(&typed),
            invalid("amount-input", problem)
        );
        field("amount-input", "Amount to pay", false, &control, problem)
    } else {
        format!(
            r#"<p class="label">Amount to pay</p><p class="amount" id="amount">{}</p>"#,
            esc(&money(i.remaining(), c))
        )
    };
    format!(
        r#"{summary}<form method="post" class="card invoice-pay" novalidate>
  <h2>Pay this invoice</h2>
  <input type="hidden" name="nonce" value="{nonce}">
  {token}
  {amount}
  {fee}
  <button type="submit" class="primary" id="pay">Continue to payment</button>
</form>"#,
        nonce = esc(&form.nonce),
        token = forms::hidden_input(key, forms::Page::Invoice, &reference),
    )
}

/// The customer's open virtual account, as a second way to pay.
fn transfer_details(state: &State, i: &Invoice) -> String {
    let Ok(Some(v)) = invoices::payment_instructions(&state.kobo, i) else {
        return String::new();
    };
    let field = |k: &str| esc(v[k].as_str().unwrap_or_default());
    format!(
        r#"<section class="card invoice-transfer" aria-labelledby="transfer-title">
  <h2 id="transfer-title">Or pay by bank transfer</h2>
  <p class="hint">Transfers into this account are applied to your invoices, oldest due first.</p>
  <dl class="account">
    <div><dt>Bank</dt><dd>{}</dd></div>
    <div><dt>Account number</dt><dd class="mono strong">{}</dd></div>
    <div><dt>Account name</dt><dd>{}</dd></div>
  </dl>
</section>"#,
        field("bank_name"),
        field("account_number"),
        field("account_name"),
    )
}

fn render(
    state: &State,
    key: &FormKey,
    found: &Found,
    form: &Answers,
    problem: Option<String>,
    status: u16,
) -> HttpResponse {
    let i = &found.invoice;
    let livemode = i.mode == Mode::Live;
    let brand = found.brand.as_str();
    let number = i.number.as_deref().unwrap_or_default();
    match i.status {
        InvoiceStatus::Void => return void_page(brand, livemode, number),
        InvoiceStatus::Draft => return not_found(),
        _ => {}
    }
    let pay = if payable(i) {
        format!(
            "{}{}",
            pay_form(key, i, form, problem.as_ref()),
            transfer_details(state, i)
        )
    } else {
        String::new()
    };
    let main = format!("{}\n{pay}", document(found));
    html(
        status,
        frame(
            &format!("Invoice {number} from {brand}"),
            brand,
            livemode,
            &main,
            "",
        ),
        false,
    )
}
