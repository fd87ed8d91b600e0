//! Unit tests of the OpenAPI document (`openapi.rs`).

use std::any::type_name;
use std::borrow::Cow;

use serde::de::DeserializeOwned;
use utoipa::{IntoParams, PartialSchema, ToSchema};
use uuid::Uuid;

use kobo_actors::ledger::BalanceTransactionView;
use kobo_actors::payment_intent::{ChargeAttemptView, PaymentIntentView};
use std::collections::BTreeSet;

use actix_web::{test as web, App};
use serde_json::Value;
use utoipa::openapi::path::ParameterIn;

use kobo_actors::money::MAX_AMOUNT;

use super::super::body::fields_of;
use super::super::{
    balance, brands, cards, customers, events, fx, mandates, payment_intents, payment_links,
    payouts, refunds, settlement, test_helpers, virtual_accounts, webhooks,
};
use super::*;

/// Every operation the server routes under `/v1` (`configure` and the
/// route modules), as (method, path).
const V1_ROUTES: &[(&str, &str)] = &[
    ("get", "/v1/openapi.json"),
    ("post", "/v1/payment_intents"),
    ("get", "/v1/payment_intents"),
    ("get", "/v1/payment_intents/{id}"),
    ("post", "/v1/payment_intents/{id}/cancel"),
    ("post", "/v1/payment_intents/{id}/bank_transfer"),
    ("get", "/v1/payment_intents/{id}/charge_attempts"),
    ("post", "/v1/payment_intents/{id}/card"),
    ("post", "/v1/payment_intents/{id}/authenticate"),
    ("get", "/v1/balance"),
    ("get", "/v1/balance_transactions"),
    ("get", "/v1/balance_transactions/export"),
    ("get", "/v1/reserve"),
    ("post", "/v1/test_helpers/balance/release_pending"),
    ("post", "/v1/test_helpers/settlements/run"),
    ("post", "/v1/brands"),
    ("get", "/v1/brands"),
    ("get", "/v1/brands/{id}"),
    ("get", "/v1/banks"),
    ("post", "/v1/bank_accounts"),
    ("get", "/v1/bank_accounts"),
    ("get", "/v1/payouts/quote"),
    ("post", "/v1/payouts"),
    ("get", "/v1/payouts"),
    ("get", "/v1/payouts/{id}"),
    ("post", "/v1/payouts/{id}/cancel"),
    ("post", "/v1/refunds"),
    ("get", "/v1/refunds"),
    ("get", "/v1/refunds/{id}"),
    ("get", "/v1/disputes"),
    ("get", "/v1/disputes/{id}"),
    ("post", "/v1/disputes/{id}/evidence"),
    ("post", "/v1/test_helpers/payment_intents/{id}/dispute"),
    ("post", "/v1/test_helpers/disputes/{id}/resolve"),
    ("post", "/v1/test_helpers/payment_intents/{id}/succeed"),
    (
        "post",
        "/v1/test_helpers/payment_intents/{id}/simulate_transfer",
    ),
    ("post", "/v1/webhook_endpoints"),
    ("get", "/v1/webhook_endpoints"),
    ("post", "/v1/webhook_endpoints/{id}/disable"),
    ("post", "/v1/webhook_endpoints/{id}/enable"),
    ("post", "/v1/webhook_endpoints/{id}/delete"),
    ("get", "/v1/events"),
    ("post", "/v1/events/{id}/redeliver"),
    ("get", "/v1/events/{id}/delivery_attempts"),
    ("post", "/v1/webhook_endpoints/{id}/test"),
    ("get", "/v1/stream"),
    ("get", "/v1/fx"),
    ("get", "/v1/fx/conversions"),
    ("post", "/v1/fx/conversions"),
    ("get", "/v1/fx/conversions/{id}"),
    ("get", "/v1/usdt"),
    ("get", "/v1/usdt/preview"),
    ("get", "/v1/usdt/payouts"),
    ("post", "/v1/usdt/payouts"),
    ("get", "/v1/usdt/payouts/{id}"),
    ("post", "/v1/mandates"),
    ("get", "/v1/mandates"),
    ("get", "/v1/mandates/{id}"),
    ("post", "/v1/mandates/{id}/refresh"),
    ("post", "/v1/mandates/{id}/cancel"),
    ("post", "/v1/mandates/{id}/charge"),
    ("post", "/v1/customers"),
    ("get", "/v1/customers"),
    ("get", "/v1/customers/{id}"),
    ("post", "/v1/customers/{id}"),
    ("post", "/v1/customers/{id}/delete"),
    ("post", "/v1/customers/{id}/verify_identity"),
    ("post", "/v1/virtual_accounts"),
    ("get", "/v1/virtual_accounts"),
    ("get", "/v1/virtual_accounts/{id}"),
    ("post", "/v1/virtual_accounts/{id}/refresh"),
    ("post", "/v1/invoices"),
    ("get", "/v1/invoices"),
    ("get", "/v1/invoices/{id}"),
    ("post", "/v1/invoices/{id}"),
    ("post", "/v1/invoices/{id}/finalize"),
    ("post", "/v1/invoices/{id}/send"),
    ("post", "/v1/invoices/{id}/void"),
    ("post", "/v1/invoices/{id}/mark_uncollectible"),
    ("post", "/v1/invoices/{id}/delete"),
    ("post", "/v1/invoices/{id}/record_payment"),
    ("post", "/v1/invoices/{id}/charge_mandate"),
    ("post", "/v1/test_helpers/invoices/{id}/pay"),
    ("post", "/v1/plans"),
    ("get", "/v1/plans"),
    ("get", "/v1/plans/{id}"),
    ("post", "/v1/plans/{id}"),
    ("post", "/v1/plans/{id}/archive"),
    ("post", "/v1/subscriptions"),
    ("get", "/v1/subscriptions"),
    ("get", "/v1/subscriptions/{id}"),
    ("post", "/v1/subscriptions/{id}"),
    ("post", "/v1/subscriptions/{id}/cancel"),
    ("post", "/v1/subscriptions/{id}/manage_link"),
    ("post", "/v1/test_helpers/subscriptions/{id}/renew"),
    ("post", "/v1/virtual_accounts/{id}/deactivate"),
    (
        "post",
        "/v1/test_helpers/virtual_accounts/{id}/simulate_transfer",
    ),
    ("post", "/v1/payment_links"),
    ("get", "/v1/payment_links"),
    ("get", "/v1/payment_links/{id}"),
    ("post", "/v1/payment_links/{id}"),
    ("post", "/v1/payment_links/{id}/deactivate"),
    ("post", "/v1/payment_links/{id}/activate"),
    ("post", "/v1/test_helpers/payment_links/{id}/pay"),
];

fn doc() -> Value {
    serde_json::from_str(document_json()).unwrap()
}

/// Every (method, path, operation) of the document.
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            ops.push((method.clone(), path.clone(), op.clone()));
        }
    }
    ops
}

/// Follows a local `$ref` (`#/components/...`).
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let pointer = r.strip_prefix('#').expect("a local reference");
            doc.pointer(pointer)
                .unwrap_or_else(|| panic!("{r} does not resolve"))
        }
        None => v,
    }
}

fn property_names(schema: RefOr<Schema>) -> BTreeSet<String> {
    let v = serde_json::to_value(schema).unwrap();
    v["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

fn param_names<P: IntoParams>() -> BTreeSet<String> {
    P::into_params(|| Some(ParameterIn::Query))
        .into_iter()
        .map(|p| p.name)
        .collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn the_document_is_openapi_3_1_of_api_version_0_1_0() {
    let d = doc();
    assert!(
        d["openapi"].as_str().unwrap().starts_with("3.1."),
        "{}",
        d["openapi"]
    );
    assert_eq!(d["info"]["version"], "0.1.0");
    assert_eq!(d["security"], serde_json::json!([{"bearer": []}]));
    assert_eq!(
        d["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
}

#[test]
fn every_v1_route_is_documented_and_nothing_else() {
    let d = doc();
    let documented: BTreeSet<(String, String)> =
        operations(&d).into_iter().map(|(m, p, _)| (m, p)).collect();
    let routed: BTreeSet<(String, String)> = V1_ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(documented, routed);
}

/// The other direction, against the real routing table: each documented
/// operation reaches a handler (no 404 "no route", no 405).
#[actix_web::test]
async fn every_documented_operation_is_routed() {
    let app = web::init_service(App::new().configure(crate::routes::configure)).await;
    // What an unrouted path and an unrouted method answer.
    let res = web::call_service(&app, web::TestRequest::get().uri("/v1/nope").to_request());
    assert_eq!(res.await.status().as_u16(), 404);
    let res = web::call_service(&app, web::TestRequest::delete().uri(PATH).to_request());
    assert_eq!(res.await.status().as_u16(), 405);
    let id = Uuid::new_v4().to_string();
    for (method, path, _) in operations(&doc()) {
        let uri = path.replace("{id}", &id);
        let req = match method.as_str() {
            "get" => web::TestRequest::get(),
            "post" => web::TestRequest::post(),
            other => panic!("unexpected method {other}"),
        }
        .uri(&uri)
        .to_request();
        let status = web::call_service(&app, req).await.status().as_u16();
        assert!(
            status != 404 && status != 405,
            "{method} {path} answered {status}"
        );
    }
}

#[actix_web::test]
async fn the_document_is_served_without_a_key() {
    let app = web::init_service(App::new().configure(crate::routes::configure)).await;
    let res = web::call_service(&app, web::TestRequest::get().uri(PATH).to_request()).await;
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(
        res.headers().get("content-type").unwrap(),
        "application/json"
    );
    let body: Value = web::read_body_json(res).await;
    assert_eq!(body, doc());
}

#[test]
fn every_operation_documents_its_errors_headers_and_security() {
    let d = doc();
    for (method, path, op) in operations(&d) {
        let at = format!("{method} {path}");
        let responses = op["responses"].as_object().unwrap();
        assert_eq!(op["x-lifecycle"], "live", "{at}");
        if path == PATH {
            assert_eq!(op["security"], serde_json::json!([]), "{at}");
            continue;
        }
        assert!(op.get("security").is_none_or(|s| s
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.get(BEARER).is_some())));
        for status in ["401", "429", "500"] {
            assert!(responses.contains_key(status), "{at} lacks {status}");
        }
        let mut success = 0;
        for (status, response) in responses {
            let response = resolve(&d, response);
            if status.starts_with('2') {
                success += 1;
                continue;
            }
            let schema = &response["content"]["application/json"]["schema"];
            assert_eq!(
                schema["$ref"], "#/components/schemas/Error",
                "{at} {status}"
            );
        }
        // Adding a saved bank account again answers it with 200, and so
        // does creating a customer of an email already taken.
        let successes = match at.as_str() {
            "post /v1/bank_accounts" | "post /v1/customers" | "post /v1/virtual_accounts" => 2,
            _ => 1,
        };
        assert_eq!(success, successes, "{at}");
        let params = op["parameters"].as_array().cloned().unwrap_or_default();
        let idempotency_key = params
            .iter()
            .find(|p| p["name"] == "Idempotency-Key" && p["in"] == "header");
        if method == "post" {
            let key = idempotency_key.unwrap_or_else(|| panic!("{at}"));
            assert_eq!(key["required"], true, "{at}");
            assert_eq!(key["schema"]["maxLength"], 255, "{at}");
            for status in ["400", "413", "422"] {
                assert!(responses.contains_key(status), "{at} lacks {status}");
            }
            // A replay answers the saved response, 2xx or 4xx, with the
            // header.
            for (status, response) in responses {
                let replayable =
                    status.starts_with('2') || ["400", "404", "409"].contains(&status.as_str());
                let header = &resolve(&d, response)["headers"]["Idempotent-Replayed"];
                assert_eq!(replayable, !header.is_null(), "{at} {status}");
            }
            assert!(op["requestBody"].is_object(), "{at}");
        } else {
            assert!(idempotency_key.is_none(), "{at}");
        }
        if path.contains("{id}") {
            assert!(
                params
                    .iter()
                    .any(|p| p["name"] == "id" && p["in"] == "path"),
                "{at}"
            );
        }
    }
}

#[test]
fn every_reference_resolves() {
    let d = doc();
    fn walk(doc: &Value, v: &Value) {
        match v {
            Value::Object(o) => {
                if o.contains_key("$ref") {
                    resolve(doc, v);
                }
                o.values().for_each(|x| walk(doc, x));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(doc, x)),
            _ => {}
        }
    }
    walk(&d, &d);
}

/// Each request schema has exactly the fields its parser accepts, and
/// each POST's documented body is that schema.
#[test]
fn request_schemas_match_what_the_parsers_accept() {
    use payment_intents::{CreatePaymentIntentRequest, NoFields};
    use test_helpers::SimulateTransferRequest;
    assert_eq!(
        property_names(CreatePaymentIntentRequest::schema()),
        names(fields_of::<CreatePaymentIntentRequest>())
    );
    assert_eq!(
        property_names(NoFields::schema()),
        names(fields_of::<NoFields>())
    );
    assert_eq!(
        property_names(SimulateTransferRequest::schema()),
        names(fields_of::<SimulateTransferRequest>())
    );
    assert_eq!(
        property_names(webhooks::CreateWebhookEndpointRequest::schema()),
        names(fields_of::<webhooks::CreateWebhookEndpointRequest>())
    );

    assert_eq!(
        property_names(cards::CardRequest::schema()),
        names(fields_of::<cards::CardRequest>())
    );
    assert_eq!(
        property_names(cards::BillingAddressRequest::schema()),
        names(fields_of::<cards::BillingAddressRequest>())
    );
    assert_eq!(
        property_names(cards::AuthenticateRequest::schema()),
        names(fields_of::<cards::AuthenticateRequest>())
    );
    let schemas = [
        (
            brands::CreateBrandRequest::schema(),
            fields_of::<brands::CreateBrandRequest>(),
        ),
        (
            payouts::AddBankAccountRequest::schema(),
            fields_of::<payouts::AddBankAccountRequest>(),
        ),
        (
            payouts::CreatePayoutRequest::schema(),
            fields_of::<payouts::CreatePayoutRequest>(),
        ),
        (
            refunds::CreateRefundRequest::schema(),
            fields_of::<refunds::CreateRefundRequest>(),
        ),
        (
            refunds::SubmitEvidenceRequest::schema(),
            fields_of::<refunds::SubmitEvidenceRequest>(),
        ),
        (
            refunds::OpenDisputeRequest::schema(),
            fields_of::<refunds::OpenDisputeRequest>(),
        ),
        (
            refunds::ResolveDisputeRequest::schema(),
            fields_of::<refunds::ResolveDisputeRequest>(),
        ),
    ];
    for (schema, fields) in schemas {
        assert_eq!(property_names(schema), names(fields));
    }

    let d = doc();
    let body_schema = |path: &str| {
        d["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            .as_str()
            .unwrap_or_else(|| panic!("{path}"))
            .rsplit('/')
            .next()
            .unwrap()
            .to_string()
    };
    let bodies = [
        ("/v1/payment_intents", CreatePaymentIntentRequest::name()),
        ("/v1/payment_intents/{id}/cancel", NoFields::name()),
        ("/v1/payment_intents/{id}/bank_transfer", NoFields::name()),
        ("/v1/payment_intents/{id}/card", cards::CardRequest::name()),
        (
            "/v1/payment_intents/{id}/authenticate",
            cards::AuthenticateRequest::name(),
        ),
        (
            "/v1/test_helpers/payment_intents/{id}/succeed",
            NoFields::name(),
        ),
        (
            "/v1/test_helpers/payment_intents/{id}/simulate_transfer",
            SimulateTransferRequest::name(),
        ),
        (
            "/v1/webhook_endpoints",
            webhooks::CreateWebhookEndpointRequest::name(),
        ),
        ("/v1/webhook_endpoints/{id}/disable", NoFields::name()),
        ("/v1/webhook_endpoints/{id}/enable", NoFields::name()),
        ("/v1/webhook_endpoints/{id}/delete", NoFields::name()),
        ("/v1/events/{id}/redeliver", NoFields::name()),
        ("/v1/test_helpers/balance/release_pending", NoFields::name()),
        ("/v1/test_helpers/settlements/run", NoFields::name()),
        ("/v1/brands", brands::CreateBrandRequest::name()),
        ("/v1/bank_accounts", payouts::AddBankAccountRequest::name()),
        ("/v1/payouts", payouts::CreatePayoutRequest::name()),
        ("/v1/payouts/{id}/cancel", NoFields::name()),
        ("/v1/refunds", refunds::CreateRefundRequest::name()),
        (
            "/v1/disputes/{id}/evidence",
            refunds::SubmitEvidenceRequest::name(),
        ),
        (
            "/v1/test_helpers/payment_intents/{id}/dispute",
            refunds::OpenDisputeRequest::name(),
        ),
        (
            "/v1/test_helpers/disputes/{id}/resolve",
            refunds::ResolveDisputeRequest::name(),
        ),
    ];
    for (path, schema) in bodies {
        assert_eq!(body_schema(path), schema, "{path}");
    }
    // Only the bodies that may be left out are optional.
    assert_eq!(
        d["paths"]["/v1/payment_intents"]["post"]["requestBody"]["required"],
        true
    );
    assert!(
        d["paths"]["/v1/payment_intents/{id}/cancel"]["post"]["requestBody"]
            .get("required")
            .is_none_or(|r| r == false)
    );

    // The amount bounds the parsers apply.
    let create = serde_json::to_value(CreatePaymentIntentRequest::schema()).unwrap();
    assert_eq!(
        create["properties"]["amount"]["minimum"],
        payment_intents::MIN_PAYMENT_AMOUNT
    );
    assert_eq!(create["properties"]["amount"]["maximum"], MAX_AMOUNT);
    assert_eq!(
        create["required"],
        serde_json::json!(["amount", "currency"])
    );
    let simulate = serde_json::to_value(SimulateTransferRequest::schema()).unwrap();
    assert_eq!(simulate["properties"]["amount"]["minimum"], 1);
    assert_eq!(simulate["properties"]["amount"]["maximum"], MAX_AMOUNT);
}

/// The documented parameters of a query type, which must be the fields it
/// parses.
fn parsed_params<Q: IntoParams + DeserializeOwned>() -> BTreeSet<String> {
    let documented = param_names::<Q>();
    assert_eq!(documented, names(fields_of::<Q>()), "{}", type_name::<Q>());
    documented
}

/// Each list or read without an `{id}` documents the query it parses
/// (none: it takes [`NoFields`], so every name is unknown); each query
/// type documents exactly the fields it parses.
#[test]
fn each_get_documents_the_query_it_parses() {
    let none = BTreeSet::new;
    let mut transactions = parsed_params::<balance::LinePageQuery>();
    transactions.extend(parsed_params::<balance::LineFilterQuery>());
    let queries = [
        (
            "/v1/payment_intents",
            parsed_params::<payment_intents::ListPaymentIntentsQuery>(),
        ),
        ("/v1/balance", parsed_params::<balance::BalanceQuery>()),
        ("/v1/balance_transactions", transactions),
        (
            "/v1/balance_transactions/export",
            parsed_params::<balance::LineFilterQuery>(),
        ),
        ("/v1/reserve", none()),
        ("/v1/brands", parsed_params::<brands::ListBrandsQuery>()),
        ("/v1/banks", none()),
        ("/v1/bank_accounts", none()),
        ("/v1/payouts", parsed_params::<payouts::ListPayoutsQuery>()),
        ("/v1/payouts/quote", parsed_params::<payouts::QuoteQuery>()),
        ("/v1/refunds", parsed_params::<refunds::ListRefundsQuery>()),
        (
            "/v1/disputes",
            parsed_params::<refunds::ListDisputesQuery>(),
        ),
        ("/v1/webhook_endpoints", none()),
        ("/v1/events", parsed_params::<events::ListEventsQuery>()),
        ("/v1/stream", none()),
        ("/v1/fx", parsed_params::<fx::PreviewQuery>()),
        ("/v1/fx/conversions", parsed_params::<fx::ListQuery>()),
        ("/v1/usdt", none()),
        ("/v1/usdt/preview", parsed_params::<fx::PreviewQuery>()),
        ("/v1/usdt/payouts", parsed_params::<fx::ListQuery>()),
        (
            "/v1/mandates",
            parsed_params::<mandates::ListMandatesQuery>(),
        ),
        (
            "/v1/customers",
            parsed_params::<customers::ListCustomersQuery>(),
        ),
        (
            "/v1/virtual_accounts",
            parsed_params::<virtual_accounts::ListVirtualAccountsQuery>(),
        ),
        (
            "/v1/payment_links",
            parsed_params::<payment_links::ListPaymentLinksQuery>(),
        ),
        (
            "/v1/invoices",
            parsed_params::<super::super::invoices::ListInvoicesQuery>(),
        ),
        (
            "/v1/plans",
            parsed_params::<super::super::plans::ListPlansQuery>(),
        ),
        (
            "/v1/subscriptions",
            parsed_params::<super::super::subscriptions::ListSubscriptionsQuery>(),
        ),
    ];
    let d = doc();
    let documented = |path: &str| -> BTreeSet<String> {
        d["paths"][path]["get"]["parameters"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .filter(|p| p["in"] == "query")
                    .map(|p| p["name"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    for (path, params) in &queries {
        assert_eq!(&documented(path), params, "{path}");
    }
    // Every GET without an `{id}` is in the table.
    for (method, path, _) in operations(&d) {
        if method == "get" && !path.contains("{id}") && path != PATH {
            assert!(queries.iter().any(|(p, _)| *p == path), "{path}");
        }
    }
}

/// The response schemas are those of the views that render them.
#[test]
fn responses_use_the_view_schemas() {
    use kobo_actors::banks::{BankAccountView, BankView};
    use kobo_actors::merchant::BrandView;
    use kobo_actors::payout::service::PayoutQuoteView;
    use kobo_actors::payout::PayoutView;
    use kobo_actors::refund::{DisputeView, RefundView};
    let d = doc();
    let ok = |method: &str, path: &str| {
        let op = &d["paths"][path][method];
        let (_, response) = op["responses"]
            .as_object()
            .unwrap()
            .iter()
            .find(|(s, _)| s.starts_with('2'))
            .unwrap();
        response["content"]["application/json"]["schema"]["$ref"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let schema = |name: Cow<'static, str>| format!("#/components/schemas/{name}");
    assert_eq!(
        ok("post", "/v1/payment_intents"),
        schema(PaymentIntentView::name())
    );
    assert_eq!(
        ok("get", "/v1/payment_intents/{id}"),
        schema(PaymentIntentView::name())
    );
    assert_eq!(
        ok("get", "/v1/payment_intents"),
        "#/components/schemas/List_PaymentIntent"
    );
    assert_eq!(
        ok("get", "/v1/payment_intents/{id}/charge_attempts"),
        "#/components/schemas/List_ChargeAttempt"
    );
    assert_eq!(
        ok("get", "/v1/balance_transactions"),
        "#/components/schemas/List_BalanceTransaction"
    );
    assert_eq!(
        d["components"]["schemas"]["List_ChargeAttempt"]["properties"]["data"]["items"]["$ref"],
        schema(ChargeAttemptView::name())
    );
    assert_eq!(
        d["components"]["schemas"]["List_BalanceTransaction"]["properties"]["data"]["items"]
            ["$ref"],
        schema(BalanceTransactionView::name())
    );
    assert_eq!(
        ok("post", "/v1/webhook_endpoints"),
        schema(kobo_actors::webhook::WebhookEndpointView::name())
    );
    assert_eq!(
        ok("get", "/v1/webhook_endpoints"),
        "#/components/schemas/List_WebhookEndpoint"
    );
    assert_eq!(
        ok("get", "/v1/events"),
        "#/components/schemas/List_EventWithDeliveries"
    );
    assert_eq!(
        ok("post", "/v1/events/{id}/redeliver"),
        schema(kobo_actors::webhook::RedeliveryView::name())
    );
    assert_eq!(
        ok("post", "/v1/webhook_endpoints/{id}/delete"),
        schema(kobo_actors::webhook::DeletedEndpointView::name())
    );
    assert_eq!(
        ok("get", "/v1/balance"),
        schema(kobo_actors::query::BalanceView::name())
    );
    assert_eq!(
        ok("get", "/v1/balance_transactions/export"),
        schema(balance::StatementExportView::name())
    );
    let views = [
        (
            "get",
            "/v1/reserve",
            kobo_actors::query::ReserveView::name(),
        ),
        (
            "post",
            "/v1/test_helpers/balance/release_pending",
            settlement::ReleasePendingView::name(),
        ),
        (
            "post",
            "/v1/test_helpers/settlements/run",
            settlement::SettlementRunView::name(),
        ),
        ("post", "/v1/brands", BrandView::name()),
        ("get", "/v1/brands/{id}", BrandView::name()),
        ("post", "/v1/bank_accounts", BankAccountView::name()),
        ("get", "/v1/payouts/quote", PayoutQuoteView::name()),
        ("post", "/v1/payouts", PayoutView::name()),
        ("get", "/v1/payouts/{id}", PayoutView::name()),
        ("post", "/v1/payouts/{id}/cancel", PayoutView::name()),
        ("post", "/v1/refunds", RefundView::name()),
        ("get", "/v1/refunds/{id}", RefundView::name()),
        ("get", "/v1/disputes/{id}", DisputeView::name()),
        ("post", "/v1/disputes/{id}/evidence", DisputeView::name()),
        (
            "post",
            "/v1/test_helpers/payment_intents/{id}/dispute",
            DisputeView::name(),
        ),
        (
            "post",
            "/v1/test_helpers/disputes/{id}/resolve",
            DisputeView::name(),
        ),
    ];
    for (method, path, view) in views {
        assert_eq!(ok(method, path), schema(view), "{method} {path}");
    }
    let lists = [
        ("/v1/brands", BrandView::name()),
        ("/v1/banks", BankView::name()),
        ("/v1/bank_accounts", BankAccountView::name()),
        ("/v1/payouts", PayoutView::name()),
        ("/v1/refunds", RefundView::name()),
        ("/v1/disputes", DisputeView::name()),
    ];
    for (path, item) in lists {
        let list = format!("List_{item}");
        assert_eq!(ok("get", path), schema(list.clone().into()), "{path}");
        assert_eq!(
            d["components"]["schemas"][&list]["properties"]["data"]["items"]["$ref"],
            schema(item),
            "{path}"
        );
    }
    // Both answers of adding a bank account are the bank account.
    assert_eq!(
        d["paths"]["/v1/bank_accounts"]["post"]["responses"]["200"]["content"]["application/json"]
            ["schema"]["$ref"],
        schema(BankAccountView::name())
    );
    // Fields shown only on create are optional; the others required.
    let pi = &d["components"]["schemas"]["PaymentIntent"];
    let required: BTreeSet<&str> = pi["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let properties: BTreeSet<&str> = pi["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let optional: BTreeSet<&str> = properties.difference(&required).copied().collect();
    assert_eq!(optional, BTreeSet::from(["checkout_url", "client_secret"]));
}
