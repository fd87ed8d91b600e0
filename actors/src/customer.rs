//! Customers, minimal and Stripe-shaped: `{id, object: "customer",
//! livemode, email, name, created_at}`. For now a customer is made when a
//! mandate is created for an email (`customer_email`) rather than for an
//! existing customer; `GET /v1/customers/{id}` reads one. The customers
//! resource proper (create, update, list) comes with its own issue.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use kobo_storage::{Batch, Table};

use crate::env::Env;
use crate::error::{DomainError, DomainResult};
use crate::ids::{scope_key, Mode};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Customer {
    pub id: Uuid,
    pub merchant: Uuid,
    pub mode: Mode,
    pub seq: u64,
    pub email: Option<String>,
    pub name: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// The `object` value of a customer.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum CustomerObject {
    #[serde(rename = "customer")]
    Customer,
}

/// The public Customer object.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Customer)]
pub struct CustomerView {
    pub id: Uuid,
    #[schema(inline)]
    pub object: CustomerObject,
    pub livemode: bool,
    #[schema(required = true)]
    pub email: Option<String>,
    #[schema(required = true)]
    pub name: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl Customer {
    pub fn view(&self) -> CustomerView {
        CustomerView {
            id: self.id,
            object: CustomerObject::Customer,
            livemode: self.mode.livemode(),
            email: self.email.clone(),
            name: self.name.clone(),
            created_at: self.created_at,
        }
    }

    pub fn to_api(&self) -> serde_json::Value {
        serde_json::to_value(self.view()).expect("a customer view serializes")
    }

    /// Adds the customer and its list row to `batch`.
    pub fn add_to(&self, batch: &mut Batch) {
        batch
            .put(Table::Customers, self.id.as_bytes().to_vec(), self)
            .put_raw(
                Table::CustomerIndex,
                scope_key(self.merchant, self.mode).u64(self.seq).build(),
                self.id.as_bytes().to_vec(),
            )
            .note_seq(self.seq);
    }
}

/// The merchant's customer `id` in `mode` (404 otherwise).
pub fn load(kobo: &Env, merchant: Uuid, mode: Mode, id: Uuid) -> DomainResult<Customer> {
    let c: Option<Customer> = kobo
        .store
        .read()?
        .get_decoded(Table::Customers, id.as_bytes())?;
    match c {
        Some(c) if c.merchant == merchant && c.mode == mode => Ok(c),
        _ => Err(DomainError::not_found("customer", id)),
    }
}
