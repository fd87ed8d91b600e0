//! Customers: their list, phone, brand and risk indexes (generic), and
//! the email index (`customers`): one row per live customer's lowercased
//! email, naming it.

use kobo_storage::{decode, StoreError, Table};

use super::table::{index, listed, object_table};
use super::{hex, uuid_of, Checker};
use crate::customer::Customer;

/// A live customer's rows in `table` (a deleted one leaves every index).
fn rows(x: &Customer, table: Table) -> Vec<Vec<u8>> {
    if x.deleted_at.is_some() {
        return Vec::new();
    }
    x.index_rows()
        .into_iter()
        .filter(|(t, _)| *t == table)
        .map(|(_, k)| k)
        .collect()
}

pub(super) fn customers(c: &mut Checker) -> Result<(), StoreError> {
    object_table::<Customer>(
        c,
        Table::Customers,
        "customer",
        |x| x.id,
        |x| Some(x.seq),
        &[
            index(Table::CustomerIndex, |x| rows(x, Table::CustomerIndex)),
            index(Table::CustomerPhoneIndex, |x| {
                rows(x, Table::CustomerPhoneIndex)
            }),
            index(Table::CustomerBrandIndex, |x| {
                rows(x, Table::CustomerBrandIndex)
            }),
            index(Table::CustomerRiskIndex, |x| {
                rows(x, Table::CustomerRiskIndex)
            }),
        ],
        email_row,
    )?;
    email_rows(c)
}

/// A live customer with an email is the one its email row names, or a
/// later duplicate of that one (mandates made duplicates before the index
/// existed; its backfill gave each email its oldest customer).
fn email_row(c: &mut Checker, x: &Customer) -> Result<(), StoreError> {
    let (None, Some(key)) = (x.deleted_at, x.email_key()) else {
        return Ok(());
    };
    c.examined("customers", 1);
    let named = c.read.get(Table::CustomerEmails, &key)?;
    let older: Option<Customer> = match named.as_deref().and_then(uuid_of) {
        Some(other) if other != x.id => c
            .read
            .get(Table::Customers, other.as_bytes())?
            .and_then(|v| decode(&v).ok()),
        _ => None,
    };
    if older.is_some_and(|o| {
        o.deleted_at.is_none() && o.email_key().as_ref() == Some(&key) && o.seq < x.seq
    }) {
        return Ok(());
    }
    if let Some(line) = listed(c, "customer", x.id, Table::CustomerEmails, &key)? {
        let email = x.email.as_deref().unwrap_or("");
        c.breach(
            "customers",
            format!("{line}: its email {email:?} is not found"),
        );
    }
    Ok(())
}

/// Every email row names a live customer whose lowercased email (in that
/// merchant's mode) is the row's key.
fn email_rows(c: &mut Checker) -> Result<(), StoreError> {
    let mut bad = Vec::new();
    let mut n = 0;
    c.each(Table::CustomerEmails, |k, v| {
        n += 1;
        let Some(id) = uuid_of(v) else {
            bad.push(format!("customer_emails entry {} holds no id", hex(k)));
            return Ok(());
        };
        let x: Option<Customer> = c
            .read
            .get(Table::Customers, id.as_bytes())?
            .and_then(|v| decode(&v).ok());
        let problem = match &x {
            None => Some("which does not exist".to_string()),
            Some(x) if x.deleted_at.is_some() => Some("which is deleted".into()),
            Some(x) if x.email_key().as_deref() != Some(k) => Some(format!(
                "whose email (lowercased, merchant {} {}) is {:?}",
                x.merchant,
                x.mode.as_str(),
                x.email.as_deref().map(str::to_lowercase)
            )),
            Some(_) => None,
        };
        if let Some(p) = problem {
            bad.push(format!(
                "customer_emails entry {} ({:?}) points at customer {id}, {p}",
                hex(k),
                String::from_utf8_lossy(k.get(17..).unwrap_or_default())
            ));
        }
        Ok(())
    })?;
    c.examined("customers", n);
    for b in bad {
        c.breach("customers", b);
    }
    Ok(())
}
