//! The router: a request for a terminal reaches the node that holds the
//! terminal's connection, and its outcome comes back to the node that
//! took the request (ADR 0020).
//!
//! Every node runs one [`Router`]. Two roles meet in it:
//!
//! - **the origin** (the node serving `POST /v2/routertransactions` and
//!   the like) looks up which node holds the device ([`links`]), hands it
//!   the [`Work`], and waits for the [`Outcome`] until the terminal's
//!   `overall_timeout` has passed on the location's clock (a test clock
//!   moves it). At that deadline it asks the holder to cancel, and still
//!   takes the holder's word: a payment already under way is finished and
//!   answered, never dropped.
//! - **the holder** (the node the device is connected to) runs the work
//!   against the device through a [`DeviceSession`], one request at a time
//!   per device, and sends the outcome back. The holder alone decides
//!   whether a request is charged or cancelled, so a cancel and a card
//!   crossing each other cannot both win. Card data stays on the holder.
//!
//! Between nodes, messages travel over PostgreSQL `LISTEN`/`NOTIFY`
//! (sealed with the data key every node shares); on one node, and always
//! on SQLite, they are handed over in-process.

use super::links;
use super::protocol::{Failure, FromDevice, ToDevice};
use crate::clock::Clock;
use crate::crypto::Keyring;
use crate::db::Store;
use crate::engine::query::TenantScope;
use crate::error::{ApiError, ApiResult};
use crate::ids::new_id;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// How long the origin waits for the holder's answer to a cancel before
/// it treats the holder as gone.
const CANCEL_GRACE: Duration = Duration::from_secs(10);
/// How long the origin waits for a payment the holder has begun: the
/// processor's time-out and a signature, with room to spare.
const CHARGE_LIMIT: Duration = Duration::from_secs(180);
/// How often a waiting origin re-reads its location's test clock (a move
/// made by `ferrogate testclock advance` from another process).
const CLOCK_POLL: Duration = Duration::from_secs(2);
/// The holder stops waiting for a device this long after the origin's
/// deadline, in case the origin went away without cancelling.
const HOLDER_SLACK_S: u64 = 60;
/// A sealed message longer than this goes through `router_messages`, its
/// notification carrying only the row's id (PostgreSQL refuses payloads
/// of 8000 bytes and more).
const NOTIFY_LIMIT: usize = 7000;

/// What a terminal is asked to do. Crosses nodes (serialized).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Work {
    /// A card payment: `body` is the transaction request the origin
    /// checked (no account in it); the card comes from the device.
    Payment {
        body: Map<String, Json>,
        idempotency: Option<crate::payments::Idempotency>,
    },
    /// A card stored as an account vault on a contact.
    Store { body: Map<String, Json> },
    /// Device terms to show and record.
    Terms { body: Map<String, Json> },
}

/// How long the origin waits on a request, in seconds of the requester's
/// location's time (its test clock counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The terminal's `overall_timeout`: the whole request.
    pub overall_s: i64,
    /// The device's prompt (the card with its PIN, or the answer to
    /// terms) is due within this many seconds, else the request is
    /// cancelled and answered as this failure: the gateway's backstop for
    /// a device that does not apply its own time-out. Ends at the
    /// holder's commitment (the card arrived). `None`: overall only.
    pub prompt: Option<(i64, Failure)>,
}

/// On whose behalf the work runs: the caller of the origin's request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Requester {
    pub user_id: String,
    pub location_id: String,
    pub path: String,
    pub tz: String,
    pub leaf: bool,
    /// The test clock offset of the caller's location.
    pub offset_s: i64,
}

impl Requester {
    pub fn scope(&self) -> TenantScope {
        TenantScope {
            location_id: self.location_id.clone(),
            path: self.path.clone(),
            tz: self.tz.parse().unwrap_or(chrono_tz::UTC),
            leaf: self.leaf,
        }
    }
}

/// How a request ended. Crosses nodes (serialized).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// A payment was recorded (approved or declined).
    Transaction { id: String },
    /// A card was stored.
    Vault { id: String },
    /// Device terms were recorded (`retried`: an earlier declined term).
    Term { id: String, retried: bool },
    /// The request ended on the device without a card (nothing charged).
    Failed { reason: Failure },
    /// Cancelled (by a clerk, or because the origin stopped waiting)
    /// before anything was charged.
    Cancelled,
    /// The device was not connected, or went away before the card.
    Offline,
    /// The device was working on another request.
    Busy,
    /// The payment core or a resource refused the request as it stood
    /// once the card was read (nothing charged): its answer, as is.
    Refused { status: u16, body: Json },
}

/// What a holder runs a request with: the domain work (payments, vaults,
/// terms), kept outside the router so the router only moves messages.
pub trait Runner: Send + Sync + 'static {
    fn run(
        &self,
        session: DeviceSession,
        work: Work,
        requester: Requester,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send>>;
}

/// A request's events on the holder, as its runner reads them.
#[derive(Debug)]
pub enum DeviceEvent {
    /// The device's message about this request.
    Device(FromDevice),
    /// Stop if nothing was charged (a clerk, or the origin's deadline).
    Cancel,
    /// The device's connection ended.
    Disconnected,
    /// Nothing happened within the time asked for.
    Quiet,
}

/// The holder's side of one request: talk to the device, read events.
pub struct DeviceSession {
    pub request_id: String,
    pub terminal_id: String,
    to_device: mpsc::UnboundedSender<ToDevice>,
    events: mpsc::UnboundedReceiver<DeviceEvent>,
    router: Router,
    origin: String,
    committed: Arc<AtomicBool>,
}

impl DeviceSession {
    pub fn send(&self, message: ToDevice) {
        // A closed connection shows as `Disconnected` on the next read.
        let _ = self.to_device.send(message);
    }

    /// The next event, or `Quiet` after `limit`.
    pub async fn next(&mut self, limit: Duration) -> DeviceEvent {
        match tokio::time::timeout(limit, self.events.recv()).await {
            Ok(Some(event)) => event,
            Ok(None) => DeviceEvent::Disconnected,
            Err(_) => DeviceEvent::Quiet,
        }
    }

    /// Commits to the request before money moves (or a card is stored):
    /// tells the origin, and from here on the request is finished and
    /// answered whatever cancel arrives (a cancel is answered by telling
    /// the origin again). False when the origin could not be told: the
    /// runner must then stop, since the origin may answer "nothing was
    /// done" at its deadline.
    pub async fn committed(&self) -> bool {
        self.committed.store(true, Ordering::SeqCst);
        self.router
            .send(
                &self.origin,
                Wire::Committed {
                    request_id: self.request_id.clone(),
                },
            )
            .await
    }
}

/// Messages between routers (and a router and itself).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Wire {
    /// Origin → holder: run `work` on the terminal's device.
    Start {
        request_id: String,
        origin: String,
        terminal_id: String,
        work: Box<Work>,
        requester: Requester,
        /// How long the holder waits for the device at most.
        wait_s: u64,
    },
    /// Origin → holder: stop the request unless it is being charged.
    Cancel { request_id: String },
    /// Anyone → holder: stop whatever the terminal is doing.
    CancelTerminal { terminal_id: String },
    /// Holder → origin: the request is committed (the payment has begun).
    Committed { request_id: String },
    /// Holder → origin: the outcome.
    Done { request_id: String, outcome: Outcome },
    /// A node → the node that held an older connection of the device.
    Unlink { terminal_id: String, link_id: String },
    /// A test clock moved: waiting origins look at their deadline again.
    ClockMoved,
}

/// What an origin hears of its request from the holder.
enum FromHolder {
    Committed,
    Done(Outcome),
}

/// A device connected to this node.
struct Link {
    link_id: String,
    to_device: mpsc::UnboundedSender<ToDevice>,
    /// The request the device is working on.
    current: Option<String>,
}

/// A request running on a device of this node.
struct Running {
    terminal_id: String,
    origin: String,
    events: mpsc::UnboundedSender<DeviceEvent>,
    /// Set once the runner committed (see [`DeviceSession::committed`]).
    committed: Arc<AtomicBool>,
}

struct Inner {
    node: String,
    store: Store,
    clock: Clock,
    keyring: Arc<Keyring>,
    runner: OnceLock<Arc<dyn Runner>>,
    links: Mutex<HashMap<String, Link>>,
    running: Mutex<HashMap<String, Running>>,
    waiting: Mutex<HashMap<String, mpsc::UnboundedSender<FromHolder>>>,
    clock_moved: watch::Sender<u64>,
}

/// One per process; cheap to clone.
#[derive(Clone)]
pub struct Router {
    inner: Arc<Inner>,
}

/// The PostgreSQL channel of one node's router.
fn channel_of(node: &str) -> String {
    format!("fgr_{node}")
}
const BROADCAST: &str = "fgr_all";

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Router {
    pub fn new(store: Store, clock: Clock, keyring: Arc<Keyring>, node: &str) -> Router {
        Router {
            inner: Arc::new(Inner {
                node: node.to_string(),
                store,
                clock,
                keyring,
                runner: OnceLock::new(),
                links: Mutex::default(),
                running: Mutex::default(),
                waiting: Mutex::default(),
                clock_moved: watch::channel(0).0,
            }),
        }
    }

    /// Starts the router: the runner holders use, and (PostgreSQL) the
    /// listener for the other nodes' messages. Links this node cannot
    /// have (SQLite: every link is a previous process's) are dropped.
    pub async fn start(&self, runner: Arc<dyn Runner>) -> anyhow::Result<()> {
        let _ = self.inner.runner.set(runner);
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let listening = self.inner.store.listen(
            vec![channel_of(&self.inner.node), BROADCAST.to_string()],
            Box::new(move |_channel, payload| {
                let _ = tx.send(payload);
            }),
        )?;
        if listening {
            let this = self.clone();
            tokio::spawn(async move {
                while let Some(payload) = rx.recv().await {
                    // A long message waits in a row; the notification names it.
                    let payload = match payload.strip_prefix('@') {
                        Some(id) => match links::unpark(&this.inner.store, id).await {
                            Ok(Some(parked)) => parked,
                            Ok(None) => continue,
                            Err(e) => {
                                tracing::warn!(error = %e, "router: a long message could not be read");
                                continue;
                            }
                        },
                        None => payload,
                    };
                    match this.unseal(&payload) {
                        Some(wire) => this.receive(wire),
                        None => tracing::warn!("router: a notification that is not ours was ignored"),
                    }
                }
            });
        } else {
            links::forget_all(&self.inner.store)
                .await
                .map_err(|e| anyhow::anyhow!("clearing terminal links: {e}"))?;
        }
        Ok(())
    }

    fn seal(&self, wire: &Wire) -> String {
        self.inner
            .keyring
            .encrypt(&serde_json::to_string(wire).unwrap_or_default())
    }

    fn unseal(&self, payload: &str) -> Option<Wire> {
        let text = self.inner.keyring.decrypt(payload).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Sends `wire` to `node`'s router (this one: in-process). False when
    /// it could not be handed to the database.
    async fn send(&self, node: &str, wire: Wire) -> bool {
        if node == self.inner.node {
            self.receive(wire);
            return true;
        }
        let mut payload = self.seal(&wire);
        if payload.len() > NOTIFY_LIMIT {
            match links::park(&self.inner.store, payload, self.inner.clock.now_ts()).await {
                Ok(id) => payload = format!("@{id}"),
                Err(e) => {
                    tracing::warn!(error = %e, "router: a long message to another node was lost");
                    return false;
                }
            }
        }
        match self.inner.store.notify(channel_of(node), payload).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "router: a message to another node was lost");
                false
            }
        }
    }

    /// Tells every node (this one included) that a test clock moved.
    pub async fn clock_moved(&self) {
        self.receive(Wire::ClockMoved);
        let payload = self.seal(&Wire::ClockMoved);
        if let Err(e) = self.inner.store.notify(BROADCAST.to_string(), payload).await {
            tracing::warn!(error = %e, "router: the clock move was not told to the other nodes");
        }
    }

    /// Handles a message addressed to this node.
    fn receive(&self, wire: Wire) {
        match wire {
            Wire::Start {
                request_id,
                origin,
                terminal_id,
                work,
                requester,
                wait_s,
            } => self.begin(request_id, origin, terminal_id, *work, requester, wait_s),
            Wire::Cancel { request_id } => {
                let committed_to = lock(&self.inner.running).get(&request_id).and_then(|r| {
                    if r.committed.load(Ordering::SeqCst) {
                        Some(r.origin.clone())
                    } else {
                        let _ = r.events.send(DeviceEvent::Cancel);
                        None
                    }
                });
                // Too late to cancel: the origin hears again that the
                // request is under way (the first word may have been lost).
                if let Some(origin) = committed_to {
                    let this = self.clone();
                    tokio::spawn(async move {
                        this.send(&origin, Wire::Committed { request_id }).await;
                    });
                }
            }
            Wire::CancelTerminal { terminal_id } => {
                let current = lock(&self.inner.links)
                    .get(&terminal_id)
                    .and_then(|l| l.current.clone());
                if let Some(request_id) = current {
                    if let Some(r) = lock(&self.inner.running).get(&request_id) {
                        let _ = r.events.send(DeviceEvent::Cancel);
                    }
                }
            }
            Wire::Committed { request_id } => self.heard(&request_id, FromHolder::Committed),
            Wire::Done { request_id, outcome } => self.heard(&request_id, FromHolder::Done(outcome)),
            Wire::Unlink { terminal_id, link_id } => {
                // Dropping the link's sender ends the connection's task; the
                // request it worked on has lost its device.
                let current = {
                    let mut links = lock(&self.inner.links);
                    match links.get(&terminal_id) {
                        Some(l) if l.link_id == link_id => links.remove(&terminal_id).and_then(|l| l.current),
                        _ => None,
                    }
                };
                self.lost_device(current);
            }
            Wire::ClockMoved => {
                self.inner.clock_moved.send_modify(|n| *n = n.wrapping_add(1));
            }
        }
    }

    /// Tells the request a device was working on that the device is gone.
    fn lost_device(&self, request_id: Option<String>) {
        if let Some(request_id) = request_id {
            if let Some(r) = lock(&self.inner.running).get(&request_id) {
                let _ = r.events.send(DeviceEvent::Disconnected);
            }
        }
    }

    fn heard(&self, request_id: &str, what: FromHolder) {
        if let Some(tx) = lock(&self.inner.waiting).get(request_id) {
            let _ = tx.send(what);
        }
    }

    // ---- The holder's side -------------------------------------------------

    /// A device of `terminal_id` connected here: it replaces any earlier
    /// connection of the same device (here or on another node). Returns
    /// the link's id and the messages to write to the device.
    pub async fn attach(&self, terminal_id: &str) -> ApiResult<(String, mpsc::UnboundedReceiver<ToDevice>)> {
        let link_id = new_id();
        let (tx, rx) = mpsc::unbounded_channel();
        // The link first, the row second: a lookup that finds the row
        // always finds the link behind it.
        let replaced = lock(&self.inner.links).insert(
            terminal_id.to_string(),
            Link {
                link_id: link_id.clone(),
                to_device: tx,
                current: None,
            },
        );
        self.lost_device(replaced.and_then(|l| l.current));
        let claimed = links::claim(
            &self.inner.store,
            terminal_id,
            &self.inner.node,
            &link_id,
            self.inner.clock.now_ts(),
        )
        .await;
        let previous = match claimed {
            Ok(previous) => previous,
            Err(e) => {
                let mut links = lock(&self.inner.links);
                if links.get(terminal_id).is_some_and(|l| l.link_id == link_id) {
                    links.remove(terminal_id);
                }
                return Err(e);
            }
        };
        if let Some((node, old_link)) = previous.filter(|(node, _)| *node != self.inner.node) {
            self.send(
                &node,
                Wire::Unlink {
                    terminal_id: terminal_id.to_string(),
                    link_id: old_link,
                },
            )
            .await;
        }
        Ok((link_id, rx))
    }

    /// The device's connection `link_id` ended.
    pub async fn detach(&self, terminal_id: &str, link_id: &str) {
        let current = {
            let mut links = lock(&self.inner.links);
            match links.get(terminal_id) {
                Some(l) if l.link_id == link_id => links.remove(terminal_id).and_then(|l| l.current),
                _ => None,
            }
        };
        self.lost_device(current);
        if let Err(e) = links::release(&self.inner.store, terminal_id, link_id).await {
            tracing::warn!(error = %e, terminal_id, "router: the link row could not be removed");
        }
    }

    /// A message from the device on `link_id`, about one of its requests.
    /// Returns an answer for the device when the request is not running.
    pub fn from_device(&self, terminal_id: &str, link_id: &str, message: FromDevice) -> Option<ToDevice> {
        let request_id = match &message {
            FromDevice::Register { .. } => return None,
            FromDevice::Card { request_id, .. }
            | FromDevice::Failed { request_id, .. }
            | FromDevice::Terms { request_id, .. }
            | FromDevice::Signature { request_id, .. } => request_id.clone(),
        };
        let ours = lock(&self.inner.links)
            .get(terminal_id)
            .is_some_and(|l| l.link_id == link_id && l.current.as_deref() == Some(request_id.as_str()));
        let running = lock(&self.inner.running);
        match running.get(&request_id) {
            Some(r) if ours && r.terminal_id == terminal_id => {
                let _ = r.events.send(DeviceEvent::Device(message));
                None
            }
            // Late, or not this device's: the device should stop.
            _ => Some(ToDevice::Cancel { request_id }),
        }
    }

    /// Runs a request on a device of this node, on a task of its own.
    fn begin(
        &self,
        request_id: String,
        origin: String,
        terminal_id: String,
        work: Work,
        requester: Requester,
        wait_s: u64,
    ) {
        let this = self.clone();
        tokio::spawn(async move {
            let to_device = {
                let mut links = lock(&this.inner.links);
                match links.get_mut(&terminal_id) {
                    None => Err(Outcome::Offline),
                    Some(link) if link.current.is_some() => Err(Outcome::Busy),
                    Some(link) => {
                        link.current = Some(request_id.clone());
                        Ok(link.to_device.clone())
                    }
                }
            };
            let outcome = match to_device {
                // The row that sent the request here names a link this node
                // no longer has.
                Err(Outcome::Offline) => {
                    if let Err(e) =
                        links::release_node(&this.inner.store, &terminal_id, &this.inner.node).await
                    {
                        tracing::warn!(error = %e, terminal_id, "router: a stale link row could not be removed");
                    }
                    Outcome::Offline
                }
                Err(refusal) => refusal,
                Ok(to_device) => {
                    let (tx, events) = mpsc::unbounded_channel();
                    let committed = Arc::new(AtomicBool::new(false));
                    lock(&this.inner.running).insert(
                        request_id.clone(),
                        Running {
                            terminal_id: terminal_id.clone(),
                            origin: origin.clone(),
                            events: tx.clone(),
                            committed: committed.clone(),
                        },
                    );
                    // The device is free again however the runner ends (a
                    // panic included).
                    let _free = Free {
                        router: &this,
                        request_id: &request_id,
                        terminal_id: &terminal_id,
                    };
                    // The holder's own limit, in case the origin is gone.
                    let backstop = tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_secs(wait_s + HOLDER_SLACK_S)).await;
                        let _ = tx.send(DeviceEvent::Cancel);
                    });
                    let session = DeviceSession {
                        request_id: request_id.clone(),
                        terminal_id: terminal_id.clone(),
                        to_device,
                        events,
                        router: this.clone(),
                        origin: origin.clone(),
                        committed,
                    };
                    let outcome = match this.inner.runner.get() {
                        Some(runner) => runner.run(session, work, requester).await,
                        None => Outcome::Offline,
                    };
                    backstop.abort();
                    outcome
                }
            };
            this.send(&origin, Wire::Done { request_id, outcome }).await;
        });
    }

    // ---- The origin's side -------------------------------------------------

    /// Whether the terminal's device is connected to some node.
    pub async fn is_online(&self, terminal_id: &str) -> ApiResult<bool> {
        Ok(self.holder(terminal_id).await?.is_some())
    }

    /// The node holding the device's connection, if any. A row of a node
    /// that died (or of this node, without the link) is removed.
    async fn holder(&self, terminal_id: &str) -> ApiResult<Option<String>> {
        let Some((node, link_id)) = links::find(&self.inner.store, terminal_id).await? else {
            return Ok(None);
        };
        let live = if node == self.inner.node {
            lock(&self.inner.links)
                .get(terminal_id)
                .is_some_and(|l| l.link_id == link_id)
        } else {
            !self.inner.store.node_is_dead(&node, &self.inner.node).await?
        };
        if live {
            Ok(Some(node))
        } else {
            links::release(&self.inner.store, terminal_id, &link_id).await?;
            Ok(None)
        }
    }

    /// Asks the device holding `terminal_id` to stop its current request
    /// (nothing is stopped once a payment has begun). False when the
    /// device is not connected.
    pub async fn cancel_terminal(&self, terminal_id: &str) -> ApiResult<bool> {
        let Some(node) = self.holder(terminal_id).await? else {
            return Ok(false);
        };
        Ok(self
            .send(
                &node,
                Wire::CancelTerminal {
                    terminal_id: terminal_id.to_string(),
                },
            )
            .await)
    }

    /// Runs `work` on the terminal's device and waits for its outcome, at
    /// most `limits` of the requester's location's time (its test clock
    /// counts, the same clock the holder writes the records with). An
    /// offline or busy device and a request that ended on the device are
    /// outcomes; errors: a deadline passed with nothing done (422
    /// `overall_timeout`, or the prompt's failure), or the holder stopped
    /// answering (503: whether something was done is not known here, and
    /// the answer says so).
    pub async fn submit(
        &self,
        terminal_id: &str,
        work: Work,
        requester: Requester,
        limits: Limits,
    ) -> ApiResult<Outcome> {
        let overall_timeout_s = limits.overall_s;
        let Some(node) = self.holder(terminal_id).await? else {
            return Ok(Outcome::Offline);
        };
        let request_id = new_id();
        let (tx, mut heard) = mpsc::unbounded_channel();
        lock(&self.inner.waiting).insert(request_id.clone(), tx);
        let _waiting = Waiting {
            router: self,
            request_id: &request_id,
        };
        let location_id = requester.location_id.clone();
        let mut offset = requester.offset_s;
        let started_at = self.inner.clock.location_now(offset);
        let deadline = started_at + overall_timeout_s;
        let prompt_deadline = limits
            .prompt
            .map(|(s, failure)| (started_at + s, failure))
            .filter(|(until, _)| *until < deadline);
        let mut moved = self.inner.clock_moved.subscribe();
        let started = self
            .send(
                &node,
                Wire::Start {
                    request_id: request_id.clone(),
                    origin: self.inner.node.clone(),
                    terminal_id: terminal_id.to_string(),
                    work: Box::new(work),
                    requester,
                    wait_s: overall_timeout_s.max(0) as u64,
                },
            )
            .await;
        if !started {
            return Ok(Outcome::Offline);
        }
        // Until the deadline: the outcome, or the holder's commitment.
        let mut expired = overall_timeout(overall_timeout_s);
        let committed = loop {
            let now = self.inner.clock.location_now(offset);
            // The prompt's backstop: cancelled as the device would have
            // reported it.
            if let Some((_, failure)) = prompt_deadline.filter(|(until, _)| now >= *until) {
                expired = refusal(&Outcome::Failed { reason: failure })
                    .unwrap_or_else(|| overall_timeout(overall_timeout_s));
                break false;
            }
            let next = prompt_deadline.map_or(deadline, |(until, _)| until.min(deadline));
            let left = next - now;
            if left <= 0 {
                break false;
            }
            let nap = Duration::from_secs(left as u64).min(CLOCK_POLL);
            tokio::select! {
                what = heard.recv() => match what {
                    Some(FromHolder::Done(outcome)) => return Ok(outcome),
                    Some(FromHolder::Committed) => break true,
                    None => return Ok(Outcome::Offline),
                },
                _ = tokio::time::sleep(nap) => offset = self.offset(&location_id, offset).await,
                _ = moved.changed() => offset = self.offset(&location_id, offset).await,
            }
        };
        let cancelled = !committed;
        if cancelled {
            // The deadline: the holder decides between the cancel and a
            // request it may have committed to a moment ago.
            self.send(
                &node,
                Wire::Cancel {
                    request_id: request_id.clone(),
                },
            )
            .await;
        }
        let mut committed = committed;
        loop {
            let limit = if committed { CHARGE_LIMIT } else { CANCEL_GRACE };
            match tokio::time::timeout(limit, heard.recv()).await {
                Ok(Some(FromHolder::Committed)) => committed = true,
                Ok(Some(FromHolder::Done(Outcome::Cancelled))) if cancelled => return Err(expired),
                Ok(Some(FromHolder::Done(outcome))) => return Ok(outcome),
                Ok(None) | Err(_) => {
                    return Err(ApiError::Unavailable(
                        "The terminal's node stopped answering; the payment may have been made. \
                         Look the transaction up by its transaction_api_id before trying again."
                            .into(),
                    ))
                }
            }
        }
    }

    /// The location's test clock offset now (the last one known if the
    /// database does not answer).
    async fn offset(&self, location_id: &str, known: i64) -> i64 {
        let id = location_id.to_string();
        self.inner
            .store
            .read(move |conn| Ok(crate::billing::location_zone(conn, &id)?.1))
            .await
            .unwrap_or(known)
    }
}

/// Removes an origin's waiting entry however its request ends.
struct Waiting<'a> {
    router: &'a Router,
    request_id: &'a str,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        lock(&self.router.inner.waiting).remove(self.request_id);
    }
}

/// Frees a device of its request however the request ends.
struct Free<'a> {
    router: &'a Router,
    request_id: &'a str,
    terminal_id: &'a str,
}

impl Drop for Free<'_> {
    fn drop(&mut self) {
        lock(&self.router.inner.running).remove(self.request_id);
        if let Some(link) = lock(&self.router.inner.links).get_mut(self.terminal_id) {
            if link.current.as_deref() == Some(self.request_id) {
                link.current = None;
            }
        }
    }
}

fn overall_timeout(seconds: i64) -> ApiError {
    ApiError::Terminal {
        status: StatusCode::UNPROCESSABLE_ENTITY,
        code: "overall_timeout",
        message: format!(
            "The terminal did not finish within its overall_timeout of {seconds} s; the request was cancelled and nothing was charged."
        ),
    }
}

/// The answer when a terminal's device is not connected: 503, as the
/// reference answers its online check for an offline device.
pub fn offline() -> ApiError {
    ApiError::Terminal {
        status: StatusCode::SERVICE_UNAVAILABLE,
        code: "terminal_offline",
        message: "The terminal is offline (its device is not connected); nothing was done.".into(),
    }
}

/// The answer for an outcome that is not a record: offline, busy, ended
/// on the device, cancelled.
pub fn refusal(outcome: &Outcome) -> Option<ApiError> {
    let terminal = |status, code, message: &str| ApiError::Terminal {
        status,
        code,
        message: message.to_string(),
    };
    Some(match outcome {
        Outcome::Offline => offline(),
        Outcome::Busy => terminal(
            StatusCode::CONFLICT,
            "terminal_busy",
            "The terminal is working on another request; try again when it is done.",
        ),
        Outcome::Cancelled => terminal(
            StatusCode::UNPROCESSABLE_ENTITY,
            "cancelled",
            "The request was cancelled before the card was read; nothing was charged.",
        ),
        Outcome::Failed { reason } => {
            terminal(StatusCode::UNPROCESSABLE_ENTITY, reason.code(), reason.message())
        }
        Outcome::Refused { status, body } => ApiError::Relayed(
            StatusCode::from_u16(*status).unwrap_or(StatusCode::UNPROCESSABLE_ENTITY),
            body.clone(),
        ),
        Outcome::Transaction { .. } | Outcome::Vault { .. } | Outcome::Term { .. } => return None,
    })
}
