//! Level 3 records: one per card transaction, replaced whole by every
//! POST (there is no PUT). Validation is `crate::level3`.

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
        _ => return Err(ApiError::field("transaction_id", blank("transaction_id"))),
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
    let data = validate(body.get("level3_data"), network(&tx)).map_err(ApiError::NestedValidation)?;
    let text = data.to_string();
    let existing = conn.query_one(&Sql::with(
        "SELECT id FROM transaction_level3s WHERE transaction_id = ?",
        vec![tx_id.clone().into()],
    ))?;
    let id = match existing.and_then(|r| r[0].as_str().map(str::to_string)) {
        Some(id) => {
            conn.execute(&Sql::with(
                "UPDATE transaction_level3s SET level3_data = ?, modified_user_id = ?, modified_ts = ? WHERE id = ?",
                vec![text.clone().into(), cx.user_id.clone().into(), cx.now.into(), id.clone().into()],
            ))?;
            id
        }
        None => {
            let id = new_id();
            conn.execute(&Sql::with(
                "INSERT INTO transaction_level3s (id, transaction_id, location_id, level3_data, created_user_id, \
                 modified_user_id, created_ts, modified_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                vec![
                    id.clone().into(),
                    tx_id.clone().into(),
                    tx.text("location_id").unwrap_or_default().into(),
                    text.clone().into(),
                    cx.user_id.clone().into(),
                    cx.user_id.clone().into(),
                    cx.now.into(),
                    cx.now.into(),
                ],
            ))?;
            id
        }
    };
    Ok(shaped(&id, &tx_id, &text))
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
    if Facts::load(conn, &tx)?.settled {
        return Err(ApiError::field(
            "id",
            "The transaction is settled; its Level 3 data went out with the batch and cannot be deleted.",
        ));
    }
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
