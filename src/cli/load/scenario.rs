//! What `kobo load` does to the server: the operations (each a whole payment
//! flow through the public API), the mix that weighs them, and the record of
//! every write the server acknowledged, which the audit checks afterwards.
//!
//! Operations (the names used by `--mix` and in the report):
//! - `healthz`: `GET /healthz` (the HTTP ceiling; no money);
//! - `create`: a payment intent create;
//! - `transfer` (alias `flow`): create, then pay by the sandbox transfer;
//! - `card`: create, then pay by card: every other one with the card that
//!   succeeds at once, the others with the Verve card and its PIN and OTP
//!   steps (CONTRACT.md section 5);
//! - `refund`: create, pay by transfer, refund part of it;
//! - `payout`: a payout from the balance released at set-up;
//! - `webhook`: create, pay by transfer, and wait for the signed
//!   `payment_intent.successful` delivery at the tool's own receiver.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};

use super::plain::{self, PlainHttp};
use super::webhook::Receiver;

/// One kind of operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    Healthz,
    Create,
    Transfer,
    Card,
    Refund,
    Payout,
    Webhook,
}

impl Op {
    pub const ALL: [Op; 7] = [
        Op::Healthz,
        Op::Create,
        Op::Transfer,
        Op::Card,
        Op::Refund,
        Op::Payout,
        Op::Webhook,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Healthz => "healthz",
            Op::Create => "create",
            Op::Transfer => "transfer",
            Op::Card => "card",
            Op::Refund => "refund",
            Op::Payout => "payout",
            Op::Webhook => "webhook",
        }
    }

    fn parse(s: &str) -> Option<Op> {
        if s == "flow" {
            return Some(Op::Transfer);
        }
        Op::ALL.into_iter().find(|o| o.name() == s)
    }
}

/// The operations and their weights.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mix(pub Vec<(Op, u32)>);

impl Mix {
    /// `create=5,transfer=3,card=2`; a name alone weighs 1 (`create` runs
    /// only creates). Each operation at most once, weights 0 to 1000, at
    /// least one above 0.
    pub fn parse(s: &str) -> Result<Mix> {
        let mut out: Vec<(Op, u32)> = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = match part.split_once('=') {
                Some((n, w)) => (
                    n.trim(),
                    w.trim()
                        .parse::<u32>()
                        .ok()
                        .filter(|w| *w <= 1000)
                        .with_context(|| {
                            format!("--mix {part}: the weight is a whole number 0 to 1000")
                        })?,
                ),
                None => (part, 1),
            };
            let Some(op) = Op::parse(name) else {
                bail!(
                    "--mix: unknown operation {name:?} (known: {})",
                    Op::ALL.map(Op::name).join(", ")
                );
            };
            if out.iter().any(|(o, _)| *o == op) {
                bail!("--mix: {name} is named twice");
            }
            out.push((op, weight));
        }
        out.retain(|(_, w)| *w > 0);
        if out.is_empty() {
            bail!("--mix names no operation with a weight above 0");
        }
        Ok(Mix(out))
    }

    pub fn has(&self, op: Op) -> bool {
        self.0.iter().any(|(o, _)| *o == op)
    }

    /// One cycle of the mix (as long as the sum of the weights), spread
    /// evenly by smooth weighted round-robin: `a=2,b=1` gives `a b a`; the
    /// n-th operation of a run is `cycle[n % len]`.
    pub fn cycle(&self) -> Vec<Op> {
        let total: i64 = self.0.iter().map(|(_, w)| i64::from(*w)).sum();
        let mut current = vec![0i64; self.0.len()];
        let mut out = Vec::with_capacity(total as usize);
        for _ in 0..total {
            for (c, (_, w)) in current.iter_mut().zip(&self.0) {
                *c += i64::from(*w);
            }
            let (best, _) = current
                .iter()
                .enumerate()
                .max_by_key(|(i, c)| (**c, -(*i as i64)))
                .expect("a non-empty mix");
            current[best] -= total;
            out.push(self.0[best].0);
        }
        out
    }
}

/// Why an operation failed, as the report counts it: `"<status> <code>"`
/// for an error answer, `"transport"` or `"timeout"` for no answer,
/// `"unexpected: ..."` for an answer the flow did not expect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpError(pub String);

impl OpError {
    fn unexpected(what: impl std::fmt::Display) -> OpError {
        OpError(format!("unexpected: {what}"))
    }
}

/// The kinds of object whose acknowledged writes the audit checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    PaymentIntent,
    Refund,
    Payout,
    WebhookEndpoint,
}

impl Kind {
    pub fn path(self) -> &'static str {
        match self {
            Kind::PaymentIntent => "/v1/payment_intents",
            Kind::Refund => "/v1/refunds",
            Kind::Payout => "/v1/payouts",
            Kind::WebhookEndpoint => "/v1/webhook_endpoints",
        }
    }
}

/// Every object the server acknowledged, with the last status the tool
/// saw in an answer (kept only for the audit).
pub struct Acknowledged {
    keep: bool,
    seen: Mutex<HashMap<(Kind, String), String>>,
}

impl Acknowledged {
    /// `keep`: false when no audit follows (a long benchmark need not hold
    /// every id in memory).
    pub fn new(keep: bool) -> Acknowledged {
        Acknowledged {
            keep,
            seen: Mutex::default(),
        }
    }

    pub fn saw(&self, kind: Kind, object: &impl Answered) {
        if !self.keep {
            return;
        }
        if let Some(id) = object.id() {
            let status = object.status().unwrap_or("").to_string();
            self.seen.lock().insert((kind, id.to_string()), status);
        }
    }

    pub fn all(&self) -> Vec<(Kind, String, String)> {
        let mut v: Vec<_> = self
            .seen
            .lock()
            .iter()
            .map(|((k, id), s)| (*k, id.clone(), s.clone()))
            .collect();
        v.sort();
        v
    }
}

/// An object the server answered with, as far as the tool reads it.
pub trait Answered {
    fn id(&self) -> Option<&str>;
    fn status(&self) -> Option<&str>;
}

impl Answered for Value {
    fn id(&self) -> Option<&str> {
        self["id"].as_str()
    }
    fn status(&self) -> Option<&str> {
        self["status"].as_str()
    }
}

/// The two fields the busiest operations read (creates, transfers,
/// refunds, payouts): parsed without building a tree of the whole object,
/// which made up an eighth of the tool's CPU time per create
/// (docs/performance.md).
#[derive(Debug, Default, Deserialize)]
pub struct Brief {
    id: Option<String>,
    status: Option<String>,
}

impl Answered for Brief {
    fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }
    fn status(&self) -> Option<&str> {
        self.status.as_deref()
    }
}

/// The public API with one merchant's secret key.
#[derive(Clone)]
pub struct Api {
    pub client: reqwest::Client,
    /// The operations' own connections, for a plain `http://` server
    /// ([`PlainHttp`]); `None`: the POSTs go through `client`.
    pub plain: Option<Arc<PlainHttp>>,
    pub base: String,
    pub key: String,
    pub key_style: KeyStyle,
}

/// How the Idempotency-Keys of a run are made (`--idempotency-keys`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KeyStyle {
    /// UUIDv4.
    Random,
    /// UUIDv7: increasing with time.
    TimeOrdered,
}

impl KeyStyle {
    fn new_key(self) -> String {
        match self {
            // A UUIDv4 from the thread's generator (rand 0.8's, which the
            // load tool draws everything else from).
            KeyStyle::Random => uuid::Builder::from_random_bytes(rand::random())
                .into_uuid()
                .to_string(),
            KeyStyle::TimeOrdered => uuid::Uuid::now_v7().to_string(),
        }
    }
}

impl Api {
    /// A GET that waits out rate limits (429: again after `Retry-After`,
    /// up to a minute in all): the audit's reads.
    pub async fn get_patiently(&self, path: &str) -> Result<Value, OpError> {
        let mut waited = Duration::ZERO;
        loop {
            let r = self
                .client
                .get(format!("{}{path}", self.base))
                .bearer_auth(&self.key)
                .send()
                .await
                .map_err(transport)?;
            if r.status() != reqwest::StatusCode::TOO_MANY_REQUESTS || waited >= RATE_LIMIT_WAIT {
                return answer::<Value>(Ok(r), &[200]).await;
            }
            let pause = r
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .map_or(Duration::from_secs(1), Duration::from_secs)
                .clamp(Duration::from_millis(100), Duration::from_secs(10));
            tokio::time::sleep(pause).await;
            waited += pause;
        }
    }

    /// `GET /healthz`, expecting 200.
    pub async fn healthz(&self) -> Result<(), OpError> {
        if let Some(plain) = &self.plain {
            let reply = plain.get_anonymous("/healthz").await.map_err(failed)?;
            return answered::<Value>(reply.status, &reply.body, &[200]).map(|_| ());
        }
        let r = self
            .client
            .get(format!("{}/healthz", self.base))
            .send()
            .await;
        answer::<Value>(r, &[200]).await.map(|_| ())
    }

    /// A POST with a fresh Idempotency-Key, expecting `want`; the answer
    /// read as `T` (a [`Value`], or a [`Brief`]).
    pub async fn post<T: DeserializeOwned + Default>(
        &self,
        path: &str,
        body: Value,
        want: &[u16],
    ) -> Result<T, OpError> {
        let idempotency_key = self.key_style.new_key();
        if let Some(plain) = &self.plain {
            let body = serde_json::to_vec(&body).expect("a JSON value serializes");
            let reply = plain
                .post(path, &idempotency_key, body)
                .await
                .map_err(failed)?;
            return answered(reply.status, &reply.body, want);
        }
        let r = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.key)
            .header("Idempotency-Key", idempotency_key)
            .json(&body)
            .send()
            .await;
        answer(r, want).await
    }
}

/// The answer's body as `T` when its status is one of `want` (a body that
/// is not one reads as `T::default()`), else the error with its status and
/// code.
async fn answer<T: DeserializeOwned + Default>(
    r: reqwest::Result<reqwest::Response>,
    want: &[u16],
) -> Result<T, OpError> {
    let r = r.map_err(transport)?;
    let status = r.status().as_u16();
    let body = r.bytes().await.map_err(transport)?;
    answered(status, &body, want)
}

/// [`answer`] of a response already read: `status` and `body`.
fn answered<T: DeserializeOwned + Default>(
    status: u16,
    body: &[u8],
    want: &[u16],
) -> Result<T, OpError> {
    if want.contains(&status) {
        return Ok(serde_json::from_slice(body).unwrap_or_default());
    }
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let code = v["error"]["code"].as_str().unwrap_or("no_error_code");
    Err(OpError(format!("{status} {code}")))
}

fn failed(failure: plain::Failure) -> OpError {
    OpError(failure.to_string())
}

fn transport(e: reqwest::Error) -> OpError {
    OpError(
        if e.is_timeout() {
            "timeout"
        } else {
            "transport"
        }
        .to_string(),
    )
}

/// The sandbox cards (CONTRACT.md section 5).
const CARD_SUCCESS: &str = "4084080000000409";
const CARD_PIN_OTP: &str = "5060990580000217499";
/// A sandbox payout destination that is paid at the first status query.
const PAYOUT_ACCOUNT: &str = "0123456789";
/// Each payment's amount (kobo): ₦2,500.
const AMOUNT: i64 = 250_000;
/// Each refund's (ends in 00: the sandbox makes it succeed).
const REFUND: i64 = 100_000;
/// Each payout's: ₦100 (₦110.75 debited with its fee and VAT).
const PAYOUT: i64 = 10_000;
/// Released at set-up for the payouts: ₦100,000,000.
const PAYOUT_FUNDS: i64 = 10_000_000_000;
/// How long the audit's reads wait out rate limits, in all.
const RATE_LIMIT_WAIT: Duration = Duration::from_secs(60);
/// How long a webhook operation waits for its delivery.
const DELIVERY_WAIT: Duration = Duration::from_secs(30);

/// The operations, bound to one server and merchant.
pub struct Flows {
    pub api: Api,
    pub acked: Arc<Acknowledged>,
    pub receiver: Option<Arc<Receiver>>,
    bank_account: Mutex<Option<String>>,
    cards: AtomicU64,
}

impl Flows {
    pub fn new(api: Api, receiver: Option<Arc<Receiver>>, audit: bool) -> Flows {
        Flows {
            api,
            acked: Arc::new(Acknowledged::new(audit)),
            receiver,
            bank_account: Mutex::new(None),
            cards: AtomicU64::new(0),
        }
    }

    /// What the mix needs before the clock starts: for payouts a bank
    /// account and released money; for webhooks an endpoint pointing at the
    /// receiver.
    pub async fn set_up(&self, mix: &Mix) -> Result<()> {
        let fail = |what: &str, e: OpError| anyhow::anyhow!("set-up, {what}: {}", e.0);
        if mix.has(Op::Payout) {
            // 200 when the account was saved before.
            let acct: Value = self
                .api
                .post(
                    "/v1/bank_accounts",
                    json!({"bank_code": "058", "account_number": PAYOUT_ACCOUNT}),
                    &[201, 200],
                )
                .await
                .map_err(|e| fail("saving the payout bank account", e))?;
            *self.bank_account.lock() = acct["id"].as_str().map(str::to_string);
            self.paid_intent(PAYOUT_FUNDS)
                .await
                .map_err(|e| fail("paying the payout funds", e))?;
            self.api
                .post::<Value>(
                    "/v1/test_helpers/balance/release_pending",
                    json!({}),
                    &[200],
                )
                .await
                .map_err(|e| fail("releasing the payout funds", e))?;
        }
        if mix.has(Op::Webhook) {
            let Some(receiver) = &self.receiver else {
                bail!("the webhook operation needs --webhook-tls (see `kobo load --help`)");
            };
            let ep: Value = self
                .api
                .post(
                    "/v1/webhook_endpoints",
                    json!({"url": receiver.url(), "events": ["payment_intent.successful"]}),
                    &[201],
                )
                .await
                .map_err(|e| fail("registering the webhook endpoint", e))?;
            self.acked.saw(Kind::WebhookEndpoint, &ep);
            let secret = ep["secret"]
                .as_str()
                .context("set-up: no endpoint secret")?;
            receiver.set_secret(secret);
        }
        Ok(())
    }

    /// Runs one operation; for `webhook`, returns once its delivery came.
    pub async fn run(&self, op: Op) -> Result<(), OpError> {
        match op {
            Op::Healthz => self.api.healthz().await,
            Op::Create => self.create(AMOUNT).await.map(|_| ()),
            Op::Transfer => self.paid_intent(AMOUNT).await.map(|_| ()),
            Op::Card => self.card().await,
            Op::Refund => {
                let pi = self.paid_intent(AMOUNT).await?;
                let r: Brief = self
                    .api
                    .post(
                        "/v1/refunds",
                        json!({"payment_intent": pi, "amount": REFUND}),
                        &[201],
                    )
                    .await?;
                self.acked.saw(Kind::Refund, &r);
                Ok(())
            }
            Op::Payout => {
                let acct = self.bank_account.lock().clone();
                let acct = acct.ok_or_else(|| OpError::unexpected("no bank account"))?;
                let p: Brief = self
                    .api
                    .post(
                        "/v1/payouts",
                        json!({"amount": PAYOUT, "currency": "NGN", "bank_account_id": acct}),
                        &[201],
                    )
                    .await?;
                self.acked.saw(Kind::Payout, &p);
                Ok(())
            }
            Op::Webhook => {
                let receiver = self
                    .receiver
                    .clone()
                    .ok_or_else(|| OpError::unexpected("no receiver"))?;
                let id = self.create(AMOUNT).await?;
                let delivered = receiver.expect(&id);
                self.transfer(&id).await?;
                match tokio::time::timeout(DELIVERY_WAIT, delivered).await {
                    Ok(Ok(())) => Ok(()),
                    _ => {
                        receiver.forget(&id);
                        Err(OpError("no delivery".into()))
                    }
                }
            }
        }
    }

    async fn create(&self, amount: i64) -> Result<String, OpError> {
        let pi: Brief = self
            .api
            .post(
                "/v1/payment_intents",
                json!({"amount": amount, "currency": "NGN"}),
                &[201],
            )
            .await?;
        self.acked.saw(Kind::PaymentIntent, &pi);
        pi.id
            .ok_or_else(|| OpError::unexpected("a create without id"))
    }

    async fn transfer(&self, id: &str) -> Result<(), OpError> {
        let pi: Brief = self
            .api
            .post(
                &format!("/v1/test_helpers/payment_intents/{id}/simulate_transfer"),
                json!({}),
                &[200],
            )
            .await?;
        self.paid(&pi)
    }

    /// A successful answer for the intent, recorded; anything else is an
    /// unexpected outcome.
    fn paid(&self, pi: &impl Answered) -> Result<(), OpError> {
        self.acked.saw(Kind::PaymentIntent, pi);
        match pi.status() {
            Some("successful") => Ok(()),
            other => Err(OpError::unexpected(format!(
                "payment {}",
                other.unwrap_or("without status")
            ))),
        }
    }

    async fn paid_intent(&self, amount: i64) -> Result<String, OpError> {
        let id = self.create(amount).await?;
        self.transfer(&id).await?;
        Ok(id)
    }

    async fn card(&self) -> Result<(), OpError> {
        let id = self.create(AMOUNT).await?;
        let with_pin = self.cards.fetch_add(1, Ordering::Relaxed) % 2 == 1;
        let number = if with_pin { CARD_PIN_OTP } else { CARD_SUCCESS };
        let card = json!({"number": number, "exp_month": 12, "exp_year": 2040, "cvc": "123", "name": "Load Tester"});
        let mut pi: Value = self
            .api
            .post(&format!("/v1/payment_intents/{id}/card"), card, &[200])
            .await?;
        for (input, value) in [("pin", "1234"), ("otp", "123456")] {
            if !with_pin {
                break;
            }
            self.acked.saw(Kind::PaymentIntent, &pi);
            if pi["next_action"]["input"] != input {
                return Err(OpError::unexpected(format!(
                    "next_action {} where {input} was due",
                    pi["next_action"]
                )));
            }
            pi = self
                .api
                .post(
                    &format!("/v1/payment_intents/{id}/authenticate"),
                    json!({ input: value }),
                    &[200],
                )
                .await?;
        }
        self.paid(&pi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mix_reads_weights_names_alone_and_the_flow_alias() {
        let m = Mix::parse("create=5, transfer=3,card").unwrap();
        assert_eq!(m.0, vec![(Op::Create, 5), (Op::Transfer, 3), (Op::Card, 1)]);
        assert_eq!(Mix::parse("flow").unwrap().0, vec![(Op::Transfer, 1)]);
        assert_eq!(
            Mix::parse("create=0,healthz=2").unwrap().0,
            vec![(Op::Healthz, 2)]
        );
    }

    #[test]
    fn a_mix_refuses_unknown_names_bad_weights_doubles_and_nothing() {
        for bad in [
            "creat=1",
            "create=x",
            "create=-1",
            "create=1001",
            "create,create=2",
            "create=0",
            "",
        ] {
            assert!(Mix::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_cycle_holds_each_operation_as_often_as_its_weight_spread_out() {
        let m = Mix::parse("create=2,payout=1").unwrap();
        assert_eq!(m.cycle(), vec![Op::Create, Op::Payout, Op::Create]);
        let m = Mix::parse("create=5,transfer=3,card=2,refund=1,payout=1,webhook=1").unwrap();
        let c = m.cycle();
        assert_eq!(c.len(), 13);
        for (op, w) in &m.0 {
            assert_eq!(c.iter().filter(|o| *o == op).count(), *w as usize);
        }
        // No operation runs twice in a row when others could go between.
        assert!(c.windows(2).filter(|w| w[0] == w[1]).count() <= 1);
    }

    #[test]
    fn time_ordered_idempotency_keys_sort_in_the_order_they_were_made_and_random_ones_do_not() {
        let made: Vec<String> = (0..10_000)
            .map(|_| KeyStyle::TimeOrdered.new_key())
            .collect();
        assert!(made.windows(2).all(|w| w[0] < w[1]));
        let random: Vec<String> = (0..10_000).map(|_| KeyStyle::Random.new_key()).collect();
        assert!(!random.windows(2).all(|w| w[0] < w[1]));
        for key in made.iter().chain(&random) {
            assert_eq!(uuid::Uuid::parse_str(key).unwrap().to_string(), *key);
        }
    }
}
