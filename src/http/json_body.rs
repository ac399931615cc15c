//! Request bodies as JSON, strictly: a key given twice in one object, at
//! any depth, is refused (400) with its path, instead of the last one
//! silently winning (`"transaction_amount":"1.00","transaction_amount":
//! "999.00"` must not charge 999.00).

use crate::error::{ApiError, ApiResult};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value as Json};
use std::fmt;

/// Parses `body` as JSON, refusing duplicate keys.
pub fn parse(body: &[u8]) -> ApiResult<Json> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = Strict { path: String::new() }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|_| v))
        .map_err(|e| {
            let text = e.to_string();
            match text.strip_prefix(DUPLICATE) {
                Some(rest) => {
                    let path = rest.split(" at line").next().unwrap_or(rest);
                    ApiError::BadRequest(format!(
                        "The key {path} appears more than once in the body; send it once."
                    ))
                }
                None => ApiError::BadRequest(format!("Malformed JSON: {text}.")),
            }
        })?;
    Ok(value)
}

const DUPLICATE: &str = "duplicate key ";
/// The key under which serde_json passes a number's text.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Builds the value, tracking the path for the message.
struct Strict {
    path: String,
}

impl Strict {
    fn child(&self, key: &str) -> Strict {
        Strict {
            path: if self.path.is_empty() {
                key.to_string()
            } else {
                format!("{}.{key}", self.path)
            },
        }
    }
}

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Json;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Json, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Json::Null, Json::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_none<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut out = Vec::new();
        let mut i = 0;
        while let Some(v) = seq.next_element_seed(self.child(&format!("[{i}]")))? {
            out.push(v);
            i += 1;
        }
        Ok(Json::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // serde_json hands a number over as this one-key map, its text
            // kept as sent (`arbitrary_precision`): money is parsed from it.
            if key == NUMBER_TOKEN && out.is_empty() {
                let text: String = map.next_value()?;
                let number = text.parse::<serde_json::Number>().map_err(de::Error::custom)?;
                return Ok(Json::Number(number));
            }
            let child = self.child(&key);
            if out.contains_key(&key) {
                return Err(de::Error::custom(format!("{DUPLICATE}{}", child.path)));
            }
            let value = map.next_value_seed(child)?;
            out.insert(key, value);
        }
        Ok(Json::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_refused_with_their_path() {
        let e = parse(br#"{"transaction":{"transaction_amount":"1.00","transaction_amount":"999.00"}}"#)
            .unwrap_err();
        assert!(e.to_string().contains("transaction.transaction_amount"), "{e}");
        let e = parse(br#"{"a":[{"b":1},{"b":1,"b":2}]}"#).unwrap_err();
        assert!(e.to_string().contains("a.[1].b"), "{e}");
        let e = parse(br#"{"a":1,"a":1}"#).unwrap_err();
        assert!(e.to_string().contains(" a "), "{e}");
    }

    #[test]
    fn ordinary_json_is_read_as_serde_json_reads_it() {
        let text = br#"{"a":{"b":[1,2.5,"x",null,true,{"c":-3}]},"d":18446744073709551615}"#;
        assert_eq!(
            parse(text).unwrap(),
            serde_json::from_slice::<Json>(text).unwrap()
        );
        assert!(parse(b"{\"a\":1} x").is_err(), "trailing characters");
        // Numbers keep the text they were sent in.
        assert!(parse(b"{\"a\":1e2}").unwrap()["a"].to_string().contains('e'));
        assert_eq!(parse(b"[10.50]").unwrap()[0].to_string(), "10.50");
        assert!(parse(b"{\"a\":").is_err());
    }
}
