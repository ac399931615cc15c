//! Short credentials for Authorize.Net integrations. Their schema caps a
//! login at 25 characters and a transaction key at 16; clients that check
//! requests against it (the official Python SDK among them) refuse our
//! 32-character user ids and 40-character API keys before sending. A user
//! may hold one pair of short credentials (`POST
//! /v2/users/{id}/generateemulatorkey`), the key stored hashed like an API
//! key; the emulator accepts either kind.

use crate::auth::{require_covers_user, Caller};
use crate::crypto::verify_api_key;
use crate::db::{Conn, Sql};
use crate::engine::Cx;
use crate::error::{ApiError, ApiResult};
use crate::resources::USER;

pub const LOGIN_LEN: usize = 20;
pub const KEY_LEN: usize = 16;

/// Whether `login` has the shape of a short login (not a user id).
pub fn is_short_login(login: &str) -> bool {
    login.len() == LOGIN_LEN && login.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Gives user `id` a new pair (the old one stops working).
pub fn replace(cx: &Cx, conn: &mut dyn Conn, id: &str, login: &str, key_digest: &str) -> ApiResult<()> {
    crate::engine::query::find(conn, &USER, &cx.scope, id)?.ok_or_else(|| ApiError::not_found("user"))?;
    if id != cx.user_id {
        require_covers_user(conn, &cx.perms, id)?;
    }
    conn.execute(&Sql::with(
        "DELETE FROM emulator_credentials WHERE user_id = ?",
        vec![id.into()],
    ))?;
    conn.execute(&Sql::with(
        "INSERT INTO emulator_credentials (user_id, login, key_hash, created_ts) VALUES (?, ?, ?, ?)",
        vec![id.into(), login.into(), key_digest.into(), cx.now.into()],
    ))?;
    Ok(())
}

/// Deletes user `id`'s pair, if any (the user is being deleted).
pub fn forget(conn: &mut dyn Conn, id: &str) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "DELETE FROM emulator_credentials WHERE user_id = ?",
        vec![id.into()],
    ))?;
    Ok(())
}

/// The caller a short login and key stand for, with the developer id of
/// the request. Every failure is the same refusal.
pub fn authenticate(conn: &mut dyn Conn, developer_id: &str, login: &str, key: &str) -> ApiResult<Caller> {
    let invalid = || ApiError::Unauthorized("Invalid login or transaction key.".into());
    if !is_short_login(login) || key.len() > 64 || !crate::ids::looks_like_id(developer_id) {
        return Err(invalid());
    }
    let row = conn
        .query_one(&Sql::with(
            "SELECT user_id, key_hash FROM emulator_credentials WHERE login = ?",
            vec![login.into()],
        ))?
        .ok_or_else(invalid)?;
    let user_id = row[0].as_str().unwrap_or_default().to_string();
    if !verify_api_key(key, row[1].as_str().unwrap_or_default()) {
        return Err(invalid());
    }
    crate::auth::caller_of_user(conn, Some(developer_id), &user_id).map_err(|_| invalid())
}
