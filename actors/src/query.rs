//! The read paths `src/` uses, at their old place. Each read lives with
//! its resource (payment intents, ledger, merchant brands, the principal)
//! and generic paging in [`crate::paging`]; this module only re-exports
//! them, and nothing in this crate imports it.

pub use crate::auth::{Caller, RateLimitKey};
pub use crate::ledger::query::{
    available, balance, balance_transactions, balance_view, statement_lines, BalanceAmount,
    BalanceObject, BalanceView, LineFilter,
};
pub use crate::ledger::reserve::{
    reserve, reserve_reason_text, reserve_view, ReserveHeldView, ReserveObject, ReserveReleaseView,
    ReserveTermsView, ReserveView,
};
pub use crate::merchant::query::{brand, list_brands};
pub use crate::paging::{page_by_index, page_within, ListObject, ListView, Page};
pub use crate::payment_intent::query::{
    charge_attempts, check_payment_intent, list_payment_intents, payment_intent, IntentFilter,
};
pub use crate::principal::{authenticate, Principal};
