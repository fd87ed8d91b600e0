//! `GET /admin/v1/openapi.json`: the OpenAPI 3.1 document of the operator
//! API (`/admin/v1`, bearer: the admin token). The document itself needs no
//! token. It is built with utoipa's builders; the objects it answers with
//! are the schemas of the code's own view types (`Merchant`, `Settings`,
//! `Payout`, `UsdtWallet`, `FxRate`, `AuditEntry`, `Error`), a query's
//! parameters are those of its query type (`IntoParams`, the type its
//! handler parses), and a unit test checks that every `/admin/v1` route the
//! server registers is in it.

use std::sync::OnceLock;

use actix_web::HttpResponse;
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, Parameter, ParameterBuilder, ParameterIn,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{AdditionalProperties, ComponentsBuilder, ObjectBuilder, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, InfoBuilder, LicenseBuilder, OpenApi, OpenApiBuilder, Paths, Ref, RefOr,
    Required, ResponseBuilder, Schema,
};
use utoipa::{IntoParams, ToSchema};

use kobo_actors::audit::AuditEntryView;
use kobo_actors::dashboard_user::DashboardUserView;
use kobo_actors::fx::FxRateView;
use kobo_actors::merchant::{MerchantView, Settings};
use kobo_actors::payout::PayoutView;
use kobo_actors::usdt::{DeletedWalletView, UsdtWalletView};

use super::admin::{HealthHistoryQuery, ListAuditQuery};
use super::State;

/// Where the document is served.
pub const PATH: &str = "/admin/v1/openapi.json";
/// The admin-token security scheme.
const ADMIN: &str = "admin_token";

fn schema_ref<T: ToSchema>() -> RefOr<Schema> {
    RefOr::Ref(Ref::from_schema_name(T::name()))
}

fn add<T: ToSchema>(out: &mut Vec<(String, RefOr<Schema>)>) {
    out.push((T::name().into_owned(), T::schema()));
    T::schemas(out);
}

fn string(description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
}

fn closed(b: ObjectBuilder) -> RefOr<Schema> {
    b.schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .into()
}

/// The Merchant as created: its two secret keys, shown this once.
fn merchant_with_keys() -> RefOr<Schema> {
    let mut merchant = ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "The Merchant, with both secret keys (shown only here and on a roll).",
        ));
    for (name, description) in [
        ("id", "The merchant's id."),
        ("object", "`merchant`."),
        ("name", "The merchant's name."),
        ("created_at", "RFC 3339."),
        ("test_secret_key", "`svc_test_...`: test mode."),
        ("live_secret_key", "`svc_live_...`: live mode."),
    ] {
        merchant = merchant.property(name, string(description)).required(name);
    }
    merchant
        .property("settings", schema_ref::<Settings>())
        .required("settings")
        .into()
}

struct Op {
    method: HttpMethod,
    path: &'static str,
    id: &'static str,
    summary: &'static str,
    description: &'static str,
    body: Option<RefOr<Schema>>,
    ok: (&'static str, &'static str, RefOr<Schema>),
    /// Error statuses besides 401 and 500.
    errors: &'static [&'static str],
    /// Query parameters: those of the operation's query type (its parser).
    query: Vec<Parameter>,
}

/// The answer of `GET /admin/v1/cluster`.
fn cluster() -> RefOr<Schema> {
    let typed = |t: Type, d: &str| ObjectBuilder::new().schema_type(t).description(Some(d));
    let array = |d: &str| {
        utoipa::openapi::ArrayBuilder::new()
            .items(ObjectBuilder::new().schema_type(Type::Object))
            .description(Some(d))
    };
    let nullable = |d: &str| {
        // A string, or null: no type keyword.
        ObjectBuilder::new().description(Some(d))
    };
    let mut b = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("object", string("`cluster`."))
        .property(
            "clustered",
            typed(Type::Boolean, "Started with `--cluster`."),
        )
        .property(
            "node_id",
            nullable("This node's id (null without `--cluster`)."),
        )
        .property(
            "address",
            nullable("This node's advertised URL (null without `--cluster`)."),
        )
        .property(
            "ready",
            typed(
                Type::Boolean,
                "Registered, with a lease view refreshed within 4 s.",
            ),
        )
        .property(
            "shards",
            typed(Type::Integer, "Merchant shards in all (256)."),
        )
        .property(
            "shards_owned",
            typed(Type::Integer, "Shards this node holds a lease on."),
        )
        .property(
            "nodes",
            array("Live nodes: `{node_id, address, heartbeat_age_ms, shards_held}`."),
        )
        .property(
            "leases",
            array("Every shard's lease: `{shard, node_id, token, remaining_ms}`."),
        );
    for name in [
        "object",
        "clustered",
        "node_id",
        "address",
        "ready",
        "shards",
        "shards_owned",
        "nodes",
        "leases",
    ] {
        b = b.required(name);
    }
    b.into()
}

/// The answer of `POST /admin/v1/backups`.
fn backup() -> RefOr<Schema> {
    let integer = |d: &str| {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .description(Some(d))
    };
    closed(
        ObjectBuilder::new()
            .property("object", string("`backup`."))
            .required("object")
            .property("file", string("The file's name in the backup directory."))
            .required("file")
            .property("path", string("The file's path on the server's host."))
            .required("path")
            .property("bytes", integer("The file's size."))
            .required("bytes")
            .property(
                "checksum",
                string("SHA-256 (hex) of the file before its last 32 bytes, which hold it."),
            )
            .required("checksum")
            .property(
                "manifest",
                ObjectBuilder::new().schema_type(Type::Object).description(Some(
                    "kobo and schema versions, `created_at`, the sequence high-water mark (`seq_high_water`), `records`, and keys per table (`tables`).",
                )),
            )
            .required("manifest"),
    )
}

fn error_description(status: &str) -> &'static str {
    match status {
        "400" => "`parameter_missing`, `parameter_invalid` or `parameter_unknown`; `param` names the field.",
        "401" => "No admin token, or a wrong one.",
        "404" => "No such merchant or payout (`resource_missing`).",
        "409" => "The object is not in a state that allows it.",
        "413" => "The body is too large.",
        "500" => "An internal error.",
        _ => "An error.",
    }
}

fn operations() -> Vec<Op> {
    let id_body = |props: Vec<(&str, ObjectBuilder, bool)>| {
        let mut b = ObjectBuilder::new();
        for (name, schema, required) in props {
            b = b.property(name, schema);
            if required {
                b = b.required(name);
            }
        }
        closed(b)
    };
    let settings_body = || {
        closed(
            ObjectBuilder::new()
                .property("settings", schema_ref::<Settings>())
                .required("settings"),
        )
    };
    let clock = || {
        closed(
            ObjectBuilder::new()
                .property("object", string("`clock`."))
                .required("object")
                .property("now", string("The service clock, RFC 3339."))
                .required("now")
                .property(
                    "manual",
                    ObjectBuilder::new()
                        .schema_type(Type::Boolean)
                        .description(Some("Whether the server runs `--clock manual`.")),
                )
                .required("manual"),
        )
    };
    let integer = |d: &str| {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .description(Some(d))
    };
    vec![
        Op {
            method: HttpMethod::Post,
            path: "/admin/v1/merchants",
            id: "create_merchant",
            summary: "Create a merchant",
            description: "A merchant with a default brand in each mode and a secret key for each mode, returned this once. `settings` (optional) is a partial Settings object over the defaults.",
            body: Some(id_body(vec![
                ("name", string("The merchant's name (at most 200 characters).").max_length(Some(200)), true),
                ("settings", ObjectBuilder::new().schema_type(Type::Object).description(Some("Settings to change from the defaults (see the Settings schema).")), false),
            ])),
            ok: ("201", "The merchant, with both secret keys.", merchant_with_keys()),
            errors: &["400", "413"],
            query: Vec::new(),
        },
        Op {
            method: HttpMethod::Get,
            path: "/admin/v1/merchants/{id}",
            id: "retrieve_merchant",
            summary: "Retrieve a merchant",
            description: "The merchant and its settings (never its keys).",
            body: None,
            ok: ("200", "The merchant.", schema_ref::<MerchantView>()),
            errors: &["400", "404"],
            query: Vec::new(),
        },
        Op {
            method: HttpMethod::Post,
            path: "/admin/v1/merchants/{id}",
            id: "update_merchant",
            summary: "Update a merchant's settings",
            description: "`settings` is partial: only the fields given change (`{\"settings\": {\"live_approved\": true}}` approves live payments).",
            body: Some(settings_body()),
            ok: ("200", "The merchant.", schema_ref::<MerchantView>()),
            errors: &["400", "404", "413"],
            query: Vec::new(),
        },
        Op {
            method: HttpMethod::Post,
            path: "/admin/v1/merchants/{id}/roll_keys",
            id: "roll_keys",
            summary: "Roll a secret key",
            description: "Replaces the merchant's secret key of `mode`; the old one is refused (401) from then on. The new key is shown this once.",
            body: Some(id_body(vec![(
                "mode",
                string("`test` or `live`.").enum_values(Some(["test", "live"])),
                true,
            )])),
            ok: (
                "200",
                "The new key.",
                closed(
                    ObjectBuilder::new()
                        .property("object", string("`merchant_key`."))
                        .required("object")
                        .property("mode", string("`test` or `live`."))
                        .required("mode")
                        .property("secret_key", string("The new secret key."))
                        .required("secret_key"),
                ),
            ),
            errors: &["400", "404"],
            query: Vec::new(),
        },
        Op {
            method: HttpMethod::Post,
            path: "/admin/v1/merchants/{id}/users",
            id: "invite_dashboard_user",
            summary: "Invite a dashboard user",
            description: "Invites a person to the merchant's dashboard (`/dashboard`) with a role (`owner` by default; `developer` or `viewer`). The answer carries the one-time `set_password_url` (valid 72 hours, shown this once) to hand to the person. An email another dashboard user has (any merchant): 409 `email_taken`.",
            body: Some(id_body(vec![
                ("email", string("The person's email address (at most 254 characters; stored lowercased).").max_length(Some(254)), true),
                ("role", string("`owner` (default), `developer` or `viewer`.").enum_values(Some(["owner", "developer", "viewer"])), false),
            ])),
            ok: ("201", "The invited user, with the set-password link.", schema_ref::<DashboardUserView>()),
            errors: &["400", "404", "409", "413"],
            query: Vec::new(),
        },
        Op {
            method: HttpMethod::Post,
            path: "/admin/v1/merchants/{id}/usdt_wallets",
            id: "add_usdt_wallet",
            summary: "Add a USDT wallet",
            description: "A wallet the merchant's USDT payouts can go to. The same network and address again in that mode answers 200 with the existing wallet.",
            body: Some(id_body(vec![
                ("address", string("The wallet address (TRC20: `T` + 33 base58 characters; ERC20: `0x` + 40 hex digits)."), true),
                ("network", string("`TRC20` or `ERC20`.").enum_values(Some(["TRC20", "ERC20"])), true),
                ("label", string("A label for people."), false),
                ("mode", string("`test` (default) or `live`.").enum_values(Some(["test", "live"])), false),
            ])),
            ok: ("201", "The new wallet (200: it existed).", schema_ref::<UsdtWalletView>()),
            errors: &["400", "404", "413"],
            query: Vec::new(),
        },
        Op {
            method: HttpMethod::Delete,
            path: "/admin/v1/merchants/{id}/usdt_wallets/{wallet}",
            id: "delete_usdt_wallet",
            summary: "Delete a USDT wallet",
            description: "Payouts can no longer go to it; payouts already made keep it.",
            body: None,
            ok: ("200", "The deleted wallet.", schema_ref::<DeletedWalletView>()),
            errors: &["400", "404"],
            query: Vec::new(),
        },
        Op {
            method: HttpMethod::Post,
            path: "/admin/v1/fx_rates",
            id: "publish_fx_rate",
            summary: "Publish the dollar rate",
            description: "Kobo per US dollar (160000 is ₦1,600 to the dollar); current from now on for previews and conversions.",
            body: Some(id_body(vec![("rate", integer("Kobo per US dollar.").minimum(Some(1)), true)])),
            ok: ("201", "The rate.", schema_ref::<FxRateView>()),
            errors: &["400", "413"],
            query: Vec::new(),
        },
        Op {
            method: HttpMethod::Post,
            path: "/admin/v1/payouts/{id}/approve",
            id: "approve_payout",
            summary: "Approve a payout",
            description: "A payout above the merchant's `payout_approval_threshold` waits in `pending_approval` until approved (it then goes to the bank) or rejected.",
            body: None,
            ok: ("200", "The payout.", schema_ref::<PayoutView>()),
            errors: &["400", "404", "409"],
            query: Vec::new(),
        },
        Op {
            method: HttpMethod::Post,
            path: "/admin/v1/payouts/{id}/reject",
            id: "reject_payout",
            summary: "Reject a payout",
            description: "The payout fails and its money returns to the available balance.",
            body: None,
            ok: ("200", "The payout.", schema_ref::<PayoutView>()),
            errors: &["400", "404", "409"],
            query: Vec::new(),
        },
        Op {
            method: HttpMethod::Get,
            path: "/admin/v1/clock",
            id: "get_clock",
            summary: "The service clock",
            description: "What time the service thinks it is, and whether the clock is manual.",
            body: None,
            ok: ("200", "The clock.", clock()),
            errors: &[],
            query: Vec::new(),
        },
        Op {
            method: HttpMethod::Post,
            path: "/admin/v1/clock/advance",
            id: "advance_clock",
            summary: "Advance the manual clock",
            description: "Moves a `--clock manual` server's clock forward by `seconds` (0 to ten years) or to `to` (RFC 3339), running every timer that falls due on the way (abandonment, settlement releases, payouts, retries) before answering. Never moves back.",
            body: Some(id_body(vec![
                ("seconds", integer("Seconds to move forward.").minimum(Some(0)), false),
                ("to", string("An RFC 3339 date-time to move to."), false),
            ])),
            ok: ("200", "The clock after the move.", clock()),
            errors: &["400", "409"],
            query: Vec::new(),
        },
        Op {
            method: HttpMethod::Get,
            path: "/admin/v1/actors",
            id: "actor_health",
            summary: "Actor health",
            description: "Live actors, mailbox depths, activations, passivations and restarts (with the last panic message) by kind; the store writer's queue, commits and batches; webhook delivery counters and the delivery queue of each endpoint (waiting, in flight, failing; the 50 busiest); timers due and overdue; event stream subscribers; and the latest health sample (rates over the last second). Each field is described in docs/operations.md, \"Actor health\".",
            body: None,
            ok: (
                "200",
                "The health report (`object: actor_health`).",
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .property("object", string("`actor_health`."))
                    .required("object")
                    .into(),
            ),
            errors: &[],
            query: Vec::new(),
        },
        Op {
            method: HttpMethod::Get,
            path: "/admin/v1/cluster",
            id: "cluster",
            summary: "The cluster",
            description: "As this node last read them (every second): the live nodes (`node_id`, `address`, `heartbeat_age_ms`, `shards_held`), every shard's lease (`shard`, `node_id`, `token`, `remaining_ms`) and this node (`node_id`, `address`, `ready`, `shards_owned` of `shards`). Without `--cluster`: `clustered: false`, one process owning every shard, no nodes or leases.",
            body: None,
            ok: ("200", "The cluster (`object: cluster`).", cluster()),
            errors: &[],
            query: Vec::new(),
        },
        Op {
            method: HttpMethod::Get,
            path: "/admin/v1/health/history",
            id: "health_history",
            summary: "Actor health over time",
            description: "The ring of health samples, one a second for the last ten minutes, oldest first: per kind live actors, mailbox depths, activations and passivations per second and restarts; the writer's commits per second, batches per commit, commit latency percentiles (ms) and queue depth; timers due and overdue; webhook deliveries waiting, in flight and failing; event stream subscribers. Times are the server's wall clock.",
            body: None,
            ok: (
                "200",
                "The samples (`object: health_history`).",
                ObjectBuilder::new()
                    .schema_type(Type::Object)
                    .property("object", string("`health_history`."))
                    .required("object")
                    .property(
                        "samples",
                        utoipa::openapi::schema::ArrayBuilder::new()
                            .items(ObjectBuilder::new().schema_type(Type::Object)),
                    )
                    .required("samples")
                    .into(),
            ),
            errors: &["400"],
            query: HealthHistoryQuery::into_params(|| Some(ParameterIn::Query)),
        },
        Op {
            method: HttpMethod::Get,
            path: "/admin/v1/audit",
            id: "list_audit_entries",
            summary: "List the audit log",
            description: "Every operator action (merchant create and settings changes, live approval, key rolls, payout approval and rejection, FX rate publishes, USDT wallet adds and removals, clock moves, backups, restores), newest first. Each entry is written in the same commit as the action's effect; no operation edits or deletes one. Entries hold digests of the target before and after (secrets removed), never a secret.",
            body: None,
            ok: (
                "200",
                "A page of entries (`object: list`, `data`, `has_more`).",
                closed(
                    ObjectBuilder::new()
                        .property("object", string("`list`."))
                        .required("object")
                        .property(
                            "data",
                            utoipa::openapi::schema::ArrayBuilder::new()
                                .items(schema_ref::<AuditEntryView>()),
                        )
                        .required("data")
                        .property(
                            "has_more",
                            ObjectBuilder::new()
                                .schema_type(Type::Boolean)
                                .description(Some("False on the last page.")),
                        )
                        .required("has_more"),
                ),
            ),
            errors: &["400"],
            query: ListAuditQuery::into_params(|| Some(ParameterIn::Query)),
        },
        Op {
            method: HttpMethod::Post,
            path: "/admin/v1/backups",
            id: "create_backup",
            summary: "Back up the store",
            description: "Writes a consistent snapshot of the whole store (one read transaction; payments keep flowing) into the server's backup directory (`--backup-dir`, default `<data>/backups`) under a name kobo chooses: the API never takes a path. Answers once the file is synced and its audit entry committed. Restore it with `kobo restore`; check it with `kobo check --from`. A server whose store is PostgreSQL answers 409 `backup_not_available`: back that database up with pg_dump or pg_basebackup.",
            body: None,
            ok: ("201", "The backup.", backup()),
            errors: &["409"],
            query: Vec::new(),
        },
    ]
}

fn path_parameter(name: &str) -> ParameterBuilder {
    let description = match name {
        "wallet" => "The wallet's id.",
        _ => "The object's id (a UUID).",
    };
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some(description))
        .schema(Some(ObjectBuilder::new().schema_type(Type::String).format(
            Some(utoipa::openapi::SchemaFormat::KnownFormat(
                utoipa::openapi::KnownFormat::Uuid,
            )),
        )))
}

/// The document (without `servers`, which comes from the base URL).
pub fn document() -> OpenApi {
    let mut paths = Paths::new();
    for op in operations() {
        let mut b = OperationBuilder::new()
            .operation_id(Some(op.id))
            .summary(Some(op.summary))
            .description(Some(op.description))
            .tag("operator");
        for segment in op.path.split('/') {
            if let Some(name) = segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                b = b.parameter(path_parameter(name));
            }
        }
        for parameter in op.query {
            b = b.parameter(parameter);
        }
        if let Some(body) = op.body {
            b = b.request_body(Some(
                RequestBodyBuilder::new()
                    .required(Some(Required::True))
                    .content(
                        "application/json",
                        ContentBuilder::new().schema(Some(body)).build(),
                    )
                    .build(),
            ));
        }
        b = b.response(
            op.ok.0,
            ResponseBuilder::new().description(op.ok.1).content(
                "application/json",
                ContentBuilder::new().schema(Some(op.ok.2)).build(),
            ),
        );
        for status in op.errors.iter().chain(&["401", "500"]) {
            b = b.response(
                *status,
                ResponseBuilder::new()
                    .description(error_description(status))
                    .content(
                        "application/json",
                        ContentBuilder::new()
                            .schema(Some(schema_ref::<super::ErrorBody>()))
                            .build(),
                    ),
            );
        }
        paths.add_path_operation(op.path, vec![op.method], b.build());
    }
    let mut schemas = Vec::new();
    add::<super::ErrorBody>(&mut schemas);
    add::<MerchantView>(&mut schemas);
    add::<Settings>(&mut schemas);
    add::<PayoutView>(&mut schemas);
    add::<UsdtWalletView>(&mut schemas);
    add::<DeletedWalletView>(&mut schemas);
    add::<FxRateView>(&mut schemas);
    add::<AuditEntryView>(&mut schemas);
    add::<DashboardUserView>(&mut schemas);
    let components = ComponentsBuilder::new()
        .schemas_from_iter(schemas)
        .security_scheme(
            ADMIN,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "The admin token: `--admin-token` / `KOBO_ADMIN_TOKEN`, else the one kobo generated in `<data>/admin-token`.",
                    ))
                    .build(),
            ),
        )
        .build();
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("kobo operator API")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(
                    "The operator API under `/admin/v1`: merchants and their settings, keys, FX rates, USDT wallets, payout approval, the manual clock, actor health, backups and the audit log. Bearer: the admin token. POSTs here need no `Idempotency-Key`.",
                ))
                .license(Some(LicenseBuilder::new().name("MIT").build())),
        )
        .paths(paths)
        .components(Some(components))
        .security(Some([SecurityRequirement::new(ADMIN, Vec::<String>::new())]))
        .build()
}

/// The document as served (with `servers` and curl examples).
pub fn document_json(base: &str) -> String {
    let json = document()
        .to_json()
        .expect("the operator OpenAPI document serializes");
    super::examples::finish_document(&json, base, true)
}

/// `GET /admin/v1/openapi.json` (no token needed: it holds no secret).
pub async fn serve(state: State) -> HttpResponse {
    static DOC: OnceLock<String> = OnceLock::new();
    let doc = DOC.get_or_init(|| document_json(&state.kobo.config.base_url));
    HttpResponse::Ok()
        .content_type("application/json")
        .body(doc.as_str())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::super::body::fields_of;
    use super::*;

    /// Every `/admin/v1` route the code registers (read from the sources of
    /// the modules that register them), by method.
    fn registered() -> BTreeSet<(String, String)> {
        let sources = [
            include_str!("admin.rs"),
            include_str!("dashboard_users.rs"),
            include_str!("fx.rs"),
            include_str!("payouts.rs"),
            include_str!("usdt.rs"),
        ];
        let mut out = BTreeSet::new();
        for src in sources {
            for chunk in src.split("resource(\"").skip(1) {
                let path = &chunk[..chunk.find('"').unwrap()];
                if !path.starts_with("/admin/v1/") {
                    continue;
                }
                let rest = &chunk[..chunk.find(";").unwrap_or(chunk.len())];
                let until_next = rest.split("resource(").next().unwrap();
                for m in ["get", "post", "delete"] {
                    if until_next.contains(&format!("web::{m}()")) {
                        out.insert((m.to_string(), path.to_string()));
                    }
                }
            }
        }
        out
    }

    /// Every `$ref` of the document names a schema it holds, and the audit
    /// list documents exactly the query parameters its handler accepts.
    #[test]
    fn references_resolve_and_the_audit_filters_are_the_parsers() {
        let doc: Value = serde_json::from_str(&document_json("http://x")).unwrap();
        fn refs(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    for (k, x) in m {
                        match (k.as_str(), x) {
                            ("$ref", Value::String(r)) => out.push(r.clone()),
                            _ => refs(x, out),
                        }
                    }
                }
                Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        refs(&doc, &mut found);
        assert!(found.iter().any(|r| r.ends_with("/AuditEntry")));
        for r in found {
            let name = r.trim_start_matches("#/components/schemas/");
            assert!(doc["components"]["schemas"][name].is_object(), "{r}");
        }
        let params: BTreeSet<String> = doc["paths"]["/admin/v1/audit"]["get"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect();
        let accepted: BTreeSet<String> = fields_of::<ListAuditQuery>()
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(params, accepted);
    }

    #[test]
    fn every_operator_route_is_documented() {
        let doc: Value = serde_json::from_str(&document_json("http://x")).unwrap();
        let mut documented = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                documented.insert((method.clone(), path.clone()));
            }
        }
        let registered = registered();
        assert!(registered.len() >= 12, "{registered:?}");
        assert_eq!(registered, documented);
        assert_eq!(doc["servers"][0]["url"], "http://x");
        for name in [
            "Merchant",
            "Settings",
            "Payout",
            "UsdtWallet",
            "FxRate",
            "AuditEntry",
            "Error",
        ] {
            assert!(doc["components"]["schemas"][name].is_object(), "{name}");
        }
    }
}
