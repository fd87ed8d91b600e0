//! The public PaymentLink object.

use super::*;

use crate::payment_intent::metadata_schema;

/// The `object` value of a payment link.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum PaymentLinkObject {
    #[serde(rename = "payment_link")]
    PaymentLink,
}

/// The public PaymentLink object.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = PaymentLink)]
pub struct PaymentLinkView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: PaymentLinkObject,
    pub livemode: bool,
    pub name: String,
    #[schema(required = true)]
    pub description: Option<String>,
    pub currency: Currency,
    pub fee_bearer: FeeBearer,
    pub amount_type: AmountType,
    /// `fixed`: every payment's amount (minor units); else null.
    #[schema(required = true, minimum = 100)]
    pub amount: Option<i64>,
    /// `customer_chosen`: the smallest amount; else null.
    #[schema(required = true, minimum = 100)]
    pub min_amount: Option<i64>,
    /// `customer_chosen`: the largest amount, null for no bound.
    #[schema(required = true, minimum = 100)]
    pub max_amount: Option<i64>,
    /// `customer_chosen`: up to 4 amounts the page offers.
    pub suggested_amounts: Vec<i64>,
    pub slug: String,
    /// The page: `<base-url>/p/<slug>`.
    pub url: String,
    pub status: LinkStatus,
    /// Why the link is `inactive`; null while active.
    #[schema(required = true)]
    pub inactive_reason: Option<InactiveReason>,
    #[schema(required = true)]
    pub expires_at: Option<DateTime<Utc>>,
    /// Payments the link takes; null for no limit. A late bank transfer
    /// may take `payments_count` past it.
    #[schema(required = true, minimum = 1)]
    pub max_payments: Option<i64>,
    /// Successful payments.
    #[schema(minimum = 0)]
    pub payments_count: i64,
    /// The sum of the successful payments' `amount` (fees the customer
    /// paid on top are not included).
    #[schema(minimum = 0)]
    pub amount_collected: i64,
    pub custom_fields: Vec<CustomField>,
    /// Whether the page asks for the customer's phone number.
    pub collect_phone: bool,
    #[schema(required = true)]
    pub return_url: Option<String>,
    /// Shown to the customer once the payment succeeds.
    #[schema(required = true)]
    pub success_message: Option<String>,
    #[schema(schema_with = metadata_schema)]
    pub metadata: Map<String, Value>,
    /// The brand the payments belong to (its name heads the page).
    pub brand: Uuid,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What the view needs besides the link: its counters and the moment.
#[derive(Debug, Clone, Copy)]
pub struct LinkFacts<'a> {
    pub base_url: &'a str,
    pub payments: i64,
    pub amount: i64,
    pub now: DateTime<Utc>,
}

impl PaymentLink {
    /// The page's address.
    pub fn url(&self, base_url: &str) -> String {
        format!("{base_url}/p/{}", self.slug)
    }

    pub fn view(&self, facts: LinkFacts<'_>) -> PaymentLinkView {
        let (status, inactive_reason) = self.effective_status(facts.payments, facts.now);
        let a = &self.amount;
        PaymentLinkView {
            id: self.id,
            object: PaymentLinkObject::PaymentLink,
            livemode: self.mode.livemode(),
            name: self.name.clone(),
            description: self.description.clone(),
            currency: self.currency,
            fee_bearer: self.fee_bearer,
            amount_type: a.amount_type,
            amount: a.amount,
            min_amount: a.min_amount,
            max_amount: a.max_amount,
            suggested_amounts: a.suggested_amounts.clone(),
            slug: self.slug.clone(),
            url: self.url(facts.base_url),
            status,
            inactive_reason,
            expires_at: self.expires_at,
            max_payments: self.max_payments,
            payments_count: facts.payments,
            amount_collected: facts.amount,
            custom_fields: self.custom_fields.clone(),
            collect_phone: self.collect_phone,
            return_url: self.return_url.clone(),
            success_message: self.success_message.clone(),
            metadata: self.metadata.clone(),
            brand: self.brand,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    /// The public PaymentLink object, as JSON.
    pub fn to_api(&self, facts: LinkFacts<'_>) -> Value {
        serde_json::to_value(self.view(facts)).expect("a payment link view serializes")
    }
}
