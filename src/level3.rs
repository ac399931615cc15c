//! Level 3 data of a card transaction (`POST /v2/transactionlevel3s`):
//! validation and normalisation of the `level3_data` object of the
//! request's `transactionlevel3`. Pure: no database, no HTTP. The endpoint
//! stores and returns what [`validate`] gives back, or answers 422 with
//! `{errors: <the Err value>}`.
//!
//! Error shape (spec "Errors"): problems of `level3_data` sit under
//! `level3_data` as an array holding one object; problems of line items sit
//! under that object's `line_items` as an array with one entry per sent line
//! item, in order, `{}` for a valid one:
//! `errors.level3_data[0].line_items[1].tax_rate[0]`. A problem of the list
//! itself (missing, empty, not a list, too long) is a message array under
//! `line_items` instead. A missing or non-object `level3_data` is a message
//! array under `level3_data`. Every problem is collected before answering.
//!
//! Required (the rules since September 2023 apply to all brands): every line
//! item's description, product_code, quantity, unit_code, unit_cost,
//! tax_amount and tax_rate; Visa also needs `level3_data.tax_rate` and each
//! line item's commodity_code. Brand-specific fields sent for another network
//! are checked for format and kept, never required.
//!
//! Decisions where the spec is silent:
//! - Whole replace: the Ok value holds only the known fields that carried a
//!   value, normalised, in the order of the spec's tables (level fields, then
//!   `line_items`). `null`, `""` and whitespace-only values mean "no value":
//!   they are dropped (a required one is blank).
//! - Numbers: JSON numbers (their `to_string()`) or decimal strings, trimmed
//!   of surrounding whitespace; never floats. The grammar is `digits` or
//!   `digits.digits`: no sign, no exponent, no `.5`, no `5.`, no thousands
//!   separators. Every Level 3 number is non-negative; quantity must also be
//!   greater than 0 (a zero-quantity line item describes nothing). Leading
//!   zeros are dropped (`007.5` is `7.5`) before counting the digits before
//!   the point. Decimals beyond the allowed count are accepted only when they
//!   are zeros, and dropped (`5.100` is `5.10`); any other excess is an error.
//! - Digits before the point: "number 1-N" reads as at most N digits before
//!   the point. Numbers whose decimals the spec does not state
//!   (`level3_data.tax_rate`, `line_items[].other_tax_amount`,
//!   `line_items[].discount_rate`) take 2 decimals like the other amounts and
//!   rates. Two-decimal numbers are stored with exactly 2 decimals (`5` is
//!   `5.00`); quantity and unit_cost keep the decimals as sent (at most 4).
//!   A JSON number's text is serde_json's: `2.50` sent as a number becomes
//!   `2.5`; send strings to keep trailing zeros.
//! - Strings are Level 3 record fields forwarded to processors: printable
//!   ASCII only (no control characters, no non-ASCII), kept as sent (no
//!   trimming), lengths in characters. JSON integers are accepted as their
//!   digits (codes and zip codes are often sent as numbers). description:
//!   ASCII letters, digits and spaces. Zip codes: ASCII letters, digits,
//!   spaces and hyphens.
//! - destination_country_code: exactly 3 ASCII digits (ISO 3166 numeric,
//!   `840`) or 3 ASCII letters (alpha-3, stored uppercase).
//! - order_date: `YYMMDD`, a real date in 2000-2099 (so `000229` is valid).
//!   No check against today: orders may be dated before the transaction.
//! - tax_exempt: 1/0, true/false, "1"/"0", "true"/"false"; stored "1"/"0".
//! - unit_code: one of [`UNIT_CODES`] in any case, stored uppercase. Some
//!   reference codes are shorter than 3 characters; they are accepted.
//! - debit_credit: `D` or `C` in any case, stored uppercase.
//! - tax_type_id: one of [`TAX_TYPE_IDS`] as a string; a JSON integer is
//!   zero-padded (`2` is `"02"`). The string `"2"` is refused.
//! - Unknown fields in level3_data or a line item are errors keyed by their
//!   (bounded) name; at most 20 are listed per object. `transaction_id`
//!   inside level3_data gets its own message: it belongs to the enclosing
//!   `transactionlevel3` object.
//! - A line item that is not an object gets `{"_": [message]}` as its entry.
//! - At most [`MAX_LINE_ITEMS`] (99) line items; a longer list is refused as
//!   a whole without checking its items, to bound the work.
//! - No cross-field arithmetic (line totals against amounts, tax_amount
//!   against tax_rate): the processor and the card network judge those.

use crate::engine::validate::{blank, echo_name, label, parse_flag};
use crate::error::FieldErrors;
use serde_json::{Map, Value as Json};
use Need::{Always, Optional, VisaOnly};

/// The card network rules that apply (from the transaction's card brand).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Network {
    Visa,
    Mastercard,
    Other,
}

/// All unit codes of the reference (facts 6.7), uppercase.
pub const UNIT_CODES: &[&str] = &[
    "EA", "ACR", "AMH", "AMP", "ANN", "APZ", "ARE", "ASM", "ASV", "ATM", "ATT", "BAR", "BFT", "BG", "BHP",
    "BHX", "BIL", "BLD", "BLL", "BQL", "BTU", "BUA", "BUI", "BX", "C", "CA", "CCT", "CD", "CDL", "CEL",
    "CEN", "CGM", "CKG", "CLF", "CLT", "CMK", "CMT", "CNP", "CNT", "COU", "CS", "CTM", "CUR", "CWA", "D",
    "DAA", "DAD", "DAY", "DEC", "DLT", "DMK", "DMQ", "DMT", "DPC", "DPT", "DRA", "DRI", "DRL", "DRM", "DTH",
    "DTN", "DWT", "DZ", "DZN", "DZP", "DZR", "EAC", "FAH", "FAR", "FOT", "FT", "FTK", "FTQ", "G", "GAL",
    "GBQ", "GFI", "GGR", "GIA", "GII", "GLD", "GLI", "GLL", "GRM", "GRN", "GRO", "GRT", "GWH", "HAR", "HBA",
    "HGM", "HIU", "HLT", "HMQ", "HMT", "HPA", "HTZ", "HUR", "INH", "INK", "INQ", "ITM", "JOU", "KBA", "KEL",
    "KGM", "KGS", "KHZ", "KJO", "KMH", "KMK", "KMQ", "KMT", "KNI", "KNS", "KNT", "KPA", "KPH", "KPO", "KPP",
    "KSD", "KSH", "KTN", "KUR", "KVA", "KVR", "KVT", "KWH", "KWT", "LBR", "LBS", "LBT", "LEF", "LPA", "LTN",
    "LTR", "LUM", "LUX", "MAL", "MAM", "MAW", "MBE", "MBF", "MBR", "MCU", "MGM", "MHZ", "MIK", "MIL", "MIN",
    "MIO", "MIU", "MLD", "MLT", "MMK", "MMQ", "MMT", "MON", "MPA", "MQH", "MQS", "MSK", "MTK", "MTQ", "MTR",
    "MTS", "MVA", "MWH", "NAR", "NBB", "NCL", "NEW", "NIU", "NMB", "NMI", "NMP", "NMR", "NPL", "NPT", "NRL",
    "NTT", "OHM", "ONZ", "OZA", "OZI", "PAL", "PCB", "PCE", "PER", "PGL", "PK", "PTD", "PTI", "PTL", "QAN",
    "QTD", "QTI", "QTL", "QTR", "RL", "RM", "RPM", "RPS", "SAN", "SCO", "SCR", "SEC", "SET", "SHT", "SIE",
    "SMI", "SST", "ST", "STI", "STN", "TAH", "TNE", "TQD", "TPR", "TRL", "TSD", "TSH", "VLT", "WCD", "WEB",
    "WEE", "WHR", "WSD", "WTT", "YDK", "YDQ", "YRD",
];

/// Tax type ids of the spec's table ("00","01",...,"22"), with their meaning.
pub const TAX_TYPE_IDS: &[(&str, &str)] = &[
    ("00", "Unknown"),
    ("01", "Federal/national sales tax"),
    ("02", "State sales tax"),
    ("03", "City sales tax"),
    ("04", "Local sales tax"),
    ("05", "Municipal sales tax"),
    ("06", "Other tax"),
    ("10", "Value added tax (VAT)"),
    ("11", "Goods and services tax (GST)"),
    ("12", "Provincial sales tax"),
    (
        "13",
        "Harmonized sales tax (HST; not supported by all processors)",
    ),
    ("14", "Quebec sales tax (QST; not supported by all processors)"),
    ("20", "Room tax"),
    ("21", "Occupancy tax"),
    ("22", "Energy tax"),
];

/// The most line items one Level 3 record may carry.
pub const MAX_LINE_ITEMS: usize = 99;

/// The reference text for a Level 3 body without line items.
pub const LINE_ITEMS_MISSING: &str = "Line item record details missing";

/// How many unknown fields one object's errors list.
const MAX_UNKNOWN_LISTED: usize = 20;

/// Validates `level3_data` (the JSON value under that key of the request's
/// `transactionlevel3` object; may be missing/null/non-object).
/// Ok: the normalised level3_data object to store and return (whole-replace
/// semantics: only what was sent, normalised).
/// Err: the value to put under `errors` of a 422 body, i.e. a JSON object such as
/// {"level3_data":[{"tax_rate":["Tax Rate cannot be blank."],"line_items":[{}, {"tax_rate":["..."]}]}]}
pub fn validate(level3_data: Option<&Json>, network: Network) -> Result<Json, Json> {
    let data = match level3_data {
        None | Some(Json::Null) => return Err(whole("level3_data", blank("level3_data"))),
        Some(Json::String(s)) if s.trim().is_empty() => {
            return Err(whole("level3_data", blank("level3_data")))
        }
        Some(Json::Object(data)) => data,
        Some(_) => {
            return Err(whole(
                "level3_data",
                format!("{} must be an object.", label("level3_data")),
            ))
        }
    };

    let mut errors = FieldErrors::new();
    let mut out = check_object(data, LEVEL_FIELDS, network, Scope::Level, &mut errors);

    let mut item_errors: Option<Vec<Json>> = None;
    match data.get("line_items") {
        None | Some(Json::Null) => errors.add("line_items", LINE_ITEMS_MISSING),
        Some(Json::String(s)) if s.trim().is_empty() => errors.add("line_items", LINE_ITEMS_MISSING),
        Some(Json::Array(items)) if items.is_empty() => errors.add("line_items", LINE_ITEMS_MISSING),
        Some(Json::Array(items)) if items.len() > MAX_LINE_ITEMS => errors.add(
            "line_items",
            format!(
                "{} can hold at most {MAX_LINE_ITEMS} line items.",
                label("line_items")
            ),
        ),
        Some(Json::Array(items)) => {
            let mut normalised = Vec::with_capacity(items.len());
            let mut entries = Vec::with_capacity(items.len());
            let mut failed = false;
            for item in items {
                let mut item_errs = FieldErrors::new();
                match item {
                    Json::Object(item) => {
                        let n = check_object(item, ITEM_FIELDS, network, Scope::Item, &mut item_errs);
                        normalised.push(Json::Object(n));
                    }
                    _ => item_errs.add("_", "Each line item must be an object."),
                }
                failed |= !item_errs.is_empty();
                entries.push(item_errs.to_json());
            }
            if failed {
                item_errors = Some(entries);
            } else {
                out.insert("line_items".into(), Json::Array(normalised));
            }
        }
        Some(_) => errors.add(
            "line_items",
            format!("{} must be a list of line item objects.", label("line_items")),
        ),
    }

    if errors.is_empty() && item_errors.is_none() {
        return Ok(Json::Object(out));
    }
    let mut level = match errors.to_json() {
        Json::Object(m) => m,
        _ => Map::new(),
    };
    if let Some(entries) = item_errors {
        level.insert("line_items".into(), Json::Array(entries));
    }
    let mut body = Map::new();
    body.insert("level3_data".into(), Json::Array(vec![Json::Object(level)]));
    Err(Json::Object(body))
}

/// `{field: [message]}`.
fn whole(field: &str, message: String) -> Json {
    let mut body = Map::new();
    body.insert(field.into(), Json::Array(vec![Json::String(message)]));
    Json::Object(body)
}

/// When a field must carry a value.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Need {
    Always,
    VisaOnly,
    Optional,
}

impl Need {
    fn required(self, network: Network) -> bool {
        match self {
            Need::Always => true,
            Need::VisaOnly => network == Network::Visa,
            Need::Optional => false,
        }
    }
}

/// Which characters a text field takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Chars {
    /// Printable ASCII, space to `~`.
    Printable,
    /// ASCII letters, digits and spaces.
    Alnum,
    /// ASCII letters, digits, spaces and hyphens.
    Zip,
}

/// The format of one field.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Rule {
    /// A non-negative amount or rate: at most `int` digits before the point
    /// and `dec` decimals; stored with exactly `dec` decimals.
    Fixed { int: usize, dec: usize },
    /// A measure: at most `int` digits before the point and `dec` decimals;
    /// stored with the decimals as sent. `positive`: zero is refused.
    Measure { int: usize, dec: usize, positive: bool },
    /// Text of 1..=`max` characters.
    Text { max: usize, chars: Chars },
    /// Three digits or three letters.
    Country,
    /// 1/0.
    Flag,
    /// YYMMDD.
    Date,
    /// One of [`UNIT_CODES`].
    Unit,
    /// `D` or `C`.
    DebitCredit,
    /// One of [`TAX_TYPE_IDS`].
    TaxType,
}

struct Spec {
    name: &'static str,
    rule: Rule,
    need: Need,
}

const fn spec(name: &'static str, rule: Rule, need: Need) -> Spec {
    Spec { name, rule, need }
}

const fn money(int: usize) -> Rule {
    Rule::Fixed { int, dec: 2 }
}

const fn text(max: usize) -> Rule {
    Rule::Text {
        max,
        chars: Chars::Printable,
    }
}

const fn zip() -> Rule {
    Rule::Text {
        max: 10,
        chars: Chars::Zip,
    }
}

/// The fields of level3_data other than line_items, in the spec's order.
const LEVEL_FIELDS: &[Spec] = &[
    spec("destination_country_code", Rule::Country, Optional),
    spec("duty_amount", money(12), Optional),
    spec("freight_amount", money(12), Optional),
    spec("national_tax", money(10), Optional),
    spec("sales_tax", money(10), Optional),
    spec("tax_amount", money(9), Optional),
    spec("tax_exempt", Rule::Flag, Optional),
    spec("shipfrom_zip_code", zip(), Optional),
    spec("shipto_zip_code", zip(), Optional),
    spec("transaction_discount_amount", money(12), Optional),
    // Visa-specific.
    spec("customer_vat_registration", text(13), Optional),
    spec("merchant_vat_registration", text(20), Optional),
    spec("order_date", Rule::Date, Optional),
    spec("summary_commodity_code", text(4), Optional),
    spec("tax_rate", money(4), VisaOnly),
    spec("unique_vat_ref_number", text(15), Optional),
];

/// The fields of one line item, in the spec's order.
const ITEM_FIELDS: &[Spec] = &[
    spec(
        "description",
        Rule::Text {
            max: 26,
            chars: Chars::Alnum,
        },
        Always,
    ),
    spec("product_code", text(12), Always),
    spec(
        "quantity",
        Rule::Measure {
            int: 4,
            dec: 4,
            positive: true,
        },
        Always,
    ),
    spec("unit_code", Rule::Unit, Always),
    spec(
        "unit_cost",
        Rule::Measure {
            int: 12,
            dec: 4,
            positive: false,
        },
        Always,
    ),
    spec("tax_amount", money(9), Always),
    spec("tax_rate", money(2), Always),
    spec("discount_amount", money(12), Optional),
    // Visa-specific.
    spec("commodity_code", text(12), VisaOnly),
    spec("other_tax_amount", money(12), Optional),
    // Mastercard-specific.
    spec("alternate_tax_id", text(15), Optional),
    spec("debit_credit", Rule::DebitCredit, Optional),
    spec("discount_rate", money(5), Optional),
    spec("tax_type_applied", text(4), Optional),
    spec("tax_type_id", Rule::TaxType, Optional),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    Level,
    Item,
}

/// Checks one object against its fields: unknown keys, each known field's
/// format, the required ones. Returns the normalised known values.
fn check_object(
    obj: &Map<String, Json>,
    specs: &[Spec],
    network: Network,
    scope: Scope,
    errors: &mut FieldErrors,
) -> Map<String, Json> {
    let mut unknown = 0;
    for key in obj.keys() {
        if specs.iter().any(|s| s.name == key) || (scope == Scope::Level && key == "line_items") {
            continue;
        }
        if scope == Scope::Level && key == "transaction_id" {
            errors.add(
                key.clone(),
                "Transaction Id belongs to transactionlevel3, not to level3_data.",
            );
            continue;
        }
        unknown += 1;
        if unknown <= MAX_UNKNOWN_LISTED {
            let name = echo_name(key);
            let whose = match scope {
                Scope::Level => "level3_data",
                Scope::Item => "a line item",
            };
            errors.add(name.clone(), format!("Unknown field {name} for {whose}."));
        } else if unknown == MAX_UNKNOWN_LISTED + 1 {
            errors.add(
                "_",
                format!("More unknown fields were sent; only the first {MAX_UNKNOWN_LISTED} are listed."),
            );
        }
    }

    let mut out = Map::new();
    for spec in specs {
        let value = match obj.get(spec.name) {
            None => None,
            Some(raw) => match check(spec, raw) {
                Ok(v) => v,
                Err(messages) => {
                    for m in messages {
                        errors.add(spec.name, m);
                    }
                    continue;
                }
            },
        };
        match value {
            Some(v) => {
                out.insert(spec.name.into(), Json::String(v));
            }
            None if spec.need.required(network) => errors.add(spec.name, blank(spec.name)),
            None => {}
        }
    }
    out
}

/// Whether a JSON value means "no value": null, or a blank string.
fn is_blank(raw: &Json) -> bool {
    match raw {
        Json::Null => true,
        Json::String(s) => s.trim().is_empty(),
        _ => false,
    }
}

/// Strings as they are; integers as their digits.
fn scalar_text(raw: &Json) -> Option<String> {
    match raw {
        Json::String(s) => Some(s.clone()),
        Json::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// One field's normalised value (`None`: no value), or its messages.
fn check(spec: &Spec, raw: &Json) -> Result<Option<String>, Vec<String>> {
    if is_blank(raw) {
        return Ok(None);
    }
    let name = label(spec.name);
    let one = |m: String| vec![m];
    let v = match spec.rule {
        Rule::Fixed { int, dec } => number(&name, raw, int, dec, true, false)?,
        Rule::Measure { int, dec, positive } => number(&name, raw, int, dec, false, positive)?,
        Rule::Text { max, chars } => {
            let s = scalar_text(raw).ok_or_else(|| one(format!("{name} must be a string.")))?;
            let mut errs = Vec::new();
            let ok = match chars {
                Chars::Printable => s.chars().all(|c| c == ' ' || c.is_ascii_graphic()),
                Chars::Alnum => s.chars().all(|c| c == ' ' || c.is_ascii_alphanumeric()),
                Chars::Zip => s
                    .chars()
                    .all(|c| c == ' ' || c == '-' || c.is_ascii_alphanumeric()),
            };
            if !ok {
                errs.push(match chars {
                    Chars::Printable => format!("{name} may contain only printable ASCII characters."),
                    Chars::Alnum => format!("{name} may contain only letters, digits and spaces."),
                    Chars::Zip => format!("{name} may contain only letters, digits, spaces and hyphens."),
                });
            }
            if s.chars().count() > max {
                errs.push(format!("{name} should contain at most {max} characters."));
            }
            if !errs.is_empty() {
                return Err(errs);
            }
            s
        }
        Rule::Country => {
            let s = scalar_text(raw).ok_or_else(|| one(format!("{name} must be a string.")))?;
            if s.chars().count() != 3 {
                return Err(one(format!("{name} must be exactly 3 characters.")));
            }
            if s.bytes().all(|b| b.is_ascii_digit()) {
                s
            } else if s.bytes().all(|b| b.is_ascii_alphabetic()) {
                s.to_ascii_uppercase()
            } else {
                return Err(one(format!(
                    "{name} must be 3 digits (such as 840) or 3 letters (such as USA)."
                )));
            }
        }
        Rule::Flag => match parse_flag(raw) {
            Some(true) => "1".into(),
            Some(false) => "0".into(),
            None => return Err(one(format!("{name} must be either 1 or 0."))),
        },
        Rule::Date => {
            let s = scalar_text(raw).unwrap_or_default();
            if !is_yymmdd(&s) {
                return Err(one(format!("{name} must be a real date in the format YYMMDD.")));
            }
            s
        }
        Rule::Unit => {
            let s = match raw {
                Json::String(s) => s.to_ascii_uppercase(),
                _ => String::new(),
            };
            match UNIT_CODES.iter().find(|c| **c == s) {
                Some(code) => (*code).to_string(),
                None => {
                    return Err(one(format!(
                        "{name} must be one of the unit of measure codes (such as EA, BX or DAY)."
                    )))
                }
            }
        }
        Rule::DebitCredit => match raw {
            Json::String(s) if s.eq_ignore_ascii_case("d") => "D".into(),
            Json::String(s) if s.eq_ignore_ascii_case("c") => "C".into(),
            _ => return Err(one(format!("{name} must be D (debit) or C (credit)."))),
        },
        Rule::TaxType => {
            let s = match raw {
                Json::String(s) => s.clone(),
                Json::Number(n) => match n.as_u64() {
                    Some(n) if n < 100 => format!("{n:02}"),
                    _ => String::new(),
                },
                _ => String::new(),
            };
            if !TAX_TYPE_IDS.iter().any(|(id, _)| *id == s) {
                return Err(one(format!(
                    "{name} must be one of the tax type identifiers 00-06, 10-14 or 20-22."
                )));
            }
            s
        }
    };
    Ok(Some(v))
}

/// A real date written `YYMMDD`, read as 2000-2099.
fn is_yymmdd(s: &str) -> bool {
    if s.len() != 6 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let part = |i: usize| s[i..i + 2].parse::<u32>().unwrap_or(0);
    chrono::NaiveDate::from_ymd_opt(2000 + part(0) as i32, part(2), part(4)).is_some()
}

/// A decimal number from a JSON number or string, checked and normalised as
/// text: at most `int` digits before the point (leading zeros dropped), at
/// most `dec` decimals (extra trailing zeros dropped). `fixed`: pad to
/// exactly `dec` decimals. `positive`: zero is refused.
fn number(
    name: &str,
    raw: &Json,
    int: usize,
    dec: usize,
    fixed: bool,
    positive: bool,
) -> Result<String, Vec<String>> {
    let not_a_number = || vec![format!("{name} must be a number.")];
    let text = match raw {
        Json::Number(n) => n.to_string(),
        Json::String(s) => s.trim().to_string(),
        _ => return Err(not_a_number()),
    };
    let unsigned = text.strip_prefix('-');
    let body = unsigned.unwrap_or(&text);
    if body.contains(['e', 'E'])
        && body.bytes().any(|b| b.is_ascii_digit())
        && body
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'))
    {
        return Err(vec![format!("{name} must be written without an exponent.")]);
    }
    let (whole, frac) = match body.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (body, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || frac.is_some_and(|f| !digits(f)) {
        return Err(not_a_number());
    }
    if unsigned.is_some() {
        return Err(vec![format!("{name} cannot be negative.")]);
    }
    let whole = match whole.trim_start_matches('0') {
        "" => "0",
        w => w,
    };
    let frac = frac.unwrap_or("");
    // Decimals beyond `dec` are only accepted as zeros.
    let (kept, extra) = frac.split_at(frac.len().min(dec));
    let mut errs = Vec::new();
    if whole.len() > int {
        errs.push(format!(
            "{name} must have at most {int} digits before the decimal point."
        ));
    }
    if extra.bytes().any(|b| b != b'0') {
        errs.push(format!("{name} must be a number with at most {dec} decimals."));
    }
    if !errs.is_empty() {
        return Err(errs);
    }
    if positive && whole == "0" && kept.bytes().all(|b| b == b'0') {
        return Err(vec![format!("{name} must be greater than 0.")]);
    }
    let mut out = whole.to_string();
    if fixed {
        out.push('.');
        out.push_str(kept);
        out.extend(std::iter::repeat_n('0', dec - kept.len()));
    } else if !kept.is_empty() {
        out.push('.');
        out.push_str(kept);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use Network::{Mastercard, Other};

    const NETWORKS: [Network; 3] = [Network::Visa, Mastercard, Other];

    /// A line item valid for every network.
    fn item() -> Json {
        json!({
            "description": "Widget 2000",
            "product_code": "WID-1",
            "quantity": "2",
            "unit_code": "EA",
            "unit_cost": "10.5",
            "tax_amount": "1.68",
            "tax_rate": "8",
            "commodity_code": "4410",
        })
    }

    /// level3_data valid for every network, with `items` line items.
    fn data_with(items: usize) -> Json {
        json!({"tax_rate": "8.00", "line_items": vec![item(); items]})
    }

    fn data() -> Json {
        data_with(1)
    }

    fn ok(data: &Json, network: Network) -> Json {
        validate(Some(data), network).unwrap_or_else(|e| panic!("expected Ok for {data} ({network:?}): {e}"))
    }

    fn err(data: &Json, network: Network) -> Json {
        validate(Some(data), network)
            .err()
            .unwrap_or_else(|| panic!("expected errors for {data} ({network:?})"))
    }

    /// `errors.level3_data[0]`, checking the one-object array shape.
    fn level_errors(data: &Json, network: Network) -> Map<String, Json> {
        let e = err(data, network);
        let obj = e.as_object().expect("errors is an object");
        assert_eq!(obj.len(), 1, "only level3_data: {e}");
        let arr = obj["level3_data"].as_array().expect("level3_data is an array");
        assert_eq!(arr.len(), 1, "one object: {e}");
        arr[0].as_object().expect("an object").clone()
    }

    /// `errors.level3_data[0].line_items[i]`.
    fn item_errors(data: &Json, network: Network, i: usize) -> Map<String, Json> {
        let level = level_errors(data, network);
        let items = level["line_items"]
            .as_array()
            .expect("line_items is an array of objects");
        assert_eq!(
            items.len(),
            data["line_items"].as_array().unwrap().len(),
            "one entry per sent line item"
        );
        items[i].as_object().expect("an object").clone()
    }

    #[derive(Debug)]
    enum Want {
        /// Accepted and stored as this string.
        Is(&'static str),
        /// Accepted as "no value": not stored.
        Absent,
        /// Refused with exactly this one message.
        Msg(&'static str),
    }
    use Want::{Absent, Is, Msg};

    fn run_level(cases: &[(&str, Json, Want)]) {
        for (field, input, want) in cases {
            let mut d = data();
            d[*field] = input.clone();
            let ctx = format!("level3_data.{field} = {input}");
            for network in NETWORKS {
                match want {
                    Is(v) => assert_eq!(ok(&d, network)[*field], json!(v), "{ctx}"),
                    Absent if *field == "tax_rate" && network == Network::Visa => {}
                    Absent => assert!(ok(&d, network).get(*field).is_none(), "{ctx}"),
                    Msg(m) => {
                        let e = level_errors(&d, network);
                        assert_eq!(Json::Object(e), json!({ *field: [m] }), "{ctx}");
                    }
                }
            }
        }
    }

    fn run_item(cases: &[(&str, Json, Want)]) {
        for (field, input, want) in cases {
            let mut it = item();
            it[*field] = input.clone();
            let d = json!({"tax_rate": "1", "line_items": [item(), it]});
            let ctx = format!("line_items[].{field} = {input}");
            for network in NETWORKS {
                match want {
                    Is(v) => assert_eq!(ok(&d, network)["line_items"][1][*field], json!(v), "{ctx}"),
                    Absent => assert!(ok(&d, network)["line_items"][1].get(*field).is_none(), "{ctx}"),
                    Msg(m) => {
                        let level = level_errors(&d, network);
                        assert_eq!(
                            Json::Object(level),
                            json!({"line_items": [{}, { *field: [m] }]}),
                            "{ctx}"
                        );
                    }
                }
            }
        }
    }

    fn s(n: usize, c: char) -> Json {
        Json::String(std::iter::repeat_n(c, n).collect())
    }

    #[test]
    fn a_valid_minimal_body_is_accepted_for_every_network() {
        for network in NETWORKS {
            let out = ok(&data(), network);
            assert_eq!(
                out,
                json!({
                    "tax_rate": "8.00",
                    "line_items": [{
                        "description": "Widget 2000",
                        "product_code": "WID-1",
                        "quantity": "2",
                        "unit_code": "EA",
                        "unit_cost": "10.5",
                        "tax_amount": "1.68",
                        "tax_rate": "8.00",
                        "commodity_code": "4410",
                    }]
                })
            );
        }
    }

    #[test]
    fn missing_or_non_object_level3_data() {
        let blank = json!({"level3_data": ["Level3 Data cannot be blank."]});
        assert_eq!(validate(None, Network::Visa), Err(blank.clone()));
        assert_eq!(validate(Some(&Json::Null), Mastercard), Err(blank.clone()));
        assert_eq!(validate(Some(&json!("  ")), Other), Err(blank));
        let typed = json!({"level3_data": ["Level3 Data must be an object."]});
        for v in [json!(5), json!([]), json!([{}]), json!("x"), json!(true)] {
            assert_eq!(validate(Some(&v), Network::Visa), Err(typed.clone()), "{v}");
        }
    }

    #[test]
    fn an_empty_object_reports_line_items_and_the_visa_tax_rate() {
        assert_eq!(
            err(&json!({}), Network::Visa),
            json!({"level3_data": [{
                "line_items": ["Line item record details missing"],
                "tax_rate": ["Tax Rate cannot be blank."],
            }]})
        );
        for network in [Mastercard, Other] {
            assert_eq!(
                err(&json!({}), network),
                json!({"level3_data": [{"line_items": ["Line item record details missing"]}]})
            );
        }
    }

    #[test]
    fn line_items_missing_empty_or_not_a_list() {
        let missing = json!(["Line item record details missing"]);
        let cases = [
            (None, missing.clone()),
            (Some(Json::Null), missing.clone()),
            (Some(json!([])), missing.clone()),
            (Some(json!("")), missing),
            (
                Some(json!({"description": "x"})),
                json!(["Line Items must be a list of line item objects."]),
            ),
            (
                Some(json!("abc")),
                json!(["Line Items must be a list of line item objects."]),
            ),
            (
                Some(json!(3)),
                json!(["Line Items must be a list of line item objects."]),
            ),
        ];
        for (items, want) in cases {
            let mut d = json!({"tax_rate": "1"});
            if let Some(items) = items.clone() {
                d["line_items"] = items;
            }
            for network in NETWORKS {
                assert_eq!(
                    Json::Object(level_errors(&d, network)),
                    json!({ "line_items": want }),
                    "{items:?}"
                );
            }
        }
    }

    #[test]
    fn at_most_99_line_items() {
        let out = ok(&data_with(MAX_LINE_ITEMS), Network::Visa);
        assert_eq!(out["line_items"].as_array().unwrap().len(), 99);
        let mut d = data_with(100);
        // The items of a refused list are not checked.
        d["line_items"][0]["tax_rate"] = json!("bad");
        assert_eq!(
            Json::Object(level_errors(&d, Network::Visa)),
            json!({"line_items": ["Line Items can hold at most 99 line items."]})
        );
    }

    #[test]
    fn the_spec_example_shape() {
        let mut d = json!({"line_items": [item(), item()]});
        d["line_items"][1].as_object_mut().unwrap().remove("tax_rate");
        assert_eq!(
            err(&d, Network::Visa),
            json!({"level3_data": [{
                "tax_rate": ["Tax Rate cannot be blank."],
                "line_items": [{}, {"tax_rate": ["Tax Rate cannot be blank."]}],
            }]})
        );
    }

    #[test]
    fn nested_positions_follow_the_sent_order() {
        let mut d = data_with(4);
        d["line_items"][1]["quantity"] = json!("0");
        d["line_items"][3]["unit_code"] = json!("XYZ");
        d["line_items"][3]["tax_amount"] = json!("1.234");
        let e = err(&d, Mastercard);
        assert_eq!(
            e,
            json!({"level3_data": [{"line_items": [
                {},
                {"quantity": ["Quantity must be greater than 0."]},
                {},
                {
                    "tax_amount": ["Tax Amount must be a number with at most 2 decimals."],
                    "unit_code": ["Unit Code must be one of the unit of measure codes (such as EA, BX or DAY)."],
                },
            ]}]})
        );
        assert_eq!(
            e["level3_data"][0]["line_items"][1]["quantity"][0],
            "Quantity must be greater than 0."
        );
    }

    #[test]
    fn level_and_item_errors_are_reported_together() {
        let mut d = data_with(2);
        d["duty_amount"] = json!("-1");
        d["order_date"] = json!("231301");
        d["line_items"][0]["description"] = json!("Widget #1");
        let level = level_errors(&d, Network::Visa);
        assert_eq!(
            Json::Object(level),
            json!({
                "duty_amount": ["Duty Amount cannot be negative."],
                "order_date": ["Order Date must be a real date in the format YYMMDD."],
                "line_items": [
                    {"description": ["Description may contain only letters, digits and spaces."]},
                    {},
                ],
            })
        );
    }

    #[test]
    fn a_line_item_that_is_not_an_object() {
        for bad in [json!("item"), json!(1), json!(null), json!([item()])] {
            let d = json!({"tax_rate": "1", "line_items": [item(), bad]});
            assert_eq!(
                Json::Object(item_errors(&d, Other, 1)),
                json!({"_": ["Each line item must be an object."]})
            );
            assert!(item_errors(&d, Other, 0).is_empty());
        }
    }

    #[test]
    fn common_item_fields_are_required_for_every_network() {
        let fields = [
            ("description", "Description cannot be blank."),
            ("product_code", "Product Code cannot be blank."),
            ("quantity", "Quantity cannot be blank."),
            ("unit_code", "Unit Code cannot be blank."),
            ("unit_cost", "Unit Cost cannot be blank."),
            ("tax_amount", "Tax Amount cannot be blank."),
            ("tax_rate", "Tax Rate cannot be blank."),
        ];
        for (field, message) in fields {
            for blank_value in [None, Some(Json::Null), Some(json!("")), Some(json!("   "))] {
                let mut it = item();
                match &blank_value {
                    None => {
                        it.as_object_mut().unwrap().remove(field);
                    }
                    Some(v) => it[field] = v.clone(),
                }
                let d = json!({"tax_rate": "1", "line_items": [it]});
                for network in NETWORKS {
                    assert_eq!(
                        Json::Object(item_errors(&d, network, 0)),
                        json!({ field: [message] }),
                        "{field} = {blank_value:?} ({network:?})"
                    );
                }
            }
        }
    }

    #[test]
    fn visa_requires_tax_rate_and_commodity_code() {
        let mut d = data();
        d.as_object_mut().unwrap().remove("tax_rate");
        d["line_items"][0]
            .as_object_mut()
            .unwrap()
            .remove("commodity_code");
        assert_eq!(
            err(&d, Network::Visa),
            json!({"level3_data": [{
                "tax_rate": ["Tax Rate cannot be blank."],
                "line_items": [{"commodity_code": ["Commodity Code cannot be blank."]}],
            }]})
        );
        for network in [Mastercard, Other] {
            let out = ok(&d, network);
            assert!(out.get("tax_rate").is_none());
            assert!(out["line_items"][0].get("commodity_code").is_none());
        }
        // Null and blank are no value either.
        let mut d = data();
        d["tax_rate"] = json!(null);
        d["line_items"][0]["commodity_code"] = json!(" ");
        assert_eq!(
            Json::Object(level_errors(&d, Network::Visa)),
            json!({
                "tax_rate": ["Tax Rate cannot be blank."],
                "line_items": [{"commodity_code": ["Commodity Code cannot be blank."]}],
            })
        );
        assert!(ok(&d, Mastercard).get("tax_rate").is_none());
    }

    #[test]
    fn mastercard_fields_are_optional_everywhere_and_checked_everywhere() {
        let mut it = item();
        it["alternate_tax_id"] = json!("ALT-7");
        it["debit_credit"] = json!("d");
        it["discount_rate"] = json!("2.5");
        it["tax_type_applied"] = json!("ST");
        it["tax_type_id"] = json!("02");
        let d = json!({"tax_rate": "1", "line_items": [it]});
        for network in NETWORKS {
            let out = ok(&d, network);
            let li = &out["line_items"][0];
            assert_eq!(li["alternate_tax_id"], "ALT-7");
            assert_eq!(li["debit_credit"], "D");
            assert_eq!(li["discount_rate"], "2.50");
            assert_eq!(li["tax_type_applied"], "ST");
            assert_eq!(li["tax_type_id"], "02");
        }
        // A Mastercard field with a bad format is refused for Visa too.
        let mut d = data();
        d["line_items"][0]["debit_credit"] = json!("X");
        assert_eq!(
            Json::Object(item_errors(&d, Network::Visa, 0)),
            json!({"debit_credit": ["Debit Credit must be D (debit) or C (credit)."]})
        );
        // And a Visa field with a bad format is refused for Mastercard.
        let mut d = data();
        d["tax_rate"] = json!("x");
        d["line_items"][0]["commodity_code"] = s(13, 'A');
        assert_eq!(
            Json::Object(level_errors(&d, Mastercard)),
            json!({
                "tax_rate": ["Tax Rate must be a number."],
                "line_items": [{"commodity_code": ["Commodity Code should contain at most 12 characters."]}],
            })
        );
    }

    #[test]
    fn numbers_grammar_and_messages() {
        // duty_amount: number 1-12, 2 decimals.
        run_level(&[
            ("duty_amount", json!("5"), Is("5.00")),
            ("duty_amount", json!(5), Is("5.00")),
            ("duty_amount", json!(5.5), Is("5.50")),
            ("duty_amount", json!(5.0), Is("5.00")),
            ("duty_amount", json!("0"), Is("0.00")),
            ("duty_amount", json!("0.1"), Is("0.10")),
            ("duty_amount", json!(" 7.25 "), Is("7.25")),
            ("duty_amount", json!("007.5"), Is("7.50")),
            ("duty_amount", json!("000"), Is("0.00")),
            ("duty_amount", json!("1.230"), Is("1.23")),
            ("duty_amount", json!("1.2300000"), Is("1.23")),
            ("duty_amount", json!("999999999999.99"), Is("999999999999.99")),
            ("duty_amount", json!("000999999999999.99"), Is("999999999999.99")),
            ("duty_amount", json!(""), Absent),
            ("duty_amount", json!(null), Absent),
            (
                "duty_amount",
                json!("1000000000000"),
                Msg("Duty Amount must have at most 12 digits before the decimal point."),
            ),
            (
                "duty_amount",
                json!("1.234"),
                Msg("Duty Amount must be a number with at most 2 decimals."),
            ),
            (
                "duty_amount",
                json!(0.1 + 0.2),
                Msg("Duty Amount must be a number with at most 2 decimals."),
            ),
            ("duty_amount", json!("-1"), Msg("Duty Amount cannot be negative.")),
            ("duty_amount", json!(-1), Msg("Duty Amount cannot be negative.")),
            (
                "duty_amount",
                json!("-0.5"),
                Msg("Duty Amount cannot be negative."),
            ),
            (
                "duty_amount",
                json!("1e3"),
                Msg("Duty Amount must be written without an exponent."),
            ),
            (
                "duty_amount",
                json!("1E-2"),
                Msg("Duty Amount must be written without an exponent."),
            ),
            (
                "duty_amount",
                json!(1e21),
                Msg("Duty Amount must be written without an exponent."),
            ),
            (
                "duty_amount",
                json!(1e-7),
                Msg("Duty Amount must be written without an exponent."),
            ),
            ("duty_amount", json!("abc"), Msg("Duty Amount must be a number.")),
            ("duty_amount", json!("NaN"), Msg("Duty Amount must be a number.")),
            ("duty_amount", json!("inf"), Msg("Duty Amount must be a number.")),
            ("duty_amount", json!(".5"), Msg("Duty Amount must be a number.")),
            ("duty_amount", json!("5."), Msg("Duty Amount must be a number.")),
            ("duty_amount", json!("+5"), Msg("Duty Amount must be a number.")),
            (
                "duty_amount",
                json!("1,000.00"),
                Msg("Duty Amount must be a number."),
            ),
            (
                "duty_amount",
                json!("1 000"),
                Msg("Duty Amount must be a number."),
            ),
            (
                "duty_amount",
                json!("1.2.3"),
                Msg("Duty Amount must be a number."),
            ),
            ("duty_amount", json!("--1"), Msg("Duty Amount must be a number.")),
            ("duty_amount", json!("0x10"), Msg("Duty Amount must be a number.")),
            ("duty_amount", json!("５"), Msg("Duty Amount must be a number.")),
            ("duty_amount", json!(true), Msg("Duty Amount must be a number.")),
            ("duty_amount", json!([1]), Msg("Duty Amount must be a number.")),
            (
                "duty_amount",
                json!({"v": 1}),
                Msg("Duty Amount must be a number."),
            ),
        ]);
    }

    #[test]
    fn several_number_problems_are_all_reported() {
        let mut d = data();
        d["duty_amount"] = json!("1234567890123.456");
        assert_eq!(
            Json::Object(level_errors(&d, Other)),
            json!({"duty_amount": [
                "Duty Amount must have at most 12 digits before the decimal point.",
                "Duty Amount must be a number with at most 2 decimals.",
            ]})
        );
    }

    #[test]
    fn level_number_bounds() {
        run_level(&[
            ("freight_amount", json!("999999999999.99"), Is("999999999999.99")),
            (
                "freight_amount",
                json!("1000000000000.00"),
                Msg("Freight Amount must have at most 12 digits before the decimal point."),
            ),
            (
                "freight_amount",
                json!("0.001"),
                Msg("Freight Amount must be a number with at most 2 decimals."),
            ),
            ("national_tax", json!("9999999999.99"), Is("9999999999.99")),
            (
                "national_tax",
                json!("10000000000"),
                Msg("National Tax must have at most 10 digits before the decimal point."),
            ),
            (
                "national_tax",
                json!("1.001"),
                Msg("National Tax must be a number with at most 2 decimals."),
            ),
            ("sales_tax", json!(9999999999u64), Is("9999999999.00")),
            (
                "sales_tax",
                json!(10000000000u64),
                Msg("Sales Tax must have at most 10 digits before the decimal point."),
            ),
            (
                "sales_tax",
                json!("1.005"),
                Msg("Sales Tax must be a number with at most 2 decimals."),
            ),
            ("tax_amount", json!("999999999.99"), Is("999999999.99")),
            (
                "tax_amount",
                json!("1000000000"),
                Msg("Tax Amount must have at most 9 digits before the decimal point."),
            ),
            (
                "tax_amount",
                json!("1.001"),
                Msg("Tax Amount must be a number with at most 2 decimals."),
            ),
            ("transaction_discount_amount", json!("10"), Is("10.00")),
            (
                "transaction_discount_amount",
                json!("999999999999.99"),
                Is("999999999999.99"),
            ),
            (
                "transaction_discount_amount",
                json!("1000000000000"),
                Msg("Transaction Discount Amount must have at most 12 digits before the decimal point."),
            ),
            (
                "transaction_discount_amount",
                json!("1.001"),
                Msg("Transaction Discount Amount must be a number with at most 2 decimals."),
            ),
            (
                "transaction_discount_amount",
                json!("-5"),
                Msg("Transaction Discount Amount cannot be negative."),
            ),
            // Visa tax_rate: number 1-4, 2 decimals.
            ("tax_rate", json!("8.25"), Is("8.25")),
            ("tax_rate", json!(8.25), Is("8.25")),
            ("tax_rate", json!("9999.99"), Is("9999.99")),
            ("tax_rate", json!("0"), Is("0.00")),
            (
                "tax_rate",
                json!("10000"),
                Msg("Tax Rate must have at most 4 digits before the decimal point."),
            ),
            (
                "tax_rate",
                json!("8.255"),
                Msg("Tax Rate must be a number with at most 2 decimals."),
            ),
            ("tax_rate", json!(""), Absent),
        ]);
    }

    #[test]
    fn level_text_fields() {
        run_level(&[
            ("destination_country_code", json!("840"), Is("840")),
            ("destination_country_code", json!(840), Is("840")),
            ("destination_country_code", json!("usa"), Is("USA")),
            ("destination_country_code", json!("Can"), Is("CAN")),
            ("destination_country_code", json!(""), Absent),
            (
                "destination_country_code",
                json!("US"),
                Msg("Destination Country Code must be exactly 3 characters."),
            ),
            (
                "destination_country_code",
                json!("8400"),
                Msg("Destination Country Code must be exactly 3 characters."),
            ),
            (
                "destination_country_code",
                json!(40),
                Msg("Destination Country Code must be exactly 3 characters."),
            ),
            (
                "destination_country_code",
                json!("84A"),
                Msg("Destination Country Code must be 3 digits (such as 840) or 3 letters (such as USA)."),
            ),
            (
                "destination_country_code",
                json!("ÄÖÜ"),
                Msg("Destination Country Code must be 3 digits (such as 840) or 3 letters (such as USA)."),
            ),
            (
                "destination_country_code",
                json!(" US"),
                Msg("Destination Country Code must be 3 digits (such as 840) or 3 letters (such as USA)."),
            ),
            (
                "destination_country_code",
                json!(true),
                Msg("Destination Country Code must be a string."),
            ),
            (
                "destination_country_code",
                json!(84.0),
                Msg("Destination Country Code must be a string."),
            ),
            // tax_exempt: 1/0.
            ("tax_exempt", json!("1"), Is("1")),
            ("tax_exempt", json!("0"), Is("0")),
            ("tax_exempt", json!(1), Is("1")),
            ("tax_exempt", json!(0), Is("0")),
            ("tax_exempt", json!(true), Is("1")),
            ("tax_exempt", json!(false), Is("0")),
            ("tax_exempt", json!("true"), Is("1")),
            ("tax_exempt", json!("false"), Is("0")),
            ("tax_exempt", json!(""), Absent),
            ("tax_exempt", json!("2"), Msg("Tax Exempt must be either 1 or 0.")),
            ("tax_exempt", json!(2), Msg("Tax Exempt must be either 1 or 0.")),
            (
                "tax_exempt",
                json!("yes"),
                Msg("Tax Exempt must be either 1 or 0."),
            ),
            // Zip codes: 1-10, letters, digits, spaces and hyphens.
            ("shipfrom_zip_code", json!("12345-6789"), Is("12345-6789")),
            ("shipfrom_zip_code", json!(12345), Is("12345")),
            ("shipfrom_zip_code", json!("SW1A 1AA"), Is("SW1A 1AA")),
            ("shipfrom_zip_code", json!("1"), Is("1")),
            (
                "shipfrom_zip_code",
                json!("12345-67890"),
                Msg("Shipfrom Zip Code should contain at most 10 characters."),
            ),
            (
                "shipfrom_zip_code",
                json!("1234;"),
                Msg("Shipfrom Zip Code may contain only letters, digits, spaces and hyphens."),
            ),
            (
                "shipfrom_zip_code",
                json!(1.5),
                Msg("Shipfrom Zip Code must be a string."),
            ),
            ("shipto_zip_code", json!("0123456789"), Is("0123456789")),
            (
                "shipto_zip_code",
                json!("01234567890"),
                Msg("Shipto Zip Code should contain at most 10 characters."),
            ),
            (
                "shipto_zip_code",
                json!("K1A\t0B1"),
                Msg("Shipto Zip Code may contain only letters, digits, spaces and hyphens."),
            ),
            // Visa-specific strings.
            ("customer_vat_registration", s(13, 'C'), Is("CCCCCCCCCCCCC")),
            (
                "customer_vat_registration",
                s(14, 'C'),
                Msg("Customer Vat Registration should contain at most 13 characters."),
            ),
            ("customer_vat_registration", json!("DE 123/45"), Is("DE 123/45")),
            (
                "customer_vat_registration",
                json!("DE\n123"),
                Msg("Customer Vat Registration may contain only printable ASCII characters."),
            ),
            (
                "customer_vat_registration",
                json!("DÉ123"),
                Msg("Customer Vat Registration may contain only printable ASCII characters."),
            ),
            (
                "merchant_vat_registration",
                s(20, 'M'),
                Is("MMMMMMMMMMMMMMMMMMMM"),
            ),
            (
                "merchant_vat_registration",
                s(21, 'M'),
                Msg("Merchant Vat Registration should contain at most 20 characters."),
            ),
            ("summary_commodity_code", json!("4410"), Is("4410")),
            ("summary_commodity_code", json!(4410), Is("4410")),
            (
                "summary_commodity_code",
                json!("44100"),
                Msg("Summary Commodity Code should contain at most 4 characters."),
            ),
            ("unique_vat_ref_number", s(15, '9'), Is("999999999999999")),
            (
                "unique_vat_ref_number",
                s(16, '9'),
                Msg("Unique Vat Ref Number should contain at most 15 characters."),
            ),
            (
                "unique_vat_ref_number",
                json!({"a": 1}),
                Msg("Unique Vat Ref Number must be a string."),
            ),
        ]);
    }

    #[test]
    fn order_date_is_a_real_yymmdd_date() {
        let bad = "Order Date must be a real date in the format YYMMDD.";
        run_level(&[
            ("order_date", json!("240229"), Is("240229")),
            ("order_date", json!("000229"), Is("000229")),
            ("order_date", json!("991231"), Is("991231")),
            ("order_date", json!("250101"), Is("250101")),
            ("order_date", json!(240229), Is("240229")),
            ("order_date", json!(""), Absent),
            ("order_date", json!("230229"), Msg(bad)),
            ("order_date", json!("241301"), Msg(bad)),
            ("order_date", json!("240100"), Msg(bad)),
            ("order_date", json!("240431"), Msg(bad)),
            ("order_date", json!("000000"), Msg(bad)),
            ("order_date", json!("2402"), Msg(bad)),
            ("order_date", json!("20240229"), Msg(bad)),
            ("order_date", json!("24-2-29"), Msg(bad)),
            ("order_date", json!("2402２9"), Msg(bad)),
            ("order_date", json!(10101), Msg(bad)),
            ("order_date", json!(true), Msg(bad)),
        ]);
    }

    #[test]
    fn item_numbers() {
        run_item(&[
            // quantity: 1-4 digits, up to 4 decimals, kept as sent, > 0.
            ("quantity", json!("1"), Is("1")),
            ("quantity", json!(3), Is("3")),
            ("quantity", json!(2.5), Is("2.5")),
            ("quantity", json!("2.50"), Is("2.50")),
            ("quantity", json!("2.5000"), Is("2.5000")),
            ("quantity", json!("2.50000"), Is("2.5000")),
            ("quantity", json!("0002.5"), Is("2.5")),
            ("quantity", json!("0.0001"), Is("0.0001")),
            ("quantity", json!("9999.9999"), Is("9999.9999")),
            (
                "quantity",
                json!("10000"),
                Msg("Quantity must have at most 4 digits before the decimal point."),
            ),
            (
                "quantity",
                json!("1.23456"),
                Msg("Quantity must be a number with at most 4 decimals."),
            ),
            ("quantity", json!("0"), Msg("Quantity must be greater than 0.")),
            ("quantity", json!(0), Msg("Quantity must be greater than 0.")),
            (
                "quantity",
                json!("0.00000"),
                Msg("Quantity must be greater than 0."),
            ),
            ("quantity", json!("-1"), Msg("Quantity cannot be negative.")),
            ("quantity", json!("two"), Msg("Quantity must be a number.")),
            // unit_cost: 1-12 digits, up to 4 decimals, zero allowed.
            ("unit_cost", json!("12.3456"), Is("12.3456")),
            ("unit_cost", json!("0"), Is("0")),
            ("unit_cost", json!("10.50"), Is("10.50")),
            ("unit_cost", json!("1.00000"), Is("1.0000")),
            ("unit_cost", json!("999999999999.9999"), Is("999999999999.9999")),
            (
                "unit_cost",
                json!("1000000000000"),
                Msg("Unit Cost must have at most 12 digits before the decimal point."),
            ),
            (
                "unit_cost",
                json!("1.00001"),
                Msg("Unit Cost must be a number with at most 4 decimals."),
            ),
            ("unit_cost", json!("-0.01"), Msg("Unit Cost cannot be negative.")),
            (
                "unit_cost",
                json!("1e2"),
                Msg("Unit Cost must be written without an exponent."),
            ),
            // tax_amount: 1-9 digits, 2 decimals.
            ("tax_amount", json!("0"), Is("0.00")),
            ("tax_amount", json!(1.5), Is("1.50")),
            ("tax_amount", json!("999999999.99"), Is("999999999.99")),
            (
                "tax_amount",
                json!("1000000000"),
                Msg("Tax Amount must have at most 9 digits before the decimal point."),
            ),
            (
                "tax_amount",
                json!("0.001"),
                Msg("Tax Amount must be a number with at most 2 decimals."),
            ),
            // tax_rate: 1-2 digits, 2 decimals (up to 99.99).
            ("tax_rate", json!("99.99"), Is("99.99")),
            ("tax_rate", json!("5"), Is("5.00")),
            ("tax_rate", json!(8.25), Is("8.25")),
            ("tax_rate", json!("08.5"), Is("8.50")),
            (
                "tax_rate",
                json!("100"),
                Msg("Tax Rate must have at most 2 digits before the decimal point."),
            ),
            (
                "tax_rate",
                json!("8.125"),
                Msg("Tax Rate must be a number with at most 2 decimals."),
            ),
            ("tax_rate", json!("-8"), Msg("Tax Rate cannot be negative.")),
            // discount_amount: optional, 1-12 digits, 2 decimals.
            ("discount_amount", json!("3"), Is("3.00")),
            ("discount_amount", json!(""), Absent),
            ("discount_amount", json!(null), Absent),
            ("discount_amount", json!("999999999999.99"), Is("999999999999.99")),
            (
                "discount_amount",
                json!("1000000000000"),
                Msg("Discount Amount must have at most 12 digits before the decimal point."),
            ),
            (
                "discount_amount",
                json!("1.111"),
                Msg("Discount Amount must be a number with at most 2 decimals."),
            ),
            // other_tax_amount (Visa): 1-12 digits, 2 decimals.
            ("other_tax_amount", json!("4.2"), Is("4.20")),
            (
                "other_tax_amount",
                json!("999999999999.99"),
                Is("999999999999.99"),
            ),
            (
                "other_tax_amount",
                json!("1000000000000"),
                Msg("Other Tax Amount must have at most 12 digits before the decimal point."),
            ),
            (
                "other_tax_amount",
                json!("4.201"),
                Msg("Other Tax Amount must be a number with at most 2 decimals."),
            ),
            // discount_rate (Mastercard): 1-5 digits, 2 decimals.
            ("discount_rate", json!("12345.67"), Is("12345.67")),
            ("discount_rate", json!(10), Is("10.00")),
            (
                "discount_rate",
                json!("123456"),
                Msg("Discount Rate must have at most 5 digits before the decimal point."),
            ),
            (
                "discount_rate",
                json!("1.555"),
                Msg("Discount Rate must be a number with at most 2 decimals."),
            ),
        ]);
    }

    #[test]
    fn item_text_fields() {
        run_item(&[
            // description: 1-26, letters, digits and spaces.
            ("description", json!("Widget 2000"), Is("Widget 2000")),
            ("description", json!("W"), Is("W")),
            ("description", s(26, 'd'), Is("dddddddddddddddddddddddddd")),
            ("description", json!(12345), Is("12345")),
            (
                "description",
                s(27, 'd'),
                Msg("Description should contain at most 26 characters."),
            ),
            (
                "description",
                json!("Widget-2000"),
                Msg("Description may contain only letters, digits and spaces."),
            ),
            (
                "description",
                json!("Café"),
                Msg("Description may contain only letters, digits and spaces."),
            ),
            (
                "description",
                json!("a\tb"),
                Msg("Description may contain only letters, digits and spaces."),
            ),
            ("description", json!(1.5), Msg("Description must be a string.")),
            ("description", json!(["x"]), Msg("Description must be a string.")),
            // product_code: 1-12.
            ("product_code", json!("SKU-123_/x.Y"), Is("SKU-123_/x.Y")),
            ("product_code", json!(12345), Is("12345")),
            (
                "product_code",
                s(13, 'P'),
                Msg("Product Code should contain at most 12 characters."),
            ),
            (
                "product_code",
                json!("P\u{0}"),
                Msg("Product Code may contain only printable ASCII characters."),
            ),
            // commodity_code (Visa): 1-12.
            ("commodity_code", s(12, '1'), Is("111111111111")),
            (
                "commodity_code",
                s(13, '1'),
                Msg("Commodity Code should contain at most 12 characters."),
            ),
            // alternate_tax_id (Mastercard): 1-15.
            ("alternate_tax_id", s(15, 'A'), Is("AAAAAAAAAAAAAAA")),
            ("alternate_tax_id", json!(""), Absent),
            (
                "alternate_tax_id",
                s(16, 'A'),
                Msg("Alternate Tax Id should contain at most 15 characters."),
            ),
            // tax_type_applied (Mastercard): 1-4.
            ("tax_type_applied", json!("ABCD"), Is("ABCD")),
            (
                "tax_type_applied",
                json!("ABCDE"),
                Msg("Tax Type Applied should contain at most 4 characters."),
            ),
            // debit_credit: D or C.
            ("debit_credit", json!("D"), Is("D")),
            ("debit_credit", json!("C"), Is("C")),
            ("debit_credit", json!("c"), Is("C")),
            ("debit_credit", json!(""), Absent),
            (
                "debit_credit",
                json!("X"),
                Msg("Debit Credit must be D (debit) or C (credit)."),
            ),
            (
                "debit_credit",
                json!("DC"),
                Msg("Debit Credit must be D (debit) or C (credit)."),
            ),
            (
                "debit_credit",
                json!("debit"),
                Msg("Debit Credit must be D (debit) or C (credit)."),
            ),
            (
                "debit_credit",
                json!(1),
                Msg("Debit Credit must be D (debit) or C (credit)."),
            ),
        ]);
    }

    #[test]
    fn multiple_text_problems_are_all_reported() {
        let mut d = data();
        d["line_items"][0]["description"] = json!("This is-a very long description!");
        assert_eq!(
            Json::Object(item_errors(&d, Other, 0)),
            json!({"description": [
                "Description may contain only letters, digits and spaces.",
                "Description should contain at most 26 characters.",
            ]})
        );
    }

    #[test]
    fn unit_codes_are_case_insensitive_and_stored_uppercase() {
        let bad = "Unit Code must be one of the unit of measure codes (such as EA, BX or DAY).";
        run_item(&[
            ("unit_code", json!("EA"), Is("EA")),
            ("unit_code", json!("ea"), Is("EA")),
            ("unit_code", json!("gll"), Is("GLL")),
            ("unit_code", json!("Day"), Is("DAY")),
            ("unit_code", json!("c"), Is("C")),
            ("unit_code", json!("yrd"), Is("YRD")),
            ("unit_code", json!("XYZ"), Msg(bad)),
            ("unit_code", json!("EACH"), Msg(bad)),
            ("unit_code", json!(" EA"), Msg(bad)),
            ("unit_code", json!(1), Msg(bad)),
            ("unit_code", json!(true), Msg(bad)),
        ]);
        for code in UNIT_CODES {
            let mut d = data();
            d["line_items"][0]["unit_code"] = json!(code.to_lowercase());
            assert_eq!(ok(&d, Network::Visa)["line_items"][0]["unit_code"], json!(code));
        }
    }

    #[test]
    fn tax_type_ids_of_the_table_only() {
        let bad = "Tax Type Id must be one of the tax type identifiers 00-06, 10-14 or 20-22.";
        let mut cases = vec![
            ("tax_type_id", json!(2), Is("02")),
            ("tax_type_id", json!(0), Is("00")),
            ("tax_type_id", json!(22), Is("22")),
            ("tax_type_id", json!(""), Absent),
            ("tax_type_id", json!("07"), Msg(bad)),
            ("tax_type_id", json!("09"), Msg(bad)),
            ("tax_type_id", json!("15"), Msg(bad)),
            ("tax_type_id", json!("23"), Msg(bad)),
            ("tax_type_id", json!("2"), Msg(bad)),
            ("tax_type_id", json!("002"), Msg(bad)),
            ("tax_type_id", json!(7), Msg(bad)),
            ("tax_type_id", json!(100), Msg(bad)),
            ("tax_type_id", json!(-1), Msg(bad)),
            ("tax_type_id", json!(2.0), Msg(bad)),
        ];
        for (id, _) in TAX_TYPE_IDS {
            cases.push(("tax_type_id", json!(id), Is(id)));
        }
        run_item(&cases);
    }

    #[test]
    fn unknown_fields_are_named() {
        let mut d = data();
        d["colour"] = json!("red");
        d["line_items"][0]["size"] = json!("L");
        d["line_items"][0]["line_items"] = json!([]);
        assert_eq!(
            Json::Object(level_errors(&d, Network::Visa)),
            json!({
                "colour": ["Unknown field colour for level3_data."],
                "line_items": [{
                    "line_items": ["Unknown field line_items for a line item."],
                    "size": ["Unknown field size for a line item."],
                }],
            })
        );
        // transaction_id belongs one level up.
        let mut d = data();
        d["transaction_id"] = json!("abc");
        assert_eq!(
            Json::Object(level_errors(&d, Other)),
            json!({"transaction_id": ["Transaction Id belongs to transactionlevel3, not to level3_data."]})
        );
    }

    #[test]
    fn unknown_field_echo_is_bounded() {
        let long: String = std::iter::repeat_n('k', 1000).collect();
        let mut d = data();
        d[long.as_str()] = json!(1);
        let level = level_errors(&d, Other);
        let name = echo_name(&long);
        assert!(name.chars().count() <= 65);
        assert_eq!(
            Json::Object(level),
            json!({ name.clone(): [format!("Unknown field {name} for level3_data.")] })
        );

        let mut d = data();
        for i in 0..25 {
            d["line_items"][0][format!("x{i:02}")] = json!(i);
        }
        let e = item_errors(&d, Other, 0);
        assert_eq!(e.len(), 21, "20 listed plus the overflow note");
        assert_eq!(
            e["_"],
            json!(["More unknown fields were sent; only the first 20 are listed."])
        );
        assert!(e.contains_key("x00") && e.contains_key("x19") && !e.contains_key("x20"));
    }

    #[test]
    fn whole_replace_keeps_only_what_was_sent_in_a_stable_order() {
        let d = json!({
            "line_items": [{
                "tax_type_id": 1,
                "unit_code": "bx",
                "commodity_code": "4410",
                "tax_rate": 5,
                "tax_amount": "0.5",
                "unit_cost": "1.2300",
                "quantity": 12,
                "product_code": 991,
                "description": "Box of screws",
                "discount_amount": null,
                "debit_credit": "",
            }],
            "unique_vat_ref_number": "VAT-REF-1",
            "tax_rate": "7.5",
            "order_date": "240115",
            "tax_exempt": false,
            "shipto_zip_code": "10001",
            "shipfrom_zip_code": null,
            "transaction_discount_amount": "12",
            "sales_tax": 4,
            "freight_amount": "",
            "duty_amount": "1.5",
            "destination_country_code": "usa",
        });
        let out = ok(&d, Network::Visa);
        assert_eq!(
            out,
            json!({
                "destination_country_code": "USA",
                "duty_amount": "1.50",
                "sales_tax": "4.00",
                "tax_exempt": "0",
                "shipto_zip_code": "10001",
                "transaction_discount_amount": "12.00",
                "order_date": "240115",
                "tax_rate": "7.50",
                "unique_vat_ref_number": "VAT-REF-1",
                "line_items": [{
                    "description": "Box of screws",
                    "product_code": "991",
                    "quantity": "12",
                    "unit_code": "BX",
                    "unit_cost": "1.2300",
                    "tax_amount": "0.50",
                    "tax_rate": "5.00",
                    "commodity_code": "4410",
                    "tax_type_id": "01",
                }],
            })
        );
        // The order of the stored object is the spec's, whatever was sent.
        let keys: Vec<_> = out.as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "destination_country_code",
                "duty_amount",
                "sales_tax",
                "tax_exempt",
                "shipto_zip_code",
                "transaction_discount_amount",
                "order_date",
                "tax_rate",
                "unique_vat_ref_number",
                "line_items",
            ]
        );
        // Validating the normalised value again gives it back unchanged.
        assert_eq!(ok(&out, Network::Visa), out);
    }

    #[test]
    fn the_reference_sample_formats_are_accepted() {
        // Numbers as strings, a lowercase unit code, a numeric country code.
        let d = json!({
            "destination_country_code": "840",
            "duty_amount": "1.00",
            "freight_amount": "5.00",
            "national_tax": "0.00",
            "sales_tax": "2.00",
            "tax_amount": "2.00",
            "tax_exempt": "0",
            "shipfrom_zip_code": "78701",
            "shipto_zip_code": "10001",
            "tax_rate": "8",
            "line_items": [{
                "description": "Gas",
                "product_code": "123",
                "quantity": "10",
                "unit_code": "gll",
                "unit_cost": "3.459",
                "tax_amount": "2.00",
                "tax_rate": "5.78",
                "commodity_code": "15100",
            }],
        });
        let out = ok(&d, Mastercard);
        assert_eq!(out["line_items"][0]["unit_code"], "GLL");
        assert_eq!(out["destination_country_code"], "840");
        assert_eq!(out["tax_rate"], "8.00");
        assert_eq!(out["line_items"][0]["unit_cost"], "3.459");
        assert_eq!(out["line_items"][0]["commodity_code"], "15100");
    }

    #[test]
    fn reference_tables() {
        assert_eq!(UNIT_CODES.len(), 232);
        let mut seen = std::collections::HashSet::new();
        for code in UNIT_CODES {
            assert!(seen.insert(code), "{code} twice");
            assert!((1..=3).contains(&code.len()), "{code}");
            assert!(code.bytes().all(|b| b.is_ascii_uppercase()), "{code}");
        }
        for sample in [
            "EA", "BX", "DAY", "BLL", "BAR", "CEL", "AMP", "ACR", "ANN", "CMT", "GLL",
        ] {
            assert!(UNIT_CODES.contains(&sample), "{sample}");
        }
        let ids: Vec<_> = TAX_TYPE_IDS.iter().map(|(id, _)| *id).collect();
        assert_eq!(
            ids,
            ["00", "01", "02", "03", "04", "05", "06", "10", "11", "12", "13", "14", "20", "21", "22"]
        );
        assert!(TAX_TYPE_IDS.iter().all(|(_, meaning)| !meaning.is_empty()));
    }

    #[test]
    fn labels_match_the_blank_helper() {
        assert_eq!(blank("tax_rate"), "Tax Rate cannot be blank.");
        assert_eq!(blank("level3_data"), "Level3 Data cannot be blank.");
        assert_eq!(LINE_ITEMS_MISSING, "Line item record details missing");
    }
}
