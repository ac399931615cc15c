//! Session tokens: the token method of authentication. A user signs in
//! with username and password (`POST /v2/token`) and gets a random token,
//! kept only as its SHA-256 digest. A session expires after 15 idle
//! minutes of its user's location time (so a test clock moves it), each
//! use starting the 15 minutes again; signing out, a new password or a
//! disabled user ends it. Consecutive failed sign-ins lock the name signed
//! in with for a while, whether or not a user has it, counted in the
//! database so every node sees them ([`NameLock`]). Expired sessions and
//! forgotten failures are swept away ([`sweep`]).

use crate::clock::Clock;
use crate::crypto::{hash_api_key, random_secret};
use crate::db::{Conn, Sql, Store, Value};
use crate::error::ApiResult;
use serde_json::{json, Value as Json};

/// Idle time after which a session ends.
pub const IDLE_SECONDS: i64 = 15 * 60;
/// Consecutive failed sign-ins that lock a name, and for how long.
pub const MAX_FAILED_SIGN_INS: i64 = 5;
pub const LOCK_SECONDS: i64 = 15 * 60;
/// A run of failures is forgotten this long after its latest one, so that
/// a row kept for a name nobody has does not live for ever.
pub const FAILURE_WINDOW_SECONDS: i64 = 15 * 60;
/// How often a node sweeps expired sessions and forgotten failures.
pub const SWEEP_EVERY_SECONDS: u64 = 60;

/// A user as a sign-in sees it.
#[derive(Clone, Debug)]
pub struct Account {
    pub user_id: String,
    pub password_hash: Option<String>,
    pub active: bool,
    /// The user's location time now.
    pub now: i64,
    /// The test clock offset of the user's location.
    pub offset_s: i64,
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
        "SELECT u.id, u.password_hash, u.status, u.username, u.first_name, \
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
            now: clock.location_now(r[10].as_int().unwrap_or(0)),
            offset_s: r[10].as_int().unwrap_or(0),
            profile: Profile {
                username: text(3).unwrap_or_default(),
                first_name: text(4),
                last_name: text(5),
                primary_location_id: text(6).unwrap_or_default(),
                timezone: text(7),
                user_type_id: r[8].as_int(),
                requires_new_password: r[9].as_int() == Some(1),
            },
        }
    }))
}

/// The failed sign-ins of one username, counted whether or not a user
/// has the name, so that the lock they lead to looks the same for a name
/// that exists and one that does not (the 401s before it look the same
/// too). Kept under the SHA-256 of the name exactly as typed (names are
/// unique and found case-sensitively, so `Alice` and `alice` are two
/// names and two locks; a name typed is sometimes a password), in the
/// clock of the name: its user's
/// location time, so a sandbox test clock ages the lock as it ages
/// sessions, else wall time (the same unless a test clock moved).
#[derive(Clone, Debug)]
pub struct NameLock {
    digest: String,
    /// The user who has the name: their record shows the count.
    user_id: Option<String>,
    /// The name's time now.
    pub now: i64,
    /// Test clock offset of the name's time (0: wall time).
    offset_s: i64,
}

impl NameLock {
    /// The lock of `username`, as held by `user_id` (if anyone holds it)
    /// at a location whose test clock is `offset_s` ahead.
    pub fn new(username: &str, user_id: Option<String>, offset_s: i64, clock: &Clock) -> NameLock {
        NameLock {
            digest: name_digest(username),
            user_id,
            now: clock.location_now(offset_s),
            offset_s,
        }
    }

    /// The lock of the name a sign-in gave, found as `account` or not.
    pub fn of_sign_in(username: &str, account: Option<&Account>, clock: &Clock) -> NameLock {
        match account {
            Some(a) => NameLock::new(username, Some(a.user_id.clone()), a.offset_s, clock),
            None => NameLock::new(username, None, 0, clock),
        }
    }

    /// Counts an attempt before its password is checked, so that guesses
    /// sent at once cannot all pass the check before any is counted:
    /// `Err(seconds)` when the name is locked (the attempt is refused
    /// uncounted, so attempts during a lock do not lengthen it). A run of
    /// attempts each within [`FAILURE_WINDOW_SECONDS`] of the one before
    /// counts up; the [`MAX_FAILED_SIGN_INS`]th locks the name for
    /// [`LOCK_SECONDS`] (its own password is still checked, and a right
    /// one [`clear`](Self::clear)s the lock); a run whose window or lock
    /// has passed starts again from one. One statement, so attempts
    /// counted at once on several nodes all count.
    pub fn count_attempt(&self, conn: &mut dyn Conn) -> ApiResult<Result<(), i64>> {
        let now = self.now;
        let lock_end = now + LOCK_SECONDS;
        let window_end = now + FAILURE_WINDOW_SECONDS;
        // `alive`: the stored run goes on; `n`: the count after this one.
        // (A bare parameter as a CASE result would be text on PostgreSQL.)
        let alive = "sign_in_failures.forget_ts > ?";
        let n = format!("CASE WHEN {alive} THEN sign_in_failures.failures + 1 ELSE 1 END");
        let sql = format!(
            "INSERT INTO sign_in_failures (name_digest, failures, locked_until, forget_ts, prune_after) \
             VALUES (?, 1, NULL, ?, ?) \
             ON CONFLICT (name_digest) DO UPDATE SET \
             failures = {n}, \
             locked_until = CASE WHEN {n} >= ? THEN CAST(? AS BIGINT) ELSE NULL END, \
             forget_ts = CASE WHEN {n} >= ? THEN CAST(? AS BIGINT) ELSE CAST(? AS BIGINT) END, \
             prune_after = CASE WHEN {n} >= ? THEN CAST(? AS BIGINT) ELSE CAST(? AS BIGINT) END \
             WHERE sign_in_failures.locked_until IS NULL OR sign_in_failures.locked_until <= ?"
        );
        let wall = |ts: i64| Value::from(ts - self.offset_s);
        let counted = conn.execute(&Sql::with(
            &sql,
            vec![
                self.digest.clone().into(),
                window_end.into(),
                wall(window_end),
                // failures
                now.into(),
                // locked_until
                now.into(),
                MAX_FAILED_SIGN_INS.into(),
                lock_end.into(),
                // forget_ts
                now.into(),
                MAX_FAILED_SIGN_INS.into(),
                lock_end.into(),
                window_end.into(),
                // prune_after
                now.into(),
                MAX_FAILED_SIGN_INS.into(),
                wall(lock_end),
                wall(window_end),
                // not while locked
                now.into(),
            ],
        ))?;
        if counted > 0 {
            return Ok(Ok(()));
        }
        let until = conn
            .query_one(&Sql::with(
                "SELECT locked_until FROM sign_in_failures WHERE name_digest = ?",
                vec![self.digest.clone().into()],
            ))?
            .and_then(|r| r[0].as_int())
            .unwrap_or(now);
        Ok(Err((until - now).max(1)))
    }

    /// Shows a failed attempt on the record of the user who has the name
    /// (`login_attempts`, `login_locked_until`); nothing for an unknown
    /// name.
    pub fn show_failure(&self, conn: &mut dyn Conn) -> ApiResult<()> {
        if let Some(user_id) = &self.user_id {
            conn.execute(&Sql::with(
                "UPDATE users SET \
                 login_attempts = COALESCE((SELECT failures FROM sign_in_failures WHERE name_digest = ?), 0), \
                 login_locked_until = (SELECT locked_until FROM sign_in_failures WHERE name_digest = ?) \
                 WHERE id = ?",
                vec![
                    self.digest.clone().into(),
                    self.digest.clone().into(),
                    user_id.clone().into(),
                ],
            ))?;
        }
        Ok(())
    }

    /// Forgets the name's failures (a successful sign-in).
    pub fn clear(&self, conn: &mut dyn Conn) -> ApiResult<()> {
        clear_failures(conn, &self.digest, self.user_id.as_deref())
    }
}

/// The key a name's failures are kept under.
fn name_digest(username: &str) -> String {
    hash_api_key(&format!("sign-in:{username}"))
}

/// Forgets the failures counted against a user's name (an administrator
/// set their password, or enabled them again); the caller resets the
/// user's own `login_attempts`.
pub fn forget_failures(conn: &mut dyn Conn, username: &str) -> ApiResult<()> {
    clear_failures(conn, &name_digest(username), None)
}

fn clear_failures(conn: &mut dyn Conn, digest: &str, user_id: Option<&str>) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "DELETE FROM sign_in_failures WHERE name_digest = ?",
        vec![digest.into()],
    ))?;
    if let Some(user_id) = user_id {
        conn.execute(&Sql::with(
            "UPDATE users SET login_attempts = 0, login_locked_until = NULL \
             WHERE id = ? AND (login_attempts <> 0 OR login_locked_until IS NOT NULL)",
            vec![user_id.into()],
        ))?;
    }
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
        "UPDATE users SET last_login_ts = COALESCE(current_login_ts, ?), current_login_ts = ?, \
         current_login_ip = ? WHERE id = ?",
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

/// Ends the session of `token`; false when there was none, or it had
/// expired already (an expired session is no session: removed all the
/// same).
pub fn close(conn: &mut dyn Conn, token: &str, clock: &Clock) -> ApiResult<bool> {
    let token_hash = hash_api_key(token);
    let live = conn
        .query_one(&Sql::with(
            "SELECT s.expires_ts, l.clock_offset_s FROM user_sessions s JOIN users u ON u.id = s.user_id \
             JOIN locations l ON l.id = u.location_id WHERE s.token_hash = ?",
            vec![token_hash.clone().into()],
        ))?
        .is_some_and(|r| r[0].as_int().unwrap_or(0) > clock.location_now(r[1].as_int().unwrap_or(0)));
    let n = conn.execute(&Sql::with(
        "DELETE FROM user_sessions WHERE token_hash = ?",
        vec![token_hash.into()],
    ))?;
    Ok(live && n > 0)
}

/// Ends every session of a user (a new password, a disabled user).
pub fn close_all(conn: &mut dyn Conn, user_id: &str) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "DELETE FROM user_sessions WHERE user_id = ?",
        vec![Value::from(user_id)],
    ))?;
    Ok(())
}

/// Deletes the sessions past their expiry (in their user's location time)
/// and the failed sign-ins whose run or lock has passed, so that neither
/// table grows for ever (one row per sign-in; one per name tried, any
/// name). Answers how many of each went.
pub fn sweep(conn: &mut dyn Conn, clock: &Clock) -> ApiResult<(u64, u64)> {
    let wall = clock.now_ts();
    let sessions = conn.execute(&Sql::with(
        "DELETE FROM user_sessions WHERE token_hash IN (SELECT s.token_hash FROM user_sessions s \
         JOIN users u ON u.id = s.user_id JOIN locations l ON l.id = u.location_id \
         WHERE s.expires_ts <= ? + l.clock_offset_s)",
        vec![wall.into()],
    ))?;
    let failures = conn.execute(&Sql::with(
        "DELETE FROM sign_in_failures WHERE prune_after <= ?",
        vec![wall.into()],
    ))?;
    Ok((sessions, failures))
}

/// Runs [`sweep`] now and then ([`SWEEP_EVERY_SECONDS`]); every node may,
/// as it deletes only what no one can use.
#[derive(Clone)]
pub struct Sweeper {
    store: Store,
    clock: Clock,
}

impl Sweeper {
    pub fn new(store: Store, clock: Clock) -> Sweeper {
        Sweeper { store, clock }
    }

    /// One sweep (tests and a test clock's move call it directly).
    pub async fn run_once(&self) -> ApiResult<(u64, u64)> {
        let clock = self.clock.clone();
        self.store.write(move |conn| sweep(conn, &clock)).await
    }

    pub fn start(&self) {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(SWEEP_EVERY_SECONDS));
            loop {
                tick.tick().await;
                if let Err(e) = this.run_once().await {
                    tracing::warn!(error = %e, "sweeping expired sessions failed");
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (Store, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("ferrogate-sessions-{}", crate::ids::new_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&format!("sqlite://{}", dir.join("t.db").display()), 1).unwrap();
        store.migrate().unwrap();
        (store, dir)
    }

    /// Fails `times` times as `name`; answers how long it is locked then.
    fn fail(store: &Store, clock: &Clock, name: &str, times: usize) -> Option<i64> {
        let lock = NameLock::new(name, None, 0, clock);
        store
            .write_blocking(move |c| {
                for _ in 0..times {
                    assert_eq!(lock.count_attempt(c)?, Ok(()), "counted while locked");
                }
                let until = c
                    .query_one(&Sql::with(
                        "SELECT locked_until FROM sign_in_failures WHERE name_digest = ?",
                        vec![lock.digest.clone().into()],
                    ))?
                    .and_then(|r| r[0].as_int());
                Ok(until.map(|u| u - lock.now).filter(|left| *left > 0))
            })
            .unwrap()
    }

    /// One more attempt as `name`: `Err(seconds)` when it is refused.
    fn attempt(store: &Store, clock: &Clock, name: &str) -> Result<(), i64> {
        let lock = NameLock::new(name, None, 0, clock);
        store.write_blocking(move |c| lock.count_attempt(c)).unwrap()
    }

    fn rows(store: &Store) -> i64 {
        store
            .write_blocking(|c| Ok(c.query_int(&Sql::new("SELECT COUNT(*) FROM sign_in_failures"))?))
            .unwrap()
    }

    #[test]
    fn the_lock_counts_any_name_resets_when_it_passes_and_is_swept() {
        let (store, dir) = store();
        let clock = Clock::manual(1_800_000_000_000);
        // Four in a row do not lock; the fifth does, for 15 minutes.
        assert_eq!(fail(&store, &clock, "nobody-at-all", 4), None);
        assert_eq!(
            fail(&store, &clock, "Nobody-At-All", 1),
            None,
            "names are found case-sensitively: another name, another count"
        );
        assert_eq!(fail(&store, &clock, "nobody-at-all", 1), Some(LOCK_SECONDS));
        // While locked, attempts are refused uncounted: they neither pass
        // nor lengthen the lock.
        clock.advance(10 * 1000);
        assert_eq!(attempt(&store, &clock, "nobody-at-all"), Err(LOCK_SECONDS - 10));
        assert_eq!(attempt(&store, &clock, "Nobody-At-All"), Ok(()));
        clock.advance((LOCK_SECONDS - 11) * 1000);
        assert_eq!(fail(&store, &clock, "nobody-at-all", 0), Some(1));
        // Once it has passed, the count starts again: one more failure
        // does not lock again.
        clock.advance(1000);
        assert_eq!(fail(&store, &clock, "nobody-at-all", 1), None);
        assert_eq!(
            fail(&store, &clock, "nobody-at-all", 3),
            None,
            "four in the new run"
        );
        // A run whose latest failure is 15 minutes old is forgotten.
        clock.advance(FAILURE_WINDOW_SECONDS * 1000);
        assert_eq!(fail(&store, &clock, "nobody-at-all", 4), None);
        // Forgotten runs are swept; a live one stays.
        fail(&store, &clock, "someone-else", 1);
        assert_eq!(rows(&store), 3);
        clock.advance((FAILURE_WINDOW_SECONDS - 1) * 1000);
        fail(&store, &clock, "someone-else", 1);
        clock.advance(2 * 1000);
        let sweep_clock = clock.clone();
        let (_, swept) = store.write_blocking(move |c| sweep(c, &sweep_clock)).unwrap();
        assert_eq!((swept, rows(&store)), (2, 1), "only the forgotten runs go");
        // A lock is kept until it passes, then swept.
        assert_eq!(fail(&store, &clock, "locked-one", 5), Some(LOCK_SECONDS));
        clock.advance((LOCK_SECONDS - 1) * 1000);
        let sweep_clock = clock.clone();
        store.write_blocking(move |c| sweep(c, &sweep_clock)).unwrap();
        assert_eq!(fail(&store, &clock, "locked-one", 0), Some(1));
        clock.advance(FAILURE_WINDOW_SECONDS * 1000);
        let sweep_clock = clock.clone();
        store.write_blocking(move |c| sweep(c, &sweep_clock)).unwrap();
        assert_eq!(rows(&store), 0);
        store.shutdown();
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn names_are_kept_as_digests() {
        let (store, dir) = store();
        let clock = Clock::manual(1_800_000_000_000);
        fail(&store, &clock, "Typed-A-Password-1", 1);
        let kept = store
            .write_blocking(|c| Ok(c.query(&Sql::new("SELECT name_digest FROM sign_in_failures"))?))
            .unwrap();
        let digest = kept[0][0].as_str().unwrap().to_string();
        assert!(!digest.to_lowercase().contains("typed"), "{digest}");
        assert_eq!(digest.len(), 64);
        store.shutdown();
        let _ = std::fs::remove_dir_all(dir);
    }
}
