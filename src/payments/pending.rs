//! The transaction row between the steps of a payment: what step 1
//! leaves for step 3 ([`Prepared`]), and the reads and writes of the row
//! that both new payments and follow-up actions share.

use super::actions::Action;
use super::call::Call;
use super::source::Source;
use super::state::PENDING;
use crate::db::{Conn, Sql, Value};
use crate::engine::record::Record;
use crate::engine::validate::for_create;
use crate::engine::{query, render, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::processor::*;
use crate::resources::{ACCOUNT_VAULT, TRANSACTION};
use serde_json::{json, Map, Value as Json};

/// What completion needs beyond the processor's answer.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub id: String,
    pub action: Action,
    pub call: Call,
    /// Store a vault from the card or account (save_account).
    pub save_account: Option<SaveAccount>,
    /// PUT actions: the new amount the action asks for.
    pub new_amount: Option<Money>,
    /// PUT actions: other fields the body changes.
    pub extra: Vec<(&'static str, Value)>,
    /// A new payment: the row as step 1 stored it, so that step 3 need
    /// not read it back (only the reconciler changes a pending row, and
    /// `store_pending` finds out if it did).
    pub stored: Option<Box<Record>>,
    /// The node that stored the pending row or set the mark
    /// (`pending_node`): step 3 finishes the row only while it is still
    /// this node's. A reconciler that took the node for dead claims the
    /// row (or clears the mark) first, and step 3 then fails.
    pub node: String,
}

#[derive(Clone, Debug)]
pub struct SaveAccount {
    pub contact_id: String,
    pub title: Option<String>,
    pub source: Source,
}

pub fn processor_ref(tx: &Record) -> ProcessorRef {
    ProcessorRef {
        reference: tx.text("processor_reference").unwrap_or_default().to_string(),
        auth_code: tx.text("auth_code").map(str::to_string),
        method: if tx.text("payment_method") == Some("ach") {
            PaymentMethod::Ach
        } else {
            PaymentMethod::Cc
        },
    }
}

/// The transaction with this id, outside any scope: for completing work
/// this process started on a record it already found in scope.
pub fn load(conn: &mut dyn Conn, id: &str) -> ApiResult<Record> {
    let mut sql = query::select_unscoped(&TRANSACTION);
    sql.push(" AND t.id = ").bind(id.to_string());
    conn.query_one(&sql)?
        .map(|r| Record::from_row(&TRANSACTION, r))
        .ok_or_else(|| ApiError::not_found("transaction"))
}

/// Writes the columns of `record` that differ from `before` (the row as
/// its node stored it), if the row is still `pending` and still that
/// node's (`pending_node`): a reconciler that took the node for dead
/// claims the row before it reverses it, and then this writes nothing.
/// Only changed columns:
/// SQLite rewrites the entry of every index whose columns appear in the
/// SET list, changed or not, and the completion changes none of the
/// location, api id, previous or velocity keys.
pub fn store_pending(conn: &mut dyn Conn, before: &Record, record: &Record) -> ApiResult<bool> {
    let mut sql = Sql::new("");
    push_store_pending(&mut sql, before, record, None);
    Ok(conn.execute(&sql)? == 1)
}

/// Appends the `UPDATE` of [`store_pending`] to `sql`; `computed` sets
/// one more column to an SQL expression (in place of its value in
/// `record`).
pub fn push_store_pending(sql: &mut Sql, before: &Record, record: &Record, computed: Option<(&str, &str)>) {
    sql.push("UPDATE transactions SET ");
    let mut first = true;
    for ((field, value), old) in record.fields().zip(&before.values) {
        // `state` always goes in: it is what the completion changes.
        if field.name == "id"
            || (value == old && field.name != "state")
            || computed.is_some_and(|(column, _)| column == field.column)
        {
            continue;
        }
        if !first {
            sql.push(", ");
        }
        first = false;
        sql.push(field.column).push(" = ").bind(value.clone());
    }
    if let Some((column, expression)) = computed {
        // Never the first: `state` always goes in.
        sql.push(", ").push(column).push(" = ").push(expression);
    }
    sql.push(" WHERE id = ")
        .bind(record.id().to_string())
        .push(" AND state = ")
        .bind(PENDING)
        .push(" AND pending_node = ")
        .bind(before.get("pending_node").clone());
}

/// A completed operation: the stored record, and its answer when it had
/// to be rendered inside the write job (to be kept for its
/// `Idempotency-Key` in the same transaction as the outcome).
pub struct Completed {
    pub record: Record,
    pub body: Option<Json>,
}

impl Completed {
    /// The record as stored; with an idempotency key its answer is
    /// rendered and kept now, otherwise rendering waits until the write
    /// job is over (on SQLite the one writer is the scarce resource).
    pub fn answer(
        cx: &Cx,
        conn: &mut dyn Conn,
        record: Record,
        idem_key: Option<&str>,
        status: u16,
    ) -> ApiResult<Completed> {
        let body = match idem_key {
            Some(key) => {
                let body = transaction_body(cx, &record);
                super::idempotency::finish(conn, &cx.user_id, key, status, &body)?;
                Some(body)
            }
            None => None,
        };
        Ok(Completed { record, body })
    }

    /// The answer, rendered now if the job did not.
    pub fn into_body(self, cx: &Cx) -> Json {
        match self.body {
            Some(body) => body,
            None => transaction_body(cx, &self.record),
        }
    }
}

/// `{"transaction": <record as rendered>}`, built in place: `json!` would
/// copy the whole rendered map once more, inside the write job.
pub fn transaction_body(cx: &Cx, record: &Record) -> Json {
    let mut body = Map::with_capacity(1);
    body.insert("transaction".into(), Json::Object(render(cx, record)));
    Json::Object(body)
}

/// The fields a processor answer sets on a transaction.
pub fn apply_answer(record: &mut Record, answer: &ProcessorResponse, method: &str) {
    record.set("status_id", answer.status_id.code() as i64);
    record.set("reason_code_id", answer.reason_code_id.code() as i64);
    record.set("verbiage", answer.verbiage.chars().take(64).collect::<String>());
    record.set(
        "response_message",
        answer.response_message.chars().take(255).collect::<String>(),
    );
    if let Some(code) = &answer.auth_code {
        record.set("auth_code", code.clone());
    }
    if !answer.processor_reference.is_empty() {
        record.set("processor_reference", answer.processor_reference.clone());
    }
    if method == "cc" {
        record.set("avs", answer.avs.map(|a| a.code()));
        record.set("avs_enhanced", answer.avs_enhanced.map(|a| a.code()));
        record.set("cvv_response", answer.cvv_response.map(|c| c.code()));
    }
}

/// Gives back a refund's reservation on its original.
pub fn release_refund(conn: &mut dyn Conn, refund: &Record) -> ApiResult<()> {
    if let Some(orig) = refund.text("previous_transaction_id") {
        conn.execute(&Sql::with(
            "UPDATE transactions SET refunded_amount = refunded_amount - ? WHERE id = ? AND refunded_amount >= ?",
            vec![
                refund.int("transaction_amount").unwrap_or(0).into(),
                orig.into(),
                refund.int("transaction_amount").unwrap_or(0).into(),
            ],
        ))?;
    }
    Ok(())
}

/// Stores the transaction's account as a vault on the contact.
pub fn save_vault(cx: &Cx, conn: &mut dyn Conn, tx: &Record, save: &SaveAccount) -> ApiResult<String> {
    let mut body = Map::new();
    body.insert("location_id".into(), json!(tx.text("location_id")));
    body.insert("contact_id".into(), json!(save.contact_id));
    if let Some(t) = &save.title {
        body.insert("title".into(), json!(t));
    }
    match &save.source {
        Source::Card(card) => {
            body.insert("payment_method".into(), json!("cc"));
            body.insert("account_number".into(), json!(card.data.pan));
            body.insert("exp_date".into(), json!(card.data.exp_date));
            body.insert(
                "account_holder_name".into(),
                json!(tx.text("account_holder_name")),
            );
            body.insert("billing_zip".into(), json!(tx.text("billing_zip")));
            body.insert("billing_address".into(), json!(tx.text("billing_street")));
        }
        Source::Bank(bank) => {
            body.insert("payment_method".into(), json!("ach"));
            body.insert("account_number".into(), json!(bank.account_number));
            body.insert("routing".into(), json!(bank.routing));
            body.insert("account_type".into(), json!(bank.account_type.as_str()));
            body.insert("account_holder_name".into(), json!(bank.account_holder_name));
            body.insert("is_company".into(), json!(bank.sec_code == "CCD"));
            body.insert("ach_sec_code".into(), json!(bank.sec_code));
        }
    }
    let body: Map<String, Json> = body.into_iter().filter(|(_, v)| !v.is_null()).collect();
    let input = for_create(&ACCOUNT_VAULT, &body).map_err(|e| {
        let mut errors = FieldErrors::new();
        for (field, messages) in e.0 {
            for m in messages {
                errors.add("save_account", format!("{field}: {m}"));
            }
        }
        ApiError::Validation(errors)
    })?;
    let (vault, _) = crate::engine::create(cx, conn, &ACCOUNT_VAULT, input)?;
    Ok(vault.id().to_string())
}

/// Removes the mark `node` set for `action` (its own, when the action
/// completes or is abandoned). Returns how many rows changed (0: the
/// mark is gone, cleared by a reconciler that took `node` for dead; a
/// mark another node set since is never touched).
pub fn clear_mark(conn: &mut dyn Conn, id: &str, action: Action, node: &str) -> ApiResult<u64> {
    let mut sql = Sql::new("UPDATE transactions SET pending_action = NULL, pending_node = NULL WHERE id = ");
    sql.bind(id.to_string())
        .push(" AND pending_action = ")
        .bind(action.name())
        .push(" AND pending_node = ")
        .bind(node);
    Ok(conn.execute(&sql)?)
}
