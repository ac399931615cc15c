//! Passwords of users who sign in for a session token: the rules a new
//! password must meet, and argon2id hashes (memory-hard, salted, in the
//! PHC string format) to keep them. A password is never stored, logged or
//! answered.

use argon2::password_hash::{rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

pub const MIN_LENGTH: usize = 8;
pub const MAX_LENGTH: usize = 128;

/// What a new password must be: 8 to 128 characters with at least one
/// letter and one digit, and not the username. The message says which
/// rule failed, never the password.
pub fn check(password: &str, username: Option<&str>) -> Result<(), String> {
    let n = password.chars().count();
    if !(MIN_LENGTH..=MAX_LENGTH).contains(&n) {
        return Err(format!(
            "Password must have {MIN_LENGTH} to {MAX_LENGTH} characters."
        ));
    }
    if !password.chars().any(char::is_alphabetic) || !password.chars().any(|c| c.is_ascii_digit()) {
        return Err("Password must contain at least one letter and one digit.".into());
    }
    if password.chars().any(char::is_control) {
        return Err("Password must not contain control characters.".into());
    }
    if username.is_some_and(|u| u.eq_ignore_ascii_case(password)) {
        return Err("Password must not be the username.".into());
    }
    Ok(())
}

/// The argon2id hash of a password, with a fresh random salt.
pub fn hash(password: &str) -> Result<String, String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| format!("hashing a password failed: {e}"))
}

/// Whether `password` is the one `stored` was made from. A malformed or
/// missing hash never matches.
pub fn verify(password: &str, stored: &str) -> bool {
    PasswordHash::new(stored)
        .map(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
        .unwrap_or(false)
}

/// A new password made ready outside the database's write job: its
/// hash, and the stored hash the current password (`old_password`) was
/// checked against, if it was. Argon2 takes tens of milliseconds by
/// design, and on SQLite the write job holds the only writer.
#[derive(Clone)]
pub struct Prepared {
    pub hash: String,
    pub checked_against: Option<String>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prepared(********)")
    }
}

/// A hash to verify against when the user does not exist, so a login for
/// an unknown name takes as long as one with a wrong password.
pub fn decoy() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash("decoy-password-1").unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        assert!(check("short1", None).is_err());
        assert!(check("lettersonly", None).is_err());
        assert!(check("12345678", None).is_err());
        assert!(check("alice1234", Some("ALICE1234")).is_err());
        assert!(check("s3cret-enough", Some("alice")).is_ok());
        let message = check("x1", None).unwrap_err();
        assert!(!message.contains("x1"), "the message never echoes it");
    }

    #[test]
    fn hashes_verify_and_are_salted() {
        let a = hash("s3cret-enough").unwrap();
        let b = hash("s3cret-enough").unwrap();
        assert!(a.starts_with("$argon2id$"), "{a}");
        assert_ne!(a, b, "a fresh salt each time");
        assert!(verify("s3cret-enough", &a));
        assert!(!verify("s3cret-enougH", &a));
        assert!(!verify("s3cret-enough", "not a hash"));
        assert!(!verify("anything", decoy()));
    }
}
