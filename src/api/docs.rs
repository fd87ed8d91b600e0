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
use utoipa_swagger_ui::Config;

use super::resource;

/// Where the public API's reference is.
pub const PUBLIC_PAGE: &str = "/docs/";
/// Where the operator API's reference is.
pub const ADMIN_PAGE: &str = "/docs/admin/";

/// The pages' policy: scripts, styles, fonts and the documents from this
/// server only (Swagger UI's icons are `data:` images); no frames, no
/// plugins, no form posts elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
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

#[cfg(test)]
mod tests {
    use crate::api::examples::finish_document;
    use serde_json::Value;

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
