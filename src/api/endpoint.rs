//! The one endpoint wrapper (in the spirit of hyperswitch's `server_wrap`).
//! Each operation declares an [`Endpoint`]: its credential, the gate its
//! principal must pass (live-mode checks), its success status, whether it
//! saves its response itself, and how its body is fingerprinted; its
//! handler gives the body type and the `run`. The wrapper does the rest, in
//! the order of CONTRACT 3a: authentication and rate limits (401/403/429),
//! the gate, the body (cap and deadline: 413/408), the Idempotency-Key
//! (400/409/422, replays), the body's parse (400), then `run` (its lookups
//! 404, its state 409), and the rendering. Operator operations
//! (`/admin/v1`, [`Endpoint::operator`]) take the admin token instead: no
//! principal, no per-key rate limit, no Idempotency-Key.

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;

use actix_web::{web, HttpRequest, HttpResponse};
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use kobo_actors::audit::Audit;
use kobo_actors::idempotency::IdempotencySave;
use kobo_actors::paging::Page;
use kobo_actors::query::Principal;
use kobo_actors::{DomainError, DomainResult, ErrorCode, Kobo, Mode};

use super::body;
use super::{
    authenticate_for, idempotent, json_response, read_body, ApiError, ApiResult, Reply, State,
};

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
    status: u16,
    saves_itself: bool,
    fingerprint: Fingerprint,
}

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

    /// The idempotency record, for an operation that saves its response in
    /// its effect's batch.
    pub fn save(&self) -> Option<&IdempotencySave> {
        self.save.as_ref()
    }

    /// The idempotency record of a POST (which always has one).
    pub fn idem(&self) -> IdempotencySave {
        self.save
            .clone()
            .expect("the wrapper gives every POST its idempotency record")
    }
}

/// What `run` answers: a body (the endpoint's status), or a full [`Reply`].
pub trait Outcome {
    fn into_reply(self, e: &Endpoint) -> Reply;
}

impl Outcome for Value {
    fn into_reply(self, e: &Endpoint) -> Reply {
        Reply {
            status: e.status,
            body: self,
            saved: e.saves_itself,
        }
    }
}

impl Outcome for Reply {
    fn into_reply(self, _: &Endpoint) -> Reply {
        self
    }
}

/// What a read's `run` answers: a body (the endpoint's status), a full
/// [`Reply`], or a response of its own (the event stream).
pub trait Answer {
    fn into_response(self, e: &Endpoint) -> HttpResponse;
}

impl Answer for Value {
    fn into_response(self, e: &Endpoint) -> HttpResponse {
        json_response(e.status, &self)
    }
}

impl Answer for Reply {
    fn into_response(self, _: &Endpoint) -> HttpResponse {
        json_response(self.status, &self.body)
    }
}

impl Answer for HttpResponse {
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
            saves_itself: false,
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

    /// `run` passes [`Call::save`] into its effect's batch.
    pub const fn saves_itself(self) -> Self {
        Endpoint {
            saves_itself: true,
            ..self
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
        O: Answer,
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

    /// A GET of a newest-first list whose only query parameters are `limit`
    /// and `starting_after` (`params`, the operation's documented list):
    /// `read` gets the page for the caller's merchant and mode.
    pub async fn list_page<F>(
        &self,
        req: HttpRequest,
        state: State,
        params: &'static [&'static str],
        read: F,
    ) -> ApiResult
    where
        F: FnOnce(&Arc<Kobo>, Uuid, Mode, usize, Option<Uuid>) -> DomainResult<Page>,
    {
        self.get(req, state, |c| async move {
            let q = super::body::Query::parse(c.req.query_string(), params)?;
            let page = read(
                c.kobo(),
                c.p.merchant.id,
                c.p.mode,
                q.limit()?,
                q.uuid("starting_after")?,
            )?;
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
        O: Outcome,
    {
        let p = self.authenticate(&req, &state)?;
        let bytes = read_body(payload).await?;
        let fingerprint: Cow<[u8]> = match self.fingerprint {
            Fingerprint::Plain => Cow::Borrowed(&bytes),
            Fingerprint::Keyed => Cow::Owned(keyed(&state.card_key, &bytes)),
        };
        let (req2, state2, p2, bytes) = (req.clone(), state.clone(), p.clone(), &bytes);
        idempotent(&req, &state, &p, &fingerprint, |save| async move {
            let parsed = body::parse::<B>(bytes)?;
            let call = Call {
                req: req2,
                state: state2,
                p: p2,
                save: Some(save),
            };
            Ok(run(call, parsed).await?.into_reply(self))
        })
        .await
    }
}

impl Endpoint {
    /// An operator call without a body: the admin token, `run`, the
    /// rendering.
    pub async fn operate<F, Fut, O>(&self, req: HttpRequest, state: State, run: F) -> ApiResult
    where
        F: FnOnce(State) -> Fut,
        Fut: Future<Output = ApiResult<O>>,
        O: Answer,
    {
        self.operator_only(&req, &state)?;
        Ok(run(state).await?.into_response(self))
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
        O: Answer,
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
        .get::<crate::telemetry::RequestId>()
        .map(|r| r.0.clone())
        .unwrap_or_default();
    Audit::request(id)
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
    if given.is_empty()
        || state.admin_token.is_empty()
        || Sha256::digest(given.as_bytes()) != Sha256::digest(state.admin_token.as_bytes())
    {
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
