//! Account numbers: 10-digit NUBANs (CBN's Nigeria Uniform Bank Account
//! Number: a 9-digit serial, then a check digit over the bank code and the
//! serial), unique across kobo and never given twice.
//!
//! Serials come from one durable sequence: the `virtual_account_serials`
//! table holds every serial ever given (never deleted), the next one is
//! the highest there plus one (read once, then counted in memory under a
//! lock), and each account's batch claims its serial with a
//! `require_absent` precondition. A serial taken by a create that did not
//! commit is skipped, never reused. Serials start at 100,000,000 and stop
//! before 900,000,000, so numbers never start with 9 (the sandbox's
//! per-payment transfer accounts do).

use parking_lot::Mutex;

use kobo_storage::{KeyBuf, Table};

use crate::env::Env;
use crate::error::{DomainError, DomainResult};

pub const FIRST_SERIAL: u64 = 100_000_000;
pub const END_SERIAL: u64 = 900_000_000;

/// The NUBAN check digit of `serial` (9 digits) at `bank_code` (3 digits,
/// or 6 for microfinance and payment-service banks): the digits of the
/// bank code (padded to 6) and the serial, weighted 3, 7, 3 repeating,
/// summed; 10 minus the sum's last digit (0 for 10).
pub fn check_digit(bank_code: &str, serial: u64) -> u8 {
    let digits = format!("{bank_code:0>6}{serial:09}");
    let sum: u32 = digits
        .bytes()
        .zip([3u32, 7, 3].iter().cycle())
        .map(|(d, w)| u32::from(d - b'0') * w)
        .sum();
    ((10 - sum % 10) % 10) as u8
}

/// The 10-digit number of `serial` at `bank_code`.
pub fn nuban(bank_code: &str, serial: u64) -> String {
    format!("{serial:09}{}", check_digit(bank_code, serial))
}

/// Whether `number` is a valid NUBAN at `bank_code`.
pub fn is_valid(bank_code: &str, number: &str) -> bool {
    number.len() == 10
        && number.bytes().all(|b| b.is_ascii_digit())
        && number[..9]
            .parse::<u64>()
            .is_ok_and(|serial| nuban(bank_code, serial) == number)
}

pub fn serial_key(serial: u64) -> Vec<u8> {
    KeyBuf::new().u64(serial).build()
}

/// The serial sequence: the next serial to give, once read from the store.
#[derive(Default)]
pub struct Serials {
    next: Mutex<Option<u64>>,
}

impl Serials {
    /// Drops the cached next serial (read from the store again).
    pub fn forget(&self) {
        *self.next.lock() = None;
    }

    /// A serial nobody was given before.
    pub fn take(&self, env: &Env) -> DomainResult<u64> {
        let mut next = self.next.lock();
        let n = match *next {
            Some(n) => n,
            None => highest(env)?.map_or(FIRST_SERIAL, |h| h + 1),
        };
        if n >= END_SERIAL {
            return Err(DomainError::internal(
                "virtual account numbers are exhausted",
            ));
        }
        *next = Some(n + 1);
        Ok(n)
    }
}

/// The highest serial ever given.
fn highest(env: &Env) -> DomainResult<Option<u64>> {
    let mut found = None;
    env.store
        .read()?
        .scan_prefix_rev(Table::VirtualAccountSerials, &[], None, |k, _| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&k[..8]);
            found = Some(u64::from_be_bytes(b));
            Ok(false)
        })?;
    Ok(found)
}
