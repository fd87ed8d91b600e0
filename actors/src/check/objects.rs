//! The older resources' object tables and their indexes: merchants,
//! brands, events, refunds, disputes, FX, USDT wallets, mandates, bank
//! accounts, webhook endpoints and the audit log.

use kobo_storage::{KeyBuf, StoreError, Table};

use super::table::{index, list_key, object_table};
use super::Checker;
use crate::audit::AuditEntry;
use crate::event::{type_byte, Event};
use crate::fx::{FxConversion, FxRate};
use crate::ids::scope_key;
use crate::mandate::Mandate;
use crate::merchant::{Brand, Merchant};
use crate::refund::{Dispute, Refund};
use crate::usdt::UsdtWallet;
use crate::webhook::WebhookEndpoint;

pub(super) fn objects(c: &mut Checker) -> Result<(), StoreError> {
    core(c)?;
    after_payment(c)?;
    instruments(c)?;
    admin(c)
}

/// Merchants, brands and events.
fn core(c: &mut Checker) -> Result<(), StoreError> {
    let none = |_: &_| None;
    object_table::<Merchant>(
        c,
        Table::Merchants,
        "merchant",
        |m| m.id,
        none,
        &[],
        |_, _| Ok(()),
    )?;
    object_table::<Brand>(
        c,
        Table::Brands,
        "brand",
        |b| b.id,
        |b| Some(b.seq),
        &[index(Table::BrandIndex, |b: &Brand| {
            vec![list_key(b.merchant, b.mode, b.seq)]
        })],
        |_, _| Ok(()),
    )?;
    object_table::<Event>(
        c,
        Table::Events,
        "event",
        |e| e.id,
        |e| Some(e.seq),
        &[
            // A webhook test event is in no event list, only in its
            // endpoint's test events.
            index(Table::EventIndex, |e: &Event| {
                listed_event(e)
                    .then(|| list_key(e.merchant, e.mode, e.seq))
                    .into_iter()
                    .collect()
            }),
            index(Table::EventTypeIndex, |e: &Event| {
                listed_event(e)
                    .then(|| {
                        scope_key(e.merchant, e.mode)
                            .u8(type_byte(&e.event_type))
                            .u64(e.seq)
                            .build()
                    })
                    .into_iter()
                    .collect()
            }),
            index(Table::WebhookTestEvents, |e: &Event| {
                let object: serde_json::Value =
                    serde_json::from_str(e.object.get()).unwrap_or_default();
                let endpoint = object["id"]
                    .as_str()
                    .and_then(|s| s.parse::<uuid::Uuid>().ok());
                match endpoint.filter(|_| !listed_event(e)) {
                    Some(ep) => vec![KeyBuf::new().bytes(ep.as_bytes()).u64(e.seq).build()],
                    None => Vec::new(),
                }
            }),
        ],
        |_, _| Ok(()),
    )?;
    Ok(())
}

/// Whether the event is in the event lists (every event but webhook test
/// events).
fn listed_event(e: &Event) -> bool {
    e.event_type != crate::webhook::TEST_EVENT_TYPE
}

/// Refunds, disputes, FX rates and conversions.
fn after_payment(c: &mut Checker) -> Result<(), StoreError> {
    object_table::<Refund>(
        c,
        Table::Refunds,
        "refund",
        |r| r.id,
        |r| Some(r.seq),
        &[
            index(Table::RefundIndex, |r: &Refund| {
                vec![list_key(r.merchant, r.mode, r.seq)]
            }),
            index(Table::RefundByPayment, |r: &Refund| {
                vec![scope_key(r.merchant, r.mode)
                    .bytes(r.payment_intent.as_bytes())
                    .u64(r.seq)
                    .build()]
            }),
        ],
        |_, _| Ok(()),
    )?;
    object_table::<Dispute>(
        c,
        Table::Disputes,
        "dispute",
        |d| d.id,
        |d| Some(d.seq),
        &[index(Table::DisputeIndex, |d: &Dispute| {
            vec![list_key(d.merchant, d.mode, d.seq)]
        })],
        |_, _| Ok(()),
    )?;
    object_table::<FxRate>(
        c,
        Table::FxRates,
        "fx_rate",
        |r| r.id,
        |r| Some(r.seq),
        &[index(Table::FxRateIndex, |r: &FxRate| {
            vec![KeyBuf::new().u64(r.seq).build()]
        })],
        |_, _| Ok(()),
    )?;
    object_table::<FxConversion>(
        c,
        Table::FxConversions,
        "fx_conversion",
        |x| x.id,
        |x| Some(x.seq),
        &[index(Table::FxConversionIndex, |x: &FxConversion| {
            vec![list_key(x.merchant, x.mode, x.seq)]
        })],
        |_, _| Ok(()),
    )?;
    Ok(())
}

/// USDT wallets and mandates.
fn instruments(c: &mut Checker) -> Result<(), StoreError> {
    object_table::<UsdtWallet>(
        c,
        Table::UsdtWallets,
        "usdt_wallet",
        |w| w.id,
        |w| Some(w.seq),
        &[
            index(Table::UsdtWalletIndex, |w: &UsdtWallet| {
                w.is_active()
                    .then(|| list_key(w.merchant, w.mode, w.seq))
                    .into_iter()
                    .collect()
            }),
            index(Table::UsdtWalletAddresses, |w: &UsdtWallet| {
                match (w.is_active(), w.network.normalize(&w.address)) {
                    (true, Ok(a)) => vec![scope_key(w.merchant, w.mode)
                        .u8(w.network.byte())
                        .str(&a)
                        .build()],
                    _ => Vec::new(),
                }
            }),
        ],
        |_, _| Ok(()),
    )?;
    object_table::<Mandate>(
        c,
        Table::Mandates,
        "mandate",
        |m| m.id,
        |m| Some(m.seq),
        &[
            index(Table::MandateIndex, |m: &Mandate| {
                vec![list_key(m.merchant, m.mode, m.seq)]
            }),
            index(Table::MandateStatusIndex, |m: &Mandate| {
                vec![scope_key(m.merchant, m.mode)
                    .u8(m.status.byte())
                    .u64(m.seq)
                    .build()]
            }),
            index(Table::MandateCustomerIndex, |m: &Mandate| {
                vec![scope_key(m.merchant, m.mode)
                    .bytes(m.customer.as_bytes())
                    .u64(m.seq)
                    .build()]
            }),
        ],
        |_, _| Ok(()),
    )?;
    Ok(())
}

/// Bank accounts, webhook endpoints and the audit log.
fn admin(c: &mut Checker) -> Result<(), StoreError> {
    object_table::<crate::banks::BankAccount>(
        c,
        Table::BankAccounts,
        "bank_account",
        |a| a.id,
        |a| Some(a.seq),
        &[
            index(Table::BankAccountList, |a: &crate::banks::BankAccount| {
                vec![list_key(a.merchant, a.mode, a.seq)]
            }),
            index(Table::BankAccountIndex, |a: &crate::banks::BankAccount| {
                vec![scope_key(a.merchant, a.mode)
                    .str(&a.bank_code)
                    .str(&a.account_number)
                    .build()]
            }),
        ],
        |_, _| Ok(()),
    )?;
    object_table::<WebhookEndpoint>(
        c,
        Table::WebhookEndpoints,
        "webhook_endpoint",
        |e| e.id,
        |e| Some(e.seq),
        &[index(Table::WebhookEndpointIndex, |e: &WebhookEndpoint| {
            e.deleted_at
                .is_none()
                .then(|| list_key(e.merchant, e.mode, e.seq))
                .into_iter()
                .collect()
        })],
        |_, _| Ok(()),
    )?;
    object_table::<AuditEntry>(
        c,
        Table::AuditLog,
        "audit_entry",
        |e| e.id,
        |e| Some(e.seq),
        &[
            index(Table::AuditIndex, |e: &AuditEntry| {
                audit_keys(e, Table::AuditIndex)
            }),
            index(Table::AuditActionIndex, |e: &AuditEntry| {
                audit_keys(e, Table::AuditActionIndex)
            }),
            index(Table::AuditMerchantIndex, |e: &AuditEntry| {
                audit_keys(e, Table::AuditMerchantIndex)
            }),
        ],
        |_, _| Ok(()),
    )?;
    Ok(())
}

fn audit_keys(e: &AuditEntry, table: Table) -> Vec<Vec<u8>> {
    e.index_keys()
        .into_iter()
        .filter(|(t, _)| *t == table)
        .map(|(_, k)| k)
        .collect()
}
