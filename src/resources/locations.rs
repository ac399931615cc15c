//! Locations: the merchant tree. A caller sees its own location and the
//! ones below it; the materialised `path` makes that one range query.

use crate::db::{Conn, Dialect, Sql, Value};
use crate::engine::record::Record;
use crate::engine::resource::{Api, Expand, Field, Pattern, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::validate::CreateInput;
use crate::engine::{query, render, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use serde_json::{Map, Value as Json};

use super::notes::notes_cascade;
use super::{PRODUCT_TRANSACTION, USER};

pub static LOCATION: Resource = Resource {
    name: "location",
    plural: "locations",
    table: "locations",
    model: "Location",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::id("parent_id")
            .post()
            .required()
            .put()
            .filter()
            .refers(&LOCATION)
            .doc("required on create; an update may leave it out, not blank it"),
        Field::text("name", 1, 64)
            .post()
            .required()
            .put()
            .filter()
            .sort()
            .pattern(Pattern::OneLine)
            .doc("one line: the sender name of the location's mail"),
        Field::text("branding_domain_url", 1, 255)
            .post()
            .required()
            .put()
            .filter()
            .pattern(Pattern::Domain),
        Field::id("branding_domain_id").pu().filter(),
        Field::text("account_number", 0, 32).pu().filter(),
        Field::text("address1", 0, 32).pu().filter(),
        Field::text("address2", 0, 32).pu().filter(),
        Field::text("city", 0, 100).pu().filter().sort(),
        Field::text("state", 0, 100).pu().filter(),
        Field::text("zip_code", 5, 10).pu().filter().pattern(Pattern::Zip),
        Field::text("office_phone", 10, 10)
            .pu()
            .filter()
            .pattern(Pattern::Digits),
        Field::text("office_ext_phone", 0, 10)
            .pu()
            .filter()
            .pattern(Pattern::Digits),
        Field::text("fax", 10, 10).pu().filter().pattern(Pattern::Digits),
        Field::text("aba", 9, 9)
            .pu()
            .pattern(Pattern::Digits)
            .doc("routing number"),
        Field::text("dda", 3, 32)
            .pu()
            .secret()
            .doc("the deposit (bank) account number, with aba: sealed at rest, answered masked"),
        Field::text("tz", 0, 24)
            .pu()
            .filter()
            .pattern(Pattern::TimeZone)
            .doc("IANA time zone; _ts filter keywords use it (UTC when unset)"),
        Field::text("receipt_logo", 0, 256).pu(),
        Field::text("email_reply_to", 0, 60)
            .pu()
            .filter()
            .pattern(Pattern::Email),
        Field::text("location_api_id", 24, 36).pu().exact(),
        Field::text("location_api_key", 36, 36)
            .encrypted()
            .doc("system generated"),
        Field::text("ticket_hash_key", 36, 36)
            .encrypted()
            .doc("system generated"),
        Field::text("location_c1", 0, 128).pu().filter(),
        Field::text("location_c2", 0, 128).pu().filter(),
        Field::text("location_c3", 0, 128).pu().filter(),
        Field::id("developer_company_id").pu().filter(),
        Field::id("default_cc").pu(),
        Field::id("default_ach").pu(),
        Field::flag("contact_email_trx_receipt_default").pu(),
        Field::int("recurring_notification_days_default", 0, 365).pu(),
        Field::flag("show_contact_notes").pu(),
        Field::flag("show_contact_files").pu(),
        Field::text("path", 0, 4096).hidden(),
        Field::id("created_user_id").hidden(),
        Field::id("modified_user_id").hidden(),
        Field::ts("created_ts"),
        Field::ts("modified_ts"),
    ],
    default_sort: ("id", true),
    page_size: 20,
    scope: Scope::Location,
    api_id: None,
    // Unique within its tenant (migration 38's index): the one a lookup by
    // it (`locationinfos?location_api_id=`) finds.
    unique: Some("location_api_id"),
    expands: &[
        Expand::Custom("branding_domain"),
        Expand::BelongsTo {
            name: "created_user",
            target: &USER,
            column: "created_user_id",
        },
        Expand::Custom("developer_company"),
        Expand::CustomRecords {
            name: "product_transactions",
            permission: "producttransactions.read",
            many: true,
        },
        Expand::Custom("product_recurring"),
        Expand::Custom("product_file"),
        Expand::BelongsTo {
            name: "parent",
            target: &LOCATION,
            column: "parent_id",
        },
        Expand::CustomRecords {
            name: "terminal",
            permission: "terminals.read",
            many: true,
        },
        Expand::Changelogs { users: &USER },
    ],
    list_params: &[],
    computed: &[],
    rules: &LocationRules,
    search: None,
    cascades: &[notes_cascade()],
    postback: None,
    api: Api {
        delete_may_conflict: true,
        ..Api::PLAIN
    },
    doc: "A merchant, or a level above merchants: locations form a tree through parent_id.",
};

struct LocationRules;

/// Serialises the writes that read the tree before they change it: a
/// create reads its parent's path, a move its own path and its new
/// parent's, a delete counts the children. Without it, a child created
/// while its parent moved kept the parent's old path (seen from the
/// parent's former ancestors, hidden from its own users), and two moves
/// crossing each other (P under Q, Q under P) both passed the "not below
/// itself" check and made a cycle.
///
/// PostgreSQL: the lock is the `auth_epoch` row, which every write to
/// `locations` takes anyway (its trigger, migration 23) and holds to the
/// commit; taking it first keeps one lock order (epoch, then location
/// rows) for every location write, so two of them never deadlock, and
/// what is read after it stays as read until this job commits. SQLite:
/// the writer runs one job at a time already.
pub fn lock_tree(conn: &mut dyn Conn) -> ApiResult<()> {
    if conn.dialect() == Dialect::Postgres {
        conn.query(&Sql::new("SELECT n FROM auth_epoch WHERE id = 1 FOR UPDATE"))?;
    }
    Ok(())
}

/// The path of the parent a location is created or moved under, read
/// under [`lock_tree`].
fn parent_path(conn: &mut dyn Conn, cx: &Cx, parent_id: &str) -> ApiResult<String> {
    let parent = query::find(conn, &LOCATION, &cx.scope, parent_id)?
        .ok_or_else(|| ApiError::field("parent_id", "parent_id provided is not valid"))?;
    Ok(parent.text("path").unwrap_or_default().to_string())
}

/// A location's path as stored now (under [`lock_tree`]): the record an
/// update started from was read before the lock, and a move of an
/// ancestor may have rewritten it since.
fn current_path(conn: &mut dyn Conn, id: &str) -> ApiResult<String> {
    conn.query_one(&Sql::with(
        "SELECT path FROM locations WHERE id = ?",
        vec![id.into()],
    ))?
    .and_then(|r| r[0].as_str().map(str::to_string))
    .ok_or_else(|| ApiError::not_found(LOCATION.name))
}

/// Moves the locations below `old_path` to below `new_path` (the subtree
/// follows its root).
fn move_subtree(conn: &mut dyn Conn, old_path: &str, new_path: &str) -> ApiResult<()> {
    let mut upper = old_path.to_string();
    upper.pop();
    upper.push('0');
    conn.execute(&Sql::with(
        "UPDATE locations SET path = ? || substr(path, ?) WHERE path > ? AND path < ?",
        vec![
            new_path.into(),
            Value::Int(old_path.chars().count() as i64 + 1),
            old_path.into(),
            upper.into(),
        ],
    ))?;
    Ok(())
}

/// Default product transactions must be this location's, of the right kind.
fn check_defaults(conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
    let mut errors = FieldErrors::new();
    for (field, method) in [("default_cc", "cc"), ("default_ach", "ach")] {
        if let Some(id) = record.text(field) {
            let found = conn.query_one(&Sql::with(
                "SELECT 1 FROM product_transactions WHERE id = ? AND location_id = ? AND payment_method = ?",
                vec![id.into(), record.id().into(), method.into()],
            ))?;
            if found.is_none() {
                errors.add(field, format!("{field} provided is not valid"));
            }
        }
    }
    errors.into_result()
}

/// A random 36-character key (UUID form), as the reference issues them.
fn location_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

impl Rules for LocationRules {
    fn before_create(
        &self,
        cx: &Cx,
        conn: &mut dyn Conn,
        input: &mut CreateInput,
    ) -> ApiResult<Option<Record>> {
        lock_tree(conn)?;
        let parent = input.record.text("parent_id").unwrap_or_default().to_string();
        let path = format!("{}{}/", parent_path(conn, cx, &parent)?, input.record.id());
        input.record.set("path", path);
        input.record.set("location_api_key", location_key());
        input.record.set("ticket_hash_key", location_key());
        check_defaults(conn, &input.record)?;
        boolean_flags(&mut input.record);
        Ok(None)
    }

    fn before_update(&self, cx: &Cx, conn: &mut dyn Conn, old: &Record, new: &mut Record) -> ApiResult<()> {
        // Every update, not only moves: a move rewrites the paths of a
        // subtree, and an update that locked one of its rows before the
        // tree would deadlock with it.
        lock_tree(conn)?;
        check_defaults(conn, new)?;
        boolean_flags(new);
        if new.get("parent_id") == old.get("parent_id") {
            return Ok(());
        }
        if old.id() == cx.scope.location_id {
            return Err(ApiError::field("parent_id", "Your own location cannot be moved."));
        }
        let parent = new.text("parent_id").unwrap_or_default().to_string();
        let parent_path = parent_path(conn, cx, &parent)?;
        let own_path = current_path(conn, old.id())?;
        if parent_path.starts_with(&own_path) {
            return Err(ApiError::field(
                "parent_id",
                "A location cannot be moved below itself.",
            ));
        }
        let new_path = format!("{parent_path}{}/", old.id());
        // From the path as it is now, not as `old` read it.
        move_subtree(conn, &own_path, &new_path)?;
        new.set("path", new_path);
        Ok(())
    }

    fn after_update(&self, cx: &Cx, conn: &mut dyn Conn, old: &Record, new: &Record) -> ApiResult<()> {
        super::users::follow_branding_domain(cx, conn, old, new)
    }

    fn before_delete(&self, cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
        // Counts the children a create under this location would add.
        lock_tree(conn)?;
        let mut errors = FieldErrors::new();
        if record.id() == cx.scope.location_id {
            errors.add("id", "You cannot delete your own location.");
            return Err(ApiError::Conflict(errors));
        }
        let mut held = Vec::new();
        for (table, column, what) in [
            ("locations", "parent_id", "child location"),
            ("users", "location_id", "user"),
            ("contacts", "location_id", "contact"),
            ("product_transactions", "location_id", "product transaction"),
            ("notes", "location_id", "note"),
            ("account_vaults", "location_id", "account vault"),
            ("tags", "location_id", "tag"),
            ("postback_configs", "location_id", "postback config"),
            ("terminals", "location_id", "terminal"),
            ("device_terms", "location_id", "device term"),
            ("signatures", "location_id", "signature"),
            ("hosted_payment_pages", "location_id", "hosted payment page"),
            ("quick_invoices", "location_id", "quick invoice"),
            ("recurrings", "location_id", "recurring"),
            ("product_files", "location_id", "product file"),
            ("boarding_applications", "location_id", "boarding application"),
        ] {
            let mut sql = Sql::new("SELECT COUNT(*) FROM ");
            sql.push(table)
                .push(" WHERE ")
                .push(column)
                .push(" = ")
                .bind(record.id().to_string());
            if table == "notes" {
                // Notes about the location itself go with it.
                sql.push(" AND resource_id <> ").bind(record.id().to_string());
            }
            let n = conn.query_int(&sql)?;
            if n > 0 {
                held.push(format!("{n} {what}{}", if n == 1 { "" } else { "s" }));
            }
        }
        if !held.is_empty() {
            errors.add(
                "id",
                format!(
                    "The location cannot be deleted while it holds {}.",
                    held.join(", ")
                ),
            );
            return Err(ApiError::Conflict(errors));
        }
        // Hosted forms opened there and the tickets typed on them are
        // short-lived capabilities, no reason to keep the location.
        crate::hosted::sessions::forget_location(conn, record.id())?;
        crate::hosted::tickets::forget_location(conn, record.id())
    }

    fn render(&self, cx: &Cx, _record: &Record, out: &mut Map<String, Json>) {
        // The keys sign hosted forms: only users who may change the
        // location see them.
        if !cx.perms.allows("locations.update") {
            out.insert("location_api_key".into(), Json::Null);
            out.insert("ticket_hash_key".into(), Json::Null);
        }
    }

    fn expand(&self, cx: &Cx, conn: &mut dyn Conn, record: &Record, name: &str) -> ApiResult<Json> {
        Ok(match name {
            "product_transactions" => {
                let mut sql = query::select(&PRODUCT_TRANSACTION, &cx.scope);
                sql.push(" AND t.location_id = ")
                    .bind(record.id().to_string())
                    .push(" ORDER BY t.id ASC");
                Json::Array(
                    conn.query(&sql)?
                        .into_iter()
                        .map(|r| Json::Object(render(cx, &Record::from_row(&PRODUCT_TRANSACTION, r))))
                        .collect(),
                )
            }
            "terminal" => Json::Array(super::terminals::records_of_location(cx, conn, record.id())?),
            // Branding domains, developer companies and the recurring and
            // file products are not modelled yet: absent values are null.
            _ => Json::Null,
        })
    }
}

/// The location's flags the spec types boolean: never null (unset, or
/// sent null, is off), so they answer true or false from the start.
pub const BOOLEAN_FLAGS: [&str; 3] = [
    "contact_email_trx_receipt_default",
    "show_contact_notes",
    "show_contact_files",
];

pub fn boolean_flags(record: &mut Record) {
    for flag in BOOLEAN_FLAGS {
        if record.get(flag).is_null() {
            record.set(flag, 0);
        }
    }
}
