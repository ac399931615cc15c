//! Auth role users: which roles a user holds. A user with no role has no
//! permission; a caller can only hand out roles within its own rights.

use crate::auth::role_perms;
use crate::db::{Conn, Dialect, Sql};
use crate::engine::record::Record;
use crate::engine::resource::{Api, Expand, Field, Pattern, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::validate::CreateInput;
use crate::engine::{location_of, query, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};

use super::USER;

pub static AUTH_ROLE_USER: Resource = Resource {
    name: "authroleuser",
    plural: "authroleusers",
    table: "auth_role_users",
    model: "AuthRoleUser",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::id("user_id").post().required().filter().refers(&USER),
        Field::text("auth_role_id", 1, 11)
            .post()
            .required()
            .exact()
            .pattern(Pattern::Alnum)
            .doc("1 Administrator, 2 Read only, 132 Integration"),
        Field::id("location_id").hidden(),
        Field::id("created_user_id").hidden(),
        Field::ts("created_ts"),
        Field::ts("modified_ts"),
    ],
    default_sort: ("id", true),
    page_size: 20,
    scope: Scope::Column("location_id"),
    api_id: None,
    unique: Some("auth_role_id"),
    expands: &[
        Expand::BelongsTo {
            name: "user",
            target: &USER,
            column: "user_id",
        },
        Expand::BelongsTo {
            name: "created_user",
            target: &USER,
            column: "created_user_id",
        },
    ],
    list_params: &[],
    computed: &[],
    rules: &AuthRoleUserRules,
    search: None,
    cascades: &[],
    postback: None,
    api: Api {
        // The spec's sample names this list by the singular key; lists
        // answer under both so either reading works.
        list_alias: Some("authroleuser"),
        // Removing one's own role or a location's last administrator role.
        delete_may_conflict: true,
        ..Api::PLAIN
    },
    doc: "A role held by a user.",
};

struct AuthRoleUserRules;

impl Rules for AuthRoleUserRules {
    fn before_create(
        &self,
        cx: &Cx,
        conn: &mut dyn Conn,
        input: &mut CreateInput,
    ) -> ApiResult<Option<Record>> {
        let role = input.record.text("auth_role_id").unwrap_or_default().to_string();
        let user_id = input.record.text("user_id").unwrap_or_default().to_string();
        let perms = role_perms(conn, &role)?
            .ok_or_else(|| ApiError::field("auth_role_id", "auth_role_id provided is not valid"))?;
        if !cx.perms.covers(&perms) {
            return Err(ApiError::Forbidden(
                "You cannot grant a role with permissions you do not hold.".into(),
            ));
        }
        let taken = conn.query_one(&Sql::with(
            "SELECT 1 FROM auth_role_users WHERE user_id = ? AND auth_role_id = ?",
            vec![user_id.clone().into(), role.into()],
        ))?;
        if taken.is_some() {
            return Err(ApiError::field(
                "auth_role_id",
                "The user already holds this role.",
            ));
        }
        let user = query::find(conn, &USER, &cx.scope, &user_id)?
            .ok_or_else(|| ApiError::field("user_id", "user_id provided is not valid"))?;
        input.record.set("location_id", location_of(&user));
        Ok(None)
    }

    fn before_delete(&self, cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
        // Revoking a role is as privileged as granting it.
        let role = record.text("auth_role_id").unwrap_or_default();
        if let Some(perms) = role_perms(conn, role)? {
            if !cx.perms.covers(&perms) {
                return Err(ApiError::Forbidden(
                    "You cannot revoke a role with permissions you do not hold.".into(),
                ));
            }
        }
        // Like deleting or disabling oneself: a caller who removed their own
        // role could not undo it.
        let user = record.text("user_id").unwrap_or_default();
        if user == cx.user_id {
            return Err(conflict(
                "You cannot remove your own role; another administrator can.",
            ));
        }
        if is_admin_role(conn, role)? {
            let location = record.text("location_id").unwrap_or_default();
            lock_administrators(conn, location)?;
            if administrators_left(conn, location, "", record.id())? == 0 {
                return Err(conflict(
                    "This is the last administrator role of the location; grant another user one first.",
                ));
            }
        }
        Ok(())
    }
}

fn conflict(message: &str) -> ApiError {
    let mut errors = FieldErrors::new();
    errors.add("id", message);
    ApiError::Conflict(errors)
}

fn is_admin_role(conn: &mut dyn Conn, role: &str) -> ApiResult<bool> {
    Ok(conn
        .query_one(&Sql::with(
            "SELECT is_admin FROM roles WHERE id = ?",
            vec![role.into()],
        ))?
        .and_then(|r| r[0].as_int())
        == Some(1))
}

/// Whether `user_id` holds an administrator role.
pub fn is_administrator(conn: &mut dyn Conn, user_id: &str) -> ApiResult<bool> {
    Ok(conn
        .query_one(&Sql::with(
            "SELECT 1 FROM auth_role_users a JOIN roles r ON r.id = a.auth_role_id WHERE a.user_id = ? AND r.is_admin = 1",
            vec![user_id.into()],
        ))?
        .is_some())
}

/// Active administrators of `location_id` other than the user
/// `except_user` and the role assignment `except_assignment`: a location
/// must keep one, or nobody could manage it again.
pub fn administrators_left(
    conn: &mut dyn Conn,
    location_id: &str,
    except_user: &str,
    except_assignment: &str,
) -> ApiResult<i64> {
    Ok(conn
        .query_one(&Sql::with(
            "SELECT COUNT(DISTINCT a.user_id) FROM auth_role_users a JOIN roles r ON r.id = a.auth_role_id \
             JOIN users u ON u.id = a.user_id WHERE r.is_admin = 1 AND u.status = 1 AND u.location_id = ? \
             AND u.id <> ? AND a.id <> ?",
            vec![location_id.into(), except_user.into(), except_assignment.into()],
        ))?
        .and_then(|r| r[0].as_int())
        .unwrap_or(0))
}

/// Takes the lock that every change which can take an administrator away
/// from `location_id` holds while it counts the ones left: its location
/// row, on PostgreSQL, until the write job ends (SQLite has one writer).
/// Without it, two such changes sent at once (deleting or disabling two
/// administrators, revoking their roles) each counted the other's
/// administrator under READ COMMITTED and both went through, leaving none.
/// `FOR NO KEY UPDATE`: payments and other rows that merely reference the
/// location (`FOR KEY SHARE`) are not held up by it.
fn lock_administrators(conn: &mut dyn Conn, location_id: &str) -> ApiResult<()> {
    if conn.dialect() == Dialect::Postgres {
        conn.query(&Sql::with(
            "SELECT id FROM locations WHERE id = ? FOR NO KEY UPDATE",
            vec![location_id.into()],
        ))?;
    }
    Ok(())
}

/// Refuses to delete or disable `user` when it is its location's last
/// active administrator.
pub fn keep_an_administrator(conn: &mut dyn Conn, user: &Record, field: &str) -> ApiResult<()> {
    let location = user.text("primary_location_id").unwrap_or_default();
    lock_administrators(conn, location)?;
    if is_administrator(conn, user.id())? && administrators_left(conn, location, user.id(), "")? == 0 {
        let mut errors = FieldErrors::new();
        errors.add(
            field,
            "This user is the last administrator of the location; grant another user the role first.",
        );
        return Err(ApiError::Conflict(errors));
    }
    Ok(())
}
