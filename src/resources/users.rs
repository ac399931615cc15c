//! Users: who calls the API. API keys are stored as digests; hash keys
//! (used later to sign hosted-form requests) are stored encrypted.

use crate::auth::require_covers_user;
use crate::crypto::hash_api_key;
use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::engine::resource::{Api, Cascade, Expand, Field, Pattern, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::validate::{CreateInput, UpdateInput};
use crate::engine::Cx;
use crate::error::{ApiError, ApiResult, FieldErrors};
use serde_json::{Map, Value as Json};

use super::notes::notes_cascade;
use super::{AUTH_ROLE_USER, LOCATION};

pub static USER: Resource = Resource {
    name: "user",
    plural: "users",
    table: "users",
    model: "User",
    fields: &[
        Field::id("id").filter().sort(),
        Field::id("primary_location_id")
            .column("location_id")
            .post()
            .required()
            .filter()
            .refers(&LOCATION),
        Field::text("username", 1, 64)
            .post()
            .required()
            .put()
            .filter()
            .sort(),
        Field::text("email", 5, 128)
            .pu()
            .filter()
            .sort()
            .pattern(Pattern::Email),
        Field::text("first_name", 0, 64).pu().filter().sort(),
        Field::text("last_name", 0, 64).pu().filter().sort(),
        Field::int("user_type_id", 0, 999)
            .pu()
            .filter()
            .doc("200 user, 250 client admin, 300 integration user"),
        Field::int("status", 0, 1)
            .pu()
            .filter()
            .doc("1 active; 0 disabled (cannot authenticate)"),
        Field::text("tz", 0, 30).pu().pattern(Pattern::TimeZone),
        Field::text("locale", 0, 8).pu(),
        Field::text("user_api_key", 24, 64)
            .post()
            .transient()
            .pattern(Pattern::Token)
            .doc("write-only; reads back null"),
        Field::text("user_hash_key", 24, 64)
            .post()
            .transient()
            .pattern(Pattern::Token)
            .doc("write-only; reads back null"),
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
        Field::flag("requires_new_password")
            .doc("the password was set by another user: sign in, then set your own"),
        Field::int("login_attempts", 0, i64::MAX).doc("failed sign-ins in a row"),
        Field::ts("last_login_ts"),
        Field::int("login_locked_until", 0, i64::MAX).hidden(),
        Field::text("password_hash", 0, 256).digest(),
        Field::text("api_key_hash", 0, 64).hidden(),
        Field::text("hash_key_enc", 0, 512)
            .column("hash_key_enc")
            .hidden()
            .encrypted(),
        Field::id("created_user_id").hidden(),
        Field::id("modified_user_id").hidden(),
        Field::ts("created_ts"),
        Field::ts("modified_ts"),
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
        ("user_api_key", "string", "write-only: always null"),
        ("user_hash_key", "string", "write-only: always null"),
    ],
    rules: &UserRules,
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
        own_record_fields: &["password", "old_password"],
        ..Api::PLAIN
    },
    doc: "A user of the API. Has no permission until a role is attached through authroleusers.",
};

struct UserRules;

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
        _cx: &Cx,
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
        errors.into_result()?;
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

    /// A new password: your own needs the current one (unless you had
    /// none); someone else's is one-time. Every session of the user ends.
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
        let Some(password) = text("password") else {
            return Err(ApiError::field(
                "password",
                "Password cannot be blank when old_password is sent.",
            ));
        };
        crate::passwords::check(password, new.text("username"))
            .map_err(|m| ApiError::field("password", m))?;
        let own = old.id() == cx.user_id;
        if own {
            if let Some(current) = old.text("password_hash") {
                let matches =
                    text("old_password").is_some_and(|given| crate::passwords::verify(given, current));
                if !matches {
                    return Err(ApiError::field("old_password", "Old Password is incorrect."));
                }
            }
        } else {
            require_covers_user(conn, &cx.perms, old.id())?;
        }
        new.set("password_hash", hash_password(password)?);
        new.set("requires_new_password", i64::from(!own));
        crate::sessions::close_all(conn, old.id())
    }

    fn before_update(&self, cx: &Cx, conn: &mut dyn Conn, old: &Record, new: &mut Record) -> ApiResult<()> {
        if new.int("status") == Some(0) && old.int("status") != Some(0) {
            crate::sessions::close_all(conn, old.id())?;
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
            return Err(ApiError::field("status", "You cannot disable yourself."));
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
        super::authroleusers::keep_an_administrator(conn, record, "id")
    }

    fn render(&self, _cx: &Cx, _record: &Record, out: &mut Map<String, Json>) {
        // Keys are write-only: they read back null, as in the reference.
        out.insert("user_api_key".into(), Json::Null);
        out.insert("user_hash_key".into(), Json::Null);
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
