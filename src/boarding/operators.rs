//! Operators' bearer tokens for the offer administration endpoints:
//! made by `ferrogate boarding token create`, stored as SHA-256 digests
//! (like API keys), shown once.

use crate::crypto::{hash_api_key, random_secret};
use crate::db::{Conn, Sql};
use crate::error::{ApiError, ApiResult};
use crate::ids::new_id;
use serde::Serialize;

/// Prefix that makes a token recognisable (in a leaked file, by a scanner).
const PREFIX: &str = "fgop_";

#[derive(Debug, Serialize)]
pub struct NewToken {
    #[serde(rename = "tokenId")]
    pub token_id: String,
    pub name: String,
    pub token: String,
}

pub fn create(conn: &mut dyn Conn, name: &str, now: i64) -> ApiResult<NewToken> {
    let token = format!("{PREFIX}{}", random_secret(40));
    let id = new_id();
    conn.execute(&Sql::with(
        "INSERT INTO boarding_operator_tokens (id, token_hash, name, created_ts) VALUES (?, ?, ?, ?)",
        vec![
            id.clone().into(),
            hash_api_key(&token).into(),
            name.into(),
            now.into(),
        ],
    ))?;
    Ok(NewToken {
        token_id: id,
        name: name.to_string(),
        token,
    })
}

/// Revokes a token; false when there was no such live token.
pub fn revoke(conn: &mut dyn Conn, id: &str, now: i64) -> ApiResult<bool> {
    Ok(conn.execute(&Sql::with(
        "UPDATE boarding_operator_tokens SET revoked_ts = ? WHERE id = ? AND revoked_ts IS NULL",
        vec![now.into(), id.into()],
    ))? > 0)
}

/// Checks a presented token. The digest of a random 40-character secret
/// is looked up directly: nothing about it leaks through timing.
pub fn authenticate(conn: &mut dyn Conn, presented: Option<&str>) -> ApiResult<String> {
    let Some(token) = presented.filter(|t| t.starts_with(PREFIX) && t.len() <= 128) else {
        return Err(ApiError::Unauthorized(
            "Send an operator token as Authorization: Bearer <token> (ferrogate boarding token create)."
                .into(),
        ));
    };
    conn.query_one(&Sql::with(
        "SELECT id FROM boarding_operator_tokens WHERE token_hash = ? AND revoked_ts IS NULL",
        vec![hash_api_key(token).into()],
    ))?
    .and_then(|r| r[0].as_str().map(str::to_string))
    .ok_or_else(|| ApiError::Unauthorized("Invalid or revoked operator token.".into()))
}
