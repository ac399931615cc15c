//! Users: who calls the API. API keys are stored as digests; hash keys
//! (used later to sign hosted-form requests) are stored encrypted.

use crate::auth::require_covers_user;
use crate::crypto::hash_api_key;
use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::engine::resource::{Api, Cascade, Expand, Field, Pattern, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::validate::{CreateInput, UpdateInput};
use crate::engine::{query, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use serde_json::{json, Map, Value as Json};

use super::notes::notes_cascade;
use super::{AUTH_ROLE_USER, LOCATION};

pub static USER: Resource = Resource {
    name: "user",
    plural: "users",
    table: "users",
    model: "User",
    view: None,
    fields: &[
        // In the order of the reference's user record.
        Field::id("id").filter().sort(),
        Field::id("domain_id")
            .exact()
            .doc("the user's branding domain: branding_domain_id as sent on create, else the primary location's"),
        Field::id("branding_domain_id")
            .post()
            .transient()
            .doc("on create: a branding domain of a location the caller sees (the primary location's when not sent)"),
        Field::id("contact_id").doc("the user's own contact record; null: none is kept"),
        Field::text("username", 1, 64)
            .post()
            .required()
            .put()
            .filter()
            .sort()
            .pattern(Pattern::Name),
        Field::text("email", 5, 128)
            .pu()
            .filter()
            .sort()
            .pattern(Pattern::Email),
        Field::int("user_type_id", 0, 999)
            .pu()
            .filter()
            .doc("200 user, 250 client admin, 300 integration user"),
        Field::text("locale", 0, 8).pu(),
        Field::int("status", 0, 1)
            .pu()
            .filter()
            .doc("1 active; 0 disabled (cannot authenticate)"),
        Field::text("tz", 0, 30).pu().pattern(Pattern::TimeZone),
        Field::int("login_attempts", 0, i64::MAX).doc("failed sign-ins in a row"),
        Field::text("current_login_ip", 0, 64).doc("the address of the latest sign-in (POST /v2/token)"),
        Field::int("current_login_ts", 0, i64::MAX)
            .hidden()
            .doc("answered as current_login"),
        Field::ts("last_login_ts").doc("the sign-in before the latest (the latest on the first)"),
        Field::flag("requires_new_password")
            .doc("the password was set by another user: sign in, then set your own"),
        Field::ts("created_ts"),
        Field::ts("modified_ts"),
        Field::id("primary_location_id")
            .column("location_id")
            .post()
            .required()
            .filter()
            .refers(&LOCATION),
        Field::text("branding_domain_url", 0, 255).doc("the url of the user's branding domain"),
        Field::id("created_user_id"),
        Field::text("terms_condition_id", 0, 36)
            .pu()
            .doc("the terms and conditions the user accepted; setting it records terms_accepted_ts"),
        Field::ts("terms_accepted_ts").doc("when terms_condition_id was set"),
        Field::text("terms_agree_ip", 0, 64)
            .pu()
            .pattern(Pattern::Ip)
            .doc("the address of the machine the terms were accepted from"),
        Field::json("ui_prefs", 1024).pu().doc(
            "an object of the user's interface preferences; members sent replace those stored, null restores \
             the default: entry_page (default dashboard), page_size 1-100 (15), report_export_type csv or tsv \
             (csv), process_method (virtual_terminal), default_terminal, a terminal of the primary location \
             (null: none chosen)",
        ),
        Field::text("user_api_key", 24, 64)
            .post()
            .transient()
            .pattern(Pattern::Token)
            .doc("write-only; reads back null"),
        Field::text("user_hash_key", 24, 64)
            .pu()
            .transient()
            .pattern(Pattern::Token)
            .doc(
                "write-only; reads back null. A PUT sets or replaces it (needs users.update): links signed \
                 with the old key stop working at once",
            ),
        Field::text("first_name", 0, 64).pu().filter().sort(),
        Field::text("last_name", 0, 64).pu().filter().sort(),
        Field::text("address", 0, 64).pu(),
        Field::text("city", 0, 100).pu().filter(),
        Field::text("state", 0, 100).pu().filter(),
        Field::text("zip", 0, 10).pu().filter().pattern(Pattern::Zip),
        Field::text("account_number", 0, 32).pu().filter(),
        Field::date("date_of_birth").pu().doc("yyyy-mm-dd, not in the future"),
        Field::flag("email_trx_receipt")
            .pu()
            .doc("email the user a receipt of each transaction they make (default 0)"),
        Field::text("company_name", 0, 64).pu().filter(),
        Field::text("home_phone", 0, 10).pu().pattern(Pattern::Digits),
        Field::text("cell_phone", 0, 10).pu().pattern(Pattern::Digits),
        Field::text("office_phone", 0, 10).pu().pattern(Pattern::Digits),
        Field::text("office_ext_phone", 0, 10).pu().pattern(Pattern::Digits),
        Field::text("password", 1, crate::passwords::MAX_LENGTH as u32)
            .pu()
            .transient()
            .doc(
                "write-only: 8 to 128 characters with a letter and a digit; set by another user it is \
                  one-time (requires_new_password); changing your own needs old_password",
            ),
        Field::text("old_password", 1, crate::passwords::MAX_LENGTH as u32)
            .put()
            .transient()
            .doc("your current password, to change your own"),
        Field::int("login_locked_until", 0, i64::MAX).hidden(),
        Field::text("password_hash", 0, 256).digest(),
        Field::text("api_key_hash", 0, 64).hidden(),
        Field::text("hash_key_enc", 0, 512)
            .column("hash_key_enc")
            .hidden_logged_as("user_hash_key")
            .encrypted(),
        Field::id("modified_user_id").hidden(),
    ],
    default_sort: ("id", true),
    page_size: 20,
    scope: Scope::Column("location_id"),
    api_id: None,
    unique: Some("username"),
    expands: &[
        Expand::BelongsTo {
            name: "primary_location",
            target: &LOCATION,
            column: "location_id",
        },
        Expand::BelongsTo {
            name: "created_user",
            target: &USER,
            column: "created_user_id",
        },
        Expand::Changelogs { users: &USER },
    ],
    list_params: &[],
    computed: &[
        ("current_login", "string", "the latest sign-in, ISO 8601 in the user's tz (UTC when unset); null before any"),
        ("user_api_key", "string", "write-only: always null"),
        ("user_hash_key", "string", "write-only: always null"),
    ],
    rules: &UserRules,
    search: None,
    cascades: &[
        Cascade {
            target: &AUTH_ROLE_USER,
            column: "user_id",
        },
        notes_cascade(),
    ],
    postback: None,
    api: Api {
        delete_may_conflict: true,
        own_record_fields: &[
            "password",
            "old_password",
            "ui_prefs",
            "terms_condition_id",
            "terms_agree_ip",
        ],
        ..Api::PLAIN
    },
    doc: "A user of the API. Has no permission until a role is attached through authroleusers.",
};

struct UserRules;

/// The members of `ui_prefs` and their defaults (reference 6.4); the
/// location's default terminal is null: locations choose none.
fn ui_pref_defaults() -> Map<String, Json> {
    let mut m = Map::new();
    m.insert("entry_page".into(), json!("dashboard"));
    m.insert("page_size".into(), json!(15));
    m.insert("report_export_type".into(), json!("csv"));
    m.insert("process_method".into(), json!("virtual_terminal"));
    m.insert("default_terminal".into(), Json::Null);
    m
}

fn stored_prefs(record: &Record) -> Map<String, Json> {
    match record.text("ui_prefs").map(serde_json::from_str::<Json>) {
        Some(Ok(Json::Object(m))) => m,
        _ => Map::new(),
    }
}

/// A word of letters, digits and `_-/.`, 1 to `max` characters.
fn pref_word(v: &Json, max: usize) -> Option<String> {
    let s = v.as_str()?;
    let ok = !s.is_empty()
        && s.chars().count() <= max
        && s.chars().all(|c| c.is_ascii_alphanumeric() || "_-/.".contains(c));
    ok.then(|| s.to_string())
}

/// Lays the `ui_prefs` members sent over those stored (null removes one,
/// so its default shows again), each checked; stores only what differs
/// from nothing, so a later default change reaches users who chose none.
fn merge_prefs(
    cx: &Cx,
    conn: &mut dyn Conn,
    record: &Record,
    stored: Map<String, Json>,
    errors: &mut FieldErrors,
) -> ApiResult<Option<String>> {
    let sent = match record.text("ui_prefs").map(serde_json::from_str::<Json>) {
        None => return Ok(None),
        Some(Ok(Json::Object(m))) => m,
        Some(_) => {
            errors.add("ui_prefs", "ui_prefs must be an object.");
            return Ok(None);
        }
    };
    let mut prefs = stored;
    for (key, value) in sent {
        if value.is_null() {
            prefs.remove(&key);
            continue;
        }
        let checked = match key.as_str() {
            "entry_page" => pref_word(&value, 64).map(Json::from),
            "process_method" => pref_word(&value, 32).map(Json::from),
            "report_export_type" => value
                .as_str()
                .filter(|s| ["csv", "tsv"].contains(s))
                .map(Json::from),
            "page_size" => match &value {
                Json::Number(n) => n.as_i64(),
                Json::String(s) if !s.is_empty() && s.chars().all(|c| c.is_ascii_digit()) => s.parse().ok(),
                _ => None,
            }
            .filter(|n| (1..=100).contains(n))
            .map(Json::from),
            "default_terminal" => {
                let id = value.as_str().unwrap_or_default();
                let terminal = query::find(conn, &super::TERMINAL, &cx.scope, id)?;
                terminal
                    .filter(|t| t.text("location_id") == record.text("primary_location_id"))
                    .map(|t| Json::from(t.id()))
            }
            _ => {
                let key = crate::engine::validate::echo_name(&key);
                errors.add(
                    "ui_prefs",
                    format!(
                        "ui_prefs has no member {key}; its members are entry_page, page_size, \
                         report_export_type, process_method and default_terminal."
                    ),
                );
                continue;
            }
        };
        match checked {
            Some(v) => {
                prefs.insert(key, v);
            }
            None => errors.add(
                "ui_prefs",
                match key.as_str() {
                    "entry_page" => "ui_prefs.entry_page must be 1 to 64 letters, digits or _-/.",
                    "process_method" => "ui_prefs.process_method must be 1 to 32 letters, digits or _-/.",
                    "report_export_type" => "ui_prefs.report_export_type must be csv or tsv.",
                    "page_size" => "ui_prefs.page_size must be an integer from 1 to 100.",
                    _ => "ui_prefs.default_terminal must be a terminal of the user's primary location.",
                },
            ),
        }
    }
    Ok((!prefs.is_empty()).then(|| Json::Object(prefs).to_string()))
}

/// The location whose branding domain a new user takes: the one whose
/// `branding_domain_id` was sent (any location the caller sees), else the
/// primary location.
fn branding_domain(
    cx: &Cx,
    conn: &mut dyn Conn,
    input: &mut CreateInput,
    errors: &mut FieldErrors,
) -> ApiResult<()> {
    let location = match input.transient.get("branding_domain_id") {
        Some(Json::String(domain)) if !domain.is_empty() => {
            let mut sql = query::select(&LOCATION, &cx.scope);
            sql.push(" AND t.branding_domain_id = ")
                .bind(domain.clone())
                .push(" ORDER BY t.id ASC LIMIT 1");
            let found = conn.query_one(&sql)?.map(|r| Record::from_row(&LOCATION, r));
            if found.is_none() {
                errors.add("branding_domain_id", "branding_domain_id provided is not valid");
            }
            found
        }
        _ => match input.record.text("primary_location_id") {
            Some(id) => query::find(conn, &LOCATION, &cx.scope, id)?,
            None => None,
        },
    };
    if let Some(l) = location {
        if let Some(id) = l.text("branding_domain_id") {
            input.record.set("domain_id", id.to_string());
        }
        if let Some(url) = l.text("branding_domain_url") {
            input.record.set("branding_domain_url", url.to_string());
        }
    }
    Ok(())
}

/// A birth date cannot lie ahead.
fn check_birth_date(cx: &Cx, record: &Record, errors: &mut FieldErrors) {
    let today = crate::clock::date_text(cx.now, cx.scope.tz);
    if record.text("date_of_birth").is_some_and(|d| d > today.as_str()) {
        errors.add("date_of_birth", "Date Of Birth cannot be in the future.");
    }
}

/// Epoch seconds as ISO 8601 with the offset of `tz` (the reference's
/// `2019-03-11T10:38:26-0700`).
fn local_time_text(ts: i64, tz: Option<&str>) -> Option<String> {
    let zone: chrono_tz::Tz = tz.and_then(|z| z.parse().ok()).unwrap_or(chrono_tz::UTC);
    chrono::DateTime::from_timestamp(ts, 0)
        .map(|t| t.with_timezone(&zone).format("%Y-%m-%dT%H:%M:%S%z").to_string())
}

/// A location's branding domain changed: the users who took theirs from
/// it (by its old domain id, or at the location itself when it had none)
/// follow.
pub fn follow_branding_domain(cx: &Cx, conn: &mut dyn Conn, old: &Record, new: &Record) -> ApiResult<()> {
    let (old_id, old_url) = (old.text("branding_domain_id"), old.text("branding_domain_url"));
    let (new_id, new_url) = (new.text("branding_domain_id"), new.text("branding_domain_url"));
    if (old_id, old_url) == (new_id, new_url) {
        return Ok(());
    }
    let mut sql = Sql::new("UPDATE users SET domain_id = ");
    sql.bind(new_id.map(str::to_string))
        .push(", branding_domain_url = ")
        .bind(new_url.map(str::to_string));
    match old_id {
        Some(id) => {
            let (lower, upper) = cx.scope.bounds();
            sql.push(" WHERE domain_id = ")
                .bind(id.to_string())
                .push(" AND location_id IN (SELECT id FROM locations WHERE path >= ")
                .bind(lower)
                .push(" AND path < ")
                .bind(upper)
                .push(")");
        }
        None => {
            sql.push(" WHERE domain_id IS NULL AND location_id = ")
                .bind(old.id().to_string());
        }
    }
    conn.execute(&sql)?;
    Ok(())
}

/// Forgets the failed sign-ins against the user's name and shows so on
/// the record.
fn unlock(conn: &mut dyn Conn, old: &Record, new: &mut Record) -> ApiResult<()> {
    crate::sessions::forget_failures(conn, old.text("username").unwrap_or_default())?;
    new.set("login_attempts", 0);
    new.set("login_locked_until", crate::db::Value::Null);
    Ok(())
}

fn hash_password(password: &str) -> ApiResult<String> {
    crate::passwords::hash(password).map_err(ApiError::internal)
}

pub fn username_taken(conn: &mut dyn Conn, username: &str) -> ApiResult<bool> {
    Ok(conn
        .query_one(&Sql::with(
            "SELECT 1 FROM users WHERE username = ?",
            vec![username.into()],
        ))?
        .is_some())
}

impl Rules for UserRules {
    fn before_create(
        &self,
        cx: &Cx,
        conn: &mut dyn Conn,
        input: &mut CreateInput,
    ) -> ApiResult<Option<Record>> {
        let mut errors = FieldErrors::new();
        if let Some(name) = input.record.text("username") {
            if username_taken(conn, name)? {
                errors.add("username", "Username has already been taken.");
            }
        }
        let password = match input.transient.get("password") {
            Some(Json::String(p)) => Some(p.clone()),
            _ => None,
        };
        if let Some(p) = &password {
            if let Err(msg) = crate::passwords::check(p, input.record.text("username")) {
                errors.add("password", msg);
            }
        }
        branding_domain(cx, conn, input, &mut errors)?;
        check_birth_date(cx, &input.record, &mut errors);
        let prefs = merge_prefs(cx, conn, &input.record, Map::new(), &mut errors)?;
        errors.into_result()?;
        input.record.set("ui_prefs", prefs);
        if input.record.text("terms_condition_id").is_some() {
            input.record.set("terms_accepted_ts", cx.now);
        }
        if input.record.get("email_trx_receipt").is_null() {
            input.record.set("email_trx_receipt", 0);
        }
        if input.record.get("status").is_null() {
            input.record.set("status", 1);
        }
        // A password someone else chose is one-time: the user sets their
        // own after signing in with it.
        input
            .record
            .set("requires_new_password", i64::from(password.is_some()));
        input.record.set("login_attempts", 0);
        if let Some(p) = password {
            input.record.set("password_hash", hash_password(&p)?);
        }
        if let Some(Json::String(key)) = input.transient.get("user_api_key") {
            input.record.set("api_key_hash", hash_api_key(key));
        }
        if let Some(Json::String(key)) = input.transient.get("user_hash_key") {
            input.record.set("hash_key_enc", key.clone());
        }
        Ok(None)
    }

    /// A new hash key (sealed, like on create). A new password: your own
    /// needs the current one (unless you had none); someone else's is
    /// one-time and unlocks them. Every session of the user ends. The
    /// users PUT checks the current password and hashes the new one before
    /// the write job ([`crate::passwords::Prepared`]).
    fn update_transient(
        &self,
        cx: &Cx,
        conn: &mut dyn Conn,
        old: &Record,
        new: &mut Record,
        input: &UpdateInput,
    ) -> ApiResult<()> {
        let text = |name: &str| match input.transient.get(name) {
            Some(Json::String(s)) => Some(s.as_str()),
            _ => None,
        };
        if let Some(key) = text("user_hash_key") {
            new.set("hash_key_enc", cx.keyring.encrypt(key));
            crate::hosted::sessions::close_signed_by(conn, old.id())?;
        }
        if !input.transient.contains_key("password") && !input.transient.contains_key("old_password") {
            return Ok(());
        }
        let password = match input.transient.get("password") {
            Some(Json::String(p)) => p.as_str(),
            // A number: the text converter takes digits for text, but a
            // password is never read from a JSON number.
            Some(_) => return Err(ApiError::field("password", "Password must be a string.")),
            None => {
                return Err(ApiError::field(
                    "password",
                    "Password cannot be blank when old_password is sent.",
                ))
            }
        };
        crate::passwords::check(password, new.text("username"))
            .map_err(|m| ApiError::field("password", m))?;
        let prepared = input.password.as_ref();
        let own = old.id() == cx.user_id;
        if own {
            if let Some(current) = old.text("password_hash") {
                match input.transient.get("old_password") {
                    Some(Json::String(_)) => {}
                    Some(_) => return Err(ApiError::field("old_password", "Old Password must be a string.")),
                    None => {
                        return Err(ApiError::field(
                            "old_password",
                            "Old Password is required to change your own password.",
                        ))
                    }
                }
                let matches = match prepared {
                    // Checked before the job against this very hash.
                    Some(p) => p.checked_against.as_deref() == Some(current),
                    None => {
                        text("old_password").is_some_and(|given| crate::passwords::verify(given, current))
                    }
                };
                if !matches {
                    return Err(ApiError::field("old_password", "Old Password is incorrect."));
                }
            }
        } else {
            require_covers_user(conn, &cx.perms, old.id())?;
        }
        let hash = match prepared {
            Some(p) => p.hash.clone(),
            None => hash_password(password)?,
        };
        new.set("password_hash", hash);
        new.set("requires_new_password", i64::from(!own));
        // A password set by someone else (an administrator's reset), or
        // one's own proven by the current one, unlocks the user.
        unlock(conn, old, new)?;
        crate::sessions::close_all(conn, old.id())
    }

    fn before_update(&self, cx: &Cx, conn: &mut dyn Conn, old: &Record, new: &mut Record) -> ApiResult<()> {
        let mut errors = FieldErrors::new();
        if new.get("ui_prefs") != old.get("ui_prefs") {
            let prefs = match new.get("ui_prefs").is_null() {
                // ui_prefs: null restores every default.
                true => None,
                false => merge_prefs(cx, conn, new, stored_prefs(old), &mut errors)?,
            };
            new.set("ui_prefs", prefs);
        }
        if new.get("date_of_birth") != old.get("date_of_birth") {
            check_birth_date(cx, new, &mut errors);
        }
        // Not required on create (they default), but never without a value.
        for name in ["status", "email_trx_receipt"] {
            if new.get(name).is_null() {
                errors.add(name, crate::engine::validate::blank(name));
            }
        }
        errors.into_result()?;
        if new.get("terms_condition_id") != old.get("terms_condition_id") {
            match new.text("terms_condition_id") {
                Some(_) => new.set("terms_accepted_ts", cx.now),
                None => new.set("terms_accepted_ts", crate::db::Value::Null),
            }
        }
        if new.int("status") == Some(0) && old.int("status") != Some(0) {
            crate::sessions::close_all(conn, old.id())?;
        }
        // Enabled again: unlocked too (an administrator's way to lift a
        // lock without setting a password).
        if new.int("status") == Some(1) && old.int("status") == Some(0) {
            unlock(conn, old, new)?;
        }
        if new.get("username") != old.get("username") {
            if let Some(name) = new.text("username") {
                if username_taken(conn, name)? {
                    return Err(ApiError::field("username", "Username has already been taken."));
                }
            }
        }
        if old.id() != cx.user_id {
            require_covers_user(conn, &cx.perms, old.id())?;
        }
        if old.id() == cx.user_id && new.int("status") == Some(0) {
            let mut errors = FieldErrors::new();
            errors.add("status", "You cannot disable yourself.");
            return Err(ApiError::Conflict(errors));
        }
        if new.int("status") == Some(0) && old.int("status") != Some(0) {
            super::authroleusers::keep_an_administrator(conn, old, "status")?;
        }
        Ok(())
    }

    fn before_delete(&self, cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
        if record.id() == cx.user_id {
            let mut errors = FieldErrors::new();
            errors.add("id", "You cannot delete yourself.");
            return Err(ApiError::Conflict(errors));
        }
        // The user's roles and notes go with it: see `cascades`.
        require_covers_user(conn, &cx.perms, record.id())?;
        super::authroleusers::keep_an_administrator(conn, record, "id")?;
        // And what it alone held, none of it a reason to keep a user: its
        // sign-ins (live or long idle), its Authorize.Net emulator pair,
        // the hosted forms its hash key opened and the tickets typed on
        // them (short-lived capabilities signed by a user who is gone),
        // and the failed sign-ins against its name (a later user of the
        // name starts unlocked).
        crate::hosted::sessions::forget_user(conn, record.id())?;
        crate::hosted::tickets::forget_user(conn, record.id())?;
        crate::emulator::credentials::forget(conn, record.id())?;
        crate::sessions::forget_failures(conn, record.text("username").unwrap_or_default())?;
        crate::sessions::close_all(conn, record.id())
    }

    fn render(&self, _cx: &Cx, record: &Record, out: &mut Map<String, Json>) {
        let mut prefs = ui_pref_defaults();
        prefs.extend(stored_prefs(record));
        // In the reference's order: computed members where the record has
        // them. Keys are write-only: they read back null, as in the
        // reference.
        let mut ordered = Map::new();
        for field in USER.fields {
            let value = match field.name {
                "user_api_key" | "user_hash_key" => Json::Null,
                "current_login_ts" => {
                    let when = record
                        .int("current_login_ts")
                        .and_then(|ts| local_time_text(ts, record.text("tz")));
                    ordered.insert("current_login".into(), json!(when));
                    continue;
                }
                "ui_prefs" => {
                    out.remove("ui_prefs");
                    Json::Object(std::mem::take(&mut prefs))
                }
                name => match out.remove(name) {
                    Some(v) => v,
                    None => continue,
                },
            };
            ordered.insert(field.name.into(), value);
        }
        ordered.append(out);
        *out = ordered;
    }
}

/// Replaces a user's API key by one whose digest is `digest` (the old key
/// stops working at once); the change log shows only that it changed.
pub fn replace_api_key(cx: &Cx, conn: &mut dyn Conn, id: &str, digest: String) -> ApiResult<()> {
    let user =
        crate::engine::query::find(conn, &USER, &cx.scope, id)?.ok_or_else(|| ApiError::not_found("user"))?;
    if id != cx.user_id {
        require_covers_user(conn, &cx.perms, id)?;
    }
    conn.execute(&Sql::with(
        "UPDATE users SET api_key_hash = ?, modified_ts = ?, modified_user_id = ? WHERE id = ?",
        vec![digest.into(), cx.now.into(), cx.user_id.clone().into(), id.into()],
    ))?;
    let change = crate::engine::events::Change {
        field: "user_api_key",
        old: Some("********".into()),
        new: Some("********".into()),
    };
    crate::engine::events::record(conn, cx, crate::engine::events::Action::Update, &user, &[change])
}
