//! The customer directory: one actor per merchant and mode, the only writer
//! of that scope's customers. It takes one command at a time to
//! completion, so:
//!
//! - **find-or-create is race-free**: a create whose email (any case) a
//!   live customer already has answers that customer unchanged; twenty
//!   concurrent creates of one email make exactly one customer. The email
//!   row is also written with a `require_absent` precondition, so a second
//!   writer (there is none) could never make a duplicate either;
//! - an update to another customer's email is refused (409
//!   `customer_exists`);
//! - a delete checks what uses the customer ([`super::deps::InUse`]) while
//!   no link can be made: objects that link to a customer (mandates,
//!   virtual accounts) commit through [`CustomerAction::Link`] here.
//!
//! Every command that answers a customer saves the idempotent response in
//! its own batch.

use std::fmt;
use std::sync::Arc;

use actix::prelude::*;
use uuid::Uuid;

use kobo_storage::{Batch, CommitError, Table};

use super::deps::CustomerDeps;
use super::identity::IdentityRequest;
use super::{load, Customer, CustomerPatch, Identity, NewCustomer};
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::idempotency::IdempotencySave;
use crate::ids::{new_id, Mode};
use crate::registry::{run_once, Activation, Registry, VirtualActor};
use crate::timer::{Timer, TimerKind};

/// The customer directories: the handle the resources that make or link
/// customers are given.
pub type Customers = Arc<Registry<CustomerDirectory>>;

type Scope = (Uuid, Mode);

pub struct CustomerDirectory {
    activation: Activation<Self>,
}

/// Which customer a link is for: an existing one, or the customer of an
/// email (found or made in the link's own batch).
#[derive(Debug, Clone)]
pub enum LinkTo {
    Id(Uuid),
    Email { email: String, name: Option<String> },
}

/// Makes the batch of an object that links to a customer.
pub type BuildFn = dyn Fn(&Customer) -> DomainResult<Batch> + Send + Sync;

/// Builds the batch of the object that links to the customer it is given
/// (checks included: an error refuses the link).
#[derive(Clone)]
pub struct LinkBuild(pub Arc<BuildFn>);

impl fmt::Debug for LinkBuild {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LinkBuild(..)")
    }
}

#[derive(Debug, Clone)]
pub enum CustomerAction {
    /// `POST /v1/customers`: a new customer, or the live customer of the
    /// email, unchanged.
    Create(NewCustomer),
    /// The customer of `email`, found or made (payment intents).
    FindOrCreate {
        email: String,
        brand: Option<Uuid>,
    },
    Update {
        id: Uuid,
        patch: CustomerPatch,
    },
    Delete {
        id: Uuid,
    },
    VerifyIdentity {
        id: Uuid,
        request: IdentityRequest,
    },
    /// The identity check timer fired.
    IdentityTimer {
        id: Uuid,
        timer_key: Vec<u8>,
    },
    /// Commits the batch `build` makes for the customer (a live customer
    /// of this scope, 404 with `param: customer` otherwise).
    Link {
        to: LinkTo,
        build: LinkBuild,
    },
}

#[derive(Debug)]
pub enum Outcome {
    /// A new customer.
    Created(Customer),
    /// The live customer of that email, unchanged.
    Existing(Customer),
    /// The customer after an update or an identity request.
    Changed(Customer),
    Deleted(Customer),
    /// The link's customer and its commit (a precondition of the built
    /// batch may refuse it).
    Linked {
        customer: Customer,
        result: Result<(), CommitError>,
    },
    Done,
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Outcome>")]
pub struct CustomerMessage {
    pub action: CustomerAction,
    pub idem: Option<IdempotencySave>,
}

impl Actor for CustomerDirectory {
    type Context = Context<Self>;
}

impl VirtualActor for CustomerDirectory {
    type Key = Scope;
    type Deps = CustomerDeps;
    const KIND: &'static str = "customer_directory";
    fn activate(activation: Activation<Self>) -> Self {
        CustomerDirectory { activation }
    }
    fn activation(&self) -> &Activation<Self> {
        &self.activation
    }
}

impl Handler<CustomerMessage> for CustomerDirectory {
    type Result = AtomicResponse<Self, DomainResult<Outcome>>;
    fn handle(&mut self, msg: CustomerMessage, _: &mut Context<Self>) -> Self::Result {
        self.activation.touch();
        let k = self.activation.deps.clone();
        let scope = self.activation.key;
        run_once(self, async move { process(&k, scope, msg).await })
    }
}

async fn process(k: &CustomerDeps, scope: Scope, msg: CustomerMessage) -> DomainResult<Outcome> {
    let idem = msg.idem.as_ref();
    match msg.action {
        CustomerAction::Create(new) => create(k, scope, new, idem).await,
        CustomerAction::FindOrCreate { email, brand } => {
            let new = NewCustomer {
                email: Some(email),
                brand,
                ..Default::default()
            };
            create(k, scope, new, None).await
        }
        CustomerAction::Update { id, patch } => update(k, scope, id, patch, idem).await,
        CustomerAction::Delete { id } => delete(k, scope, id, idem).await,
        CustomerAction::VerifyIdentity { id, request } => {
            super::service::verify_identity(k, scope, id, request, idem).await
        }
        CustomerAction::IdentityTimer { id, timer_key } => {
            super::service::identity_timer(k, scope, id, timer_key).await
        }
        CustomerAction::Link { to, build } => link(k, scope, to, build).await,
    }
}

/// Commits `batch` with the saved response (`status`, the customer's view
/// or `body`).
pub(super) async fn commit(
    k: &CustomerDeps,
    mut batch: Batch,
    idem: Option<&IdempotencySave>,
    status: u16,
    body: &serde_json::Value,
) -> DomainResult<()> {
    if let Some(idem) = idem {
        idem.add_to(&mut batch, status, &body.to_string(), k.clock.now());
    }
    if batch.is_empty() {
        return Ok(());
    }
    match k.writer.commit(batch).await {
        Ok(()) => Ok(()),
        Err(CommitError::Conflict { .. }) => Err(DomainError::state(
            ErrorCode::CustomerExists,
            "another customer of this mode has this email",
        )),
        Err(e) => Err(DomainError::internal(e.to_string())),
    }
}

/// The live customer whose email is `email` (any case).
pub fn by_email(k: &crate::env::Env, scope: Scope, email: &str) -> DomainResult<Option<Customer>> {
    let read = k.store.read()?;
    let Some(id) = read.get(
        Table::CustomerEmails,
        &super::email_key(scope.0, scope.1, email),
    )?
    else {
        return Ok(None);
    };
    let id = Uuid::from_slice(&id).map_err(|_| DomainError::internal("bad customer email row"))?;
    match load(k, scope.0, scope.1, id) {
        Ok(c) => Ok(Some(c)),
        Err(e) if e.code == ErrorCode::ResourceMissing => Ok(None),
        Err(e) => Err(e),
    }
}

/// A new customer of `scope` (not yet saved); without a brand, the
/// merchant's default brand.
fn new_customer(
    k: &CustomerDeps,
    (merchant, mode): Scope,
    new: NewCustomer,
) -> DomainResult<Customer> {
    let now = k.clock.now();
    let brand = match new.brand {
        Some(b) => b,
        None => crate::admin::load_merchant(k, merchant)?
            .ok_or_else(|| DomainError::internal("a customer of an unknown merchant"))?
            .default_brand(mode),
    };
    Ok(Customer {
        id: new_id(now),
        merchant,
        mode,
        seq: k.seq.next(),
        email: new.email,
        name: new.name,
        created_at: now,
        phone: new.phone,
        brand: Some(brand),
        metadata: new.metadata,
        risk_action: new.risk_action.unwrap_or_default(),
        identity: Identity::default(),
        updated_at: Some(now),
        deleted_at: None,
    })
}

async fn create(
    k: &CustomerDeps,
    scope: Scope,
    new: NewCustomer,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Outcome> {
    if let Some(email) = &new.email {
        if let Some(c) = by_email(k, scope, email)? {
            commit(k, Batch::new(), idem, 200, &c.to_api()).await?;
            return Ok(Outcome::Existing(c));
        }
    }
    let c = new_customer(k, scope, new)?;
    let mut batch = Batch::new();
    c.add_to(&mut batch);
    commit(k, batch, idem, 201, &c.to_api()).await?;
    Ok(Outcome::Created(c))
}

async fn update(
    k: &CustomerDeps,
    scope: Scope,
    id: Uuid,
    patch: CustomerPatch,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Outcome> {
    let c = load(k, scope.0, scope.1, id)?;
    let after = patch.apply(&c, k.clock.now())?;
    if let Some(email) = after.email.as_deref() {
        if by_email(k, scope, email)?.is_some_and(|other| other.id != id) {
            return Err(DomainError::state(
                ErrorCode::CustomerExists,
                "another customer of this mode has this email",
            ));
        }
    }
    let mut batch = Batch::new();
    if after != c {
        c.update_in(&after, &mut batch);
    }
    commit(k, batch, idem, 200, &after.to_api()).await?;
    Ok(Outcome::Changed(after))
}

async fn delete(
    k: &CustomerDeps,
    scope: Scope,
    id: Uuid,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Outcome> {
    let c = load(k, scope.0, scope.1, id)?;
    for in_use in &k.in_use {
        if let Some(what) = in_use(&k.env, scope.0, scope.1, id)? {
            return Err(DomainError::state(
                ErrorCode::CustomerInUse,
                format!("customer {id} has {what}; it cannot be deleted"),
            ));
        }
    }
    let now = k.clock.now();
    let mut after = c.clone();
    after.deleted_at = Some(now);
    after.updated_at = Some(now);
    after.identity.check_due = None;
    let mut batch = Batch::new();
    if let Some(due) = c.identity.check_due {
        batch.delete(
            Table::Timers,
            Timer::key(due, TimerKind::CustomerIdentityCheck, id),
        );
    }
    c.delete_in(&after, &mut batch);
    let body = serde_json::to_value(after.deleted_view()).expect("a deleted view serializes");
    commit(k, batch, idem, 200, &body).await?;
    Ok(Outcome::Deleted(after))
}

async fn link(
    k: &CustomerDeps,
    scope: Scope,
    to: LinkTo,
    build: LinkBuild,
) -> DomainResult<Outcome> {
    let (customer, mut batch) = match to {
        LinkTo::Id(id) => (
            load(k, scope.0, scope.1, id).map_err(|e| e.with_param("customer"))?,
            Batch::new(),
        ),
        LinkTo::Email { email, name } => match by_email(k, scope, &email)? {
            Some(c) => (c, Batch::new()),
            None => {
                let new = NewCustomer {
                    email: Some(email),
                    name,
                    ..Default::default()
                };
                let c = new_customer(k, scope, new)?;
                let mut b = Batch::new();
                c.add_to(&mut b);
                (c, b)
            }
        },
    };
    batch.append((build.0)(&customer)?);
    let result = match k.writer.commit(batch).await {
        Err(CommitError::Closed) => return Err(DomainError::internal("the store writer stopped")),
        r => r,
    };
    Ok(Outcome::Linked { customer, result })
}

/// Sends `action` to the directory of `scope`.
pub async fn send(
    customers: &Customers,
    scope: Scope,
    action: CustomerAction,
    idem: Option<IdempotencySave>,
) -> DomainResult<Outcome> {
    customers
        .send(scope, CustomerMessage { action, idem })
        .await?
}
