//! The hash-key of hosted forms (reference 7.1): a lowercase hex
//! HMAC-SHA256, keyed with the user's hash key, over the user id followed
//! by the timestamp's digits.
//!
//! The reference gives two lifetimes, "the timestamp expires after 5
//! minutes" and "the HMAC is good for 15 minutes"; we enforce both, each
//! where it reads naturally (ADR 0015): a form opens only within
//! [`TIMESTAMP_WINDOW_S`] of its timestamp, and what it opened can be
//! submitted until [`HASH_LIFETIME_S`] after it.

use crate::error::{ApiError, ApiResult};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// The reference's refusal text for a hash that does not match.
pub const INVALID: &str = "Hash key is invalid";
/// How far the timestamp may be from the service's clock when a form is
/// opened (either side: clocks drift).
pub const TIMESTAMP_WINDOW_S: i64 = 5 * 60;
/// How long after its timestamp a hash-key's form may be submitted.
pub const HASH_LIFETIME_S: i64 = 15 * 60;

/// The hash-key for `user_id` at `timestamp` (`None` only if the HMAC
/// refused the key, which it does for no length).
pub fn compute(user_hash_key: &str, user_id: &str, timestamp: &str) -> Option<String> {
    let mut mac = Hmac::<Sha256>::new_from_slice(user_hash_key.as_bytes()).ok()?;
    mac.update(user_id.as_bytes());
    mac.update(timestamp.as_bytes());
    Some(hex::encode(mac.finalize().into_bytes()))
}

/// Whether `presented` is the hash-key (compared in constant time; the
/// reference writes it in lowercase, and we accept either case).
pub fn matches(user_hash_key: &str, user_id: &str, timestamp: &str, presented: &str) -> bool {
    let Some(expected) = compute(user_hash_key, user_id, timestamp) else {
        return false;
    };
    let presented = presented.to_ascii_lowercase();
    presented.len() == expected.len() && bool::from(expected.as_bytes().ct_eq(presented.as_bytes()))
}

/// Epoch seconds, digits only.
pub fn parse_timestamp(text: &str) -> ApiResult<i64> {
    if text.is_empty() || text.len() > 12 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::Unauthorized(
            "The timestamp must be the epoch seconds the hash-key was made at.".into(),
        ));
    }
    text.parse()
        .map_err(|_| ApiError::Unauthorized("The timestamp is not a number of seconds.".into()))
}

/// Refuses a timestamp too far from `now` to open a form with. `offset`
/// is how far the location's test clock is ahead: a link signed with the
/// real time after an advance is the usual cause, so the answer says so
/// (it is checked after the hash-key, so only the link's maker sees it).
pub fn check_fresh(timestamp: i64, now: i64, offset: i64) -> ApiResult<()> {
    if (now - timestamp).abs() > TIMESTAMP_WINDOW_S {
        let mut why = format!(
            "The timestamp has expired: a form opens within {} minutes of the timestamp its hash-key was made with. Make a new link.",
            TIMESTAMP_WINDOW_S / 60
        );
        if offset != 0 {
            why.push_str(&format!(
                " This location's test clock is {offset} seconds ahead: sign links with its time (`now` of GET /v2/developer/testclock)."
            ));
        }
        return Err(ApiError::Unauthorized(why));
    }
    Ok(())
}

/// The hash-key's digest, by which a used one is remembered (the
/// hash-key itself is a credential and is not stored).
pub fn digest(presented: &str) -> String {
    crate::crypto::hash_api_key(&presented.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_sample_computes_to_its_value() {
        assert_eq!(
            compute("my_user_hash_key", "my_user_id", "1513362490").as_deref(),
            Some("9f538ce0b8030933c778af12ce4399a2f27ef31153a2c39250d082a20bc259bb")
        );
        assert!(matches(
            "my_user_hash_key",
            "my_user_id",
            "1513362490",
            "9F538CE0B8030933C778AF12CE4399A2F27EF31153A2C39250D082A20BC259BB"
        ));
        assert!(!matches(
            "my_user_hash_key",
            "my_user_id",
            "1513362491",
            &compute("my_user_hash_key", "my_user_id", "1513362490").unwrap()
        ));
        assert!(!matches("my_user_hash_key", "my_user_id", "1513362490", "9f538c"));
    }

    #[test]
    fn a_timestamp_opens_a_form_within_five_minutes_either_side() {
        assert!(check_fresh(1_000, 1_000 + 300, 0).is_ok());
        assert!(check_fresh(1_000, 1_000 + 301, 0).is_err());
        assert!(check_fresh(1_000 + 300, 1_000, 0).is_ok());
        assert!(check_fresh(1_000 + 301, 1_000, 0).is_err());
        let hint = |offset| format!("{:?}", check_fresh(1_000, 9_000, offset).unwrap_err());
        assert!(!hint(0).contains("test clock"));
        assert!(
            hint(86_400).contains("test clock is 86400 seconds ahead"),
            "{}",
            hint(86_400)
        );
        assert!(parse_timestamp("15133624a0").is_err());
        assert!(parse_timestamp("").is_err());
        assert_eq!(parse_timestamp("1513362490").unwrap(), 1_513_362_490);
    }
}
