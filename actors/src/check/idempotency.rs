//! `idempotency`: saved responses, the rows that find them by key, and
//! their expiry rows (see crate::idempotency for the layout).

use std::collections::HashSet;

use kobo_storage::{StoreError, Table};

use super::{hex, Checker};
use crate::idempotency::decode_saved;

pub(super) fn idempotency(c: &mut Checker) -> Result<(), StoreError> {
    let mut breaches = Vec::new();
    let mut n = 0;
    // Responses saved before schema 4, whole under their key.
    let mut records: HashSet<Vec<u8>> = HashSet::new();
    c.each(Table::Idempotency, |k, v| {
        n += 1;
        if let Some(why) = unsound(v) {
            breaches.push(format!("saved response {} {why}", hex(k)));
        }
        records.insert(k.to_vec());
        Ok(())
    })?;
    // Expiry rows: the record itself (schema 4), or empty beside an old
    // record.
    let (mut expiring_records, mut saved) = (HashSet::new(), HashSet::new());
    c.each(Table::IdempotencyExpiry, |k, v| {
        n += 1;
        let Some(record) = k.get(8..) else {
            breaches.push(format!("idempotency expiry row {} is too short", hex(k)));
            return Ok(());
        };
        if v.is_empty() {
            expiring_records.insert(record.to_vec());
            if !records.contains(record) {
                breaches.push(format!(
                    "idempotency expiry row {} names no saved response",
                    hex(k)
                ));
            }
        } else {
            if let Some(why) = unsound(v) {
                breaches.push(format!("saved response {} {why}", hex(k)));
            }
            saved.insert(k.to_vec());
        }
        Ok(())
    })?;
    c.each(Table::IdempotencyKeys, |k, v| {
        n += 1;
        let found = <[u8; 8]>::try_from(v).is_ok_and(|expires| {
            let mut row = expires.to_vec();
            row.extend_from_slice(k);
            saved.contains(&row)
        });
        if !found {
            breaches.push(format!(
                "idempotency key row {} names no saved response",
                hex(k)
            ));
        }
        Ok(())
    })?;
    for r in records.difference(&expiring_records) {
        breaches.push(format!(
            "saved response {} has no expiry row: it would be kept forever",
            hex(r)
        ));
    }
    c.examined("idempotency", n);
    for b in breaches {
        c.breach("idempotency", b);
    }
    Ok(())
}

/// Why a saved response's row is unsound, if it is.
fn unsound(v: &[u8]) -> Option<String> {
    match decode_saved(v) {
        Ok(r) if (100..600).contains(&r.status) => {
            serde_json::from_str::<serde_json::Value>(r.body.get())
                .is_err()
                .then(|| "does not decode as JSON".to_string())
        }
        Ok(r) => Some(format!("has status {}", r.status)),
        Err(e) => Some(format!("does not decode: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use kobo_storage::Batch;
    use uuid::Uuid;

    use crate::idempotency::IdempotencySave;

    fn breaches(store: &kobo_storage::Store) -> Vec<String> {
        let report = crate::check::check(store).unwrap();
        let s = report
            .sections
            .into_iter()
            .find(|s| s.name == "idempotency");
        s.expect("the idempotency section").breaches
    }

    fn first_key(store: &kobo_storage::Store, table: kobo_storage::Table) -> (Vec<u8>, Vec<u8>) {
        let mut row = None;
        store
            .read()
            .unwrap()
            .scan_prefix(table, &[], None, |k, v| {
                row = Some((k.to_vec(), v.to_vec()));
                Ok(false)
            })
            .unwrap();
        row.expect("a row")
    }

    #[tokio::test]
    async fn a_key_row_without_its_record_and_an_old_record_without_its_expiry_row_are_breaches() {
        use kobo_storage::Table::{Idempotency, IdempotencyExpiry};
        let dir = tempfile::tempdir().unwrap();
        let kobo = crate::runtime::for_tests(dir.path(), "2026-11-25T10:00:00Z");
        let now = kobo.clock.now();
        let save = IdempotencySave::of_secret_key_for_tests(Uuid::new_v4(), "f");
        let mut batch = Batch::new();
        save.add_to(&mut batch, 201, "{\"id\":1}", now);
        kobo.writer.commit(batch).await.unwrap();
        assert_eq!(breaches(&kobo.store), Vec::<String>::new());

        // The record gone: its key row names nothing.
        let (expiry, record) = first_key(&kobo.store, IdempotencyExpiry);
        let mut batch = Batch::new();
        batch.delete(IdempotencyExpiry, expiry.clone());
        kobo.writer.commit(batch).await.unwrap();
        let found = breaches(&kobo.store);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("idempotency key row"), "{found:?}");

        // Back, and a record of the old layout without its expiry row:
        // kept forever.
        let mut batch = Batch::new();
        batch
            .put_raw(IdempotencyExpiry, expiry, record.clone())
            .put_raw(Idempotency, b"old".to_vec(), record);
        kobo.writer.commit(batch).await.unwrap();
        let found = breaches(&kobo.store);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].ends_with("has no expiry row: it would be kept forever"));
    }
}
