//! `decode`: every codec value decodes; every counter row is whole.

use kobo_storage::{decode, StoreError, Table};

use super::{hex, Checker};

/// Tables whose values are codec-encoded (a version byte, then JSON or
/// postcard); the others hold raw ids, keys or nothing.
const CODEC_TABLES: &[Table] = &[
    Table::Merchants,
    Table::ApiKeys,
    Table::Brands,
    Table::PaymentIntents,
    Table::ChargeAttempts,
    Table::LedgerLines,
    Table::Balances,
    Table::Events,
    Table::Timers,
    Table::Idempotency,
    Table::ScheduledReleases,
    Table::BankAccounts,
    Table::Payouts,
    Table::PayoutUsage,
    Table::SandboxTransfers,
    Table::WebhookEndpoints,
    Table::Deliveries,
    Table::DeliveryAttempts,
    Table::ConsoleSessions,
    Table::Refunds,
    Table::Disputes,
    Table::PaymentAftercare,
    Table::FxRates,
    Table::FxConversions,
    Table::UsdtWallets,
    Table::CryptoPayouts,
    Table::SandboxCryptoTransfers,
    Table::Customers,
    Table::SandboxIdentityChecks,
    Table::VirtualAccounts,
    Table::SandboxAccountCredits,
    Table::PaymentLinks,
    Table::Mandates,
    Table::SandboxMandates,
    Table::SandboxDebits,
    Table::AuditLog,
    Table::Invoices,
    Table::CustomerCredits,
    Table::Plans,
    Table::Subscriptions,
];

pub(super) fn decode_all(c: &mut Checker) -> Result<(), StoreError> {
    for &table in CODEC_TABLES {
        let mut bad = Vec::new();
        let mut n = 0;
        c.each(table, |k, v| {
            n += 1;
            if let Err(e) = decodes(table, v) {
                bad.push(format!("{} key {}: {e}", table.name(), hex(k)));
            }
            Ok(())
        })?;
        c.examined("decode", n);
        for b in bad {
            c.breach("decode", b);
        }
    }
    counter_rows(c)
}

/// Whether `v` decodes as `table`'s type. Values in the compact format
/// (postcard) carry no field names, so they are read as their own type;
/// JSON values of any table read as a `Value`.
fn decodes(table: Table, v: &[u8]) -> Result<(), kobo_storage::CodecError> {
    match table {
        Table::PaymentIntents => decode::<crate::payment_intent::PaymentIntent>(v).map(drop),
        Table::Idempotency => decode::<crate::idempotency::IdempotencyRecord>(v).map(drop),
        Table::Events => decode::<crate::event::Event>(v).map(drop),
        Table::LedgerLines => decode::<crate::ledger::LedgerLine>(v).map(drop),
        Table::ChargeAttempts => decode::<crate::payment_intent::ChargeAttempt>(v).map(drop),
        Table::Timers => decode::<crate::timer::Timer>(v).map(drop),
        Table::ScheduledReleases => decode::<crate::ledger::release::ScheduledRelease>(v).map(drop),
        _ => decode::<serde_json::Value>(v).map(drop),
    }
}

/// Tables of counter rows (big-endian `i64`s moved by `Batch::add`), not
/// codec-encoded: each row must be a whole number of counters.
const COUNTER_TABLES: &[Table] = &[Table::PaymentLinkCounters];

fn counter_rows(c: &mut Checker) -> Result<(), StoreError> {
    for &table in COUNTER_TABLES {
        let mut bad = Vec::new();
        let mut n = 0;
        c.each(table, |k, v| {
            n += 1;
            if v.len() % 8 != 0 {
                bad.push(format!(
                    "{} key {}: {} bytes, not a whole number of i64 counters",
                    table.name(),
                    hex(k),
                    v.len()
                ));
            }
            Ok(())
        })?;
        c.examined("decode", n);
        for b in bad {
            c.breach("decode", b);
        }
    }
    Ok(())
}
