//! Record ids: UUIDv7 as 32 lowercase hex characters, time-ordered and
//! within the spec's 24-36 characters.

pub fn new_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

/// Whether `s` has the shape of an id (24-36 characters of [0-9A-Za-z-]).
/// Anything else cannot name a record, so lookups skip the database.
pub fn looks_like_id(s: &str) -> bool {
    (24..=36).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// The root of the location tree; merchants are created below it.
pub const ROOT_LOCATION_ID: &str = "00000000000000000000000000000000";
