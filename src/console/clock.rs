//! The service clock: what time kobo thinks it is and, on a manual clock
//! (`--clock manual`), moving it forward (the operator API's
//! `advance_clock_with`: every timer that falls due on the way runs before
//! the page answers). The session moves with the clock it moved.

use crate::api::route_table::Routes;
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{Map, Value};

use crate::api::admin::{advance_clock_with, AdvanceClock};
use crate::api::{ApiError, State};
use crate::checkout::esc;

use super::{
    audit, body, error_banner, error_status, html, notice, operator, page, post, see_other,
    ConsoleData, Operator,
};

pub fn configure(cfg: &mut Routes) {
    cfg.route("/console/clock", web::get().to(show))
        .route("/console/clock", web::post().to(advance));
}

const NOTICES: &[(&str, &str)] = &[(
    "advanced",
    "Clock advanced; every timer that fell due has run.",
)];

fn clock_page(op: &Operator, state: &State, banner: &str, seconds: &str) -> String {
    let now = state.kobo.clock.now();
    let manual = state.kobo.clock.is_manual();
    let form = if manual {
        let presets: String = [("60", "1 minute"), ("3600", "1 hour"), ("86400", "1 day")]
            .iter()
            .map(|(s, label)| {
                format!(
                    r#"<form method="post" action="/console/clock" class="preset">{csrf}<input type="hidden" name="seconds" value="{s}"><button type="submit" class="secondary">+ {label}</button></form>"#,
                    csrf = op.csrf_input()
                )
            })
            .collect();
        format!(
            r#"<section class="card" aria-labelledby="advance-title"><h2 id="advance-title">Advance the clock</h2>
<form method="post" action="/console/clock">{csrf}
<label for="seconds">Seconds to move forward</label>
<input id="seconds" name="seconds" inputmode="numeric" required value="{seconds}">
<button type="submit">Advance</button></form>
<div class="presets">{presets}</div></section>"#,
            csrf = op.csrf_input(),
            seconds = esc(seconds),
        )
    } else {
        "<p>The server runs on the system clock: it cannot be moved (start it with <code>--clock manual</code> for that).</p>".into()
    };
    let main = format!(
        r#"{banner}<p class="clock">Service time: <time datetime="{iso}"><strong>{shown}</strong></time> ({kind} clock)</p>{form}"#,
        iso = now.to_rfc3339(),
        shown = now.format("%Y-%m-%d %H:%M:%S UTC"),
        kind = if manual { "manual" } else { "system" },
    );
    page(op, "/console/clock", "Clock", &main, false)
}

async fn show(req: HttpRequest, state: State, console: ConsoleData) -> HttpResponse {
    let op = match operator(&req, &state, &console).await {
        Ok(op) => op,
        Err(r) => return r,
    };
    html(200, clock_page(&op, &state, &notice(&req, NOTICES), ""))
}

async fn advance(
    req: HttpRequest,
    state: State,
    console: ConsoleData,
    payload: web::Payload,
) -> HttpResponse {
    let (op, form) = match post(&req, &state, &console, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let text = form.text("seconds").trim().to_string();
    let seconds = text
        .parse::<i64>()
        .map(Value::from)
        .unwrap_or_else(|_| Value::String(text.clone()));
    let mut fields = Map::new();
    fields.insert("seconds".into(), seconds);
    let before = state.kobo.clock.now();
    let done: Result<_, ApiError> = async {
        let b: AdvanceClock = body(fields)?;
        advance_clock_with(&state, b, audit(&req)).await
    }
    .await;
    match done {
        Ok(now) => {
            console.sessions.shift(&op.token, now - before).await;
            see_other("/console/clock?done=advanced")
        }
        Err(ApiError(e)) => html(
            error_status(&e),
            clock_page(&op, &state, &error_banner(&e), &text),
        ),
    }
}
