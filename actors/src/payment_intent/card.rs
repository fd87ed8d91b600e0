//! Cards as they pass through kobo: checked (Luhn, expiry, cvc), branded by
//! their BIN, and reduced to what may be kept ([`CardSummary`]: last four
//! digits and brand).
//!
//! [`CardDetails`] holds the full number and the CVC only for as long as a
//! request needs them to reach the provider: it is never serialized (no
//! `Serialize`), its `Debug` shows only the summary, and its memory is
//! overwritten when it is dropped. Nothing that is stored, logged or
//! answered is built from it except [`CardDetails::summary`].

use std::fmt;

use chrono::{DateTime, Datelike, Utc};

use crate::error::{DomainError, DomainResult};
use crate::payment_intent::CardSummary;

/// A billing address (required for dollar payments).
#[derive(Clone, PartialEq, Eq)]
pub struct BillingAddress {
    pub line1: String,
    pub line2: Option<String>,
    pub city: String,
    pub state: String,
    pub postal_code: String,
    /// ISO 3166-1 alpha-2, upper case.
    pub country: String,
}

impl fmt::Debug for BillingAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Personal data: only the country is worth a log line.
        f.debug_struct("BillingAddress")
            .field("country", &self.country)
            .finish_non_exhaustive()
    }
}

/// A card as the customer typed it, checked. Lives only until the provider
/// call returns.
#[derive(Clone)]
pub struct CardDetails {
    number: String,
    pub exp_month: u32,
    pub exp_year: i32,
    cvc: String,
    pub name: Option<String>,
    pub billing_address: Option<BillingAddress>,
}

impl fmt::Debug for CardDetails {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CardDetails")
            .field("brand", &brand_of(&self.number))
            .field("last4", &last4(&self.number))
            .finish_non_exhaustive()
    }
}

impl Drop for CardDetails {
    fn drop(&mut self) {
        wipe(&mut self.number);
        wipe(&mut self.cvc);
    }
}

/// Overwrites a string's bytes before its memory is freed.
pub fn wipe(s: &mut String) {
    // SAFETY: zero bytes are valid UTF-8.
    for b in unsafe { s.as_bytes_mut() } {
        // A volatile write is not optimized away as a dead store.
        unsafe { std::ptr::write_volatile(b, 0) };
    }
    s.clear();
}

/// Which part of a card is wrong, for the error's `param`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardField {
    Number,
    ExpMonth,
    ExpYear,
    Cvc,
}

impl CardField {
    pub fn param(self) -> &'static str {
        match self {
            CardField::Number => "number",
            CardField::ExpMonth => "exp_month",
            CardField::ExpYear => "exp_year",
            CardField::Cvc => "cvc",
        }
    }
}

/// 12 to 19 digits with a valid check digit.
fn check_number(d: &str) -> DomainResult<()> {
    if !(12..=19).contains(&d.len()) || !d.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(
            CardField::Number,
            "`number` must be a card number of 12 to 19 digits",
        ));
    }
    if !luhn_valid(d) {
        return Err(invalid(
            CardField::Number,
            "`number` is not a valid card number (check digit)",
        ));
    }
    Ok(())
}

/// This month or later, and not more than 50 years ahead; answers the
/// four-digit year (two-digit years are 20xx).
fn check_expiry(exp_month: i64, exp_year: i64, now: DateTime<Utc>) -> DomainResult<i64> {
    if !(1..=12).contains(&exp_month) {
        return Err(invalid(
            CardField::ExpMonth,
            "`exp_month` must be from 1 to 12",
        ));
    }
    let year = match exp_year {
        0..=99 => 2000 + exp_year,
        1000..=9999 => exp_year,
        _ => {
            return Err(invalid(
                CardField::ExpYear,
                "`exp_year` must be a year (2 or 4 digits)",
            ))
        }
    };
    let (this_year, this_month) = (now.year() as i64, now.month() as i64);
    if year < this_year {
        return Err(invalid(CardField::ExpYear, "the card has expired"));
    }
    if year == this_year && exp_month < this_month {
        return Err(invalid(CardField::ExpMonth, "the card has expired"));
    }
    if year > this_year + 50 {
        return Err(invalid(
            CardField::ExpYear,
            "`exp_year` is too far in the future",
        ));
    }
    Ok(year)
}

/// 3 digits, 4 for American Express (by the number `d`).
fn check_cvc(d: &str, cvc: &str) -> DomainResult<()> {
    let cvc_len = if brand_of(d) == "amex" { 4 } else { 3 };
    if cvc.len() != cvc_len || !cvc.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(
            CardField::Cvc,
            if cvc_len == 4 {
                "`cvc` must be 4 digits for this card"
            } else {
                "`cvc` must be 3 digits"
            },
        ));
    }
    Ok(())
}

fn invalid(field: CardField, message: &str) -> DomainError {
    // Never the value itself: messages end up in saved responses.
    DomainError::invalid(field.param(), message)
}

impl CardDetails {
    /// Checks a card: the number (12 to 19 digits, spaces allowed, Luhn),
    /// the expiry (this month or later; two-digit years are 20xx) and the
    /// CVC (3 digits, 4 for American Express), errors in that order.
    pub fn parse(
        number: &str,
        exp_month: i64,
        exp_year: i64,
        cvc: &str,
        now: DateTime<Utc>,
    ) -> DomainResult<CardDetails> {
        // Wiped on every way out of here; the card keeps its own copy.
        let digits = Secret::new(number.chars().filter(|c| *c != ' ' && *c != '-').collect());
        let d = digits.expose();
        check_number(d)?;
        let year = check_expiry(exp_month, exp_year, now)?;
        check_cvc(d, cvc)?;
        Ok(CardDetails {
            number: d.to_string(),
            exp_month: exp_month as u32,
            exp_year: year as i32,
            cvc: cvc.to_string(),
            name: None,
            billing_address: None,
        })
    }

    /// The full number: for the provider call only.
    pub fn number(&self) -> &str {
        &self.number
    }

    /// The CVC: for the provider call only.
    pub fn cvc(&self) -> &str {
        &self.cvc
    }

    pub fn brand(&self) -> &'static str {
        brand_of(&self.number)
    }

    /// What may be kept: the last four digits and the brand.
    pub fn summary(&self) -> CardSummary {
        CardSummary {
            last4: last4(&self.number).to_string(),
            brand: self.brand().to_string(),
        }
    }
}

fn last4(number: &str) -> &str {
    &number[number.len().saturating_sub(4)..]
}

/// The Luhn check digit test.
pub fn luhn_valid(digits: &str) -> bool {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let sum: u32 = digits
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, b)| {
            let d = (b - b'0') as u32;
            if i % 2 == 1 {
                let d2 = d * 2;
                if d2 > 9 {
                    d2 - 9
                } else {
                    d2
                }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// The card's brand from its leading digits (BIN ranges): `visa`,
/// `mastercard`, `verve`, `amex`, `discover`, `jcb`, `diners`, `unionpay`,
/// or `unknown`. Verve's ranges are tested before the ones they overlap.
pub fn brand_of(digits: &str) -> &'static str {
    let prefix = |n: usize| -> u32 {
        digits
            .get(..n.min(digits.len()))
            .and_then(|p| p.parse().ok())
            .unwrap_or(0)
    };
    let (p2, p3, p4, p6) = (prefix(2), prefix(3), prefix(4), prefix(6));
    if (506_099..=506_198).contains(&p6)
        || (650_002..=650_027).contains(&p6)
        || (507_865..=507_964).contains(&p6)
    {
        "verve"
    } else if digits.starts_with('4') {
        "visa"
    } else if (51..=55).contains(&p2) || (2221..=2720).contains(&p4) {
        "mastercard"
    } else if p2 == 34 || p2 == 37 {
        "amex"
    } else if p4 == 6011 || (644..=649).contains(&p3) || p2 == 65 {
        "discover"
    } else if (3528..=3589).contains(&p4) {
        "jcb"
    } else if (300..=305).contains(&p3) || p2 == 36 || p2 == 38 {
        "diners"
    } else if p2 == 62 {
        "unionpay"
    } else {
        "unknown"
    }
}

/// What the bank asks for in a `next_action` of type `otp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthInput {
    Otp,
    Pin,
    Phone,
    Birthday,
}

impl AuthInput {
    pub const ALL: [AuthInput; 4] = [
        AuthInput::Otp,
        AuthInput::Pin,
        AuthInput::Phone,
        AuthInput::Birthday,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            AuthInput::Otp => "otp",
            AuthInput::Pin => "pin",
            AuthInput::Phone => "phone",
            AuthInput::Birthday => "birthday",
        }
    }
    pub fn parse(s: &str) -> Option<AuthInput> {
        AuthInput::ALL.into_iter().find(|i| i.as_str() == s)
    }

    /// Checks the shape of an answer (not whether the bank accepts it):
    /// a PIN is 4 digits, a code 4 to 8 digits, a phone number 7 to 15
    /// digits with an optional `+`, a birthday a real date YYYY-MM-DD.
    pub fn check(self, value: &str) -> DomainResult<()> {
        let digits = |s: &str, min: usize, max: usize| {
            (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
        };
        let ok = match self {
            AuthInput::Pin => digits(value, 4, 4),
            AuthInput::Otp => digits(value, 4, 8),
            AuthInput::Phone => digits(value.strip_prefix('+').unwrap_or(value), 7, 15),
            AuthInput::Birthday => {
                value.len() == 10 && chrono::NaiveDate::parse_from_str(value, "%Y-%m-%d").is_ok()
            }
        };
        if ok {
            return Ok(());
        }
        let message = match self {
            AuthInput::Pin => "`pin` must be 4 digits",
            AuthInput::Otp => "`otp` must be 4 to 8 digits",
            AuthInput::Phone => "`phone` must be a phone number of 7 to 15 digits",
            AuthInput::Birthday => "`birthday` must be a date YYYY-MM-DD",
        };
        Err(DomainError::invalid(self.as_str(), message))
    }
}

/// An answer to the bank (PIN, code, ...): `Debug` never shows it, and its
/// memory is overwritten when dropped.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: String) -> Self {
        Secret(s)
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        wipe(&mut self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 6, 15, 12, 0, 0).unwrap()
    }

    #[test]
    fn the_sandbox_test_cards_pass_luhn_and_have_their_brands() {
        for (n, brand) in [
            ("4084080000000409", "visa"),
            ("5060990580000217499", "verve"),
            ("4000000000003220", "visa"),
            ("4000000000000002", "visa"),
            ("5399838383838381", "mastercard"),
            ("2223000048400011", "mastercard"),
            ("378282246310005", "amex"),
            ("6011111111111117", "discover"),
            ("3530111333300000", "jcb"),
            ("36227206271667", "diners"),
            ("6200000000000005", "unionpay"),
            ("6500020000000000", "verve"),
        ] {
            assert!(luhn_valid(n), "{n} passes Luhn");
            assert_eq!(brand_of(n), brand, "{n}");
        }
        assert!(!luhn_valid("4084080000000408"));
        assert!(!luhn_valid(""));
        assert!(!luhn_valid("40840800000004a9"));
        assert_eq!(brand_of("9999999999999995"), "unknown");
    }

    #[track_caller]
    fn refused(r: DomainResult<CardDetails>, param: &str) {
        let e = r.expect_err("must be refused");
        assert_eq!(e.kind, ErrorKind::InvalidRequest);
        assert_eq!(e.code, "parameter_invalid");
        assert_eq!(e.param.as_deref(), Some(param));
    }

    #[test]
    fn numbers_expiry_and_cvc_are_checked_and_name_their_field() {
        let ok = CardDetails::parse("4084 0800 0000 0409", 6, 2025, "123", now()).unwrap();
        assert_eq!(ok.number(), "4084080000000409");
        assert_eq!(ok.exp_year, 2025);
        assert_eq!(
            ok.summary(),
            CardSummary {
                last4: "0409".into(),
                brand: "visa".into()
            }
        );
        assert_eq!(
            CardDetails::parse("4084080000000409", 1, 30, "123", now())
                .unwrap()
                .exp_year,
            2030
        );
        refused(
            CardDetails::parse("4084080000000408", 6, 2030, "123", now()),
            "number",
        );
        refused(
            CardDetails::parse("40840800", 6, 2030, "123", now()),
            "number",
        );
        refused(
            CardDetails::parse("4084O80000000409", 6, 2030, "123", now()),
            "number",
        );
        refused(
            CardDetails::parse("4084080000000409", 13, 2030, "123", now()),
            "exp_month",
        );
        refused(
            CardDetails::parse("4084080000000409", 0, 2030, "123", now()),
            "exp_month",
        );
        // Last month of this year, and last year.
        refused(
            CardDetails::parse("4084080000000409", 5, 2025, "123", now()),
            "exp_month",
        );
        refused(
            CardDetails::parse("4084080000000409", 12, 2024, "123", now()),
            "exp_year",
        );
        refused(
            CardDetails::parse("4084080000000409", 12, 24, "123", now()),
            "exp_year",
        );
        refused(
            CardDetails::parse("4084080000000409", 12, 20250, "123", now()),
            "exp_year",
        );
        refused(
            CardDetails::parse("4084080000000409", 12, 2099, "123", now()),
            "exp_year",
        );
        for cvc in ["12", "1234", "12a", ""] {
            refused(
                CardDetails::parse("4084080000000409", 12, 2030, cvc, now()),
                "cvc",
            );
        }
        // American Express has a 4-digit code.
        assert!(CardDetails::parse("378282246310005", 12, 2030, "1234", now()).is_ok());
        refused(
            CardDetails::parse("378282246310005", 12, 2030, "123", now()),
            "cvc",
        );
    }

    #[test]
    fn debug_shows_only_the_summary() {
        let c = CardDetails::parse("5060990580000217499", 12, 2030, "321", now()).unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains("5060990580000217499"), "{shown}");
        assert!(!shown.contains("321"), "{shown}");
        assert!(shown.contains("7499") && shown.contains("verve"), "{shown}");
        let s = Secret::new("1234".into());
        assert!(!format!("{s:?}").contains("1234"));
        // Refusals never echo the number.
        let e = CardDetails::parse("4084080000000408", 6, 2030, "123", now()).unwrap_err();
        assert!(!e.message.contains("4084080000000408"));
    }

    #[test]
    fn answers_to_the_bank_are_shape_checked() {
        assert!(AuthInput::Pin.check("1234").is_ok());
        assert!(AuthInput::Pin.check("12345").is_err());
        assert!(AuthInput::Otp.check("123456").is_ok());
        assert!(AuthInput::Otp.check("12").is_err());
        assert!(AuthInput::Phone.check("+2348012345678").is_ok());
        assert!(AuthInput::Phone.check("080-123").is_err());
        assert!(AuthInput::Birthday.check("1990-02-28").is_ok());
        assert!(AuthInput::Birthday.check("1990-02-30").is_err());
        assert!(AuthInput::Birthday.check("28/02/1990").is_err());
        let e = AuthInput::Birthday.check("x").unwrap_err();
        assert_eq!(e.param.as_deref(), Some("birthday"));
    }
}
