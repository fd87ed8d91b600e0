//! The one endpoint wrapper (in the spirit of hyperswitch's `server_wrap`).
//! Each operation declares an [`Endpoint`]: its credential, the gate its
//! principal must pass (live-mode checks), its success statuses, and how its
//! body is fingerprinted; its handler gives the body type and the `run`.
//! The domain answers what it did ([`Outcome`]: created, updated, existing,
//! with a typed view); the endpoint chooses the status of each kind
//! ([`Statuses`]). A command that saves its response with its effect is
//! handed those statuses in its [`IdempotencySave`] and answers the saved
//! body ([`DomainAnswer`]), which is sent as it is; a find-or-create
//! declares its `existing` status with [`Endpoint::existing_object`], and
//! its responses of that status (replays too) carry `Existing-Object:
//! true`. The wrapper does the rest, in
//! the order of CONTRACT 3a: authentication and rate limits (401/403/429),
//! the gate, the body (cap and deadline: 413/408), the Idempotency-Key
//! (400/409/422, replays), the body's parse (400), then `run` (its lookups
//! 404, its state 409), and the rendering. Operator operations
//! (`/admin/v1`, [`Endpoint::operator`]) take the admin token instead: no
//! principal, no per-key rate limit, no Idempotency-Key.

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;

use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::{web, HttpRequest, HttpResponse};
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use kobo_actors::audit::Audit;
use kobo_actors::idempotency::{
    render, Answer as DomainAnswer, IdempotencySave, Outcome, Statuses,
};
use kobo_actors::paging::Page;
use kobo_actors::query::Principal;
use kobo_actors::{DomainError, DomainResult, Env, ErrorCode, Kobo, Mode};

use super::body;
use super::idempotent::{idempotent_keyed, Body};
use super::params::{self, PageQuery};
use super::{authenticate_for, json_response, read_body, ApiError, ApiResult, Reply, State};

/// Who may call an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// A secret key.
    SecretKey,
    /// A secret key, or the client secret or checkout credential of the
    /// payment intent the path's `{id}` names.
    IntentKey,
    /// The admin token (the operator API): see [`Endpoint::operate`].
    Operator,
}

/// A check of the principal after authentication (403 or 404 before the
/// body is read).
pub type Gate = fn(&Principal) -> ApiResult<()>;

/// Every principal passes.
pub fn open(_: &Principal) -> ApiResult<()> {
    Ok(())
}

/// Live payments need an activated account (403 before anything else).
pub fn live_payments(p: &Principal) -> ApiResult<()> {
    if p.mode == Mode::Live && !p.merchant.settings.live_approved {
        return Err(ApiError(DomainError::forbidden(
            ErrorCode::AccountNotActivated,
            "live payments are not yet enabled for this account",
        )));
    }
    Ok(())
}

/// Test helpers answer 404 to live keys.
pub fn test_mode(p: &Principal) -> ApiResult<()> {
    if p.mode == Mode::Live {
        return Err(ApiError(DomainError::of(
            ErrorCode::ResourceMissing,
            "test helpers exist only in test mode",
        )));
    }
    Ok(())
}

/// How the idempotency layer fingerprints a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fingerprint {
    /// The body itself.
    Plain,
    /// A keyed hash of it (card data: see `cards`).
    Keyed,
}

/// An operation's declaration.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint {
    credential: Credential,
    gate: Gate,
    /// The success status (of every kind of outcome but `existing`).
    status: u16,
    /// The status of an [`Outcome::Existing`].
    existing: u16,
    /// Whether a response with the `existing` status carries
    /// `Existing-Object: true` ([`Endpoint::existing_object`]).
    existing_object: bool,
    fingerprint: Fingerprint,
}

/// The header of a find-or-create answered with what was there already
/// (lowercase: the form HTTP/2 sends; HTTP/1 names are case-insensitive).
pub const EXISTING_OBJECT: &str = "existing-object";

/// The context `run` gets: the request, the state, the authenticated
/// principal, and (on POSTs) the idempotency record to save with the
/// effect.
pub struct Call {
    pub req: HttpRequest,
    pub state: State,
    pub p: Principal,
    pub save: Option<IdempotencySave>,
}

impl Call {
    pub fn kobo(&self) -> &Arc<Kobo> {
        &self.state.kobo
    }

    /// The idempotency record (on POSTs), for the command to save its
    /// response in its effect's batch.
    pub fn save(&self) -> Option<&IdempotencySave> {
        self.save.as_ref()
    }
}

/// What a POST's `run` answers: a domain command's [`DomainAnswer`] (the
/// endpoint's status for its kind; the body as the command saved it, or
/// rendered and saved here), or a body (the endpoint's status; saved here).
pub trait IntoReply {
    fn into_reply(self, e: &Endpoint) -> Reply;
}

impl IntoReply for Value {
    fn into_reply(self, e: &Endpoint) -> Reply {
        Reply {
            status: e.status,
            body: Body::Json(self),
        }
    }
}

impl<V: serde::Serialize> IntoReply for DomainAnswer<V> {
    fn into_reply(self, e: &Endpoint) -> Reply {
        let status = e.statuses().of(self.outcome.kind());
        let body = match self.saved {
            Some(saved) => Body::Saved(saved),
            None => Body::Json(render(self.outcome.view())),
        };
        Reply { status, body }
    }
}

/// What a read's or an operator call's `run` answers: a body (the
/// endpoint's status), a domain [`Outcome`] (the endpoint's status for its
/// kind), or a response of its own (the event stream).
pub trait IntoResponse {
    fn into_response(self, e: &Endpoint) -> HttpResponse;
}

impl IntoResponse for Value {
    fn into_response(self, e: &Endpoint) -> HttpResponse {
        json_response(e.status, &self)
    }
}

impl<V: serde::Serialize> IntoResponse for Outcome<V> {
    fn into_response(self, e: &Endpoint) -> HttpResponse {
        json_response(e.statuses().of(self.kind()), &render(self.view()))
    }
}

impl IntoResponse for HttpResponse {
    fn into_response(self, _: &Endpoint) -> HttpResponse {
        self
    }
}

impl Endpoint {
    /// A secret-key operation answering `status`.
    pub const fn secret_key(status: u16) -> Self {
        Endpoint {
            credential: Credential::SecretKey,
            gate: open,
            status,
            existing: status,
            existing_object: false,
            fingerprint: Fingerprint::Plain,
        }
    }

    /// An operation on the payment intent `{id}`, open to its client secret
    /// and checkout credential too.
    pub const fn intent_key(status: u16) -> Self {
        Endpoint {
            credential: Credential::IntentKey,
            ..Self::secret_key(status)
        }
    }

    /// An operator operation answering `status` (run with
    /// [`Endpoint::operate`] or [`Endpoint::operate_with`]).
    pub const fn operator(status: u16) -> Self {
        Endpoint {
            credential: Credential::Operator,
            ..Self::secret_key(status)
        }
    }

    pub const fn gate(self, gate: Gate) -> Self {
        Endpoint { gate, ..self }
    }

    /// The status of an [`Outcome::Existing`] (what was asked for was there
    /// already).
    pub const fn existing(self, existing: u16) -> Self {
        Endpoint { existing, ..self }
    }

    /// [`Endpoint::existing`], and a response with that status carries
    /// `Existing-Object: true` (a find-or-create that found its object).
    /// The header is derived from the status, so a replay carries it too.
    pub const fn existing_object(self, existing: u16) -> Self {
        Endpoint {
            existing,
            existing_object: true,
            ..self
        }
    }

    /// Marks a response of the `existing` status ([`Endpoint::existing_object`]).
    fn mark_existing(&self, mut resp: HttpResponse) -> HttpResponse {
        if self.existing_object
            && self.existing != self.status
            && resp.status().as_u16() == self.existing
        {
            resp.headers_mut().insert(
                HeaderName::from_static(EXISTING_OBJECT),
                HeaderValue::from_static("true"),
            );
        }
        resp
    }

    /// The status of each kind of outcome, handed down to the domain with
    /// the idempotency record.
    pub const fn statuses(&self) -> Statuses {
        Statuses {
            created: self.status,
            updated: self.status,
            existing: self.existing,
        }
    }

    pub const fn fingerprint(self, fingerprint: Fingerprint) -> Self {
        Endpoint {
            fingerprint,
            ..self
        }
    }

    fn authenticate(&self, req: &HttpRequest, state: &State) -> ApiResult<Principal> {
        let intent = match self.credential {
            Credential::SecretKey => None,
            Credential::IntentKey => Some(req.match_info().get("id").unwrap_or_default()),
            Credential::Operator => unreachable!("operator operations run through `operate`"),
        };
        let p = authenticate_for(req, state, intent)?;
        (self.gate)(&p)?;
        Ok(p)
    }

    /// A read: authentication, the gate, `run`, the rendering.
    pub async fn get<F, Fut, O>(&self, req: HttpRequest, state: State, run: F) -> ApiResult
    where
        F: FnOnce(Call) -> Fut,
        Fut: Future<Output = ApiResult<O>>,
        O: IntoResponse,
    {
        let p = self.authenticate(&req, &state)?;
        let call = Call {
            req,
            state,
            p,
            save: None,
        };
        Ok(run(call).await?.into_response(self))
    }

    /// A read with a query: authentication, the gate, the query's parse
    /// into `Q` (see [`params`]), `run`, the rendering.
    pub async fn get_with<Q, F, Fut, O>(&self, req: HttpRequest, state: State, run: F) -> ApiResult
    where
        Q: DeserializeOwned,
        F: FnOnce(Call, Q) -> Fut,
        Fut: Future<Output = ApiResult<O>>,
        O: IntoResponse,
    {
        self.get(req, state, |c| async move {
            let q = params::parse::<Q>(c.req.query_string())?;
            run(c, q).await
        })
        .await
    }

    /// A GET of a newest-first list whose only query parameters are `limit`
    /// and `starting_after` (`Q`, the operation's [`PageQuery`]): `read`
    /// gets the page for the caller's merchant and mode.
    pub async fn list_page<Q, F>(&self, req: HttpRequest, state: State, read: F) -> ApiResult
    where
        Q: PageQuery,
        F: FnOnce(&Env, Uuid, Mode, usize, Option<Uuid>) -> DomainResult<Page>,
    {
        self.get_with(req, state, |c, q: Q| async move {
            let (limit, starting_after) = q.page();
            let page = read(c.kobo(), c.p.merchant.id, c.p.mode, limit, starting_after)?;
            Ok(page.to_api())
        })
        .await
    }

    /// A POST: authentication, the gate, the body, idempotency, the body's
    /// parse into `B`, `run`, the rendering.
    pub async fn post<B, F, Fut, O>(
        &self,
        req: HttpRequest,
        state: State,
        payload: web::Payload,
        run: F,
    ) -> ApiResult
    where
        B: DeserializeOwned,
        F: FnOnce(Call, B) -> Fut,
        Fut: Future<Output = ApiResult<O>>,
        O: IntoReply,
    {
        let p = self.authenticate(&req, &state)?;
        let bytes = read_body(payload).await?;
        let key = super::components::IdempotencyKey::read(&req)?.key;
        self.post_as(req, state, p, key, &bytes, run).await
    }

    /// A POST for a principal authenticated elsewhere (the dashboard: a
    /// session's merchant and mode, [`kobo_actors::auth::Caller::Dashboard`])
    /// with its Idempotency-Key given (the form's nonce): the gate, then
    /// the same idempotency, parse, `run` and rendering as [`Endpoint::post`]
    /// on `bytes` (the JSON body the API would take).
    pub async fn post_as<B, F, Fut, O>(
        &self,
        req: HttpRequest,
        state: State,
        p: Principal,
        key: String,
        bytes: &[u8],
        run: F,
    ) -> ApiResult
    where
        B: DeserializeOwned,
        F: FnOnce(Call, B) -> Fut,
        Fut: Future<Output = ApiResult<O>>,
        O: IntoReply,
    {
        (self.gate)(&p)?;
        let fingerprint: Cow<[u8]> = match self.fingerprint {
            Fingerprint::Plain => Cow::Borrowed(bytes),
            Fingerprint::Keyed => Cow::Owned(keyed(&state.card_key, bytes)),
        };
        let (req2, state2, p2) = (req.clone(), state.clone(), p.clone());
        let resp = idempotent_keyed(
            &req,
            &state,
            &p,
            key,
            &fingerprint,
            self.statuses(),
            |save| async move {
                let parsed = body::parse::<B>(bytes)?;
                let call = Call {
                    req: req2,
                    state: state2,
                    p: p2,
                    save: Some(save),
                };
                Ok(run(call, parsed).await?.into_reply(self))
            },
        )
        .await?;
        Ok(self.mark_existing(resp))
    }
}

impl Endpoint {
    /// An operator call without a body: the admin token, `run`, the
    /// rendering.
    pub async fn operate<F, Fut, O>(&self, req: HttpRequest, state: State, run: F) -> ApiResult
    where
        F: FnOnce(State) -> Fut,
        Fut: Future<Output = ApiResult<O>>,
        O: IntoResponse,
    {
        self.operator_only(&req, &state)?;
        Ok(run(state).await?.into_response(self))
    }

    /// An operator read with a query: the admin token, the query's parse
    /// into `Q` (see [`params`]), `run`, the rendering.
    pub async fn operate_query<Q, F, Fut, O>(
        &self,
        req: HttpRequest,
        state: State,
        run: F,
    ) -> ApiResult
    where
        Q: DeserializeOwned,
        F: FnOnce(State, Q) -> Fut,
        Fut: Future<Output = ApiResult<O>>,
        O: IntoResponse,
    {
        self.operator_only(&req, &state)?;
        let q = params::parse::<Q>(req.query_string())?;
        Ok(run(state, q).await?.into_response(self))
    }

    /// An operator POST: the admin token, the body (cap and deadline), its
    /// parse into `B`, `run`, the rendering.
    pub async fn operate_with<B, F, Fut, O>(
        &self,
        req: HttpRequest,
        state: State,
        payload: web::Payload,
        run: F,
    ) -> ApiResult
    where
        B: DeserializeOwned,
        F: FnOnce(State, B) -> Fut,
        Fut: Future<Output = ApiResult<O>>,
        O: IntoResponse,
    {
        self.operator_only(&req, &state)?;
        let bytes = read_body(payload).await?;
        let parsed = body::parse::<B>(&bytes)?;
        Ok(run(state, parsed).await?.into_response(self))
    }

    fn operator_only(&self, req: &HttpRequest, state: &State) -> ApiResult<()> {
        debug_assert_eq!(self.credential, Credential::Operator);
        operator(req, state)
    }
}

/// Who asks for an operator action, for its audit entry: the request's id
/// (the `Request-Id` answer header).
pub fn audit(req: &HttpRequest) -> Audit {
    use actix_web::HttpMessage;
    let id = req
        .extensions()
        .get::<super::request::RequestId>()
        .map(|r| r.0.clone())
        .unwrap_or_default();
    Audit::request(id)
}

/// Whether `given` is the admin token `token`. Digests are compared, so
/// the time taken says nothing about the token; an empty `given` (or an
/// unset token) never matches. The operator API and the console's sign-in
/// both ask this.
pub fn admin_token_matches(given: &str, token: &str) -> bool {
    !given.is_empty()
        && !token.is_empty()
        && Sha256::digest(given.as_bytes()) == Sha256::digest(token.as_bytes())
}

/// Checks the admin token. Digests are compared so the time taken says
/// nothing about the token; an empty bearer is never an operator, whatever
/// the configured token.
fn operator(req: &HttpRequest, state: &State) -> ApiResult<()> {
    let given = req
        .headers()
        .get("authorization")
        .and_then(|h| h.to_str().ok())
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })
        .unwrap_or("")
        .trim();
    if !admin_token_matches(given, &state.admin_token) {
        return Err(ApiError(DomainError::unauthenticated(
            "invalid admin token",
        )));
    }
    Ok(())
}

/// What the idempotency layer fingerprints instead of a card body: a hash
/// keyed with a secret kept outside the store, so a saved fingerprint
/// cannot be brute-forced back into a card number, CVC, PIN or code.
pub fn keyed(key: &[u8; 32], body: &[u8]) -> Vec<u8> {
    let mut h = Sha256::new();
    h.update(b"kobo card body v1\0");
    h.update(key);
    h.update(body);
    hex::encode(h.finalize()).into_bytes()
}

#[cfg(test)]
mod tests {
    use actix_web::http::StatusCode;

    use super::*;

    fn marked(e: Endpoint, status: u16) -> bool {
        let resp = HttpResponse::build(StatusCode::from_u16(status).unwrap()).finish();
        e.mark_existing(resp).headers().get(EXISTING_OBJECT)
            == Some(&HeaderValue::from_static("true"))
    }

    /// `Existing-Object: true` goes with the `existing` status of an
    /// endpoint that declared it, and with nothing else.
    #[test]
    fn existing_object_follows_the_existing_status() {
        let find_or_create = Endpoint::secret_key(201).existing_object(200);
        assert!(marked(find_or_create, 200));
        assert!(!marked(find_or_create, 201));
        assert!(!marked(find_or_create, 409));
        // Declared without the header (a bank account added again).
        assert!(!marked(Endpoint::secret_key(201).existing(200), 200));
        // No distinct status to tell an existing object by.
        assert!(!marked(Endpoint::secret_key(200).existing_object(200), 200));
    }
}
