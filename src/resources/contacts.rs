//! Contacts: the customers of a location.

use crate::db::Conn;
use crate::engine::record::Record;
use crate::engine::resource::{Api, Expand, Field, Pattern, Postback, Resource, Scope, Search};
use crate::engine::rules::Rules;
use crate::engine::validate::{parse_flag, CreateInput};
use crate::engine::{query, Cx};
use crate::error::{ApiError, ApiResult};

use super::notes::notes_cascade;
use super::{ACCOUNT_VAULT, LOCATION, NOTE, USER};

pub static CONTACT: Resource = Resource {
    name: "contact",
    plural: "contacts",
    table: "contacts",
    model: "Contact",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::id("location_id")
            .post()
            .required()
            .filter()
            .refers(&LOCATION),
        Field::text("last_name", 1, 64)
            .post()
            .required()
            .put()
            .filter()
            .sort(),
        Field::text("first_name", 0, 64).pu().filter().sort(),
        Field::text("company_name", 0, 64).pu().filter().sort(),
        Field::text("account_number", 0, 32)
            .pu()
            .filter()
            .doc("bookkeeping number"),
        Field::text("contact_api_id", 0, 36)
            .pu()
            .exact()
            .sort()
            .doc("integrator's own id, unique per location"),
        Field::text("contact_balance", 0, 12).pu().filter(),
        Field::text("contact_c1", 0, 128).pu().filter(),
        Field::text("contact_c2", 0, 128).pu().filter(),
        Field::text("contact_c3", 0, 128).pu().filter(),
        Field::text("address", 0, 255).pu().filter(),
        Field::text("city", 0, 100).pu().filter().sort(),
        Field::text("state", 2, 2).pu().filter().pattern(Pattern::State),
        Field::text("zip", 4, 12).pu().filter().pattern(Pattern::Zip),
        Field::text("email", 5, 64)
            .pu()
            .filter()
            .sort()
            .pattern(Pattern::Email),
        Field::flag("email_trx_receipt").pu().filter(),
        Field::text("home_phone", 10, 10)
            .pu()
            .filter()
            .pattern(Pattern::Digits),
        Field::text("cell_phone", 10, 10)
            .pu()
            .filter()
            .pattern(Pattern::Digits),
        Field::text("office_phone", 10, 10)
            .pu()
            .filter()
            .pattern(Pattern::Digits),
        Field::text("office_ext_phone", 0, 10)
            .pu()
            .filter()
            .pattern(Pattern::Digits),
        Field::date("date_of_birth").pu().filter(),
        Field::text("header_message", 0, 250).pu().filter(),
        Field::int("header_message_type", 0, 4)
            .pu()
            .filter()
            .doc("0 popup; 1 to 4 coloured banners"),
        Field::int("update_if_exists", 0, 1)
            .post()
            .transient()
            .doc("1: a POST whose contact_api_id exists at the location updates that contact"),
        Field::id("created_user_id").hidden(),
        Field::id("modified_user_id").hidden(),
        Field::ts("created_ts"),
        Field::ts("modified_ts"),
    ],
    default_sort: ("created_ts", true),
    page_size: 20,
    scope: Scope::Column("location_id"),
    api_id: Some("contact_api_id"),
    unique: Some("contact_api_id"),
    expands: &[
        Expand::BelongsTo {
            name: "created_user",
            target: &USER,
            column: "created_user_id",
        },
        Expand::HasMany {
            name: "notes",
            target: &NOTE,
            column: "resource_id",
        },
        Expand::BelongsTo {
            name: "location",
            target: &LOCATION,
            column: "location_id",
        },
        Expand::Custom("user"),
        Expand::Changelogs { users: &USER },
    ],
    list_params: &[],
    computed: &[],
    rules: &ContactRules,
    // What people search customers by.
    search: Some(Search {
        table: "contacts_search",
        columns: &["first_name", "last_name", "email", "company_name"],
    }),
    cascades: &[notes_cascade()],
    postback: Some(Postback {
        by_product_transaction: false,
    }),
    api: Api {
        create_may_update: true,
        ..Api::PLAIN
    },
    doc: "A customer: its vaulted accounts, transactions, recurrings and invoices hang off it.",
};

struct ContactRules;

fn existing_by_api_id(conn: &mut dyn Conn, cx: &Cx, record: &Record) -> ApiResult<Option<Record>> {
    match (record.text("location_id"), record.text("contact_api_id")) {
        (Some(location), Some(api_id)) => Ok(query::find_by_api_id(
            conn, &CONTACT, &cx.scope, location, api_id,
        )?),
        _ => Ok(None),
    }
}

impl Rules for ContactRules {
    fn before_create(
        &self,
        cx: &Cx,
        conn: &mut dyn Conn,
        input: &mut CreateInput,
    ) -> ApiResult<Option<Record>> {
        let upsert = input
            .transient
            .get("update_if_exists")
            .and_then(parse_flag)
            .unwrap_or(false);
        if upsert && input.record.text("contact_api_id").is_none() {
            return Err(ApiError::field(
                "contact_api_id",
                "Contact Api Id cannot be blank when update_if_exists is 1.",
            ));
        }
        match existing_by_api_id(conn, cx, &input.record)? {
            // An upsert that updates needs what an update needs.
            Some(existing) if upsert => {
                cx.perms.require("contacts.update")?;
                Ok(Some(existing))
            }
            Some(existing) => Err(ApiError::field(
                "contact_api_id",
                format!(
                    "A contact with this contact_api_id already exists at this location (id {}). Send update_if_exists=1 to update it.",
                    existing.id()
                ),
            )),
            None => {
                // Receipts follow the location's default unless the
                // contact says otherwise: always a boolean, never null.
                if input.record.get("email_trx_receipt").is_null() {
                    let location = input.record.text("location_id").unwrap_or_default().to_string();
                    let default = conn
                        .query_one(&crate::db::Sql::with(
                            "SELECT contact_email_trx_receipt_default FROM locations WHERE id = ?",
                            vec![location.into()],
                        ))?
                        .and_then(|row| row[0].as_int())
                        .unwrap_or(0);
                    input.record.set("email_trx_receipt", i64::from(default != 0));
                }
                Ok(None)
            }
        }
    }

    /// The contact's vaults stay (they may still be charged) but no longer
    /// name it; each change is logged. Its recurrings: see
    /// [`crate::billing::end_for_contact`].
    fn before_delete(&self, cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
        crate::billing::end_for_contact(cx, conn, record.id())?;
        let contact_id = ACCOUNT_VAULT
            .field("contact_id")
            .ok_or_else(|| ApiError::internal("field"))?;
        let mut sql = query::select(&ACCOUNT_VAULT, &cx.scope);
        sql.push(" AND t.contact_id = ").bind(record.id().to_string());
        for row in conn.query(&sql)? {
            let vault = Record::from_row(&ACCOUNT_VAULT, row);
            let changes = vec![(contact_id, crate::db::Value::Null)];
            crate::engine::update_record(cx, conn, vault, crate::engine::validate::UpdateInput::of(changes))?;
        }
        Ok(())
    }

    fn before_update(&self, cx: &Cx, conn: &mut dyn Conn, old: &Record, new: &mut Record) -> ApiResult<()> {
        if new.get("contact_api_id") != old.get("contact_api_id") {
            if let Some(other) = existing_by_api_id(conn, cx, new)? {
                if other.id() != old.id() {
                    return Err(ApiError::field(
                        "contact_api_id",
                        "Contact Api Id has already been taken at this location.",
                    ));
                }
            }
        }
        Ok(())
    }
}
