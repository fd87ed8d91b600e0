//! Virtual actors: a registry per kind activates an actor on its first message
//! and passivates it after it has been idle, so memory stays bounded however
//! many objects the store holds.
//!
//! Invariants:
//! - At most one live activation per key. Lookups, activation and
//!   passivation happen under the registry's lock; an actor is removed from
//!   the registry before it stops, and only while no message is queued for it
//!   (the queued count is raised under the same lock by every sender). So a
//!   message is never delivered to a stopping actor; if one ever meets a
//!   closed mailbox anyway, the registry forgets that activation and retries
//!   on a fresh one (the message was not processed).
//! - Mailboxes are bounded: a send to an actor with `mailbox_capacity`
//!   messages already queued is refused with `overloaded` (HTTP 503 +
//!   Retry-After) instead of queueing without limit.
//! - The registry lock guards only the address map, never domain state.
//! - [`Registry::evict_all`] (a cluster node lost a shard) makes every
//!   activation stale: an idle one leaves the map at once (the next
//!   message activates a fresh one from the store) and stops at its next
//!   idle check; a busy one keeps its messages (never two activations of a
//!   key) and leaves at its first idle check with nothing queued. An object
//!   actor reloads its object from the store before any command it handles
//!   while stale.
//! - An actor checks for idleness when its idle time would be up (counted
//!   from its last message), not on a fixed tick: at most its idle time
//!   after it last worked, an actor that can passivate leaves the map.
//! - A registry is built at assembly with the handles its actors receive
//!   (`VirtualActor::Deps`); an actor reaches nothing else.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

// tokio's clock, which actix's timers run on (and tests can pause).
use tokio::time::Instant;

use actix::{Actor, Addr, AsyncContext, Context, Handler, MailboxError, Message};
use parking_lot::Mutex;
use serde::Serialize;

use crate::error::{DomainError, DomainResult};

/// How soon an actor looks again when it could not passivate at its idle
/// deadline (work the store has not confirmed, or a message queued).
pub const IDLE_RECHECK: Duration = Duration::from_secs(1);

pub trait VirtualActor: Actor<Context = Context<Self>> {
    type Key: Copy + Eq + Hash + Send + Sync + fmt::Debug + Unpin + 'static;
    /// The handles every activation of this kind is given.
    type Deps: Send + Sync + 'static;
    const KIND: &'static str;
    fn activate(activation: Activation<Self>) -> Self;
    fn activation(&self) -> &Activation<Self>;
    /// False while the actor has work the store has not confirmed.
    fn can_passivate(&self) -> bool {
        true
    }
}

/// What every activation knows about itself, and the handles it was given.
pub struct Activation<A: VirtualActor> {
    pub key: A::Key,
    pub generation: u64,
    pub deps: Arc<A::Deps>,
    /// The registry's eviction epoch when this activation started.
    born: u64,
    queued: Arc<AtomicUsize>,
    stats: Arc<KindStats>,
    last_active: std::cell::Cell<Instant>,
    /// Idle this long, the actor passivates.
    idle: Duration,
    /// The registry's address map, to leave it when passivating.
    slots: Arc<Slots<A>>,
}

impl<A: VirtualActor> Activation<A> {
    /// Call at the start of every message.
    pub fn touch(&mut self) {
        self.queued.fetch_sub(1, Ordering::AcqRel);
        self.stats.messages.fetch_add(1, Ordering::Relaxed);
        self.last_active.set(Instant::now());
    }
    /// True once [`Registry::evict_all`] ran after this activation
    /// started: what it keeps in memory may no longer be the store's.
    pub fn is_stale(&self) -> bool {
        self.stats.epoch.load(Ordering::Acquire) != self.born
    }
    /// Call when work finishes (so idleness counts from then).
    pub fn rest(&self) {
        self.last_active.set(Instant::now());
    }
    /// An actor recovered from a panic by dropping its memory and reloading
    /// its last durable snapshot; `panic` is the panic's payload (its
    /// message is kept as the kind's last panic message).
    pub fn record_restart(&self, panic: &(dyn std::any::Any + Send)) {
        self.stats.restarts.fetch_add(1, Ordering::Relaxed);
        *self.stats.last_panic.lock() = Some(panic_message(panic));
    }
}

/// Schedules an actor's next idle check `after` from now. Each check
/// either passivates the actor or schedules the next one at the moment it
/// would have been idle for its whole `idle` time, so an actor wakes about
/// once per idle period (a timer tick per live actor per second was more
/// work than the requests themselves under load: docs/performance.md).
fn watch_idle<A: VirtualActor>(ctx: &mut Context<A>, after: Duration) {
    ctx.run_later(after, |act: &mut A, ctx: &mut Context<A>| {
        let a = act.activation();
        let retired = a
            .slots
            .lock()
            .get(&a.key)
            .is_none_or(|s| s.generation != a.generation);
        if retired && act.can_passivate() {
            // Evicted while idle: a fresh activation may already serve the key.
            actix::ActorContext::stop(ctx);
            return;
        }
        let idle_for = a.last_active.get().elapsed();
        if idle_for < a.idle && !a.is_stale() {
            let left = a.idle - idle_for;
            watch_idle(ctx, left);
            return;
        }
        if act.can_passivate() && try_passivate(&a.slots, &a.stats, a.key, a.generation) {
            actix::ActorContext::stop(ctx);
            return;
        }
        watch_idle(ctx, IDLE_RECHECK);
    });
}

type Slots<A> = Mutex<HashMap<<A as VirtualActor>::Key, Slot<A>>>;

/// Removes the activation if it is still `generation` and nothing is
/// queued for it. The caller stops the actor when this returns true.
fn try_passivate<A: VirtualActor>(
    slots: &Slots<A>,
    stats: &KindStats,
    key: A::Key,
    generation: u64,
) -> bool {
    let mut slots = slots.lock();
    match slots.get(&key) {
        Some(slot) if slot.generation == generation && slot.queued.load(Ordering::Acquire) == 0 => {
            slots.remove(&key);
            stats.passivations.fetch_add(1, Ordering::Relaxed);
            true
        }
        _ => false,
    }
}

#[derive(Default)]
pub struct KindStats {
    activations: AtomicU64,
    passivations: AtomicU64,
    restarts: AtomicU64,
    messages: AtomicU64,
    /// The message of the latest panic that restarted an actor of the kind.
    last_panic: Mutex<Option<String>>,
    /// Raised by every [`Registry::evict_all`].
    epoch: AtomicU64,
}

/// The longest panic message kept (longer ones are cut at a char boundary).
pub const PANIC_MESSAGE_MAX: usize = 500;

/// The text of a panic payload (`panic!("...")` carries a `&str` or a
/// `String`), cut to [`PANIC_MESSAGE_MAX`] bytes.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.as_str()
    } else {
        "(a panic without a message)"
    };
    let mut end = text.len().min(PANIC_MESSAGE_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

struct Slot<A: Actor> {
    addr: Addr<A>,
    generation: u64,
    /// The eviction epoch it was activated in.
    epoch: u64,
    queued: Arc<AtomicUsize>,
    /// Messages sent and not yet answered (queued or being handled).
    in_flight: Arc<AtomicUsize>,
}

/// Counts a message as in flight until its answer (or its abandonment).
struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A leased address: the actor, its generation, its queue count, and the
/// in-flight mark held until the answer.
type Lease<A> = (Addr<A>, u64, Arc<AtomicUsize>, InFlight);

pub struct Registry<A: VirtualActor> {
    slots: Arc<Slots<A>>,
    next_generation: AtomicU64,
    stats: Arc<KindStats>,
    mailbox_capacity: usize,
    idle: Duration,
    deps: Arc<A::Deps>,
}

/// One kind's health, for `/admin/v1/actors` and `/metrics`.
#[derive(Debug, Clone, Serialize)]
pub struct KindSnapshot {
    pub kind: &'static str,
    pub live: usize,
    pub mailbox_depth: usize,
    pub mailbox_depth_max: usize,
    pub mailbox_capacity: usize,
    pub activations: u64,
    pub passivations: u64,
    pub restarts: u64,
    pub messages: u64,
    /// The message of the latest panic that restarted one of them.
    pub last_panic: Option<String>,
}

impl<A: VirtualActor> Registry<A> {
    /// A registry whose actors are given `deps`, passivate after `idle`
    /// and queue at most `mailbox_capacity` messages.
    pub fn new(deps: Arc<A::Deps>, mailbox_capacity: usize, idle: Duration) -> Self {
        Registry {
            slots: Arc::new(Mutex::new(HashMap::new())),
            next_generation: AtomicU64::new(1),
            stats: Arc::new(KindStats::default()),
            mailbox_capacity,
            idle,
            deps,
        }
    }

    /// A registry whose actors' handles include (weakly) this registry
    /// itself: for an actor that delivers later answers to its own kind.
    pub fn new_cyclic(
        mailbox_capacity: usize,
        idle: Duration,
        deps: impl FnOnce(std::sync::Weak<Registry<A>>) -> A::Deps,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Registry::new(Arc::new(deps(me.clone())), mailbox_capacity, idle))
    }

    /// The handles this kind's actors are given (its services use them too).
    pub fn deps(&self) -> &Arc<A::Deps> {
        &self.deps
    }

    /// Leases the actor for `key` (activating it if needed). With `busy`,
    /// an actor that has any message in flight is refused with that error
    /// instead of queueing behind it.
    fn lease(&self, key: A::Key, busy: Option<fn() -> DomainError>) -> DomainResult<Lease<A>> {
        let mut slots = self.slots.lock();
        let epoch = self.stats.epoch.load(Ordering::Acquire);
        if let Some(slot) = slots.get(&key) {
            let retire = slot.epoch != epoch
                && slot.queued.load(Ordering::Acquire) == 0
                && slot.in_flight.load(Ordering::Acquire) == 0;
            if slot.addr.connected() && !retire {
                if let Some(busy) = busy {
                    if slot.in_flight.load(Ordering::Acquire) > 0 {
                        return Err(busy());
                    }
                }
                if slot.queued.load(Ordering::Acquire) >= self.mailbox_capacity {
                    return Err(DomainError::overloaded(A::KIND));
                }
                slot.queued.fetch_add(1, Ordering::AcqRel);
                slot.in_flight.fetch_add(1, Ordering::AcqRel);
                return Ok((
                    slot.addr.clone(),
                    slot.generation,
                    slot.queued.clone(),
                    InFlight(slot.in_flight.clone()),
                ));
            }
            slots.remove(&key);
        }
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        let queued = Arc::new(AtomicUsize::new(1));
        let in_flight = Arc::new(AtomicUsize::new(1));
        let activation = Activation {
            key,
            generation,
            deps: self.deps.clone(),
            born: epoch,
            queued: queued.clone(),
            stats: self.stats.clone(),
            last_active: std::cell::Cell::new(Instant::now()),
            idle: self.idle,
            slots: self.slots.clone(),
        };
        let capacity = self.mailbox_capacity;
        let addr = A::create(move |ctx| {
            ctx.set_mailbox_capacity(capacity + 1);
            watch_idle(ctx, activation.idle);
            A::activate(activation)
        });
        self.stats.activations.fetch_add(1, Ordering::Relaxed);
        slots.insert(
            key,
            Slot {
                addr: addr.clone(),
                generation,
                epoch,
                queued: queued.clone(),
                in_flight: in_flight.clone(),
            },
        );
        Ok((addr, generation, queued, InFlight(in_flight)))
    }

    /// Sends `msg` to the actor for `key`, activating it if needed.
    pub async fn send<M>(&self, key: A::Key, msg: M) -> DomainResult<M::Result>
    where
        M: Message + Send + Clone + 'static,
        M::Result: Send,
        A: Handler<M>,
        A::Context: actix::dev::ToEnvelope<A, M>,
    {
        self.send_with(key, msg, None).await
    }

    /// Like [`Registry::send`], but refused with `busy()` (nothing sent)
    /// while the actor has another message queued or in hand: for requests
    /// that should not wait behind another one on the same object.
    pub async fn send_if_idle<M>(
        &self,
        key: A::Key,
        msg: M,
        busy: fn() -> DomainError,
    ) -> DomainResult<M::Result>
    where
        M: Message + Send + Clone + 'static,
        M::Result: Send,
        A: Handler<M>,
        A::Context: actix::dev::ToEnvelope<A, M>,
    {
        self.send_with(key, msg, Some(busy)).await
    }

    async fn send_with<M>(
        &self,
        key: A::Key,
        msg: M,
        busy: Option<fn() -> DomainError>,
    ) -> DomainResult<M::Result>
    where
        M: Message + Send + Clone + 'static,
        M::Result: Send,
        A: Handler<M>,
        A::Context: actix::dev::ToEnvelope<A, M>,
    {
        for _ in 0..3 {
            let (addr, generation, queued, _in_flight) = self.lease(key, busy)?;
            match addr.send(msg.clone()).await {
                Ok(result) => return Ok(result),
                Err(MailboxError::Closed) => {
                    queued.fetch_sub(1, Ordering::AcqRel);
                    self.forget(key, generation);
                }
                Err(MailboxError::Timeout) => {
                    return Err(DomainError::internal(format!("{} timed out", A::KIND)))
                }
            }
        }
        Err(DomainError::internal(format!(
            "{} {key:?} could not be activated",
            A::KIND
        )))
    }

    /// Removes the activation if it is still `generation` and nothing is
    /// queued for it. The caller stops the actor when this returns true.
    pub fn try_passivate(&self, key: A::Key, generation: u64) -> bool {
        try_passivate(&self.slots, &self.stats, key, generation)
    }

    /// Drops every activation's memory (a cluster node lost a shard): idle
    /// activations leave at once, busy ones as soon as they are idle (see
    /// the module's invariants).
    pub fn evict_all(&self) {
        let epoch = self.stats.epoch.fetch_add(1, Ordering::AcqRel) + 1;
        self.slots.lock().retain(|_, s| {
            s.epoch == epoch
                || s.queued.load(Ordering::Acquire) > 0
                || s.in_flight.load(Ordering::Acquire) > 0
        });
    }

    fn forget(&self, key: A::Key, generation: u64) {
        let mut slots = self.slots.lock();
        if slots.get(&key).is_some_and(|s| s.generation == generation) {
            slots.remove(&key);
        }
    }

    pub fn snapshot(&self) -> KindSnapshot {
        let slots = self.slots.lock();
        let depths = slots.values().map(|s| s.queued.load(Ordering::Relaxed));
        let (mut total, mut max) = (0, 0);
        for d in depths {
            total += d;
            max = max.max(d);
        }
        KindSnapshot {
            kind: A::KIND,
            live: slots.len(),
            mailbox_depth: total,
            mailbox_depth_max: max,
            mailbox_capacity: self.mailbox_capacity,
            activations: self.stats.activations.load(Ordering::Relaxed),
            passivations: self.stats.passivations.load(Ordering::Relaxed),
            restarts: self.stats.restarts.load(Ordering::Relaxed),
            messages: self.stats.messages.load(Ordering::Relaxed),
            last_panic: self.stats.last_panic.lock().clone(),
        }
    }
}

/// A part of a message that is moved, never copied: clones share it and
/// the handler takes it. [`Registry::send`] keeps a copy of each message
/// to resend should it meet a closed mailbox (it never should, see the
/// module's invariants); for a large part (a batch) that copy is then a
/// reference, not the part's bytes.
pub struct Once<T>(Arc<Mutex<Option<T>>>);

impl<T> Clone for Once<T> {
    fn clone(&self) -> Self {
        Once(self.0.clone())
    }
}

impl<T> Once<T> {
    pub fn new(part: T) -> Self {
        Once(Arc::new(Mutex::new(Some(part))))
    }

    /// The part, for the one handler that gets it.
    pub fn take(&self) -> DomainResult<T> {
        self.0
            .lock()
            .take()
            .ok_or_else(|| DomainError::internal("a message's part was taken twice"))
    }
}

/// An actor that owns one stored object (a payment intent, a payout, a
/// mandate, a crypto payout), keeps it in memory between commands, and runs
/// each command to completion before the next.
pub trait ObjectActor: VirtualActor<Key = uuid::Uuid> {
    type Object: Clone + Send + Unpin + 'static;
    fn object(&mut self) -> &mut Option<Self::Object>;
    fn activation_mut(&mut self) -> &mut Activation<Self>;
    /// The object's last durable snapshot.
    fn load(deps: &Self::Deps, id: uuid::Uuid) -> DomainResult<Option<Self::Object>>;
    /// The merchant and mode the object belongs to.
    fn scope(object: &Self::Object) -> (uuid::Uuid, crate::ids::Mode);
}

/// Runs one command against an object actor's object: loads it if needed,
/// answers 404 when it is not stored or belongs to another merchant or mode
/// (an activation left holding nothing then passivates at once), runs `command`
/// to completion (no other message is handled meanwhile), and keeps the
/// object it returns. A panic drops the in-memory copy, so the next message
/// reloads the last durable snapshot (counted as a restart).
pub fn run_command<A, F, Fut, R>(
    act: &mut A,
    merchant: uuid::Uuid,
    mode: crate::ids::Mode,
    command: F,
) -> actix::AtomicResponse<A, DomainResult<R>>
where
    A: ObjectActor,
    R: 'static,
    F: FnOnce(Arc<A::Deps>, A::Object) -> Fut + 'static,
    Fut: std::future::Future<Output = DomainResult<(A::Object, R)>> + 'static,
{
    use actix::{ActorFutureExt, WrapFuture};
    use futures_util::FutureExt;
    act.activation_mut().touch();
    let deps = act.activation().deps.clone();
    let id = act.activation().key;
    if act.activation().is_stale() {
        // Evicted: another node may have changed it meanwhile.
        *act.object() = None;
    }
    let current = match act.object() {
        Some(o) => Ok(Some(o.clone())),
        None => A::load(&deps, id),
    };
    let work = async move {
        let object = match current? {
            Some(o) if A::scope(&o) == (merchant, mode) => o,
            _ => return Err(DomainError::not_found(A::KIND, id)),
        };
        let outcome = command(deps, object.clone()).await;
        Ok((object, outcome))
    };
    actix::AtomicResponse::new(Box::pin(
        std::panic::AssertUnwindSafe(work)
            .catch_unwind()
            .into_actor(act)
            .map(|outcome, act: &mut A, ctx| {
                act.activation_mut().rest();
                match outcome {
                    Ok(Ok((_, Ok((after, view))))) => {
                        *act.object() = Some(after);
                        Ok(view)
                    }
                    Ok(Ok((before, Err(e)))) => {
                        *act.object() = Some(before);
                        Err(e)
                    }
                    Ok(Err(e)) => {
                        // Not found (or not the caller's): an activation
                        // holding nothing leaves at once, so unknown ids
                        // never keep actors alive.
                        if act.object().is_none() {
                            let a = act.activation();
                            if act.can_passivate()
                                && try_passivate(&a.slots, &a.stats, a.key, a.generation)
                            {
                                actix::ActorContext::stop(ctx);
                            }
                        }
                        Err(e)
                    }
                    Err(panic) => {
                        *act.object() = None;
                        act.activation().record_restart(&*panic);
                        Err(DomainError::internal(format!(
                            "the {} actor restarted",
                            A::KIND
                        )))
                    }
                }
            }),
    ))
}

/// Runs `work` to completion as one message of an actor that keeps no
/// object in memory (it reads the store for each command). A panic is
/// answered with an internal error and counted as a restart.
pub fn run_once<A, T, Fut>(act: &mut A, work: Fut) -> actix::AtomicResponse<A, DomainResult<T>>
where
    A: VirtualActor,
    T: 'static,
    Fut: std::future::Future<Output = DomainResult<T>> + 'static,
{
    use actix::{ActorFutureExt, WrapFuture};
    use futures_util::FutureExt;
    actix::AtomicResponse::new(Box::pin(
        std::panic::AssertUnwindSafe(work)
            .catch_unwind()
            .into_actor(act)
            .map(|outcome, act: &mut A, _ctx| {
                act.activation().rest();
                outcome.unwrap_or_else(|panic| {
                    act.activation().record_restart(&*panic);
                    Err(DomainError::internal(format!(
                        "the {} actor restarted",
                        A::KIND
                    )))
                })
            }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    /// An actor whose one message panics.
    struct Boom {
        activation: Activation<Boom>,
    }

    impl Actor for Boom {
        type Context = Context<Self>;
    }

    impl VirtualActor for Boom {
        type Key = u8;
        type Deps = ();
        const KIND: &'static str = "boom";
        fn activate(activation: Activation<Self>) -> Self {
            Boom { activation }
        }
        fn activation(&self) -> &Activation<Self> {
            &self.activation
        }
    }

    #[derive(Clone, actix::Message)]
    #[rtype(result = "DomainResult<()>")]
    struct Explode(&'static str);

    fn explode(why: &'static str) -> DomainResult<()> {
        panic!("{why}")
    }

    impl Handler<Explode> for Boom {
        type Result = actix::AtomicResponse<Self, DomainResult<()>>;
        fn handle(&mut self, msg: Explode, _: &mut Context<Self>) -> Self::Result {
            self.activation.touch();
            run_once(self, async move { explode(msg.0) })
        }
    }

    #[test]
    fn a_panic_restarts_the_actor_and_its_message_is_the_kinds_last_panic() {
        actix::System::new().block_on(async {
            let registry = Registry::<Boom>::new(Arc::new(()), 4, Duration::from_secs(30));
            assert!(registry.snapshot().last_panic.is_none());
            let e = registry
                .send(1, Explode("first"))
                .await
                .unwrap()
                .unwrap_err();
            assert!(e.message.contains("the boom actor restarted"), "{e:?}");
            registry
                .send(2, Explode("the books do not balance"))
                .await
                .unwrap()
                .unwrap_err();
            let s = registry.snapshot();
            assert_eq!(s.restarts, 2);
            assert_eq!(s.last_panic.as_deref(), Some("the books do not balance"));
        });
    }

    /// An actor that counts its messages in memory.
    struct Counter {
        activation: Activation<Counter>,
        count: u32,
    }

    impl Actor for Counter {
        type Context = Context<Self>;
    }

    impl VirtualActor for Counter {
        type Key = u8;
        type Deps = ();
        const KIND: &'static str = "counter";
        fn activate(activation: Activation<Self>) -> Self {
            Counter {
                activation,
                count: 0,
            }
        }
        fn activation(&self) -> &Activation<Self> {
            &self.activation
        }
    }

    #[derive(Clone, actix::Message)]
    #[rtype(result = "u32")]
    struct Count;

    impl Handler<Count> for Counter {
        type Result = u32;
        fn handle(&mut self, _: Count, _: &mut Context<Self>) -> u32 {
            self.activation.touch();
            self.count += 1;
            self.count
        }
    }

    #[test]
    fn after_an_eviction_the_next_message_meets_a_fresh_activation() {
        actix::System::new().block_on(async {
            let registry = Registry::<Counter>::new(Arc::new(()), 4, Duration::from_secs(30));
            assert_eq!(registry.send(1, Count).await.unwrap(), 1);
            assert_eq!(registry.send(1, Count).await.unwrap(), 2);
            assert_eq!(registry.send(2, Count).await.unwrap(), 1);
            registry.evict_all();
            assert_eq!(registry.snapshot().live, 0);
            assert_eq!(registry.send(1, Count).await.unwrap(), 1);
            assert_eq!(registry.send(1, Count).await.unwrap(), 2);
            let s = registry.snapshot();
            assert_eq!((s.live, s.activations), (1, 3));
        });
    }

    #[test]
    fn an_actor_passivates_when_its_idle_time_after_its_last_message_is_up() {
        actix::System::new().block_on(async {
            tokio::time::pause();
            let idle = Duration::from_secs(30);
            let registry = Registry::<Counter>::new(Arc::new(()), 4, idle);
            let live = || registry.snapshot().live;
            assert_eq!(registry.send(1, Count).await.unwrap(), 1);
            tokio::time::sleep(Duration::from_secs(20)).await;
            assert_eq!(registry.send(1, Count).await.unwrap(), 2);
            assert_eq!(registry.send(2, Count).await.unwrap(), 1);
            // 29 s after its last message key 1 is still live; key 2 too.
            tokio::time::sleep(Duration::from_secs(29)).await;
            assert_eq!(live(), 2);
            tokio::time::sleep(Duration::from_secs(2)).await;
            assert_eq!(live(), 0);
            let s = registry.snapshot();
            assert_eq!((s.activations, s.passivations), (2, 2));
            // The next message meets a fresh activation.
            assert_eq!(registry.send(1, Count).await.unwrap(), 1);
        });
    }

    #[test]
    fn an_actor_that_cannot_passivate_at_its_deadline_is_checked_again() {
        actix::System::new().block_on(async {
            tokio::time::pause();
            let registry = Registry::<Counter>::new(Arc::new(()), 4, Duration::from_secs(30));
            assert_eq!(registry.send(1, Count).await.unwrap(), 1);
            // A message counted as queued (as a sender does under the lock)
            // holds the actor past its deadline.
            let queued = registry.slots.lock()[&1].queued.clone();
            queued.fetch_add(1, Ordering::AcqRel);
            tokio::time::sleep(Duration::from_secs(40)).await;
            assert_eq!(registry.snapshot().live, 1);
            queued.fetch_sub(1, Ordering::AcqRel);
            tokio::time::sleep(IDLE_RECHECK + Duration::from_millis(10)).await;
            assert_eq!(registry.snapshot().live, 0);
        });
    }

    /// An object actor over one stored object: id 1, merchant 7, test mode.
    struct Stored {
        activation: Activation<Stored>,
        object: Option<u32>,
    }

    fn stored_id() -> uuid::Uuid {
        uuid::Uuid::from_u128(1)
    }

    impl Actor for Stored {
        type Context = Context<Self>;
    }

    impl VirtualActor for Stored {
        type Key = uuid::Uuid;
        type Deps = ();
        const KIND: &'static str = "stored";
        fn activate(activation: Activation<Self>) -> Self {
            Stored {
                activation,
                object: None,
            }
        }
        fn activation(&self) -> &Activation<Self> {
            &self.activation
        }
    }

    impl ObjectActor for Stored {
        type Object = u32;
        fn object(&mut self) -> &mut Option<u32> {
            &mut self.object
        }
        fn activation_mut(&mut self) -> &mut Activation<Self> {
            &mut self.activation
        }
        fn load(_: &(), id: uuid::Uuid) -> DomainResult<Option<u32>> {
            Ok((id == stored_id()).then_some(0))
        }
        fn scope(_: &u32) -> (uuid::Uuid, crate::ids::Mode) {
            (uuid::Uuid::from_u128(7), crate::ids::Mode::Test)
        }
    }

    /// Adds one to the object, as `merchant`.
    #[derive(Clone, actix::Message)]
    #[rtype(result = "DomainResult<u32>")]
    struct Bump(uuid::Uuid);

    impl Handler<Bump> for Stored {
        type Result = actix::AtomicResponse<Self, DomainResult<u32>>;
        fn handle(&mut self, msg: Bump, _: &mut Context<Self>) -> Self::Result {
            run_command(self, msg.0, crate::ids::Mode::Test, |_, n| async move {
                Ok((n + 1, n + 1))
            })
        }
    }

    #[test]
    fn an_activation_whose_object_is_not_found_leaves_at_once() {
        actix::System::new().block_on(async {
            let registry = Registry::<Stored>::new(Arc::new(()), 4, Duration::from_secs(30));
            let (owner, stranger) = (uuid::Uuid::from_u128(7), uuid::Uuid::from_u128(8));
            let bump = |id, who| {
                let sent = registry.send(id, Bump(who));
                async move { sent.await.expect("answered") }
            };
            let missing = |r: DomainResult<u32>| {
                let e = r.expect_err("404");
                assert_eq!(e.code, ErrorCode::ResourceMissing, "{e:?}");
            };
            // An id nothing is stored under, and the object asked for by
            // another merchant: 404, and no activation stays behind.
            missing(bump(uuid::Uuid::from_u128(2), owner).await);
            missing(bump(stored_id(), stranger).await);
            let s = registry.snapshot();
            assert_eq!((s.live, s.activations, s.passivations), (0, 2, 2));
            // The owner's commands keep the actor and its object.
            assert_eq!(bump(stored_id(), owner).await.unwrap(), 1);
            assert_eq!(bump(stored_id(), owner).await.unwrap(), 2);
            // Another merchant's 404 leaves the live object alone.
            missing(bump(stored_id(), stranger).await);
            assert_eq!(bump(stored_id(), owner).await.unwrap(), 3);
            assert_eq!(registry.snapshot().live, 1);
        });
    }

    #[test]
    fn a_panic_message_is_read_from_either_payload_and_cut_at_a_char_boundary() {
        assert_eq!(panic_message(&"boom"), "boom");
        assert_eq!(panic_message(&String::from("kaboom")), "kaboom");
        assert_eq!(panic_message(&42u8), "(a panic without a message)");
        let long = "₦".repeat(PANIC_MESSAGE_MAX);
        let cut = panic_message(&long);
        assert!(cut.len() <= PANIC_MESSAGE_MAX && cut.chars().all(|c| c == '₦'));
    }
}
