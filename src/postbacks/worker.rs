//! The delivery worker inside `serve`. One loop per process leases due
//! deliveries, sends each in its own task and writes the outcomes back,
//! the outcomes and the next lease in one transaction.
//!
//! - A lease names this node and lasts [`LEASE`]. With PostgreSQL the
//!   claim uses `FOR UPDATE SKIP LOCKED`, so nodes sharing a database never
//!   take the same row; the leases of a node that died (its advisory lock
//!   is free) are released at once, those of a hung node when they expire.
//! - Only the oldest pending event of a record (per config) is eligible,
//!   so the events of one record arrive in order.
//! - At most [`PER_CONFIG`] deliveries of one config are in flight in a
//!   process (the loop's and [`Deliveries::run_once`]'s together): a
//!   receiver that hangs holds its own slots, not everyone's.
//! - The log's times (`last_attempt_ts`, `next_attempt_ts`,
//!   `delivered_ts`) are on the clock of the delivery's location, as its
//!   `created_ts` is: a location whose test clock moved sees them in its
//!   own time. `due_ms` stays wall time, which the worker compares with
//!   its clock (a test clock's move shifts it back).

use super::send::{self, Outgoing};
use super::signing;
use crate::clock::Clock;
use crate::crypto::Keyring;
use crate::db::{Conn, Dialect, Sql, Store, Value};
use crate::error::ApiResult;
use base64::Engine as _;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Notify};

/// Deliveries in flight in this process.
pub const MAX_IN_FLIGHT: usize = 512;
/// Deliveries of one config in flight in this process.
pub const PER_CONFIG: usize = 64;
/// How long a lease keeps other nodes off a row: well above one attempt.
pub const LEASE: Duration = Duration::from_secs(60);
/// How often the worker looks for due rows when nothing wakes it.
const POLL: Duration = Duration::from_millis(50);
/// Least time between two rounds: under load, one round writes many
/// outcomes and claims many rows instead of a round per event (every round
/// is a write, and SQLite has one writer). Adds at most this to a delay.
const ROUND_GAP: Duration = Duration::from_millis(5);
/// How often leases of other nodes are checked for dead holders.
const LEASE_CHECK: Duration = Duration::from_secs(1);
/// How often old log rows are purged.
const PURGE_EVERY: Duration = Duration::from_secs(600);
/// Delivered rows are kept this long in the log, failed ones longer.
pub const KEEP_DELIVERED_S: i64 = 7 * 86_400;
pub const KEEP_FAILED_S: i64 = 30 * 86_400;

/// A leased delivery.
struct Claimed {
    id: String,
    config_id: String,
    resource: String,
    event_type: String,
    payload: String,
    attempts: i64,
}

/// Where and how a config's deliveries go, credentials opened.
struct Target {
    url: String,
    basic_auth: Option<String>,
    signing_key: Option<Vec<u8>>,
    /// Why the config cannot be used (a credential that does not open).
    broken: Option<String>,
    max_attempts: i64,
    interval_s: i64,
    /// The test clock offset of the config's location, in seconds: what
    /// its log's times add to wall time.
    clock_offset_s: i64,
}

/// The outcome of one attempt, to be written back.
#[derive(Clone)]
struct Done {
    id: String,
    config_id: String,
    status: &'static str,
    attempts: i64,
    code: Option<u16>,
    error: Option<String>,
    excerpt: String,
    /// On the location's clock, as `next_attempt_ts`.
    attempt_ts: i64,
    /// Wall time.
    due_ms: i64,
    next_attempt_ts: Option<i64>,
}

/// The delivery service of this process: starts the background loop and
/// runs a round on demand ([`Deliveries::run_once`], for the test clock
/// and tests). Cheap to clone.
#[derive(Clone)]
pub struct Deliveries {
    store: Store,
    keyring: Arc<Keyring>,
    node_id: String,
    allow_private: bool,
    clock: Clock,
    wake: Arc<Notify>,
    /// Deliveries in flight in this process, per config.
    in_flight: InFlight,
}

/// Deliveries in flight per config, shared by the loop and `run_once`.
type InFlight = Arc<std::sync::Mutex<HashMap<String, usize>>>;

impl Deliveries {
    pub fn new(
        store: Store,
        keyring: Arc<Keyring>,
        node_id: String,
        allow_private: bool,
        clock: Clock,
        wake: Arc<Notify>,
    ) -> Deliveries {
        Deliveries {
            store,
            keyring,
            node_id,
            allow_private,
            clock,
            wake,
            in_flight: InFlight::default(),
        }
    }

    /// Tells the loop to look for due rows now (new events, a redelivery).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Starts the background loop; it runs for the life of the process.
    pub fn start(&self) {
        let mut worker = self.worker(None);
        tokio::spawn(async move { worker.run().await });
    }

    fn worker(&self, only_location: Option<&str>) -> Worker {
        Worker {
            store: self.store.clone(),
            keyring: self.keyring.clone(),
            node_id: self.node_id.clone(),
            allow_private: self.allow_private,
            clock: self.clock.clone(),
            wake: self.wake.clone(),
            in_flight: self.in_flight.clone(),
            total: 0,
            only_location: only_location.map(str::to_string),
        }
    }

    /// Delivers everything due now of `location_id` (every location when
    /// `None`; a test clock's move delivers only its own location's) and
    /// waits for the outcomes: round after round (a record's next event
    /// becomes eligible once the one before it is settled) until a round
    /// finds nothing. Due rows that another worker (this process's loop,
    /// another node) holds are waited for, up to [`RUN_ONCE_WAIT`], and
    /// counted. Returns the attempts made.
    pub async fn run_once(&self, location_id: Option<&str>) -> ApiResult<usize> {
        let mut worker = self.worker(location_id);
        let mut attempts = 0;
        let mut finished = Vec::new();
        let mut waited: std::collections::HashSet<String> = std::collections::HashSet::new();
        let give_up = tokio::time::Instant::now() + RUN_ONCE_WAIT;
        // Bounded: each round settles or reschedules what it claimed.
        for _ in 0..1000 {
            let (claimed, targets) = worker
                .step(std::mem::take(&mut finished), MAX_IN_FLIGHT)
                .await
                .map_err(|(e, _)| e)?;
            if claimed.is_empty() {
                let held = self.due_and_held(location_id).await?;
                if held.is_empty() || tokio::time::Instant::now() >= give_up {
                    return Ok(attempts + waited.len());
                }
                waited.extend(held);
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            attempts += claimed.len();
            let mut sends = tokio::task::JoinSet::new();
            for delivery in claimed {
                if let Some(target) = targets.get(&delivery.config_id).cloned() {
                    worker.take_slot(&delivery.config_id);
                    let (clock, allow_private) = (self.clock.clone(), self.allow_private);
                    sends.spawn(async move { attempt(delivery, target, allow_private, &clock).await });
                }
            }
            while let Some(done) = sends.join_next().await {
                let done = done.map_err(crate::error::ApiError::internal)?;
                worker.release_slot(&done.config_id);
                finished.push(done);
            }
        }
        worker.step(finished, 0).await.map_err(|(e, _)| e)?;
        Ok(attempts + waited.len())
    }

    /// When the next retry of `location_id` falls due, in the location's
    /// time (epoch seconds), if one is waiting: a test clock's move steps
    /// to it, so each attempt is made at its own moment. Rows already due
    /// (being sent, or waiting behind an earlier event of their record)
    /// are not waited for here; configs switched off send nothing.
    pub async fn next_due(&self, location_id: &str) -> ApiResult<Option<i64>> {
        let now_ms = self.clock.now_ms();
        let location = location_id.to_string();
        self.store
            .read(move |conn| {
                let row = conn.query_one(&Sql::with(
                    "SELECT MIN(d.due_ms), MIN(l.clock_offset_s) FROM postback_deliveries d \
                     JOIN postback_configs c ON c.id = d.postback_config_id \
                     JOIN locations l ON l.id = d.location_id \
                     WHERE d.location_id = ? AND d.status = 'pending' AND c.is_active = 1 AND d.due_ms > ?",
                    vec![location.into(), now_ms.into()],
                ))?;
                Ok(row.and_then(|r| {
                    let due_ms = r[0].as_int()?;
                    // Rounded up: the step to it must make it due.
                    Some((due_ms + 999).div_euclid(1000) + r[1].as_int().unwrap_or(0))
                }))
            })
            .await
    }

    /// Due rows whose attempt is under way elsewhere (leased).
    async fn due_and_held(&self, location_id: Option<&str>) -> ApiResult<Vec<String>> {
        let now_ms = self.clock.now_ms();
        let location_id = location_id.map(str::to_string);
        self.store
            .read(move |conn| {
                let mut sql =
                    Sql::new("SELECT id FROM postback_deliveries WHERE status = 'pending' AND due_ms <= ");
                sql.bind(now_ms).push(" AND lease_until_ms >= ").bind(now_ms);
                if let Some(location) = location_id {
                    sql.push(" AND location_id = ").bind(location);
                }
                sql.push(" LIMIT 1000");
                Ok(conn
                    .query(&sql)?
                    .into_iter()
                    .filter_map(|r| r[0].as_str().map(str::to_string))
                    .collect())
            })
            .await
    }
}

/// How long [`Deliveries::run_once`] waits for attempts that another
/// worker is making: above one attempt's 10 s limit.
const RUN_ONCE_WAIT: Duration = Duration::from_secs(15);

struct Worker {
    store: Store,
    keyring: Arc<Keyring>,
    node_id: String,
    allow_private: bool,
    clock: Clock,
    wake: Arc<Notify>,
    in_flight: InFlight,
    /// This worker's own deliveries in flight (the loop's limit).
    total: usize,
    /// Claims only this location's rows (a test clock's move).
    only_location: Option<String>,
}

impl Worker {
    async fn run(&mut self) {
        let wake = self.wake.clone();
        let (tx, mut rx) = mpsc::unbounded_channel::<Done>();
        let mut finished: Vec<Done> = Vec::new();
        let mut last_lease_check = tokio::time::Instant::now() - LEASE_CHECK;
        let mut last_purge = tokio::time::Instant::now();
        let mut last_round = tokio::time::Instant::now();
        loop {
            tokio::time::sleep_until(last_round + ROUND_GAP).await;
            last_round = tokio::time::Instant::now();
            if last_lease_check.elapsed() >= LEASE_CHECK {
                last_lease_check = tokio::time::Instant::now();
                if let Err(e) = self.release_dead_leases().await {
                    tracing::warn!(error = %e, "postbacks: checking other nodes' leases failed");
                }
            }
            if last_purge.elapsed() >= PURGE_EVERY {
                last_purge = tokio::time::Instant::now();
                if let Err(e) = self.purge().await {
                    tracing::warn!(error = %e, "postbacks: purging the delivery log failed");
                }
            }
            while let Ok(done) = rx.try_recv() {
                self.release_slot(&done.config_id);
                finished.push(done);
            }
            let capacity = MAX_IN_FLIGHT - self.total.min(MAX_IN_FLIGHT);
            let mut claimed_full = false;
            match self.step(std::mem::take(&mut finished), capacity).await {
                Ok((claimed, targets)) => {
                    claimed_full = capacity > 0 && claimed.len() == capacity;
                    for delivery in claimed {
                        let Some(target) = targets.get(&delivery.config_id).cloned() else {
                            continue;
                        };
                        self.take_slot(&delivery.config_id);
                        let tx = tx.clone();
                        let (allow_private, clock) = (self.allow_private, self.clock.clone());
                        tokio::spawn(async move {
                            let done = attempt(delivery, target, allow_private, &clock).await;
                            let _ = tx.send(done);
                        });
                    }
                }
                Err((e, unwritten)) => {
                    // Kept for the next round; the leases still hold.
                    tracing::warn!(error = %e, "postbacks: a delivery round failed; retrying");
                    finished = unwritten;
                    tokio::time::sleep(POLL).await;
                }
            }
            if claimed_full {
                continue;
            }
            tokio::select! {
                Some(done) = rx.recv() => {
                    self.release_slot(&done.config_id);
                    finished.push(done);
                }
                _ = wake.notified() => {}
                _ = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// Writes back `finished` and leases up to `capacity` due rows, in one
    /// transaction. On failure the outcomes are handed back.
    async fn step(
        &mut self,
        finished: Vec<Done>,
        capacity: usize,
    ) -> Result<(Vec<Claimed>, HashMap<String, Arc<Target>>), (crate::error::ApiError, Vec<Done>)> {
        let in_flight = self.in_flight_now();
        let now_ms = self.clock.now_ms();
        if finished.is_empty() {
            // Idle rounds read before they write.
            let due = self.store.read(move |conn| any_claimable(conn, now_ms)).await;
            match due {
                Ok(false) => return Ok((Vec::new(), HashMap::new())),
                Ok(true) => {}
                Err(e) => return Err((e, finished)),
            }
            if capacity == 0 {
                return Ok((Vec::new(), HashMap::new()));
            }
        }
        let node = self.node_id.clone();
        let keyring = self.keyring.clone();
        let only_location = self.only_location.clone();
        let job_outcomes = finished.clone();
        let result = self
            .store
            .write(move |conn| {
                for chunk in job_outcomes.chunks(OUTCOMES_PER_STATEMENT) {
                    record_outcomes(conn, &node, chunk)?;
                }
                let claimed = claim(
                    conn,
                    &node,
                    now_ms,
                    capacity,
                    &in_flight,
                    only_location.as_deref(),
                )?;
                let targets = targets(conn, &keyring, &claimed)?;
                Ok((claimed, targets))
            })
            .await;
        result.map_err(|e| (e, finished))
    }

    /// The deliveries in flight in this process now, per config.
    fn in_flight_now(&self) -> HashMap<String, usize> {
        self.in_flight.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn take_slot(&mut self, config_id: &str) {
        self.total += 1;
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        *in_flight.entry(config_id.to_string()).or_default() += 1;
    }

    fn release_slot(&mut self, config_id: &str) {
        self.total = self.total.saturating_sub(1);
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = in_flight.get_mut(config_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                in_flight.remove(config_id);
            }
        }
    }

    /// Frees the rows leased by nodes that are gone (PostgreSQL: their
    /// advisory lock is free; SQLite: any earlier process).
    async fn release_dead_leases(&self) -> ApiResult<()> {
        let released = self
            .store
            .release_dead_leases("postback_deliveries", "status = 'pending'", &self.node_id)
            .await?;
        for (node, rows) in &released {
            tracing::warn!(node = %node, released = rows, "postbacks: took over the deliveries of a stopped node");
        }
        if !released.is_empty() {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Deletes log rows past their keeping time, on their location's
    /// clock (their `last_attempt_ts` is on it): a location whose test
    /// clock moved sees its rows age with it.
    async fn purge(&self) -> ApiResult<()> {
        let now = self.clock.now_ts();
        self.store.write(move |conn| purge(conn, now)).await
    }
}

/// `SELECT d.id FROM postback_deliveries d ... WHERE <claimable now>`:
/// pending, due, not leased, of an active config that still exists, and
/// the oldest pending event of its record for that config.
fn claimable(sql: &mut Sql, now_ms: i64) {
    sql.push(
        "SELECT d.id FROM postback_deliveries d JOIN postback_configs c ON c.id = d.postback_config_id \
         WHERE d.status = 'pending' AND c.is_active = 1 AND d.due_ms <= ",
    )
    .bind(now_ms)
    .push(" AND (d.lease_until_ms IS NULL OR d.lease_until_ms < ")
    .bind(now_ms)
    .push(
        ") AND NOT EXISTS (SELECT 1 FROM postback_deliveries e WHERE e.postback_config_id = d.postback_config_id \
         AND e.record_id = d.record_id AND e.status = 'pending' AND e.seq < d.seq)",
    );
}

/// Whether a claim would lease anything now (capacity aside): an idle
/// round answers from this read and writes nothing. The same rows as the
/// claim: pending rows it would pass over (an inactive config's, a
/// deleted config's, a record's later events while an earlier one waits
/// for its retry) once made every node run a write claim every 50 ms
/// for as long as they stayed.
fn any_claimable(conn: &mut dyn Conn, now_ms: i64) -> ApiResult<bool> {
    let mut sql = Sql::new("");
    claimable(&mut sql, now_ms);
    sql.push(" LIMIT 1");
    // Planned for its values, as the claim is (see `claim`).
    sql.replan = true;
    Ok(conn.query_one(&sql)?.is_some())
}

/// Deletes the log rows past their keeping time, each on its location's
/// clock (their `last_attempt_ts` is on it: a location whose test clock
/// moved sees its rows age with it), and the deliveries of configs that
/// are gone. A config's deliveries go with it (`before_delete`), but an
/// event whose job read the config list before the delete committed (or
/// kept it under an earlier epoch, ADR 0024) may still write one after:
/// such a row is never claimed and goes here.
fn purge(conn: &mut dyn Conn, now: i64) -> ApiResult<()> {
    let moved = conn.query(&Sql::new(
        "SELECT id, clock_offset_s FROM locations WHERE clock_offset_s <> 0",
    ))?;
    let delete = |conn: &mut dyn Conn, location: Option<&str>, local_now: i64| {
        let mut sql =
            Sql::new("DELETE FROM postback_deliveries WHERE ((status = 'delivered' AND last_attempt_ts < ");
        sql.bind(local_now - KEEP_DELIVERED_S)
            .push(") OR (status = 'failed' AND last_attempt_ts < ")
            .bind(local_now - KEEP_FAILED_S)
            .push("))");
        if let Some(location) = location {
            sql.push(" AND location_id = ").bind(location.to_string());
        }
        conn.execute(&sql)
    };
    // Wall time first: every location's rows are at least that old on
    // their own clock (clocks only move forward).
    delete(conn, None, now)?;
    for row in moved {
        let offset = row[1].as_int().unwrap_or(0);
        delete(conn, row[0].as_str(), now.saturating_add(offset))?;
    }
    conn.execute(&Sql::new(
        "DELETE FROM postback_deliveries WHERE status = 'pending' AND NOT EXISTS \
         (SELECT 1 FROM postback_configs c WHERE c.id = postback_deliveries.postback_config_id)",
    ))?;
    Ok(())
}

/// Leases up to `capacity` due rows (of `only_location`, when given): the
/// oldest pending event of each record, at most [`PER_CONFIG`] in flight
/// per config counting those already `in_flight` in this process.
fn claim(
    conn: &mut dyn Conn,
    node: &str,
    now_ms: i64,
    capacity: usize,
    in_flight: &HashMap<String, usize>,
    only_location: Option<&str>,
) -> ApiResult<Vec<Claimed>> {
    if capacity == 0 {
        return Ok(Vec::new());
    }
    let saturated: Vec<String> = in_flight
        .iter()
        .filter(|(_, n)| **n >= PER_CONFIG)
        .map(|(c, _)| c.clone())
        .collect();
    if conn.dialect() == Dialect::Postgres {
        // A generic plan cached while the table was small can turn the
        // anti-join quadratic once a backlog builds (seen: a 36 s claim
        // over 16k pending rows); planning each claim afresh costs ~1 ms.
        conn.execute(&Sql::new("SET LOCAL plan_cache_mode = force_custom_plan"))?;
    }
    let mut sql = Sql::new("UPDATE postback_deliveries SET lease_owner = ");
    sql.bind(node.to_string())
        .push(", lease_until_ms = ")
        .bind(now_ms + LEASE.as_millis() as i64)
        .push(" WHERE id IN (");
    claimable(&mut sql, now_ms);
    if !saturated.is_empty() {
        sql.push(" AND d.postback_config_id NOT IN (")
            .bind_list(saturated.iter().cloned())
            .push(")");
    }
    if let Some(location) = only_location {
        sql.push(" AND d.location_id = ").bind(location.to_string());
    }
    sql.push(" ORDER BY d.seq LIMIT ").bind(capacity as i64);
    if conn.dialect() == Dialect::Postgres {
        sql.push(" FOR UPDATE OF d SKIP LOCKED");
    }
    sql.push(") RETURNING id, postback_config_id, resource, event_type, payload, attempts, seq");
    let mut rows = conn.query(&sql)?;
    // RETURNING does not keep the subquery's order.
    rows.sort_by_key(|r| r[6].as_int().unwrap_or(0));
    // A config's rows beyond its room are let go again, in this same
    // transaction: the oldest are kept.
    let mut taken: HashMap<String, usize> = HashMap::new();
    let mut over = Vec::new();
    rows.retain(|r| {
        let config = text(&r[1]);
        let count = taken.entry(config.clone()).or_default();
        *count += 1;
        let kept = *count + in_flight.get(&config).copied().unwrap_or(0) <= PER_CONFIG;
        if !kept {
            over.push(text(&r[0]));
        }
        kept
    });
    for ids in over.chunks(500) {
        let mut sql = Sql::new(
            "UPDATE postback_deliveries SET lease_owner = NULL, lease_until_ms = NULL WHERE id IN (",
        );
        sql.bind_list(ids.iter().cloned()).push(")");
        conn.execute(&sql)?;
    }
    Ok(rows
        .into_iter()
        .map(|r| Claimed {
            id: text(&r[0]),
            config_id: text(&r[1]),
            resource: text(&r[2]),
            event_type: text(&r[3]),
            payload: text(&r[4]),
            attempts: r[5].as_int().unwrap_or(0),
        })
        .collect())
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// The targets of the claimed rows' configs, credentials opened.
fn targets(
    conn: &mut dyn Conn,
    keyring: &Keyring,
    claimed: &[Claimed],
) -> ApiResult<HashMap<String, Arc<Target>>> {
    let mut ids: Vec<&str> = claimed.iter().map(|c| c.config_id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut out = HashMap::new();
    if ids.is_empty() {
        return Ok(out);
    }
    let mut sql = Sql::new(
        "SELECT c.id, c.url, c.basic_auth_username, c.basic_auth_password, c.signing_secret, c.number_of_attempts, \
         c.attempt_interval, COALESCE(l.clock_offset_s, 0) \
         FROM postback_configs c LEFT JOIN locations l ON l.id = c.location_id WHERE c.id IN (",
    );
    sql.bind_list(ids.iter().map(|id| id.to_string())).push(")");
    for row in conn.query(&sql)? {
        let mut broken = None;
        let mut open = |v: &Value| -> Option<String> {
            let sealed = v.as_str()?;
            match keyring.decrypt(sealed) {
                Ok(plain) if !plain.is_empty() => Some(plain),
                Ok(_) => None,
                Err(_) => {
                    broken =
                        Some("a credential of the config cannot be opened with the data keys".to_string());
                    None
                }
            }
        };
        let user = open(&row[2]);
        let password = open(&row[3]);
        let secret = open(&row[4]);
        let basic_auth = match (user, password) {
            (Some(u), Some(p)) => Some(base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))),
            _ => None,
        };
        let signing_key = match secret.map(|s| signing::parse_secret(&s)) {
            Some(Ok(key)) => Some(key),
            Some(Err(_)) => {
                broken = Some("the signing secret of the config is not valid".to_string());
                None
            }
            None => None,
        };
        out.insert(
            text(&row[0]),
            Arc::new(Target {
                url: text(&row[1]),
                basic_auth,
                signing_key,
                broken,
                max_attempts: row[5].as_int().unwrap_or(1).max(1),
                interval_s: row[6].as_int().unwrap_or(300).max(1),
                clock_offset_s: row[7].as_int().unwrap_or(0),
            }),
        );
    }
    Ok(out)
}

/// Outcomes written by one statement (10 parameters each).
const OUTCOMES_PER_STATEMENT: usize = 200;

/// Writes attempts' outcomes in one statement, each only if this node
/// still holds its lease (a node presumed dead does not overwrite its
/// successor's work).
fn record_outcomes(conn: &mut dyn Conn, node: &str, outcomes: &[Done]) -> ApiResult<()> {
    if outcomes.is_empty() {
        return Ok(());
    }
    let mut sql = Sql::new(
        "UPDATE postback_deliveries SET status = v.column2, attempts = v.column3, last_response_code = v.column4, \
         last_error = v.column5, last_response = v.column6, last_attempt_ts = v.column7, next_attempt_ts = v.column8, \
         delivered_ts = v.column9, due_ms = v.column10, lease_owner = NULL, lease_until_ms = NULL, \
         modified_ts = v.column7 FROM (VALUES ",
    );
    for (i, done) in outcomes.iter().enumerate() {
        if i > 0 {
            sql.push(", ");
        }
        let delivered_ts = (done.status == "delivered").then_some(done.attempt_ts);
        sql.push("(CAST(").bind(done.id.clone());
        sql.push(" AS TEXT), CAST(").bind(done.status);
        sql.push(" AS TEXT), CAST(").bind(done.attempts);
        sql.push(" AS BIGINT), CAST(")
            .bind(Value::from(done.code.map(i64::from)));
        sql.push(" AS BIGINT), CAST(")
            .bind(Value::from(done.error.clone()));
        sql.push(" AS TEXT), CAST(").bind(done.excerpt.clone());
        sql.push(" AS TEXT), CAST(").bind(done.attempt_ts);
        sql.push(" AS BIGINT), CAST(")
            .bind(Value::from(done.next_attempt_ts));
        sql.push(" AS BIGINT), CAST(").bind(Value::from(delivered_ts));
        sql.push(" AS BIGINT), CAST(").bind(done.due_ms);
        sql.push(" AS BIGINT))");
    }
    sql.push(") AS v WHERE postback_deliveries.id = v.column1 AND postback_deliveries.lease_owner = ")
        .bind(node.to_string());
    conn.execute(&sql)?;
    Ok(())
}

/// The form body of a delivery: exactly type, resource,
/// number_of_attempts and data.
fn form_body(event_type: &str, resource: &str, number_of_attempts: i64, data: &str) -> String {
    form_urlencoded::Serializer::new(String::new())
        .append_pair("type", event_type)
        .append_pair("resource", resource)
        .append_pair("number_of_attempts", &number_of_attempts.to_string())
        .append_pair("data", data)
        .finish()
}

/// One attempt: send, then decide delivered, retry or failed.
async fn attempt(delivery: Claimed, target: Arc<Target>, allow_private: bool, clock: &Clock) -> Done {
    let number = delivery.attempts + 1;
    let outcome = match &target.broken {
        Some(reason) => send::Outcome {
            status: None,
            error: Some(reason.clone()),
            excerpt: String::new(),
        },
        None => {
            let body = form_body(
                &delivery.event_type,
                &delivery.resource,
                number,
                &delivery.payload,
            );
            let mut headers = Vec::new();
            if let Some(auth) = &target.basic_auth {
                headers.push(("Authorization".to_string(), format!("Basic {auth}")));
            }
            if let Some(key) = &target.signing_key {
                let ts = clock.now_ts();
                headers.push((signing::HEADER_ID.to_string(), delivery.id.clone()));
                headers.push((signing::HEADER_TIMESTAMP.to_string(), ts.to_string()));
                headers.push((
                    signing::HEADER_SIGNATURE.to_string(),
                    signing::sign(key, &delivery.id, ts, body.as_bytes()),
                ));
            }
            let out = Outgoing {
                url: target.url.clone(),
                headers,
                body: body.into_bytes(),
            };
            send::post(&out, allow_private).await
        }
    };
    // `due_ms` in wall time, for the worker; the log's times on the
    // location's clock.
    let now_ms = clock.now_ms();
    let local_s = |ms: i64| ms.div_euclid(1000).saturating_add(target.clock_offset_s);
    let (status, due_ms, next_attempt_ts) = if outcome.acknowledged() {
        ("delivered", now_ms, None)
    } else if number >= target.max_attempts {
        ("failed", now_ms, None)
    } else {
        let due = now_ms + target.interval_s * 1000;
        ("pending", due, Some(local_s(due)))
    };
    if status == "failed" {
        tracing::warn!(delivery = %delivery.id, attempts = number, code = ?outcome.status, error = ?outcome.error, "postback failed after its last attempt");
    }
    Done {
        id: delivery.id,
        config_id: delivery.config_id,
        status,
        attempts: number,
        code: outcome.status,
        error: outcome.error,
        excerpt: outcome.excerpt,
        attempt_ts: local_s(now_ms),
        due_ms,
        next_attempt_ts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A migrated SQLite database of its own, with one location.
    fn store() -> (Store, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("ferrogate-postbacks-{}", crate::ids::new_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&format!("sqlite://{}", dir.join("t.db").display()), 2).unwrap();
        store.migrate().unwrap();
        store
            .write_blocking(|c| {
                c.execute(&Sql::new(
                    "INSERT INTO locations (id, path, name, created_ts, modified_ts) VALUES ('l', '/l/', 'L', 0, 0)",
                ))?;
                Ok(())
            })
            .unwrap();
        (store, dir)
    }

    fn config(c: &mut dyn Conn, id: &str) -> ApiResult<()> {
        c.execute(&Sql::with(
            "INSERT INTO postback_configs (id, location_id, resource, url, on_create, on_update, on_delete, is_active, \
             format, number_of_attempts, attempt_interval, expands, created_ts, modified_ts) \
             VALUES (?, 'l', 'contact', 'https://example.com/hook', 1, 1, 1, 1, 'api-default', 3, 300, '', 0, 0)",
            vec![id.into()],
        ))?;
        Ok(())
    }

    fn delivery(c: &mut dyn Conn, id: &str, config: &str, record: &str, due_ms: i64) -> ApiResult<()> {
        c.execute(&Sql::with(
            "INSERT INTO postback_deliveries (id, postback_config_id, location_id, resource, event_type, record_id, \
             payload, status, attempts, due_ms, event_ms, created_ts, modified_ts) \
             VALUES (?, ?, 'l', 'contact', 'create', ?, '{}', 'pending', 0, ?, 0, 0, 0)",
            vec![id.into(), config.into(), record.into(), due_ms.into()],
        ))?;
        Ok(())
    }

    fn claimable_at(store: &Store, now_ms: i64) -> bool {
        store.write_blocking(move |c| any_claimable(c, now_ms)).unwrap()
    }

    fn run(store: &Store, sql: &'static str) {
        store
            .write_blocking(move |c| {
                c.execute(&Sql::new(sql))?;
                Ok(())
            })
            .unwrap();
    }

    /// An idle round looks for what a claim would take, nothing else:
    /// pending rows the claim passes over (an inactive config's, a
    /// deleted config's, a record's later event while an earlier one
    /// waits for its retry) made every node write a claim every 50 ms.
    #[test]
    fn idle_rounds_see_only_what_a_claim_takes() {
        let (store, dir) = store();
        let now = 1_000_000;
        store
            .write_blocking(move |c| {
                config(c, "cfg")?;
                delivery(c, "d1", "cfg", "r1", now)
            })
            .unwrap();
        assert!(claimable_at(&store, now));
        assert!(!claimable_at(&store, now - 1), "not due yet");

        run(
            &store,
            "UPDATE postback_configs SET is_active = 0 WHERE id = 'cfg'",
        );
        assert!(!claimable_at(&store, now), "an inactive config's delivery waits");
        run(
            &store,
            "UPDATE postback_configs SET is_active = 1 WHERE id = 'cfg'",
        );
        assert!(
            claimable_at(&store, now),
            "and goes once the config is active again"
        );

        // A record's first event waits for its retry; the next is due.
        run(
            &store,
            "UPDATE postback_deliveries SET due_ms = 2000000 WHERE id = 'd1'",
        );
        store
            .write_blocking(move |c| delivery(c, "d2", "cfg", "r1", now))
            .unwrap();
        assert!(!claimable_at(&store, now), "a later event waits for the first");

        // A delivery written after its config was deleted.
        run(&store, "DELETE FROM postback_deliveries");
        store
            .write_blocking(move |c| delivery(c, "orphan", "gone", "r1", now))
            .unwrap();
        assert!(
            !claimable_at(&store, now),
            "a deleted config's delivery is never claimed"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    /// The purge takes the pending deliveries of deleted configs along
    /// with the old log rows, and leaves the rest.
    #[test]
    fn the_purge_drops_deliveries_of_deleted_configs() {
        let (store, dir) = store();
        store
            .write_blocking(|c| {
                config(c, "cfg")?;
                delivery(c, "kept", "cfg", "r1", 0)?;
                delivery(c, "orphan", "gone", "r1", 0)?;
                purge(c, 0)
            })
            .unwrap();
        let left: Vec<String> = store
            .write_blocking(|c| {
                Ok(
                    c.query(&Sql::new("SELECT id FROM postback_deliveries ORDER BY id"))?
                        .into_iter()
                        .map(|r| text(&r[0]))
                        .collect(),
                )
            })
            .unwrap();
        assert_eq!(left, ["kept"]);
        let _ = std::fs::remove_dir_all(dir);
    }
}
