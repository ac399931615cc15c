//! The payments domain: every payment, whoever starts it, goes through the
//! operations of [`Payments`]. The API, recurring runs, hosted forms,
//! quick-invoice pay pages, terminals and the emulator differ only in the
//! [`Origin`] they pass; none of them sequences processor calls.
//!
//! A money-moving operation runs in three steps (ADR 0006, ADR 0008):
//!
//! 1. **prepare** (one write job): resolve and check everything, reserve
//!    what must not be taken twice (an api id, a refund's remainder, a
//!    velocity slot) and store the transaction as `pending`, or mark the
//!    transaction a follow-up action works on ([`create::prepare`],
//!    [`follow_up::prepare`]);
//! 2. **call** the processor outside any database transaction
//!    ([`call::ask`]);
//! 3. **complete** (one write job): record the outcome, enter the batch,
//!    save the vault, write the events and the idempotent answer
//!    ([`create::complete`], [`follow_up::complete`]).
//!
//! Once step 1 has begun, the operation runs on a task of its own: a
//! caller that goes away (a client that disconnects) does not stop it, and
//! a retry with the same `Idempotency-Key` or `transaction_api_id` finds
//! the recorded result. A crash between steps 1 and 3 leaves a `pending`
//! row naming its node; the reconciler reverses it at the processor and
//! declines it ([`reconcile`]).

pub mod ach_status;
pub mod ach_update;
pub mod actions;
pub mod batches;
pub mod call;
pub mod create;
pub mod follow_up;
pub mod idempotency;
pub mod level3;
#[cfg(test)]
mod node_races;
pub mod parts;
pub mod pending;
pub mod reconcile;
pub mod request;
pub mod source;
pub mod state;
pub mod surcharge;
pub mod velocity;

pub use request::{
    BatchId, DuplicateGuard, FollowUp, Idempotency, NewPayment, Origin, QuickInvoiceId, RecurringId, Reply,
    TerminalRead, TransactionId, TrxSource,
};

use crate::clock::{date_text, Clock};
use crate::crypto::Keyring;
use crate::db::Store;
use crate::engine::events::EventSink;
use crate::engine::kept::Kept;
use crate::engine::record::Record;
use crate::engine::{query, Cx};
use crate::error::{ApiError, ApiResult};
use crate::ids::new_id;
use crate::processor::{Processor, SettleRequest, Simulator, StatusId};
use crate::resources::{TRANSACTION, TRANSACTION_BATCH};
use actions::Parsed;
use idempotency::Claim;
use serde_json::Value as Json;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The payment service: the store, the processor and this node's
/// identity. Cheap to clone; one per process.
#[derive(Clone)]
pub struct Payments {
    store: Store,
    processor: Arc<dyn Processor>,
    keyring: Arc<Keyring>,
    clock: Clock,
    /// Hears the changes the reconciler makes (the postback outbox).
    sink: Arc<dyn EventSink>,
    /// This process's id in `pending_node`.
    node_id: Arc<str>,
    /// Set after the first reconciliation pass.
    started: Arc<AtomicBool>,
    in_flight: Arc<InFlight>,
    /// The configuration payments read, kept under the epoch.
    kept: Arc<KeptConfig>,
}

/// The configuration a payment reads before anything else, kept under
/// `auth_epoch` (see [`crate::engine::kept`], ADR 0024): a sale by an
/// API-key caller reads neither its location's defaults nor its product
/// transaction again until one of them (or anything else the epoch
/// covers) changes.
#[derive(Default)]
pub struct KeptConfig {
    /// A location's default product transaction for a payment method, by
    /// the caller's location, the location named and the method.
    defaults: Kept<(String, String, &'static str), crate::db::Row>,
    /// Product transactions by the caller's location and id.
    product_transactions: Kept<(String, String), Record>,
}

impl Payments {
    pub fn new(
        store: Store,
        processor: Arc<dyn Processor>,
        keyring: Arc<Keyring>,
        clock: Clock,
        sink: Arc<dyn EventSink>,
    ) -> Payments {
        Payments {
            store,
            processor,
            keyring,
            clock,
            sink,
            node_id: Arc::from(format!("node-{}", new_id()).as_str()),
            started: Arc::new(AtomicBool::new(false)),
            in_flight: Arc::default(),
            kept: Arc::default(),
        }
    }

    /// This process's node id (its advisory lock and `pending_node`).
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// The processor's developer controls, when it is a test processor.
    pub fn simulator(&self) -> Option<&dyn Simulator> {
        self.processor.simulator()
    }

    /// A new payment (`POST /v2/transactions` and every other producer).
    /// Answers 201 with the stored transaction, a decline included; a
    /// repeat of an `Idempotency-Key` answers what the first stored.
    ///
    /// A terminal's payment keeps only its transaction under the key: a
    /// refusal once the card is read was caused by that card (expired,
    /// not a card number), not by the request, whose own faults were
    /// refused before the terminal was asked. A repeat asks the terminal
    /// again, where the cardholder may present another card.
    pub fn create(
        &self,
        cx: Cx,
        request: NewPayment,
    ) -> impl Future<Output = ApiResult<Reply>> + Send + 'static {
        let idempotency = request.idempotency.clone();
        let keep_refusals = request.origin.terminal.is_none();
        self.operation(
            cx,
            idempotency,
            201,
            keep_refusals,
            move |this, cx, key| async move { this.new_payment(&cx, request, key).await },
        )
    }

    /// The checks of a new payment that need no account (see
    /// [`create::precheck`]): for a terminal's payment, made before the
    /// cardholder is asked for a card, so a request that cannot succeed
    /// never prompts anyone.
    pub async fn precheck(&self, cx: &Cx, input: Parsed, origin: Origin) -> ApiResult<()> {
        let cx = cx.clone();
        let kept = self.kept.clone();
        self.store
            .read(move |conn| create::precheck(&cx, conn, &kept, &input, &origin))
            .await
    }

    /// What a new payment would be refused for, without making it (see
    /// [`create::dry_run`]); inside the caller's own job.
    pub fn dry_run(
        &self,
        cx: &Cx,
        conn: &mut dyn crate::db::Conn,
        input: &Parsed,
        origin: &Origin,
    ) -> ApiResult<crate::error::FieldErrors> {
        create::dry_run(cx, conn, &self.kept, input, origin)
    }

    /// An action on an existing transaction (`PUT /v2/transactions/{id}`).
    pub fn update(
        &self,
        cx: Cx,
        request: FollowUp,
    ) -> impl Future<Output = ApiResult<Reply>> + Send + 'static {
        let idempotency = request.idempotency.clone();
        self.operation(cx, idempotency, 200, true, move |this, cx, key| async move {
            this.follow_up(&cx, request, key).await
        })
    }

    /// An ACH update (`POST /v2/transactions/{id}/achupdate`): the POP or
    /// C21 debit voided and a corrected one created, as one operation
    /// ([`ach_update`]). Answers 201 with the new transaction.
    pub fn ach_update(
        &self,
        cx: Cx,
        request: FollowUp,
    ) -> impl Future<Output = ApiResult<Reply>> + Send + 'static {
        let idempotency = request.idempotency.clone();
        self.operation(cx, idempotency, 201, true, move |this, cx, key| async move {
            this.replace_debit(&cx, request, key).await
        })
    }

    /// Runs one money-moving operation on a task of its own, under its
    /// `Idempotency-Key` if it has one (`work` gets the key to store its
    /// answer under; `keep_refusals`: see [`Payments::claim_then`]).
    fn operation<F, Fut>(
        &self,
        cx: Cx,
        idempotency: Option<Idempotency>,
        status: u16,
        keep_refusals: bool,
        work: F,
    ) -> impl Future<Output = ApiResult<Reply>> + Send + 'static
    where
        F: FnOnce(Payments, Cx, Option<String>) -> Fut + Send + 'static,
        Fut: Future<Output = ApiResult<Json>> + Send + 'static,
    {
        let this = self.clone();
        self.detached(async move {
            let key = idempotency.as_ref().map(|i| i.key.clone());
            this.claim_then(
                &cx,
                idempotency.as_ref(),
                status,
                keep_refusals,
                move |this, cx| work(this, cx, key),
            )
            .await
        })
    }

    /// A request refused before it became an operation (a malformed body,
    /// fields the action does not take). With an `Idempotency-Key` the
    /// refusal is the key's answer, replayed like any other; a key that
    /// already has an answer replays that instead.
    pub async fn refuse(
        &self,
        cx: Cx,
        idempotency: Option<Idempotency>,
        error: ApiError,
    ) -> ApiResult<Reply> {
        let Some(i) = idempotency else {
            return Err(error);
        };
        self.claim_then(&cx, Some(&i), 200, true, |_, _| async move { Err(error) })
            .await
    }

    /// Claims the idempotency key (or replays its answer), runs `work`,
    /// and settles the key if the work fails: a refusal (4xx) becomes the
    /// key's answer when `keep_refusals`, anything else frees the key for
    /// a retry.
    async fn claim_then<F, Fut>(
        &self,
        cx: &Cx,
        idempotency: Option<&Idempotency>,
        status: u16,
        keep_refusals: bool,
        work: F,
    ) -> ApiResult<Reply>
    where
        F: FnOnce(Payments, Cx) -> Fut,
        Fut: Future<Output = ApiResult<Json>>,
    {
        if let Some(i) = idempotency {
            if let Claim::Replay(status, body) =
                idempotency::claim(&self.store, cx, &i.key, &i.fingerprint).await?
            {
                return Ok(Reply {
                    status,
                    body,
                    replayed: true,
                });
            }
        }
        let result = work(self.clone(), cx.clone()).await;
        if let (Err(e), Some(i)) = (&result, idempotency) {
            idempotency::fail(&self.store, cx, &i.key, e, keep_refusals).await;
        }
        result.map(|body| Reply {
            status,
            body,
            replayed: false,
        })
    }

    async fn new_payment(&self, cx: &Cx, request: NewPayment, key: Option<String>) -> ApiResult<Json> {
        let node = self.node_id.clone();
        let kept = self.kept.clone();
        let (cx1, key1) = (cx.clone(), key.clone());
        let NewPayment { input, origin, .. } = request;
        let prepared = self
            .store
            .write(move |conn| create::prepare(&cx1, conn, &kept, &input, &origin, &node, key1.as_deref()))
            .await?;
        let answer = match call::ask(&self.processor, prepared.call.clone()).await {
            Ok(a) => a,
            Err(e) => call::failure_answer(&self.processor, &prepared.id, &prepared.call, e).await,
        };
        let cx3 = cx.clone();
        let completed = self
            .store
            .write(move |conn| create::complete(&cx3, conn, &prepared, &answer, key.as_deref()))
            .await?;
        Ok(completed.into_body(cx))
    }

    async fn follow_up(&self, cx: &Cx, request: FollowUp, key: Option<String>) -> ApiResult<Json> {
        /// What the first job of an action leaves to do.
        enum Step {
            /// Finished in that job (tipadjust, edit).
            Done(pending::Completed),
            /// The processor must answer before the action completes.
            Ask(Box<pending::Prepared>),
        }
        let node = self.node_id.clone();
        let (cx1, key1) = (cx.clone(), key.clone());
        let FollowUp {
            transaction, input, ..
        } = request;
        let step = self
            .store
            .write(move |conn| {
                let tx = query::find(conn, &TRANSACTION, &cx1.scope, transaction.as_str())?
                    .ok_or_else(|| ApiError::not_found("transaction"))?;
                let prepared = follow_up::prepare(&cx1, conn, &tx, &input, &node)?;
                // Actions without a processor call finish in this job.
                if matches!(prepared.call, call::Call::Nothing) {
                    let done = follow_up::complete(&cx1, conn, &prepared, None, key1.as_deref())?;
                    return Ok(Step::Done(done));
                }
                Ok(Step::Ask(Box::new(prepared)))
            })
            .await?;
        let prepared = match step {
            Step::Ask(p) => *p,
            Step::Done(done) => return Ok(done.into_body(cx)),
        };
        let answer = match call::ask(&self.processor, prepared.call.clone()).await {
            Ok(a) => a,
            Err(e) => {
                let p = prepared.clone();
                self.store.write(move |conn| follow_up::abandon(conn, &p)).await?;
                return Err(follow_up_failure(e));
            }
        };
        let cx3 = cx.clone();
        let completed = self
            .store
            .write(move |conn| follow_up::complete(&cx3, conn, &prepared, Some(&answer), key.as_deref()))
            .await?;
        Ok(completed.into_body(cx))
    }

    async fn replace_debit(&self, cx: &Cx, request: FollowUp, key: Option<String>) -> ApiResult<Json> {
        let node = self.node_id.clone();
        let kept = self.kept.clone();
        let (cx1, key1) = (cx.clone(), key.clone());
        let FollowUp {
            transaction, input, ..
        } = request;
        let (void, debit) = self
            .store
            .write(move |conn| {
                ach_update::prepare(&cx1, conn, &kept, &transaction, &input, &node, key1.as_deref())
            })
            .await?;
        // The original first: if it cannot be voided, nothing else happens.
        let void_answer = match call::ask(&self.processor, void.call.clone()).await {
            Ok(a) if a.status_id == StatusId::Voided => Ok(a),
            Ok(a) => Err(ApiError::field(
                "action",
                format!("The original could not be voided: {}", a.response_message),
            )),
            Err(e) => Err(follow_up_failure(e)),
        };
        let void_answer = match void_answer {
            Ok(a) => a,
            Err(e) => {
                let (v, debit_id) = (void.clone(), debit.id.clone());
                self.store
                    .write(move |conn| ach_update::abandon(conn, &v, &debit_id))
                    .await?;
                return Err(e);
            }
        };
        let answer = match call::ask(&self.processor, debit.call.clone()).await {
            Ok(a) => a,
            Err(e) => call::failure_answer(&self.processor, &debit.id, &debit.call, e).await,
        };
        // Both outcomes in one transaction: the void and the new debit.
        let cx3 = cx.clone();
        let completed = self
            .store
            .write(move |conn| {
                follow_up::complete(&cx3, conn, &void, Some(&void_answer), None)?;
                create::complete(&cx3, conn, &debit, &answer, key.as_deref())
            })
            .await?;
        Ok(completed.into_body(cx))
    }

    /// Closes a batch at the processor (`POST /v2/transactionbatches/{id}/settle`).
    /// Runs to the end even if the caller goes away.
    pub fn settle(&self, cx: Cx, batch: BatchId) -> impl Future<Output = ApiResult<Record>> + Send + 'static {
        let this = self.clone();
        self.detached(async move {
            let cx1 = cx.clone();
            let (before, amounts, attempt) = this
                .store
                .write(move |conn| {
                    let mut found = query::find(conn, &TRANSACTION_BATCH, &cx1.scope, batch.as_str())?
                        .ok_or_else(|| ApiError::not_found("transactionbatch"))?;
                    let (amounts, attempt) = batches::begin_settle(conn, &cx1, &mut found)?;
                    Ok((found, amounts, attempt))
                })
                .await?;
            let processor = this.processor.clone();
            let request = SettleRequest {
                batch_id: before.id().to_string(),
                amounts,
                attempt,
            };
            let answer = tokio::task::spawn_blocking(move || processor.settle(&request))
                .await
                .map_err(ApiError::internal)?
                .map_err(|e| e.to_string());
            let settle_date = date_text(cx.now, cx.scope.tz);
            this.store
                .write(move |conn| batches::finish_settle(conn, &cx, before, answer, &settle_date))
                .await
        })
    }

    /// The sandbox's ACH status change (`PUT /v2/developer/transactions/{id}`):
    /// what the bank would do days later, driven by hand. Only with a
    /// processor that has a [`Simulator`].
    pub async fn set_ach_status(&self, cx: Cx, id: TransactionId, to: StatusId) -> ApiResult<Record> {
        if self.processor.simulator().is_none() {
            return Err(ApiError::NotFound("No such endpoint.".into()));
        }
        let processor = self.processor.clone();
        self.store
            .write(move |conn| {
                let simulator = processor
                    .simulator()
                    .ok_or_else(|| ApiError::NotFound("No such endpoint.".into()))?;
                ach_status::apply(&cx, conn, simulator, id.as_str(), to)
            })
            .await
    }

    /// One reconciliation pass: what dead nodes (or this one, long ago)
    /// left pending is reversed and declined; see [`reconcile`].
    pub async fn reconcile(&self) -> ApiResult<reconcile::Report> {
        reconcile::run_once(self, self.clock.now_ts()).await
    }

    /// Reconciles what an earlier process left, then keeps doing so every
    /// 10 s in the background (other nodes may die while this one runs).
    pub async fn start_reconciler(&self) -> ApiResult<()> {
        let report = self.reconcile().await?;
        if report != Default::default() {
            tracing::warn!(?report, "reconciled what an interrupted run left pending");
        }
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(10));
            tick.tick().await;
            loop {
                tick.tick().await;
                match this.reconcile().await {
                    Ok(r) if r != Default::default() => {
                        tracing::warn!(report = ?r, "reconciled interrupted work")
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "reconciliation pass failed"),
                }
            }
        });
        Ok(())
    }
}

/// The answer to a follow-up whose processor call failed outright.
fn follow_up_failure(error: crate::processor::ProcessorError) -> ApiError {
    match error {
        crate::processor::ProcessorError::Unavailable(m) => {
            tracing::warn!(error = %m, "processor unavailable");
            ApiError::Unavailable("The processor is not reachable; retry shortly.".into())
        }
        other => ApiError::field("action", other.to_string()),
    }
}

/// The operations under way in this process, so that a shutdown can let
/// them finish (their callers may be long gone).
#[derive(Default)]
struct InFlight {
    count: std::sync::atomic::AtomicUsize,
    idle: tokio::sync::Notify,
}

/// Counts one operation for as long as it lives.
struct InFlightGuard(Arc<InFlight>);

impl InFlightGuard {
    fn new(in_flight: &Arc<InFlight>) -> InFlightGuard {
        in_flight.count.fetch_add(1, Ordering::SeqCst);
        InFlightGuard(in_flight.clone())
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

impl Payments {
    /// Runs `work` on a task of its own and waits for it: dropping the
    /// returned future (a client that went away) does not stop the work,
    /// and [`Payments::drain`] waits for it. The task is spawned when this
    /// is called, not when first polled.
    fn detached<T: Send + 'static>(
        &self,
        work: impl Future<Output = ApiResult<T>> + Send + 'static,
    ) -> impl Future<Output = ApiResult<T>> + Send + 'static {
        let guard = InFlightGuard::new(&self.in_flight);
        let task = tokio::spawn(async move {
            let result = work.await;
            drop(guard);
            result
        });
        async move {
            task.await
                .map_err(|e| ApiError::internal(format!("payment task failed: {e}")))?
        }
    }

    /// Waits, at most `limit`, until no operation is under way: a stopping
    /// server lets the payments it began reach their processor answer and
    /// record it. Returns how many were still running at the limit (the
    /// reconciler takes care of those at the next start).
    pub async fn drain(&self, limit: std::time::Duration) -> usize {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let idle = self.in_flight.idle.notified();
            let running = self.in_flight.count.load(Ordering::SeqCst);
            if running == 0 {
                return 0;
            }
            if tokio::time::timeout_at(deadline, idle).await.is_err() {
                return self.in_flight.count.load(Ordering::SeqCst);
            }
        }
    }
}
