//! Payment providers behind a trait. Test mode uses the built-in sandbox of
//! CONTRACT section 5; live mode uses a configured provider (none is
//! configured in this build, so live provider calls answer
//! `provider_not_configured`, and card calls `card_api_unavailable`).
//! Domain code never knows which it talks to.
//!
//! Card data reaches a provider as [`CardDetails`] and goes no further: what
//! a provider answers ([`CardCharge`], [`CardOutcome`]) carries no card
//! number, CVC, PIN or code.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::ids::{constant_time_eq, random_base62, sha256_hex, Mode};
use crate::payment_intent::card::{AuthInput, CardDetails};
use crate::payment_intent::{
    transfer_account_lifetime, BankTransferAccount, CardFinal, CardOutcome, ChargeAttempt,
    NextAction, PaymentIntent,
};

/// A card charge as the provider answered it.
#[derive(Debug, Clone, PartialEq)]
pub struct CardCharge {
    /// The provider's reference for the attempt (kept on the attempt, never
    /// shown): what later steps of the same attempt are matched with.
    pub reference: Option<String>,
    pub outcome: CardOutcome,
}

pub trait Provider: Send + Sync {
    /// Issues a bank account the customer pays one intent into.
    fn issue_transfer_account(
        &self,
        intent: &PaymentIntent,
        merchant_name: &str,
        now: DateTime<Utc>,
    ) -> DomainResult<BankTransferAccount>;

    /// Whether this provider takes cards (else `card_api_unavailable`).
    fn takes_cards(&self) -> bool;

    /// How long a card call takes (the sandbox can be slowed down to
    /// rehearse a real processor's latency).
    fn card_latency(&self) -> Duration {
        Duration::ZERO
    }

    /// Charges `card` for attempt number `attempt` of `intent`. `links` is
    /// kobo's base URL (for pages the provider's flow sends the customer
    /// to).
    fn charge_card(
        &self,
        intent: &PaymentIntent,
        attempt: u32,
        card: &CardDetails,
        links: &str,
    ) -> DomainResult<CardCharge>;

    /// Passes the customer's answer (`input`: PIN, code, ...) for the
    /// pending `attempt` to the bank.
    fn authenticate_card(
        &self,
        attempt: &ChargeAttempt,
        input: AuthInput,
        value: &str,
    ) -> DomainResult<CardOutcome>;

    /// The customer finished a redirect on the provider's page (the
    /// sandbox bank page): `reference` is the one in the page's address.
    fn redirect_result(
        &self,
        attempt: &ChargeAttempt,
        reference: &str,
        approved: bool,
    ) -> DomainResult<CardFinal>;
}

/// The sandbox provider.
#[derive(Default)]
pub struct Sandbox {
    /// Added to every card call (0 unless `--sandbox-latency-ms`).
    pub card_latency: Duration,
}

pub const SANDBOX_BANK_NAME: &str = "Kobo Sandbox Bank";

/// The sandbox test cards (CONTRACT section 5, fixed).
pub mod test_cards {
    /// Succeeds at once.
    pub const SUCCESS: &str = "4084080000000409";
    /// Verve: asks for the PIN ([`super::SANDBOX_PIN`]), then a code
    /// ([`super::SANDBOX_OTP`]).
    pub const PIN_THEN_OTP: &str = "5060990580000217499";
    /// Sends the customer to the sandbox bank page (Approve / Decline).
    pub const REDIRECT: &str = "4000000000003220";
    /// Declined (`card_declined`), as is every other valid number.
    pub const DECLINED: &str = "4000000000000002";
}

pub const SANDBOX_PIN: &str = "1234";
pub const SANDBOX_OTP: &str = "123456";

/// Attempt references of the sandbox: the kind of flow, then the intent and
/// attempt (redirects, so the bank page can find them), then randomness.
const REF_PLAIN: &str = "sbx_ch_";
const REF_PIN: &str = "sbx_pin_";
pub const REF_REDIRECT: &str = "sbx3ds_";

/// The path of the sandbox bank page for a redirect reference.
pub fn sandbox_bank_path(reference: &str) -> String {
    format!("/sandbox/bank/{reference}")
}

/// Reads the intent id and attempt number out of a sandbox redirect
/// reference (`sbx3ds_<intent>_<attempt>_<random>`).
pub fn parse_redirect_reference(reference: &str) -> Option<(uuid::Uuid, u32)> {
    let rest = reference.strip_prefix(REF_REDIRECT)?;
    let mut parts = rest.split('_');
    let id = uuid::Uuid::try_parse(parts.next()?).ok()?;
    let attempt = parts.next()?.parse().ok()?;
    let random = parts.next()?;
    (random.len() == 24
        && random.bytes().all(|b| b.is_ascii_alphanumeric())
        && parts.next().is_none())
    .then_some((id, attempt))
}

fn otp_action(input: AuthInput, message: &str) -> CardOutcome {
    CardOutcome::Action(NextAction {
        action_type: "otp".into(),
        message: Some(message.into()),
        input: Some(input.as_str().into()),
        url: None,
    })
}

impl Provider for Sandbox {
    fn issue_transfer_account(
        &self,
        intent: &PaymentIntent,
        merchant_name: &str,
        now: DateTime<Utc>,
    ) -> DomainResult<BankTransferAccount> {
        // Ten digits, stable for the intent and the attempt number.
        let digest = sha256_hex(&format!("{}:{}", intent.id, intent.attempts));
        let n = u64::from_str_radix(&digest[..15], 16).expect("hex") % 1_000_000_000;
        Ok(BankTransferAccount {
            account_number: format!("9{n:09}"),
            bank_name: SANDBOX_BANK_NAME.to_string(),
            account_name: format!("KOBO / {}", merchant_name.to_uppercase()),
            amount: intent
                .checked_charge_on(crate::money::Channel::BankTransfer)?
                .2,
            expires_at: now + transfer_account_lifetime(),
        })
    }

    fn takes_cards(&self) -> bool {
        true
    }

    fn card_latency(&self) -> Duration {
        self.card_latency
    }

    fn charge_card(
        &self,
        intent: &PaymentIntent,
        attempt: u32,
        card: &CardDetails,
        links: &str,
    ) -> DomainResult<CardCharge> {
        let random = random_base62(24);
        let charge = match card.number() {
            test_cards::SUCCESS => CardCharge {
                reference: Some(format!("{REF_PLAIN}{random}")),
                outcome: CardOutcome::Succeeded,
            },
            test_cards::PIN_THEN_OTP => CardCharge {
                reference: Some(format!("{REF_PIN}{random}")),
                outcome: otp_action(AuthInput::Pin, "Enter your 4-digit card PIN"),
            },
            test_cards::REDIRECT => {
                let reference = format!("{REF_REDIRECT}{}_{attempt}_{random}", intent.id.simple());
                CardCharge {
                    outcome: CardOutcome::Action(NextAction {
                        action_type: "redirect".into(),
                        message: None,
                        input: None,
                        url: Some(format!("{links}{}", sandbox_bank_path(&reference))),
                    }),
                    reference: Some(reference),
                }
            }
            _ => CardCharge {
                reference: Some(format!("{REF_PLAIN}{random}")),
                outcome: CardOutcome::Declined("card_declined".into()),
            },
        };
        Ok(charge)
    }

    fn authenticate_card(
        &self,
        attempt: &ChargeAttempt,
        input: AuthInput,
        value: &str,
    ) -> DomainResult<CardOutcome> {
        let reference = attempt.provider_reference.as_deref().unwrap_or("");
        if !reference.starts_with(REF_PIN) {
            // The sandbox asks for answers only on its PIN card.
            return Err(DomainError::internal(
                "the sandbox has no authentication step for this attempt",
            ));
        }
        Ok(match input {
            AuthInput::Pin if value == SANDBOX_PIN => otp_action(
                AuthInput::Otp,
                "Enter the code sent to the phone number registered with your bank",
            ),
            AuthInput::Pin => CardOutcome::Declined("incorrect_pin".into()),
            AuthInput::Otp if value == SANDBOX_OTP => CardOutcome::Succeeded,
            AuthInput::Otp => CardOutcome::Declined("incorrect_otp".into()),
            AuthInput::Phone => CardOutcome::Declined("incorrect_phone".into()),
            AuthInput::Birthday => CardOutcome::Declined("incorrect_birthday".into()),
        })
    }

    fn redirect_result(
        &self,
        attempt: &ChargeAttempt,
        reference: &str,
        approved: bool,
    ) -> DomainResult<CardFinal> {
        let known = attempt.provider_reference.as_deref().unwrap_or("");
        if !known.starts_with(REF_REDIRECT)
            || !constant_time_eq(known.as_bytes(), reference.as_bytes())
        {
            return Err(DomainError::not_found("sandbox bank page", "this address"));
        }
        Ok(if approved {
            CardFinal::Succeeded
        } else {
            CardFinal::Declined("authentication_declined".into())
        })
    }
}

/// Live mode without a configured provider.
pub struct Unconfigured;

fn not_configured() -> DomainError {
    DomainError::state(
        ErrorCode::ProviderNotConfigured,
        "no live payment provider is configured on this kobo server",
    )
}

impl Provider for Unconfigured {
    fn issue_transfer_account(
        &self,
        _: &PaymentIntent,
        _: &str,
        _: DateTime<Utc>,
    ) -> DomainResult<BankTransferAccount> {
        Err(not_configured())
    }

    fn takes_cards(&self) -> bool {
        false
    }

    fn charge_card(
        &self,
        _: &PaymentIntent,
        _: u32,
        _: &CardDetails,
        _: &str,
    ) -> DomainResult<CardCharge> {
        Err(not_configured())
    }

    fn authenticate_card(
        &self,
        _: &ChargeAttempt,
        _: AuthInput,
        _: &str,
    ) -> DomainResult<CardOutcome> {
        Err(not_configured())
    }

    fn redirect_result(&self, _: &ChargeAttempt, _: &str, _: bool) -> DomainResult<CardFinal> {
        Err(not_configured())
    }
}

#[derive(Clone)]
pub struct Providers {
    pub test: Arc<dyn Provider>,
    pub live: Arc<dyn Provider>,
}

impl Providers {
    pub fn sandbox_only() -> Self {
        Self::sandbox(Duration::ZERO)
    }
    /// The sandbox in test mode, slowed by `card_latency` per card call;
    /// nothing in live mode.
    pub fn sandbox(card_latency: Duration) -> Self {
        Providers {
            test: Arc::new(Sandbox { card_latency }),
            live: Arc::new(Unconfigured),
        }
    }
    pub fn for_mode(&self, mode: Mode) -> &Arc<dyn Provider> {
        match mode {
            Mode::Test => &self.test,
            Mode::Live => &self.live,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::money::{default_pricing, Channel, Currency, FeeBearer};
    use crate::payment_intent::{AttemptStatus, Status};
    use chrono::TimeZone;

    fn intent() -> PaymentIntent {
        let now = Utc.with_ymd_and_hms(2025, 6, 15, 12, 0, 0).unwrap();
        PaymentIntent {
            id: uuid::Uuid::new_v4(),
            merchant: uuid::Uuid::new_v4(),
            mode: Mode::Test,
            seq: 1,
            amount: 10_000,
            currency: Currency::NGN,
            status: Status::Created,
            reference: None,
            description: None,
            customer_email: None,
            brand: uuid::Uuid::new_v4(),
            customer: None,
            payment_link: None,
            metadata: Default::default(),
            fee_bearer: FeeBearer::Merchant,
            pricing: default_pricing()[&Currency::NGN].clone(),
            channel: None,
            failure_code: None,
            created_at: now,
            updated_at: now,
            paid_at: None,
            canceled_at: None,
            return_url: None,
            client_secret_hash: "h".into(),
            client_secret: None,
            checkout_code: "c".into(),
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

    fn card(n: &str) -> CardDetails {
        let now = Utc.with_ymd_and_hms(2025, 6, 15, 12, 0, 0).unwrap();
        CardDetails::parse(n, 12, 2030, "123", now).unwrap()
    }

    fn attempt_with(reference: &str) -> ChargeAttempt {
        ChargeAttempt {
            id: uuid::Uuid::new_v4(),
            number: 1,
            payment_intent: uuid::Uuid::new_v4(),
            mode: Mode::Test,
            channel: Channel::Card,
            status: AttemptStatus::Pending,
            card: None,
            failure_code: None,
            amount: None,
            created_at: Utc::now(),
            provider_reference: Some(reference.into()),
        }
    }

    #[test]
    fn the_sandbox_cards_answer_as_the_contract_says() {
        let s = Sandbox::default();
        let pi = intent();
        let links = "http://127.0.0.1:9";
        let ok = s
            .charge_card(&pi, 1, &card(test_cards::SUCCESS), links)
            .unwrap();
        assert_eq!(ok.outcome, CardOutcome::Succeeded);
        let declined = s
            .charge_card(&pi, 1, &card(test_cards::DECLINED), links)
            .unwrap();
        assert_eq!(
            declined.outcome,
            CardOutcome::Declined("card_declined".into())
        );
        let other = s
            .charge_card(&pi, 1, &card("5399838383838381"), links)
            .unwrap();
        assert_eq!(other.outcome, CardOutcome::Declined("card_declined".into()));

        let pin = s
            .charge_card(&pi, 1, &card(test_cards::PIN_THEN_OTP), links)
            .unwrap();
        let CardOutcome::Action(a) = &pin.outcome else {
            panic!("{pin:?}")
        };
        assert_eq!(
            (a.action_type.as_str(), a.input.as_deref()),
            ("otp", Some("pin"))
        );
        let at = attempt_with(pin.reference.as_deref().unwrap());
        let otp = s
            .authenticate_card(&at, AuthInput::Pin, SANDBOX_PIN)
            .unwrap();
        let CardOutcome::Action(a) = &otp else {
            panic!("{otp:?}")
        };
        assert_eq!(a.input.as_deref(), Some("otp"));
        assert_eq!(
            s.authenticate_card(&at, AuthInput::Otp, SANDBOX_OTP)
                .unwrap(),
            CardOutcome::Succeeded
        );
        assert_eq!(
            s.authenticate_card(&at, AuthInput::Pin, "0000").unwrap(),
            CardOutcome::Declined("incorrect_pin".into())
        );
        assert_eq!(
            s.authenticate_card(&at, AuthInput::Otp, "654321").unwrap(),
            CardOutcome::Declined("incorrect_otp".into())
        );

        let redirect = s
            .charge_card(&pi, 3, &card(test_cards::REDIRECT), links)
            .unwrap();
        let CardOutcome::Action(a) = &redirect.outcome else {
            panic!("{redirect:?}")
        };
        assert_eq!(a.action_type, "redirect");
        let reference = redirect.reference.clone().unwrap();
        assert_eq!(
            a.url.as_deref(),
            Some(format!("{links}/sandbox/bank/{reference}").as_str())
        );
        assert_eq!(parse_redirect_reference(&reference), Some((pi.id, 3)));
        let at = attempt_with(&reference);
        assert_eq!(
            s.redirect_result(&at, &reference, true).unwrap(),
            CardFinal::Succeeded
        );
        assert_eq!(
            s.redirect_result(&at, &reference, false).unwrap(),
            CardFinal::Declined("authentication_declined".into())
        );
        // Another attempt's address is not this one's.
        let forged = format!("{REF_REDIRECT}{}_3_{}", pi.id.simple(), "a".repeat(24));
        assert_eq!(parse_redirect_reference(&forged), Some((pi.id, 3)));
        assert!(s.redirect_result(&at, &forged, true).is_err());
        assert_eq!(parse_redirect_reference("sbx3ds_nope"), None);
    }

    #[test]
    fn no_answer_carries_the_card() {
        let s = Sandbox::default();
        let pi = intent();
        for n in [
            test_cards::SUCCESS,
            test_cards::PIN_THEN_OTP,
            test_cards::REDIRECT,
            test_cards::DECLINED,
        ] {
            let c = s.charge_card(&pi, 1, &card(n), "http://x").unwrap();
            let shown = format!("{c:?}");
            assert!(!shown.contains(n), "{shown}");
        }
    }

    #[test]
    fn live_mode_takes_no_cards_without_a_provider() {
        let p = Providers::sandbox_only();
        assert!(p.for_mode(Mode::Test).takes_cards());
        assert!(!p.for_mode(Mode::Live).takes_cards());
        let e = p
            .for_mode(Mode::Live)
            .charge_card(&intent(), 1, &card(test_cards::SUCCESS), "http://x")
            .unwrap_err();
        assert_eq!(e.code, "provider_not_configured");
    }
}
