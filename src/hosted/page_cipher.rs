//! The encrypted `data` of a hosted payment page link (reference 7.3):
//! OpenSSL's `enc -aes-256-cbc -md md5` format, which is what the
//! reference's clients produce. `base64("Salted__" ‖ salt ‖ ciphertext)`,
//! with key and IV derived from the page's key and an 8-byte salt by
//! chained MD5 (OpenSSL's EVP_BytesToKey with one iteration).

use aes::cipher::{block_padding::Pkcs7, BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use md5::{Digest, Md5};

const MAGIC: &[u8] = b"Salted__";
/// Link data longer than this is refused before any work (see
/// `hosted::MAX_DATA_HEX` for why it is small).
pub const MAX_DATA: usize = 4096;

/// Key (32 bytes) and IV (16 bytes) from a passphrase and salt.
fn key_and_iv(pass: &[u8], salt: &[u8; 8]) -> ([u8; 32], [u8; 16]) {
    let mut out = Vec::with_capacity(48);
    let mut previous: Vec<u8> = Vec::new();
    while out.len() < 48 {
        let mut md5 = Md5::new();
        md5.update(&previous);
        md5.update(pass);
        md5.update(salt);
        previous = md5.finalize().to_vec();
        out.extend_from_slice(&previous);
    }
    let mut key = [0u8; 32];
    let mut iv = [0u8; 16];
    key.copy_from_slice(&out[..32]);
    iv.copy_from_slice(&out[32..48]);
    (key, iv)
}

/// Encrypts `plain` as a link's data (before URL encoding).
pub fn encrypt(pass: &str, plain: &[u8]) -> String {
    use rand::RngCore;
    let mut salt = [0u8; 8];
    rand::thread_rng().fill_bytes(&mut salt);
    encrypt_with_salt(pass, plain, salt)
}

fn encrypt_with_salt(pass: &str, plain: &[u8], salt: [u8; 8]) -> String {
    let (key, iv) = key_and_iv(pass.as_bytes(), &salt);
    let sealed =
        cbc::Encryptor::<aes::Aes256>::new(&key.into(), &iv.into()).encrypt_padded_vec_mut::<Pkcs7>(plain);
    let mut out = Vec::with_capacity(16 + sealed.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&salt);
    out.extend_from_slice(&sealed);
    B64.encode(out)
}

/// Decrypts a link's data (already URL-decoded). `None` for anything that
/// is not data sealed with this key: the caller says so without detail.
pub fn decrypt(pass: &str, data: &str) -> Option<Vec<u8>> {
    if data.len() > MAX_DATA {
        return None;
    }
    // A `+` that a link did not URL-encode arrives as a space.
    let cleaned: String = data
        .trim()
        .chars()
        .map(|c| if c == ' ' { '+' } else { c })
        .collect();
    let raw = B64.decode(cleaned).ok()?;
    if raw.len() < 32 || &raw[..8] != MAGIC || (raw.len() - 16) % 16 != 0 {
        return None;
    }
    let mut salt = [0u8; 8];
    salt.copy_from_slice(&raw[8..16]);
    let (key, iv) = key_and_iv(pass.as_bytes(), &salt);
    cbc::Decryptor::<aes::Aes256>::new(&key.into(), &iv.into())
        .decrypt_padded_vec_mut::<Pkcs7>(&raw[16..])
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_openssl_enc_writes() {
        // `printf '{"id":"page1"}' | openssl enc -aes-256-cbc -md md5 -a -pass pass:secret-key`
        let from_openssl = "U2FsdGVkX1+1yBgmnAploKJ66rk7RvdHZpeGKeNbqwg=";
        assert_eq!(
            decrypt("secret-key", from_openssl).as_deref(),
            Some(&br#"{"id":"page1"}"#[..])
        );
        // The same with `-S 0102030405060708`, whose output OpenSSL 3
        // leaves without the header: "Salted__" and the salt put in front.
        assert_eq!(
            encrypt_with_salt("secret-key", br#"{"id":"page1"}"#, [1, 2, 3, 4, 5, 6, 7, 8]),
            "U2FsdGVkX18BAgMEBQYHCDy+Y5GD1Vj9Oq9Kn+XZ5TI="
        );
    }

    #[test]
    fn a_round_trip_and_every_kind_of_garbage() {
        let sealed = encrypt("k", b"hello");
        assert_eq!(decrypt("k", &sealed).as_deref(), Some(&b"hello"[..]));
        // CBC has no MAC: another key usually fails the padding check, and
        // otherwise yields bytes that are not the text (the page then
        // refuses them as not its JSON).
        assert_ne!(decrypt("other", &sealed).as_deref(), Some(&b"hello"[..]));
        assert_eq!(decrypt("k", "not base64 !"), None);
        assert_eq!(decrypt("k", &B64.encode(b"Salted__12345678")), None);
        assert_eq!(decrypt("k", &B64.encode([0u8; 48])), None);
        assert_eq!(
            decrypt("k", &sealed.replace('+', " ")).as_deref(),
            Some(&b"hello"[..])
        );
    }
}
