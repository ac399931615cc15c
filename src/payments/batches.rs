//! Batches: approved card sales, completions, forces and refunds enter the
//! open batch of their product transaction (one is opened when none is);
//! settling closes it through the processor. A sale counts itself in one
//! stripe of the open batch's tallies rather than in the batch's row, so
//! the sales of one product transaction do not commit one at a time
//! (ADR 0025); reads see the row plus its tallies
//! (`transaction_batches_read`), and starting to settle folds them in.

use super::pending::{push_store_pending, store_pending};
use crate::db::{Conn, Dialect, Sql};
use crate::engine::events::{self, Action};
use crate::engine::record::Record;
use crate::engine::{insert_sql, update_record, Cx};
use crate::error::{ApiError, ApiResult};
use crate::ids::new_id;
use crate::processor::{ProcessingStatus, SettleOutcome, SettleResponse, StatusId};
use crate::resources::TRANSACTION_BATCH;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

/// On PostgreSQL, holds the row of the batch transaction `tx_id` is in
/// now (if any) until the job commits, and answers its id. A job that
/// changes a batched transaction and its batch takes the batch's row
/// first and the transaction's second, as every such job does (a settle
/// included), so two of them never deadlock; and a settle cannot close
/// the batch in between. `FOR NO KEY UPDATE`: strong enough for the
/// job's own later update of the batch, so two holders never deadlock
/// upgrading a weaker lock. On SQLite jobs never overlap: it holds
/// nothing.
pub fn hold(conn: &mut dyn Conn, tx_id: &str) -> ApiResult<Option<String>> {
    if conn.dialect() != Dialect::Postgres {
        return Ok(None);
    }
    let row = conn.query_one(&Sql::with(
        "SELECT b.id FROM transaction_batches b JOIN transactions t ON t.transaction_batch_id = b.id \
         WHERE t.id = ? FOR NO KEY UPDATE OF b",
        vec![tx_id.into()],
    ))?;
    Ok(row.and_then(|r| r[0].as_str().map(str::to_string)))
}

fn open_batch(conn: &mut dyn Conn, product_transaction_id: &str) -> ApiResult<Option<(String, i64)>> {
    let row = conn.query_one(&Sql::with(
        "SELECT id, batch_num FROM transaction_batches WHERE product_transaction_id = ? AND is_open = 1",
        vec![product_transaction_id.into()],
    ))?;
    Ok(row.map(|r| {
        (
            r[0].as_str().unwrap_or_default().to_string(),
            r[1].as_int().unwrap_or(0),
        )
    }))
}

/// The number of the batch a product transaction's next transaction goes
/// into (its `current_batch`): the open batch's, or the one after its
/// last batch when none is open (1 before its first).
pub fn current_number(conn: &mut dyn Conn, product_transaction_id: &str) -> ApiResult<i64> {
    Ok(conn.query_int(&Sql::with(
        "SELECT COALESCE(MAX(CASE WHEN is_open = 1 THEN batch_num END), MAX(batch_num) + 1, 1) \
         FROM transaction_batches WHERE product_transaction_id = ?",
        vec![product_transaction_id.into()],
    ))?)
}

/// Puts an approved transaction into its product transaction's open batch
/// (opening batch `n + 1` if there is none) and counts it there: sets its
/// `batch`, `transaction_batch_id` and `batch_seq`. `signed_amount` is
/// negative for refunds.
pub fn enter(cx: &Cx, conn: &mut dyn Conn, tx: &mut Record, signed_amount: i64) -> ApiResult<()> {
    place(cx, conn, tx)?;
    count(cx, conn, tx, signed_amount)?;
    Ok(())
}

/// The open batch this process last saw for each product transaction: a
/// hint that spares a sale the batch's lookup. It may be stale (the batch
/// began settling, or the job that opened it rolled back), and nothing
/// trusts it: [`count`] enters only a batch that is open and has its
/// stripes, and otherwise looks the batch up again.
static OPEN_BATCHES: LazyLock<Mutex<HashMap<String, (String, i64)>>> = LazyLock::new(Mutex::default);

/// Hints past this many product transactions are dropped all at once.
const MAX_OPEN_HINTS: usize = 4096;

fn open_hint(product_transaction_id: &str) -> Option<(String, i64)> {
    let hints = OPEN_BATCHES.lock().unwrap_or_else(PoisonError::into_inner);
    hints.get(product_transaction_id).cloned()
}

fn set_open_hint(product_transaction_id: &str, batch: (String, i64)) {
    let mut hints = OPEN_BATCHES.lock().unwrap_or_else(PoisonError::into_inner);
    if hints.len() >= MAX_OPEN_HINTS {
        hints.clear();
    }
    hints.insert(product_transaction_id.to_string(), batch);
}

/// Drops the hint if it still names `batch_id` (a newer one stays).
fn forget_open_hint(product_transaction_id: &str, batch_id: &str) {
    let mut hints = OPEN_BATCHES.lock().unwrap_or_else(PoisonError::into_inner);
    if hints
        .get(product_transaction_id)
        .is_some_and(|(id, _)| id == batch_id)
    {
        hints.remove(product_transaction_id);
    }
}

/// Names the open batch a transaction enters (opening batch `n + 1` if
/// there is none): its `transaction_batch_id` and `batch`. Takes no lock
/// and may name a batch that is no longer open (see [`OPEN_BATCHES`]):
/// [`count`] checks.
pub fn place(cx: &Cx, conn: &mut dyn Conn, tx: &mut Record) -> ApiResult<()> {
    let pt = tx.text("product_transaction_id").unwrap_or_default();
    if let Some((batch_id, batch_num)) = open_hint(pt) {
        tx.set("transaction_batch_id", batch_id);
        tx.set("batch", batch_num.to_string());
        return Ok(());
    }
    look_up_and_place(cx, conn, tx)
}

/// [`place`] from the database, never from the hint.
fn look_up_and_place(cx: &Cx, conn: &mut dyn Conn, tx: &mut Record) -> ApiResult<()> {
    let pt = tx.text("product_transaction_id").unwrap_or_default().to_string();
    let location = tx.text("location_id").unwrap_or_default().to_string();
    let mut batch = open_batch(conn, &pt)?;
    // A concurrent writer may open the batch first (PostgreSQL): the
    // insert then does nothing and the second look finds theirs.
    for _ in 0..3 {
        if batch.is_some() {
            break;
        }
        let next = conn.query_int(&Sql::with(
            "SELECT COALESCE(MAX(batch_num), 0) FROM transaction_batches WHERE product_transaction_id = ?",
            vec![pt.clone().into()],
        ))? + 1;
        let mut record = Record::empty(&TRANSACTION_BATCH);
        let id = new_id();
        record.set("id", id.clone());
        record.set("batch_num", next);
        record.set("product_transaction_id", pt.clone());
        record.set("location_id", location.clone());
        record.set("created_ts", cx.now);
        record.set("modified_ts", cx.now);
        record.set("processing_status_id", ProcessingStatus::ToSettle.code() as i64);
        record.set("is_open", 1);
        record.set("transaction_count", 0);
        record.set("total_amount", 0);
        record.set("settle_attempts", 0);
        record.set("entries", 0);
        record.set("created_user_id", cx.user_id.clone());
        record.set("modified_user_id", cx.user_id.clone());
        let mut sql = insert_sql(&record);
        sql.push(" ON CONFLICT DO NOTHING");
        // Its stripes come with it (a trigger, migration 27).
        if conn.execute(&sql)? == 1 {
            events::record(conn, cx, Action::Create, &record, &[])?;
            batch = Some((id, next));
        } else {
            batch = open_batch(conn, &pt)?;
        }
    }
    let Some((batch_id, batch_num)) = batch else {
        return Err(ApiError::Unavailable(
            "The batch could not be opened; retry shortly.".into(),
        ));
    };
    set_open_hint(&pt, (batch_id.clone(), batch_num));
    tx.set("transaction_batch_id", batch_id);
    tx.set("batch", batch_num.to_string());
    Ok(())
}

/// Stripes of an open batch's tallies (migration 27, ADR 0025), which a
/// trigger creates with the batch.
pub const STRIPES: i64 = 16;

/// The stripe a transaction counts in and how its place in the batch
/// (`batch_seq`) is numbered. The sandbox settles by the amount of the
/// last transaction to enter, so the numbers follow the order of entry.
/// SQLite runs one job at a time: one stripe, whose counter numbers them.
/// PostgreSQL spreads sales over the stripes by id (a retried count keeps
/// its stripe) and numbers them from one sequence, which no sale waits
/// for.
fn stripe_of(dialect: Dialect, tx_id: &str) -> (i64, &'static str) {
    match dialect {
        Dialect::Sqlite => (0, "entries"),
        Dialect::Postgres => {
            // FNV-1a: the same on every node and build, unlike std's hasher.
            let hash = tx_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
            ((hash % STRIPES as u64) as i64, "nextval('batch_entries')")
        }
    }
}

/// Where [`count`] counted a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// In the batch [`place`] named.
    AsPlaced,
    /// That batch began settling meanwhile: in the next open one.
    Moved,
}

/// Counts a [`place`]d transaction in one stripe of its batch's tallies
/// and numbers it (`batch_seq`, see [`stripe_of`]). Sales in
/// other stripes do not wait for it, and none waits for the batch's row:
/// the batch is only read. A batch that began settling since it was
/// placed has no stripes left (the settle folded them, see
/// [`begin_settle`]): the transaction goes to the next open batch.
pub fn count(cx: &Cx, conn: &mut dyn Conn, tx: &mut Record, signed_amount: i64) -> ApiResult<Counted> {
    let placed = tx.get("transaction_batch_id").clone();
    let (stripe, numbered) = stripe_of(conn.dialect(), tx.id());
    for _ in 0..3 {
        let mut sql = Sql::new("");
        push_tally(&mut sql, cx, tx, signed_amount, stripe, numbered);
        let seq = conn.query_one(&sql)?.and_then(|r| r[0].as_int());
        if let Some(seq) = seq {
            tx.set("batch_seq", seq);
            return Ok(if *tx.get("transaction_batch_id") == placed {
                Counted::AsPlaced
            } else {
                Counted::Moved
            });
        }
        // Closed, or never committed: look the open batch up afresh.
        let failed = tx.text("transaction_batch_id").unwrap_or_default().to_string();
        forget_open_hint(tx.text("product_transaction_id").unwrap_or_default(), &failed);
        look_up_and_place(cx, conn, tx)?;
    }
    Err(ApiError::Unavailable(
        "The batch could not be entered; retry shortly.".into(),
    ))
}

/// Appends the count of `tx` in `stripe` of its placed batch, which
/// answers its number in the batch (`numbered`) or no row if the batch is
/// no longer open.
fn push_tally(sql: &mut Sql, cx: &Cx, tx: &Record, signed_amount: i64, stripe: i64, numbered: &str) {
    let batch_id = tx.text("transaction_batch_id").unwrap_or_default().to_string();
    sql.push(
        "UPDATE batch_tallies SET transaction_count = transaction_count + 1, entries = entries + 1, \
         total_amount = total_amount + ",
    )
    .bind(signed_amount)
    .push(", modified_ts = ")
    .bind(cx.now)
    .push(" WHERE batch_id = ")
    .bind(batch_id.clone())
    .push(" AND stripe = ")
    .bind(stripe)
    .push(" AND EXISTS (SELECT 1 FROM transaction_batches b WHERE b.id = ")
    .bind(batch_id)
    .push(" AND b.is_open = 1) RETURNING ")
    .push(numbered);
}

/// [`count`], then [`store_pending`] of the completed row: `None` if the
/// row is no longer pending (the job must fail, which takes the count
/// back). On PostgreSQL both are one statement, a round trip less per
/// sale. It stores the row only where it counted it; where it could not
/// count (the placed batch began settling, or the hint named a batch
/// whose job has not committed), it does neither, and the two run apart.
pub fn count_and_store(
    cx: &Cx,
    conn: &mut dyn Conn,
    before: &Record,
    tx: &mut Record,
    signed_amount: i64,
) -> ApiResult<Option<Counted>> {
    if conn.dialect() == Dialect::Postgres {
        let (stripe, numbered) = stripe_of(Dialect::Postgres, tx.id());
        // Both parts run in full, on one snapshot; the outer SELECT says
        // what each did.
        let mut sql = Sql::new("WITH counted AS (");
        push_tally(&mut sql, cx, tx, signed_amount, stripe, numbered);
        sql.push(" AS seq), stored AS (");
        push_store_pending(
            &mut sql,
            before,
            tx,
            Some(("batch_seq", "(SELECT seq FROM counted)")),
        );
        sql.push(" AND EXISTS (SELECT 1 FROM counted) RETURNING 1) ")
            .push("SELECT (SELECT seq FROM counted), (SELECT COUNT(*) FROM stored)");
        let row = conn
            .query_one(&sql)?
            .ok_or_else(|| ApiError::internal("the count and store answered no row"))?;
        match (row[0].as_int(), row[1].as_int() == Some(1)) {
            (Some(seq), true) => {
                tx.set("batch_seq", seq);
                return Ok(Some(Counted::AsPlaced));
            }
            (Some(_), false) => return Ok(None),
            (None, _) => {}
        }
    }
    let counted = count(cx, conn, tx, signed_amount)?;
    Ok(store_pending(conn, before, tx)?.then_some(counted))
}

/// Changes a batched transaction's weight in its batch: `count` -1 when it
/// leaves (void), `amount` the signed change of the total.
pub fn adjust(conn: &mut dyn Conn, cx: &Cx, tx: &Record, count: i64, amount: i64) -> ApiResult<()> {
    if let Some(batch) = tx.text("transaction_batch_id") {
        conn.execute(&Sql::with(
            "UPDATE transaction_batches SET transaction_count = transaction_count + ?, \
             total_amount = total_amount + ?, modified_ts = ? WHERE id = ?",
            vec![count.into(), amount.into(), cx.now.into(), batch.into()],
        ))?;
    }
    Ok(())
}

/// Starts settling: the batch closes to new transactions and shows
/// Processing (5). Returns the amounts to settle in the order they
/// entered and the attempt number; `batch` (as it was) takes the count
/// and total it closed with, which sales still counting when it was read
/// may have changed.
pub fn begin_settle(conn: &mut dyn Conn, cx: &Cx, batch: &mut Record) -> ApiResult<(Vec<i64>, u32)> {
    let status = batch.int("processing_status_id").unwrap_or(1);
    if status == ProcessingStatus::Settled.code() as i64 {
        return Err(ApiError::field("id", "The batch is already settled."));
    }
    if status == ProcessingStatus::ForcedClosed.code() as i64 {
        return Err(ApiError::field(
            "id",
            "The batch was force-closed and cannot settle.",
        ));
    }
    let changed = conn.execute(&Sql::with(
        "UPDATE transaction_batches SET is_open = 0, processing_status_id = ?, \
         settle_attempts = settle_attempts + 1, modified_ts = ? WHERE id = ? AND processing_status_id IN (?, ?, ?)",
        vec![
            (ProcessingStatus::Processing.code() as i64).into(),
            cx.now.into(),
            batch.id().into(),
            (ProcessingStatus::ToSettle.code() as i64).into(),
            (ProcessingStatus::Error.code() as i64).into(),
            (ProcessingStatus::Reprocess.code() as i64).into(),
        ],
    ))?;
    if changed == 0 {
        return Err(ApiError::field(
            "id",
            "The batch is being settled; retry shortly.",
        ));
    }
    // A void, reversal or other action whose processor call is under way
    // would change what this batch settles after its amounts are read:
    // wait for it (the error rolls the closing back). Read after the
    // update above, so on PostgreSQL a mark committed while this job
    // waited for the batch's row (see `hold`) is seen.
    let in_flight = conn.query_int(&Sql::with(
        "SELECT COUNT(*) FROM transactions WHERE transaction_batch_id = ? AND pending_action IS NOT NULL",
        vec![batch.id().into()],
    ))?;
    if in_flight > 0 {
        return Err(ApiError::field(
            "id",
            "An action on a transaction of the batch is in progress; retry shortly.",
        ));
    }
    fold_tallies(conn, batch)?;
    forget_open_hint(
        batch.text("product_transaction_id").unwrap_or_default(),
        batch.id(),
    );
    let rows = conn.query(&Sql::with(
        "SELECT transaction_amount FROM transactions WHERE transaction_batch_id = ? \
         AND status_id NOT IN (?, ?) ORDER BY batch_seq ASC",
        vec![
            batch.id().into(),
            (StatusId::Voided.code() as i64).into(),
            (StatusId::Declined.code() as i64).into(),
        ],
    ))?;
    let amounts = rows.iter().filter_map(|r| r[0].as_int()).collect();
    let attempt = batch.int("settle_attempts").unwrap_or(0) + 1;
    Ok((amounts, attempt as u32))
}

/// Moves the open batch's tallies into its row and deletes them. On
/// PostgreSQL the delete waits for the sales counting in a stripe now and
/// takes in what they counted; a sale that comes to a stripe after finds
/// none and goes to the next batch (see [`count`]). Runs after the
/// batch's row is closed, in the same job, so the amounts read next
/// include every sale the batch counted; `batch` takes the row's final
/// count and total.
fn fold_tallies(conn: &mut dyn Conn, batch: &mut Record) -> ApiResult<()> {
    let folded = conn.query(&Sql::with(
        "DELETE FROM batch_tallies WHERE batch_id = ? RETURNING transaction_count, total_amount",
        vec![batch.id().into()],
    ))?;
    let count: i64 = folded.iter().filter_map(|r| r[0].as_int()).sum();
    let total: i64 = folded.iter().filter_map(|r| r[1].as_int()).sum();
    let row = conn.query_one(&Sql::with(
        "UPDATE transaction_batches SET transaction_count = transaction_count + ?, \
         total_amount = total_amount + ? WHERE id = ? RETURNING transaction_count, total_amount",
        vec![count.into(), total.into(), batch.id().into()],
    ))?;
    if let Some(row) = row {
        batch.set("transaction_count", row[0].clone());
        batch.set("total_amount", row[1].clone());
    }
    Ok(())
}

/// Records the processor's answer: Settled (2) with `batch_close_ts`,
/// `settlement_file_name` and each transaction's `settle_date`; or Error
/// (3) with `status_message`. `before` is the batch as it was before
/// `begin_settle`, so the change log shows the whole transition.
pub fn finish_settle(
    conn: &mut dyn Conn,
    cx: &Cx,
    before: Record,
    answer: Result<SettleResponse, String>,
    settle_date: &str,
) -> ApiResult<Record> {
    // The batch's row before its transactions' rows, the order every job
    // that writes both keeps (see `hold`).
    if conn.dialect() == Dialect::Postgres {
        conn.query(&Sql::with(
            "SELECT id FROM transaction_batches WHERE id = ? FOR NO KEY UPDATE",
            vec![before.id().into()],
        ))?;
    }
    let mut changes = vec![("is_open", 0.into())];
    let attempts = before.int("settle_attempts").unwrap_or(0) + 1;
    changes.push(("settle_attempts", attempts.into()));
    match answer {
        Ok(SettleResponse {
            outcome: SettleOutcome::Settled,
            settlement_file_name,
        }) => {
            changes.push((
                "processing_status_id",
                (ProcessingStatus::Settled.code() as i64).into(),
            ));
            changes.push(("batch_close_ts", cx.now.into()));
            changes.push(("settlement_file_name", settlement_file_name.into()));
            changes.push(("status_message", crate::db::Value::Null));
            // A voided transaction moved no money: nothing of it settled.
            conn.execute(&Sql::with(
                "UPDATE transactions SET settle_date = ?, modified_ts = ? WHERE transaction_batch_id = ? \
                 AND status_id <> ?",
                vec![
                    settle_date.into(),
                    cx.now.into(),
                    before.id().into(),
                    (crate::processor::StatusId::Voided.code() as i64).into(),
                ],
            ))?;
        }
        Ok(SettleResponse {
            outcome: SettleOutcome::Failed { status_message, .. },
            ..
        }) => {
            changes.push((
                "processing_status_id",
                (ProcessingStatus::Error.code() as i64).into(),
            ));
            changes.push(("status_message", status_message.into()));
        }
        Err(message) => {
            changes.push((
                "processing_status_id",
                (ProcessingStatus::Error.code() as i64).into(),
            ));
            changes.push(("status_message", message.into()));
        }
    }
    let input = crate::engine::validate::UpdateInput::named(&TRANSACTION_BATCH, changes)?;
    let final_status = input
        .changes
        .iter()
        .find(|(f, _)| f.name == "processing_status_id")
        .map(|(_, v)| v.clone())
        .unwrap_or(crate::db::Value::Null);
    // The log compares with `before`; the row itself shows Processing and
    // must end in the final status even when that equals `before`'s.
    let record = update_record(cx, conn, before, input)?;
    conn.execute(&Sql::with(
        "UPDATE transaction_batches SET processing_status_id = ?, is_open = 0, settle_attempts = ? WHERE id = ?",
        vec![final_status, attempts.into(), record.id().into()],
    ))?;
    Ok(record)
}
