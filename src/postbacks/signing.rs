//! Standard Webhooks signatures (<https://www.standardwebhooks.com>).
//!
//! Each delivery carries three headers: `webhook-id` (the message id, the
//! same on every retry), `webhook-timestamp` (Unix seconds of this attempt)
//! and `webhook-signature`: `v1,` + base64 of HMAC-SHA256 over
//! `"{id}.{timestamp}.{body}"`, keyed with the endpoint's secret
//! (`whsec_` + base64). Following the standard lets receivers verify with
//! any of its libraries, or with a few lines of their own.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::digest::{Key, KeyInit};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// Header with the message id (stable across retries, for de-duplication).
pub const HEADER_ID: &str = "webhook-id";
/// Header with the attempt's Unix time in seconds (for freshness checks).
pub const HEADER_TIMESTAMP: &str = "webhook-timestamp";
/// Header with the space-separated `v1,<base64>` signatures.
pub const HEADER_SIGNATURE: &str = "webhook-signature";

/// The prefix the standard gives secrets, so they are recognisable.
pub const SECRET_PREFIX: &str = "whsec_";
const MIN_SECRET_BYTES: usize = 24;
const MAX_SECRET_BYTES: usize = 64;
const GENERATED_SECRET_BYTES: usize = 32;

/// The key bytes of a `whsec_…` secret. The errors are sentences for the
/// user and never repeat the secret, which may end up in logs.
pub fn parse_secret(text: &str) -> Result<Vec<u8>, String> {
    let Some(encoded) = text.strip_prefix(SECRET_PREFIX) else {
        return Err("Signing secret must start with whsec_.".to_string());
    };
    let Ok(key) = B64.decode(encoded) else {
        return Err("Signing secret must be whsec_ followed by standard base64.".to_string());
    };
    if !(MIN_SECRET_BYTES..=MAX_SECRET_BYTES).contains(&key.len()) {
        return Err(format!(
            "Signing secret must be whsec_ followed by base64 of {MIN_SECRET_BYTES} to {MAX_SECRET_BYTES} bytes."
        ));
    }
    Ok(key)
}

/// A new secret: `whsec_` + base64 of 32 bytes from the OS's CSPRNG.
pub fn generate_secret() -> String {
    let mut key = [0u8; GENERATED_SECRET_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut key);
    format!("{SECRET_PREFIX}{}", B64.encode(key))
}

/// The `webhook-signature` value for one attempt: `v1,<base64 HMAC>`.
pub fn sign(key: &[u8], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    format!("v1,{}", B64.encode(mac(key, msg_id, timestamp, body)))
}

/// Whether any `v1` entry of a `webhook-signature` value (space-separated
/// `version,base64` entries; more than one during a secret rotation) is the
/// signature of this message under `key`. Compares in constant time.
///
/// This checks the signature only: a receiver should also refuse a
/// `webhook-timestamp` far from its clock (the standard suggests 5 minutes)
/// and de-duplicate on `webhook-id`.
pub fn verify(key: &[u8], msg_id: &str, timestamp: i64, body: &[u8], header_value: &str) -> bool {
    let expected = mac(key, msg_id, timestamp, body);
    let mut found = false;
    for entry in header_value.split_ascii_whitespace() {
        let Some(("v1", encoded)) = entry.split_once(',') else {
            continue;
        };
        let Ok(given) = B64.decode(encoded) else {
            continue;
        };
        // No early exit: every entry costs the same whatever matched.
        found |= bool::from(given.as_slice().ct_eq(&expected));
    }
    found
}

/// HMAC-SHA256 over `"{msg_id}.{timestamp}.{body}"`.
fn mac(key: &[u8], msg_id: &str, timestamp: i64, body: &[u8]) -> [u8; 32] {
    let mut mac = <HmacSha256 as KeyInit>::new(&block_key(key));
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().into()
}

/// The key as one hash block, as RFC 2104 defines it: zero-padded, or
/// first hashed when longer than a block. HMAC takes keys of any length;
/// building the block ourselves uses the infallible constructor instead of
/// `new_from_slice`, whose length error cannot happen for HMAC.
fn block_key(key: &[u8]) -> Key<HmacSha256> {
    let mut block = Key::<HmacSha256>::default();
    if key.len() <= block.len() {
        block[..key.len()].copy_from_slice(key);
    } else {
        let digest = Sha256::digest(key);
        block[..digest.len()].copy_from_slice(&digest);
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;

    // The Standard Webhooks test vector (also in Svix's documentation of
    // manual verification): matching it means receivers can verify our
    // deliveries with the standard's libraries.
    const VECTOR_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const VECTOR_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const VECTOR_TIMESTAMP: i64 = 1614265330;
    const VECTOR_BODY: &[u8] = br#"{"test": 2432232314}"#;
    const VECTOR_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    #[test]
    fn sign_matches_the_standard_webhooks_vector() {
        let key = parse_secret(VECTOR_SECRET).unwrap();
        assert_eq!(
            sign(&key, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY),
            VECTOR_SIGNATURE
        );
    }

    // The vector in the standard's own Rust library's tests.
    #[test]
    fn sign_matches_the_reference_rust_library_vector() {
        let key = parse_secret("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").unwrap();
        assert_eq!(
            sign(
                &key,
                "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
                1649367553,
                br#"{"email":"test@example.com","username":"test_user"}"#
            ),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        );
    }

    #[test]
    fn block_key_agrees_with_new_from_slice_for_any_length() {
        for len in [0, 1, 24, 32, 63, 64, 65, 100, 200] {
            let key: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut ours = <HmacSha256 as KeyInit>::new(&block_key(&key));
            let mut theirs = <HmacSha256 as Mac>::new_from_slice(&key).unwrap();
            ours.update(b"message");
            theirs.update(b"message");
            assert_eq!(ours.finalize().into_bytes(), theirs.finalize().into_bytes());
        }
    }

    #[test]
    fn verify_accepts_the_vector_and_refuses_changes() {
        let key = parse_secret(VECTOR_SECRET).unwrap();
        let ok = |id: &str, ts: i64, body: &[u8], header: &str| verify(&key, id, ts, body, header);
        assert!(ok(VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY, VECTOR_SIGNATURE));
        assert!(!ok("msg_other", VECTOR_TIMESTAMP, VECTOR_BODY, VECTOR_SIGNATURE));
        assert!(!ok(
            VECTOR_ID,
            VECTOR_TIMESTAMP + 1,
            VECTOR_BODY,
            VECTOR_SIGNATURE
        ));
        assert!(!ok(
            VECTOR_ID,
            VECTOR_TIMESTAMP,
            br#"{"test": 1}"#,
            VECTOR_SIGNATURE
        ));
        let other_key = parse_secret(&generate_secret()).unwrap();
        assert!(!verify(
            &other_key,
            VECTOR_ID,
            VECTOR_TIMESTAMP,
            VECTOR_BODY,
            VECTOR_SIGNATURE
        ));
    }

    #[test]
    fn verify_reads_a_list_of_entries() {
        let key = parse_secret(VECTOR_SECRET).unwrap();
        let sig = VECTOR_SIGNATURE.trim_start_matches("v1,");
        let check = |header: &str| verify(&key, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY, header);
        // Rotation: any one matching entry is enough.
        assert!(check(&format!(
            "v1,Mm7xgUVICxZfQ3bgf0h0Dof65L/IFx+PnZvnDWPCX6Q= {VECTOR_SIGNATURE}"
        )));
        assert!(check(&format!("  {VECTOR_SIGNATURE}  v1a,xyz ")));
        // Other versions, garbage and truncations do not count.
        assert!(!check(&format!("v2,{sig}")));
        assert!(!check(&format!("v1a,{sig}")));
        assert!(!check(sig));
        assert!(!check("v1,not-base64!"));
        assert!(!check(&VECTOR_SIGNATURE[..VECTOR_SIGNATURE.len() - 4]));
        assert!(!check(""));
        assert!(!check("v1,"));
    }

    #[test]
    fn generated_secrets_parse_to_32_random_bytes() {
        let a = generate_secret();
        let b = generate_secret();
        assert!(a.starts_with("whsec_"));
        assert_eq!(parse_secret(&a).unwrap().len(), 32);
        assert_ne!(a, b);
        let key = parse_secret(&a).unwrap();
        assert!(verify(&key, "m", 1, b"x", &sign(&key, "m", 1, b"x")));
    }

    #[test]
    fn parse_secret_refuses_bad_secrets_without_echoing_them() {
        let b64 = |n: usize| B64.encode(vec![7u8; n]);
        assert_eq!(parse_secret(&format!("whsec_{}", b64(24))).unwrap().len(), 24);
        assert_eq!(parse_secret(&format!("whsec_{}", b64(64))).unwrap().len(), 64);
        for bad in [
            String::new(),
            "whsec_".to_string(),
            b64(32),                                            // no prefix
            format!("WHSEC_{}", b64(32)),                       // prefix is case-sensitive
            format!("whsec_{}", b64(23)),                       // too short
            format!("whsec_{}", b64(65)),                       // too long
            format!("whsec_{}!", b64(32)),                      // not base64
            format!("whsec_{}", b64(32).trim_end_matches('=')), // unpadded
            format!("whsec_ {}", b64(32)),
        ] {
            let err = parse_secret(&bad).unwrap_err();
            assert!(err.starts_with("Signing secret must"), "{err}");
            assert!(err.ends_with('.'), "{err}");
            if bad.len() > 6 {
                assert!(!err.contains(&bad[6..]), "{err} echoes the secret");
            }
        }
    }
}
