//! Terminals: a location's card-present payment devices (spec "Terminal",
//! reference 6.12). Each terminal has a device secret the device
//! authenticates its connection with: made on create, shown once in the
//! create answer (`http::terminals`), kept only as a digest
//! (`terminals::new_secret`, ADR 0018). `terminal_timeouts` holds the
//! spec's nine timeouts, each within its bounds (`terminals::timeouts`).

use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::engine::resource::{Api, Expand, Field, Pattern, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::validate::CreateInput;
use crate::engine::Cx;
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::terminals::{self as domain, timeouts};
use serde_json::{json, Value as Json};

use super::{LOCATION, USER};

/// The port a terminal listens on when none is given (spec).
pub const DEFAULT_PORT: i64 = 10009;

const MAX_ROOM_RATE: i64 = 99_999_999;

pub static TERMINAL: Resource = Resource {
    name: "terminal",
    plural: "terminals",
    table: "terminals",
    model: "Terminal",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::flag("active").pu().filter().doc("default 1"),
        Field::id("location_id")
            .post()
            .required()
            .filter()
            .refers(&LOCATION)
            .doc("not updatable"),
        Field::text("title", 0, 64).pu().filter().sort(),
        Field::text("serial_number", 1, 36)
            .pu()
            .required()
            .exact()
            .sort()
            .doc("the device's serial number, as printed on it"),
        Field::text("terminal_number", 0, 36).pu().exact(),
        Field::text("mac_address", 0, 16).pu(),
        Field::text("local_ip_address", 0, 15)
            .pu()
            .doc("IPv4 address on the merchant's network; the device reports its own when it registers"),
        Field::int("port", 1, 65535).pu().doc("default 10009"),
        Field::ts("last_registration_ts").doc("system: set when the device registers"),
        Field::json("terminal_timeouts", 1024)
            .pu()
            .doc("an object of timeouts in seconds; members not sent keep their value (defaults on create): card_entry_timeout 120 (20-120), device_terms_prompt_timeout 60 (5-300), overall_timeout 300 (30-300), pin_entry_timeout 30 (20-50), signature_input_timeout 10 (10-50), signature_submit_timeout 30 (20-50), status_display_time 7 (1-30), tip_cashback_timeout 30 (20-50), transaction_timeout 10 (10-20)"),
        Field::text("terminal_application_id", 0, 36)
            .post()
            .exact()
            .pattern(Pattern::Token)
            .doc("accepted on create"),
        Field::text("terminal_manufacturer_id", 0, 36)
            .post()
            .exact()
            .pattern(Pattern::Token)
            .doc("accepted on create"),
        Field::text("model", 0, 64).pu(),
        Field::flag("debit").pu().doc("default 0"),
        Field::flag("emv").pu().doc("default 1"),
        Field::text("header_line_1", 0, 64).pu(),
        Field::text("header_line_2", 0, 64).pu(),
        Field::text("header_line_3", 0, 64).pu(),
        Field::text("header_line_4", 0, 64).pu(),
        Field::text("header_line_5", 0, 64).pu(),
        Field::text("trailer_line_1", 0, 64).pu(),
        Field::text("trailer_line_2", 0, 64).pu(),
        Field::text("trailer_line_3", 0, 64).pu(),
        Field::text("trailer_line_4", 0, 64).pu(),
        Field::text("trailer_line_5", 0, 64).pu(),
        Field::text("communication_type", 0, 32).pu(),
        Field::flag("is_provisioned").doc("system: true once the device has registered"),
        Field::text("default_checkin", 0, 32).pu(),
        Field::text("default_checkout", 0, 32).pu(),
        Field::money("default_room_rate", MAX_ROOM_RATE).pu(),
        Field::text("default_room_number", 0, 32).pu(),
        Field::int("terminal_cvm_id", 0, 9999).pu().exact(),
        Field::flag("tip_enable").pu().filter().doc("default 0"),
        Field::flag("cashback_enable").pu().doc("default 0"),
        Field::flag("print_enable").pu().doc("default 0"),
        Field::flag("sig_capture_enable")
            .pu()
            .doc("default 1; device terms with require_signature need it"),
        Field::text("secret_digest", 64, 64).digest(),
        Field::id("created_user_id"),
        Field::id("modified_user_id"),
        Field::ts("created_ts"),
        Field::ts("modified_ts"),
    ],
    default_sort: ("id", true),
    page_size: 20,
    scope: Scope::Column("location_id"),
    api_id: None,
    unique: None,
    expands: &[
        Expand::Custom("terminal_application"),
        Expand::BelongsTo {
            name: "location",
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
    computed: &[(
        "terminal_secret",
        "string",
        "in the create answer only, never again: the secret the device authenticates its connection with (store it on the device)",
    )],
    rules: &TerminalRules,
    search: None,
    cascades: &[],
    postback: None,
    api: Api {
        delete_may_conflict: true,
        ..Api::PLAIN
    },
    doc: "A card-present payment device of a location. The create answer carries the device's secret once (terminal_secret).",
};

struct TerminalRules;

/// Checks what a field's declaration cannot say: the address is an IPv4
/// address, and the timeouts are the spec's, each within its bounds.
fn check(record: &mut Record, old_timeouts: Option<&str>) -> ApiResult<()> {
    let mut errors = FieldErrors::new();
    if let Some(ip) = record.text("local_ip_address").filter(|s| !s.is_empty()) {
        if ip.parse::<std::net::Ipv4Addr>().is_err() {
            errors.add(
                "local_ip_address",
                "local_ip_address must be an IPv4 address (for example 192.168.1.20).",
            );
        }
    }
    let sent = record.text("terminal_timeouts").map(str::to_string);
    match timeouts::merge(old_timeouts, sent.as_deref()) {
        Ok(merged) => record.set("terminal_timeouts", merged),
        Err(messages) => {
            for m in messages {
                errors.add("terminal_timeouts", m);
            }
        }
    }
    errors.into_result()
}

impl Rules for TerminalRules {
    fn before_create(
        &self,
        _cx: &Cx,
        _conn: &mut dyn Conn,
        input: &mut CreateInput,
    ) -> ApiResult<Option<Record>> {
        let record = &mut input.record;
        for (name, default) in [
            ("active", 1i64),
            ("port", DEFAULT_PORT),
            ("debit", 0),
            ("emv", 1),
            ("tip_enable", 0),
            ("cashback_enable", 0),
            ("print_enable", 0),
            ("sig_capture_enable", 1),
        ] {
            if record.get(name).is_null() {
                record.set(name, default);
            }
        }
        record.set("is_provisioned", 0i64);
        // The create handler hands the device its secret; a terminal made
        // any other way gets one nobody knows (a new one replaces it).
        if record.get("secret_digest").is_null() {
            record.set(
                "secret_digest",
                crate::crypto::hash_api_key(&domain::new_secret()),
            );
        }
        check(record, None)?;
        Ok(None)
    }

    fn before_update(&self, _cx: &Cx, _conn: &mut dyn Conn, old: &Record, new: &mut Record) -> ApiResult<()> {
        // The defaults stay defaults: a blank never clears a setting.
        for name in [
            "active",
            "port",
            "debit",
            "emv",
            "tip_enable",
            "cashback_enable",
            "print_enable",
            "sig_capture_enable",
        ] {
            if new.get(name).is_null() {
                new.set(name, old.get(name).clone());
            }
        }
        if new.get("terminal_timeouts") == old.get("terminal_timeouts") {
            return check(new, None);
        }
        check(new, old.text("terminal_timeouts"))
    }

    /// Device terms are consent records: a terminal that has some stays
    /// (set `active` to 0 instead).
    fn before_delete(&self, _cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
        let used = conn.query_one(&Sql::with(
            "SELECT 1 FROM device_terms WHERE terminal_id = ?",
            vec![record.id().into()],
        ))?;
        if used.is_some() {
            let mut errors = FieldErrors::new();
            errors.add(
                "id",
                "The terminal has device terms and cannot be deleted; set active to 0 instead.",
            );
            return Err(ApiError::Conflict(errors));
        }
        Ok(())
    }

    fn expand(&self, _cx: &Cx, _conn: &mut dyn Conn, record: &Record, name: &str) -> ApiResult<Json> {
        Ok(match name {
            // No catalogue of terminal applications: the id as given.
            "terminal_application" => match record.text("terminal_application_id") {
                Some(id) if !id.is_empty() => json!({
                    "id": id,
                    "terminal_manufacturer_id": record.text("terminal_manufacturer_id"),
                }),
                _ => Json::Null,
            },
            _ => Json::Null,
        })
    }
}

/// A location's terminals in the caller's scope, newest first (at most
/// 500).
fn at_location(cx: &Cx, conn: &mut dyn Conn, location_id: &str) -> ApiResult<Vec<Record>> {
    let mut sql = crate::engine::query::select(&TERMINAL, &cx.scope);
    sql.push(" AND t.location_id = ")
        .bind(location_id.to_string())
        .push(" ORDER BY t.id DESC LIMIT 500");
    Ok(conn
        .query(&sql)?
        .into_iter()
        .map(|row| Record::from_row(&TERMINAL, row))
        .collect())
}

/// A location's terminals as whole records (a location's `terminal`
/// expand: an embed carries the related resource's default fields).
pub fn records_of_location(cx: &Cx, conn: &mut dyn Conn, location_id: &str) -> ApiResult<Vec<Json>> {
    Ok(at_location(cx, conn, location_id)?
        .iter()
        .map(|r| Json::Object(crate::engine::render(cx, r)))
        .collect())
}

/// The terminals of a location as location infos list them: id,
/// local_ip_address, port, title and `_links`.
pub fn of_location(cx: &Cx, conn: &mut dyn Conn, location_id: &str) -> ApiResult<Vec<Json>> {
    Ok(at_location(cx, conn, location_id)?
        .iter()
        .map(|r| {
            json!({
                "id": r.id(),
                "local_ip_address": r.text("local_ip_address"),
                "port": r.int("port"),
                "title": r.text("title"),
                "_links": { "self": { "href": cx.href(&format!("/v2/terminals/{}", r.id())) } },
            })
        })
        .collect())
}
