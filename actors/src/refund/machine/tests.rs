//! The aftercare state machine, state by command: every command against
//! every state it can meet, with what it decides.

use chrono::{Duration, TimeZone};

use super::*;
use crate::error::ErrorCode;
use crate::money::{default_pricing, Currency, FeeBearer};

const AMOUNT: i64 = 1_000_000;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 3, 3, 9, 0, 0).unwrap()
}

fn payment(status: Status) -> PaymentIntent {
    PaymentIntent {
        id: Uuid::from_u128(1),
        merchant: Uuid::from_u128(2),
        mode: Mode::Test,
        seq: 7,
        amount: AMOUNT,
        currency: Currency::NGN,
        status,
        reference: None,
        description: None,
        customer_email: None,
        brand: Uuid::from_u128(3),
        customer: None,
        payment_link: None,
        metadata: Map::new(),
        fee_bearer: FeeBearer::Merchant,
        pricing: default_pricing()[&Currency::NGN].clone(),
        channel: None,
        failure_code: None,
        created_at: now() - Duration::days(1),
        updated_at: now() - Duration::days(1),
        paid_at: None,
        canceled_at: None,
        return_url: None,
        client_secret_hash: "hash".into(),
        client_secret: None,
        checkout_code: "code".into(),
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
    }
}

fn new_ids() -> NewIds {
    NewIds {
        id: Uuid::from_u128(10),
        seq: 42,
    }
}

fn refund(status: RefundStatus, amount: i64) -> Refund {
    let p = payment(Status::Successful);
    Refund {
        id: Uuid::from_u128(20),
        merchant: p.merchant,
        mode: p.mode,
        seq: 8,
        payment_intent: p.id,
        brand: p.brand,
        amount,
        currency: p.currency,
        status,
        reason: None,
        failure_reason: None,
        metadata: Map::new(),
        created_at: now() - Duration::hours(1),
        updated_at: now() - Duration::hours(1),
    }
}

fn dispute(status: DisputeStatus, amount: i64) -> Dispute {
    let p = payment(Status::Successful);
    let opened = now() - Duration::days(1);
    Dispute {
        id: Uuid::from_u128(30),
        merchant: p.merchant,
        mode: p.mode,
        seq: 9,
        payment_intent: p.id,
        brand: p.brand,
        amount,
        currency: p.currency,
        status,
        reason: "general".into(),
        respond_by: opened + response_window(),
        evidence: None,
        evidence_submitted_at: None,
        created_at: opened,
        updated_at: opened,
    }
}

/// A late dispute: its response window ended.
fn late(mut d: Dispute) -> Dispute {
    d.respond_by = now() - Duration::seconds(1);
    d
}

fn care(refunded: i64, lost: i64, open_dispute: bool) -> Aftercare {
    Aftercare {
        refunded,
        lost,
        open_dispute: open_dispute.then(|| Uuid::from_u128(30)),
    }
}

fn create_refund(amount: Option<i64>) -> Command {
    Command::CreateRefund {
        new: new_ids(),
        amount,
        reason: None,
        metadata: Map::new(),
    }
}

fn open_dispute(amount: Option<i64>) -> Command {
    Command::OpenDispute {
        new: new_ids(),
        amount,
        reason: None,
    }
}

fn answer(r: Refund, succeeded: bool) -> Command {
    Command::RefundOutcome {
        refund: r,
        succeeded,
        reason: None,
    }
}

fn evidence(d: Dispute) -> Command {
    Command::SubmitEvidence {
        dispute: d,
        evidence: serde_json::json!({"text": "delivered"}),
    }
}

fn resolve(d: Dispute, won: bool) -> Command {
    Command::ResolveDispute { dispute: d, won }
}

/// An effect, named for the table.
fn tag(e: &Effect) -> String {
    match e {
        Effect::Save => "save".into(),
        Effect::Index => "index".into(),
        Effect::Answered => "answered".into(),
        Effect::Event(t) => format!("event {t}"),
        Effect::Money(m) => match m.op {
            PaymentMoneyOp::Debit { amount, into, .. } => format!("debit {amount} {into:?}"),
            PaymentMoneyOp::Return { amount, from } => format!("return {amount} {from:?}"),
            PaymentMoneyOp::Leave { amount, from } => format!("leave {amount} {from:?}"),
        },
        Effect::AskProvider => "ask provider".into(),
    }
}

/// What a case decides: the kind and the effects, or the error's code.
type Expect = Result<(Kind, &'static [&'static str]), ErrorCode>;

#[test]
fn every_state_and_command() {
    use DisputeStatus::{Lost, Open, Won};
    use RefundStatus::{Failed, Pending, Succeeded};
    use Status::{Processing, Successful};
    let cases: Vec<(&str, Status, Aftercare, Command, Expect)> = vec![
        // Refunds.
        (
            "refund all of a payment",
            Successful,
            care(0, 0, false),
            create_refund(None),
            Ok((
                Kind::Created,
                &[
                    "save",
                    "index",
                    "debit 1000000 RefundInFlight",
                    "ask provider",
                ],
            )),
        ),
        (
            "refund part of what is left",
            Successful,
            care(600_000, 0, false),
            create_refund(Some(400_000)),
            Ok((
                Kind::Created,
                &[
                    "save",
                    "index",
                    "debit 400000 RefundInFlight",
                    "ask provider",
                ],
            )),
        ),
        (
            "refund more than is left",
            Successful,
            care(600_000, 0, false),
            create_refund(Some(400_001)),
            Err(ErrorCode::AmountTooLarge),
        ),
        (
            "refund a fully refunded payment",
            Successful,
            care(500_000, 500_000, false),
            create_refund(None),
            Err(ErrorCode::AmountTooLarge),
        ),
        (
            "refund an unpaid payment",
            Processing,
            care(0, 0, false),
            create_refund(None),
            Err(ErrorCode::PaymentNotRefundable),
        ),
        (
            "refund a disputed payment",
            Successful,
            care(0, 0, true),
            create_refund(None),
            Err(ErrorCode::PaymentDisputed),
        ),
        (
            "a refund succeeds",
            Successful,
            care(AMOUNT, 0, false),
            answer(refund(Pending, AMOUNT), true),
            Ok((
                Kind::Updated,
                &[
                    "answered",
                    "save",
                    "event refund.succeeded",
                    "leave 1000000 RefundInFlight",
                ],
            )),
        ),
        (
            "a refund fails",
            Successful,
            care(AMOUNT, 0, false),
            answer(refund(Pending, AMOUNT), false),
            Ok((
                Kind::Updated,
                &[
                    "answered",
                    "save",
                    "event refund.failed",
                    "return 1000000 RefundInFlight",
                ],
            )),
        ),
        (
            "a succeeded refund's answer again",
            Successful,
            care(AMOUNT, 0, false),
            answer(refund(Succeeded, AMOUNT), false),
            Ok((Kind::Updated, &["answered"])),
        ),
        (
            "a failed refund's answer again",
            Successful,
            care(0, 0, false),
            answer(refund(Failed, AMOUNT), true),
            Ok((Kind::Updated, &["answered"])),
        ),
        // Disputes.
        (
            "open a dispute",
            Successful,
            care(0, 0, false),
            open_dispute(None),
            Ok((
                Kind::Created,
                &[
                    "save",
                    "index",
                    "event dispute.created",
                    "debit 1000000 DisputeHold",
                ],
            )),
        ),
        (
            "open a dispute on what is left",
            Successful,
            care(900_000, 0, false),
            open_dispute(Some(100_001)),
            Err(ErrorCode::AmountTooLarge),
        ),
        (
            "open a second dispute",
            Successful,
            care(0, 0, true),
            open_dispute(None),
            Err(ErrorCode::DisputeAlreadyOpen),
        ),
        (
            "dispute an unpaid payment",
            Processing,
            care(0, 0, false),
            open_dispute(None),
            Err(ErrorCode::PaymentNotDisputable),
        ),
        (
            "evidence in time",
            Successful,
            care(0, 0, true),
            evidence(dispute(Open, AMOUNT)),
            Ok((Kind::Updated, &["save"])),
        ),
        (
            "evidence too late",
            Successful,
            care(0, 0, true),
            evidence(late(dispute(Open, AMOUNT))),
            Err(ErrorCode::DisputeResponseLate),
        ),
        (
            "evidence on a won dispute",
            Successful,
            care(0, 0, false),
            evidence(dispute(Won, AMOUNT)),
            Err(ErrorCode::DisputeNotOpen),
        ),
        (
            "evidence on a lost dispute",
            Successful,
            care(0, AMOUNT, false),
            evidence(dispute(Lost, AMOUNT)),
            Err(ErrorCode::DisputeNotOpen),
        ),
        (
            "a dispute is won",
            Successful,
            care(0, 0, true),
            resolve(dispute(Open, AMOUNT), true),
            Ok((
                Kind::Updated,
                &["save", "event dispute.won", "return 1000000 DisputeHold"],
            )),
        ),
        (
            "a late dispute is lost",
            Successful,
            care(0, 0, true),
            resolve(late(dispute(Open, AMOUNT)), false),
            Ok((
                Kind::Updated,
                &["save", "event dispute.lost", "leave 1000000 DisputeHold"],
            )),
        ),
        (
            "a won dispute decided again",
            Successful,
            care(0, 0, false),
            resolve(dispute(Won, AMOUNT), false),
            Err(ErrorCode::DisputeNotOpen),
        ),
        (
            "a lost dispute decided again",
            Successful,
            care(0, AMOUNT, false),
            resolve(dispute(Lost, AMOUNT), true),
            Err(ErrorCode::DisputeNotOpen),
        ),
    ];
    for (name, status, care, command, expect) in cases {
        let got = decide(&payment(status), &care, command.clone(), now());
        let again = decide(&payment(status), &care, command, now());
        assert_eq!(got, again, "{name}: the same inputs, the same decision");
        match (got, expect) {
            (Ok(d), Ok((kind, effects))) => {
                assert_eq!(d.kind, kind, "{name}");
                let tags: Vec<String> = d.effects.iter().map(tag).collect();
                assert_eq!(tags, effects, "{name}");
                if kind == Kind::Created {
                    assert_eq!(d.subject.id(), new_ids().id, "{name}: the id given");
                }
            }
            (Err(e), Err(code)) => assert_eq!(e.code, code, "{name}: {}", e.message),
            (got, expect) => panic!("{name}: got {got:?}, expected {expect:?}"),
        }
    }
}

#[test]
fn a_refund_holds_its_amount_until_it_fails() {
    let p = payment(Status::Successful);
    let d = decide(&p, &care(100, 0, false), create_refund(Some(400)), now()).unwrap();
    assert_eq!(d.care, care(500, 0, false));
    let Subject::Refund(r) = &d.subject else {
        panic!("a refund")
    };
    assert_eq!(
        (r.status, r.amount, r.seq, r.created_at),
        (RefundStatus::Pending, 400, 42, now())
    );
    let failed = decide(&p, &d.care, answer(r.clone(), false), now()).unwrap();
    assert_eq!(failed.care, care(100, 0, false));
    let Subject::Refund(r) = failed.subject else {
        panic!("a refund")
    };
    assert_eq!(r.status, RefundStatus::Failed);
    assert_eq!(r.failure_reason.as_deref(), Some("refund_failed"));
    let succeeded = decide(&p, &d.care, answer(refund_of(&d), true), now()).unwrap();
    assert_eq!(succeeded.care, care(500, 0, false));
}

fn refund_of(d: &Decision) -> Refund {
    match &d.subject {
        Subject::Refund(r) => r.clone(),
        Subject::Dispute(_) => panic!("a refund"),
    }
}

#[test]
fn a_dispute_blocks_refunds_until_it_is_decided_and_a_loss_counts_as_refunded() {
    let p = payment(Status::Successful);
    let opened = decide(&p, &care(0, 0, false), open_dispute(Some(300)), now()).unwrap();
    assert_eq!(opened.care.open_dispute, Some(new_ids().id));
    let Subject::Dispute(d) = opened.subject.clone() else {
        panic!("a dispute")
    };
    assert_eq!(d.respond_by, now() + response_window());
    let lost = decide(&p, &opened.care, resolve(d.clone(), false), now()).unwrap();
    assert_eq!(lost.care, care(0, 300, false));
    let won = decide(&p, &opened.care, resolve(d, true), now()).unwrap();
    assert_eq!(won.care, care(0, 0, false));
    let after_loss = decide(&p, &lost.care, create_refund(None), now()).unwrap();
    assert_eq!(refund_of(&after_loss).amount, AMOUNT - 300);
}
