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
//!   virtual accounts) commit through a [`Link`] here.
//!
//! Each message answers its own type: a customer command
//! ([`CustomerMessage`]) and a delete ([`DeleteCustomer`]) the typed
//! [`Answer`] of their view (`Created`, `Updated`, or `Existing` for a
//! create that found the email's customer), saved with their change
//! ([`Answer::save`]; unsaved when nothing changed, for the idempotency
//! layer to save); a link ([`Link`]) what its builder made (the linked
//! object's saved `Answer`), with the commit's result.

use std::sync::Arc;

use actix::prelude::*;
use uuid::Uuid;

use kobo_storage::{Batch, CommitError, Table};

use super::deps::CustomerDeps;
use super::identity::IdentityRequest;
use super::steps::commit_answer;
use super::{
    load, Customer, CustomerPatch, CustomerView, DeletedCustomerView, Identity, NewCustomer,
};
use crate::error::{DomainError, DomainResult, ErrorCode};
use crate::idempotency::{Answer, IdempotencySave, Outcome};
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

/// A command that answers a customer.
#[derive(Debug, Clone)]
pub enum CustomerAction {
    /// `POST /v1/customers`: a new customer (`Created`), or the live
    /// customer of the email, unchanged (`Existing`).
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
    VerifyIdentity {
        id: Uuid,
        request: IdentityRequest,
    },
}

#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Answer<CustomerView>>")]
pub struct CustomerMessage {
    pub action: CustomerAction,
    pub idem: Option<IdempotencySave>,
}

/// Deletes a customer (409 `customer_in_use` while something uses it).
#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<Answer<DeletedCustomerView>>")]
pub struct DeleteCustomer {
    pub id: Uuid,
    pub idem: Option<IdempotencySave>,
}

/// The identity check timer fired.
#[derive(Debug, Clone, Message)]
#[rtype(result = "DomainResult<()>")]
pub struct IdentityTimer {
    pub id: Uuid,
    pub timer_key: Vec<u8>,
}

/// Makes the batch of an object that links to the customer it is given,
/// with what the link answers (the object's [`Answer`], saved in that
/// batch); its checks included: an error refuses the link.
pub type BuildFn<T> = dyn Fn(&Customer) -> DomainResult<(Batch, T)> + Send + Sync;

/// Commits the batch `build` makes for the customer (a live customer of
/// this scope, 404 with `param: customer` otherwise).
pub struct Link<T> {
    pub to: LinkTo,
    pub build: Arc<BuildFn<T>>,
}

impl<T> Clone for Link<T> {
    fn clone(&self) -> Self {
        Link {
            to: self.to.clone(),
            build: self.build.clone(),
        }
    }
}

impl<T: 'static> Message for Link<T> {
    type Result = DomainResult<Linked<T>>;
}

/// A link's customer, what its builder made, and the commit (a
/// precondition of the built batch may refuse it).
#[derive(Debug)]
pub struct Linked<T> {
    pub customer: Customer,
    pub built: T,
    pub result: Result<(), CommitError>,
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

impl CustomerDirectory {
    /// Runs `work` (given the handles and the scope) as this message.
    fn run<T, F, Fut>(&mut self, work: F) -> AtomicResponse<Self, DomainResult<T>>
    where
        T: 'static,
        F: FnOnce(Arc<CustomerDeps>, Scope) -> Fut,
        Fut: std::future::Future<Output = DomainResult<T>> + 'static,
    {
        self.activation.touch();
        let work = work(self.activation.deps.clone(), self.activation.key);
        run_once(self, work)
    }
}

impl Handler<CustomerMessage> for CustomerDirectory {
    type Result = AtomicResponse<Self, DomainResult<Answer<CustomerView>>>;
    fn handle(&mut self, msg: CustomerMessage, _: &mut Context<Self>) -> Self::Result {
        self.run(|k, scope| async move { process(&k, scope, msg).await })
    }
}

impl Handler<DeleteCustomer> for CustomerDirectory {
    type Result = AtomicResponse<Self, DomainResult<Answer<DeletedCustomerView>>>;
    fn handle(&mut self, msg: DeleteCustomer, _: &mut Context<Self>) -> Self::Result {
        self.run(|k, scope| async move { delete(&k, scope, msg.id, msg.idem.as_ref()).await })
    }
}

impl Handler<IdentityTimer> for CustomerDirectory {
    type Result = AtomicResponse<Self, DomainResult<()>>;
    fn handle(&mut self, msg: IdentityTimer, _: &mut Context<Self>) -> Self::Result {
        self.run(|k, scope| async move {
            super::steps::identity_timer(&k, scope, msg.id, msg.timer_key).await
        })
    }
}

impl<T: Send + 'static> Handler<Link<T>> for CustomerDirectory {
    type Result = AtomicResponse<Self, DomainResult<Linked<T>>>;
    fn handle(&mut self, msg: Link<T>, _: &mut Context<Self>) -> Self::Result {
        self.run(|k, scope| async move { link(&k, scope, msg).await })
    }
}

async fn process(
    k: &CustomerDeps,
    scope: Scope,
    msg: CustomerMessage,
) -> DomainResult<Answer<CustomerView>> {
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
        CustomerAction::VerifyIdentity { id, request } => {
            super::steps::verify_identity(k, scope, id, request, idem).await
        }
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

/// A new customer, or the live customer of the email unchanged (nothing
/// to commit: the idempotency layer saves that answer).
async fn create(
    k: &CustomerDeps,
    scope: Scope,
    new: NewCustomer,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<CustomerView>> {
    if let Some(email) = &new.email {
        if let Some(c) = by_email(k, scope, email)? {
            return Ok(Answer::unsaved(Outcome::Existing(c.view())));
        }
    }
    let c = new_customer(k, scope, new)?;
    let mut batch = Batch::new();
    batch.owned_by(scope.0.as_bytes());
    c.add_to(&mut batch);
    commit_answer(k, Outcome::Created(c.view()), idem, batch).await
}

async fn update(
    k: &CustomerDeps,
    scope: Scope,
    id: Uuid,
    patch: CustomerPatch,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<CustomerView>> {
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
    batch.owned_by(scope.0.as_bytes());
    if after != c {
        c.update_in(&after, &mut batch);
    }
    commit_answer(k, Outcome::Updated(after.view()), idem, batch).await
}

async fn delete(
    k: &CustomerDeps,
    scope: Scope,
    id: Uuid,
    idem: Option<&IdempotencySave>,
) -> DomainResult<Answer<DeletedCustomerView>> {
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
    batch.owned_by(scope.0.as_bytes());
    if let Some(due) = c.identity.check_due {
        batch.delete(
            Table::Timers,
            Timer::key(due, TimerKind::CustomerIdentityCheck, id),
        );
    }
    c.delete_in(&after, &mut batch);
    commit_answer(k, Outcome::Updated(after.deleted_view()), idem, batch).await
}

async fn link<T>(k: &CustomerDeps, scope: Scope, msg: Link<T>) -> DomainResult<Linked<T>> {
    let (customer, mut batch) = match msg.to {
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
                b.owned_by(scope.0.as_bytes());
                c.add_to(&mut b);
                (c, b)
            }
        },
    };
    batch.owned_by(scope.0.as_bytes());
    let (built_batch, built) = (msg.build)(&customer)?;
    batch.append(built_batch);
    let result = match k.writer.commit(batch).await {
        Err(e @ (CommitError::Closed | CommitError::NotOwner { .. })) => return Err(e.into()),
        r => r,
    };
    Ok(Linked {
        customer,
        built,
        result,
    })
}

/// Sends a command to the directory of `scope`.
pub async fn send(
    customers: &Customers,
    scope: Scope,
    action: CustomerAction,
    idem: Option<IdempotencySave>,
) -> DomainResult<Answer<CustomerView>> {
    customers
        .send(scope, CustomerMessage { action, idem })
        .await?
}

/// Commits, through the directory of `scope`, the batch `build` makes for
/// the customer `to` names.
pub async fn link_to<T: Send + 'static>(
    customers: &Customers,
    scope: Scope,
    to: LinkTo,
    build: Arc<BuildFn<T>>,
) -> DomainResult<Linked<T>> {
    customers.send(scope, Link { to, build }).await?
}
