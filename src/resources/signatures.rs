//! Signatures (reference 6.5): a signature image attached to an account
//! vault, a transaction or a recurring of the caller's scope (and, made by
//! a terminal, to a device term). Create and read only. The image is sent
//! as base64 (a `data:image/...;base64,` prefix is accepted and dropped)
//! and must be a PNG, JPEG or GIF by its bytes, at most
//! [`MAX_IMAGE_BYTES`] decoded.

use crate::db::Conn;
use crate::engine::query;
use crate::engine::record::Record;
use crate::engine::resource::{Api, Field, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::validate::CreateInput;
use crate::engine::{render, Cx};
use crate::error::{ApiError, ApiResult};
use base64::Engine as _;
use serde_json::Value as Json;

use super::{ACCOUNT_VAULT, DEVICE_TERM, RECURRING, TRANSACTION};

/// The largest image accepted, decoded: a signature pad's image is a few
/// KiB; 256 KiB leaves room for a large uncompressed capture.
pub const MAX_IMAGE_BYTES: usize = 256 * 1024;

/// Characters of the `signature` field: the base64 of the largest image,
/// with room for a data URL prefix and line breaks.
const MAX_TEXT: u32 = 360_000;

/// What a signature can be attached to through the API.
pub const RESOURCES: &[&str] = &["AccountVault", "Transaction", "Recurring"];

pub static SIGNATURE: Resource = Resource {
    name: "signature",
    plural: "signatures",
    table: "signatures",
    model: "Signature",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::id("location_id")
            .hidden()
            .doc("system: the location of the signed record"),
        Field::id("resource_id")
            .post()
            .required()
            .filter()
            .doc("the signed record, in the caller's scope"),
        Field::text("resource", 1, 16)
            .post()
            .required()
            .one_of(RESOURCES)
            .exact()
            .doc("the kind of the signed record (DeviceTerm for signatures a terminal captured)"),
        Field::text("signature", 1, MAX_TEXT)
            .post()
            .required()
            .doc("a PNG, JPEG or GIF image in base64, at most 262144 bytes decoded"),
        Field::id("created_user_id").hidden(),
        Field::id("modified_user_id").hidden(),
        Field::ts("created_ts"),
        Field::ts("modified_ts"),
    ],
    default_sort: ("id", true),
    page_size: 20,
    scope: Scope::Column("location_id"),
    api_id: None,
    unique: None,
    expands: &[],
    list_params: &[],
    computed: &[],
    rules: &SignatureRules,
    search: None,
    cascades: &[],
    postback: None,
    api: Api::PLAIN,
    doc: "A signature image attached to an account vault, transaction or recurring (create and read only).",
};

/// The resource a signature's `resource` names.
fn target(resource: &str) -> Option<&'static Resource> {
    match resource {
        "AccountVault" => Some(&ACCOUNT_VAULT),
        "Transaction" => Some(&TRANSACTION),
        "Recurring" => Some(&RECURRING),
        "DeviceTerm" => Some(&DEVICE_TERM),
        _ => None,
    }
}

/// The base64 of a signature image, checked: an optional data URL prefix
/// and whitespace dropped, standard base64, a PNG, JPEG or GIF by its
/// bytes, at most [`MAX_IMAGE_BYTES`]. Returns the base64 to store.
pub fn check_image(text: &str) -> Result<String, String> {
    let body = match text.strip_prefix("data:") {
        Some(rest) => match rest.split_once(";base64,") {
            Some((mime, data)) if mime.starts_with("image/") => data,
            _ => return Err("signature must be base64, or a data:image/...;base64, URL.".into()),
        },
        None => text,
    };
    let clean: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(clean.as_bytes())
        .map_err(|_| "signature must be base64 (A-Z, a-z, 0-9, + and /, padded with =).".to_string())?;
    if bytes.len() > MAX_IMAGE_BYTES {
        return Err(format!(
            "signature is {} bytes; at most {MAX_IMAGE_BYTES} bytes are accepted.",
            bytes.len()
        ));
    }
    match crate::files::sniff(&bytes) {
        Some("image/png" | "image/jpeg" | "image/gif") => Ok(clean),
        _ => Err("signature must be a PNG, JPEG or GIF image.".into()),
    }
}

struct SignatureRules;

impl Rules for SignatureRules {
    fn before_create(
        &self,
        cx: &Cx,
        conn: &mut dyn Conn,
        input: &mut CreateInput,
    ) -> ApiResult<Option<Record>> {
        let record = &mut input.record;
        let signed = match (
            record.text("resource").and_then(target),
            record.text("resource_id"),
        ) {
            (Some(res), Some(id)) => query::find(conn, res, &cx.scope, id)?,
            _ => None,
        };
        let Some(signed) = signed else {
            return Err(ApiError::field(
                "resource_id",
                "resource_id provided is not valid",
            ));
        };
        let location = crate::engine::location_of(&signed)
            .ok_or_else(|| ApiError::internal("a signed record without a location"))?;
        record.set("location_id", location);
        let image = record.text("signature").unwrap_or_default().to_string();
        let image = check_image(&image).map_err(|m| ApiError::field("signature", m))?;
        record.set("signature", image);
        Ok(None)
    }
}

/// The newest signature of a record, rendered (null when it has none):
/// the `signature` expand of vaults, transactions, recurrings and device
/// terms. Null too for a caller who may not read signatures.
pub fn latest(cx: &Cx, conn: &mut dyn Conn, resource: &str, id: &str) -> ApiResult<Json> {
    if !cx.perms.allows(&SIGNATURE.permission("read")) {
        return Ok(Json::Null);
    }
    let mut sql = query::select(&SIGNATURE, &cx.scope);
    sql.push(" AND t.resource = ")
        .bind(resource.to_string())
        .push(" AND t.resource_id = ")
        .bind(id.to_string())
        .push(" ORDER BY t.id DESC LIMIT 1");
    Ok(match conn.query_one(&sql)? {
        Some(row) => Json::Object(render(cx, &Record::from_row(&SIGNATURE, row))),
        None => Json::Null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    #[test]
    fn images_by_their_bytes_and_bounded() {
        let png = [b"\x89PNG\r\n\x1a\n".as_slice(), &[0u8; 32]].concat();
        assert_eq!(check_image(&b64(&png)).unwrap(), b64(&png));
        let data_url = format!("data:image/png;base64,{}", b64(&png));
        assert_eq!(check_image(&data_url).unwrap(), b64(&png));
        let wrapped = b64(&png)
            .chars()
            .enumerate()
            .fold(String::new(), |mut s, (i, c)| {
                if i > 0 && i % 8 == 0 {
                    s.push_str("\r\n");
                }
                s.push(c);
                s
            });
        assert!(check_image(&wrapped).is_ok());
        assert!(check_image(&b64(&[0xFF, 0xD8, 0xFF, 0xE0, 1, 2])).is_ok());
        assert!(check_image(&b64(b"GIF89a......")).is_ok());
        for bad in [
            b64(b"%PDF-1.4 not an image"),
            b64(b"just some text"),
            "not base64!".to_string(),
            "data:text/plain;base64,aGVsbG8=".to_string(),
            "QUJD".repeat(3).replace('Q', "*"),
        ] {
            assert!(check_image(&bad).is_err(), "{bad}");
        }
        let mut big = b"\x89PNG\r\n\x1a\n".to_vec();
        big.resize(MAX_IMAGE_BYTES + 1, 0);
        assert!(check_image(&b64(&big)).unwrap_err().contains("at most"));
        big.truncate(MAX_IMAGE_BYTES);
        assert!(check_image(&b64(&big)).is_ok());
    }
}
