//! The frame every dashboard page shares: the head (style sheet, script,
//! Content-Security-Policy), the bar with the merchant's name, the
//! test/live switch and the brand switch, the nav, and the footer; the
//! message, 403 and error pages; money and time formatting.

use actix_web::HttpResponse;
use chrono::{DateTime, Utc};
use serde_json::Value;

use kobo_actors::money::Currency;
use kobo_actors::{DomainError, Mode};

use super::{Ctx, CSS_PATH, JS_PATH};
use crate::checkout::esc;

/// The policy of every dashboard page: this origin's script and style
/// only, nothing inline, no frames, forms to this origin only.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The nav: path, label, and the page group it marks current.
const NAV: &[(&str, &str)] = &[
    ("/dashboard", "Home"),
    ("/dashboard/payments", "Payments"),
    ("/dashboard/payouts", "Payouts"),
    ("/dashboard/balance", "Balance"),
    ("/dashboard/customers", "Customers"),
    ("/dashboard/mandates", "Mandates"),
    ("/dashboard/payment_links", "Payment links"),
    ("/dashboard/invoices", "Invoices"),
    ("/dashboard/subscriptions", "Subscriptions"),
    ("/dashboard/plans", "Plans"),
    ("/dashboard/disputes", "Disputes"),
    ("/dashboard/webhooks", "Webhooks"),
    ("/dashboard/developers", "Developers"),
    ("/dashboard/settings", "Settings"),
];

/// An HTML response with the dashboard's headers.
pub fn html(status: u16, body: String) -> HttpResponse {
    crate::page_headers::html_page(status, body, CSP, "same-origin")
}

fn head(title: &str) -> String {
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{} · kobo dashboard</title>
<link rel="stylesheet" href="{CSS_PATH}">
<script src="{JS_PATH}" defer></script>
</head>"#,
        esc(title)
    )
}

/// A signed-in page: the bar (merchant, switches, user), the nav with
/// `current` marked, and `main`.
pub fn page(ctx: &Ctx, title: &str, current: &str, main: &str) -> HttpResponse {
    html(200, frame(ctx, title, current, main))
}

pub fn frame(ctx: &Ctx, title: &str, current: &str, main: &str) -> String {
    // Where the switches come back to: this page, or (when it answers a
    // form's POST) its group's page.
    let path = ctx.req.path();
    let back = match ctx.req.query_string() {
        _ if ctx.req.method() != actix_web::http::Method::GET => match current {
            "" => "/dashboard".to_string(),
            c => c.to_string(),
        },
        "" => path.to_string(),
        q => format!("{path}?{q}"),
    };
    let live = ctx.mode() == Mode::Live;
    let mode_form = format!(
        r#"<form method="post" action="/dashboard/switch" class="switch">
  {csrf}<input type="hidden" name="back" value="{back}">
  <input type="hidden" name="mode" value="{other}">
  <span class="mode mode-{mode}" id="mode-label">{mode_label}</span>
  <button type="submit" aria-describedby="mode-label">Switch to {other} mode</button>
</form>"#,
        csrf = ctx.csrf_input(),
        back = esc(&back),
        mode = ctx.mode().as_str(),
        mode_label = if live { "Live mode" } else { "Test mode" },
        other = if live { "test" } else { "live" },
    );
    let mut options = format!(
        r#"<option value="all"{}>Whole business</option>"#,
        if ctx.session.brand.is_none() {
            " selected"
        } else {
            ""
        }
    );
    for (id, name) in &ctx.brands {
        options.push_str(&format!(
            r#"<option value="{id}"{}>{}</option>"#,
            if ctx.session.brand == Some(*id) {
                " selected"
            } else {
                ""
            },
            esc(name)
        ));
    }
    let brand_form = format!(
        r#"<form method="post" action="/dashboard/switch" class="switch" data-autosubmit>
  {csrf}<input type="hidden" name="back" value="{back}">
  <input type="hidden" name="mode" value="{mode}">
  <label for="brand-switch">Brand</label>
  <select id="brand-switch" name="brand">{options}</select>
  <button type="submit">Show</button>
</form>"#,
        csrf = ctx.csrf_input(),
        back = esc(&back),
        mode = ctx.mode().as_str(),
    );
    let nav: String = NAV
        .iter()
        .map(|(href, label)| {
            let here = if *href == current {
                r#" aria-current="page""#
            } else {
                ""
            };
            format!(r#"<li><a href="{href}"{here}>{label}</a></li>"#)
        })
        .collect();
    format!(
        r##"{head}
<body data-mode="{mode}">
<a class="skip" href="#main">Skip to content</a>
<header class="bar">
  <span class="merchant">{merchant}</span>
  {mode_form}
  {brand_form}
  <form method="post" action="/dashboard/sign-out" class="signout">
    {csrf}<span class="who">{email} ({role})</span>
    <button type="submit">Sign out</button>
  </form>
</header>
<nav aria-label="Dashboard"><ul>{nav}</ul></nav>
<main id="main" tabindex="-1">
<h1>{title}</h1>
{main}
</main>
</body>
</html>
"##,
        head = head(title),
        mode = ctx.mode().as_str(),
        merchant = esc(&ctx.merchant.name),
        csrf = ctx.csrf_input(),
        email = esc(&ctx.user.email),
        role = ctx.user.role.as_str(),
        title = esc(title),
    )
}

/// A page without the signed-in frame (sign-in, set-password, errors).
pub fn bare(status: u16, title: &str, main: &str) -> HttpResponse {
    html(
        status,
        format!(
            r#"{head}
<body class="bare">
<main id="main" tabindex="-1">
<h1>{title}</h1>
{main}
</main>
</body>
</html>
"#,
            head = head(title),
            title = esc(title)
        ),
    )
}

/// A page that says one thing.
pub fn message(status: u16, title: &str, text: &str) -> HttpResponse {
    bare(status, title, &format!("<p>{}</p>", esc(text)))
}

/// The 403 page (a viewer's refused action, a bad CSRF token), inside the
/// frame.
pub fn forbidden(ctx: &Ctx, text: &str) -> HttpResponse {
    html(
        403,
        frame(
            ctx,
            "Not allowed",
            "",
            &format!(
                r#"<p class="error" role="alert">{}</p><p><a href="/dashboard">Back to the dashboard</a></p>"#,
                esc(text)
            ),
        ),
    )
}

/// The 404 page of an unknown object (or another merchant's: the same).
pub fn not_found(ctx: &Ctx, what: &str) -> HttpResponse {
    html(
        404,
        frame(
            ctx,
            "Not found",
            "",
            &format!(
                "<p>No such {} in {} mode.</p>",
                esc(what),
                ctx.mode().as_str()
            ),
        ),
    )
}

pub fn server_error(e: DomainError) -> HttpResponse {
    tracing::error!(code = %e.code, message = %e.message, "dashboard page failed");
    message(
        500,
        "Something went wrong",
        "The dashboard could not load this page. Try again in a moment.",
    )
}

/// Money of an API view's amount and currency (`₦1,000.00`).
pub fn money(amount: i64, currency: &str) -> String {
    let c = match currency {
        "USD" => Currency::USD,
        _ => Currency::NGN,
    };
    let sign = if amount < 0 { "-" } else { "" };
    format!("{sign}{}", crate::checkout::money(amount.abs(), c))
}

/// `amount` and `currency` of a view.
pub fn money_of(v: &Value) -> String {
    money(
        v["amount"].as_i64().unwrap_or(0),
        v["currency"].as_str().unwrap_or("NGN"),
    )
}

/// A view's RFC 3339 time as `2026-11-26 08:30 UTC`.
pub fn time(v: &Value) -> String {
    v.as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| {
            t.with_timezone(&Utc)
                .format("%Y-%m-%d %H:%M UTC")
                .to_string()
        })
        .unwrap_or_default()
}

/// A string field of a view, escaped (empty when absent).
pub fn text(v: &Value) -> String {
    esc(v.as_str().unwrap_or(""))
}

/// A status as a badge.
pub fn status(v: &Value) -> String {
    let s = v.as_str().unwrap_or("");
    format!(
        r#"<span class="status status-{0}">{0}</span>"#,
        esc(s).replace(' ', "_")
    )
}

/// The alert of an action's outcome.
pub fn alert(error: Option<&str>) -> String {
    match error {
        Some(e) => format!(r#"<p class="error" role="alert">{}</p>"#, esc(e)),
        None => String::new(),
    }
}
