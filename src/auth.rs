//! Who is calling: credentials from headers, query parameters or HTTP
//! Basic; the user's location scope; the permissions of its roles.

use crate::clock::Clock;
use crate::crypto::verify_api_key;
use crate::db::{Conn, Sql, Value};
use crate::engine::kept::Kept;
use crate::engine::query::TenantScope;
use crate::error::{ApiError, ApiResult};
use std::collections::BTreeSet;

/// The permissions granted by a user's roles. A user with no role has none.
#[derive(Clone, Debug, Default)]
pub struct Perms {
    pub admin: bool,
    pub granted: BTreeSet<String>,
    /// Every `<resource>.read` permission, and nothing else by it.
    pub every_read: bool,
}

impl Perms {
    /// Whether the user holds any permission at all (a role).
    pub fn has_some(&self) -> bool {
        self.admin || self.every_read || !self.granted.is_empty()
    }

    /// What a location's own read-only user holds (the Read only role):
    /// every read, no change. Postback payloads are rendered with it, so
    /// that they show no more than the location's users may read
    /// (ADR 0027).
    pub fn reader() -> Perms {
        Perms {
            every_read: true,
            ..Perms::default()
        }
    }

    pub fn allows(&self, permission: &str) -> bool {
        self.admin || self.granted.contains(permission) || (self.every_read && permission.ends_with(".read"))
    }
    /// Whether these permissions include all of `other` (no escalation).
    pub fn covers(&self, other: &Perms) -> bool {
        self.admin
            || (!other.admin
                && (self.every_read || !other.every_read)
                && other.granted.iter().all(|p| self.allows(p)))
    }
    pub fn require(&self, permission: &str) -> ApiResult<()> {
        if self.allows(permission) {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "You are not allowed to perform this action (missing permission {permission})."
            )))
        }
    }
}

/// Credentials as presented, before they are checked.
#[derive(Debug, Default)]
pub struct Credentials {
    pub developer_id: Option<String>,
    pub user_id: Option<String>,
    pub api_key: Option<String>,
    /// A session token from `POST /v2/token` (`access-token`).
    pub access_token: Option<String>,
}

/// An authenticated caller.
#[derive(Clone, Debug)]
pub struct Caller {
    pub user_id: String,
    pub developer_id: String,
    pub scope: TenantScope,
    pub perms: Perms,
    /// The test clock offset of the caller's location, in seconds (0
    /// unless a sandbox test clock moved it): see `clock`.
    pub clock_offset_s: i64,
    /// Set when the caller signed in with a session token.
    pub session: Option<Session>,
    /// Where the user wants receipts of the payments they make (their
    /// email when `email_trx_receipt` is set), read with the rest of the
    /// caller: a payment need not read the user again.
    pub receipts_to: Option<String>,
    /// `auth_epoch` as read to authenticate this caller, when it was
    /// (API-key callers): see [`crate::engine::kept`].
    pub epoch: Option<i64>,
}

/// The receipt address of a user or contact from its `email` and
/// `email_trx_receipt`: the email when receipts are wanted.
pub fn receipts_to(email: &Value, wanted: &Value) -> Option<String> {
    (wanted.as_int() == Some(1))
        .then(|| email.as_str().map(str::to_string))
        .flatten()
}

/// The session a token-authenticated caller uses.
#[derive(Clone, Debug)]
pub struct Session {
    pub token_hash: String,
    /// When it expires unless used again (the location's time).
    pub expires_ts: i64,
    /// The password was set by someone else: until the user sets their
    /// own, the session may only do that (and read itself, sign out).
    pub must_change_password: bool,
}

/// Reads the permissions of a user's roles.
pub fn load_perms(conn: &mut dyn Conn, user_id: &str) -> ApiResult<Perms> {
    let rows = conn.query(&Sql::with(
        "SELECT r.is_admin, rp.permission FROM auth_role_users a JOIN roles r ON r.id = a.auth_role_id \
         LEFT JOIN role_permissions rp ON rp.role_id = r.id WHERE a.user_id = ?",
        vec![user_id.into()],
    ))?;
    Ok(perms_from_rows(rows))
}

/// Refuses acting on a user who holds permissions the caller lacks
/// (changing its key, disabling or deleting it would take over or lock
/// out someone more privileged).
pub fn require_covers_user(conn: &mut dyn Conn, caller: &Perms, user_id: &str) -> ApiResult<()> {
    let target = load_perms(conn, user_id)?;
    if caller.covers(&target) {
        Ok(())
    } else {
        Err(ApiError::Forbidden(
            "You cannot act on a user who holds permissions you do not hold.".into(),
        ))
    }
}

/// Reads the permissions a role grants.
pub fn role_perms(conn: &mut dyn Conn, role_id: &str) -> ApiResult<Option<Perms>> {
    let rows = conn.query(&Sql::with(
        "SELECT r.is_admin, rp.permission FROM roles r LEFT JOIN role_permissions rp ON rp.role_id = r.id WHERE r.id = ?",
        vec![role_id.into()],
    ))?;
    if rows.is_empty() {
        return Ok(None);
    }
    Ok(Some(perms_from_rows(rows)))
}

fn perms_from_rows(rows: Vec<Vec<Value>>) -> Perms {
    let mut perms = Perms::default();
    for row in rows {
        if row[0].as_int() == Some(1) {
            perms.admin = true;
        }
        if let Some(p) = row[1].as_str() {
            perms.granted.insert(p.to_string());
        }
    }
    perms
}

/// Checks credentials against the database. Every failure is the same
/// 401, so a caller cannot learn which part was wrong. A user id with an
/// API key wins over a session token.
pub fn authenticate(conn: &mut dyn Conn, creds: Credentials, clock: &Clock) -> ApiResult<Caller> {
    if let (None, Some(token)) = (&creds.api_key, &creds.access_token) {
        return authenticate_token(conn, token, creds.developer_id.as_deref(), clock);
    }
    let (developer_id, user_id, api_key) = match (creds.developer_id, creds.user_id, creds.api_key) {
        (Some(d), Some(u), Some(k)) => (d, u, k),
        (d, u, k) => {
            // Naming what is missing tells nothing about what was wrong.
            let missing: Vec<&str> = [
                ("developer-id", d.is_none()),
                ("user-id", u.is_none()),
                ("user-api-key", k.is_none()),
            ]
            .into_iter()
            .filter_map(|(name, absent)| absent.then_some(name))
            .collect();
            return Err(ApiError::Unauthorized(format!(
                "Authentication required: send developer-id, user-id and user-api-key (or an access-token); missing: {}.",
                missing.join(", ")
            )));
        }
    };
    let invalid = || ApiError::Unauthorized("Invalid developer-id, user-id or user-api-key.".into());
    if !crate::ids::looks_like_id(&user_id)
        || !crate::ids::looks_like_id(&developer_id)
        || api_key.len() > 128
        || api_key.contains('\0')
    {
        return Err(invalid());
    }
    let found = UserRows::load(conn, UserSecret::ApiKeyHash, &developer_id, &user_id)?.ok_or_else(invalid)?;
    let stored = found.secret().unwrap_or_default();
    if stored.is_empty() || !verify_api_key(&api_key, stored) || !found.usable() {
        return Err(invalid());
    }
    Ok(found.into_caller(user_id, developer_id))
}

/// The credentials of a hosted form (reference 7.1): the developer, the
/// user, an epoch-seconds timestamp and the hash-key made from them.
#[derive(Debug, Default)]
pub struct HashKeyCredentials {
    pub developer_id: Option<String>,
    pub user_id: Option<String>,
    pub timestamp: Option<String>,
    pub hash_key: Option<String>,
}

/// A caller by hash-key: the HMAC-SHA256 of user id and timestamp under
/// the user's hash key (sealed at rest with the keyring), from a timestamp
/// within [`crate::hosted::hash_key::TIMESTAMP_WINDOW_S`] of `now` (the
/// user's location time). Answers the caller and the timestamp. Whether
/// the hash-key was used before is the hosted forms' business.
pub fn authenticate_hash_key(
    conn: &mut dyn Conn,
    keyring: &crate::crypto::Keyring,
    creds: &HashKeyCredentials,
    clock: &Clock,
) -> ApiResult<(Caller, i64)> {
    use crate::hosted::hash_key;
    let (Some(developer_id), Some(user_id), Some(timestamp), Some(presented)) = (
        &creds.developer_id,
        &creds.user_id,
        &creds.timestamp,
        &creds.hash_key,
    ) else {
        return Err(ApiError::Unauthorized(
            "Authentication required: send developer-id, user-id, timestamp and hash-key.".into(),
        ));
    };
    let invalid = || ApiError::Unauthorized(hash_key::INVALID.into());
    if !crate::ids::looks_like_id(user_id) || !crate::ids::looks_like_id(developer_id) {
        return Err(invalid());
    }
    let ts = hash_key::parse_timestamp(timestamp)?;
    let found =
        UserRows::load(conn, UserSecret::HashKeySealed, developer_id, user_id)?.ok_or_else(invalid)?;
    let key = found
        .secret()
        .and_then(|sealed| keyring.decrypt(sealed).ok())
        .ok_or_else(invalid)?;
    if !found.usable() || !hash_key::matches(&key, user_id, timestamp, presented) {
        return Err(invalid());
    }
    hash_key::check_fresh(ts, clock.location_now(found.clock_offset()), found.clock_offset())?;
    Ok((found.into_caller(user_id.clone(), developer_id.clone()), ts))
}

/// The caller a hosted page acts as: the user who signed its link (with
/// the developer id it was signed with, which must still exist) or who
/// made the payment page (none). The user must still be active.
pub fn caller_of_user(conn: &mut dyn Conn, developer_id: Option<&str>, user_id: &str) -> ApiResult<Caller> {
    let gone = || ApiError::Unauthorized("The user who made this payment link can no longer use it.".into());
    let found = UserRows::load(
        conn,
        UserSecret::HashKeySealed,
        developer_id.unwrap_or_default(),
        user_id,
    )?
    .ok_or_else(gone)?;
    let usable = match developer_id {
        Some(_) => found.usable(),
        None => found.active(),
    };
    if !usable {
        return Err(gone());
    }
    Ok(found.into_caller(user_id.to_string(), developer_id.unwrap_or_default().to_string()))
}

/// The stored secret a credential is checked against.
#[derive(Clone, Copy)]
enum UserSecret {
    ApiKeyHash,
    HashKeySealed,
}

/// A user, its location, whether the developer exists, and one row per
/// permission of its roles: everything a caller is made of, in one round
/// trip.
struct UserRows(Vec<Vec<Value>>);

impl UserRows {
    fn load(
        conn: &mut dyn Conn,
        secret: UserSecret,
        developer_id: &str,
        user_id: &str,
    ) -> ApiResult<Option<UserRows>> {
        let column = match secret {
            UserSecret::ApiKeyHash => "u.api_key_hash",
            UserSecret::HashKeySealed => "u.hash_key_enc",
        };
        let rows = conn.query(&Sql::with(
            &format!(
                "SELECT {column}, u.status, u.location_id, l.path, l.tz, \
                 EXISTS (SELECT 1 FROM locations c WHERE c.parent_id = u.location_id), \
                 EXISTS (SELECT 1 FROM developers d WHERE d.id = ?), r.is_admin, rp.permission, l.clock_offset_s, \
                 u.email, u.email_trx_receipt \
                 FROM users u JOIN locations l ON l.id = u.location_id \
                 LEFT JOIN auth_role_users a ON a.user_id = u.id \
                 LEFT JOIN roles r ON r.id = a.auth_role_id \
                 LEFT JOIN role_permissions rp ON rp.role_id = r.id \
                 WHERE u.id = ?"
            ),
            vec![developer_id.into(), user_id.into()],
        ))?;
        Ok((!rows.is_empty()).then_some(UserRows(rows)))
    }

    fn secret(&self) -> Option<&str> {
        self.0[0][0].as_str()
    }

    /// An active user, called with a developer id that exists.
    fn usable(&self) -> bool {
        self.active() && self.0[0][6].as_int() == Some(1)
    }

    fn active(&self) -> bool {
        self.0[0][1].as_int() == Some(1)
    }

    fn clock_offset(&self) -> i64 {
        self.0[0][9].as_int().unwrap_or(0)
    }

    fn into_caller(self, user_id: String, developer_id: String) -> Caller {
        let perms = perms_from_rows(self.0.iter().map(|r| vec![r[7].clone(), r[8].clone()]).collect());
        let user = &self.0[0];
        Caller {
            user_id,
            developer_id,
            scope: TenantScope::of_location(
                user[2].as_str().unwrap_or_default().to_string(),
                &user[3],
                &user[4],
                &user[5],
            ),
            perms,
            clock_offset_s: self.clock_offset(),
            session: None,
            receipts_to: receipts_to(&user[10], &user[11]),
            epoch: None,
        }
    }
}

/// Whether a developer id names a developer.
pub fn developer_exists(conn: &mut dyn Conn, developer_id: &str) -> ApiResult<bool> {
    Ok(conn
        .query_one(&Sql::with(
            "SELECT 1 FROM developers WHERE id = ?",
            vec![developer_id.into()],
        ))?
        .is_some())
}

/// A caller by session token: the token's digest names a session that has
/// not expired (in the user's location time), of an active user, and the
/// developer-id, required with a token as with an API key (the spec's
/// credentials identify the solution on every request), exists.
fn authenticate_token(
    conn: &mut dyn Conn,
    token: &str,
    developer_id: Option<&str>,
    clock: &Clock,
) -> ApiResult<Caller> {
    let Some(developer_id) = developer_id else {
        return Err(ApiError::Unauthorized(
            "Authentication required: send developer-id (header or query parameter) with the access-token."
                .into(),
        ));
    };
    let invalid = || ApiError::Unauthorized("The access token is invalid or has expired.".into());
    if token.len() > 128 || !crate::ids::looks_like_id(developer_id) {
        return Err(invalid());
    }
    let token_hash = crate::crypto::hash_api_key(token);
    let rows = conn.query(&Sql::with(
        "SELECT s.user_id, s.expires_ts, u.status, u.location_id, l.path, l.tz, \
         EXISTS (SELECT 1 FROM locations c WHERE c.parent_id = u.location_id), \
         EXISTS (SELECT 1 FROM developers d WHERE d.id = ?), r.is_admin, rp.permission, \
         l.clock_offset_s, u.requires_new_password, u.email, u.email_trx_receipt \
         FROM user_sessions s JOIN users u ON u.id = s.user_id JOIN locations l ON l.id = u.location_id \
         LEFT JOIN auth_role_users a ON a.user_id = u.id \
         LEFT JOIN roles r ON r.id = a.auth_role_id \
         LEFT JOIN role_permissions rp ON rp.role_id = r.id \
         WHERE s.token_hash = ?",
        vec![developer_id.into(), token_hash.clone().into()],
    ))?;
    let row = rows.first().ok_or_else(invalid)?;
    let offset = row[10].as_int().unwrap_or(0);
    let expires_ts = row[1].as_int().unwrap_or(0);
    if expires_ts <= clock.location_now(offset) || row[2].as_int() != Some(1) || row[7].as_int() != Some(1) {
        return Err(invalid());
    }
    let perms = perms_from_rows(rows.iter().map(|r| vec![r[8].clone(), r[9].clone()]).collect());
    Ok(Caller {
        user_id: row[0].as_str().unwrap_or_default().to_string(),
        developer_id: developer_id.to_string(),
        scope: TenantScope::of_location(
            row[3].as_str().unwrap_or_default().to_string(),
            &row[4],
            &row[5],
            &row[6],
        ),
        perms,
        clock_offset_s: offset,
        session: Some(Session {
            token_hash,
            expires_ts,
            must_change_password: row[11].as_int() == Some(1),
        }),
        receipts_to: receipts_to(&row[12], &row[13]),
        epoch: None,
    })
}

/// Callers authenticated by API key, kept while nothing they are made of
/// has changed (ADR 0021), so that most requests authenticate with one
/// single-row read instead of the join of users, locations, roles and
/// permissions.
///
/// What a caller is made of lives in six tables (users, auth role users,
/// roles, role permissions, locations, developers). A trigger on each
/// moves `auth_epoch` with every change (of a user: but its sign-in
/// bookkeeping, migration 39), in the writing transaction, from
/// any process and on any node. Every request reads the epoch first (on
/// PostgreSQL on a connection requests share, ADR 0026), and a kept
/// caller is used only under the epoch it was authenticated with: a
/// change is seen by the very next request, everywhere. Only successes are kept, under the
/// digest of the key presented, so a wrong key never finds one.
#[derive(Default)]
pub struct KnownCallers {
    /// Bounded by [`crate::engine::kept::DEFAULT_MAX`] (a bound, not a
    /// policy: a deployment has far fewer API users).
    kept: Kept<CallerKey, Caller>,
}

/// Developer id, user id and the SHA-256 of the API key presented.
type CallerKey = (String, String, [u8; 32]);

impl KnownCallers {
    fn key(creds: &Credentials) -> Option<CallerKey> {
        use sha2::{Digest, Sha256};
        let (Some(d), Some(u), Some(k)) = (&creds.developer_id, &creds.user_id, &creds.api_key) else {
            return None;
        };
        Some((d.clone(), u.clone(), Sha256::digest(k.as_bytes()).into()))
    }

    /// The caller these credentials name: kept, or [`authenticate`]d now.
    pub async fn authenticate(
        self: &std::sync::Arc<Self>,
        store: &crate::db::Store,
        creds: Credentials,
        clock: &Clock,
    ) -> ApiResult<Caller> {
        let clock = clock.clone();
        let Some(key) = Self::key(&creds) else {
            return store
                .read_point(move |conn| authenticate(conn, creds, &clock))
                .await;
        };
        let read_epoch = store.auth_epoch().await?;
        if let Some(caller) = read_epoch.and_then(|epoch| self.kept.get(&key, epoch)) {
            return Ok(caller);
        }
        let this = self.clone();
        store
            .read_point(move |conn| {
                let epoch = match read_epoch {
                    Some(epoch) => epoch,
                    None => conn.query_int(&Sql::new("SELECT n FROM auth_epoch WHERE id = 1"))?,
                };
                this.kept.get_or_read(key, Some(epoch), || {
                    let mut caller = authenticate(conn, creds, &clock)?;
                    caller.epoch = Some(epoch);
                    Ok(caller)
                })
            })
            .await
    }
}
