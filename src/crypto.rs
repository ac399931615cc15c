//! Secrets at rest: AES-256-GCM under the data key, each ciphertext tagged
//! with the id of the key that made it (so keys can rotate); API keys
//! stored as SHA-256 digests and compared in constant time.

use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fmt;

/// The keys that can decrypt, and the one that encrypts.
pub struct Keyring {
    current: String,
    ciphers: HashMap<String, Aes256Gcm>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Keyring(current={})", self.current)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    #[error("data key must be base64 of exactly 32 bytes")]
    BadKey,
    #[error("ciphertext is malformed")]
    Malformed,
    #[error("no key with id {0}")]
    UnknownKey(String),
    #[error("decryption failed")]
    Decrypt,
}

/// Key id: the first 8 hex characters of the key's SHA-256.
pub fn key_id(key: &[u8]) -> String {
    hex::encode(&Sha256::digest(key)[..4])
}

impl Keyring {
    /// `primary` encrypts; `older` keys still decrypt.
    pub fn new(primary: &[u8; 32], older: &[[u8; 32]]) -> Self {
        let mut ciphers = HashMap::new();
        for key in std::iter::once(primary).chain(older.iter()) {
            ciphers.insert(key_id(key), Aes256Gcm::new(key.into()));
        }
        Keyring {
            current: key_id(primary),
            ciphers,
        }
    }

    pub fn parse_key(text: &str) -> Result<[u8; 32], CryptoError> {
        let bytes = B64.decode(text.trim()).map_err(|_| CryptoError::BadKey)?;
        bytes.try_into().map_err(|_| CryptoError::BadKey)
    }

    pub fn current_key_id(&self) -> &str {
        &self.current
    }

    /// Whether a value sealed under `key_id` can be opened.
    pub fn knows(&self, key_id: &str) -> bool {
        self.ciphers.contains_key(key_id)
    }

    /// `<key id>:<base64(nonce || ciphertext)>`
    pub fn encrypt(&self, plain: &str) -> String {
        let cipher = &self.ciphers[&self.current];
        let mut nonce = [0u8; 12];
        rand::thread_rng().fill_bytes(&mut nonce);
        let sealed = cipher
            .encrypt(Nonce::from_slice(&nonce), plain.as_bytes())
            .expect("AES-GCM encryption of an in-memory buffer cannot fail");
        let mut out = Vec::with_capacity(12 + sealed.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        format!("{}:{}", self.current, B64.encode(out))
    }

    pub fn decrypt(&self, sealed: &str) -> Result<String, CryptoError> {
        let (kid, body) = sealed.split_once(':').ok_or(CryptoError::Malformed)?;
        let cipher = self
            .ciphers
            .get(kid)
            .ok_or_else(|| CryptoError::UnknownKey(kid.to_string()))?;
        let bytes = B64.decode(body).map_err(|_| CryptoError::Malformed)?;
        if bytes.len() < 12 + 16 {
            return Err(CryptoError::Malformed);
        }
        let (nonce, ct) = bytes.split_at(12);
        let plain = cipher
            .decrypt(Nonce::from_slice(nonce), ct)
            .map_err(|_| CryptoError::Decrypt)?;
        String::from_utf8(plain).map_err(|_| CryptoError::Malformed)
    }
}

/// A fresh random data key, base64.
pub fn generate_data_key() -> String {
    let mut key = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut key);
    B64.encode(key)
}

/// A random secret of `len` characters from [A-Za-z0-9].
pub fn random_secret(len: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::thread_rng();
    (0..len)
        .map(|_| {
            // Rejection sampling keeps every character equally likely.
            loop {
                let b = (rng.next_u32() & 0xff) as usize;
                if b < 248 {
                    break ALPHABET[b % ALPHABET.len()] as char;
                }
            }
        })
        .collect()
}

/// Digest under which an API key is stored.
pub fn hash_api_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// Constant-time check of a presented key against a stored digest.
pub fn verify_api_key(presented: &str, stored_digest: &str) -> bool {
    use subtle::ConstantTimeEq;
    let digest = hash_api_key(presented);
    digest.as_bytes().ct_eq(stored_digest.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tamper() {
        let ring = Keyring::new(&[7u8; 32], &[]);
        let sealed = ring.encrypt("4111111111111111");
        assert!(!sealed.contains("4111"));
        assert_eq!(ring.decrypt(&sealed).unwrap(), "4111111111111111");
        let mut tampered = sealed.clone();
        tampered.pop();
        tampered.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert!(ring.decrypt(&tampered).is_err());
    }

    #[test]
    fn older_keys_still_decrypt() {
        let old = Keyring::new(&[1u8; 32], &[]);
        let sealed = old.encrypt("secret");
        let new = Keyring::new(&[2u8; 32], &[[1u8; 32]]);
        assert_eq!(new.decrypt(&sealed).unwrap(), "secret");
        assert!(new.encrypt("x").starts_with(new.current_key_id()));
    }

    #[test]
    fn api_keys_verify() {
        let d = hash_api_key("abc");
        assert!(verify_api_key("abc", &d));
        assert!(!verify_api_key("abd", &d));
        assert_eq!(random_secret(40).len(), 40);
    }
}
