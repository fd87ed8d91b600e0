//! The payment link's rules and state machine, pure.

use super::visit::{check, VisitInput};
use super::*;
use chrono::TimeZone;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 3, 3, 9, 0, 0).unwrap()
}

fn chosen(min: Option<i64>, max: Option<i64>, suggested: Vec<i64>) -> AmountRule {
    AmountRule {
        amount_type: AmountType::CustomerChosen,
        amount: None,
        min_amount: min,
        max_amount: max,
        suggested_amounts: suggested,
    }
}

pub(crate) fn fixed(amount: i64) -> AmountRule {
    AmountRule {
        amount_type: AmountType::Fixed,
        amount: Some(amount),
        min_amount: None,
        max_amount: None,
        suggested_amounts: Vec::new(),
    }
}

/// An active test-mode link of the nil merchant (tests elsewhere
/// override its ids).
pub(crate) fn link(amount: AmountRule) -> PaymentLink {
    PaymentLink {
        id: Uuid::nil(),
        merchant: Uuid::nil(),
        mode: Mode::Test,
        seq: 1,
        name: "Rice".into(),
        description: None,
        currency: Currency::NGN,
        fee_bearer: FeeBearer::Merchant,
        brand: Uuid::nil(),
        amount,
        slug: "rice".into(),
        status: LinkStatus::Active,
        inactive_reason: None,
        expires_at: None,
        max_payments: None,
        custom_fields: Vec::new(),
        collect_phone: false,
        return_url: None,
        success_message: None,
        metadata: Map::new(),
        created_at: t0(),
        updated_at: t0(),
        version: 1,
    }
}

fn field(key: &str, t: FieldType, required: bool) -> CustomField {
    CustomField {
        key: key.into(),
        label: key.to_uppercase(),
        field_type: t,
        options: (t == FieldType::Dropdown).then(|| vec!["S".into(), "M".into()]),
        required,
    }
}

#[test]
fn amount_rules_are_checked_whole() {
    assert!(fixed(100).checked().is_ok());
    assert_eq!(
        fixed(99).checked().unwrap_err().param.as_deref(),
        Some("amount")
    );
    let mut f = fixed(500);
    f.min_amount = Some(100);
    assert_eq!(
        f.checked().unwrap_err().param.as_deref(),
        Some("min_amount")
    );
    let mut none = fixed(1);
    none.amount = None;
    assert_eq!(
        none.checked().unwrap_err().code,
        ErrorCode::ParameterMissing
    );
    let c = chosen(None, None, vec![]).checked().unwrap();
    assert_eq!(c.min_amount, Some(MIN_AMOUNT));
    let err = chosen(Some(5000), Some(4000), vec![])
        .checked()
        .unwrap_err();
    assert_eq!(err.param.as_deref(), Some("max_amount"));
    assert!(chosen(Some(50), None, vec![]).checked().is_err());
    let ok = chosen(Some(1000), Some(9000), vec![1000, 2000, 5000, 9000]);
    assert!(ok.checked().is_ok());
    for bad in [
        vec![1000, 2000, 3000, 4000, 5000],
        vec![999],
        vec![9001],
        vec![2000, 2000],
    ] {
        let e = chosen(Some(1000), Some(9000), bad).checked().unwrap_err();
        assert_eq!(e.param.as_deref(), Some("suggested_amounts"));
    }
    let mut with_amount = chosen(None, None, vec![]);
    with_amount.amount = Some(500);
    assert_eq!(
        with_amount.checked().unwrap_err().param.as_deref(),
        Some("amount")
    );
}

#[test]
fn custom_fields_are_checked() {
    let ok = vec![
        field("size", FieldType::Dropdown, true),
        field("note", FieldType::Text, false),
    ];
    assert!(check_custom_fields(&ok).is_ok());
    let six: Vec<_> = (0..6)
        .map(|i| field(&format!("f{i}"), FieldType::Text, false))
        .collect();
    assert_eq!(
        check_custom_fields(&six).unwrap_err().param.as_deref(),
        Some("custom_fields")
    );
    let dup = vec![
        field("a", FieldType::Text, false),
        field("a", FieldType::Number, false),
    ];
    assert_eq!(
        check_custom_fields(&dup).unwrap_err().param.as_deref(),
        Some("custom_fields[1].key")
    );
    let bad_key = vec![field("Big Key", FieldType::Text, false)];
    assert_eq!(
        check_custom_fields(&bad_key).unwrap_err().param.as_deref(),
        Some("custom_fields[0].key")
    );
    let mut no_options = field("s", FieldType::Dropdown, true);
    no_options.options = None;
    assert_eq!(
        check_custom_fields(&[no_options])
            .unwrap_err()
            .param
            .as_deref(),
        Some("custom_fields[0].options")
    );
    let mut stray = field("s", FieldType::Text, true);
    stray.options = Some(vec!["x".into()]);
    assert!(check_custom_fields(&[stray]).is_err());
}

#[test]
fn slugs() {
    for ok in ["abc", "rice-bags-2025", &"a".repeat(60)] {
        assert!(valid_slug(ok), "{ok}");
    }
    for bad in ["ab", "Rice", "rice bags", "riz_1", &"a".repeat(61), "é-bag"] {
        assert!(!valid_slug(bad), "{bad}");
    }
}

#[test]
fn a_visit_is_checked_against_the_link_and_every_error_is_reported() {
    let mut l = link(chosen(Some(1000), Some(5000), vec![2000]));
    l.collect_phone = true;
    l.custom_fields = vec![
        field("size", FieldType::Dropdown, true),
        field("qty", FieldType::Number, false),
    ];
    let errors = check(&l, &VisitInput::default()).unwrap_err();
    let params: Vec<_> = errors.iter().map(|e| e.param.clone().unwrap()).collect();
    assert_eq!(params, ["amount", "email", "phone", "custom_fields.size"]);
    let input = VisitInput {
        amount: Some(6000),
        email: Some("ada@example".into()),
        phone: Some("12".into()),
        answers: [("size".into(), "XL".into()), ("qty".into(), "two".into())].into(),
        nonce: None,
    };
    let errors = check(&l, &input).unwrap_err();
    let codes: Vec<_> = errors
        .iter()
        .map(|e| (e.code, e.param.clone().unwrap()))
        .collect();
    assert_eq!(
        codes,
        [
            (ErrorCode::AmountOutOfRange, "amount".to_string()),
            (ErrorCode::ParameterInvalid, "email".into()),
            (ErrorCode::ParameterInvalid, "phone".into()),
            (ErrorCode::ParameterInvalid, "custom_fields.size".into()),
            (ErrorCode::ParameterInvalid, "custom_fields.qty".into()),
        ]
    );
    let input = VisitInput {
        amount: Some(5000),
        email: Some(" ada@example.com ".into()),
        phone: Some("+234 803-000-0000".into()),
        answers: [("size".into(), "M".into()), ("qty".into(), "2.5".into())].into(),
        nonce: None,
    };
    let p = check(&l, &input).unwrap();
    assert_eq!(p.amount, 5000);
    assert_eq!(p.customer_email.as_deref(), Some("ada@example.com"));
    assert_eq!(p.metadata["cf_size"], "M");
    assert_eq!(p.metadata["cf_qty"], "2.5");
    assert_eq!(p.metadata["customer_phone"], "+2348030000000");
    let mut unknown = input.clone();
    unknown.answers.insert("colour".into(), "red".into());
    let e = check(&l, &unknown).unwrap_err();
    assert_eq!(e[0].param.as_deref(), Some("custom_fields.colour"));
    // A fixed link takes its own amount, or exactly it.
    let f = link(fixed(250_000));
    let base = VisitInput {
        email: Some("a@b.co".into()),
        ..Default::default()
    };
    assert_eq!(check(&f, &base).unwrap().amount, 250_000);
    let mut wrong = base.clone();
    wrong.amount = Some(1);
    assert_eq!(
        check(&f, &wrong).unwrap_err()[0].code,
        ErrorCode::AmountOutOfRange
    );
}

#[test]
fn the_status_follows_deactivation_expiry_and_max_payments() {
    let mut l = link(fixed(1000));
    l.max_payments = Some(2);
    l.expires_at = Some(t0() + Duration::days(1));
    assert_eq!(l.effective_status(1, t0()), (LinkStatus::Active, None));
    assert_eq!(
        l.effective_status(2, t0()),
        (
            LinkStatus::Inactive,
            Some(InactiveReason::MaxPaymentsReached)
        )
    );
    let later = t0() + Duration::days(1);
    assert_eq!(
        l.effective_status(0, later),
        (LinkStatus::Inactive, Some(InactiveReason::Expired))
    );
    // The payments check records it, once.
    let (n, e) = decide(&l, &Command::PaymentsCheck, 1, t0()).unwrap();
    assert_eq!((n.version, e.len()), (1, 0));
    let (n, e) = decide(&l, &Command::PaymentsCheck, 2, t0()).unwrap();
    assert_eq!(n.status, LinkStatus::Inactive);
    assert_eq!(e, vec![Effect::Event(PAYMENT_LINK_DEACTIVATED)]);
    let (again, e) = decide(&n, &Command::PaymentsCheck, 3, t0()).unwrap();
    assert_eq!((again, e.len()), (n.clone(), 0));
    // Activate refuses until the cause is cleared.
    let err = decide(&n, &Command::Activate, 2, t0()).unwrap_err();
    assert_eq!(err.code, ErrorCode::PaymentLinkInactive);
    let raise = Command::Update(Box::new(LinkUpdate {
        max_payments: Some(5),
        ..Default::default()
    }));
    let (raised, _) = decide(&n, &raise, 2, t0()).unwrap();
    assert_eq!(raised.status, LinkStatus::Inactive);
    let (active, e) = decide(&raised, &Command::Activate, 2, t0()).unwrap();
    assert_eq!(active.status, LinkStatus::Active);
    assert_eq!(e, vec![Effect::Event(PAYMENT_LINK_ACTIVATED)]);
    // Expiry: the timer at expires_at.
    let (x, e) = decide(&active, &Command::ExpiryDue, 2, later).unwrap();
    assert_eq!(x.inactive_reason, Some(InactiveReason::Expired));
    assert_eq!(e, vec![Effect::Event(PAYMENT_LINK_DEACTIVATED)]);
    assert!(decide(&x, &Command::Activate, 2, later).is_err());
}

#[test]
fn deactivate_and_updates() {
    let l = link(fixed(1000));
    let (d, e) = decide(&l, &Command::Deactivate, 0, t0()).unwrap();
    assert_eq!(d.inactive_reason, Some(InactiveReason::Deactivated));
    assert_eq!(e, vec![Effect::Event(PAYMENT_LINK_DEACTIVATED)]);
    let (same, e) = decide(&d, &Command::Deactivate, 0, t0()).unwrap();
    assert_eq!((same, e.len()), (d.clone(), 0));
    let (back, _) = decide(&d, &Command::Activate, 0, t0()).unwrap();
    assert_eq!(back.status, LinkStatus::Active);
    // The slug moves until the first payment, then is fixed.
    let new_slug = Command::Update(Box::new(LinkUpdate {
        slug: Some("rice-2".into()),
        ..Default::default()
    }));
    let (moved, e) = decide(&l, &new_slug, 0, t0()).unwrap();
    assert_eq!(moved.slug, "rice-2");
    assert!(e.contains(&Effect::MoveSlug {
        from: "rice".into(),
        to: "rice-2".into()
    }));
    assert_eq!(
        decide(&l, &new_slug, 1, t0()).unwrap_err().code,
        ErrorCode::SlugLocked
    );
    // A new expires_at moves the timer; one in the past is refused.
    let mut timed = l.clone();
    timed.expires_at = Some(t0() + Duration::hours(1));
    let later = t0() + Duration::hours(5);
    let u = Command::Update(Box::new(LinkUpdate {
        expires_at: Some(later),
        ..Default::default()
    }));
    let (_, e) = decide(&timed, &u, 0, t0()).unwrap();
    assert!(e.contains(&Effect::CancelExpiry(t0() + Duration::hours(1))));
    assert!(e.contains(&Effect::ScheduleExpiry(later)));
    let past = Command::Update(Box::new(LinkUpdate {
        expires_at: Some(t0()),
        ..Default::default()
    }));
    assert_eq!(
        decide(&timed, &past, 0, t0()).unwrap_err().param.as_deref(),
        Some("expires_at")
    );
    // Switching the amount type starts the rule afresh.
    let switch = Command::Update(Box::new(LinkUpdate {
        amount_type: Some(AmountType::CustomerChosen),
        max_amount: Some(9000),
        ..Default::default()
    }));
    let (c, _) = decide(&l, &switch, 0, t0()).unwrap();
    assert_eq!(c.amount, chosen(Some(MIN_AMOUNT), Some(9000), vec![]));
    // Lowering max_payments to what is paid deactivates.
    let lower = Command::Update(Box::new(LinkUpdate {
        max_payments: Some(3),
        ..Default::default()
    }));
    let (low, e) = decide(&l, &lower, 3, t0()).unwrap();
    assert_eq!(
        low.inactive_reason,
        Some(InactiveReason::MaxPaymentsReached)
    );
    assert!(e.contains(&Effect::Event(PAYMENT_LINK_DEACTIVATED)));
}
