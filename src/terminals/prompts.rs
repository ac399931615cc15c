//! The answer of a device-term prompt: what the router records when a
//! terminal reports what the cardholder did with the terms it showed
//! (`terminals::jobs`, ADR 0020).
//!
//! Accepted: `reason_code_id` 1000 and, when the device captured one, the
//! signature stored as a signature record (`resource` DeviceTerm), which
//! the term's `signature` expand shows. Declined (the cardholder refused,
//! or the prompt timed out or was cancelled): 1601, and the term may be
//! tried again by POSTing its `device_terms_api_id`.

use crate::db::Value;
use crate::engine::query;
use crate::engine::record::Record;
use crate::engine::validate::CreateInput;
use crate::engine::{self, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::processor::codes::ReasonCode;
use crate::resources::{DEVICE_TERM, SIGNATURE};

/// What the device reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PromptAnswer {
    /// The cardholder accepted; `signature` is the captured image in
    /// base64 (PNG, JPEG or GIF), required when the term asks for one.
    Accepted { signature: Option<String> },
    /// Refused, timed out or cancelled on the device.
    Declined,
}

/// Records the answer to device term `id` (in `cx`'s scope) in the
/// caller's write transaction and returns the updated term. A term that
/// was already answered is a conflict: a device answers a prompt once.
pub fn answer(cx: &Cx, conn: &mut dyn crate::db::Conn, id: &str, answer: PromptAnswer) -> ApiResult<Record> {
    let term = query::find(conn, &DEVICE_TERM, &cx.scope, id)?
        .ok_or_else(|| ApiError::not_found(DEVICE_TERM.name))?;
    if !term.get("reason_code_id").is_null() {
        let mut errors = FieldErrors::new();
        errors.add("id", "The device term was already answered.");
        return Err(ApiError::Conflict(errors));
    }
    let code = match answer {
        PromptAnswer::Accepted { signature } => {
            match signature {
                Some(image) => {
                    let mut record = Record::empty(&SIGNATURE);
                    record.set("resource", "DeviceTerm");
                    record.set("resource_id", term.id().to_string());
                    record.set("signature", image);
                    let input = CreateInput {
                        record,
                        present: vec!["resource", "resource_id", "signature"],
                        transient: Default::default(),
                    };
                    engine::create(cx, conn, &SIGNATURE, input)?;
                }
                None if term.int("require_signature") == Some(1) => {
                    return Err(ApiError::field(
                        "signature",
                        "The device term requires a signature.",
                    ));
                }
                None => {}
            }
            ReasonCode::APPROVED
        }
        PromptAnswer::Declined => ReasonCode::GENERIC_DECLINE,
    };
    let mut answered = term.clone();
    answered.set("reason_code_id", Value::Int(i64::from(code.0)));
    engine::save_record(cx, conn, &term, answered)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Perms;
    use crate::crypto::Keyring;
    use crate::db::{Sql, Store};
    use crate::engine::events::NoSink;
    use crate::engine::query::TenantScope;
    use crate::engine::validate;
    use crate::ids::{new_id, ROOT_LOCATION_ID};
    use crate::resources::TERMINAL;
    use base64::Engine as _;
    use serde_json::json;
    use std::sync::Arc;

    fn cx(location_id: &str, user_id: &str) -> Cx {
        Cx {
            user_id: user_id.to_string(),
            scope: TenantScope {
                location_id: location_id.to_string(),
                path: format!("/{ROOT_LOCATION_ID}/{location_id}/"),
                tz: chrono_tz::UTC,
                leaf: false,
            },
            now: 1_700_000_000,
            outbound: Default::default(),
            keyring: Arc::new(Keyring::new(&[7; 32], &[])),
            public_url: Arc::from(""),
            perms: Arc::new(Perms {
                admin: true,
                ..Default::default()
            }),
            sink: Arc::new(NoSink),
            user_receipts: None,
            epoch: None,
        }
    }

    fn create(
        store: &Store,
        cx: &Cx,
        res: &'static crate::engine::resource::Resource,
        body: serde_json::Value,
    ) -> ApiResult<Record> {
        let input = validate::for_create(res, body.as_object().unwrap()).map_err(ApiError::Validation)?;
        let cx = cx.clone();
        store
            .write_blocking(move |conn| engine::create(&cx, conn, res, input))
            .map(|(r, _)| r)
    }

    /// A prompt is answered once: accepted with its signature stored as a
    /// record, or declined and then retried by its api id.
    #[test]
    fn answers_are_recorded_once_and_declines_retry() {
        let path = std::env::temp_dir().join(format!("ferrogate-prompts-{}.db", new_id()));
        let store = Store::open(&format!("sqlite://{}", path.display()), 2).unwrap();
        store.migrate().unwrap();
        let creds = crate::bootstrap::run(&store, Arc::new(Keyring::new(&[7; 32], &[])), None, 1_700_000_000)
            .unwrap();
        let cx = cx(&creds.location_id, &creds.user_id);
        let loc = creds.location_id.clone();
        let terminal = create(
            &store,
            &cx,
            &TERMINAL,
            json!({ "location_id": loc, "serial_number": "SIM-1" }),
        )
        .unwrap();
        let term = |api_id: &str| {
            json!({ "location_id": loc, "terminal_id": terminal.id(), "require_signature": 1,
                "terms_conditions": "I agree", "device_terms_api_id": api_id })
        };
        let png = base64::engine::general_purpose::STANDARD
            .encode([b"\x89PNG\r\n\x1a\n".as_slice(), &[1; 16]].concat());
        let answer_with = |id: String, a: PromptAnswer| {
            let cx = cx.clone();
            store.write_blocking(move |conn| answer(&cx, conn, &id, a))
        };

        // Accepted: a signature is required, then stored as a record.
        let accepted = create(&store, &cx, &DEVICE_TERM, term("a-1")).unwrap();
        assert!(accepted.get("reason_code_id").is_null());
        let missing = answer_with(
            accepted.id().to_string(),
            PromptAnswer::Accepted { signature: None },
        );
        assert!(matches!(missing, Err(ApiError::Validation(_))));
        let not_image = answer_with(
            accepted.id().to_string(),
            PromptAnswer::Accepted {
                signature: Some("aGVsbG8=".into()),
            },
        );
        assert!(matches!(not_image, Err(ApiError::Validation(_))));
        let done = answer_with(
            accepted.id().to_string(),
            PromptAnswer::Accepted {
                signature: Some(png.clone()),
            },
        )
        .unwrap();
        assert_eq!(done.int("reason_code_id"), Some(1000));
        let id = accepted.id().to_string();
        let signatures = store
            .write_blocking(move |conn| {
                Ok(conn.query_int(&Sql::with(
                    "SELECT COUNT(*) FROM signatures WHERE resource = 'DeviceTerm' AND resource_id = ?",
                    vec![id.into()],
                ))?)
            })
            .unwrap();
        assert_eq!(signatures, 1);
        // Answered once.
        let again = answer_with(accepted.id().to_string(), PromptAnswer::Declined);
        assert!(matches!(again, Err(ApiError::Conflict(_))));
        // An accepted term's api id is taken.
        assert!(matches!(
            create(&store, &cx, &DEVICE_TERM, term("a-1")),
            Err(ApiError::Validation(_))
        ));

        // Declined, then retried through the api id: the same term waits again.
        let declined = create(&store, &cx, &DEVICE_TERM, term("d-1")).unwrap();
        let answered = answer_with(declined.id().to_string(), PromptAnswer::Declined).unwrap();
        assert_eq!(answered.int("reason_code_id"), Some(1601));
        let retried = create(&store, &cx, &DEVICE_TERM, term("d-1")).unwrap();
        assert_eq!(retried.id(), declined.id());
        assert!(retried.get("reason_code_id").is_null());
        // A pending term is not retried.
        assert!(matches!(
            create(&store, &cx, &DEVICE_TERM, term("d-1")),
            Err(ApiError::Validation(_))
        ));
        let ghost = answer_with(new_id(), PromptAnswer::Declined);
        assert!(matches!(ghost, Err(ApiError::NotFound(_))));

        store.shutdown();
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}
