//! Session tokens: the token method of authentication. A user signs in
//! with username and password (`POST /v2/token`) and gets a random token,
//! kept only as its SHA-256 digest. A session expires after 15 idle
//! minutes of its user's location time (so a test clock moves it), each
//! use starting the 15 minutes again; signing out, a new password or a
//! disabled user ends it. Consecutive failed sign-ins lock the user for a
//! while, counted in the database so every node sees them.

use crate::clock::Clock;
use crate::crypto::{hash_api_key, random_secret};
use crate::db::{Conn, Sql, Value};
use crate::error::ApiResult;
use serde_json::{json, Value as Json};

/// Idle time after which a session ends.
pub const IDLE_SECONDS: i64 = 15 * 60;
/// Consecutive failed sign-ins that lock a user, and for how long.
pub const MAX_FAILED_SIGN_INS: i64 = 5;
pub const LOCK_SECONDS: i64 = 15 * 60;

/// A user as a sign-in sees it.
#[derive(Clone, Debug)]
pub struct Account {
    pub user_id: String,
    pub password_hash: Option<String>,
    pub active: bool,
    /// The user's location time now.
    pub now: i64,
    /// Until when failed sign-ins lock the user out (location time).
    pub locked_until: Option<i64>,
    profile: Profile,
}

#[derive(Clone, Debug)]
struct Profile {
    username: String,
    first_name: Option<String>,
    last_name: Option<String>,
    primary_location_id: String,
    timezone: Option<String>,
    user_type_id: Option<i64>,
    requires_new_password: bool,
}

/// The user signing in as `username`, if there is one.
pub fn account(conn: &mut dyn Conn, clock: &Clock, username: &str) -> ApiResult<Option<Account>> {
    let row = conn.query_one(&Sql::with(
        "SELECT u.id, u.password_hash, u.status, u.login_locked_until, u.username, u.first_name, \
         u.last_name, u.location_id, u.tz, u.user_type_id, u.requires_new_password, l.clock_offset_s \
         FROM users u JOIN locations l ON l.id = u.location_id WHERE u.username = ?",
        vec![username.into()],
    ))?;
    Ok(row.map(|r| {
        let text = |i: usize| r[i].as_str().map(str::to_string);
        Account {
            user_id: text(0).unwrap_or_default(),
            password_hash: text(1),
            active: r[2].as_int() == Some(1),
            locked_until: r[3].as_int(),
            now: clock.location_now(r[11].as_int().unwrap_or(0)),
            profile: Profile {
                username: text(4).unwrap_or_default(),
                first_name: text(5),
                last_name: text(6),
                primary_location_id: text(7).unwrap_or_default(),
                timezone: text(8),
                user_type_id: r[9].as_int(),
                requires_new_password: r[10].as_int() == Some(1),
            },
        }
    }))
}

impl Account {
    /// Seconds the user stays locked out, if locked.
    pub fn locked_for(&self) -> Option<i64> {
        self.locked_until
            .map(|until| until - self.now)
            .filter(|left| *left > 0)
    }
}

/// Counts a failed sign-in; the fifth in a row locks the user.
pub fn record_failure(conn: &mut dyn Conn, account: &Account) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "UPDATE users SET login_attempts = login_attempts + 1, \
         login_locked_until = CASE WHEN login_attempts + 1 >= ? THEN ? ELSE login_locked_until END \
         WHERE id = ?",
        vec![
            MAX_FAILED_SIGN_INS.into(),
            (account.now + LOCK_SECONDS).into(),
            account.user_id.clone().into(),
        ],
    ))?;
    Ok(())
}

/// Opens a session for a user whose password was checked, and answers the
/// reference's token record.
pub fn open(conn: &mut dyn Conn, account: &Account, address: Option<std::net::IpAddr>) -> ApiResult<Json> {
    let token = random_secret(48);
    let id = crate::ids::new_id();
    let expires = account.now + IDLE_SECONDS;
    conn.execute(&Sql::with(
        "INSERT INTO user_sessions (token_hash, id, user_id, created_ts, expires_ts) VALUES (?, ?, ?, ?, ?)",
        vec![
            hash_api_key(&token).into(),
            id.clone().into(),
            account.user_id.clone().into(),
            account.now.into(),
            expires.into(),
        ],
    ))?;
    // The sign-in before this one becomes the last; this one the current.
    conn.execute(&Sql::with(
        "UPDATE users SET login_attempts = 0, login_locked_until = NULL, \
         last_login_ts = COALESCE(current_login_ts, ?), current_login_ts = ?, current_login_ip = ? WHERE id = ?",
        vec![
            account.now.into(),
            account.now.into(),
            address.map(|a| a.to_string()).into(),
            account.user_id.clone().into(),
        ],
    ))?;
    let p = &account.profile;
    Ok(json!({ "token": {
        "id": id,
        "token": token,
        "expire": IDLE_SECONDS / 60,
        "expires_ts": expires,
        "time": account.now,
        "user_id": account.user_id,
        "username": p.username,
        "first_name": p.first_name,
        "last_name": p.last_name,
        "primary_location_id": p.primary_location_id,
        "timezone": p.timezone,
        "user_type_id": p.user_type_id,
        "password_expire_ts": null,
        "requires_new_password": p.requires_new_password,
    } }))
}

/// Starts the idle time again (the caller just used the session).
pub fn touch(conn: &mut dyn Conn, token_hash: &str, expires_ts: i64) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "UPDATE user_sessions SET expires_ts = ? WHERE token_hash = ? AND expires_ts < ?",
        vec![expires_ts.into(), token_hash.into(), expires_ts.into()],
    ))?;
    Ok(())
}

/// Ends the session of `token`; false when there was none.
pub fn close(conn: &mut dyn Conn, token: &str) -> ApiResult<bool> {
    let n = conn.execute(&Sql::with(
        "DELETE FROM user_sessions WHERE token_hash = ?",
        vec![hash_api_key(token).into()],
    ))?;
    Ok(n > 0)
}

/// Ends every session of a user (a new password, a disabled user).
pub fn close_all(conn: &mut dyn Conn, user_id: &str) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "DELETE FROM user_sessions WHERE user_id = ?",
        vec![Value::from(user_id)],
    ))?;
    Ok(())
}
