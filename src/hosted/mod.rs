//! Hosted pages: the PayForm, the AccountForm and the hosted payment page
//! (reference 7), where a payer types card or bank data into a page
//! Ferrogate serves, so the merchant never handles it. This module holds
//! what the pages mean; `http::hosted` renders and serves them, and every
//! payment goes through `payments` like any other (ADR 0015).

pub mod form;
pub mod hash_key;
pub mod page_cipher;
pub mod sessions;
pub mod tickets;

use crate::error::{ApiError, ApiResult};
use serde_json::{Map, Value as Json};

/// The longest `data` a form link may carry: 2 KiB of JSON as hex. A
/// request line cannot pass 64 KiB (hyper's limit), and a query value
/// percent-encoded from any UTF-8 takes up to 12 bytes a character, so
/// every value the document allows reaches the handler.
pub const MAX_DATA_HEX: usize = 4096;

/// Reads a form's `data`: the hex of a UTF-8 JSON object holding one
/// object under `envelope` (`{"transaction": {...}}`).
pub fn decode_data(hex_text: &str, envelope: &str) -> ApiResult<Map<String, Json>> {
    let bad = |why: &str| ApiError::BadRequest(format!("data {why}"));
    if hex_text.len() > MAX_DATA_HEX {
        return Err(bad("is too long."));
    }
    let bytes = hex::decode(hex_text.trim()).map_err(|_| bad("must be the hex digits of a JSON object."))?;
    let text = String::from_utf8(bytes).map_err(|_| bad("must be UTF-8 JSON, written as hex."))?;
    let value: Json = serde_json::from_str(&text).map_err(|_| bad("is not JSON once decoded from hex."))?;
    match value {
        Json::Object(mut outer) => match outer.remove(envelope) {
            Some(Json::Object(inner)) => Ok(inner),
            _ => Err(bad(&format!("must hold {{\"{envelope}\": {{...}}}}."))),
        },
        _ => Err(bad("must be a JSON object.")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_is_the_hex_of_a_json_object() {
        // The reference's example: `{"transaction"` is 7b227472616e73616374696f6e22.
        let hex_text = hex::encode(r#"{"transaction":{"action":"sale"}}"#);
        assert!(hex_text.starts_with("7b227472616e73616374696f6e22"));
        assert_eq!(decode_data(&hex_text, "transaction").unwrap()["action"], "sale");
        assert!(decode_data(&hex_text, "accountvault").is_err());
        assert!(decode_data("zz", "transaction").is_err());
        assert!(decode_data(&hex::encode("[1]"), "transaction").is_err());
    }
}
