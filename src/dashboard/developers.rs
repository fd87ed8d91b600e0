//! Developers: the secret key of the session's mode (owners roll it, after
//! a confirmation; the new key is shown once, on the page that answers the
//! roll, and never stored in the clear), and the API request log of the
//! last 24 hours ([`crate::api::request_log`]).
//!
//! A roll sends the merchant actor the same `RollKey` the operator API's
//! `POST /admin/v1/merchants/{id}/roll_keys` sends, audited with origin
//! `dashboard`.

use actix_web::{web, HttpMessage, HttpRequest, HttpResponse};

use kobo_actors::admin::RollKey;
use kobo_actors::audit::Audit;

use super::layout;
use super::{signed_in, signed_in_form, Ctx};
use crate::api::request::RequestId;
use crate::api::State;
use crate::checkout::esc;

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.route("/dashboard/developers", web::get().to(page))
        .route("/dashboard/developers/roll-key", web::post().to(roll));
}

fn render(ctx: &Ctx, top: &str, status: u16) -> HttpResponse {
    let mode = ctx.mode().as_str();
    let roll = if ctx.user.role.is_owner() {
        format!(
            r#"<form method="post" action="/dashboard/developers/roll-key" class="stack" data-confirm="Roll the {mode} secret key? The current key stops working at once.">
  {inputs}
  <input type="checkbox" id="k-confirm" name="confirm" value="yes" required>
  <label for="k-confirm" class="inline">I understand the current {mode} key stops working at once</label>
  <button type="submit">Roll {mode} key</button>
</form>"#,
            inputs = ctx.form_inputs(),
        )
    } else {
        r#"<p class="hint">Only an owner can roll keys.</p>"#.to_string()
    };
    let log =
        ctx.state
            .request_log
            .recent(ctx.merchant_id(), ctx.mode(), ctx.state.kobo.clock.now());
    let rows: String = log
        .iter()
        .take(200)
        .map(|r| {
            format!(
                r#"<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td class="code-{}">{}</td><td><code>{}</code></td></tr>"#,
                r.at.format("%Y-%m-%d %H:%M:%S"),
                r.method,
                esc(&r.path),
                r.status / 100,
                r.status,
                esc(&r.request_id)
            )
        })
        .collect();
    let rows = if rows.is_empty() {
        r#"<tr><td colspan="5">No API requests in the last 24 hours.</td></tr>"#.to_string()
    } else {
        rows
    };
    let main = format!(
        r#"{top}<section class="card" aria-labelledby="keys-h">
<h2 id="keys-h">Secret key ({mode} mode)</h2>
<p>Your server sends it as <code>Authorization: Bearer svc_{mode}_…</code>. kobo keeps only its hash, so it is shown once, when it is made.</p>
{roll}
</section>
<section class="card" aria-labelledby="log-h">
<h2 id="log-h">API requests, last 24 hours</h2>
<p class="hint">The newest 200 of up to 500 kept since this server started.</p>
<div class="scroll"><table><thead><tr><th scope="col">At (UTC)</th><th scope="col">Method</th><th scope="col">Path</th><th scope="col">Status</th><th scope="col">Request id</th></tr></thead><tbody>{rows}</tbody></table></div>
</section>"#,
    );
    layout::html(
        status,
        layout::frame(ctx, "Developers", "/dashboard/developers", &main),
    )
}

async fn page(req: HttpRequest, state: State) -> HttpResponse {
    match signed_in(&req, &state).await {
        Ok(ctx) => render(&ctx, "", 200),
        Err(r) => r,
    }
}

async fn roll(req: HttpRequest, state: State, payload: web::Payload) -> HttpResponse {
    let (ctx, form) = match signed_in_form(&req, &state, payload).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    if !ctx.user.role.is_owner() {
        return layout::forbidden(&ctx, "Only an owner can roll keys.");
    }
    if form.get("confirm") != "yes" {
        return render(
            &ctx,
            &layout::alert(Some("Tick the box to confirm the roll.")),
            400,
        );
    }
    let request_id = req
        .extensions()
        .get::<RequestId>()
        .map(|r| r.0.clone())
        .unwrap_or_default();
    let roll = RollKey(ctx.mode(), Audit::dashboard(request_id));
    let rolled = match state.kobo.merchants.send(ctx.merchant_id(), roll).await {
        Ok(Ok(k)) => k,
        Ok(Err(e)) | Err(e) => return layout::server_error(e),
    };
    let top = format!(
        r#"<section class="card reveal" aria-labelledby="new-key-h" role="status">
<h2 id="new-key-h">Your new {mode} secret key</h2>
<p>Copy it now: it is not shown again. The old key no longer works.</p>
<p><code id="new-key" class="wrap">{key}</code></p>
</section>"#,
        mode = ctx.mode().as_str(),
        key = esc(&rolled.secret_key),
    );
    render(&ctx, &top, 200)
}
