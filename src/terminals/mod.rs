//! The terminal domain: device secrets, the spec's terminal timeouts and
//! the answers of device-term prompts. The device connection and the
//! router (issue 14, later) build on these seams: a device proves itself
//! with [`verify_secret`], reads its bounds from [`timeouts`], and reports
//! a prompt's outcome through [`prompts::answer`].

pub mod prompts;
pub mod timeouts;

/// Characters of a device secret (letters and digits: about 285 bits).
pub const SECRET_LEN: usize = 48;

/// A new device secret, in clear: shown once, stored as its digest.
pub fn new_secret() -> String {
    crate::crypto::random_secret(SECRET_LEN)
}

/// Whether `presented` is the secret whose digest a terminal stores
/// (`secret_digest`), in constant time.
pub fn verify_secret(presented: &str, digest: &str) -> bool {
    crate::crypto::verify_api_key(presented, digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_verified_by_its_digest_only() {
        let secret = new_secret();
        assert_eq!(secret.len(), SECRET_LEN);
        let digest = crate::crypto::hash_api_key(&secret);
        assert!(!digest.contains(&secret));
        assert!(verify_secret(&secret, &digest));
        assert!(!verify_secret(&new_secret(), &digest));
    }
}
