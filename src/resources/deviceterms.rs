//! Device terms (spec "Device term", reference 6.6): terms and conditions
//! a location shows on a terminal for the cardholder to accept, with a
//! signature when `require_signature` is set. The POST shows them on the
//! device (`terminals::requests::device_term`) and records the term with
//! the answer (`terminals::prompts::answer`: 1000 accepted, with the
//! signature as a signature record; 1601 declined). A POST naming the
//! `device_terms_api_id` of a declined term retries that term's prompt.

use crate::db::{Conn, Sql};
use crate::engine::query;
use crate::engine::record::Record;
use crate::engine::resource::{Api, Expand, Field, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::validate::CreateInput;
use crate::engine::{self, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::processor::codes::ReasonCode;
use serde_json::{json, Map, Value as Json};

use super::{LOCATION, TERMINAL, USER};

/// The reference's text for a term sent to a terminal that cannot
/// capture signatures (reason code 1541).
pub const NOT_SIGNATURE_CAPABLE: &str = "Device is not signature capable";

pub static DEVICE_TERM: Resource = Resource {
    name: "deviceterm",
    plural: "deviceterms",
    table: "device_terms",
    model: "DeviceTerm",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::id("location_id")
            .post()
            .required()
            .filter()
            .refers(&LOCATION),
        Field::id("terminal_id")
            .post()
            .required()
            .filter()
            .refers(&TERMINAL)
            .doc("a terminal of the term's location"),
        Field::flag("require_signature")
            .post()
            .required()
            .doc("the terminal must have sig_capture_enable"),
        Field::text("terms_conditions", 1, 4096).post().required(),
        Field::text("device_terms_api_id", 0, 36)
            .post()
            .exact()
            .doc("unique per location; naming a declined term retries its prompt"),
        Field::int("reason_code_id", 0, 9999)
            .exact()
            .sort()
            .doc("system: null until the device answers; 1000 accepted, 1601 declined"),
        Field::id("created_user_id").filter(),
        Field::id("modified_user_id").hidden(),
        Field::ts("created_ts"),
        Field::ts("modified_ts"),
    ],
    default_sort: ("created_ts", true),
    page_size: 20,
    scope: Scope::Column("location_id"),
    api_id: None,
    unique: Some("device_terms_api_id"),
    expands: &[
        Expand::BelongsTo {
            name: "created_user",
            target: &USER,
            column: "created_user_id",
        },
        Expand::BelongsTo {
            name: "location",
            target: &LOCATION,
            column: "location_id",
        },
        Expand::BelongsTo {
            name: "terminal",
            target: &TERMINAL,
            column: "terminal_id",
        },
        Expand::Custom("reason_code"),
        Expand::CustomRecords {
            name: "signature",
            permission: "signatures.read",
            many: false,
        },
    ],
    list_params: &[],
    computed: &[
        (
            "device_term_api_id",
            "string",
            "device_terms_api_id as the reference's answers name it",
        ),
        (
            "signature",
            "object",
            "the signature the device captured (id, resource_id, resource DeviceTerm, signature, created_ts, modified_ts, _links); null without one or without signatures.read",
        ),
    ],
    rules: &DeviceTermRules,
    search: None,
    cascades: &[],
    postback: None,
    api: Api {
        create_may_update: true,
        ..Api::PLAIN
    },
    doc: "Terms a terminal shows for the cardholder to accept (and sign). The POST is held open while the terminal shows them (at most its overall_timeout) and answers the term with the cardholder's answer: reason_code_id 1000 accepted (with the signature when asked), 1601 declined (also when the prompt timed out or was cancelled). 503 when the terminal's device is offline and 409 when it is busy (nothing recorded). A POST naming the device_terms_api_id of a declined term retries it (200).",
};

/// Whether the device answered the term's prompt with a decline: the
/// only state a POST may retry.
pub fn is_declined(record: &Record) -> bool {
    record
        .int("reason_code_id")
        .is_some_and(|c| c != i64::from(ReasonCode::APPROVED.0))
}

struct DeviceTermRules;

/// The terminal is the location's, active, and captures signatures when
/// the term asks for one.
fn check_terminal(conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
    let (Some(terminal), Some(location)) = (record.text("terminal_id"), record.text("location_id")) else {
        return Ok(());
    };
    let row = conn.query_one(&Sql::with(
        "SELECT active, sig_capture_enable FROM terminals WHERE id = ? AND location_id = ?",
        vec![terminal.into(), location.into()],
    ))?;
    let mut errors = FieldErrors::new();
    match row {
        None => errors.add(
            "terminal_id",
            "The terminal must belong to the device term's location.",
        ),
        Some(row) => {
            if row[0].as_int() == Some(0) {
                errors.add("terminal_id", "The terminal is not active.");
            } else if record.int("require_signature") == Some(1) && row[1].as_int() == Some(0) {
                errors.add("require_signature", NOT_SIGNATURE_CAPABLE);
            }
        }
    }
    errors.into_result()
}

/// The term a new one's `device_terms_api_id` names at its location: a
/// declined one (to be tried again), or a refusal when it is not declined.
fn retried_term(cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<Option<Record>> {
    let (Some(location), Some(api_id)) = (
        record.text("location_id"),
        record.text("device_terms_api_id").filter(|s| !s.is_empty()),
    ) else {
        return Ok(None);
    };
    let mut sql = query::select(&DEVICE_TERM, &cx.scope);
    sql.push(" AND t.location_id = ")
        .bind(location.to_string())
        .push(" AND t.device_terms_api_id = ")
        .bind(api_id.to_string());
    let Some(row) = conn.query_one(&sql)? else {
        return Ok(None);
    };
    let existing = Record::from_row(&DEVICE_TERM, row);
    if !is_declined(&existing) {
        return Err(ApiError::field(
            "device_terms_api_id",
            "Device Terms Api Id has already been taken (only a declined term can be tried again).",
        ));
    }
    Ok(Some(existing))
}

/// The checks of a create that write nothing (the terminal, the api id):
/// made before a terminal is asked to show the terms, so a term that
/// cannot be recorded never reaches a cardholder.
pub fn precheck(cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
    engine::check_references(cx, conn, record)?;
    check_terminal(conn, record)?;
    retried_term(cx, conn, record)?;
    Ok(())
}

/// How long a claim on an api id holds when its request never released
/// it (its process died): past the longest a request waits on its
/// location's clock (an overall_timeout of 300 s, the holder's 60 s more).
const CLAIM_STALE_S: i64 = 600;

/// Claims `api_id` at `location_id` for one request (`claim_id`) until
/// [`release_api_id`], before its terms are checked and shown: a second
/// request naming the api id meanwhile is refused before it prompts
/// anyone. A claim older than [`CLAIM_STALE_S`] is taken over. One
/// upsert, so of two requests at once exactly one holds the claim.
pub fn claim_api_id(
    conn: &mut dyn Conn,
    location_id: &str,
    api_id: &str,
    claim_id: &str,
    now: i64,
) -> ApiResult<()> {
    let taken = conn.execute(&Sql::with(
        "INSERT INTO device_term_claims (location_id, api_id, claim_id, claimed_ts) VALUES (?, ?, ?, ?) \
         ON CONFLICT (location_id, api_id) DO UPDATE SET claim_id = excluded.claim_id, \
         claimed_ts = excluded.claimed_ts WHERE device_term_claims.claimed_ts < ?",
        vec![
            location_id.into(),
            api_id.into(),
            claim_id.into(),
            now.into(),
            (now - CLAIM_STALE_S).into(),
        ],
    ))?;
    if taken == 0 {
        return Err(ApiError::field(
            "device_terms_api_id",
            "Device Terms Api Id is being shown on a terminal by another request; try again once it is answered.",
        ));
    }
    Ok(())
}

/// Releases a claim of [`claim_api_id`] (only the request's own).
pub fn release_api_id(conn: &mut dyn Conn, location_id: &str, api_id: &str, claim_id: &str) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "DELETE FROM device_term_claims WHERE location_id = ? AND api_id = ? AND claim_id = ?",
        vec![location_id.into(), api_id.into(), claim_id.into()],
    ))?;
    Ok(())
}

impl Rules for DeviceTermRules {
    /// The spec lists `signature` among a device term's fields: every
    /// read shows it (the `signature` expand names the same member).
    fn render_read(
        &self,
        cx: &Cx,
        conn: &mut dyn Conn,
        record: &Record,
        _extra: &[(String, String)],
        expand: &[String],
    ) -> ApiResult<Option<Json>> {
        let mut out = engine::render_expanded(cx, conn, record, expand)?;
        if out.get("signature").is_none() {
            out["signature"] = super::signatures::latest(cx, conn, "DeviceTerm", record.id())?;
        }
        Ok(Some(out))
    }

    fn before_create(
        &self,
        cx: &Cx,
        conn: &mut dyn Conn,
        input: &mut CreateInput,
    ) -> ApiResult<Option<Record>> {
        check_terminal(conn, &input.record)?;
        let Some(existing) = retried_term(cx, conn, &input.record)? else {
            return Ok(None);
        };
        // A retry: the term as now sent, waiting for the device again.
        let mut retried = existing.clone();
        for name in ["terminal_id", "require_signature", "terms_conditions"] {
            retried.set(name, input.record.get(name).clone());
        }
        retried.set("reason_code_id", crate::db::Value::Null);
        let saved = engine::save_record(cx, conn, &existing, retried)?;
        Ok(Some(saved))
    }

    fn render(&self, _cx: &Cx, record: &Record, out: &mut Map<String, Json>) {
        let links = out.remove("_links");
        out.insert(
            "device_term_api_id".into(),
            json!(record.text("device_terms_api_id")),
        );
        if let Some(links) = links {
            out.insert("_links".into(), links);
        }
    }

    fn expand(&self, cx: &Cx, conn: &mut dyn Conn, record: &Record, name: &str) -> ApiResult<Json> {
        Ok(match name {
            "reason_code" => match record.int("reason_code_id") {
                Some(id) => json!({ "id": id, "title": ReasonCode(id as u16).label() }),
                None => Json::Null,
            },
            "signature" => super::signatures::latest(cx, conn, "DeviceTerm", record.id())?,
            _ => Json::Null,
        })
    }
}
