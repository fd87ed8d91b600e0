//! Creating payment intents and turning decisions into store batches.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use kobo_storage::{Batch, CommitError, KeyBuf, Table};

use crate::customer::directory::Customers;
use crate::customer::service::for_payment;
use crate::env::Env;
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::event::Event;
use crate::idempotency::{render_text, Answer, IdempotencySave, Outcome};
use crate::ids::{new_id, random_base62, scope_key, sha256_hex, Mode};
use crate::invoice::book::ApplyPayment;
use crate::ledger::actor::PostEntry;
use crate::ledger::release::plan_capture;
use crate::ledger::{EntrySpec, EntryType};
use crate::merchant::{Merchant, Settings};
use crate::money::{Channel, Currency, FeeBearer};
use crate::payment_intent::deps::PaymentIntentDeps;
use crate::payment_intent::{
    abandon_after, checkout_code, decide, ChargeAttempt, Command, Decision, Effect, NewIds,
    PaymentIntent, PaymentIntentView, Status,
};
use crate::timer::{Timer, TimerKind};

/// A validated create request (the HTTP layer parses the body into this).
#[derive(Debug, Clone)]
pub struct CreatePaymentIntent {
    pub amount: i64,
    pub currency: Currency,
    pub reference: Option<String>,
    pub description: Option<String>,
    pub customer_email: Option<String>,
    pub metadata: Map<String, Value>,
    pub fee_bearer: FeeBearer,
    pub brand: Option<Uuid>,
    pub customer: Option<Uuid>,
    pub return_url: Option<String>,
}

pub fn list_key(merchant: Uuid, mode: Mode, seq: u64) -> Vec<u8> {
    scope_key(merchant, mode).u64(seq).build()
}

pub fn status_prefix(merchant: Uuid, mode: Mode, status: Status) -> KeyBuf {
    scope_key(merchant, mode).u8(status.byte())
}

pub fn customer_prefix(merchant: Uuid, mode: Mode, customer: Uuid) -> KeyBuf {
    scope_key(merchant, mode).bytes(customer.as_bytes())
}

/// The key prefix of a virtual account's payments
/// (`payment_intent_virtual_account_index`).
pub fn virtual_account_prefix(merchant: Uuid, mode: Mode, account: Uuid) -> KeyBuf {
    scope_key(merchant, mode).bytes(account.as_bytes())
}

pub fn reference_key(merchant: Uuid, mode: Mode, reference: &str) -> Vec<u8> {
    scope_key(merchant, mode).str(reference).build()
}

pub fn attempt_key(intent: Uuid, number: u32) -> Vec<u8> {
    KeyBuf::new()
        .bytes(intent.as_bytes())
        .u64(number as u64)
        .build()
}

/// Creates a payment intent: one batch with the object, its list indexes,
/// the reference claim, the checkout link and the saved response. Its
/// customer is the one named, else the customer of `customer_email`
/// (found, or made first); a denied customer is refused (409).
pub async fn create(
    kobo: &Env,
    customers: &Customers,
    merchant: &Merchant,
    mode: Mode,
    params: CreatePaymentIntent,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<PaymentIntentView>> {
    create_for(kobo, customers, merchant, mode, params, None, idem).await
}

/// [`create`] of a payment for `invoice` (checked by the caller: the
/// customer's, payable, the amount allowed): applied to it by the
/// customer's invoice book when it succeeds.
pub async fn create_for(
    kobo: &Env,
    customers: &Customers,
    merchant: &Merchant,
    mode: Mode,
    params: CreatePaymentIntent,
    invoice: Option<Uuid>,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<PaymentIntentView>> {
    let now = kobo.clock.now();
    let email = params.customer_email.clone();
    let (mut intent, client_secret) = new_intent(kobo, merchant, mode, params, now)?;
    intent.invoice = invoice;
    let scope = (merchant.id, mode);
    intent.customer = for_payment(
        kobo,
        customers,
        scope,
        intent.brand,
        intent.customer,
        email.as_deref(),
    )
    .await?;
    commit_new(kobo, &intent, &client_secret, &[], idem, now, Batch::new()).await
}

/// The key of a hosted invoice page's form (`invoice_visits`).
pub fn invoice_visit_key(invoice: Uuid, nonce: &str) -> Vec<u8> {
    KeyBuf::new().bytes(invoice.as_bytes()).str(nonce).build()
}

/// The payment an earlier submit of the hosted invoice page's form
/// `nonce` made, if any (its view, with `checkout_url`).
fn invoice_visit(
    kobo: &Env,
    invoice: Uuid,
    nonce: &str,
) -> DomainResult<Option<PaymentIntentView>> {
    let read = kobo.store.read()?;
    let Some(raw) = read.get(Table::InvoiceVisits, &invoice_visit_key(invoice, nonce))? else {
        return Ok(None);
    };
    let id = Uuid::from_slice(&raw).map_err(|e| DomainError::internal(e.to_string()))?;
    let intent: PaymentIntent = read
        .get_decoded(Table::PaymentIntents, id.as_bytes())?
        .ok_or_else(|| DomainError::internal("an invoice page's payment is missing"))?;
    let mut view = intent.view(None);
    view.checkout_url = Some(format!(
        "{}/c/{}",
        kobo.config.base_url, intent.checkout_code
    ));
    Ok(Some(view))
}

/// [`create_for`] from the hosted invoice page's form `nonce`: the form's
/// row (`invoice_visits`) is claimed in the intent's own batch, so one
/// form makes one payment intent; a second submit of it (even at the same
/// moment) answers the payment the first one made (`Existing`).
pub async fn create_for_invoice_page(
    kobo: &Env,
    customers: &Customers,
    merchant: &Merchant,
    (mode, params, invoice): (Mode, CreatePaymentIntent, Uuid),
    nonce: &str,
) -> DomainResult<Outcome<PaymentIntentView>> {
    if let Some(view) = invoice_visit(kobo, invoice, nonce)? {
        return Ok(Outcome::Existing(view));
    }
    let now = kobo.clock.now();
    let email = params.customer_email.clone();
    let (mut intent, client_secret) = new_intent(kobo, merchant, mode, params, now)?;
    intent.invoice = Some(invoice);
    let scope = (merchant.id, mode);
    intent.customer = for_payment(
        kobo,
        customers,
        scope,
        intent.brand,
        intent.customer,
        email.as_deref(),
    )
    .await?;
    let key = invoice_visit_key(invoice, nonce);
    let mut extra = Batch::new();
    extra
        .require_absent(Table::InvoiceVisits, key.clone())
        .put_raw(Table::InvoiceVisits, key, intent.id.as_bytes().to_vec());
    match commit_new(kobo, &intent, &client_secret, &[], None, now, extra).await {
        Ok(answer) => Ok(answer.outcome),
        // The same form, submitted twice at once: the other submit won.
        Err(e) => match invoice_visit(kobo, invoice, nonce)? {
            Some(view) => Ok(Outcome::Existing(view)),
            None => Err(e),
        },
    }
}

/// Creates the payment intent of a charge on mandate `mandate` (checked
/// active by the mandate's actor): the intent, already `processing` with
/// its pending direct-debit attempt ([`Command::StartDirectDebit`]), the
/// timer that sends the debit and the saved response, in one batch. So a
/// replay of the request finds the saved response and never debits twice,
/// and a crash before the commit leaves nothing behind.
pub async fn create_mandate_charge(
    kobo: &Env,
    merchant: &Merchant,
    (mode, mandate, mut params, invoice): (Mode, Uuid, CreatePaymentIntent, Option<Uuid>),
    idem: Option<&IdempotencySave>,
    claim: Option<(Table, Vec<u8>)>,
) -> DomainResult<Answer<PaymentIntentView>> {
    let now = kobo.clock.now();
    // The business bears the fee, at the direct-debit price.
    params.fee_bearer = FeeBearer::Merchant;
    let (mut intent, client_secret) = new_intent(kobo, merchant, mode, params, now)?;
    intent.mandate = Some(mandate);
    // An invoice's charge (`charge_mandate`): applied to it on success.
    intent.invoice = invoice;
    // A claim (a subscription's debit attempt): written absent with the
    // intent, so the attempt makes one payment.
    let mut extra = Batch::new();
    if let Some((table, key)) = claim {
        extra
            .require_absent(table, key.clone())
            .put_raw(table, key, intent.id.as_bytes().to_vec());
    }
    let decision = decide(
        &intent,
        None,
        &Command::StartDirectDebit,
        NewIds::draw(),
        now,
    )?;
    commit_new(
        kobo,
        &decision.intent,
        &client_secret,
        &decision.effects,
        idem,
        now,
        extra,
    )
    .await
}

/// Creates the payment intent of a visit to link `link` (the link's actor
/// has checked the link and its free slots): `created`, `payment_link`
/// set, its slot held, and an abandonment timer `abandon_after()` from now
/// (a visitor who never starts paying frees the slot). `visit` is the
/// page form's row (`payment_link_visits`, link and nonce), claimed in the
/// same batch so one form makes one payment. The customer of the visit's
/// email is found or made first, as for any payment intent (a denied one
/// is refused: 409). Answers the new intent's
/// view (`Created`, with `checkout_url`); nothing is saved under an
/// Idempotency-Key here (a visit is not a request of its own).
pub async fn create_for_link(
    kobo: &Env,
    customers: &Customers,
    merchant: &Merchant,
    (mode, link, params, visit): (Mode, Uuid, CreatePaymentIntent, Option<Vec<u8>>),
    now: DateTime<Utc>,
) -> DomainResult<Outcome<PaymentIntentView>> {
    let email = params.customer_email.clone();
    let (mut intent, client_secret) = new_intent(kobo, merchant, mode, params, now)?;
    let scope = (merchant.id, mode);
    intent.customer =
        for_payment(kobo, customers, scope, intent.brand, None, email.as_deref()).await?;
    intent.payment_link = Some(link);
    let due = now + abandon_after();
    intent.abandon_due = Some(due);
    let effects = [Effect::ScheduleAbandon(due)];
    let mut extra = Batch::new();
    if let Some(key) = visit {
        extra
            .require_absent(Table::PaymentLinkVisits, key.clone())
            .put_raw(Table::PaymentLinkVisits, key, intent.id.as_bytes().to_vec());
    }
    let answer = commit_new(kobo, &intent, &client_secret, &effects, None, now, extra).await?;
    Ok(answer.outcome)
}

/// A new intent in `created` and its client secret, after the checks of
/// the names it gives (brand, customer).
fn new_intent(
    kobo: &Env,
    merchant: &Merchant,
    mode: Mode,
    params: CreatePaymentIntent,
    now: DateTime<Utc>,
) -> DomainResult<(PaymentIntent, String)> {
    let brand = check_names(kobo, merchant, mode, &params)?;
    build_intent(kobo, merchant, mode, params, brand, now)
}

/// A new intent in `created` of `brand` (checked by the caller) and its
/// client secret; every channel's price is checked against the amount.
pub(super) fn build_intent(
    kobo: &Env,
    merchant: &Merchant,
    mode: Mode,
    params: CreatePaymentIntent,
    brand: Uuid,
    now: DateTime<Utc>,
) -> DomainResult<(PaymentIntent, String)> {
    let pricing = merchant
        .settings
        .pricing
        .get(&params.currency)
        .cloned()
        .unwrap_or_default();
    let id = new_id(now);
    let client_secret = format!("pi_{}_secret_{}", id.simple(), random_base62(24));
    let seq = kobo.seq.next();
    // A capability naming its intent, then 131 random bits; no sequence,
    // which would let anyone holding two links measure the platform's
    // volume.
    let checkout_code = checkout_code::new_code(id);
    let intent = PaymentIntent {
        id,
        merchant: merchant.id,
        mode,
        seq,
        amount: params.amount,
        currency: params.currency,
        status: Status::Created,
        reference: params.reference,
        description: params.description,
        customer_email: params.customer_email,
        brand,
        customer: params.customer,
        payment_link: None,
        metadata: params.metadata,
        fee_bearer: params.fee_bearer,
        pricing,
        channel: None,
        failure_code: None,
        created_at: now,
        updated_at: now,
        paid_at: None,
        canceled_at: None,
        return_url: params.return_url,
        client_secret_hash: sha256_hex(&client_secret),
        client_secret: None,
        checkout_code,
        bank_transfer: None,
        next_action: None,
        abandon_due: None,
        attempts: 0,
        pending_attempt: None,
        failed_card_attempts: 0,
        mandate: None,
        bank_credit: None,
        invoice: None,
        version: 1,
    };
    // Every channel's price must price this amount: a price that cannot
    // (a fee over MAX_FEE) is refused now, not when someone pays.
    intent.check_pricing()?;
    Ok((intent, client_secret))
}

/// The objects a create names must be the merchant's in this mode (404
/// otherwise, never "someone else's"): the brand (answered; default: the
/// merchant's default brand) and the customer.
fn check_names(
    kobo: &Env,
    merchant: &Merchant,
    mode: Mode,
    params: &CreatePaymentIntent,
) -> DomainResult<Uuid> {
    let brand = match params.brand {
        Some(b) => {
            let read = kobo.store.read()?;
            let found: Option<crate::merchant::Brand> =
                read.get_decoded(Table::Brands, b.as_bytes())?;
            match found {
                Some(brand) if brand.merchant == merchant.id && brand.mode == mode => b,
                _ => return Err(DomainError::not_found("brand", b).with_param("brand")),
            }
        }
        None => merchant.default_brand(mode),
    };
    if let Some(c) = params.customer {
        crate::customer::load(kobo, merchant.id, mode, c).map_err(|e| e.with_param("customer"))?;
    }
    Ok(brand)
}

/// Commits a new intent: the object, its list indexes, the reference claim,
/// the checkout link, what its first decision asks for (`effects`: charge
/// attempts, the debit or abandonment timer), its payment link's slot and
/// the saved response, in one batch with `extra` (rows of the caller's).
async fn commit_new(
    kobo: &Env,
    intent: &PaymentIntent,
    client_secret: &str,
    effects: &[Effect],
    idem: Option<&IdempotencySave>,
    now: DateTime<Utc>,
    extra: Batch,
) -> DomainResult<Answer<PaymentIntentView>> {
    let checkout_url = format!("{}/c/{}", kobo.config.base_url, intent.checkout_code);
    let view = intent.view(Some(super::CreatedSecrets {
        checkout_url: &checkout_url,
        client_secret,
    }));
    let mut batch = extra;
    batch.owned_by(intent.merchant.as_bytes());
    insert(&mut batch, intent);
    for effect in effects {
        match effect {
            Effect::Attempt(_) | Effect::ScheduleDebitSend(_) | Effect::ScheduleAbandon(_) => {
                add_effect(&mut batch, intent, effect)
            }
            other => unreachable!("a new payment intent cannot take {other:?}"),
        }
    }
    if let Some(r) = &intent.reference {
        let key = reference_key(intent.merchant, intent.mode, r);
        batch
            .require_absent(Table::PaymentIntentReferences, key.clone())
            .put_raw(
                Table::PaymentIntentReferences,
                key,
                intent.id.as_bytes().to_vec(),
            );
    }
    let answer = Answer::save(Outcome::Created(view), idem, &mut batch, now);
    match kobo.writer.commit(batch).await {
        Ok(()) => Ok(answer),
        Err(CommitError::Conflict { table, .. })
            if table == Table::PaymentIntentReferences.name() =>
        {
            Err(DomainError::state(
                ErrorCode::DuplicateReference,
                "a payment intent with this reference already exists",
            ))
        }
        Err(CommitError::Conflict { .. }) => Err(DomainError::internal(
            "a generated checkout link collided; retry with the same Idempotency-Key",
        )),
        Err(e) => Err(e.into()),
    }
}

/// A new intent's rows: the object, its list, status and customer
/// indexes, and its payment link's index row and slot. Its checkout code
/// names it, so it needs no `checkout_links` row; one that does not (only
/// a code of an older form would) gets its row, claimed absent before.
fn insert(batch: &mut Batch, intent: &PaymentIntent) {
    let (id, seq, merchant, mode) = (intent.id, intent.seq, intent.merchant, intent.mode);
    let code = intent.checkout_code.as_bytes();
    batch
        .put_compact(Table::PaymentIntents, id.as_bytes().to_vec(), intent)
        .put_raw(
            Table::PaymentIntentIndex,
            list_key(merchant, mode, seq),
            id.as_bytes().to_vec(),
        )
        .put_raw(
            Table::PaymentIntentStatusIndex,
            status_prefix(merchant, mode, intent.status)
                .u64(seq)
                .build(),
            id.as_bytes().to_vec(),
        )
        .note_seq(seq);
    if checkout_code::has_link_row(intent) {
        batch
            .require_absent(Table::CheckoutLinks, code.to_vec())
            .put_raw(Table::CheckoutLinks, code.to_vec(), id.as_bytes().to_vec());
    }
    if let Some(c) = intent.customer {
        batch.put_raw(
            Table::PaymentIntentCustomerIndex,
            customer_prefix(merchant, mode, c).u64(seq).build(),
            id.as_bytes().to_vec(),
        );
    }
    super::link::on_create(batch, intent);
}

/// Saves a decision: the new state, its index moves, attempts, events,
/// timers and the saved response in one batch; through the intent's ledger
/// when money moves. Returns the response body.
pub async fn commit_decision(
    kobo: &PaymentIntentDeps,
    before: &PaymentIntent,
    decision: &Decision,
    idem: Option<&IdempotencySave>,
    batch: Batch,
    now: DateTime<Utc>,
) -> DomainResult<Answer<PaymentIntentView>> {
    commit_decision_with(kobo, before, decision, idem, batch, now, None).await
}

/// The money of a payment's success by `channel`, computed and checked
/// before the provider is asked to take the money: the fees and the
/// capture plan (pending/reserve split, release dates) under the
/// merchant's settings now. A price or delay that cannot be computed fails
/// here (409), before anything is charged or saved. Returns the settings
/// the commit must use ([`commit_decision_with`]), so the capture booked
/// after the provider answered is exactly the one checked here, whatever
/// the operator changes meanwhile.
pub fn precheck_capture(
    kobo: &Env,
    intent: &PaymentIntent,
    channel: Channel,
    now: DateTime<Utc>,
) -> DomainResult<Settings> {
    let merchant = crate::admin::load_merchant_shared(kobo, intent.merchant)?
        .ok_or_else(|| DomainError::internal("payment of an unknown merchant"))?;
    let (gross, fee, net) = intent.capture_on(channel)?;
    plan_capture(
        &kobo.calendar,
        &merchant.settings,
        intent.id,
        intent.merchant,
        intent.mode,
        intent.brand,
        intent.currency,
        gross,
        fee,
        net,
        now,
    )?;
    Ok(merchant.settings.clone())
}

/// [`commit_decision`]; a capture uses `settings` when given (from
/// [`precheck_capture`]), else the merchant's settings at commit time.
pub async fn commit_decision_with(
    kobo: &PaymentIntentDeps,
    before: &PaymentIntent,
    decision: &Decision,
    idem: Option<&IdempotencySave>,
    mut batch: Batch,
    now: DateTime<Utc>,
    settings: Option<&Settings>,
) -> DomainResult<Answer<PaymentIntentView>> {
    let after = &decision.intent;
    batch.owned_by(after.merchant.as_bytes());
    let view = after.view(None);
    // Written once, for the answer and every event of the change.
    let body = render_text(&view);
    if after != before {
        batch.put_compact(Table::PaymentIntents, after.id.as_bytes().to_vec(), after);
    }
    if after.status != before.status {
        let (merchant, mode, seq) = (after.merchant, after.mode, after.seq);
        batch
            .delete(
                Table::PaymentIntentStatusIndex,
                status_prefix(merchant, mode, before.status)
                    .u64(seq)
                    .build(),
            )
            .put_raw(
                Table::PaymentIntentStatusIndex,
                status_prefix(merchant, mode, after.status).u64(seq).build(),
                after.id.as_bytes().to_vec(),
            );
    }
    super::link::on_transition(&mut batch, before, after);
    wake_subscription(kobo, &mut batch, before, after, now)?;
    let mut capture = None;
    for effect in &decision.effects {
        match effect {
            Effect::Event(t) => {
                let scope = (after.merchant, after.mode);
                Event::record_text(kobo, scope, t, body.clone(), now, &mut batch)
            }
            Effect::Capture { gross, fee, net } => capture = Some((*gross, *fee, *net)),
            other => add_effect(&mut batch, after, other),
        }
    }
    let answer = Answer::save_text(Outcome::Updated(view), body, idem, &mut batch, now);
    match capture {
        Some(money) => post_capture(kobo, after, settings, money, batch, now).await?,
        None if !batch.is_empty() => kobo.writer.commit(batch).await.map_err(DomainError::from)?,
        None => {}
    }
    Ok(answer)
}

/// A failed debit of a subscription's invoice: the subscription hears of
/// it at once (its wake timer, in the failure's batch). Its success
/// reaches it through the invoice's payment (the invoice book's batch).
fn wake_subscription(
    kobo: &Env,
    batch: &mut Batch,
    before: &PaymentIntent,
    after: &PaymentIntent,
    now: DateTime<Utc>,
) -> DomainResult<()> {
    let failed = after.status == Status::Failed && before.status != Status::Failed;
    let (Some(invoice), Some(_)) = (after.invoice, after.mandate) else {
        return Ok(());
    };
    if !failed {
        return Ok(());
    }
    if let Some(s) = crate::invoice::service::load_any(kobo, invoice)?.and_then(|i| i.subscription)
    {
        Timer::new(TimerKind::SubscriptionWake, s, after.merchant, after.mode).schedule(batch, now);
    }
    Ok(())
}

/// The rows of an effect that is neither an event nor the capture: a
/// charge attempt, or a timer scheduled or cancelled.
fn add_effect(batch: &mut Batch, after: &PaymentIntent, effect: &Effect) {
    let timer = |kind| Timer::new(kind, after.id, after.merchant, after.mode);
    match effect {
        Effect::Attempt(a) => {
            batch.put_compact(
                Table::ChargeAttempts,
                attempt_key(a.payment_intent, a.number),
                a,
            );
        }
        Effect::ScheduleAbandon(due) => {
            timer(TimerKind::PaymentIntentAbandon).schedule(batch, *due);
        }
        Effect::CancelAbandon(due) => {
            batch.delete(
                Table::Timers,
                Timer::key(*due, TimerKind::PaymentIntentAbandon, after.id),
            );
        }
        Effect::ScheduleDebitSend(due) => timer(TimerKind::DirectDebitSend).schedule(batch, *due),
        Effect::ScheduleDebitStatus(due) => {
            timer(TimerKind::DirectDebitStatus).schedule(batch, *due)
        }
        Effect::Event(_) | Effect::Capture { .. } => unreachable!("handled by the commit"),
    }
}

/// Books a capture (`gross`, `fee`, `net`) with `batch` through the
/// merchant's ledger: its pending/reserve lines and scheduled releases,
/// under the settlement terms as they were checked before the provider was
/// asked (`settings`), else as they are now.
async fn post_capture(
    kobo: &PaymentIntentDeps,
    after: &PaymentIntent,
    settings: Option<&Settings>,
    (gross, fee, net): (i64, i64, i64),
    mut batch: Batch,
    now: DateTime<Utc>,
) -> DomainResult<()> {
    let loaded;
    let settings = match settings {
        Some(s) => s,
        None => {
            loaded = crate::admin::load_merchant_shared(kobo, after.merchant)?
                .ok_or_else(|| DomainError::internal("payment of an unknown merchant"))?;
            &loaded.settings
        }
    };
    let plan = plan_capture(
        &kobo.calendar,
        settings,
        after.id,
        after.merchant,
        after.mode,
        after.brand,
        after.currency,
        gross,
        fee,
        net,
        now,
    )?;
    for release in &plan.releases {
        release.schedule(&mut batch);
    }
    let entry = EntrySpec {
        entry_type: EntryType::Payment,
        source: after.id,
        description: format!("payment {}", after.reference.as_deref().unwrap_or(""))
            .trim_end()
            .to_string(),
        lines: plan.lines,
        allow_negative: false,
    };
    let post = PostEntry {
        entry,
        with: crate::registry::Once::new(batch),
        usage: None,
    };
    // A payment for an invoice, or a transfer into a customer's virtual
    // account: the customer's invoice book adds the application to this
    // batch and posts it (one commit, under the customer's serialization).
    if let (Some(customer), true) = (
        after.customer,
        after.invoice.is_some() || after.bank_credit.is_some(),
    ) {
        let apply = ApplyPayment {
            merchant: after.merchant,
            mode: after.mode,
            payment_intent: after.id,
            invoice: after.invoice,
            currency: after.currency,
            amount: after.amount,
            post,
        };
        return kobo.invoices.send(customer, apply).await?;
    }
    kobo.ledgers
        .send((after.merchant, after.mode), post)
        .await??;
    Ok(())
}

/// Reads one charge attempt.
pub fn load_attempt(kobo: &Env, intent: Uuid, number: u32) -> DomainResult<Option<ChargeAttempt>> {
    Ok(kobo
        .store
        .read()?
        .get_decoded(Table::ChargeAttempts, &attempt_key(intent, number))?)
}
