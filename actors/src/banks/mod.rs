//! Nigerian banks (CBN codes) and merchants' bank accounts.
//!
//! A bank account is saved only after name enquiry with the payout rail
//! confirms it; the bank-returned account name is stored and shown. Adding
//! the same account again returns the saved one.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_storage::{Batch, CommitError, Table};

use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
use crate::ids::{new_id, scope_key, Mode};
use crate::money::Currency;
use crate::paging::{ListObject, ListView};

pub mod rail;

use rail::Rails;

/// (CBN code, name). Commercial banks have 3-digit codes; microfinance and
/// payment-service banks 6 digits.
pub const BANKS: &[(&str, &str)] = &[
    ("044", "Access Bank"),
    ("063", "Access Bank (Diamond)"),
    ("023", "Citibank Nigeria"),
    ("050", "Ecobank Nigeria"),
    ("070", "Fidelity Bank"),
    ("011", "First Bank of Nigeria"),
    ("214", "First City Monument Bank"),
    ("103", "Globus Bank"),
    ("058", "Guaranty Trust Bank"),
    ("030", "Heritage Bank"),
    ("301", "Jaiz Bank"),
    ("082", "Keystone Bank"),
    ("303", "Lotus Bank"),
    ("076", "Polaris Bank"),
    ("101", "Providus Bank"),
    ("125", "Rubies Bank"),
    ("221", "Stanbic IBTC Bank"),
    ("068", "Standard Chartered Bank"),
    ("232", "Sterling Bank"),
    ("100", "SunTrust Bank"),
    ("302", "TAJBank"),
    ("102", "Titan Trust Bank"),
    ("032", "Union Bank of Nigeria"),
    ("033", "United Bank for Africa"),
    ("215", "Unity Bank"),
    ("035", "Wema Bank"),
    ("057", "Zenith Bank"),
    ("090267", "Kuda Microfinance Bank"),
    ("090405", "Moniepoint Microfinance Bank"),
    ("100004", "OPay Digital Services (Paycom)"),
    ("100033", "PalmPay"),
    ("090110", "VFD Microfinance Bank"),
    ("090175", "Rubies Microfinance Bank"),
    ("090551", "FairMoney Microfinance Bank"),
    ("120001", "9 Payment Service Bank (9PSB)"),
];

pub fn bank_name(code: &str) -> Option<&'static str> {
    BANKS.iter().find(|(c, _)| *c == code).map(|(_, n)| *n)
}

/// The `object` value of a bank.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum BankObject {
    #[serde(rename = "bank")]
    Bank,
}

/// The country of a bank.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum BankCountry {
    NG,
}

/// A Nigerian bank payouts can reach.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Bank)]
pub struct BankView {
    #[schema(inline)]
    pub object: BankObject,
    /// The CBN code: 3 digits for commercial banks, 6 for microfinance and
    /// payment-service banks.
    #[schema(pattern = "^([0-9]{3}|[0-9]{6})$")]
    pub code: &'static str,
    pub name: &'static str,
    #[schema(inline)]
    pub country: BankCountry,
    /// Always `NGN`.
    pub currency: Currency,
    /// The mode of the key that listed it (the list is the same in both).
    pub livemode: bool,
}

/// `GET /v1/banks`: every bank, on one page.
pub fn banks(mode: Mode) -> ListView<BankView> {
    ListView {
        object: ListObject::List,
        data: BANKS
            .iter()
            .map(|(code, name)| BankView {
                object: BankObject::Bank,
                code,
                name,
                country: BankCountry::NG,
                currency: Currency::NGN,
                livemode: mode.livemode(),
            })
            .collect(),
        has_more: false,
    }
}

/// `GET /v1/banks`, as JSON.
pub fn banks_view(mode: Mode) -> Value {
    serde_json::to_value(banks(mode)).expect("the bank list serializes")
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BankAccount {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    pub bank_code: String,
    pub bank_name: String,
    pub account_number: String,
    /// As the bank returned it on name enquiry.
    pub account_name: String,
    pub created_at: DateTime<Utc>,
}

impl BankAccount {
    pub fn view(&self) -> BankAccountView {
        BankAccountView {
            id: self.id,
            object: BankAccountObject::BankAccount,
            livemode: self.mode.livemode(),
            bank_code: self.bank_code.clone(),
            bank_name: self.bank_name.clone(),
            account_number: self.account_number.clone(),
            account_number_last4: self.account_number[self.account_number.len() - 4..].to_string(),
            account_name: self.account_name.clone(),
            currency: Currency::NGN,
            created_at: self.created_at,
        }
    }

    /// The public BankAccount object, as JSON.
    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a bank account view serializes")
    }
}

/// The `object` value of a bank account.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum BankAccountObject {
    #[serde(rename = "bank_account")]
    BankAccount,
}

/// The public BankAccount object: one of the merchant's own accounts,
/// confirmed by name enquiry, that payouts pay into.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = BankAccount)]
pub struct BankAccountView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: BankAccountObject,
    pub livemode: bool,
    /// The bank's CBN code (`GET /v1/banks`).
    pub bank_code: String,
    pub bank_name: String,
    /// The full number (the merchant's own account).
    #[schema(pattern = "^[0-9]{10}$")]
    pub account_number: String,
    #[schema(pattern = "^[0-9]{4}$")]
    pub account_number_last4: String,
    /// As the bank returned it on name enquiry.
    pub account_name: String,
    /// Always `NGN`.
    pub currency: Currency,
    pub created_at: DateTime<Utc>,
}

fn natural_key(merchant: Uuid, mode: Mode, bank_code: &str, account_number: &str) -> Vec<u8> {
    scope_key(merchant, mode)
        .str(bank_code)
        .str(account_number)
        .build()
}

pub fn load(kobo: &Env, merchant: Uuid, mode: Mode, id: Uuid) -> DomainResult<Option<BankAccount>> {
    let found: Option<BankAccount> = kobo
        .store
        .read()?
        .get_decoded(Table::BankAccounts, id.as_bytes())?;
    Ok(found.filter(|a| a.merchant == merchant && a.mode == mode))
}

/// Adds a bank account after name enquiry: `Created`, or `Existing` when
/// the merchant added it before (answered as it is, and not saved here: the
/// caller saves that answer).
pub async fn add(
    kobo: &Env,
    rails: &Rails,
    merchant: Uuid,
    mode: Mode,
    bank_code: &str,
    account_number: &str,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<BankAccountView>> {
    let bank = check_account(bank_code, account_number)?;
    let natural = natural_key(merchant, mode, bank_code, account_number);
    if let Some(a) = find(kobo, &natural)? {
        return Ok(Answer::unsaved(Outcome::Existing(a.view())));
    }
    let account_name = rails
        .for_mode(mode)
        .name_enquiry(bank_code, account_number)
        .await?;
    let now = kobo.clock.now();
    let account = BankAccount {
        id: new_id(now),
        merchant,
        mode,
        seq: kobo.seq.next(),
        bank_code: bank_code.to_string(),
        bank_name: bank.to_string(),
        account_number: account_number.to_string(),
        account_name,
        created_at: now,
    };
    let mut batch = insert(&account, natural.clone());
    let answer = Answer::save(Outcome::Created(account.view()), idem, &mut batch, now);
    match kobo.writer.commit(batch).await {
        Ok(()) => Ok(answer),
        // Added concurrently by another request: answer the saved one.
        Err(CommitError::Conflict { .. }) => {
            let a = find(kobo, &natural)?
                .ok_or_else(|| DomainError::internal("bank account vanished"))?;
            Ok(Answer::unsaved(Outcome::Existing(a.view())))
        }
        Err(e) => Err(DomainError::internal(e.to_string())),
    }
}

/// The bank's name, after checking the code and the number's form (400).
fn check_account(bank_code: &str, account_number: &str) -> DomainResult<&'static str> {
    let bank = bank_name(bank_code).ok_or_else(|| {
        DomainError::invalid(
            "bank_code",
            format!("unknown bank code {bank_code}; see GET /v1/banks"),
        )
    })?;
    if account_number.len() != 10 || !account_number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DomainError::invalid(
            "account_number",
            "account_number must be exactly 10 digits",
        ));
    }
    Ok(bank)
}

/// The account saved under `natural` (bank and number), if any.
fn find(kobo: &Env, natural: &[u8]) -> DomainResult<Option<BankAccount>> {
    let read = kobo.store.read()?;
    let Some(id) = read.get(Table::BankAccountIndex, natural)? else {
        return Ok(None);
    };
    let id = Uuid::from_slice(&id).map_err(|_| DomainError::internal("bad bank account index"))?;
    Ok(read.get_decoded::<BankAccount>(Table::BankAccounts, id.as_bytes())?)
}

/// A new account's batch: its natural key (claimed: absent before), the
/// account and its list row.
fn insert(account: &BankAccount, natural: Vec<u8>) -> Batch {
    let mut batch = Batch::new();
    batch.owned_by(account.merchant.as_bytes());
    batch
        .require_absent(Table::BankAccountIndex, natural.clone())
        .put_raw(
            Table::BankAccountIndex,
            natural,
            account.id.as_bytes().to_vec(),
        )
        .put(Table::BankAccounts, account.id.as_bytes().to_vec(), account)
        .put_raw(
            Table::BankAccountList,
            scope_key(account.merchant, account.mode)
                .u64(account.seq)
                .build(),
            account.id.as_bytes().to_vec(),
        )
        .note_seq(account.seq);
    batch
}

/// A merchant's bank accounts in one mode, newest first (all of them: a
/// merchant has a handful).
pub fn list(kobo: &Env, merchant: Uuid, mode: Mode) -> DomainResult<Value> {
    let page = list_view(kobo, merchant, mode)?;
    Ok(serde_json::to_value(page).expect("a bank account list serializes"))
}

/// A merchant's bank accounts in one mode, newest first, on one page.
pub fn list_view(
    kobo: &Env,
    merchant: Uuid,
    mode: Mode,
) -> DomainResult<ListView<BankAccountView>> {
    let read = kobo.store.read()?;
    let mut data = Vec::new();
    read.scan_prefix_rev(
        Table::BankAccountList,
        &scope_key(merchant, mode).build(),
        None,
        |_, v| {
            let id = Uuid::from_slice(v)
                .map_err(|_| kobo_storage::StoreError::Redb("bad index".into()))?;
            if let Some(a) = read.get_decoded::<BankAccount>(Table::BankAccounts, id.as_bytes())? {
                data.push(a.view());
            }
            Ok(data.len() < 1000)
        },
    )?;
    Ok(ListView {
        object: ListObject::List,
        data,
        has_more: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The views render exactly what the `json!` renderings they replaced
    /// did.
    #[test]
    fn bank_and_bank_account_json_is_unchanged() {
        let old_banks = json!({
            "object": "list",
            "data": BANKS.iter().map(|(code, name)| json!({"object": "bank", "code": code, "name": name, "country": "NG", "currency": "NGN", "livemode": false})).collect::<Vec<_>>(),
            "has_more": false,
        });
        assert_eq!(banks_view(Mode::Test), old_banks);
        assert_eq!(banks_view(Mode::Test).to_string(), old_banks.to_string());

        let old_account = |a: &BankAccount| {
            json!({
                "id": a.id,
                "object": "bank_account",
                "livemode": a.mode.livemode(),
                "bank_code": a.bank_code,
                "bank_name": a.bank_name,
                "account_number": a.account_number,
                "account_number_last4": &a.account_number[a.account_number.len() - 4..],
                "account_name": a.account_name,
                "currency": "NGN",
                "created_at": a.created_at,
            })
        };
        let mut accounts = Vec::new();
        for (mode, code) in [(Mode::Test, "058"), (Mode::Live, "090405")] {
            let a = BankAccount {
                id: Uuid::new_v4(),
                merchant: Uuid::new_v4(),
                mode,
                seq: 7,
                bank_code: code.into(),
                bank_name: bank_name(code).unwrap().into(),
                account_number: "0123456789".into(),
                account_name: "ADA OBI / SHOP".into(),
                created_at: Utc::now(),
            };
            assert_eq!(a.to_api(), old_account(&a));
            accounts.push(a);
        }
        // The list of `list`.
        let old_list = json!({
            "object": "list",
            "data": accounts.iter().map(BankAccount::to_api).collect::<Vec<_>>(),
            "has_more": false,
        });
        let new_list = ListView {
            object: ListObject::List,
            data: accounts.iter().map(BankAccount::view).collect(),
            has_more: false,
        };
        assert_eq!(serde_json::to_value(new_list).unwrap(), old_list);
    }
}
