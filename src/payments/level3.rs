//! Level 3 records: one per card transaction, replaced whole by every
//! POST (there is no PUT) until the transaction is settled. Validation is
//! `crate::level3`.

use super::state::{self, Facts};
use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::engine::validate::blank;
use crate::engine::{query, Cx};
use crate::error::{ApiError, ApiResult};
use crate::ids::new_id;
use crate::level3::{validate, Network};
use crate::resources::TRANSACTION;
use serde_json::{json, Map, Value as Json};

fn network(tx: &Record) -> Network {
    match tx.text("account_type") {
        Some("visa") => Network::Visa,
        Some("mc") => Network::Mastercard,
        _ => Network::Other,
    }
}

fn shaped(id: &str, transaction_id: &str, data: &str) -> Json {
    json!({
        "id": id,
        "transaction_id": transaction_id,
        "level3_data": serde_json::from_str::<Json>(data).unwrap_or(Json::Null),
    })
}

/// `POST /v2/transactionlevel3s`.
pub fn post(cx: &Cx, conn: &mut dyn Conn, body: &Map<String, Json>) -> ApiResult<Json> {
    for key in body.keys() {
        if key != "transaction_id" && key != "level3_data" {
            let name = crate::engine::validate::echo_name(key);
            return Err(ApiError::field(
                name.clone(),
                format!("Unknown field {name} for transactionlevel3."),
            ));
        }
    }
    let tx_id = match body.get("transaction_id") {
        Some(Json::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        None | Some(Json::Null) | Some(Json::String(_)) => {
            return Err(ApiError::field("transaction_id", blank("transaction_id")))
        }
        // Ids are strings; a number is not one of ours, however it reads.
        Some(_) => {
            return Err(ApiError::field(
                "transaction_id",
                "Transaction Id must be a string.",
            ))
        }
    };
    let Some(tx) = query::find(conn, &TRANSACTION, &cx.scope, &tx_id)? else {
        return Err(ApiError::field(
            "transaction_id",
            "transaction_id provided is not valid",
        ));
    };
    if !state::level3_eligible(&tx) {
        return Err(ApiError::field("transaction_id", "not qualified for level 3"));
    }
    unchanged_once_settled(conn, &tx, "transaction_id")?;
    let data = validate(body.get("level3_data"), network(&tx)).map_err(ApiError::NestedValidation)?;
    let text = data.to_string();
    // One statement, so two first POSTs for one transaction at once (on
    // PostgreSQL) do not both insert: the later waits for the earlier and
    // replaces its data, as a later POST always does.
    let row = conn.query_one(&Sql::with(
        "INSERT INTO transaction_level3s (id, transaction_id, location_id, level3_data, created_user_id, \
         modified_user_id, created_ts, modified_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT (transaction_id) DO UPDATE SET level3_data = excluded.level3_data, \
         modified_user_id = excluded.modified_user_id, modified_ts = excluded.modified_ts \
         RETURNING id",
        vec![
            new_id().into(),
            tx_id.clone().into(),
            tx.text("location_id").unwrap_or_default().into(),
            text.clone().into(),
            cx.user_id.clone().into(),
            cx.user_id.clone().into(),
            cx.now.into(),
            cx.now.into(),
        ],
    ))?;
    let id = row
        .and_then(|r| r[0].as_str().map(str::to_string))
        .ok_or_else(|| ApiError::internal("the Level 3 upsert returned no id"))?;
    Ok(shaped(&id, &tx_id, &text))
}

/// Level 3 data goes out with the transaction's batch: once the batch is
/// settled (or settling) the data can be neither added, replaced nor
/// deleted, so what is kept is what went out.
fn unchanged_once_settled(conn: &mut dyn Conn, tx: &Record, field: &str) -> ApiResult<()> {
    let facts = Facts::load(conn, tx)?;
    if facts.settled {
        return Err(ApiError::field(
            field,
            "The transaction is settled: its Level 3 data went out with its batch and can no longer be \
             added, replaced or deleted.",
        ));
    }
    if facts.batch_processing {
        return Err(ApiError::field(
            field,
            "The transaction's batch is being settled; retry shortly.",
        ));
    }
    Ok(())
}

/// The Level 3 row with this id, with its transaction, inside the scope.
fn find(cx: &Cx, conn: &mut dyn Conn, id: &str) -> ApiResult<Option<(Record, String, String)>> {
    if !crate::ids::looks_like_id(id) {
        return Ok(None);
    }
    let row = conn.query_one(&Sql::with(
        "SELECT transaction_id, level3_data FROM transaction_level3s WHERE id = ?",
        vec![id.into()],
    ))?;
    let Some(row) = row else { return Ok(None) };
    let tx_id = row[0].as_str().unwrap_or_default().to_string();
    let data = row[1].as_str().unwrap_or_default().to_string();
    Ok(query::find(conn, &TRANSACTION, &cx.scope, &tx_id)?.map(|tx| (tx, tx_id, data)))
}

/// `GET /v2/transactionlevel3s/{id}`.
pub fn get(cx: &Cx, conn: &mut dyn Conn, id: &str) -> ApiResult<Json> {
    let (_, tx_id, data) = find(cx, conn, id)?.ok_or_else(|| ApiError::not_found("transactionlevel3"))?;
    Ok(shaped(id, &tx_id, &data))
}

/// `DELETE /v2/transactionlevel3s/{id}`: refused (422) once the
/// transaction is settled, as the data went out with the settlement.
pub fn delete(cx: &Cx, conn: &mut dyn Conn, id: &str) -> ApiResult<()> {
    let (tx, _, _) = find(cx, conn, id)?.ok_or_else(|| ApiError::not_found("transactionlevel3"))?;
    unchanged_once_settled(conn, &tx, "id")?;
    conn.execute(&Sql::with(
        "DELETE FROM transaction_level3s WHERE id = ?",
        vec![id.into()],
    ))?;
    Ok(())
}

/// The `transaction_level3` expand: the stored data, an empty shell when
/// the transaction qualifies but has none, null when it does not qualify.
pub fn embedded(_cx: &Cx, conn: &mut dyn Conn, tx: &Record) -> ApiResult<Json> {
    let row = conn.query_one(&Sql::with(
        "SELECT id, level3_data FROM transaction_level3s WHERE transaction_id = ?",
        vec![tx.id().into()],
    ))?;
    Ok(match row {
        Some(r) => shaped(
            r[0].as_str().unwrap_or_default(),
            tx.id(),
            r[1].as_str().unwrap_or("null"),
        ),
        None if state::level3_eligible(tx) => {
            json!({ "id": null, "transaction_id": tx.id(), "level3_data": null })
        }
        None => Json::Null,
    })
}
