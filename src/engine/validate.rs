//! Input validation from the declarations: types, lengths, patterns and
//! the P/R/U flags. Collects every problem before answering 422.

use super::record::Record;
use super::resource::{Choices, Field, Kind, Pattern, Resource};
use crate::db::Value;
use crate::error::FieldErrors;
use serde_json::{Map, Value as Json};

/// `last_name` -> `Last Name`, as the reference words its messages.
pub fn label(field: &str) -> String {
    field
        .split('_')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(first) => first.to_uppercase().collect::<String>() + c.as_str(),
                None => String::new(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A field's label, written out only when a message uses it (validation
/// checks every field of every request; most pass).
struct LazyLabel<'a>(&'a str);

impl std::fmt::Display for LazyLabel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&label(self.0))
    }
}

pub fn blank(field: &str) -> String {
    format!("{} cannot be blank.", label(field))
}

/// The validated input of a create: stored values plus transient inputs.
pub struct CreateInput {
    pub record: Record,
    /// Fields present in the body (stored or transient).
    pub present: Vec<&'static str>,
    pub transient: Map<String, Json>,
}

/// The validated input of an update: only what the body carried.
pub struct UpdateInput {
    pub changes: Vec<(&'static Field, Value)>,
    /// Updatable inputs that are not stored (a reference by api id), for
    /// the resource's rules to resolve.
    pub transient: Map<String, Json>,
    /// Fields set on create that cannot change, resent: accepted only with
    /// the stored value (clients send back what they read; the reference's
    /// tag update sends `location_id`), checked once the record is found.
    pub unchanged: Vec<(&'static Field, Value)>,
    /// A new password hashed, and the current one checked, before the
    /// write job (argon2 must not hold the writer: ADR 0012).
    pub password: Option<crate::passwords::Prepared>,
}

impl UpdateInput {
    /// An update of stored fields only.
    pub fn of(changes: Vec<(&'static Field, Value)>) -> UpdateInput {
        UpdateInput {
            changes,
            transient: Map::new(),
            unchanged: Vec::new(),
            password: None,
        }
    }

    /// An update the system makes (an outcome, a settlement), by field
    /// name. A name the resource does not declare is our bug: an internal
    /// error, never a panic.
    pub fn named(
        res: &'static Resource,
        changes: impl IntoIterator<Item = (&'static str, Value)>,
    ) -> Result<UpdateInput, crate::error::ApiError> {
        let changes = changes
            .into_iter()
            .map(|(name, value)| match res.field(name) {
                Some(field) => Ok((field, value)),
                None => Err(crate::error::ApiError::internal(format!(
                    "{} has no field {name}",
                    res.name
                ))),
            })
            .collect::<Result<_, _>>()?;
        Ok(UpdateInput::of(changes))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Create,
    Update,
}

/// Checks a create body against the declaration.
pub fn for_create(res: &'static Resource, body: &Map<String, Json>) -> Result<CreateInput, FieldErrors> {
    let mut errors = FieldErrors::new();
    let mut record = Record::empty(res);
    let mut present = Vec::new();
    let mut transient = Map::new();
    check_unknown(res, body, Mode::Create, &mut errors);
    // A create that may update an existing record (`update_if_exists`)
    // needs the updatable required fields only if it creates: the engine
    // checks them then (see `engine::create`).
    let may_update =
        res.api.create_may_update && body.get("update_if_exists").and_then(parse_flag) == Some(true);
    for field in res.fields.iter().filter(|f| f.post) {
        let raw = body.get(field.name);
        let value = match raw {
            None => Value::Null,
            Some(raw) => match convert(field, raw) {
                Ok(v) => v,
                Err(msg) => {
                    errors.add(field.name, msg);
                    continue;
                }
            },
        };
        if raw.is_some() {
            present.push(field.name);
        }
        if field.required && value.is_null() && !(may_update && field.put) {
            errors.add(field.name, blank(field.name));
            continue;
        }
        if field.stored {
            record.set(field.name, value);
        } else if let Some(raw) = raw {
            transient.insert(field.name.to_string(), raw.clone());
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(CreateInput {
        record,
        present,
        transient,
    })
}

/// Checks an update body: only updatable fields, each converted.
pub fn for_update(res: &'static Resource, body: &Map<String, Json>) -> Result<UpdateInput, FieldErrors> {
    let mut errors = FieldErrors::new();
    check_unknown(res, body, Mode::Update, &mut errors);
    let mut changes = Vec::new();
    let mut transient = Map::new();
    let mut unchanged = Vec::new();
    for field in res.fields.iter().filter(|f| may_resend_unchanged(f)) {
        let Some(raw) = body.get(field.name) else {
            continue;
        };
        match convert(field, raw) {
            Ok(v) => unchanged.push((field, v)),
            // Not even a value of the field: it cannot be the stored one.
            Err(_) => errors.add(field.name, cannot_change(field.name)),
        }
    }
    for field in res.fields.iter().filter(|f| f.put) {
        let Some(raw) = body.get(field.name) else {
            if field.put_required {
                errors.add(field.name, blank(field.name));
            }
            continue;
        };
        match convert(field, raw) {
            Ok(v) if v.is_null() && field.required => errors.add(field.name, blank(field.name)),
            Ok(v) if !field.stored => {
                if !v.is_null() {
                    transient.insert(field.name.to_string(), raw.clone());
                }
            }
            Ok(v) => changes.push((field, v)),
            Err(msg) => errors.add(field.name, msg),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(UpdateInput {
        changes,
        transient,
        unchanged,
        password: None,
    })
}

/// A field a PUT may carry only with its stored value: one set on create
/// that cannot change and that the client can read back as it is. Sealed,
/// masked and hidden values stay refused, so a PUT cannot probe them.
pub fn may_resend_unchanged(field: &Field) -> bool {
    field.post
        && !field.put
        && field.stored
        && !field.hidden
        && !field.encrypted
        && !field.digest
        && !field.masked
}

pub fn cannot_change(field: &str) -> String {
    format!("{} cannot be changed.", label(field))
}

/// How many unknown fields one error lists, and how much of each name.
const MAX_UNKNOWN_LISTED: usize = 20;
const MAX_NAME_ECHO: usize = 64;

/// A field name as echoed in an error: bounded, whatever was sent.
pub fn echo_name(key: &str) -> String {
    let key = mask_numbers(key);
    if key.chars().count() <= MAX_NAME_ECHO {
        key
    } else {
        key.chars().take(MAX_NAME_ECHO).collect::<String>() + "…"
    }
}

/// A name with a number of seven digits or more in it (digits, possibly
/// grouped by spaces, dashes or dots), every digit of it but its last
/// four masked: no field is named so, and a card, account or social
/// security number sent as a key by mistake must not come back in the
/// error.
fn mask_numbers(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    let grouping = |c: char| matches!(c, ' ' | '-' | '.');
    let mut out = String::with_capacity(key.len());
    let mut i = 0;
    while i < chars.len() {
        if !chars[i].is_ascii_digit() {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        // The number: digits, and single separators between digits.
        let mut end = i;
        let mut j = i;
        while j < chars.len() {
            if chars[j].is_ascii_digit() {
                j += 1;
                end = j;
            } else if grouping(chars[j]) && chars.get(j + 1).is_some_and(|c| c.is_ascii_digit()) {
                j += 1;
            } else {
                break;
            }
        }
        let number = &chars[i..end];
        let digits = number.iter().filter(|c| c.is_ascii_digit()).count();
        let mut left = digits;
        for &c in number {
            if c.is_ascii_digit() {
                out.push(if digits >= 7 && left > 4 { 'X' } else { c });
                left -= 1;
            } else {
                out.push(c);
            }
        }
        i = end;
    }
    out
}

fn check_unknown(res: &Resource, body: &Map<String, Json>, mode: Mode, errors: &mut FieldErrors) {
    let mut unknown = 0;
    for key in body.keys() {
        match res.field(key) {
            None => {
                unknown += 1;
                if unknown <= MAX_UNKNOWN_LISTED {
                    let name = echo_name(key);
                    errors.add(name.clone(), format!("Unknown field {name} for {}.", res.name));
                } else if unknown == MAX_UNKNOWN_LISTED + 1 {
                    errors.add(
                        "_",
                        "More unknown fields were sent; only the first 20 are listed.",
                    );
                }
            }
            Some(f) if mode == Mode::Create && !f.post => {
                errors.add(key.clone(), format!("{} cannot be set.", label(key)))
            }
            Some(f) if mode == Mode::Update && !f.put && !may_resend_unchanged(f) => {
                errors.add(key.clone(), cannot_change(key))
            }
            _ => {}
        }
    }
}

/// Converts one JSON input to a column value, or says what is wrong.
/// Empty strings and null mean "no value".
pub fn convert(field: &Field, raw: &Json) -> Result<Value, String> {
    let name = LazyLabel(field.name);
    if raw.is_null() {
        return Ok(Value::Null);
    }
    match field.kind {
        Kind::Id => {
            let s = scalar_text(raw).ok_or_else(|| format!("{name} must be a string."))?;
            // 0000-00-00 is how such a field shows unset: sent back, it
            // means unset.
            if s.is_empty() || (field.zero_date && s == "0000-00-00") {
                return Ok(Value::Null);
            }
            if !crate::ids::looks_like_id(&s) {
                return Err(format!("{} provided is not valid", field.name));
            }
            Ok(Value::Text(s))
        }
        Kind::Text { min, max } => {
            let s = scalar_text(raw).ok_or_else(|| format!("{name} must be a string."))?;
            if s.trim().is_empty() {
                return Ok(Value::Null);
            }
            if s.chars().any(|c| c == '\0') {
                return Err(format!("{name} must not contain NUL characters."));
            }
            let len = s.chars().count() as u32;
            if len < min {
                return Err(format!("{name} should contain at least {min} characters."));
            }
            if len > max {
                return Err(format!("{name} should contain at most {max} characters."));
            }
            check_pattern(field, &s)?;
            if let Choices::Text(values) = field.choices {
                if !values.contains(&s.as_str()) {
                    return Err(format!("{name} must be one of {}.", values.join(", ")));
                }
            }
            Ok(Value::Text(s))
        }
        Kind::Int { min, max } => {
            // A JSON integer, or a string of digits with an optional minus
            // (as form posts send numbers): the grammar the OpenAPI
            // document states, nothing looser.
            let n = match raw {
                Json::Number(n) => n.as_i64(),
                Json::String(s) if s.is_empty() => return Ok(Value::Null),
                Json::String(s) if is_integer_text(s) => s.parse::<i64>().ok(),
                _ => None,
            }
            .ok_or_else(|| format!("{name} must be an integer."))?;
            if n < min {
                return Err(format!("{name} must be no less than {min}."));
            }
            if n > max {
                return Err(format!("{name} must be no greater than {max}."));
            }
            if let Choices::Int(values) = field.choices {
                if !values.contains(&n) {
                    let list: Vec<String> = values.iter().map(i64::to_string).collect();
                    return Err(format!("{name} must be one of {}.", list.join(", ")));
                }
            }
            Ok(Value::Int(n))
        }
        Kind::Flag => parse_flag(raw)
            .map(|b| Value::Int(b as i64))
            .ok_or_else(|| format!("{name} must be either 1 or 0.")),
        Kind::Date => {
            let s = scalar_text(raw).ok_or_else(|| format!("{name} must be a string."))?;
            // 0000-00-00 is how such a field shows unset: sent back, it
            // means unset.
            if s.is_empty() || (field.zero_date && s == "0000-00-00") {
                return Ok(Value::Null);
            }
            if !is_calendar_date(&s) {
                return Err(format!("The format of {name} is invalid (yyyy-mm-dd)."));
            }
            Ok(Value::Text(s))
        }
        Kind::Ts => Err(format!("{name} cannot be set.")),
        Kind::Money { max } => match raw {
            Json::String(s) if s.trim().is_empty() => Ok(Value::Null),
            _ => crate::money::parse(raw, max)
                .map(Value::Int)
                .map_err(|why| format!("{name} {why}.")),
        },
        Kind::Tags => parse_tags(raw)
            .map(|titles| {
                if titles.is_empty() {
                    Value::Null
                } else {
                    Value::Text(Json::from(titles).to_string())
                }
            })
            .map_err(|why| format!("{name} {why}.")),
        Kind::Json { max } => match raw {
            Json::Object(_) | Json::Array(_) => {
                let text = raw.to_string();
                if text.chars().count() > max as usize {
                    return Err(format!("{name} should contain at most {max} characters."));
                }
                Ok(Value::Text(text))
            }
            Json::String(s) if s.trim().is_empty() => Ok(Value::Null),
            // JSON sent as a string is accepted when it parses.
            Json::String(s) => match serde_json::from_str::<Json>(s) {
                Ok(v @ (Json::Object(_) | Json::Array(_))) => convert(field, &v),
                _ => Err(format!("{name} must be a JSON object or array.")),
            },
            _ => Err(format!("{name} must be a JSON object or array.")),
        },
    }
}

/// Most tags one record carries, and the longest title.
pub const MAX_TAGS: usize = 20;
pub const MAX_TAG_TITLE: usize = 64;

/// Tag titles from an array of strings or one comma-separated string:
/// trimmed, blanks dropped, duplicates (ignoring case) kept once.
fn parse_tags(raw: &Json) -> Result<Vec<String>, String> {
    let items: Vec<&str> = match raw {
        Json::String(s) => s.split(',').collect(),
        Json::Array(a) => a
            .iter()
            .map(|v| v.as_str().ok_or("must be an array of tag titles (strings)"))
            .collect::<Result<_, _>>()?,
        _ => return Err("must be an array of tag titles".into()),
    };
    let mut titles: Vec<String> = Vec::new();
    for item in items.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        if item.chars().count() > MAX_TAG_TITLE || item.chars().any(char::is_control) {
            return Err(format!(
                "titles have 1 to {MAX_TAG_TITLE} characters, without control characters"
            ));
        }
        if !titles.iter().any(|t| t.eq_ignore_ascii_case(item)) {
            titles.push(item.to_string());
        }
    }
    if titles.len() > MAX_TAGS {
        return Err(format!("may hold at most {MAX_TAGS} tags"));
    }
    Ok(titles)
}

/// `-?[0-9]+`: the text form of an integer input.
pub fn is_integer_text(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// `yyyy-mm-dd`, four digits of a year from 0001, and a real day of it.
pub fn is_calendar_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
        && !s.starts_with("0000")
        && chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok()
}

/// 1/0, true/false, "1"/"0", "true"/"false".
pub fn parse_flag(raw: &Json) -> Option<bool> {
    match raw {
        Json::Bool(b) => Some(*b),
        Json::Number(n) => match n.as_i64() {
            Some(0) => Some(false),
            Some(1) => Some(true),
            _ => None,
        },
        Json::String(s) => match s.as_str() {
            "1" | "true" => Some(true),
            "0" | "false" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// Strings as they are; integers accepted as their digits (zip codes and
/// phone numbers are often sent as numbers). Floats, objects, arrays and
/// booleans are not text.
fn scalar_text(raw: &Json) -> Option<String> {
    match raw {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

fn check_pattern(field: &Field, s: &str) -> Result<(), String> {
    let name = LazyLabel(field.name);
    let ok = match field.pattern {
        Pattern::None => true,
        Pattern::Zip => s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == ' ' || c == '-'),
        Pattern::Digits => s.chars().all(|c| c.is_ascii_digit()),
        Pattern::State => s.len() == 2 && s.chars().all(|c| c.is_ascii_alphabetic()),
        Pattern::Alnum => s.chars().all(|c| c.is_ascii_alphanumeric()),
        Pattern::Reference => s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || " -_./#".contains(c)),
        Pattern::Token => s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        Pattern::Email => is_email(s),
        Pattern::TimeZone => s.parse::<chrono_tz::Tz>().is_ok(),
        Pattern::Domain => is_domain_or_url(s),
        Pattern::Base64 => is_base64(s),
        Pattern::Ip => s.parse::<std::net::IpAddr>().is_ok(),
        Pattern::OneLine => !s.chars().any(char::is_control),
        Pattern::Name => name_problem(s).is_none(),
    };
    if ok {
        Ok(())
    } else {
        Err(match field.pattern {
            Pattern::Digits => format!("{name} must contain digits only."),
            Pattern::Alnum => format!("{name} may contain only letters and digits."),
            Pattern::Reference => {
                format!("{name} may contain only letters, digits, spaces and - _ . / #.")
            }
            Pattern::Token => format!("{name} may contain only letters, digits, '-' and '_'."),
            Pattern::Email => format!("{name} is not a valid email address."),
            Pattern::TimeZone => format!("{name} must be a time zone name such as America/New_York."),
            // Never the value itself: an image can be 64 KB.
            Pattern::Base64 => format!("{name} must be base64 (A-Z, a-z, 0-9, + and /, padded with =)."),
            Pattern::Ip => format!("{name} must be an IPv4 or IPv6 address."),
            Pattern::OneLine => format!("{name} must be one line, without control characters."),
            Pattern::Name => format!("{name} {}", name_problem(s).unwrap_or("is invalid.")),
            _ => format!("{name} is invalid."),
        })
    }
}

/// Whitespace as the document's regular expressions (ECMA-262 `\s`) see
/// it: Unicode's, and the zero-width no-break space.
fn is_space(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}

/// What makes `s` no [`Pattern::Name`]: a control character (a line
/// break, a tab), whitespace at either end, or whitespace other than a
/// plain space inside; each would make a name that looks like another.
fn name_problem(s: &str) -> Option<&'static str> {
    if s.chars().any(char::is_control) {
        Some("must not contain control characters (such as a line break or a tab).")
    } else if s.starts_with(is_space) || s.ends_with(is_space) {
        Some("must not begin or end with a space.")
    } else if s.chars().any(|c| is_space(c) && c != ' ') {
        Some("may contain no whitespace but plain spaces.")
    } else {
        None
    }
}

/// Standard base64: groups of four alphabet characters, the last group
/// possibly ending in `=` or `==` (the document's pattern says the same).
fn is_base64(s: &str) -> bool {
    let bytes = s.as_bytes();
    if bytes.len() % 4 != 0 {
        return false;
    }
    let padding = bytes.iter().rev().take_while(|b| **b == b'=').count();
    padding <= 2
        && bytes[..bytes.len() - padding]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
}

pub fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    // A dot never starts or ends a part nor follows another (`a@c..com`,
    // `.a@b.com`); the domain is host name labels: letters (any script),
    // digits and inner dashes.
    let label_ok = |label: &str| {
        !label.is_empty()
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.chars().all(|c| c.is_alphanumeric() || c == '-')
    };
    !local.is_empty()
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
        && domain.contains('.')
        && domain.split('.').all(label_ok)
        && !s.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn is_domain_or_url(s: &str) -> bool {
    let host = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .unwrap_or(s);
    let host = host.split('/').next().unwrap_or("");
    !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == ':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echoed_names_mask_numbers() {
        assert_eq!(echo_name("4916065618219339"), "XXXXXXXXXXXX9339");
        assert_eq!(echo_name("card_4111111111111111_x"), "card_XXXXXXXXXXXX1111_x");
        assert_eq!(echo_name("123456789"), "XXXXX6789");
        assert_eq!(echo_name("transaction_c3"), "transaction_c3");
        assert_eq!(echo_name("zip_123456"), "zip_123456");
        assert_eq!(echo_name("4111 1111 1111 1111"), "XXXX XXXX XXXX 1111");
        assert_eq!(echo_name("4111-1111-1111-1111"), "XXXX-XXXX-XXXX-1111");
        assert_eq!(echo_name("123-45-6789"), "XXX-XX-6789");
        assert_eq!(echo_name("v2.1 x"), "v2.1 x");
    }
    use serde_json::json;

    #[test]
    fn labels_read_like_the_reference() {
        assert_eq!(label("product_transaction_id"), "Product Transaction Id");
        assert_eq!(blank("last_name"), "Last Name cannot be blank.");
    }

    #[test]
    fn text_bounds_count_characters_not_bytes() {
        let f = Field::text("city", 1, 3);
        assert!(convert(&f, &json!("äöü")).is_ok());
        assert!(convert(&f, &json!("äöüß")).is_err());
        assert!(convert(&f, &json!(true)).is_err());
        assert!(convert(&f, &json!("a\u{0}")).is_err());
        assert_eq!(convert(&f, &json!("")).unwrap(), Value::Null);
    }

    #[test]
    fn flags_and_ints() {
        let f = Field::flag("x");
        assert_eq!(convert(&f, &json!("1")).unwrap(), Value::Int(1));
        assert_eq!(convert(&f, &json!(false)).unwrap(), Value::Int(0));
        assert!(convert(&f, &json!(2)).is_err());
        let i = Field::int("n", 0, 4);
        assert_eq!(convert(&i, &json!("3")).unwrap(), Value::Int(3));
        assert!(convert(&i, &json!(5)).is_err());
        // Only the grammar the OpenAPI document states: no booleans, no
        // spaces or plus sign.
        assert!(convert(&i, &json!(true)).is_err());
        assert!(convert(&i, &json!(" 3")).is_err());
        assert!(convert(&i, &json!("+3")).is_err());
        let choice = Field::int("k", 0, 9).int_one_of(&[1, 3]);
        assert_eq!(convert(&choice, &json!(3)).unwrap(), Value::Int(3));
        assert_eq!(convert(&choice, &json!(2)).unwrap_err(), "K must be one of 1, 3.");
        let text = Field::text("m", 1, 3).one_of(&["cc", "ach"]);
        assert!(convert(&text, &json!("ach")).is_ok());
        assert!(convert(&text, &json!("CC")).is_err());
        assert!(convert(&i, &json!(1.5)).is_err());
        assert!(convert(&i, &json!(1e300)).is_err());
    }

    #[test]
    fn dates_and_patterns() {
        let d = Field::date("d");
        assert!(convert(&d, &json!("2024-02-29")).is_ok());
        assert!(convert(&d, &json!("2023-02-29")).is_err());
        assert!(convert(&d, &json!("+202-02-02")).is_err());
        assert!(convert(&d, &json!("0000-01-01")).is_err());
        let z = Field::text("zip", 4, 12).pattern(Pattern::Zip);
        assert!(convert(&z, &json!("12345-6789")).is_ok());
        assert!(convert(&z, &json!("1234'; --")).is_err());
        let e = Field::text("email", 5, 64).pattern(Pattern::Email);
        assert!(convert(&e, &json!("a@b.co")).is_ok());
        assert!(convert(&e, &json!("a@b")).is_err());
        for bad in [
            "a@c..com",
            "a..b@c.com",
            ".a@c.com",
            "a.@c.com",
            "a@-c.com",
            "a@c-.com",
            "a@c.com-",
            "a@c!x.com",
            "a@c_x.com",
        ] {
            assert!(convert(&e, &json!(bad)).is_err(), "{bad}");
        }
        for good in ["a.b+tag@mail.example-x.com", "jos\u{e9}@b\u{fc}cher.de", "1@2.co"] {
            assert!(convert(&e, &json!(good)).is_ok(), "{good}");
        }
        let n = Field::text("username", 1, 64).pattern(Pattern::Name);
        assert!(convert(&n, &json!("Jane Doe")).is_ok());
        assert!(convert(&n, &json!(12345)).is_ok());
        for (bad, says) in [
            ("nl\nx", "control characters"),
            ("tab\tx", "control characters"),
            ("  trimmed  ", "begin or end"),
            ("trailing ", "begin or end"),
            ("\u{feff}bom", "begin or end"),
            ("no\u{a0}break", "plain spaces"),
        ] {
            let e = convert(&n, &json!(bad)).unwrap_err();
            assert!(e.starts_with("Username ") && e.contains(says), "{bad:?}: {e}");
        }
        let tz = Field::text("tz", 0, 24).pattern(Pattern::TimeZone);
        assert!(convert(&tz, &json!("America/Chicago")).is_ok());
        assert!(convert(&tz, &json!("Mars/Olympus")).is_err());
        let tags = Field::tags("tags");
        assert_eq!(
            convert(&tags, &json!(["Gala", " gala ", "Raffle", ""])).unwrap(),
            Value::Text(r#"["Gala","Raffle"]"#.into())
        );
        assert_eq!(
            convert(&tags, &json!("Gala, Raffle")).unwrap(),
            Value::Text(r#"["Gala","Raffle"]"#.into())
        );
        assert_eq!(convert(&tags, &json!([])).unwrap(), Value::Null);
        assert!(convert(&tags, &json!([1])).is_err());
        assert!(convert(&tags, &json!(["x".repeat(65)])).is_err());
        let many: Vec<String> = (0..21).map(|i| format!("t{i}")).collect();
        assert!(convert(&tags, &json!(many)).is_err());
    }
}
