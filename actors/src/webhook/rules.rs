//! The endpoint rules and signing: which URLs an endpoint may have (HTTPS,
//! allowed ports, public names only), which event types it may filter on,
//! the HMAC-SHA256 signature of each attempt, endpoint secrets, and the
//! audit entry of a secret shown in the dashboard.

use super::*;

/// Names that never reach the public internet.
const PRIVATE_SUFFIXES: &[&str] = &[
    "localhost",
    "local",
    "internal",
    "intranet",
    "lan",
    "home.arpa",
    "arpa",
    "test",
    "example",
    "invalid",
    "onion",
];

/// Checks an endpoint URL: HTTPS, port 443 or 8443, a public host name (no
/// IP literal, no single-label or reserved names), no credentials. Returns
/// the normalized URL. Errors name `url`.
pub fn validate_url(raw: &str) -> DomainResult<String> {
    let bad = |why: &str| DomainError::invalid("url", format!("`url` {why}"));
    if raw.len() > MAX_URL_LEN {
        return Err(bad(&format!("is longer than {MAX_URL_LEN} characters")));
    }
    let u = url::Url::parse(raw).map_err(|_| bad("must be an absolute https URL"))?;
    if u.scheme() != "https" {
        return Err(bad("must use https"));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(bad("must not carry credentials"));
    }
    let host = match u.host() {
        Some(url::Host::Domain(d)) => d.to_ascii_lowercase(),
        Some(_) => return Err(bad("must name a host, not an IP address")),
        None => return Err(bad("must name a host")),
    };
    let port = u.port_or_known_default().unwrap_or(0);
    if !ALLOWED_PORTS.contains(&port) {
        return Err(bad("must use port 443 or 8443"));
    }
    let name = host.trim_end_matches('.');
    let labels: Vec<&str> = name.split('.').collect();
    let tld = labels.last().copied().unwrap_or("");
    let public = labels.len() >= 2
        && labels.iter().all(|l| !l.is_empty())
        && !tld.chars().all(|c| c.is_ascii_digit())
        && name.parse::<IpAddr>().is_err()
        && !PRIVATE_SUFFIXES
            .iter()
            .any(|s| name == *s || name.ends_with(&format!(".{s}")));
    if !public {
        return Err(bad("must name a public host"));
    }
    Ok(u.to_string())
}

/// Checks an `events` filter: known types, duplicates removed.
pub fn validate_event_types(types: &[String]) -> DomainResult<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for t in types {
        if !EVENT_TYPES.contains(&t.as_str()) {
            return Err(DomainError::invalid(
                "events",
                format!("`{t}` is not an event type"),
            ));
        }
        if !out.contains(t) {
            out.push(t.clone());
        }
    }
    Ok(out)
}

// ---- signature ----

/// Hex HMAC-SHA256 of `<t>.<event id>.<body>` keyed with the whole secret
/// (`whsec_` prefix included, as UTF-8).
pub fn sign(secret: &str, t: i64, event: Uuid, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes keys of any length");
    mac.update(format!("{t}.{event}.").as_bytes());
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

/// The `Service-Signature` header value.
pub fn signature_header(secret: &str, t: i64, event: Uuid, body: &[u8]) -> String {
    format!("t={t},v1={}", sign(secret, t, event, body))
}

/// A new signing secret.
pub fn new_secret() -> String {
    format!("whsec_{}", crate::ids::random_base62(32))
}

/// Writes the audit entry of `endpoint`'s signing secret shown to the
/// dashboard user `user`; the page shows the secret only once this has
/// committed, so no reveal goes unrecorded. The entry names the endpoint,
/// its merchant and the user, never the secret.
pub async fn secret_revealed(
    env: &Env,
    audit: &crate::audit::Audit,
    endpoint: &WebhookEndpoint,
    user: Uuid,
) -> DomainResult<()> {
    use crate::audit::{AuditAction, Record};
    let mut batch = kobo_storage::Batch::new();
    audit.add_to(
        env,
        &mut batch,
        Record::new(
            AuditAction::WebhookSecretRevealed,
            "webhook_endpoint",
            endpoint.id,
        )
        .merchant(endpoint.merchant)
        .detail(serde_json::json!({
            "dashboard_user": user,
            "livemode": endpoint.mode.livemode(),
        })),
    );
    env.writer.commit(batch).await.map_err(DomainError::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_follow_the_endpoint_rules() {
        for ok in [
            "https://hooks.example.com/kobo",
            "https://hooks.example.com:8443/kobo?x=1",
            "https://HOOKS.Example.COM:443/",
            "https://hooks.kobo-test.ng:8443/a",
            "https://localhost.kobo-test.ng:8443/",
        ] {
            assert!(validate_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://hooks.example.com/",
            "https://hooks.example.com:8080/",
            "https://127.0.0.1/",
            "https://[::1]/",
            "https://0x7f.1/",
            "https://2130706433/",
            "https://localhost/",
            "https://api.localhost/",
            "https://printer.local/",
            "https://db.internal:8443/",
            "https://intranet/",
            "https://user:pw@hooks.example.com/",
            "hooks.example.com",
            "https://a.b.test/",
            "ftp://hooks.example.com/",
        ] {
            let e = validate_url(bad).unwrap_err();
            assert_eq!(e.param.as_deref(), Some("url"), "{bad}");
        }
        assert_eq!(
            validate_url("https://Hooks.Example.com").unwrap(),
            "https://hooks.example.com/"
        );
    }

    #[test]
    fn event_filters_take_known_types_once() {
        let f = validate_event_types(&[
            "payment_intent.successful".into(),
            "payout.paid".into(),
            "payment_intent.successful".into(),
        ])
        .unwrap();
        assert_eq!(f, vec!["payment_intent.successful", "payout.paid"]);
        let e = validate_event_types(&["payment.done".into()]).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("events"));
    }

    /// A known-answer test, computed independently (Python's hmac module):
    /// hmac.new(b"whsec_test", b"1700000000.00000000-0000-0000-0000-000000000000.{}", sha256).
    #[test]
    fn the_signature_is_hmac_sha256_of_t_event_and_body() {
        let sig = sign("whsec_test", 1_700_000_000, Uuid::nil(), b"{}");
        assert_eq!(
            sig,
            "0e6eef70eee7d7ce135abec081c6c0a7dba552f5a705849619c41ec88c0c1ff3"
        );
        let header = signature_header("whsec_test", 1_700_000_000, Uuid::nil(), b"{}");
        assert_eq!(header, format!("t=1700000000,v1={sig}"));
        // The key is the whole secret: another prefix signs differently.
        assert_ne!(sig, sign("test", 1_700_000_000, Uuid::nil(), b"{}"));
    }
}
