//! The refund provider: the one that charged the customer sends the money
//! back and confirms later. The sandbox confirms asynchronously within
//! moments of real time (CONTRACT section 5), whatever the clock mode:
//! amounts ending in 13 kobo fail, 17 stay pending, others succeed.

/// What the provider will answer about a refund, decided when it is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundAnswer {
    Succeeded,
    Failed(String),
    /// No answer yet (and none will come in the sandbox).
    StaysPending,
}

pub fn sandbox_answer(amount: i64) -> RefundAnswer {
    match amount % 100 {
        13 => RefundAnswer::Failed("refund_rejected".into()),
        17 => RefundAnswer::StaysPending,
        _ => RefundAnswer::Succeeded,
    }
}

/// The real delay before the sandbox's confirmation arrives.
pub const SANDBOX_CONFIRMATION_DELAY: std::time::Duration = std::time::Duration::from_millis(200);
