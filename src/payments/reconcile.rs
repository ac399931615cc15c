//! Reconciling what a crash left behind. A transaction still `pending`
//! whose node is gone may or may not have reached the processor: it is
//! claimed (so that its node, should it be alive after all, can no longer
//! record it), reversed there by its gateway id (a timeout reversal) and
//! recorded as declined, so no money moves without an acknowledged
//! record. A PUT action left marked is unmarked (its outcome is unknown;
//! the caller retries). A batch left Processing goes to Re-process (4) so
//! it can be settled again. Runs at start and then periodically; on
//! PostgreSQL several nodes may run it at once (every step is a
//! compare-and-set on the node that left the row).

use super::idempotency;
use super::state::PENDING;
use super::Payments;
use crate::db::{Conn, Sql, Value};
use crate::engine::events::{self, Action};
use crate::engine::query::TenantScope;
use crate::engine::record::Record;
use crate::engine::Cx;
use crate::error::ApiResult;
use crate::processor::{PaymentMethod, ProcessingStatus, ReasonCode, ReversalRequest, StatusId, TypeId};
use crate::resources::TRANSACTION;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// Own pending rows older than this are orphans too (their completion
/// write failed, for example during a database outage).
const OWN_ORPHAN_SECS: i64 = 120;

/// PostgreSQL: how long a node's lock must stay free before the node is
/// taken for dead. A lock is freed the moment its connection drops (a
/// failover, a terminated backend, a network blip) while the node lives
/// on and takes it again within seconds (`hold_node_lock` looks every
/// 2 s); reconciling its rows then would decline sales it is completing.
const DEATH_CONFIRMATION: Duration = Duration::from_secs(5);

/// The `pending_node` of a pending row a reconciler has claimed:
/// `reconciling:<the reconciler's node>`. The row's own node no longer
/// matches it, so its completion fails; the reconciler reverses the row
/// and declines it. A claim whose reconciler died is taken over.
const CLAIMED_BY: &str = "reconciling:";

fn claim_of(node: &str) -> String {
    format!("{CLAIMED_BY}{node}")
}

/// What one pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub reversed: usize,
    pub unmarked: usize,
    pub batches: usize,
}

fn cx_for(
    location_id: &str,
    now: i64,
    keyring: Arc<crate::crypto::Keyring>,
    sink: Arc<dyn events::EventSink>,
) -> Cx {
    Cx {
        user_id: String::new(),
        scope: TenantScope {
            location_id: location_id.to_string(),
            path: String::new(),
            tz: chrono_tz::UTC,
            leaf: true,
        },
        now,
        outbound: Default::default(),
        keyring,
        public_url: Arc::from(""),
        perms: Arc::new(crate::auth::Perms::default()),
        sink,
        user_receipts: None,
        epoch: None,
    }
}

/// One reconciliation pass.
pub async fn run_once(payments: &Payments, now: i64) -> ApiResult<Report> {
    let store = &payments.store;
    let keyring = payments.keyring.clone();
    let sink = payments.sink.clone();
    let me = payments.node_id.to_string();
    let mine = claim_of(&me);
    let nodes: Vec<(Option<String>, i64)> = store
        .read(|conn| {
            let rows = conn.query(&Sql::new(
                "SELECT t.pending_node, MIN(t.modified_ts - l.clock_offset_s) FROM transactions t \
                 JOIN locations l ON l.id = t.location_id \
                 WHERE t.state = 'pending' OR t.pending_action IS NOT NULL GROUP BY t.pending_node",
            ))?;
            Ok(rows
                .into_iter()
                .map(|r| (r[0].as_str().map(str::to_string), r[1].as_int().unwrap_or(0)))
                .collect())
        })
        .await?;
    // The `pending_node` values whose rows this pass takes ("": none).
    let mut dead = BTreeSet::new();
    // Other values, with the node whose liveness decides.
    let mut suspects = Vec::new();
    let mut own_orphans = false;
    for (node, oldest) in nodes {
        match node {
            None => {
                dead.insert(String::new());
            }
            Some(n) if n == me => own_orphans |= oldest < now - OWN_ORPHAN_SECS,
            // Claimed by this node, whose reversal failed: tried again.
            Some(n) if n == mine => {
                dead.insert(n);
            }
            Some(n) => {
                let holder = n.strip_prefix(CLAIMED_BY).unwrap_or(&n).to_string();
                suspects.push((n, holder));
            }
        }
    }
    dead.extend(confirmed_dead(store, suspects, &me).await?);
    let mut report = Report::default();
    if own_orphans {
        dead.insert(me.clone());
    }
    for node in dead {
        let cutoff = if node == me {
            now - OWN_ORPHAN_SECS
        } else {
            i64::MAX
        };
        let node2 = node.clone();
        let rows: Vec<Record> = store
            .read(move |conn| {
                let mut sql = crate::engine::query::select_unscoped(&TRANSACTION);
                sql.push(" AND (t.state = 'pending' OR t.pending_action IS NOT NULL) AND ");
                push_left_by(&mut sql, "t", &node2, cutoff);
                // Oldest first: a node that left more than a pass takes
                // has its longest-waiting rows settled first.
                sql.push(" ORDER BY t.modified_ts LIMIT 1000");
                Ok(conn
                    .query(&sql)?
                    .into_iter()
                    .map(|r| Record::from_row(&TRANSACTION, r))
                    .collect())
            })
            .await?;
        for tx in rows {
            let id = tx.id().to_string();
            let (node, mine) = (node.clone(), mine.clone());
            if tx.text("state") == Some(PENDING) {
                // Claimed before the reversal: from then on the row's node,
                // should it be alive after all, cannot record the
                // processor's answer (its write requires the row to be its
                // own), so a sale is never recorded approved and reversed.
                let claimed = store
                    .write(move |conn| claim(conn, &id, &node, &mine, cutoff))
                    .await?;
                if !claimed {
                    // Completed meanwhile, or claimed by another reconciler.
                    continue;
                }
                let processor = payments.processor.clone();
                let req = ReversalRequest {
                    gateway_id: tx.id().to_string(),
                    amount: crate::money::Money::from_cents(tx.int("transaction_amount").unwrap_or(0)),
                    method: if tx.text("payment_method") == Some("ach") {
                        PaymentMethod::Ach
                    } else {
                        PaymentMethod::Cc
                    },
                };
                let reversal = tokio::task::spawn_blocking(move || processor.reverse(&req))
                    .await
                    .map_err(crate::error::ApiError::internal)?;
                if let Err(e) = reversal {
                    // Retried on the next pass (the row stays claimed by
                    // this node): never declined before the processor
                    // confirmed the reversal.
                    tracing::warn!(transaction_id = tx.id(), error = %e, "timeout reversal failed");
                    continue;
                }
                let cx = cx_for(
                    tx.text("location_id").unwrap_or_default(),
                    now,
                    keyring.clone(),
                    sink.clone(),
                );
                let mine = claim_of(&me);
                let done = store
                    .write(move |conn| decline_interrupted(&cx, conn, tx, &mine))
                    .await?;
                report.reversed += done as usize;
            } else {
                let n = store.write(move |conn| unmark(conn, &id, &node, cutoff)).await?;
                report.unmarked += n as usize;
            }
        }
    }
    // Batches whose settling was interrupted: on SQLite any left at start,
    // on PostgreSQL those Processing for longer than a settle can take.
    let stale = if store.dialect() == crate::db::Dialect::Sqlite
        && !payments.started.load(std::sync::atomic::Ordering::Relaxed)
    {
        i64::MAX
    } else {
        now - OWN_ORPHAN_SECS
    };
    report.batches = store
        .write(move |conn| {
            Ok(conn.execute(&Sql::with(
                "UPDATE transaction_batches SET processing_status_id = ?, \
                 status_message = 'Settlement was interrupted; settle again.', modified_ts = ? \
                 WHERE processing_status_id = ? AND modified_ts - \
                 (SELECT l.clock_offset_s FROM locations l WHERE l.id = transaction_batches.location_id) < ?",
                vec![
                    (ProcessingStatus::Reprocess.code() as i64).into(),
                    now.into(),
                    (ProcessingStatus::Processing.code() as i64).into(),
                    stale.into(),
                ],
            ))? as usize)
        })
        .await?;
    store.write(move |conn| idempotency::expire(conn, now)).await?;
    store
        .write(move |conn| {
            Ok(conn.execute(&Sql::with(
                "DELETE FROM duplicate_guards WHERE taken_ts < ?",
                vec![(now - super::DuplicateGuard::LONGEST_WINDOW_SECS).into()],
            ))?)
        })
        .await?;
    payments.started.store(true, std::sync::atomic::Ordering::Relaxed);
    Ok(report)
}

/// Records an interrupted transaction as declined (after its reversal),
/// if it is still pending under `claim` (this reconciler's).
fn decline_interrupted(cx: &Cx, conn: &mut dyn Conn, mut tx: Record, claim: &str) -> ApiResult<bool> {
    let changed = conn.execute(&Sql::with(
        "UPDATE transactions SET state = 'done', pending_node = NULL, status_id = ?, reason_code_id = ?, \
         verbiage = ?, response_message = ?, auth_amount = 0, modified_ts = ? \
         WHERE id = ? AND state = 'pending' AND pending_node = ?",
        vec![
            (StatusId::Declined.code() as i64).into(),
            (ReasonCode(1531).code() as i64).into(),
            "Interrupted".into(),
            "The gateway stopped before the processor's answer was recorded; the request was reversed."
                .into(),
            cx.now.into(),
            tx.id().into(),
            claim.into(),
        ],
    ))?;
    if changed == 0 {
        return Ok(false);
    }
    // A refund's reservation on its original is given back.
    if tx.int("type_id") == Some(TypeId::Refund.code() as i64) {
        super::pending::release_refund(conn, &tx)?;
    }
    tx.set("state", "done");
    tx.set("status_id", StatusId::Declined.code() as i64);
    tx.set("pending_node", Value::Null);
    events::record(conn, cx, Action::Create, &tx, &[])?;
    idempotency::release_for_transaction(conn, tx.id())?;
    Ok(true)
}

/// Appends the condition on the transaction `table` (its name or alias
/// in the statement): left by `node` (`""`: naming no node), last changed
/// before `cutoff` in wall time (a location's test clock may run ahead).
fn push_left_by(sql: &mut Sql, table: &str, node: &str, cutoff: i64) {
    sql.push(table);
    if node.is_empty() {
        sql.push(".pending_node IS NULL");
    } else {
        sql.push(".pending_node = ").bind(node.to_string());
    }
    sql.push(" AND ")
        .push(table)
        .push(".modified_ts - (SELECT l.clock_offset_s FROM locations l WHERE l.id = ")
        .push(table)
        .push(".location_id) < ")
        .bind(cutoff);
}

/// Takes a pending row `node` left (see [`push_left_by`]) for this
/// reconciler: its `pending_node` becomes `claim`. False if the row was
/// completed, or claimed by another reconciler, meanwhile.
fn claim(conn: &mut dyn Conn, id: &str, node: &str, claim: &str, cutoff: i64) -> ApiResult<bool> {
    let mut sql = Sql::new("UPDATE transactions SET pending_node = ");
    sql.bind(claim.to_string())
        .push(" WHERE id = ")
        .bind(id.to_string())
        .push(" AND state = 'pending' AND ");
    push_left_by(&mut sql, "transactions", node, cutoff);
    Ok(conn.execute(&sql)? == 1)
}

/// Clears the mark of a PUT action `node` left (see [`push_left_by`]).
/// Only that node's: once another reconciler cleared it, a live node may
/// have marked the transaction again for an action now at the processor.
fn unmark(conn: &mut dyn Conn, id: &str, node: &str, cutoff: i64) -> ApiResult<u64> {
    let mut sql = Sql::new("UPDATE transactions SET pending_action = NULL, pending_node = NULL WHERE id = ");
    sql.bind(id.to_string())
        .push(" AND pending_action IS NOT NULL AND ");
    push_left_by(&mut sql, "transactions", node, cutoff);
    Ok(conn.execute(&sql)?)
}

/// The `pending_node` values of `suspects` (each with the node whose
/// lock decides) whose node is dead: its lock is free, and on PostgreSQL
/// still free [`DEATH_CONFIRMATION`] later.
async fn confirmed_dead(
    store: &crate::db::Store,
    suspects: Vec<(String, String)>,
    me: &str,
) -> ApiResult<Vec<String>> {
    let mut free = Vec::new();
    for (value, node) in suspects {
        if store.node_is_dead(&node, me).await? {
            free.push((value, node));
        }
    }
    if free.is_empty() || store.dialect() == crate::db::Dialect::Sqlite {
        return Ok(free.into_iter().map(|(value, _)| value).collect());
    }
    tokio::time::sleep(DEATH_CONFIRMATION).await;
    let mut dead = Vec::new();
    for (value, node) in free {
        if store.node_is_dead(&node, me).await? {
            dead.push(value);
        }
    }
    Ok(dead)
}
