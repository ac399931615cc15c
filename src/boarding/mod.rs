//! Boarding API v1 (`/v1`): offers, merchant applications and their
//! answers, the signature that publishes an application, and the operator
//! step that turns a published application into a merchant (ADR 0010).
//!
//! Application status: `draft` (created, answers may be resubmitted) ->
//! `published` (signed; nothing can change any more) -> `boarded` (a
//! merchant location was made from it).

pub mod answers;
pub mod applications;
pub mod cli;
pub mod offers;
pub mod operators;

use crate::error::FieldErrors;
use serde_json::Value as Json;

pub const DRAFT: &str = "draft";
pub const PUBLISHED: &str = "published";
pub const BOARDED: &str = "boarded";

/// The (table, column) of sealed boarding values, for key rotation.
pub const SEALED_COLUMNS: &[(&str, &str)] = &[("boarding_secrets", "sealed")];

/// Offer and application ids: random UUIDs (v4) as 32 hex characters.
pub fn new_uuid_v4() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A UUID (32 hex characters, or the hyphenated form) as 32 lowercase
/// hex characters; `None` for anything else.
pub fn parse_uuid(text: &str) -> Option<String> {
    if text.len() != 32 && text.len() != 36 {
        return None;
    }
    uuid::Uuid::try_parse(text).ok().map(|u| u.simple().to_string())
}

/// ISO 8601 (UTC) of epoch seconds: `2026-11-25T07:00:00Z`.
pub fn iso(ts: i64) -> String {
    chrono::DateTime::from_timestamp(ts, 0)
        .map(|d| d.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

/// The UTC date of epoch seconds (dates of birth are judged against it).
pub fn today(now: i64) -> chrono::NaiveDate {
    chrono::DateTime::from_timestamp(now, 0)
        .map(|d| d.date_naive())
        .unwrap_or_default()
}

/// An optional text member: `None` when blank, else trimmed and within
/// `min..=max` characters (an error is added otherwise).
pub fn text_field(
    raw: &Json,
    name: &str,
    min: usize,
    max: usize,
    errors: &mut FieldErrors,
) -> Option<String> {
    match raw {
        Json::Null => None,
        Json::String(s) if s.trim().is_empty() => None,
        Json::String(s) => {
            let s = s.trim();
            let n = s.chars().count();
            if s.chars().any(char::is_control) {
                errors.add(
                    name,
                    format!(
                        "{} must not contain control characters (such as a line break or a tab).",
                        answers::label(name)
                    ),
                );
                None
            } else if n < min || n > max {
                errors.add(
                    name,
                    format!("{} must be {min} to {max} characters.", answers::label(name)),
                );
                None
            } else {
                Some(s.to_string())
            }
        }
        _ => {
            errors.add(name, format!("{} must be a string.", answers::label(name)));
            None
        }
    }
}
