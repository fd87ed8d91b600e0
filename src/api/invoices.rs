//! `/v1/invoices`: create, list, retrieve, update (drafts), finalize,
//! send, void, mark_uncollectible, delete (drafts), record_payment; the
//! test helper `POST /v1/test_helpers/invoices/{id}/pay`.

use actix_web::{web, HttpRequest};
use chrono::NaiveDate;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use uuid::Uuid;

use kobo_actors::calendar::lagos_date;
use kobo_actors::idempotency::Answer;
use kobo_actors::invoice::book::{
    self, check_amount, DeleteInvoice, InvoiceAction, InvoicePatch, NewInvoice,
};
use kobo_actors::invoice::service::{self as invoices, InvoiceFilter};
use kobo_actors::invoice::{DeletedInvoiceView, Invoice, InvoiceStatus, InvoiceView, LineItem};
use kobo_actors::mandate::actor::ChargeMandate;
use kobo_actors::merchant::query::brand;
use kobo_actors::money::{Currency, FeeBearer, MAX_AMOUNT};
use kobo_actors::payment_intent::actor::Action;
use kobo_actors::payment_intent::metadata_schema;
use kobo_actors::payment_intent::service::{create_for, CreatePaymentIntent};
use kobo_actors::payment_intent::PaymentIntentView;
use kobo_actors::query::ListView;
use kobo_actors::{DomainError, ErrorCode};

use super::body::{self, tunnel, NoFields, FIELD};
use super::components::{
    path_id, BadRequest, BadRequestReplayable, ByRef, ConflictReplayable, Forbidden,
    IdempotencyKey, NotFound, NotFoundReplayable, Overloaded,
};
use super::endpoint::{live_payments, test_mode, Call, Endpoint};
use super::params::{self, Choice};
use super::payment_intents::act;
use super::{resource, ApiResult, State};

pub fn configure(cfg: &mut crate::api::route_table::Routes) {
    cfg.service(
        resource("/v1/invoices")
            .route(web::post().to(create))
            .route(web::get().to(list)),
    )
    .service(
        resource("/v1/invoices/{id}")
            .route(web::get().to(retrieve))
            .route(web::post().to(update)),
    )
    .service(resource("/v1/invoices/{id}/finalize").route(web::post().to(finalize)))
    .service(resource("/v1/invoices/{id}/send").route(web::post().to(send_invoice)))
    .service(resource("/v1/invoices/{id}/void").route(web::post().to(void)))
    .service(
        resource("/v1/invoices/{id}/mark_uncollectible").route(web::post().to(mark_uncollectible)),
    )
    .service(resource("/v1/invoices/{id}/delete").route(web::post().to(delete)))
    .service(resource("/v1/invoices/{id}/record_payment").route(web::post().to(record_payment)))
    .service(resource("/v1/invoices/{id}/charge_mandate").route(web::post().to(charge_mandate)))
    .service(resource("/v1/test_helpers/invoices/{id}/pay").route(web::post().to(test_pay)));
}

pub type InvoiceRef = ByRef<InvoiceView>;

path_id!(
    /// The `{id}` of an invoice.
    InvoiceId,
    "invoice",
    /// The invoice's id; unknown, malformed, deleted, another merchant's or
    /// the other mode's: 404.
);

/// One line of an invoice (documents the `line_items` rule).
#[allow(dead_code)]
#[derive(ToSchema)]
#[schema(as = InvoiceLineItemInput)]
pub struct LineItemInput {
    #[schema(max_length = 500)]
    description: String,
    #[schema(minimum = 1, maximum = 1_000_000)]
    quantity: i64,
    /// Minor units.
    #[schema(minimum = 0, maximum = 1_000_000_000_000_i64)]
    unit_amount: i64,
}

fn bad(param: String, message: &str) -> DomainError {
    DomainError::invalid(&param, message.to_string())
}

/// `line_items`: 1 to 100 of `{description, quantity >= 1, unit_amount >= 0}`.
fn line_items<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<LineItem>>, D::Error> {
    let Some(v) = Option::<Value>::deserialize(d)? else {
        return Ok(None);
    };
    let Value::Array(items) = v else {
        return Err(tunnel(bad(FIELD.into(), "`line_items` must be an array")));
    };
    if items.is_empty() || items.len() > 100 {
        return Err(tunnel(bad(
            FIELD.into(),
            "`line_items` holds 1 to 100 items",
        )));
    }
    let mut out = Vec::with_capacity(items.len());
    for (n, item) in items.iter().enumerate() {
        let p = |f: &str| format!("{FIELD}[{n}].{f}");
        let Value::Object(o) = item else {
            return Err(tunnel(bad(
                format!("{FIELD}[{n}]"),
                "a line item is an object",
            )));
        };
        if let Some(k) = o
            .keys()
            .find(|k| !["description", "quantity", "unit_amount"].contains(&k.as_str()))
        {
            return Err(tunnel(
                DomainError::of(
                    ErrorCode::ParameterUnknown,
                    format!("unknown field `{}`", p(k)),
                )
                .with_param(p(k)),
            ));
        }
        let description = match o.get("description") {
            Some(Value::String(s)) if !s.is_empty() && s.chars().count() <= 500 => s.clone(),
            None | Some(Value::Null) => {
                return Err(tunnel(DomainError::missing(&p("description"))))
            }
            _ => {
                return Err(tunnel(bad(
                    p("description"),
                    "a description is 1 to 500 characters",
                )))
            }
        };
        let quantity = match o.get("quantity") {
            None | Some(Value::Null) => return Err(tunnel(DomainError::missing(&p("quantity")))),
            Some(v) => v
                .as_i64()
                .filter(|q| (1..=1_000_000).contains(q))
                .ok_or_else(|| {
                    tunnel(bad(
                        p("quantity"),
                        "quantity is an integer from 1 to 1000000",
                    ))
                })?,
        };
        let unit_amount = match o.get("unit_amount") {
            None | Some(Value::Null) => {
                return Err(tunnel(DomainError::missing(&p("unit_amount"))))
            }
            Some(v) => v
                .as_i64()
                .filter(|a| (0..=MAX_AMOUNT).contains(a))
                .ok_or_else(|| {
                    tunnel(bad(
                        p("unit_amount"),
                        "unit_amount is an integer of minor units, at least 0",
                    ))
                })?,
        };
        let amount = quantity
            .checked_mul(unit_amount)
            .filter(|a| *a <= MAX_AMOUNT)
            .ok_or_else(|| tunnel(bad(p("quantity"), "a line's amount must be at most 10^12")))?;
        out.push(LineItem {
            description,
            quantity,
            unit_amount,
            amount,
        });
    }
    Ok(Some(out))
}

fn required_line_items<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<LineItem>, D::Error> {
    line_items(d)?.ok_or_else(|| tunnel(DomainError::missing(FIELD)))
}

/// `tax_rate_bps`: 0 to 10000.
fn tax_rate<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|b| *b <= 10_000)
            .map(|b| Some(b as u32))
            .ok_or_else(|| {
                tunnel(bad(
                    FIELD.into(),
                    "`tax_rate_bps` is an integer from 0 to 10000",
                ))
            }),
    }
}

fn date<'de, D: Deserializer<'de>>(d: D) -> Result<Option<NaiveDate>, D::Error> {
    let Some(s) = body::text::<D, 10>(d)? else {
        return Ok(None);
    };
    NaiveDate::parse_from_str(&s, "%Y-%m-%d")
        .map(Some)
        .map_err(|_| tunnel(bad(FIELD.into(), "`due_date` must be a date YYYY-MM-DD")))
}

fn required_date<'de, D: Deserializer<'de>>(d: D) -> Result<NaiveDate, D::Error> {
    date(d)?.ok_or_else(|| tunnel(DomainError::missing(FIELD)))
}

fn boolean<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(b)),
        Some(_) => Err(tunnel(bad(FIELD.into(), "must be true or false"))),
    }
}

/// The body that creates an invoice (a draft, or open with `finalize: true`).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreateInvoice)]
pub struct CreateInvoiceRequest {
    /// The customer billed (404 with `param: customer` when unknown).
    #[serde(deserialize_with = "body::required_uuid")]
    customer: Uuid,
    #[schema(value_type = String, example = "NGN")]
    #[serde(deserialize_with = "body::required_currency")]
    currency: Currency,
    /// 1 to 100 lines.
    #[schema(value_type = Vec<LineItemInput>, min_items = 1, max_items = 100)]
    #[serde(deserialize_with = "required_line_items")]
    line_items: Vec<LineItem>,
    /// Tax on the subtotal in basis points (750 = 7.5%), rounded half up to
    /// the minor unit. Default 0.
    #[schema(minimum = 0, maximum = 10000)]
    #[serde(default, deserialize_with = "tax_rate")]
    tax_rate_bps: Option<u32>,
    /// A Lagos date, today or later.
    #[schema(value_type = String, format = Date)]
    #[serde(deserialize_with = "required_date")]
    due_date: NaiveDate,
    /// Default false: only money covering all that remains pays it.
    #[serde(default, deserialize_with = "boolean")]
    allow_partial_payments: Option<bool>,
    /// The smallest part payment (needs `allow_partial_payments`).
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    #[serde(default, deserialize_with = "body::opt_amount::<_, 1>")]
    minimum_payment: Option<i64>,
    /// Who bears kobo's fee on payments of the invoice; default `merchant`.
    fee_bearer: Option<FeeBearer>,
    #[schema(max_length = 500)]
    #[serde(default, deserialize_with = "body::text::<_, 500>")]
    memo: Option<String>,
    #[schema(schema_with = metadata_schema)]
    #[serde(default, deserialize_with = "body::metadata")]
    metadata: Map<String, Value>,
    /// One of the merchant's brands (default: the default brand).
    #[serde(default, deserialize_with = "body::uuid")]
    brand: Option<Uuid>,
    /// Finalize at once (open, numbered, `invoice.finalized`).
    #[serde(default, deserialize_with = "boolean")]
    finalize: Option<bool>,
}

/// The body that updates a draft: only the fields sent change.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = UpdateInvoice)]
pub struct UpdateInvoiceRequest {
    #[schema(value_type = Option<Vec<LineItemInput>>, min_items = 1, max_items = 100)]
    #[serde(default, deserialize_with = "line_items")]
    line_items: Option<Vec<LineItem>>,
    #[schema(minimum = 0, maximum = 10000)]
    #[serde(default, deserialize_with = "tax_rate")]
    tax_rate_bps: Option<u32>,
    #[schema(value_type = Option<String>, format = Date)]
    #[serde(default, deserialize_with = "date")]
    due_date: Option<NaiveDate>,
    #[serde(default, deserialize_with = "boolean")]
    allow_partial_payments: Option<bool>,
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    #[serde(default, deserialize_with = "body::opt_amount::<_, 1>")]
    minimum_payment: Option<i64>,
    fee_bearer: Option<FeeBearer>,
    /// `""` clears.
    #[schema(max_length = 500)]
    #[serde(default, deserialize_with = "body::text::<_, 500>")]
    memo: Option<String>,
    /// Merges; a key set to `""` is removed.
    #[schema(schema_with = metadata_schema)]
    #[serde(default, deserialize_with = "body::metadata")]
    metadata: Map<String, Value>,
}

/// A payment received outside kobo (cash, POS): no ledger lines.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = RecordInvoicePayment)]
pub struct RecordPaymentRequest {
    /// Minor units: at most what remains (409 `amount_exceeds_remaining`).
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    #[serde(deserialize_with = "body::amount::<_, 1>")]
    amount: i64,
    #[schema(max_length = 500)]
    #[serde(default, deserialize_with = "body::text::<_, 500>")]
    note: Option<String>,
}

/// The test helper's payment.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = TestPayInvoice)]
pub struct TestPayRequest {
    /// Minor units; default: all that remains.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    #[serde(default, deserialize_with = "body::opt_amount::<_, 1>")]
    amount: Option<i64>,
}

/// A charge of an invoice through a mandate.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ChargeInvoiceMandate)]
pub struct ChargeMandateRequest {
    /// An active mandate of the invoice's customer.
    #[serde(deserialize_with = "body::required_uuid")]
    mandate: Uuid,
    /// Minor units; default: all that remains (part payments only when
    /// the invoice allows them).
    #[schema(minimum = 1, maximum = 1_000_000_000_000_i64)]
    #[serde(default, deserialize_with = "body::opt_amount::<_, 1>")]
    amount: Option<i64>,
}

struct StatusChoice(InvoiceStatus);

impl Choice for StatusChoice {
    const WHAT: &'static str = "draft, open, paid, uncollectible or void";
    fn parse(s: &str) -> Option<Self> {
        InvoiceStatus::parse(s).map(StatusChoice)
    }
}

fn status_filter<'de, D: Deserializer<'de>>(d: D) -> Result<Option<InvoiceStatus>, D::Error> {
    Ok(params::one_of::<D, StatusChoice>(d)?.map(|s| s.0))
}

fn bool_filter<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    match Option::<String>::deserialize(d)?.as_deref() {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(_) => Err(tunnel(bad(FIELD.into(), "must be true or false"))),
    }
}

/// The query of `GET /v1/invoices`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListInvoicesQuery {
    /// Page size, 1 to 100.
    #[param(value_type = Option<u8>, minimum = 1, maximum = 100, default = 20)]
    #[serde(deserialize_with = "params::limit")]
    limit: usize,
    /// The id of the last invoice of the previous page.
    #[serde(deserialize_with = "params::uuid")]
    starting_after: Option<Uuid>,
    /// Only this customer's invoices.
    #[serde(deserialize_with = "params::uuid")]
    customer: Option<Uuid>,
    /// Only invoices in this status.
    #[param(value_type = Option<String>, pattern = "^(draft|open|paid|uncollectible|void)$")]
    #[serde(deserialize_with = "status_filter")]
    status: Option<InvoiceStatus>,
    /// Only this subscription's invoices (one per billed period).
    #[serde(deserialize_with = "params::uuid")]
    subscription: Option<Uuid>,
    /// `true`: only open invoices past their due date (`invoice.overdue`
    /// sent); `false`: the others.
    #[param(value_type = Option<bool>)]
    #[serde(deserialize_with = "bool_filter")]
    overdue: Option<bool>,
}

fn own(c: &Call, raw: &str) -> Result<Invoice, DomainError> {
    let id = InvoiceId::parse(raw).map_err(|e| e.0)?.id;
    invoices::load(c.kobo(), c.p.merchant.id, c.p.mode, id)
}

async fn send(
    c: &Call,
    customer: Uuid,
    action: InvoiceAction,
) -> Result<Answer<InvoiceView>, DomainError> {
    let scope = (c.p.merchant.id, c.p.mode);
    book::send(&c.kobo().invoices, scope, customer, action, c.save.clone()).await
}

fn check_due(c: &Call, d: NaiveDate) -> Result<(), DomainError> {
    if d < lagos_date(c.kobo().clock.now()) {
        return Err(DomainError::invalid(
            "due_date",
            "`due_date` must be today or later (Lagos)",
        ));
    }
    Ok(())
}

/// Create an invoice
///
/// A draft (201), or with `finalize: true` an open invoice, numbered, its
/// hosted page live, the customer's credit balance applied.
#[utoipa::path(
    post,
    path = "/v1/invoices",
    operation_id = "create_invoice",
    tag = "invoices",
    params(IdempotencyKey),
    request_body(content = CreateInvoiceRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new invoice.", body = InvoiceView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn create(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    Endpoint::secret_key(201)
        .post(
            req,
            state,
            payload,
            |c, b: CreateInvoiceRequest| async move {
                let (m, mode) = (c.p.merchant.id, c.p.mode);
                kobo_actors::customer::load(c.kobo(), m, mode, b.customer)
                    .map_err(|e| e.with_param("customer"))?;
                let brand_id = match b.brand {
                    Some(id) => {
                        brand(c.kobo(), m, mode, id).map_err(|e| e.with_param("brand"))?;
                        id
                    }
                    None => c.p.merchant.default_brand(mode),
                };
                check_due(&c, b.due_date)?;
                let new = NewInvoice {
                    brand: brand_id,
                    currency: b.currency,
                    line_items: b.line_items,
                    tax_rate_bps: b.tax_rate_bps.unwrap_or(0),
                    due_date: b.due_date,
                    allow_partial_payments: b.allow_partial_payments.unwrap_or(false),
                    minimum_payment: b.minimum_payment,
                    fee_bearer: b.fee_bearer.unwrap_or(FeeBearer::Merchant),
                    memo: b.memo,
                    metadata: b.metadata,
                    finalize: b.finalize.unwrap_or(false),
                    subscription: None,
                };
                Ok(send(&c, b.customer, InvoiceAction::Create(Box::new(new))).await?)
            },
        )
        .await
}

/// List invoices
///
/// Newest first.
#[utoipa::path(
    get,
    path = "/v1/invoices",
    operation_id = "list_invoices",
    tag = "invoices",
    params(ListInvoicesQuery),
    responses(
        (status = 200, description = "A page of invoices, newest first.", body = ListView<InvoiceRef>),
        (status = 400, response = BadRequest),
    )
)]
async fn list(req: HttpRequest, state: State) -> ApiResult {
    Endpoint::secret_key(200)
        .get_with(req, state, |c, q: ListInvoicesQuery| async move {
            let f = InvoiceFilter {
                limit: q.limit,
                starting_after: q.starting_after,
                customer: q.customer,
                status: q.status,
                subscription: q.subscription,
                overdue: q.overdue,
            };
            Ok(invoices::list(c.kobo(), c.p.merchant.id, c.p.mode, &f)?.to_api())
        })
        .await
}

/// Retrieve an invoice
#[utoipa::path(
    get,
    path = "/v1/invoices/{id}",
    operation_id = "retrieve_invoice",
    tag = "invoices",
    params(InvoiceId),
    responses(
        (status = 200, description = "The invoice.", body = InvoiceView),
        (status = 404, response = NotFound),
    )
)]
async fn retrieve(req: HttpRequest, state: State, path: web::Path<String>) -> ApiResult {
    Endpoint::secret_key(200)
        .get(req, state, |c| async move {
            let i = own(&c, &path)?;
            Ok(invoices::to_api(c.kobo(), &i)?)
        })
        .await
}

/// Update a draft invoice
///
/// Only the fields sent change; an invoice that is not a draft: 409
/// `invoice_not_draft`.
#[utoipa::path(
    post,
    path = "/v1/invoices/{id}",
    operation_id = "update_invoice",
    tag = "invoices",
    params(InvoiceId, IdempotencyKey),
    request_body(content = UpdateInvoiceRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The invoice after the update.", body = InvoiceView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn update(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    Endpoint::secret_key(200)
        .post(
            req,
            state,
            payload,
            |c, b: UpdateInvoiceRequest| async move {
                let i = own(&c, &path)?;
                if let Some(d) = b.due_date {
                    check_due(&c, d)?;
                }
                let patch = InvoicePatch {
                    line_items: b.line_items,
                    tax_rate_bps: b.tax_rate_bps,
                    due_date: b.due_date,
                    allow_partial_payments: b.allow_partial_payments,
                    minimum_payment: b.minimum_payment,
                    fee_bearer: b.fee_bearer,
                    memo: b.memo,
                    metadata: Some(b.metadata),
                };
                let action = InvoiceAction::Update {
                    id: i.id,
                    patch: Box::new(patch),
                };
                Ok(send(&c, i.customer, action).await?)
            },
        )
        .await
}

/// A POST on `{id}` without a body, sending `action` to its book.
async fn simple(
    req: HttpRequest,
    state: State,
    payload: web::Payload,
    action: fn(Uuid) -> InvoiceAction,
) -> ApiResult {
    Endpoint::secret_key(200)
        .post(req, state, payload, |c, _: NoFields| async move {
            let raw = c.req.match_info().get("id").unwrap_or_default().to_string();
            let i = own(&c, &raw)?;
            Ok(send(&c, i.customer, action(i.id)).await?)
        })
        .await
}

macro_rules! simple_op {
    ($fn:ident, $path:literal, $op:literal, $summary:literal, $desc:literal, $ok:literal, $action:expr) => {
        #[doc = $summary]
        #[doc = ""]
        #[doc = $desc]
        #[utoipa::path(
                    post,
                    path = $path,
                    operation_id = $op,
                    tag = "invoices",
                    params(InvoiceId, IdempotencyKey),
                    request_body(content = Option<NoFields>, content_type = "application/json"),
                    responses(
                        (status = 200, description = $ok, body = InvoiceView),
                        (status = 404, response = NotFoundReplayable),
                        (status = 409, response = ConflictReplayable),
                        (status = 503, response = Overloaded),
                    )
                )]
        async fn $fn(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
            simple(req, state, payload, $action).await
        }
    };
}

simple_op!(
    finalize,
    "/v1/invoices/{id}/finalize",
    "finalize_invoice",
    "Finalize an invoice",
    "draft -> open: the next number of its brand, the hosted page, the overdue timer, the customer's credit balance applied; `invoice.finalized`. Not a draft: 409 `invoice_not_draft`.",
    "The open (or, with credit, paid) invoice.",
    |id| InvoiceAction::Finalize { id }
);
simple_op!(
    send_invoice,
    "/v1/invoices/{id}/send",
    "send_invoice",
    "Send an invoice",
    "Marks an open or uncollectible invoice sent (`sent_at`); kobo sends no email itself. Otherwise 409 `invoice_not_payable`.",
    "The invoice, sent.",
    |id| InvoiceAction::Send { id }
);
simple_op!(
    void,
    "/v1/invoices/{id}/void",
    "void_invoice",
    "Void an invoice",
    "open or uncollectible -> void, only with nothing paid (409 `invoice_has_payments`); `invoice.voided`. Money that arrives later for it becomes the customer's credit.",
    "The void invoice.",
    |id| InvoiceAction::Void { id }
);
simple_op!(
    mark_uncollectible,
    "/v1/invoices/{id}/mark_uncollectible",
    "mark_invoice_uncollectible",
    "Mark an invoice uncollectible",
    "open -> uncollectible; `invoice.marked_uncollectible`. It still takes payments.",
    "The uncollectible invoice.",
    |id| InvoiceAction::MarkUncollectible { id }
);

/// Delete a draft invoice
///
/// Only a draft (409 `invoice_not_draft`); it reads as missing afterwards.
#[utoipa::path(
    post,
    path = "/v1/invoices/{id}/delete",
    operation_id = "delete_invoice",
    tag = "invoices",
    params(InvoiceId, IdempotencyKey),
    request_body(content = Option<NoFields>, content_type = "application/json"),
    responses(
        (status = 200, description = "The deleted invoice.", body = DeletedInvoiceView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn delete(req: HttpRequest, state: State, payload: web::Payload) -> ApiResult {
    Endpoint::secret_key(200)
        .post(req, state, payload, |c, _: NoFields| async move {
            let raw = c.req.match_info().get("id").unwrap_or_default().to_string();
            let i = own(&c, &raw)?;
            let msg = DeleteInvoice {
                merchant: c.p.merchant.id,
                mode: c.p.mode,
                id: i.id,
                idem: c.save.clone(),
            };
            Ok(c.kobo().invoices.send(i.customer, msg).await??)
        })
        .await
}

/// Record a payment made outside kobo
///
/// Cash or POS: applied to the invoice (`invoice.partially_paid` or
/// `invoice.paid`), no ledger lines. More than remains: 409
/// `amount_exceeds_remaining`; paid, void or draft: 409
/// `invoice_not_payable`.
#[utoipa::path(
    post,
    path = "/v1/invoices/{id}/record_payment",
    operation_id = "record_invoice_payment",
    tag = "invoices",
    params(InvoiceId, IdempotencyKey),
    request_body(content = RecordPaymentRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "The invoice with the payment.", body = InvoiceView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn record_payment(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    Endpoint::secret_key(200)
        .post(
            req,
            state,
            payload,
            |c, b: RecordPaymentRequest| async move {
                let i = own(&c, &path)?;
                let action = InvoiceAction::RecordPayment {
                    id: i.id,
                    amount: b.amount,
                    note: b.note,
                };
                Ok(send(&c, i.customer, action).await?)
            },
        )
        .await
}

/// The parameters of a payment intent for `amount` (checked by the
/// caller) of invoice `i`: its currency, brand, customer and fee bearer,
/// back to its hosted page when paid. Shared by the test helper's pay,
/// `charge_mandate` and the hosted invoice page.
pub fn intent_params(base_url: &str, i: &Invoice, amount: i64) -> CreatePaymentIntent {
    CreatePaymentIntent {
        amount,
        currency: i.currency,
        reference: None,
        description: Some(format!(
            "Invoice {}",
            i.number.as_deref().unwrap_or_default()
        )),
        customer_email: None,
        metadata: Map::new(),
        fee_bearer: i.fee_bearer,
        brand: Some(i.brand),
        customer: Some(i.customer),
        return_url: i.hosted_url(base_url),
    }
}

/// A new payment intent for `amount` (checked) of invoice `i`.
pub async fn intent_for(
    kobo: &kobo_actors::runtime::Kobo,
    merchant: &kobo_actors::merchant::Merchant,
    i: &Invoice,
    amount: Option<i64>,
) -> Result<Answer<PaymentIntentView>, DomainError> {
    let amount = check_amount(i, amount)?;
    let params = intent_params(&kobo.config.base_url, i, amount);
    create_for(
        &kobo.env,
        &kobo.customers,
        merchant,
        i.mode,
        params,
        Some(i.id),
        None,
    )
    .await
}

/// Charge an invoice through a mandate
///
/// Debits what remains of an open (or uncollectible) invoice, or
/// `amount` of it, through an active mandate of the invoice's customer:
/// the mandate's charge (a payment intent, `processing` until the bank
/// confirms; the business bears the fee, at the direct-debit price) with
/// the invoice set, so its success is applied to the invoice in the
/// capture's own batch. The invoice not payable: 409
/// `invoice_not_payable`; more than remains: 409
/// `amount_exceeds_remaining`; a part when the invoice takes none, or
/// below `minimum_payment`: 400 `param: amount`; a mandate of another
/// customer: 400 `param: mandate`; an unknown mandate: 404; a mandate that
/// is not active: 409 `mandate_not_active`. The same Idempotency-Key never
/// debits twice.
#[utoipa::path(
    post,
    path = "/v1/invoices/{id}/charge_mandate",
    operation_id = "charge_invoice_mandate",
    tag = "invoices",
    params(InvoiceId, IdempotencyKey),
    request_body(content = ChargeMandateRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "The new payment intent, `processing`.", body = PaymentIntentView),
        (status = 400, response = BadRequestReplayable),
        (status = 403, response = Forbidden),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn charge_mandate(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    Endpoint::secret_key(201)
        .gate(live_payments)
        .post(
            req,
            state,
            payload,
            |c, b: ChargeMandateRequest| async move {
                let i = own(&c, &path)?;
                let m = kobo_actors::mandate::service::own(
                    c.kobo(),
                    c.p.merchant.id,
                    c.p.mode,
                    b.mandate,
                )
                .map_err(|e| e.with_param("mandate"))?;
                let amount = check_amount(&i, b.amount)?;
                if m.customer != i.customer {
                    return Err(DomainError::invalid(
                        "mandate",
                        "this mandate belongs to another customer than the invoice's",
                    )
                    .into());
                }
                if i.currency != Currency::NGN {
                    return Err(DomainError::invalid(
                        "mandate",
                        "direct debit is naira only: this invoice is not in NGN",
                    )
                    .into());
                }
                super::mandates::direct_debit_enabled(&c.p)?;
                let params = intent_params(&c.kobo().config.base_url, &i, amount);
                let charge = ChargeMandate {
                    merchant: Box::new((*c.p.merchant).clone()),
                    mode: i.mode,
                    params,
                    invoice: Some(i.id),
                    idem: c.save.clone(),
                    claim: None,
                };
                Ok(c.kobo().mandates.send(m.id, charge).await??)
            },
        )
        .await
}

/// Pay a test invoice
///
/// Test keys only (404 for live keys). A payment intent for `amount`
/// (default: all that remains) of the invoice, made successful at once
/// (captured through the ledger, applied to the invoice in the same
/// batch). Answers the payment intent.
#[utoipa::path(
    post,
    path = "/v1/test_helpers/invoices/{id}/pay",
    operation_id = "test_pay_invoice",
    tag = "test_helpers",
    params(InvoiceId, IdempotencyKey),
    request_body(content = Option<TestPayRequest>, content_type = "application/json"),
    responses(
        (status = 200, description = "The successful payment intent.", body = PaymentIntentView),
        (status = 404, response = NotFoundReplayable),
        (status = 409, response = ConflictReplayable),
        (status = 503, response = Overloaded),
    )
)]
async fn test_pay(
    req: HttpRequest,
    state: State,
    path: web::Path<String>,
    payload: web::Payload,
) -> ApiResult {
    Endpoint::secret_key(200)
        .gate(test_mode)
        .post(req, state, payload, |c, b: TestPayRequest| async move {
            let i = own(&c, &path)?;
            let created = intent_for(c.kobo(), &c.p.merchant, &i, b.amount).await?;
            let id = created.view().id;
            Ok(act(&c.state, &c.p, id, Action::TestSucceed, c.save.clone()).await?)
        })
        .await
}
