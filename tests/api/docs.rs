//! The developer experience, black-box: the API reference at `/docs` in a
//! real browser (its create-payment-intent example runs against the server
//! and answers 201), the operator API's document and page, `kobo admin`
//! against a running server, the README's CLI synopsis against `--help`, and
//! every relative link of README.md and docs/ resolving inside the
//! repository.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::browser::Driver;
use crate::helpers::spawn_app;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs a shell command line (a curl example) with `KEY` set; its stdout.
fn shell(line: &str, key: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(line)
        .env("KEY", key)
        .output()
        .expect("sh runs");
    assert!(
        out.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn the_api_reference_runs_its_create_payment_intent_example_in_a_browser() {
    let app = spawn_app().await;
    let m = app.merchant().await;

    // The page: Swagger UI from the binary, under a self-only policy.
    let page = app
        .client
        .get(format!("{}/docs/", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"));
    assert!(!csp.contains("unsafe-inline") && !csp.contains("http"));
    let html = page.text().await.unwrap();
    assert!(!html.contains("https://"), "no CDN: {html}");
    let doc: Value = app
        .client
        .get(format!("{}/v1/openapi.json", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(doc["servers"][0]["url"], app.base);

    let driver = Driver::start().await;
    let s = driver.session().await;
    s.goto(&format!("{}/docs", app.base)).await;
    let op = "#operations-payment_intents-create_payment_intent";
    s.wait_shown(op).await;
    s.screenshot("docs-reference").await;

    // Authorize with the test key.
    s.click(".auth-wrapper .btn.authorize").await;
    s.type_into(".modal-ux input", &m.test_key).await;
    s.click(".modal-ux .auth-btn-wrapper .btn.authorize").await;
    s.click(".modal-ux .btn-done").await;

    // Open the operation: the example the page shows is a curl line
    // against this server.
    s.click(&format!("{op} .opblock-summary-control")).await;
    s.wait_shown(&format!("{op} .opblock-description-wrapper pre"))
        .await;
    let example = s
        .script(
            "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent).find(t => t.startsWith('curl')) || '';",
            json!([format!("{op} .opblock-description-wrapper pre")]),
        )
        .await;
    let example = example.as_str().unwrap().trim_end().to_string();
    assert!(
        example.starts_with(&format!("curl -X POST \"{}/v1/payment_intents\"", app.base)),
        "{example}"
    );

    // "Execute" with the example's key and body, prefilled.
    s.click(&format!("{op} .btn.execute")).await;
    s.wait_text(
        &format!("{op} .live-responses-table .response .response-col_status"),
        |t| t.trim() == "201",
    )
    .await;
    s.screenshot("docs-create-payment-intent-201").await;
    let page_curl = s
        .wait_text(&format!("{op} .curl-command"), |t| t.contains("curl"))
        .await;
    assert!(page_curl.contains("Idempotency-Key: docs-create-payment-intent-1"));
    s.close().await;

    // The intent the page made.
    let list = app.get(&m.test_key, "/v1/payment_intents").await;
    assert_eq!(list.body["data"][0]["reference"], "order-1001");
    assert_eq!(list.body["data"].as_array().unwrap().len(), 1);

    // The documented example, run as a reader would (KEY set), with its
    // own Idempotency-Key and reference (the page used the example's, with
    // the body pretty-printed: other bytes, so reusing the key would be
    // 422, and the reference 409): 201.
    let fresh = example
        .replace("docs-create-payment-intent-1", "docs-again")
        .replace("order-1001", "order-1002");
    assert_eq!(
        shell(
            &format!("{fresh} -s -o /dev/null -w '%{{http_code}}'"),
            &m.test_key
        ),
        "201"
    );
    let list = app.get(&m.test_key, "/v1/payment_intents").await;
    assert_eq!(list.body["data"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn the_operator_api_has_its_own_document_and_page() {
    let app = spawn_app().await;
    let r = app
        .client
        .get(format!("{}/admin/v1/openapi.json", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "no token needed for the document");
    let doc: Value = r.json().await.unwrap();
    assert_eq!(doc["servers"][0]["url"], app.base);
    for (path, method) in [
        ("/admin/v1/merchants", "post"),
        ("/admin/v1/merchants/{id}", "get"),
        ("/admin/v1/merchants/{id}", "post"),
        ("/admin/v1/merchants/{id}/roll_keys", "post"),
        ("/admin/v1/fx_rates", "post"),
        ("/admin/v1/merchants/{id}/usdt_wallets", "post"),
        ("/admin/v1/merchants/{id}/usdt_wallets/{wallet}", "delete"),
        ("/admin/v1/payouts/{id}/approve", "post"),
        ("/admin/v1/payouts/{id}/reject", "post"),
        ("/admin/v1/clock", "get"),
        ("/admin/v1/clock/advance", "post"),
        ("/admin/v1/actors", "get"),
        ("/admin/v1/health/history", "get"),
    ] {
        assert!(doc["paths"][path][method].is_object(), "{method} {path}");
    }
    // The create example works as documented (the admin token in
    // ADMIN_TOKEN).
    let example = doc["paths"]["/admin/v1/merchants"]["post"]["x-codeSamples"][0]["source"]
        .as_str()
        .unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{example} -s"))
        .env("ADMIN_TOKEN", &app.admin_token)
        .output()
        .unwrap();
    let created: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(created["test_secret_key"]
        .as_str()
        .unwrap()
        .starts_with("svc_test_"));

    let page = app
        .client
        .get(format!("{}/docs/admin/swagger-initializer.js", app.base))
        .send()
        .await
        .unwrap();
    assert!(page.headers().contains_key("content-security-policy"));
    assert!(page
        .text()
        .await
        .unwrap()
        .contains("\"url\": \"/admin/v1/openapi.json\""));
    let redirect = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/docs", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(redirect.status(), 301);
    assert_eq!(redirect.headers()["location"], "/docs/");
}

/// `kobo admin ...` against the test server; its stdout as JSON.
fn admin(base: &str, auth: &[&str], args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_kobo"))
        .arg("admin")
        .args(["--base", base])
        .args(auth)
        .args(args)
        .env_remove("KOBO_ADMIN_TOKEN")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kobo admin {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn kobo_admin_makes_the_operator_calls() {
    let app = spawn_app().await;
    let token = ["--token", app.admin_token.as_str()];
    let created = admin(&app.base, &token, &["create-merchant", "Ada Stores"]);
    let id = created["id"].as_str().unwrap();
    let old_key = created["test_secret_key"].as_str().unwrap().to_string();
    assert_eq!(created["settings"]["live_approved"], false);

    // The token read from <data>/admin-token.
    let data = tempfile::tempdir().unwrap();
    std::fs::write(
        data.path().join("admin-token"),
        format!("{}\n", app.admin_token),
    )
    .unwrap();
    let from_file = ["--data", data.path().to_str().unwrap()];
    let approved = admin(&app.base, &from_file, &["approve-live", id]);
    assert_eq!(approved["settings"]["live_approved"], true);
    assert_eq!(
        admin(&app.base, &from_file, &["get-merchant", id])["settings"]["live_approved"],
        true
    );

    let rolled = admin(&app.base, &token, &["roll-keys", id, "--mode", "test"]);
    let new_key = rolled["secret_key"].as_str().unwrap();
    app.get(&old_key, "/v1/balance").await.assert_status(401);
    app.get(new_key, "/v1/balance").await.assert_status(200);

    let rate = admin(&app.base, &token, &["fx-rate", "160000"]);
    assert_eq!(rate["rate"], 160000);
    let before = app.now().await;
    let clock = admin(&app.base, &token, &["advance", "--seconds", "3600"]);
    let after: chrono::DateTime<chrono::Utc> = clock["now"].as_str().unwrap().parse().unwrap();
    assert_eq!(after - before, chrono::Duration::hours(1));
    assert_eq!(admin(&app.base, &token, &["clock"])["manual"], true);

    // A wrong token: exit 1 with the server's message.
    let out = Command::new(env!("CARGO_BIN_EXE_kobo"))
        .args([
            "admin",
            "--base",
            &app.base,
            "--token",
            "wrong-token-0123456789",
        ])
        .arg("clock")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"));
}

/// The flags `kobo <sub> --help` shows.
fn help_flags(sub: &[&str]) -> Vec<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_kobo"))
        .args(sub)
        .arg("--help")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut flags: Vec<String> = text
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']' || c == '=')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.trim_end_matches(['.', ')', ':']).to_string())
        .filter(|w| w != "--help" && w != "--version")
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

#[test]
fn the_readme_synopsis_shows_every_flag_of_help() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let synopsis = readme
        .split("## Running it")
        .nth(1)
        .expect("README has a Running it section");
    let synopsis = synopsis.split("\n## ").next().unwrap();
    for sub in [
        vec!["serve"],
        vec!["listen"],
        vec!["admin"],
        vec!["admin", "advance"],
        vec!["admin", "roll-keys"],
        vec!["admin", "audit"],
        vec!["backup"],
        vec!["restore"],
        vec!["check"],
    ] {
        let flags = help_flags(&sub);
        assert!(!flags.is_empty(), "{sub:?}");
        for flag in flags {
            assert!(
                synopsis.contains(&format!("[{flag}"))
                    || synopsis.contains(&format!(" {flag} "))
                    || synopsis.contains(&format!(" {flag}\n")),
                "`kobo {} --help` shows {flag}, the README's synopsis does not",
                sub.join(" ")
            );
        }
    }
}

/// README.md, docs/*.md and docs/examples/*: every Markdown link.
fn links() -> Vec<(PathBuf, String)> {
    let mut files = vec![repo().join("README.md")];
    for dir in ["docs", "docs/examples"] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                files.push(p);
            }
        }
    }
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let end = rest.find(')').unwrap_or(rest.len());
            out.push((f.clone(), rest[..end].to_string()));
        }
    }
    out
}

#[test]
fn every_link_of_the_readme_and_docs_stays_in_the_repository() {
    let root = repo().canonicalize().unwrap();
    let links = links();
    assert!(links.len() > 10, "{links:?}");
    for (file, link) in links {
        let target = link.split('#').next().unwrap();
        if target.is_empty() {
            continue; // an anchor in the same file
        }
        assert!(
            !target.contains("://") && !target.starts_with("mailto:"),
            "{}: {link} leaves the repository",
            file.display()
        );
        let path = file.parent().unwrap().join(target);
        let resolved = path
            .canonicalize()
            .unwrap_or_else(|_| panic!("{}: {link} does not exist", file.display()));
        assert!(
            resolved.starts_with(&root),
            "{}: {link} points outside the repository",
            file.display()
        );
    }
    // Nor do they send the reader to files beside the repository.
    let mut texts = vec![repo().join("README.md")];
    for e in std::fs::read_dir(repo().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            texts.push(p);
        }
    }
    for f in texts {
        let text = std::fs::read_to_string(&f).unwrap();
        let f = f.display();
        for gone in ["../shared", "shared/spec", "service-api.md", "CONTRACT"] {
            assert!(!text.contains(gone), "{f} mentions {gone}");
        }
    }
}

/// docs/guide.md names every operation of both OpenAPI documents.
#[tokio::test]
async fn the_guide_lists_every_operation() {
    let app = spawn_app().await;
    let guide = std::fs::read_to_string(repo().join("docs/guide.md")).unwrap();
    for path in ["/v1/openapi.json", "/admin/v1/openapi.json"] {
        let doc: Value = app
            .client
            .get(format!("{}{path}", app.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for (p, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                let line = format!("`{} {p}`", method.to_uppercase());
                assert!(guide.contains(&line), "docs/guide.md lacks {line}");
            }
        }
    }
}
