//! Auth role users: which roles a user holds. A user with no role has no
//! permission; a caller can only hand out roles within its own rights.

use crate::auth::role_perms;
use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::engine::resource::{Api, Expand, Field, Pattern, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::validate::CreateInput;
use crate::engine::{location_of, query, Cx};
use crate::error::{ApiError, ApiResult};

use super::USER;

pub static AUTH_ROLE_USER: Resource = Resource {
    name: "authroleuser",
    plural: "authroleusers",
    table: "auth_role_users",
    model: "AuthRoleUser",
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
    cascades: &[],
    postback: None,
    api: Api {
        // The spec's sample names this list by the singular key; lists
        // answer under both so either reading works.
        list_alias: Some("authroleuser"),
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
        Ok(())
    }
}
