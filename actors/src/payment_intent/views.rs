//! The public views of a payment intent and its charge attempts: the typed
//! objects the API renders (and documents), built from the stored state.

use super::*;

/// The `object` value of a charge attempt.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum ChargeAttemptObject {
    #[serde(rename = "charge_attempt")]
    ChargeAttempt,
}

/// The public ChargeAttempt object: one try at paying a payment intent.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = ChargeAttempt)]
pub struct ChargeAttemptView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: ChargeAttemptObject,
    pub livemode: bool,
    pub payment_intent: Uuid,
    pub channel: Channel,
    pub status: AttemptStatus,
    #[schema(required = true)]
    pub card: Option<CardSummary>,
    #[schema(required = true)]
    pub failure_code: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl ChargeAttempt {
    pub fn view(&self) -> ChargeAttemptView {
        ChargeAttemptView {
            id: self.id,
            object: ChargeAttemptObject::ChargeAttempt,
            livemode: self.mode.livemode(),
            payment_intent: self.payment_intent,
            channel: self.channel,
            status: self.status,
            card: self.card.clone(),
            failure_code: self.failure_code.clone(),
            created_at: self.created_at,
        }
    }

    /// The public ChargeAttempt object, as JSON.
    pub fn to_api(&self) -> Value {
        serde_json::to_value(self.view()).expect("a charge attempt view serializes")
    }
}

/// The `object` value of a payment intent.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum PaymentIntentObject {
    #[serde(rename = "payment_intent")]
    PaymentIntent,
}

/// `amount_charged`: what the customer pays on the channel they are paying
/// with (the card price until they choose one): the amount, plus fee and VAT
/// when the customer bears the fee.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub struct AmountCharged {
    #[schema(minimum = 0)]
    pub amount: i64,
    /// The fee the customer pays (0 when the merchant bears it).
    #[schema(minimum = 0)]
    pub fee: i64,
    /// VAT on that fee.
    #[schema(minimum = 0)]
    pub vat: i64,
    /// `amount + fee + vat`.
    #[schema(minimum = 0)]
    pub total: i64,
}

/// The schema of `metadata`, as the API accepts it: up to 20 keys of 1 to 40
/// characters; values are strings of at most 500 characters, numbers or
/// booleans.
pub fn metadata_schema() -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "Up to 20 keys of 1 to 40 characters; values are strings (at most 500 characters), numbers or booleans.",
        ))
        .max_properties(Some(20))
        .property_names(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(40)),
        ))
        .additional_properties(Some(Schema::OneOf(
            OneOfBuilder::new()
                .item(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .max_length(Some(500)),
                )
                .item(ObjectBuilder::new().schema_type(Type::Number))
                .item(ObjectBuilder::new().schema_type(Type::Boolean))
                .build(),
        )))
        .into()
}

/// The public PaymentIntent object. Fields are declared in the order of
/// their names, the order every answer shows them in: the sorted writer
/// (`sorted_json`) then writes them as they come, without moving any.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = PaymentIntent)]
pub struct PaymentIntentView {
    /// Minor units (kobo, cents).
    #[schema(minimum = 0)]
    pub amount: i64,
    pub amount_charged: AmountCharged,
    #[schema(required = true)]
    pub bank_transfer: Option<BankTransferAccount>,
    /// The brand the money belongs to (the merchant's default brand unless
    /// one was given).
    pub brand: Uuid,
    #[schema(required = true)]
    pub canceled_at: Option<DateTime<Utc>>,
    /// Only in the response that creates the payment: a short link to the
    /// hosted checkout for this one payment.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub checkout_url: Option<String>,
    /// Only in the response that creates the payment: acts on this one
    /// payment only (retrieve, bank_transfer, card, authenticate).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub client_secret: Option<String>,
    pub created_at: DateTime<Utc>,
    pub currency: Currency,
    #[schema(required = true)]
    pub customer: Option<Uuid>,
    #[schema(required = true)]
    pub customer_email: Option<String>,
    #[schema(required = true)]
    pub description: Option<String>,
    #[schema(required = true)]
    pub failure_code: Option<String>,
    pub fee_bearer: FeeBearer,
    /// The card-price estimate until the payment succeeds, then the final fee
    /// at the price of the channel that took it.
    pub fees: Fees,
    pub id: Uuid,
    pub livemode: bool,
    #[schema(schema_with = metadata_schema)]
    pub metadata: Map<String, Value>,
    #[schema(required = true)]
    pub next_action: Option<NextAction>,
    #[schema(inline)]
    pub object: PaymentIntentObject,
    #[schema(required = true)]
    pub paid_at: Option<DateTime<Utc>>,
    #[schema(required = true)]
    pub payment_link: Option<Uuid>,
    #[schema(required = true)]
    pub reference: Option<String>,
    #[schema(required = true)]
    pub return_url: Option<String>,
    /// Who sent that transfer, and its interbank session id.
    #[schema(required = true)]
    pub sender: Option<SenderView>,
    pub status: Status,
    pub updated_at: DateTime<Utc>,
    /// The dedicated virtual account a transfer into which made this
    /// payment.
    #[schema(required = true)]
    pub virtual_account: Option<Uuid>,
}

/// The sender of a transfer into a virtual account.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = TransferSender)]
pub struct SenderView {
    #[schema(required = true)]
    pub name: Option<String>,
    #[schema(required = true)]
    pub account_number: Option<String>,
    /// The interbank session id of the transfer (one payment per session
    /// id and account).
    pub session_id: String,
    /// `true` when the money arrived after the account was deactivated:
    /// recorded anyway (a bank credit cannot be refused); review it.
    pub account_deactivated: bool,
}

/// Extra fields shown only in the create response.
pub struct CreatedSecrets<'a> {
    pub checkout_url: &'a str,
    pub client_secret: &'a str,
}

impl PaymentIntent {
    /// `amount_charged`, as JSON.
    pub fn amount_charged(&self) -> Value {
        serde_json::to_value(self.amount_charged_view()).expect("amount_charged serializes")
    }

    pub fn amount_charged_view(&self) -> AmountCharged {
        let (fee, vat, total) = self.charge_on(self.channel.unwrap_or(Channel::Card));
        AmountCharged {
            amount: self.amount,
            fee,
            vat,
            total,
        }
    }

    /// The public PaymentIntent object; `secrets` only in the create
    /// response.
    pub fn view(&self, secrets: Option<CreatedSecrets<'_>>) -> PaymentIntentView {
        PaymentIntentView {
            id: self.id,
            object: PaymentIntentObject::PaymentIntent,
            livemode: self.mode.livemode(),
            amount: self.amount,
            currency: self.currency,
            status: self.status,
            reference: self.reference.clone(),
            description: self.description.clone(),
            customer_email: self.customer_email.clone(),
            brand: self.brand,
            customer: self.customer,
            payment_link: self.payment_link,
            metadata: self.metadata.clone(),
            fee_bearer: self.fee_bearer,
            amount_charged: self.amount_charged_view(),
            fees: self.fees(),
            failure_code: self.failure_code.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            paid_at: self.paid_at,
            canceled_at: self.canceled_at,
            return_url: self.return_url.clone(),
            bank_transfer: self.bank_transfer.clone(),
            next_action: self.next_action.clone(),
            virtual_account: self.bank_credit.as_ref().map(|c| c.virtual_account),
            sender: self.bank_credit.as_ref().map(|c| SenderView {
                name: c.sender_name.clone(),
                account_number: c.sender_account_number.clone(),
                session_id: c.session_id.clone(),
                account_deactivated: c.account_deactivated,
            }),
            checkout_url: secrets.as_ref().map(|s| s.checkout_url.to_string()),
            client_secret: secrets.as_ref().map(|s| s.client_secret.to_string()),
        }
    }

    /// The public PaymentIntent object, as JSON.
    pub fn to_api(&self, secrets: Option<CreatedSecrets<'_>>) -> Value {
        serde_json::to_value(self.view(secrets)).expect("a payment intent view serializes")
    }
}

/// The typed views render exactly what the `json!` renderings they replaced
/// did.
#[cfg(test)]
mod view_tests {
    use super::*;

    use crate::payment_intent::machine::new_attempt;

    use chrono::TimeZone;
    use serde_json::json;

    use crate::money::default_pricing;

    fn old_intent_json(i: &PaymentIntent, secrets: Option<CreatedSecrets<'_>>) -> Value {
        let (fee, vat, total) = i.charge_on(i.channel.unwrap_or(Channel::Card));
        let mut v = json!({
            "id": i.id,
            "object": "payment_intent",
            "livemode": i.mode.livemode(),
            "amount": i.amount,
            "currency": i.currency,
            "status": i.status,
            "reference": i.reference,
            "description": i.description,
            "customer_email": i.customer_email,
            "brand": i.brand,
            "customer": i.customer,
            "payment_link": i.payment_link,
            "metadata": i.metadata,
            "fee_bearer": i.fee_bearer,
            "amount_charged": {"amount": i.amount, "fee": fee, "vat": vat, "total": total},
            "fees": i.fees(),
            "failure_code": i.failure_code,
            "created_at": i.created_at,
            "updated_at": i.updated_at,
            "paid_at": i.paid_at,
            "canceled_at": i.canceled_at,
            "return_url": i.return_url,
            "bank_transfer": i.bank_transfer,
            "next_action": i.next_action,
            "virtual_account": i.bank_credit.as_ref().map(|c| c.virtual_account),
            "sender": i.bank_credit.as_ref().map(|c| json!({
                "name": c.sender_name, "account_number": c.sender_account_number,
                "session_id": c.session_id, "account_deactivated": c.account_deactivated,
            })),
        });
        if let Some(s) = secrets {
            let o = v.as_object_mut().expect("object");
            o.insert("checkout_url".into(), Value::from(s.checkout_url));
            o.insert("client_secret".into(), Value::from(s.client_secret));
        }
        v
    }

    fn old_attempt_json(a: &ChargeAttempt) -> Value {
        json!({
            "id": a.id,
            "object": "charge_attempt",
            "livemode": a.mode.livemode(),
            "payment_intent": a.payment_intent,
            "channel": a.channel.as_str(),
            "status": a.status,
            "card": a.card,
            "failure_code": a.failure_code,
            "created_at": a.created_at,
        })
    }

    fn at(min: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 3, 3, 9, 0, 0).unwrap()
            + Duration::minutes(min)
            + Duration::microseconds(123_456)
    }

    fn bare(currency: Currency, bearer: FeeBearer) -> PaymentIntent {
        PaymentIntent {
            id: Uuid::new_v4(),
            merchant: Uuid::new_v4(),
            mode: Mode::Test,
            seq: 1,
            amount: 1_000_000,
            currency,
            status: Status::Created,
            reference: None,
            description: None,
            customer_email: None,
            brand: Uuid::new_v4(),
            customer: None,
            payment_link: None,
            metadata: Map::new(),
            fee_bearer: bearer,
            pricing: default_pricing()[&currency].clone(),
            channel: None,
            failure_code: None,
            created_at: at(0),
            updated_at: at(0),
            paid_at: None,
            canceled_at: None,
            return_url: None,
            client_secret_hash: "h".into(),
            client_secret: None,
            checkout_code: "c".into(),
            bank_transfer: None,
            next_action: None,
            abandon_due: None,
            attempts: 0,
            pending_attempt: None,
            failed_card_attempts: 0,
            mandate: None,
            bank_credit: None,
            invoice: None,
            version: 1,
        }
    }

    fn full() -> PaymentIntent {
        let mut i = bare(Currency::NGN, FeeBearer::Customer);
        i.mode = Mode::Live;
        i.status = Status::Successful;
        i.reference = Some("order-1".into());
        i.description = Some("two chairs".into());
        i.customer_email = Some("ada@example.com".into());
        i.customer = Some(Uuid::new_v4());
        i.payment_link = Some(Uuid::new_v4());
        i.metadata = json!({"order": "A-1", "n": 3, "gift": true})
            .as_object()
            .unwrap()
            .clone();
        i.channel = Some(Channel::BankTransfer);
        i.failure_code = Some("card_declined".into());
        i.updated_at = at(5);
        i.paid_at = Some(at(5));
        i.canceled_at = Some(at(6));
        i.return_url = Some("https://shop.example/done".into());
        i.bank_transfer = Some(BankTransferAccount {
            account_number: "9000000001".into(),
            bank_name: "Kobo Sandbox Bank".into(),
            account_name: "KOBO / SHOP".into(),
            amount: 1_010_750,
            expires_at: at(30),
        });
        i.next_action = Some(NextAction {
            action_type: "otp".into(),
            message: Some("Enter your PIN".into()),
            input: Some("pin".into()),
            url: None,
        });
        i
    }

    #[test]
    fn payment_intent_json_is_unchanged() {
        let mut credited = full();
        credited.bank_credit = Some(BankCredit {
            virtual_account: Uuid::new_v4(),
            session_id: "000013250303090000123456789012".into(),
            sender_name: Some("BOLA ADE".into()),
            sender_account_number: None,
            account_deactivated: true,
        });
        let mut intents = vec![full(), credited];
        for c in Currency::ALL {
            for b in [FeeBearer::Merchant, FeeBearer::Customer] {
                intents.push(bare(c, b));
            }
        }
        for s in Status::ALL {
            let mut i = full();
            i.status = s;
            intents.push(i);
        }
        for i in &intents {
            assert_eq!(i.to_api(None), old_intent_json(i, None));
            let secrets = || CreatedSecrets {
                checkout_url: "http://127.0.0.1:8080/c/abc",
                client_secret: "pi_x_secret_y",
            };
            assert_eq!(
                i.to_api(Some(secrets())),
                old_intent_json(i, Some(secrets()))
            );
        }
        assert_eq!(
            full().amount_charged(),
            old_intent_json(&full(), None)["amount_charged"]
        );
    }

    #[test]
    fn charge_attempt_json_is_unchanged() {
        let intent = full();
        let statuses = [
            AttemptStatus::Pending,
            AttemptStatus::Successful,
            AttemptStatus::Failed,
            AttemptStatus::Canceled,
        ];
        for channel in [Channel::Card, Channel::BankTransfer, Channel::DirectDebit] {
            for status in statuses {
                let id = Uuid::new_v4();
                let mut a = new_attempt(&intent, id, channel, status, None, Some(5), at(1));
                assert_eq!(a.to_api(), old_attempt_json(&a));
                a.card = Some(CardSummary {
                    last4: "0409".into(),
                    brand: "visa".into(),
                });
                a.failure_code = Some("incorrect_otp".into());
                a.mode = Mode::Live;
                assert_eq!(a.to_api(), old_attempt_json(&a));
            }
        }
    }
}
