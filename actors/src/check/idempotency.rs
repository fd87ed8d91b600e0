//! `idempotency`: saved responses and their expiry rows.

use std::collections::HashSet;

use kobo_storage::{decode, StoreError, Table};

use super::{hex, Checker};
use crate::idempotency::IdempotencyRecord;

pub(super) fn idempotency(c: &mut Checker) -> Result<(), StoreError> {
    let mut breaches = Vec::new();
    let mut records: HashSet<Vec<u8>> = HashSet::new();
    let mut n = 0;
    c.each(Table::Idempotency, |k, v| {
        n += 1;
        match decode::<IdempotencyRecord>(v) {
            Ok(r) if (100..600).contains(&r.status) => {
                if serde_json::from_str::<serde_json::Value>(r.body.get()).is_err() {
                    breaches.push(format!("saved response {} does not decode as JSON", hex(k)));
                }
            }
            Ok(r) => breaches.push(format!("saved response {} has status {}", hex(k), r.status)),
            Err(e) => breaches.push(format!("saved response {} does not decode: {e}", hex(k))),
        }
        records.insert(k.to_vec());
        Ok(())
    })?;
    let mut expiries = 0;
    c.each(Table::IdempotencyExpiry, |k, _| {
        expiries += 1;
        match k.get(8..) {
            Some(record) if records.contains(record) => {}
            Some(record) if c.exists(Table::Idempotency, record)? => {}
            _ => breaches.push(format!(
                "idempotency expiry row {} names no saved response",
                hex(k)
            )),
        }
        Ok(())
    })?;
    let mut expiring: HashSet<Vec<u8>> = HashSet::new();
    c.each(Table::IdempotencyExpiry, |k, _| {
        if let Some(record) = k.get(8..) {
            expiring.insert(record.to_vec());
        }
        Ok(())
    })?;
    for r in records.difference(&expiring) {
        breaches.push(format!(
            "saved response {} has no expiry row: it would be kept forever",
            hex(r)
        ));
    }
    c.examined("idempotency", n + expiries);
    for b in breaches {
        c.breach("idempotency", b);
    }
    Ok(())
}
