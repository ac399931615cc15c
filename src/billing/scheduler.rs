//! The scheduler inside `serve`: charges every due schedule through the
//! payments core and sends the notices that fall due before runs.
//!
//! Exactly once, on any number of nodes:
//!
//! - a node **leases** the due rows it takes (PostgreSQL: `FOR UPDATE SKIP
//!   LOCKED`, so nodes never take the same row); the leases of a node
//!   that died are released at once, those of a hung node when they
//!   expire ([`LEASE`]);
//! - every attempt has a **run key** (`<recurring id>:<run_seq>`) stored
//!   on its transaction under a unique index: an attempt can never create
//!   two transactions, and a node that takes over a row first looks for
//!   the transaction of its key (a crash after the charge) and records
//!   that instead of charging again;
//! - the outcome is written only by the lease holder and only for the
//!   attempt it claimed (`run_seq`), so it moves the schedule once.
//!
//! A due time is real time (`due_ts`) compared with the wall clock plus
//! the location's test clock offset, so moving a test clock makes its
//! schedules due.

use super::calendar::local_date;
use super::transitions::{self, RunOutcome};
use crate::clock::Clock;
use crate::crypto::Keyring;
use crate::db::{Conn, Dialect, Sql, Store};
use crate::engine::events::EventSink;
use crate::engine::query::{select_unscoped, TenantScope};
use crate::engine::record::Record;
use crate::engine::Cx;
use crate::error::{ApiError, ApiResult};
use crate::money::Money;
use crate::payments::{NewPayment, Origin, Payments, RecurringId, TrxSource};
use crate::processor::StatusId;
use crate::resources::RECURRING;
use serde_json::{json, Map, Value as Json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// How long a lease keeps other nodes off a schedule: well above one
/// charge (the processor call's own limit).
pub const LEASE: Duration = Duration::from_secs(300);
/// Schedules taken per round, charged concurrently.
pub const BATCH: usize = 256;
/// How often the loop looks for due schedules when nothing wakes it.
const POLL: Duration = Duration::from_secs(1);
/// How often leases of other nodes are checked for dead holders.
const LEASE_CHECK: Duration = Duration::from_secs(2);
/// How long [`Schedules::run_once`] waits for runs another node holds.
const RUN_ONCE_WAIT: Duration = Duration::from_secs(60);
/// A run the payments core could not take (unavailable, a conflict) is
/// tried again after this.
const LATER: Duration = Duration::from_secs(30);
/// The reason code the reconciler gives a reversed, interrupted payment.
const INTERRUPTED_REASON: i64 = 1531;

/// What a [`Schedules::run_once`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Runs recorded (charges, declines and refusals).
    pub runs: usize,
    /// Notices written to the mail outbox.
    pub notices: usize,
}

impl std::ops::AddAssign for Report {
    fn add_assign(&mut self, other: Report) {
        self.runs += other.runs;
        self.notices += other.notices;
    }
}

/// The scheduler of this process. Cheap to clone.
#[derive(Clone)]
pub struct Schedules {
    store: Store,
    payments: Payments,
    clock: Clock,
    keyring: Arc<Keyring>,
    sink: Arc<dyn EventSink>,
    public_url: Arc<str>,
    node_id: Arc<str>,
    wake: Arc<Notify>,
    /// Schedules of this process claimed and not yet recorded, by
    /// location: [`Schedules::run_once`] waits for them (the background
    /// loop may claim rows of a location whose test clock is moving).
    in_flight: Arc<Mutex<HashMap<String, usize>>>,
}

/// Counts a round's claimed schedules in [`Schedules::in_flight`] until
/// dropped (their outcomes recorded, or the round failed).
struct InFlight {
    map: Arc<Mutex<HashMap<String, usize>>>,
    counts: HashMap<String, usize>,
}

/// The key [`InFlight`] counts a claim under while its rows (and so their
/// locations) are not known yet; no location id is empty.
const CLAIMING: &str = "";

impl InFlight {
    /// A claim under way (its rows are not known yet).
    fn claiming(map: &Arc<Mutex<HashMap<String, usize>>>) -> InFlight {
        InFlight::counting(map, HashMap::from([(CLAIMING.to_string(), 1)]))
    }

    /// The schedules a round claimed.
    fn new(map: &Arc<Mutex<HashMap<String, usize>>>, claimed: &[Claimed]) -> InFlight {
        let mut counts = HashMap::new();
        for c in claimed {
            *counts
                .entry(c.record.text("location_id").unwrap_or_default().to_string())
                .or_insert(0) += 1;
        }
        InFlight::counting(map, counts)
    }

    fn counting(map: &Arc<Mutex<HashMap<String, usize>>>, counts: HashMap<String, usize>) -> InFlight {
        let mut held = map.lock().unwrap_or_else(|e| e.into_inner());
        for (location, n) in &counts {
            *held.entry(location.clone()).or_insert(0) += n;
        }
        InFlight {
            map: map.clone(),
            counts,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut held = self.map.lock().unwrap_or_else(|e| e.into_inner());
        for (location, n) in &self.counts {
            if let Some(count) = held.get_mut(location) {
                *count = count.saturating_sub(*n);
                if *count == 0 {
                    held.remove(location);
                }
            }
        }
    }
}

/// A leased schedule and what its charge needs.
struct Claimed {
    record: Record,
    scope: TenantScope,
    offset_s: i64,
    /// The transaction of this attempt's run key, when one exists (a node
    /// stopped after charging): id, state, status_id, reason_code_id.
    earlier: Option<Vec<crate::db::Value>>,
}

impl Schedules {
    pub fn new(
        store: Store,
        payments: Payments,
        clock: Clock,
        keyring: Arc<Keyring>,
        sink: Arc<dyn EventSink>,
        public_url: Arc<str>,
    ) -> Schedules {
        let node_id = Arc::from(payments.node_id());
        Schedules {
            store,
            payments,
            clock,
            keyring,
            sink,
            public_url,
            node_id,
            wake: Arc::new(Notify::new()),
            in_flight: Arc::default(),
        }
    }

    /// Tells the loop to look for due schedules now.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Starts the background loop; it runs for the life of the process.
    pub fn start(&self) {
        let this = self.clone();
        tokio::spawn(async move {
            let mut last_check = tokio::time::Instant::now() - LEASE_CHECK;
            loop {
                if last_check.elapsed() >= LEASE_CHECK {
                    last_check = tokio::time::Instant::now();
                    if let Err(e) = this.release_dead_leases().await {
                        tracing::warn!(error = %e, "scheduler: checking other nodes' leases failed");
                    }
                }
                match this.round(None).await {
                    Ok((report, _)) if report.runs > 0 || report.notices > 0 => continue,
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "scheduler: a round failed; retrying"),
                }
                tokio::select! {
                    _ = this.wake.notified() => {}
                    _ = tokio::time::sleep(POLL) => {}
                }
            }
        });
    }

    /// Runs everything due now at `location_id` (every location when
    /// `None`), round after round until nothing is due, and waits for runs
    /// this process's background loop or another node holds (up to
    /// [`RUN_ONCE_WAIT`]): when it returns, every run due now is recorded
    /// and the next due times are known (the test clock steps by them).
    pub async fn run_once(&self, location_id: Option<&str>) -> ApiResult<Report> {
        let mut total = Report::default();
        let give_up = tokio::time::Instant::now() + RUN_ONCE_WAIT;
        loop {
            let (report, claimed) = self.round(location_id).await?;
            total += report;
            if claimed > 0 || report.notices > 0 {
                continue;
            }
            let busy = self.in_flight_at(location_id) || self.held_elsewhere(location_id).await?;
            if !busy || tokio::time::Instant::now() >= give_up {
                return Ok(total);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Whether this process has claimed schedules of `location_id` (of
    /// any location when `None`) whose runs are not recorded yet.
    fn in_flight_at(&self, location_id: Option<&str>) -> bool {
        let held = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        match location_id {
            Some(location) => held.contains_key(location) || held.contains_key(CLAIMING),
            None => !held.is_empty(),
        }
    }

    /// The earliest real time at which something of `location_id` falls
    /// due (a run or a notice), for the test clock.
    pub async fn next_due(&self, location_id: &str) -> ApiResult<Option<i64>> {
        let location = location_id.to_string();
        self.store
            .read(move |conn| {
                let row = conn.query_one(&Sql::with(
                    "SELECT MIN(due_ts), MIN(notify_ts) FROM recurrings WHERE location_id = ? AND status = 'active'",
                    vec![location.clone().into()],
                ))?;
                let reminder = conn
                    .query_one(&Sql::with(
                        "SELECT MIN(remind_ts) FROM quick_invoices WHERE location_id = ?",
                        vec![location.into()],
                    ))?
                    .and_then(|r| r[0].as_int());
                let recurring = row.and_then(|r| match (r[0].as_int(), r[1].as_int()) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                });
                Ok(match (recurring, reminder) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                })
            })
            .await
    }

    /// One round: notices, then one batch of runs, their outcomes recorded
    /// together. Returns what was done and how many schedules were claimed.
    async fn round(&self, location_id: Option<&str>) -> ApiResult<(Report, usize)> {
        // Held from the notices on: a `run_once` of the test clock waits
        // for a background round's notices as it does for its runs.
        let claiming = InFlight::claiming(&self.in_flight);
        let notices =
            self.send_notices(location_id).await? + self.send_invoice_reminders(location_id).await?;
        let claimed = self.claim(location_id).await?;
        let _in_flight = InFlight::new(&self.in_flight, &claimed);
        drop(claiming);
        let count = claimed.len();
        let mut tasks = tokio::task::JoinSet::new();
        for job in claimed {
            let this = self.clone();
            tasks.spawn(async move { this.run(job).await });
        }
        let mut outcomes = Vec::with_capacity(count);
        while let Some(done) = tasks.join_next().await {
            match done.map_err(ApiError::internal)? {
                Ok(Some(outcome)) => outcomes.push(outcome),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "scheduler: a run failed; it will be retried"),
            }
        }
        let runs = self.record(outcomes).await?;
        Ok((Report { runs, notices }, count))
    }

    /// Leases up to [`BATCH`] due schedules, oldest due first.
    async fn claim(&self, location_id: Option<&str>) -> ApiResult<Vec<Claimed>> {
        let node = self.node_id.to_string();
        let now_ms = self.clock.now_ms();
        let location = location_id.map(str::to_string);
        self.store
            .write(move |conn| {
                let mut sql = Sql::new("UPDATE recurrings SET lease_owner = ");
                sql.bind(node.clone())
                    .push(", lease_until_ms = ")
                    .bind(now_ms + LEASE.as_millis() as i64)
                    .push(" WHERE id IN (");
                due(conn, &mut sql, "due_ts", now_ms, location.as_deref())?;
                sql.push(" AND (r.lease_until_ms IS NULL OR r.lease_until_ms < ")
                    .bind(now_ms)
                    .push(") ORDER BY r.due_ts LIMIT ")
                    .bind(BATCH as i64);
                if conn.dialect() == Dialect::Postgres {
                    sql.push(" FOR UPDATE OF r SKIP LOCKED");
                }
                sql.push(") RETURNING id");
                let ids: Vec<String> = conn
                    .query(&sql)?
                    .into_iter()
                    .filter_map(|r| r[0].as_str().map(str::to_string))
                    .collect();
                let mut claimed = load_claimed(conn, &ids)?;
                find_earlier(conn, &mut claimed)?;
                Ok(claimed)
            })
            .await
    }

    /// Whether due schedules of `location_id` are leased by another node.
    async fn held_elsewhere(&self, location_id: Option<&str>) -> ApiResult<bool> {
        let now_ms = self.clock.now_ms();
        let me = self.node_id.to_string();
        let location = location_id.map(str::to_string);
        self.store
            .read(move |conn| {
                let mut sql = Sql::new("");
                due(conn, &mut sql, "due_ts", now_ms, location.as_deref())?;
                sql.push(" AND r.lease_until_ms >= ")
                    .bind(now_ms)
                    .push(" AND r.lease_owner <> ")
                    .bind(me)
                    .push(" LIMIT 1");
                Ok(conn.query_one(&sql)?.is_some())
            })
            .await
    }

    /// One run of a leased schedule: its outcome, to be recorded, or
    /// `None` when it must be tried again later (the lease is kept).
    async fn run(&self, job: Claimed) -> ApiResult<Option<Ran>> {
        let id = job.record.id().to_string();
        let run_seq = job.record.int("run_seq").unwrap_or(0);
        let key = format!("{id}:{run_seq}");
        let cx = self.cx(&job);
        let outcome = match job.earlier {
            // The attempt's payment is still under way (or awaits the
            // reconciler): look again later.
            Some(row) if row[1].as_str() == Some("pending") => None,
            Some(row) => Some(outcome_of(
                row[0].as_str().unwrap_or_default(),
                row[2].as_int(),
                row[3].as_int(),
            )),
            None => self.charge(&cx, &job.record, &key).await,
        };
        match outcome {
            Some(outcome) => Ok(Some(Ran {
                cx,
                id,
                run_seq,
                tz: job.scope.tz,
                outcome,
            })),
            None => {
                self.postpone(&id).await?;
                Ok(None)
            }
        }
    }

    /// Charges the schedule's amount through the payments core. `None`:
    /// the core could not take the payment now (try again later).
    async fn charge(&self, cx: &Cx, r: &Record, key: &str) -> Option<RunOutcome> {
        let method = r.text("payment_method").unwrap_or("cc");
        let mut body = Map::new();
        body.insert(
            "action".into(),
            json!(if method == "ach" { "debit" } else { "sale" }),
        );
        body.insert("payment_method".into(), json!(method));
        body.insert("account_vault_id".into(), json!(r.text("account_vault_id")));
        body.insert("location_id".into(), json!(r.text("location_id")));
        body.insert(
            "transaction_amount".into(),
            json!(Money::from_cents(r.int("transaction_amount").unwrap_or(0)).to_text()),
        );
        if let Some(pt) = r.text("product_transaction_id") {
            body.insert("product_transaction_id".into(), json!(pt));
        }
        if let Some(description) = r.text("description").filter(|d| !d.is_empty()) {
            body.insert("description".into(), json!(description));
        }
        // The schedule's tags (a JSON array of titles) go on each run.
        if let Some(tags) = r.text("tags").and_then(|t| serde_json::from_str::<Json>(t).ok()) {
            body.insert("tags".into(), tags);
        }
        let input = match crate::payments::actions::parse(&body, false) {
            Ok(input) => input,
            Err(e) => {
                tracing::warn!(recurring = r.id(), error = %e, "scheduler: the schedule's payment is not valid");
                return Some(RunOutcome::Declined { transaction_id: None });
            }
        };
        let request = NewPayment {
            input,
            origin: Origin {
                source: TrxSource::RecurringBilling,
                recurring_id: Some(RecurringId::new(r.id())),
                recurring_run: Some(key.to_string()),
                quick_invoice_id: None,
                replaces: None,
                terminal: None,
                hosted_payment_page_id: None,
                duplicate_guard: None,
            },
            idempotency: None,
        };
        match self.payments.create(cx.clone(), request).await {
            Ok(reply) => {
                let tx = reply.transaction();
                Some(outcome_of(
                    tx["id"].as_str().unwrap_or_default(),
                    tx["status_id"].as_i64(),
                    tx["reason_code_id"].as_i64(),
                ))
            }
            // The attempt's run key is taken: another node is charging
            // this run (its lease was released or expired meanwhile) or
            // has charged it. Never a decline, whose retry would charge
            // the period again: the run is looked at again later, and then
            // records that transaction's outcome (`find_earlier`).
            Err(e @ ApiError::Conflict(_)) => {
                tracing::info!(recurring = r.id(), error = %e, "scheduler: the run is being charged elsewhere; looking again later");
                None
            }
            // Refused before the processor (an inactive product
            // transaction, a vault gone): a declined run, with the reason
            // in the log.
            Err(e) if e.status().is_client_error() => {
                tracing::info!(recurring = r.id(), error = %e, "scheduler: the payment was refused");
                Some(RunOutcome::Declined { transaction_id: None })
            }
            Err(e) => {
                tracing::warn!(recurring = r.id(), error = %e, "scheduler: the payment could not run; retrying later");
                None
            }
        }
    }

    /// Records the outcomes of a round in one write job (each only if this
    /// node still holds the schedule's lease for the attempt it claimed);
    /// if that job fails, one by one, so one bad row does not hold back
    /// the others. Returns the runs recorded.
    async fn record(&self, outcomes: Vec<Ran>) -> ApiResult<usize> {
        if outcomes.is_empty() {
            return Ok(0);
        }
        let node = self.node_id.to_string();
        let batch = outcomes.clone();
        let all = self
            .store
            .write(move |conn| {
                let mut runs = 0;
                for ran in &batch {
                    runs += usize::from(record_one(conn, &node, ran)?);
                }
                Ok(runs)
            })
            .await;
        match all {
            Ok(runs) => Ok(runs),
            Err(e) => {
                tracing::warn!(error = %e, "scheduler: recording a round failed; recording its runs one by one");
                let mut runs = 0;
                for ran in outcomes {
                    let node = self.node_id.to_string();
                    let id = ran.id.clone();
                    match self.store.write(move |conn| record_one(conn, &node, &ran)).await {
                        Ok(recorded) => runs += usize::from(recorded),
                        Err(e) => {
                            tracing::warn!(recurring = %id, error = %e, "scheduler: a run could not be recorded; it will be found by its run key")
                        }
                    }
                }
                Ok(runs)
            }
        }
    }

    /// Keeps the lease a while longer: the run is tried again after it.
    async fn postpone(&self, id: &str) -> ApiResult<()> {
        let (id, node) = (id.to_string(), self.node_id.to_string());
        let until = self.clock.now_ms() + LATER.as_millis() as i64;
        self.store
            .write(move |conn| {
                conn.execute(&Sql::with(
                    "UPDATE recurrings SET lease_until_ms = ? WHERE id = ? AND lease_owner = ?",
                    vec![until.into(), id.into(), node.into()],
                ))?;
                Ok(())
            })
            .await
    }

    /// Writes the notices that fell due to the mail outbox.
    async fn send_notices(&self, location_id: Option<&str>) -> ApiResult<usize> {
        let now_ms = self.clock.now_ms();
        let location = location_id.map(str::to_string);
        // Rounds with nothing to notify read, not write (one writer).
        let any = {
            let location = location.clone();
            self.store
                .read(move |conn| {
                    let mut sql = Sql::new("");
                    due(conn, &mut sql, "notify_ts", now_ms, location.as_deref())?;
                    sql.push(" LIMIT 1");
                    Ok(conn.query_one(&sql)?.is_some())
                })
                .await?
        };
        if !any {
            return Ok(0);
        }
        self.store
            .write(move |conn| {
                let mut sql = Sql::new("");
                due(conn, &mut sql, "notify_ts", now_ms, location.as_deref())?;
                sql.push(" ORDER BY r.notify_ts LIMIT 200");
                if conn.dialect() == Dialect::Postgres {
                    sql.push(" FOR UPDATE OF r SKIP LOCKED");
                }
                let ids: Vec<String> = conn
                    .query(&sql)?
                    .into_iter()
                    .filter_map(|r| r[0].as_str().map(str::to_string))
                    .collect();
                let mut sent = 0;
                for claimed in load_claimed(conn, &ids)? {
                    let r = &claimed.record;
                    let next = r.text("next_run_date").unwrap_or_default().to_string();
                    let location_ms = now_ms.saturating_add(claimed.offset_s.saturating_mul(1000));
                    if crate::mail::notices::recurring_notice(conn, location_ms, r)? {
                        sent += 1;
                    }
                    conn.execute(&Sql::with(
                        "UPDATE recurrings SET notified_date = ?, notify_ts = NULL WHERE id = ?",
                        vec![next.into(), r.id().into()],
                    ))?;
                }
                Ok(sent)
            })
            .await
    }

    /// Writes the quick-invoice reminders that fell due to the mail outbox
    /// and moves each invoice's `remind_ts` to its next reminder, in one
    /// write job (a reminder claimed is a reminder written).
    async fn send_invoice_reminders(&self, location_id: Option<&str>) -> ApiResult<usize> {
        let now_ms = self.clock.now_ms();
        let location = location_id.map(str::to_string);
        let due_sql = move |conn: &mut dyn crate::db::Conn, location: Option<&str>| -> ApiResult<Sql> {
            let wall = now_ms.div_euclid(1000);
            let horizon = wall + max_offset(conn)?;
            let mut sql = Sql::new(
                "SELECT q.id, l.clock_offset_s FROM quick_invoices q JOIN locations l ON l.id = q.location_id \
                 WHERE q.remind_ts <= ",
            );
            sql.bind(horizon)
                .push(" AND q.remind_ts <= l.clock_offset_s + ")
                .bind(wall);
            if let Some(location) = location {
                sql.push(" AND q.location_id = ").bind(location.to_string());
            }
            Ok(sql)
        };
        let any = {
            let location = location.clone();
            self.store
                .read(move |conn| {
                    let mut sql = due_sql(conn, location.as_deref())?;
                    sql.push(" LIMIT 1");
                    Ok(conn.query_one(&sql)?.is_some())
                })
                .await?
        };
        if !any {
            return Ok(0);
        }
        let public_url = self.public_url.clone();
        self.store
            .write(move |conn| {
                let mut sql = due_sql(conn, location.as_deref())?;
                sql.push(" ORDER BY q.remind_ts LIMIT 200");
                if conn.dialect() == Dialect::Postgres {
                    sql.push(" FOR UPDATE OF q SKIP LOCKED");
                }
                let due: Vec<(String, i64)> = conn
                    .query(&sql)?
                    .into_iter()
                    .filter_map(|r| Some((r[0].as_str()?.to_string(), r[1].as_int().unwrap_or(0))))
                    .collect();
                let mut sent = 0;
                for (id, offset_s) in due {
                    let now = now_ms.div_euclid(1000) + offset_s;
                    if crate::invoices::remind(conn, &id, now, &public_url)? {
                        sent += 1;
                    }
                }
                Ok(sent)
            })
            .await
    }

    /// Frees the schedules leased by nodes that are gone.
    async fn release_dead_leases(&self) -> ApiResult<()> {
        let released = self
            .store
            .release_dead_leases("recurrings", "1 = 1", &self.node_id)
            .await?;
        for (node, rows) in &released {
            tracing::warn!(node = %node, released = rows, "scheduler: took over the schedules of a stopped node");
        }
        if !released.is_empty() {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// The context a run acts in: the schedule's location and creator, at
    /// the location's time.
    fn cx(&self, job: &Claimed) -> Cx {
        Cx {
            user_id: job.record.text("created_user_id").unwrap_or_default().to_string(),
            scope: job.scope.clone(),
            now: self.clock.location_now(job.offset_s),
            outbound: Default::default(),
            keyring: self.keyring.clone(),
            public_url: self.public_url.clone(),
            perms: Arc::new(crate::auth::Perms::default()),
            sink: self.sink.clone(),
            user_receipts: None,
            epoch: None,
        }
    }
}

/// A run's outcome, to be recorded.
#[derive(Clone)]
struct Ran {
    cx: Cx,
    id: String,
    run_seq: i64,
    tz: chrono_tz::Tz,
    outcome: RunOutcome,
}

/// Records one outcome if `node` holds the schedule's lease for the
/// attempt. Returns whether a run (not an interrupted attempt) was
/// recorded.
fn record_one(conn: &mut dyn Conn, node: &str, ran: &Ran) -> ApiResult<bool> {
    let held = conn.query_one(&Sql::with(
        "SELECT lease_owner, run_seq FROM recurrings WHERE id = ?",
        vec![ran.id.clone().into()],
    ))?;
    let ours = held.is_some_and(|r| r[0].as_str() == Some(node) && r[1].as_int() == Some(ran.run_seq));
    if !ours {
        return Ok(false);
    }
    let mut sql = select_unscoped(&RECURRING);
    sql.push(" AND t.id = ").bind(ran.id.clone());
    let Some(row) = conn.query_one(&sql)? else {
        return Ok(false);
    };
    let old = Record::from_row(&RECURRING, row);
    let today = local_date(ran.cx.now, ran.tz);
    let new = transitions::after_run(&old, &ran.outcome, today);
    let new = crate::engine::save_record(&ran.cx, conn, &old, new)?;
    super::after_change(conn, &new, Some(&old))?;
    conn.execute(&Sql::with(
        "UPDATE recurrings SET lease_owner = NULL, lease_until_ms = NULL WHERE id = ?",
        vec![ran.id.clone().into()],
    ))?;
    Ok(!matches!(ran.outcome, RunOutcome::Interrupted))
}

/// Appends `SELECT r.id FROM recurrings r ... WHERE` the active schedules
/// whose `column` (`due_ts` or `notify_ts`) has come, at each one's
/// location time (wall time plus its test clock), at `location_id` when
/// given. The bound by the largest offset lets the due index narrow the
/// rows before the join checks each.
fn due(
    conn: &mut dyn Conn,
    sql: &mut Sql,
    column: &str,
    now_ms: i64,
    location_id: Option<&str>,
) -> ApiResult<()> {
    let wall = now_ms.div_euclid(1000);
    let horizon = wall + max_offset(conn)?;
    sql.push("SELECT r.id FROM recurrings r JOIN locations l ON l.id = r.location_id WHERE r.status = 'active' AND r.")
        .push(column)
        .push(" <= ")
        .bind(horizon)
        .push(" AND r.")
        .push(column)
        .push(" <= l.clock_offset_s + ")
        .bind(wall);
    if let Some(location) = location_id {
        sql.push(" AND r.location_id = ").bind(location.to_string());
    }
    Ok(())
}

/// The largest test clock offset of any location: due rows are looked for
/// up to wall time plus it, on the due index, then checked one by one.
fn max_offset(conn: &mut dyn Conn) -> ApiResult<i64> {
    Ok(conn
        .query_one(&Sql::new("SELECT MAX(clock_offset_s) FROM locations"))?
        .and_then(|r| r[0].as_int())
        .unwrap_or(0)
        .max(0))
}

/// The schedules `ids` with their locations' scope and clock.
fn load_claimed(conn: &mut dyn Conn, ids: &[String]) -> ApiResult<Vec<Claimed>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut sql = select_unscoped(&RECURRING);
    sql.push(" AND t.id IN (")
        .bind_list(ids.iter().cloned())
        .push(")");
    let records: Vec<Record> = conn
        .query(&sql)?
        .into_iter()
        .map(|row| Record::from_row(&RECURRING, row))
        .collect();
    let mut locations = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(records.len());
    for record in records {
        let location_id = record.text("location_id").unwrap_or_default().to_string();
        if !locations.contains_key(&location_id) {
            let row = conn.query_one(&Sql::with(
                "SELECT l.path, l.tz, l.clock_offset_s, EXISTS (SELECT 1 FROM locations c WHERE c.parent_id = l.id) \
                 FROM locations l WHERE l.id = ?",
                vec![location_id.clone().into()],
            ))?;
            let Some(row) = row else { continue };
            let scope = TenantScope::of_location(location_id.clone(), &row[0], &row[1], &row[3]);
            locations.insert(location_id.clone(), (scope, row[2].as_int().unwrap_or(0)));
        }
        let (scope, offset_s) = locations[&location_id].clone();
        out.push(Claimed {
            record,
            scope,
            offset_s,
            earlier: None,
        });
    }
    Ok(out)
}

/// Attaches to each claimed schedule the transaction of its attempt's run
/// key, if there is one (one query for the batch).
fn find_earlier(conn: &mut dyn Conn, claimed: &mut [Claimed]) -> ApiResult<()> {
    let key = |c: &Claimed| format!("{}:{}", c.record.id(), c.record.int("run_seq").unwrap_or(0));
    if claimed.is_empty() {
        return Ok(());
    }
    let mut sql = Sql::new("SELECT recurring_run, id, state, status_id, reason_code_id FROM transactions WHERE recurring_run IN (");
    sql.bind_list(claimed.iter().map(key)).push(")");
    let mut found: std::collections::HashMap<String, Vec<crate::db::Value>> = conn
        .query(&sql)?
        .into_iter()
        .filter_map(|mut r| {
            let k = r[0].as_str()?.to_string();
            Some((k, r.split_off(1)))
        })
        .collect();
    for c in claimed.iter_mut() {
        c.earlier = found.remove(&key(c));
    }
    Ok(())
}

/// A recorded transaction as a run's outcome.
fn outcome_of(id: &str, status_id: Option<i64>, reason: Option<i64>) -> RunOutcome {
    let status = status_id
        .and_then(|s| u16::try_from(s).ok())
        .and_then(StatusId::from_code);
    match status {
        Some(s) if s.is_approved() => RunOutcome::Approved {
            transaction_id: id.to_string(),
        },
        _ if reason == Some(INTERRUPTED_REASON) => RunOutcome::Interrupted,
        _ => RunOutcome::Declined {
            transaction_id: Some(id.to_string()).filter(|i| !i.is_empty()),
        },
    }
}
