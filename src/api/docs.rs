//! The browsable API reference: Swagger UI (built into the binary, no CDN,
//! works offline) at `/docs/` for the public API and at `/docs/admin/` for
//! the operator API, each page under a Content-Security-Policy that allows
//! nothing but this server.
//!
//! It also finishes the served OpenAPI documents: `servers` is the
//! service's `--base-url`, and each operation carries a `curl` example
//! against it (in its description, where the page shows it, and as
//! `x-codeSamples`), with a request body and an `Idempotency-Key` that work
//! against the sandbox for the common operations (the same values prefill
//! the page's "Try it out").

use std::sync::{Arc, OnceLock};

use actix_web::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, LOCATION};
use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::{json, Value};
use utoipa_swagger_ui::Config;

use super::{resource, State};

/// Where the public API's reference is.
pub const PUBLIC_PAGE: &str = "/docs/";
/// Where the operator API's reference is.
pub const ADMIN_PAGE: &str = "/docs/admin/";

/// The pages' policy: scripts, styles, fonts and the documents from this
/// server only (Swagger UI's icons are `data:` images); no frames, no
/// plugins, no form posts elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource(super::openapi_admin::PATH).route(web::get().to(super::openapi_admin::serve)),
    )
    .service(resource("/docs").route(web::get().to(|| async { redirect(PUBLIC_PAGE) })))
    .service(resource("/docs/admin").route(web::get().to(|| async { redirect(ADMIN_PAGE) })))
    // The operator page first: `/docs/{tail}` matches its paths too.
    .service(resource("/docs/admin/{tail:.*}").route(web::get().to(admin_page)))
    .service(resource("/docs/{tail:.*}").route(web::get().to(public_page)));
}

fn redirect(to: &'static str) -> HttpResponse {
    HttpResponse::MovedPermanently()
        .insert_header((LOCATION, to))
        .finish()
}

fn page_config(url: &'static str) -> Arc<Config<'static>> {
    Arc::new(
        Config::new([url])
            .try_it_out_enabled(true)
            .display_request_duration(true)
            .persist_authorization(false)
            .with_credentials(false)
            // No badge fetched from a validator elsewhere.
            .validator_url("none"),
    )
}

async fn public_page(req: HttpRequest) -> HttpResponse {
    static CONFIG: OnceLock<Arc<Config<'static>>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| page_config(super::openapi::PATH));
    ui_file(req.match_info().get("tail").unwrap_or(""), config.clone())
}

async fn admin_page(req: HttpRequest) -> HttpResponse {
    static CONFIG: OnceLock<Arc<Config<'static>>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| page_config(super::openapi_admin::PATH));
    ui_file(req.match_info().get("tail").unwrap_or(""), config.clone())
}

/// One of Swagger UI's files (`index.html` for the page itself).
fn ui_file(tail: &str, config: Arc<Config<'static>>) -> HttpResponse {
    match utoipa_swagger_ui::serve(tail, config) {
        Ok(Some(file)) => HttpResponse::Ok()
            .content_type(file.content_type)
            .insert_header((CONTENT_SECURITY_POLICY, CSP))
            .insert_header(("X-Content-Type-Options", "nosniff"))
            .insert_header((CACHE_CONTROL, "no-cache"))
            .body(file.bytes.into_owned()),
        Ok(None) => HttpResponse::NotFound()
            .insert_header((CONTENT_SECURITY_POLICY, CSP))
            .content_type("text/plain; charset=utf-8")
            .body("no such file of the API reference"),
        Err(e) => {
            tracing::error!(error = %e, "serving the API reference");
            HttpResponse::InternalServerError().finish()
        }
    }
}

/// Request bodies that work against the sandbox with a test key, by
/// operation id (the rest show their schema only).
fn body_example(operation: &str) -> Option<Value> {
    Some(match operation {
        "create_payment_intent" => {
            json!({"amount": 500000, "currency": "NGN", "reference": "order-1001"})
        }
        "create_brand" => json!({"name": "Mama Put Kitchen"}),
        "create_bank_account" => {
            json!({"bank_code": "058", "account_number": "0123456789"})
        }
        // The operator API.
        "create_merchant" => json!({"name": "Mama Put Kitchen"}),
        "update_merchant" => json!({"settings": {"live_approved": true}}),
        "roll_keys" => json!({"mode": "test"}),
        "publish_fx_rate" => json!({"rate": 160000}),
        "advance_clock" => json!({"seconds": 86400}),
        _ => return None,
    })
}

/// Adds `servers` (the base URL) and, to every operation, a curl example.
/// `admin`: the operator API (admin token, no Idempotency-Key).
pub fn finish_document(doc: &str, base: &str, admin: bool) -> String {
    let mut doc: Value = serde_json::from_str(doc).expect("an OpenAPI document is JSON");
    doc["servers"] = json!([{"url": base, "description": "this kobo server"}]);
    let Some(paths) = doc["paths"].as_object_mut() else {
        return doc.to_string();
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            if !matches!(method.as_str(), "get" | "post" | "put" | "patch" | "delete") {
                continue;
            }
            annotate(path, method, op, base, admin);
        }
    }
    doc.to_string()
}

fn annotate(path: &str, method: &str, op: &mut Value, base: &str, admin: bool) {
    let id = op["operationId"].as_str().unwrap_or("").to_string();
    let public = op["security"].as_array().is_some_and(|s| {
        s.iter()
            .all(|r| r.as_object().is_some_and(|o| o.is_empty()))
    });
    let idem_key = format!("docs-{}-1", id.replace('_', "-"));
    let mut needs_idem = false;
    // `get_mut`, never `op[..]` on the mutable value: that inserts nulls.
    if let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) {
        for p in params {
            if p["in"] == "header" && p["name"] == "Idempotency-Key" {
                p["example"] = json!(idem_key);
                needs_idem = true;
            }
        }
    }
    let body = body_example(&id);
    if let Some(b) = &body {
        if let Some(media) = op
            .get_mut("requestBody")
            .and_then(|b| b.get_mut("content"))
            .and_then(|c| c.get_mut("application/json"))
            .and_then(Value::as_object_mut)
        {
            media.insert("example".into(), b.clone());
        }
    }
    // `{id}` becomes `$ID`: a shell variable the reader sets.
    let mut url = String::from(base);
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        url.push_str(&rest[..open]);
        let close = rest[open..]
            .find('}')
            .map(|c| open + c)
            .unwrap_or(rest.len() - 1);
        url.push('$');
        url.push_str(&rest[open + 1..close].to_uppercase());
        rest = &rest[close + 1..];
    }
    url.push_str(rest);
    let mut curl = if method == "get" {
        format!("curl \"{url}\"")
    } else {
        format!("curl -X {} \"{url}\"", method.to_uppercase())
    };
    if !public {
        let var = if admin { "ADMIN_TOKEN" } else { "KEY" };
        curl.push_str(&format!(" \\\n  -H \"Authorization: Bearer ${var}\""));
    }
    if needs_idem {
        curl.push_str(&format!(" \\\n  -H 'Idempotency-Key: {idem_key}'"));
    }
    if let Some(b) = &body {
        curl.push_str(&format!(
            " \\\n  -H 'Content-Type: application/json' \\\n  -d '{b}'"
        ));
    }
    let who = if public {
        ""
    } else if admin {
        " (the admin token in `$ADMIN_TOKEN`)"
    } else {
        " (a test secret key in `$KEY`)"
    };
    let mut description = op["description"].as_str().unwrap_or("").to_string();
    if !description.is_empty() {
        description.push_str("\n\n");
    }
    description.push_str(&format!("**Example**{who}:\n\n```sh\n{curl}\n```"));
    op["description"] = json!(description);
    op["x-codeSamples"] = json!([{"lang": "Shell", "label": "curl", "source": curl}]);
}

/// `GET /v1/openapi.json` as served: the document with `servers` and the
/// examples (computed once: the base URL does not change while running).
pub fn public_document(state: &State) -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        finish_document(
            super::openapi::document_json(),
            &state.kobo.config.base_url,
            false,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_document_gets_servers_and_curl_examples() {
        let doc: Value = serde_json::from_str(&finish_document(
            super::super::openapi::document_json(),
            "http://127.0.0.1:8080",
            false,
        ))
        .unwrap();
        assert_eq!(doc["servers"][0]["url"], "http://127.0.0.1:8080");
        let create = &doc["paths"]["/v1/payment_intents"]["post"];
        let curl = create["x-codeSamples"][0]["source"].as_str().unwrap();
        assert!(curl.starts_with("curl -X POST \"http://127.0.0.1:8080/v1/payment_intents\""));
        assert!(curl.contains("Authorization: Bearer $KEY"));
        assert!(curl.contains("Idempotency-Key: docs-create-payment-intent-1"));
        assert!(create["description"].as_str().unwrap().contains(curl));
        assert_eq!(
            create["requestBody"]["content"]["application/json"]["example"]["amount"],
            500000
        );
        let get = &doc["paths"]["/v1/payment_intents/{id}"]["get"];
        assert!(get["x-codeSamples"][0]["source"]
            .as_str()
            .unwrap()
            .starts_with("curl \"http://127.0.0.1:8080/v1/payment_intents/$ID\""));
        // Each example body names only fields the operation's body has.
        for (doc, admin) in [
            (doc.clone(), false),
            (
                serde_json::from_str(&super::super::openapi_admin::document_json("http://x"))
                    .unwrap(),
                true,
            ),
        ] {
            let mut seen = 0;
            for item in doc["paths"].as_object().unwrap().values() {
                for op in item.as_object().unwrap().values() {
                    let media = &op["requestBody"]["content"]["application/json"];
                    let Some(example) = media["example"].as_object() else {
                        continue;
                    };
                    seen += 1;
                    let mut schema = &media["schema"];
                    if let Some(r) = schema["$ref"].as_str() {
                        schema = &doc["components"]["schemas"]
                            [r.strip_prefix("#/components/schemas/").unwrap()];
                    }
                    for k in example.keys() {
                        assert!(
                            schema["properties"][k].is_object(),
                            "{}: {k}",
                            op["operationId"]
                        );
                    }
                }
            }
            assert_eq!(seen, if admin { 5 } else { 3 });
        }
        // Nothing but the examples and servers is added (no nulls).
        let plain: Value = serde_json::from_str(super::super::openapi::document_json()).unwrap();
        for (path, item) in plain["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let done = &doc["paths"][path][method];
                for (k, v) in done.as_object().unwrap() {
                    if !matches!(k.as_str(), "description" | "x-codeSamples") {
                        assert!(!v.is_null(), "{method} {path}: {k}");
                        assert!(op.get(k).is_some(), "{method} {path}: {k} added");
                    }
                }
            }
        }
        // The document itself needs no key.
        let own = doc["paths"]["/v1/openapi.json"]["get"]["x-codeSamples"][0]["source"]
            .as_str()
            .unwrap();
        assert!(!own.contains("Authorization"));
    }
}
