//! `kobo admin`: the common operator calls (`/admin/v1`) from the command
//! line, against a running server. The admin token comes from `--token` /
//! `KOBO_ADMIN_TOKEN`, else from `<data>/admin-token`, the file `kobo
//! serve` generates. Each command prints the JSON answer; an error answer
//! prints its message and exits 1.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::{base_url, DEFAULT_BASE};
use crate::server::ADMIN_TOKEN_FILE;

#[derive(clap::Args, Debug, Clone)]
pub struct AdminArgs {
    /// The kobo server.
    #[arg(long, env = "KOBO_BASE", default_value = DEFAULT_BASE, global = true)]
    pub base: String,
    /// The server's data directory, to read `admin-token` from.
    #[arg(long, env = "KOBO_DATA", default_value = "./data", global = true)]
    pub data: PathBuf,
    /// The admin token (instead of reading `<data>/admin-token`).
    #[arg(long, env = "KOBO_ADMIN_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    #[command(subcommand)]
    pub command: AdminCommand,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum AdminCommand {
    /// Create a merchant; prints it with its two secret keys (shown once).
    CreateMerchant {
        /// The merchant's name.
        name: String,
        /// Settings as a JSON object (see docs/guide.md).
        #[arg(long, value_name = "JSON")]
        settings: Option<String>,
    },
    /// Show a merchant and its settings.
    GetMerchant { merchant: String },
    /// Change a merchant's settings (a partial JSON object).
    UpdateSettings {
        merchant: String,
        #[arg(value_name = "JSON")]
        settings: String,
    },
    /// Approve a merchant for live payments (`live_approved: true`).
    ApproveLive { merchant: String },
    /// Replace a merchant's secret key of a mode; prints the new key once.
    RollKeys {
        merchant: String,
        #[arg(long, value_parser = ["test", "live"], default_value = "test")]
        mode: String,
    },
    /// Publish the dollar rate (kobo per US dollar, e.g. 160000 for ₦1,600).
    FxRate { rate: i64 },
    /// Show the service clock.
    Clock,
    /// Move the manual clock forward (`--clock manual` servers only).
    Advance {
        /// By this many seconds.
        #[arg(long, conflicts_with = "to", required_unless_present = "to")]
        seconds: Option<i64>,
        /// To this RFC 3339 date-time.
        #[arg(long, value_name = "DATE-TIME")]
        to: Option<String>,
    },
    /// Approve a payout held for approval.
    ApprovePayout { payout: String },
    /// Reject a payout held for approval.
    RejectPayout { payout: String },
    /// Back up the running server's store into its backup directory.
    Backup,
    /// The operator audit log, newest first.
    Audit {
        /// Only this merchant's entries.
        #[arg(long)]
        merchant: Option<String>,
        /// Only this action (e.g. merchant.key_rolled).
        #[arg(long)]
        action: Option<String>,
        /// From this RFC 3339 date-time (inclusive).
        #[arg(long, value_name = "DATE-TIME")]
        from: Option<String>,
        /// To this RFC 3339 date-time (inclusive).
        #[arg(long, value_name = "DATE-TIME")]
        to: Option<String>,
        /// Entries per page (1 to 100).
        #[arg(long)]
        limit: Option<u32>,
        /// The page after this entry id.
        #[arg(long, value_name = "ID")]
        starting_after: Option<String>,
    },
}

pub async fn run(args: AdminArgs) -> Result<()> {
    let base = base_url(&args.base)?;
    let token = token(&args)?;
    let (method, path, body) = request(&args.command)?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?;
    let mut req = client
        .request(method.clone(), format!("{base}{path}"))
        .bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req
        .send()
        .await
        .with_context(|| format!("{method} {base}{path}"))?;
    let status = res.status();
    let text = res.text().await?;
    let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if !status.is_success() {
        let message = value["error"]["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| value.to_string());
        bail!("{method} {path} answered {}: {message}", status.as_u16());
    }
    println!("{}", serde_json::to_string_pretty(&value)?);
    Ok(())
}

/// The token: the flag or variable, else `<data>/admin-token`.
fn token(args: &AdminArgs) -> Result<String> {
    if let Some(t) = &args.token {
        return Ok(t.trim().to_string());
    }
    let path = args.data.join(ADMIN_TOKEN_FILE);
    let t = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading the admin token from {} (pass --data DIR of the server, or --token / KOBO_ADMIN_TOKEN)",
            path.display()
        )
    })?;
    Ok(t.trim().to_string())
}

fn merchant_path(id: &str) -> String {
    format!("/admin/v1/merchants/{}", segment(id))
}

/// A path segment, percent-encoded.
fn segment(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

fn json_arg(name: &str, text: &str) -> Result<Value> {
    let v: Value =
        serde_json::from_str(text).with_context(|| format!("{name} is not valid JSON"))?;
    if !v.is_object() {
        bail!("{name} must be a JSON object");
    }
    Ok(v)
}

/// The call a command makes.
fn request(cmd: &AdminCommand) -> Result<(reqwest::Method, String, Option<Value>)> {
    use reqwest::Method;
    Ok(match cmd {
        AdminCommand::CreateMerchant { name, settings } => {
            let mut body = json!({ "name": name });
            if let Some(s) = settings {
                body["settings"] = json_arg("--settings", s)?;
            }
            (Method::POST, "/admin/v1/merchants".into(), Some(body))
        }
        AdminCommand::GetMerchant { merchant } => (Method::GET, merchant_path(merchant), None),
        AdminCommand::UpdateSettings { merchant, settings } => (
            Method::POST,
            merchant_path(merchant),
            Some(json!({ "settings": json_arg("settings", settings)? })),
        ),
        AdminCommand::ApproveLive { merchant } => (
            Method::POST,
            merchant_path(merchant),
            Some(json!({ "settings": { "live_approved": true } })),
        ),
        AdminCommand::RollKeys { merchant, mode } => (
            Method::POST,
            format!("{}/roll_keys", merchant_path(merchant)),
            Some(json!({ "mode": mode })),
        ),
        AdminCommand::FxRate { rate } => (
            Method::POST,
            "/admin/v1/fx_rates".into(),
            Some(json!({ "rate": rate })),
        ),
        AdminCommand::Clock => (Method::GET, "/admin/v1/clock".into(), None),
        AdminCommand::Advance { seconds, to } => {
            let body = match (seconds, to) {
                (Some(s), _) => json!({ "seconds": s }),
                (None, Some(t)) => json!({ "to": t }),
                (None, None) => bail!("give --seconds N or --to DATE-TIME"),
            };
            (Method::POST, "/admin/v1/clock/advance".into(), Some(body))
        }
        AdminCommand::ApprovePayout { payout } => (
            Method::POST,
            format!("/admin/v1/payouts/{}/approve", segment(payout)),
            None,
        ),
        AdminCommand::RejectPayout { payout } => (
            Method::POST,
            format!("/admin/v1/payouts/{}/reject", segment(payout)),
            None,
        ),
        AdminCommand::Backup => (Method::POST, "/admin/v1/backups".into(), None),
        AdminCommand::Audit {
            merchant,
            action,
            from,
            to,
            limit,
            starting_after,
        } => {
            let limit = limit.map(|n| n.to_string());
            let pairs = [
                ("merchant", merchant.as_deref()),
                ("action", action.as_deref()),
                ("from", from.as_deref()),
                ("to", to.as_deref()),
                ("limit", limit.as_deref()),
                ("starting_after", starting_after.as_deref()),
            ];
            let mut query = url::form_urlencoded::Serializer::new(String::new());
            for (k, v) in pairs {
                if let Some(v) = v {
                    query.append_pair(k, v);
                }
            }
            let query = query.finish();
            let path = if query.is_empty() {
                "/admin/v1/audit".to_string()
            } else {
                format!("/admin/v1/audit?{query}")
            };
            (Method::GET, path, None)
        }
    })
}
