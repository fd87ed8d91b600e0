//! Dedicated virtual accounts: their indexes, number and serial claims
//! and customer's open-account row (generic), their customer, and their
//! credits (`credits`): each `virtual_account_credits` row names the one
//! successful payment intent of that account and session, and each such
//! intent has its row.

use uuid::Uuid;

use kobo_storage::{decode, StoreError, Table};

use super::table::{index, list_key, object_table};
use super::{hex, uuid_of, Checker};
use crate::customer::Customer;
use crate::payment_intent::{PaymentIntent, Status};
use crate::virtual_account::bank::transfer_key;
use crate::virtual_account::nuban::serial_key;
use crate::virtual_account::service::{customer_prefix, open_key, status_prefix};
use crate::virtual_account::VirtualAccount;

pub(super) fn accounts(c: &mut Checker) -> Result<(), StoreError> {
    object_table::<VirtualAccount>(
        c,
        Table::VirtualAccounts,
        "virtual_account",
        |a| a.id,
        |a| Some(a.seq),
        &[
            index(Table::VirtualAccountIndex, |a: &VirtualAccount| {
                vec![list_key(a.merchant, a.mode, a.seq)]
            }),
            index(Table::VirtualAccountStatusIndex, |a: &VirtualAccount| {
                vec![status_prefix(a.merchant, a.mode, a.status)
                    .u64(a.seq)
                    .build()]
            }),
            index(Table::VirtualAccountCustomerIndex, |a: &VirtualAccount| {
                vec![customer_prefix(a.merchant, a.mode, a.customer)
                    .u64(a.seq)
                    .build()]
            }),
            index(Table::VirtualAccountNumbers, |a: &VirtualAccount| {
                vec![a.account_number.as_bytes().to_vec()]
            }),
            index(Table::VirtualAccountSerials, |a: &VirtualAccount| {
                vec![serial_key(a.serial)]
            }),
            // Only a pending or active account is its customer's open one.
            index(Table::CustomerOpenAccounts, |a: &VirtualAccount| {
                a.status
                    .is_open()
                    .then(|| open_key(a.merchant, a.mode, a.customer))
                    .into_iter()
                    .collect()
            }),
        ],
        customer_of,
    )?;
    credits(c)
}

/// An account's customer is stored (deleted or not: it is kept for the
/// objects that link to it) under the account's merchant and mode.
fn customer_of(c: &mut Checker, a: &VirtualAccount) -> Result<(), StoreError> {
    let x: Option<Customer> = c
        .read
        .get(Table::Customers, a.customer.as_bytes())?
        .and_then(|v| decode(&v).ok());
    if !x.is_some_and(|x| x.merchant == a.merchant && x.mode == a.mode) {
        c.breach(
            "indexes",
            format!(
                "virtual_account {} (merchant {} {}) names customer {}, which is not that merchant's in that mode",
                a.id,
                a.merchant,
                a.mode.as_str(),
                a.customer
            ),
        );
    }
    Ok(())
}

/// Forward, for each payment intent: a credit's payment is the one its
/// account's credit row (account and session id) names.
pub(super) fn credit_row(c: &mut Checker, p: &PaymentIntent) -> Result<(), StoreError> {
    let Some(b) = &p.bank_credit else {
        return Ok(());
    };
    c.examined("credits", 1);
    let key = transfer_key(b.virtual_account, &b.session_id);
    let named = c.read.get(Table::VirtualAccountCredits, &key)?;
    if named.as_deref() != Some(p.id.as_bytes().as_slice()) {
        c.breach(
            "credits",
            format!(
                "payment_intent {} (credit of virtual_account {}, session {:?}) has no virtual_account_credits row naming it (key {}): the transfer could be recorded again",
                p.id,
                b.virtual_account,
                b.session_id,
                hex(&key)
            ),
        );
    }
    Ok(())
}

/// Backward: each credit row names an existing successful payment intent
/// whose `bank_credit` is that row's account and session.
fn credits(c: &mut Checker) -> Result<(), StoreError> {
    let mut bad = Vec::new();
    let mut n = 0;
    c.each(Table::VirtualAccountCredits, |k, v| {
        n += 1;
        let account = k.get(..16).and_then(uuid_of).unwrap_or_default();
        let name = format!(
            "virtual_account_credits row {} (virtual_account {account})",
            hex(k)
        );
        let Some(id) = uuid_of(v) else {
            bad.push(format!("{name} holds no payment intent id"));
            return Ok(());
        };
        let p: Option<PaymentIntent> = c
            .read
            .get(Table::PaymentIntents, id.as_bytes())?
            .and_then(|v| decode(&v).ok());
        if let Some(why) = credit_problem(k, account, p.as_ref()) {
            bad.push(format!("{name} names payment_intent {id}, {why}"));
        }
        Ok(())
    })?;
    c.examined("credits", n);
    for b in bad {
        c.breach("credits", b);
    }
    Ok(())
}

/// What is wrong with credit row `k` of `account` naming `p`, if anything.
fn credit_problem(k: &[u8], account: Uuid, p: Option<&PaymentIntent>) -> Option<String> {
    let Some(p) = p else {
        return Some("which does not exist".into());
    };
    if p.status != Status::Successful {
        return Some(format!("which is {}, not successful", p.status.as_str()));
    }
    match &p.bank_credit {
        None => Some("which is not a bank credit".into()),
        Some(b) if b.virtual_account != account => Some(format!(
            "a credit of another virtual_account ({})",
            b.virtual_account
        )),
        Some(b) if transfer_key(account, &b.session_id) != k => {
            Some(format!("a credit of another session ({:?})", b.session_id))
        }
        Some(_) => None,
    }
}
