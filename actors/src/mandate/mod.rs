//! Direct-debit mandates: the object, its public view and the pure state
//! machine (service-api.md "Mandate", CONTRACT sections 5 and 6).
//!
//! ```text
//! (new) --create--> pending                       (authorization_url set)
//! pending --a check finds approval--> active      (activated_at set)
//! pending --a check finds rejection--> failed     (the provider's reason)
//! pending --7 days pass--> failed                 (`expired`)
//! pending | active --cancel--> canceled           (canceled_at set)
//! canceled | failed --cancel--> 409
//! ```
//! A check is `refresh` or the periodic check (every 5 minutes of clock
//! time, a durable timer per pending mandate). Charging needs `active`
//! (409 `mandate_not_active`); a charge already accepted finishes whatever
//! happens to the mandate afterwards.

pub mod actor;
pub mod deps;
/// The direct-debit providers, at their old path.
pub use crate::direct_debit as provider;
pub mod service;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::ids::Mode;
use provider::MandateAnswer;

/// How often the provider is asked about a pending mandate (clock time).
pub fn check_interval() -> Duration {
    Duration::minutes(5)
}

/// A mandate not approved this long after creation fails (`expired`).
pub fn approval_window() -> Duration {
    Duration::days(7)
}

/// The failure reason of a mandate not approved in time.
pub const EXPIRED: &str = "expired";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MandateStatus {
    Pending,
    Active,
    Canceled,
    Failed,
}

impl MandateStatus {
    pub const ALL: [MandateStatus; 4] = [
        MandateStatus::Pending,
        MandateStatus::Active,
        MandateStatus::Canceled,
        MandateStatus::Failed,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            MandateStatus::Pending => "pending",
            MandateStatus::Active => "active",
            MandateStatus::Canceled => "canceled",
            MandateStatus::Failed => "failed",
        }
    }
    pub fn parse(s: &str) -> Option<MandateStatus> {
        MandateStatus::ALL.into_iter().find(|x| x.as_str() == s)
    }
    pub fn byte(self) -> u8 {
        self as u8
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mandate {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    /// Creation order (newest-first lists and cursors).
    pub seq: u64,
    pub customer: Uuid,
    pub customer_email: Option<String>,
    pub customer_name: Option<String>,
    /// Where the authorization page sends the customer after approving.
    pub callback_url: Option<String>,
    pub status: MandateStatus,
    /// The provider's authorization page (shown only while pending).
    pub authorization_url: String,
    /// The unguessable part of the authorization page's address.
    pub authorization_reference: String,
    pub bank_name: Option<String>,
    pub account_name: Option<String>,
    pub account_number_last4: Option<String>,
    pub failure_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub activated_at: Option<DateTime<Utc>>,
    pub canceled_at: Option<DateTime<Utc>>,
    /// When a pending mandate expires (its expiry timer's due time).
    pub expires_at: DateTime<Utc>,
    /// The due time of the periodic check timer, while one is set.
    pub check_due: Option<DateTime<Utc>>,
    /// Bumped on every change.
    pub version: u64,
}

/// The `object` value of a mandate.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum MandateObject {
    #[serde(rename = "mandate")]
    Mandate,
}

/// The public Mandate object.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Mandate)]
pub struct MandateView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: MandateObject,
    pub livemode: bool,
    pub customer: Uuid,
    #[schema(required = true)]
    pub customer_email: Option<String>,
    #[schema(required = true)]
    pub customer_name: Option<String>,
    /// pending = waiting for the customer or their bank; active = can be
    /// charged.
    pub status: MandateStatus,
    /// Where the customer approves the mandate; set only while pending.
    #[schema(required = true)]
    pub authorization_url: Option<String>,
    #[schema(required = true)]
    pub callback_url: Option<String>,
    #[schema(required = true)]
    pub bank_name: Option<String>,
    #[schema(required = true)]
    pub account_name: Option<String>,
    #[schema(required = true)]
    pub account_number_last4: Option<String>,
    /// `expired` (not approved within 7 days) or the provider's reason.
    #[schema(required = true)]
    pub failure_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    #[schema(required = true)]
    pub activated_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub canceled_at: Option<DateTime<Utc>>,
}

impl Mandate {
    /// What the direct-debit provider is asked about.
    pub fn check(&self) -> provider::MandateCheck {
        provider::MandateCheck {
            id: self.id,
            customer_email: self.customer_email.clone(),
            customer_name: self.customer_name.clone(),
        }
    }

    pub fn view(&self) -> MandateView {
        MandateView {
            id: self.id,
            object: MandateObject::Mandate,
            livemode: self.mode.livemode(),
            customer: self.customer,
            customer_email: self.customer_email.clone(),
            customer_name: self.customer_name.clone(),
            status: self.status,
            authorization_url: (self.status == MandateStatus::Pending)
                .then(|| self.authorization_url.clone()),
            callback_url: self.callback_url.clone(),
            bank_name: self.bank_name.clone(),
            account_name: self.account_name.clone(),
            account_number_last4: self.account_number_last4.clone(),
            failure_reason: self.failure_reason.clone(),
            created_at: self.created_at,
            activated_at: self.activated_at,
            canceled_at: self.canceled_at,
        }
    }

    pub fn to_api(&self) -> serde_json::Value {
        serde_json::to_value(self.view()).expect("a mandate view serializes")
    }
}

/// A command to a mandate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Cancel,
    /// The provider answered a check; `periodic` when the check timer
    /// asked (it is then set again while the mandate stays pending).
    Checked {
        answer: MandateAnswer,
        periodic: bool,
    },
    /// The expiry timer fired; `answer` is the provider's last word (an
    /// approval it holds still counts).
    ExpiryDue {
        answer: MandateAnswer,
    },
    /// A charge wants to debit: allowed only while active (no change).
    Charge,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    ScheduleCheck(DateTime<Utc>),
    CancelCheck(DateTime<Utc>),
    CancelExpiry(DateTime<Utc>),
}

fn refuse(m: &Mandate, action: &str) -> DomainError {
    DomainError::state(
        ErrorCode::MandateUnexpectedState,
        format!("this mandate is {}; it cannot {action}", m.status.as_str()),
    )
}

/// Leaving `pending`: its timers go.
fn leave_pending(m: &Mandate, next: &mut Mandate, effects: &mut Vec<Effect>) {
    if let Some(due) = next.check_due.take() {
        effects.push(Effect::CancelCheck(due));
    }
    if m.status == MandateStatus::Pending {
        effects.push(Effect::CancelExpiry(m.expires_at));
    }
}

fn apply_answer(
    m: &Mandate,
    next: &mut Mandate,
    answer: &MandateAnswer,
    effects: &mut Vec<Effect>,
    now: DateTime<Utc>,
) {
    match answer {
        MandateAnswer::Approved(account) => {
            leave_pending(m, next, effects);
            next.status = MandateStatus::Active;
            next.activated_at = Some(now);
            next.bank_name = Some(account.bank_name.clone());
            next.account_name = Some(account.account_name.clone());
            next.account_number_last4 = Some(account.account_number_last4.clone());
        }
        MandateAnswer::Rejected(reason) => {
            leave_pending(m, next, effects);
            next.status = MandateStatus::Failed;
            next.failure_reason = Some(reason.clone());
        }
        MandateAnswer::Pending => {}
    }
}

/// The state machine. Returns the new state (unchanged, same version, when
/// nothing changed) and its effects.
pub fn decide(
    m: &Mandate,
    command: &Command,
    now: DateTime<Utc>,
) -> DomainResult<(Mandate, Vec<Effect>)> {
    use MandateStatus::*;
    let mut next = m.clone();
    let mut effects = Vec::new();
    match (m.status, command) {
        (Pending | Active, Command::Cancel) => {
            leave_pending(m, &mut next, &mut effects);
            next.status = Canceled;
            next.canceled_at = Some(now);
        }
        (_, Command::Cancel) => return Err(refuse(m, "be canceled")),
        (Active, Command::Charge) => return Ok((next, effects)),
        (_, Command::Charge) => {
            return Err(DomainError::state(
                ErrorCode::MandateNotActive,
                format!(
                    "this mandate is {}; only an active mandate can be charged",
                    m.status.as_str()
                ),
            ))
        }
        (Pending, Command::Checked { answer, periodic }) => {
            apply_answer(m, &mut next, answer, &mut effects, now);
            if next.status == Pending {
                if !periodic {
                    // A refresh that finds nothing changes nothing.
                    return Ok((next, effects));
                }
                let due = now + check_interval();
                next.check_due = Some(due);
                effects.push(Effect::ScheduleCheck(due));
            }
        }
        // A stale timer or a refresh of a settled mandate: nothing to do.
        (_, Command::Checked { .. }) => return Ok((next, effects)),
        (Pending, Command::ExpiryDue { answer }) => {
            if now < m.expires_at {
                return Ok((next, effects));
            }
            apply_answer(m, &mut next, answer, &mut effects, now);
            if next.status == Pending {
                leave_pending(m, &mut next, &mut effects);
                next.status = Failed;
                next.failure_reason = Some(EXPIRED.into());
            }
        }
        (_, Command::ExpiryDue { .. }) => return Ok((next, effects)),
    }
    next.updated_at = now;
    next.version += 1;
    Ok((next, effects))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use provider::ApprovedAccount;
    use MandateStatus::*;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 3, 3, 9, 0, 0).unwrap()
    }

    fn mandate(status: MandateStatus) -> Mandate {
        Mandate {
            id: Uuid::nil(),
            merchant: Uuid::nil(),
            mode: Mode::Test,
            seq: 1,
            customer: Uuid::nil(),
            customer_email: Some("ada@example.com".into()),
            customer_name: Some("Ada".into()),
            callback_url: None,
            status,
            authorization_url: "http://x/sandbox/mandates/r".into(),
            authorization_reference: "r".into(),
            bank_name: None,
            account_name: None,
            account_number_last4: None,
            failure_reason: None,
            created_at: t0(),
            updated_at: t0(),
            activated_at: None,
            canceled_at: None,
            expires_at: t0() + approval_window(),
            check_due: (status == Pending).then(|| t0() + check_interval()),
            version: 1,
        }
    }

    fn approved() -> MandateAnswer {
        MandateAnswer::Approved(ApprovedAccount {
            bank_name: "Kobo Sandbox Bank".into(),
            account_name: "ADA".into(),
            account_number_last4: "1234".into(),
        })
    }

    fn now() -> DateTime<Utc> {
        t0() + Duration::minutes(5)
    }

    fn pending_timers() -> Vec<Effect> {
        vec![
            Effect::CancelCheck(t0() + check_interval()),
            Effect::CancelExpiry(t0() + approval_window()),
        ]
    }

    #[test]
    fn a_check_that_finds_approval_activates_with_the_account() {
        for periodic in [true, false] {
            let (m, e) = decide(
                &mandate(Pending),
                &Command::Checked {
                    answer: approved(),
                    periodic,
                },
                now(),
            )
            .unwrap();
            assert_eq!(m.status, Active);
            assert_eq!(m.activated_at, Some(now()));
            assert_eq!(m.account_number_last4.as_deref(), Some("1234"));
            assert_eq!(m.check_due, None);
            assert_eq!(e, pending_timers());
            assert_eq!(m.version, 2);
            assert_eq!(m.view().authorization_url, None);
        }
    }

    #[test]
    fn a_check_that_finds_rejection_fails_with_the_reason() {
        let (m, e) = decide(
            &mandate(Pending),
            &Command::Checked {
                answer: MandateAnswer::Rejected("declined_by_bank".into()),
                periodic: true,
            },
            now(),
        )
        .unwrap();
        assert_eq!(m.status, Failed);
        assert_eq!(m.failure_reason.as_deref(), Some("declined_by_bank"));
        assert_eq!(e, pending_timers());
    }

    #[test]
    fn a_periodic_check_that_finds_nothing_sets_the_next_check() {
        let (m, e) = decide(
            &mandate(Pending),
            &Command::Checked {
                answer: MandateAnswer::Pending,
                periodic: true,
            },
            now(),
        )
        .unwrap();
        assert_eq!(m.status, Pending);
        assert_eq!(m.check_due, Some(now() + check_interval()));
        assert_eq!(e, vec![Effect::ScheduleCheck(now() + check_interval())]);
        assert!(m.view().authorization_url.is_some());
        // A refresh that finds nothing changes nothing.
        let before = mandate(Pending);
        let (m, e) = decide(
            &before,
            &Command::Checked {
                answer: MandateAnswer::Pending,
                periodic: false,
            },
            now(),
        )
        .unwrap();
        assert_eq!(m, before);
        assert!(e.is_empty());
    }

    #[test]
    fn expiry_fails_a_pending_mandate_exactly_when_due() {
        let m0 = mandate(Pending);
        let early = m0.expires_at - Duration::seconds(1);
        let (m, e) = decide(
            &m0,
            &Command::ExpiryDue {
                answer: MandateAnswer::Pending,
            },
            early,
        )
        .unwrap();
        assert_eq!(m, m0);
        assert!(e.is_empty());
        let (m, e) = decide(
            &m0,
            &Command::ExpiryDue {
                answer: MandateAnswer::Pending,
            },
            m0.expires_at,
        )
        .unwrap();
        assert_eq!(m.status, Failed);
        assert_eq!(m.failure_reason.as_deref(), Some(EXPIRED));
        assert_eq!(e, pending_timers());
        // An approval the provider already holds still counts.
        let (m, _) = decide(
            &m0,
            &Command::ExpiryDue { answer: approved() },
            m0.expires_at,
        )
        .unwrap();
        assert_eq!(m.status, Active);
    }

    #[test]
    fn cancel_from_pending_and_active_only() {
        let (m, e) = decide(&mandate(Pending), &Command::Cancel, now()).unwrap();
        assert_eq!(m.status, Canceled);
        assert_eq!(m.canceled_at, Some(now()));
        assert_eq!(e, pending_timers());
        let (m, e) = decide(&mandate(Active), &Command::Cancel, now()).unwrap();
        assert_eq!(m.status, Canceled);
        assert!(e.is_empty());
        for s in [Canceled, Failed] {
            let err = decide(&mandate(s), &Command::Cancel, now()).unwrap_err();
            assert_eq!(err.code, "mandate_unexpected_state");
            assert_eq!(err.kind, crate::error::ErrorKind::State);
        }
    }

    #[test]
    fn only_an_active_mandate_can_be_charged() {
        let (m, e) = decide(&mandate(Active), &Command::Charge, now()).unwrap();
        assert_eq!(m, mandate(Active));
        assert!(e.is_empty());
        for s in [Pending, Canceled, Failed] {
            let err = decide(&mandate(s), &Command::Charge, now()).unwrap_err();
            assert_eq!(err.code, "mandate_not_active");
        }
    }

    #[test]
    fn settled_mandates_ignore_checks_and_expiry() {
        for s in [Active, Canceled, Failed] {
            let m0 = mandate(s);
            for c in [
                Command::Checked {
                    answer: approved(),
                    periodic: true,
                },
                Command::Checked {
                    answer: MandateAnswer::Rejected("x".into()),
                    periodic: false,
                },
                Command::ExpiryDue {
                    answer: MandateAnswer::Pending,
                },
            ] {
                let (m, e) = decide(&m0, &c, m0.expires_at).unwrap();
                assert_eq!(m, m0, "{s:?} {c:?}");
                assert!(e.is_empty());
            }
        }
    }
}
