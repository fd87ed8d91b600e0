//! The state machine and the numbers.

use chrono::TimeZone;

use super::nuban::{check_digit, is_valid, nuban};
use super::*;
use AccountStatus::*;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 3, 3, 9, 0, 0).unwrap()
}

fn account(status: AccountStatus) -> VirtualAccount {
    VirtualAccount {
        id: Uuid::nil(),
        merchant: Uuid::nil(),
        mode: Mode::Test,
        seq: 1,
        customer: Uuid::nil(),
        brand: Uuid::nil(),
        serial: 100_000_000,
        account_number: nuban("035", 100_000_000),
        account_name: "ADA STORES/ADA".into(),
        bank_code: "035".into(),
        bank_name: "Wema Bank".into(),
        status,
        failure_reason: None,
        metadata: Map::new(),
        created_at: t0(),
        updated_at: t0(),
        activated_at: None,
        deactivated_at: None,
        check_due: (status == Pending).then(|| t0() + check_interval()),
        version: 1,
    }
}

fn now() -> DateTime<Utc> {
    t0() + check_interval()
}

#[test]
fn a_check_that_finds_the_account_open_activates_it() {
    for periodic in [true, false] {
        let c = Command::Checked {
            answer: BankAnswer::Opened,
            periodic,
        };
        let (a, e) = decide(&account(Pending), &c, now()).unwrap();
        assert_eq!(a.status, Active);
        assert_eq!(a.activated_at, Some(now()));
        assert_eq!(a.check_due, None);
        assert_eq!(a.version, 2);
        assert_eq!(
            e,
            vec![
                Effect::CancelCheck(t0() + check_interval()),
                Effect::Event(event::VIRTUAL_ACCOUNT_ACTIVATED)
            ]
        );
    }
}

#[test]
fn a_refusal_fails_and_closes_it() {
    let c = Command::Checked {
        answer: BankAnswer::Rejected("bank_rejected".into()),
        periodic: true,
    };
    let (a, e) = decide(&account(Pending), &c, now()).unwrap();
    assert_eq!(a.status, Failed);
    assert_eq!(a.failure_reason.as_deref(), Some("bank_rejected"));
    assert_eq!(
        e,
        vec![
            Effect::CancelCheck(t0() + check_interval()),
            Effect::Close,
            Effect::Event(event::VIRTUAL_ACCOUNT_FAILED)
        ]
    );
}

#[test]
fn nothing_yet_sets_the_next_periodic_check_and_a_refresh_changes_nothing() {
    let pending = |periodic| Command::Checked {
        answer: BankAnswer::Pending,
        periodic,
    };
    let (a, e) = decide(&account(Pending), &pending(true), now()).unwrap();
    assert_eq!(a.check_due, Some(now() + check_interval()));
    assert_eq!(e, vec![Effect::ScheduleCheck(now() + check_interval())]);
    let (a, e) = decide(&account(Pending), &pending(false), now()).unwrap();
    assert_eq!(a, account(Pending));
    assert!(e.is_empty());
}

#[test]
fn deactivation_is_for_pending_and_active_and_permanent() {
    let (a, e) = decide(&account(Pending), &Command::Deactivate, now()).unwrap();
    assert_eq!(a.status, Deactivated);
    assert_eq!(a.deactivated_at, Some(now()));
    assert_eq!(
        e,
        vec![Effect::CancelCheck(t0() + check_interval()), Effect::Close]
    );
    let (a, e) = decide(&account(Active), &Command::Deactivate, now()).unwrap();
    assert_eq!(a.status, Deactivated);
    assert_eq!(e, vec![Effect::Close]);
    for s in [Failed, Deactivated] {
        let err = decide(&account(s), &Command::Deactivate, now()).unwrap_err();
        assert_eq!(err.code, ErrorCode::VirtualAccountUnexpectedState);
        // Checks change nothing once settled.
        let c = Command::Checked {
            answer: BankAnswer::Opened,
            periodic: true,
        };
        let (a, e) = decide(&account(s), &c, now()).unwrap();
        assert_eq!(a, account(s));
        assert!(e.is_empty());
    }
}

#[test]
fn numbers_are_nubans_with_the_cbn_check_digit() {
    // CBN's worked example: bank 011, serial 000001457 -> check digit 9.
    assert_eq!(check_digit("011", 1_457), 9);
    let n = nuban("035", 123_456_789);
    assert_eq!(n.len(), 10);
    assert!(n.starts_with("123456789"));
    assert!(is_valid("035", &n));
    // Another bank, another check digit (usually); a changed digit fails.
    let mut bad = n.clone().into_bytes();
    bad[3] = if bad[3] == b'9' { b'0' } else { bad[3] + 1 };
    assert!(!is_valid("035", std::str::from_utf8(&bad).unwrap()));
    assert!(!is_valid("035", "12345"));
    for serial in [100_000_000, 555_555_555, 899_999_999] {
        assert!(is_valid("101", &nuban("101", serial)));
        assert!(!nuban("101", serial).starts_with('9'));
    }
}
