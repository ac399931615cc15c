//! Opened hosted forms (`hosted_sessions`): what a page was opened with,
//! who opened it, and whether it has been submitted. The row's random id
//! is the capability the page posts back to; the hash-key that opened a
//! PayForm or AccountForm is remembered by digest, so once its form has
//! been submitted it opens nothing again.

use super::form::Kind;
use crate::db::{Conn, Sql, Value};
use crate::error::{ApiError, ApiResult};
use serde_json::Value as Json;

/// How long a submission holds its form against a second one; longer than
/// any payment takes, short enough that a crashed node does not lock a
/// payer out for long.
const CLAIM_S: i64 = 120;
/// Rows are kept this long after they expire: a result page reloaded a
/// little late still shows the result.
const KEEP_S: i64 = 24 * 3600;

/// An opened form.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    pub id: String,
    pub kind: Kind,
    pub user_id: String,
    pub developer_id: String,
    pub location_id: String,
    /// The payment page a `hostedpaymentpage` session shows.
    pub page_id: Option<String>,
    /// The request's decoded data (flags and fields; no card data).
    pub data: Json,
    /// The page that embeds the form, from the opening request's Referer:
    /// where results are posted.
    pub parent_origin: Option<String>,
    pub expires_ts: i64,
    pub used_ts: Option<i64>,
    /// What the submission answered (`{"transaction": ...}`).
    pub result: Option<Json>,
}

/// A form to open.
pub struct NewSession {
    pub kind: Kind,
    pub hash_digest: Option<String>,
    pub user_id: String,
    pub developer_id: String,
    pub location_id: String,
    pub page_id: Option<String>,
    pub data: Json,
    pub parent_origin: Option<String>,
    pub now: i64,
    pub expires_ts: i64,
}

const COLUMNS: &str =
    "id, kind, user_id, developer_id, location_id, page_id, data, parent_origin, expires_ts, used_ts, result";

fn from_row(row: Vec<Value>) -> Option<Session> {
    let text = |i: usize| row[i].as_str().map(str::to_string);
    Some(Session {
        id: text(0)?,
        kind: Kind::parse(row[1].as_str()?)?,
        user_id: text(2)?,
        developer_id: text(3)?,
        location_id: text(4)?,
        page_id: text(5),
        data: serde_json::from_str(row[6].as_str()?).ok()?,
        parent_origin: text(7),
        expires_ts: row[8].as_int()?,
        used_ts: row[9].as_int(),
        result: row[10].as_str().and_then(|r| serde_json::from_str(r).ok()),
    })
}

/// The form with this id, if there is one.
pub fn find(conn: &mut dyn Conn, id: &str) -> ApiResult<Option<Session>> {
    if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Ok(None);
    }
    let row = conn.query_one(&Sql::with(
        &format!("SELECT {COLUMNS} FROM hosted_sessions WHERE id = ?"),
        vec![id.into()],
    ))?;
    Ok(row.and_then(from_row))
}

fn by_digest(conn: &mut dyn Conn, digest: &str) -> ApiResult<Option<Session>> {
    let row = conn.query_one(&Sql::with(
        &format!("SELECT {COLUMNS} FROM hosted_sessions WHERE hash_digest = ?"),
        vec![digest.into()],
    ))?;
    Ok(row.and_then(from_row))
}

/// The refusal of a hash-key whose form was already submitted.
pub fn hash_key_used() -> ApiError {
    ApiError::Forbidden(
        "Hash key has already been used: a hash-key submits one form. Make a new link with a new timestamp."
            .into(),
    )
}

/// The refusal of a hash-key that opened a form with other data (two
/// links made with one timestamp).
pub fn hash_key_taken() -> ApiError {
    ApiError::Forbidden(
        "Hash key has already opened another form: each link needs a hash-key of its own. Make this link again with a new timestamp."
            .into(),
    )
}

/// Opens a form. A hash-key opens one form: opening it again (a reload)
/// shows the same form until it is submitted, and nothing after.
pub fn open(conn: &mut dyn Conn, new: NewSession) -> ApiResult<Session> {
    conn.execute(&Sql::with(
        "DELETE FROM hosted_sessions WHERE expires_ts < ?",
        vec![(new.now - KEEP_S).into()],
    ))?;
    if let Some(digest) = &new.hash_digest {
        if let Some(existing) = by_digest(conn, digest)? {
            return reopen_same(existing, &new.data);
        }
    }
    let id = crate::crypto::random_secret(32);
    // A hash-key opened by two requests at once: the second insert does
    // nothing and that request shows the first one's form.
    let inserted = conn.execute(&Sql::with(
        "INSERT INTO hosted_sessions (id, kind, hash_digest, user_id, developer_id, location_id, page_id, data, \
         parent_origin, created_ts, expires_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
         ON CONFLICT (hash_digest) DO NOTHING",
        vec![
            id.clone().into(),
            new.kind.name().into(),
            new.hash_digest.clone().into(),
            new.user_id.clone().into(),
            new.developer_id.clone().into(),
            new.location_id.clone().into(),
            new.page_id.clone().into(),
            new.data.to_string().into(),
            new.parent_origin.clone().into(),
            new.now.into(),
            new.expires_ts.into(),
        ],
    ))?;
    if inserted == 0 {
        let digest = new.hash_digest.as_deref().unwrap_or_default();
        return reopen_same(by_digest(conn, digest)?.ok_or_else(hash_key_used)?, &new.data);
    }
    Ok(Session {
        id,
        kind: new.kind,
        user_id: new.user_id,
        developer_id: new.developer_id,
        location_id: new.location_id,
        page_id: new.page_id,
        data: new.data,
        parent_origin: new.parent_origin,
        expires_ts: new.expires_ts,
        used_ts: None,
        result: None,
    })
}

/// The form a hash-key opened before, if any: reopening it (a reload)
/// shows that form, with the data it was first opened with, until it is
/// submitted; a used hash-key, or one that opened another kind of form,
/// opens nothing.
pub fn opened_by(conn: &mut dyn Conn, digest: &str, kind: Kind) -> ApiResult<Option<Session>> {
    match by_digest(conn, digest)? {
        None => Ok(None),
        Some(s) if s.kind != kind => Err(hash_key_used()),
        Some(s) => reopen(s).map(Some),
    }
}

/// [`reopen`], only for the data it was opened with.
fn reopen_same(existing: Session, data: &Json) -> ApiResult<Session> {
    if existing.data != *data {
        return Err(hash_key_taken());
    }
    reopen(existing)
}

fn reopen(existing: Session) -> ApiResult<Session> {
    if existing.used_ts.is_some() {
        return Err(hash_key_used());
    }
    Ok(existing)
}

/// What a submission found.
#[derive(Debug, PartialEq)]
pub enum Claim {
    /// This submission holds the form until it finishes or releases it.
    Held,
    /// Submitted before: its result.
    Used(Option<Json>),
    /// Another submission is running right now.
    Busy,
    /// Past its hash-key's lifetime.
    Expired,
}

/// Takes the form for one submission, so that two cannot both charge.
pub fn claim(conn: &mut dyn Conn, session: &Session, now: i64) -> ApiResult<Claim> {
    if session.expires_ts < now && session.used_ts.is_none() {
        return Ok(Claim::Expired);
    }
    let taken = conn.execute(&Sql::with(
        "UPDATE hosted_sessions SET claimed_until = ? WHERE id = ? AND used_ts IS NULL \
         AND (claimed_until IS NULL OR claimed_until < ?)",
        vec![(now + CLAIM_S).into(), session.id.clone().into(), now.into()],
    ))?;
    if taken == 1 {
        return Ok(Claim::Held);
    }
    match find(conn, &session.id)? {
        Some(s) if s.used_ts.is_some() => Ok(Claim::Used(s.result)),
        _ => Ok(Claim::Busy),
    }
}

/// Ends the forms a user's hash-keys opened that were not submitted yet
/// (their hash key was replaced: what it signed stops at once, opened or
/// not). Payment pages are not signed with it and stay.
pub fn close_signed_by(conn: &mut dyn Conn, user_id: &str) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "UPDATE hosted_sessions SET expires_ts = 0 \
         WHERE user_id = ? AND hash_digest IS NOT NULL AND used_ts IS NULL",
        vec![user_id.into()],
    ))?;
    Ok(())
}

/// Deletes every form user `user_id` opened (the user is being deleted):
/// a link signed by a user who is gone opens nothing, and a reload of a
/// submitted one finds no form.
pub fn forget_user(conn: &mut dyn Conn, user_id: &str) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "DELETE FROM hosted_sessions WHERE user_id = ?",
        vec![user_id.into()],
    ))?;
    Ok(())
}

/// Deletes the forms opened at `location_id` (the location is being
/// deleted; nothing else there holds it).
pub fn forget_location(conn: &mut dyn Conn, location_id: &str) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "DELETE FROM hosted_sessions WHERE location_id = ?",
        vec![location_id.into()],
    ))?;
    Ok(())
}

/// Records a submission's result: the form (and its hash-key) is used.
pub fn finish(conn: &mut dyn Conn, id: &str, now: i64, result: &Json) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "UPDATE hosted_sessions SET used_ts = ?, claimed_until = NULL, result = ? WHERE id = ?",
        vec![now.into(), result.to_string().into(), id.into()],
    ))?;
    Ok(())
}

/// Gives the form back after a submission that changed nothing (the payer
/// mistyped): it can be corrected and sent again.
pub fn release(conn: &mut dyn Conn, id: &str) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "UPDATE hosted_sessions SET claimed_until = NULL WHERE id = ? AND used_ts IS NULL",
        vec![id.into()],
    ))?;
    Ok(())
}
