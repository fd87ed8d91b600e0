//! Form tokens of the sandbox pages' Approve and Decline buttons (the bank
//! page of the redirect card, the mandate authorization page).
//!
//! The page puts a token in each form (`<input type=hidden name=form_token>`):
//! HMAC-SHA256 of the page's kind and reference under a key kept in the
//! data directory (not in the store, mode 0600, made on first start). A
//! POST from a browser must carry the page's token, checked in constant
//! time; without it, or with a wrong one, it is refused (403) and nothing
//! changes. So another site cannot make a visitor's browser answer for
//! them.
//!
//! A program may still POST directly (CONTRACT section 5, fixed): a
//! request that carries none of the headers every browser adds to a form
//! POST or a script's request (`Origin`, `Sec-Fetch-*`, `Referer`,
//! `Cookie`) and does not ask for HTML is not a browser and needs no token
//! (a browser cannot be made to leave `Origin` out of a cross-site POST).
//! A token that is sent is always checked.

use std::path::Path;

use actix_web::http::header;
use actix_web::HttpRequest;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The file (in the data directory) holding the form-token key.
pub const FORM_KEY_FILE: &str = "sandbox-form-key";

/// The form field carrying the token.
pub const FIELD: &str = "form_token";

/// Which page a token belongs to (a bank page's token is no mandate
/// page's, even for the same reference).
#[derive(Debug, Clone, Copy)]
pub enum Page {
    Bank,
    Mandate,
    /// A payment link's page (`/p/<slug>`); the reference is the link id
    /// and the form's nonce.
    Link,
    /// A hosted invoice page (`/i/<code>`); the reference is the invoice
    /// id and the form's nonce.
    Invoice,
    /// The manage page's cancel form; the reference is the subscription
    /// id and the form's nonce.
    Manage,
}

impl Page {
    fn label(self) -> &'static [u8] {
        match self {
            Page::Bank => b"sandbox bank",
            Page::Mandate => b"sandbox mandate",
            Page::Link => b"payment link",
            Page::Invoice => b"invoice",
            Page::Manage => b"subscription manage form",
        }
    }
}

/// The key of form tokens (app data of the server).
#[derive(Clone)]
pub struct FormKey([u8; 32]);

impl std::fmt::Debug for FormKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FormKey(..)")
    }
}

impl FormKey {
    /// Loads the key, creating it (mode 0600) on first start.
    pub fn load(data: &Path) -> anyhow::Result<FormKey> {
        crate::keyfile::load_or_create(data, FORM_KEY_FILE).map(FormKey)
    }

    fn mac(&self, page: Page, reference: &str) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(b"kobo form token v1\0");
        mac.update(page.label());
        mac.update(b"\0");
        mac.update(reference.as_bytes());
        mac
    }

    /// The token of the forms of `page` for `reference` (64 hex digits).
    pub fn token(&self, page: Page, reference: &str) -> String {
        hex::encode(self.mac(page, reference).finalize().into_bytes())
    }

    /// Whether `token` is the token of `page` for `reference`, compared in
    /// constant time.
    pub fn verify(&self, page: Page, reference: &str, token: &str) -> bool {
        let Ok(bytes) = hex::decode(token) else {
            return false;
        };
        self.mac(page, reference).verify_slice(&bytes).is_ok()
    }

    /// Whether a POST of `body` (form-encoded) to a form of `page` for
    /// `reference` may proceed: a token sent is checked; a browser must
    /// send one.
    pub fn allows(&self, page: Page, reference: &str, req: &HttpRequest, body: &[u8]) -> bool {
        match token_of(body) {
            Some(t) => self.verify(page, reference, &t),
            None => !from_browser(req),
        }
    }
}

/// The `form_token` field of a form-encoded body (the first one).
fn token_of(body: &[u8]) -> Option<String> {
    url::form_urlencoded::parse(body)
        .find(|(k, _)| k == FIELD)
        .map(|(_, v)| v.into_owned())
}

/// Whether a request comes from a browser: it carries a header browsers
/// add (and a page cannot remove) or asks for HTML.
pub fn from_browser(req: &HttpRequest) -> bool {
    let h = req.headers();
    h.contains_key(header::ORIGIN)
        || h.contains_key(header::REFERER)
        || h.contains_key(header::COOKIE)
        || h.contains_key("sec-fetch-site")
        || h.contains_key("sec-fetch-mode")
        || h.contains_key("sec-fetch-dest")
        || super::wants_html(req)
}

/// The hidden input carrying the token.
pub fn hidden_input(key: &FormKey, page: Page, reference: &str) -> String {
    format!(
        r#"<input type="hidden" name="{FIELD}" value="{}">"#,
        key.token(page, reference)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_per_page_and_reference_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let k = FormKey::load(dir.path()).unwrap();
        let again = FormKey::load(dir.path()).unwrap();
        assert_eq!(k.0, again.0);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join(FORM_KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);

        let t = k.token(Page::Bank, "ref1");
        assert_eq!(t.len(), 64);
        assert!(k.verify(Page::Bank, "ref1", &t));
        assert!(!k.verify(Page::Bank, "ref2", &t));
        assert!(!k.verify(Page::Mandate, "ref1", &t));
        assert!(!k.verify(Page::Bank, "ref1", &t[..63]));
        assert!(!k.verify(Page::Bank, "ref1", ""));
        assert!(!k.verify(Page::Bank, "ref1", "zz"));
        let other = FormKey::load(tempfile::tempdir().unwrap().path()).unwrap();
        assert!(!other.verify(Page::Bank, "ref1", &t));
    }

    #[test]
    fn a_browser_needs_a_token_a_program_does_not_and_a_sent_token_is_checked() {
        use actix_web::test::TestRequest;
        let k = FormKey([7; 32]);
        let good = format!("{FIELD}={}", k.token(Page::Bank, "r"));
        let program = TestRequest::post().to_http_request();
        assert!(k.allows(Page::Bank, "r", &program, b""));
        assert!(k.allows(Page::Bank, "r", &program, good.as_bytes()));
        assert!(!k.allows(Page::Bank, "r", &program, b"form_token=00"));
        for (name, value) in [
            ("origin", "https://evil.example"),
            ("origin", "null"),
            ("referer", "https://evil.example/x"),
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "navigate"),
            ("cookie", "a=b"),
            ("accept", "text/html,application/xhtml+xml"),
        ] {
            let browser = TestRequest::post()
                .insert_header((name, value))
                .to_http_request();
            assert!(!k.allows(Page::Bank, "r", &browser, b""), "{name}");
            assert!(!k.allows(Page::Bank, "r", &browser, b"x=1"), "{name}");
            assert!(
                !k.allows(Page::Bank, "r", &browser, b"form_token=ab"),
                "{name}"
            );
            assert!(
                k.allows(Page::Bank, "r", &browser, good.as_bytes()),
                "{name}"
            );
        }
    }
}
