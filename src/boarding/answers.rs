//! The answer groups of a boarding application, declared once, and the
//! validation of each field. Parsing normalises what it accepts (digits
//! without separators, ownership keys to their labels, amounts to
//! two-decimal strings), so what is stored is always valid.

use crate::error::FieldErrors;
use chrono::{Datelike, NaiveDate};
use serde_json::{Map, Value as Json};
use std::collections::BTreeMap;

/// How a field is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Free text, length bounds in characters.
    Text(usize, usize),
    Title,
    Ownership,
    /// Digits, length bounds (industry type and SIC codes are numeric).
    Code(usize, usize),
    SecCodes,
    State,
    Zip,
    BirthDate,
    Ssn,
    License,
    Phone,
    Email,
    Ein,
    Url,
    Routing,
    Account,
    Equity,
    Sales,
    Flag,
}

pub struct FieldSpec {
    pub name: &'static str,
    pub kind: Kind,
    /// Sealed at rest and masked in every answer.
    pub sensitive: bool,
}

const fn f(name: &'static str, kind: Kind) -> FieldSpec {
    FieldSpec {
        name,
        kind,
        sensitive: false,
    }
}

const fn secret(name: &'static str, kind: Kind) -> FieldSpec {
    FieldSpec {
        name,
        kind,
        sensitive: true,
    }
}

pub struct Group {
    pub name: &'static str,
    pub header: &'static str,
    pub fields: &'static [FieldSpec],
}

const OWNER: &[FieldSpec] = &[
    f("title", Kind::Title),
    f("firstName", Kind::Text(2, 25)),
    f("lastName", Kind::Text(2, 25)),
    f("address", Kind::Text(2, 35)),
    f("unit", Kind::Text(2, 10)),
    f("city", Kind::Text(2, 25)),
    f("state", Kind::State),
    f("zipCode", Kind::Zip),
    f("dateOfBirth", Kind::BirthDate),
    secret("socialSecurityNumber", Kind::Ssn),
    secret("driversLicenseNumber", Kind::License),
    f("driversLicenseState", Kind::State),
    f("phoneNumber", Kind::Phone),
    f("faxNumber", Kind::Phone),
    f("emailAddress", Kind::Email),
];

const PLACE: &[FieldSpec] = &[
    f("address", Kind::Text(2, 35)),
    f("unit", Kind::Text(2, 10)),
    f("city", Kind::Text(2, 25)),
    f("state", Kind::State),
    f("zipCode", Kind::Zip),
    f("phoneNumber", Kind::Phone),
];

/// Every answer group of the spec, in the order forms show them.
pub static GROUPS: &[Group] = &[
    Group {
        name: "businessOwnership",
        header: "Business ownership",
        fields: &[f("ownershipType", Kind::Ownership)],
    },
    Group {
        name: "businessIndustry",
        header: "Industry",
        fields: &[
            f("industryType", Kind::Code(2, 128)),
            f("industrySic", Kind::Code(2, 128)),
        ],
    },
    Group {
        name: "customerConsent",
        header: "Customer consent",
        fields: &[f("secCodes", Kind::SecCodes)],
    },
    Group {
        name: "organizationInformation",
        header: "Organization",
        fields: &[
            f("organizationName", Kind::Text(2, 128)),
            f("employeeIdentificationNumber", Kind::Ein),
            f("website", Kind::Url),
        ],
    },
    Group {
        name: "organizationContact",
        header: "Organization contact",
        fields: &[
            f("title", Kind::Title),
            f("firstName", Kind::Text(2, 25)),
            f("lastName", Kind::Text(2, 25)),
            f("phoneNumber", Kind::Phone),
            f("emailAddress", Kind::Email),
        ],
    },
    Group {
        name: "organizationLocation",
        header: "Business location",
        fields: PLACE,
    },
    Group {
        name: "organizationAddress",
        header: "Mailing address",
        fields: PLACE,
    },
    Group {
        name: "owner1Information",
        header: "Owner 1",
        fields: OWNER,
    },
    Group {
        name: "owner2Information",
        header: "Owner 2",
        fields: OWNER,
    },
    Group {
        name: "owner3Information",
        header: "Owner 3",
        fields: OWNER,
    },
    Group {
        name: "owner4Information",
        header: "Owner 4",
        fields: OWNER,
    },
    Group {
        name: "ownerEquity",
        header: "Ownership shares",
        fields: &[
            f("owner1", Kind::Equity),
            f("owner2", Kind::Equity),
            f("owner3", Kind::Equity),
            f("owner4", Kind::Equity),
        ],
    },
    Group {
        name: "bankInformation",
        header: "Bank account",
        fields: &[
            f("routingNumber", Kind::Routing),
            secret("accountNumber", Kind::Account),
            secret("accountNumberReEnter", Kind::Account),
            f("bankName", Kind::Text(2, 128)),
        ],
    },
    Group {
        name: "salesInformation",
        header: "Sales",
        fields: &[
            f("monthlyVolume", Kind::Sales),
            f("averageTicket", Kind::Sales),
            f("highestTicket", Kind::Sales),
            f("amexAnnualVolume", Kind::Sales),
            f("amexMarketingOptOut", Kind::Flag),
        ],
    },
];

/// Other names accepted for a field (the reference's samples use
/// `employerIdentificationNumber`; the spec's name is kept).
const ALIASES: &[(&str, &str, &str)] = &[(
    "organizationInformation",
    "employerIdentificationNumber",
    "employeeIdentificationNumber",
)];

/// The spec's titles; each is also taken without its period.
pub const TITLES: &[&str] = &["Mr.", "Mrs.", "Miss", "Ms.", "Dr.", "President", "CEO"];

/// Ownership labels, and the keys that map to them.
pub const OWNERSHIP: &[(&str, &[&str])] = &[
    ("C Corporation", &["C_CORPORATION", "CORPORATION"]),
    ("Government (Fed,St,Local)", &["GOVERNMENT"]),
    ("LLC- C Corp", &["LLC_C_CORP", "LLC_C_CORPORATION"]),
    // An LLC without a tax election is a disregarded entity (one member).
    ("LLC- Disregarded Entity", &["LLC_DISREGARDED_ENTITY", "LLC"]),
    ("LLC- Partnership", &["LLC_PARTNERSHIP"]),
    ("LLC- S Corp", &["LLC_S_CORP", "LLC_S_CORPORATION"]),
    ("LLC- Sole Proprietor", &["LLC_SOLE_PROPRIETOR"]),
    ("Non-Profit", &["NON_PROFIT"]),
    ("Non-US Entity", &["NON_US_ENTITY"]),
    ("Partnership", &["PARTNERSHIP"]),
    ("S Corporation", &["S_CORPORATION"]),
    ("Sole Proprietor", &["SOLE_PROPRIETOR"]),
    ("Trust/Estate", &["TRUST_ESTATE"]),
];

/// ACH SEC codes a merchant may consent to.
pub const SEC_CODES: &[&str] = &["CCD", "PPD", "TEL", "WEB", "POP", "C21"];

/// The 50 states, DC, the territories, the freely associated states and
/// the armed forces' postal codes (USPS).
pub const STATES: &[&str] = &[
    "AL", "AK", "AZ", "AR", "CA", "CO", "CT", "DE", "FL", "GA", "HI", "ID", "IL", "IN", "IA", "KS", "KY",
    "LA", "ME", "MD", "MA", "MI", "MN", "MS", "MO", "MT", "NE", "NV", "NH", "NJ", "NM", "NY", "NC", "ND",
    "OH", "OK", "OR", "PA", "RI", "SC", "SD", "TN", "TX", "UT", "VT", "VA", "WA", "WV", "WI", "WY", "DC",
    "AS", "GU", "MP", "PR", "VI", "UM", "FM", "MH", "PW", "AA", "AE", "AP",
];

/// Largest sales amount: 999999999.99.
pub const MAX_SALES_CENTS: i64 = 99_999_999_999;

/// Valid answers: group -> field -> normalised value. Sensitive values
/// are in clear here, in memory only.
pub type Answers = BTreeMap<String, Map<String, Json>>;

pub fn group(name: &str) -> Option<&'static Group> {
    GROUPS.iter().find(|g| g.name == name)
}

pub fn field(path: &str) -> Option<(&'static Group, &'static FieldSpec)> {
    let (g, name) = path.split_once('.')?;
    let g = group(g)?;
    g.fields.iter().find(|f| f.name == name).map(|f| (g, f))
}

/// Every dotted path of a sensitive answer.
pub fn sensitive_paths() -> impl Iterator<Item = String> {
    GROUPS.iter().flat_map(|g| {
        g.fields
            .iter()
            .filter(|f| f.sensitive)
            .map(move |f| format!("{}.{}", g.name, f.name))
    })
}

/// What an offer says about answers.
#[derive(Debug, Default, Clone)]
pub struct Rules {
    /// Groups or dotted paths that may be answered; empty: all.
    pub allowable: Vec<String>,
    pub defaults: BTreeMap<String, Json>,
    pub fixed: BTreeMap<String, Json>,
    pub required: Vec<String>,
}

impl Rules {
    fn allows(&self, group: &str, path: &str) -> bool {
        self.allowable.is_empty() || self.allowable.iter().any(|k| k == group || k == path)
    }

    /// Whether a group or dotted path may be answered under the offer.
    pub fn allows_key(&self, key: &str) -> bool {
        let group = key.split('.').next().unwrap_or(key);
        self.allows(group, key)
    }
}

/// `dateOfBirth` -> `Date of birth`.
pub fn label(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if i == 0 {
            out.extend(c.to_uppercase());
        } else if c.is_ascii_uppercase() {
            out.push(' ');
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn is_blank(v: &Json) -> bool {
    match v {
        Json::Null => true,
        Json::String(s) => s.trim().is_empty(),
        _ => false,
    }
}

/// Parses a whole submission (the answer groups at the top level) against
/// an offer's rules, then applies its fixed and default values. Blank and
/// omitted fields are absent from the result. Collects every problem,
/// each under its dotted path.
pub fn parse(input: &Map<String, Json>, rules: &Rules, today: NaiveDate) -> Result<Answers, FieldErrors> {
    let mut errors = FieldErrors::new();
    let mut answers = Answers::new();
    for (gname, gvalue) in input {
        let Some(g) = group(gname) else {
            unknown(
                &mut errors,
                crate::engine::validate::echo_name(gname),
                "Unknown answer group.",
            );
            continue;
        };
        let fields = match gvalue {
            Json::Null => continue,
            Json::Object(m) => m,
            _ => {
                errors.add(gname.clone(), format!("{} must be an object.", label(gname)));
                continue;
            }
        };
        let mut out = Map::new();
        for (fname, raw) in fields {
            let canonical = ALIASES
                .iter()
                .find(|(ag, alias, _)| *ag == gname && alias == fname)
                .map(|(_, _, name)| *name)
                .unwrap_or(fname.as_str());
            let path = format!("{gname}.{canonical}");
            let Some(spec) = g.fields.iter().find(|f| f.name == canonical) else {
                let path = format!("{gname}.{}", crate::engine::validate::echo_name(fname));
                unknown(&mut errors, path, "Unknown answer.");
                continue;
            };
            if is_blank(raw) {
                continue;
            }
            if !rules.allows(gname, &path) {
                errors.add(path, "This offer does not take this answer.");
                continue;
            }
            match check(spec.kind, raw, today) {
                Ok(v) => {
                    if let Some(prev) = out.get(canonical) {
                        if *prev != v {
                            errors.add(
                                path,
                                "Given twice (under both of its names) with different values.",
                            );
                        }
                        continue;
                    }
                    if let Some(fixed) = rules.fixed.get(&path) {
                        if check(spec.kind, fixed, today).ok().as_ref() != Some(&v) {
                            errors.add(path, "This answer is fixed by the offer and cannot be changed.");
                            continue;
                        }
                    }
                    out.insert(canonical.to_string(), v);
                }
                Err(message) => errors.add(path, format!("{} {message}", label(canonical))),
            }
        }
        if !out.is_empty() {
            answers.insert(gname.clone(), out);
        }
    }
    for (path, value, overwrite) in rules
        .fixed
        .iter()
        .map(|(p, v)| (p, v, true))
        .chain(rules.defaults.iter().map(|(p, v)| (p, v, false)))
    {
        let Some((g, spec)) = field(path) else { continue };
        let Ok(v) = check(spec.kind, value, today) else {
            continue;
        };
        let slot = answers.entry(g.name.to_string()).or_default();
        if overwrite || !slot.contains_key(spec.name) {
            slot.insert(spec.name.to_string(), v);
        }
    }
    cross_checks(&answers, &mut errors);
    if errors.is_empty() {
        Ok(answers)
    } else {
        Err(errors)
    }
}

/// Names an unknown group or answer; past the first 20, one line says
/// there were more (a body of thousands of made-up keys gets a short answer).
fn unknown(errors: &mut FieldErrors, path: String, message: &str) {
    const LISTED: usize = 20;
    let listed = errors
        .0
        .values()
        .flatten()
        .filter(|m| m.starts_with("Unknown answer"))
        .count();
    if listed < LISTED {
        errors.add(path, message);
    } else {
        errors.add(
            "_",
            "More unknown answers were sent; only the first 20 are listed.",
        );
    }
}

/// Rules across fields: the account number typed twice, shares summing
/// to at most 100, the average ticket within the highest.
fn cross_checks(answers: &Answers, errors: &mut FieldErrors) {
    if let Some(bank) = answers.get("bankInformation") {
        if let (Some(a), Some(b)) = (bank.get("accountNumber"), bank.get("accountNumberReEnter")) {
            if a != b {
                errors.add(
                    "bankInformation.accountNumberReEnter",
                    "Account number re-enter does not match the account number.",
                );
            }
        }
    }
    if let Some(equity) = answers.get("ownerEquity") {
        let total: i64 = equity.values().filter_map(equity_hundredths).sum();
        if total > 10_000 {
            errors.add(
                "ownerEquity",
                format!(
                    "Owner shares add up to {}; they must not exceed 100.",
                    equity_json(total)
                ),
            );
        }
    }
    if let Some(sales) = answers.get("salesInformation") {
        let bounds = |k: &str| sales.get(k).and_then(Json::as_str).and_then(ticket_bounds);
        // An average surely above the highest: its least is above the
        // highest's most (a range counts by its bounds).
        if let (Some((avg_least, _)), Some((_, high_most))) =
            (bounds("averageTicket"), bounds("highestTicket"))
        {
            if avg_least > high_most {
                errors.add(
                    "salesInformation.averageTicket",
                    "Average ticket cannot exceed the highest ticket.",
                );
            }
        }
    }
}

/// The paths a complete application lacks: the offer's required answers.
pub fn missing(answers: &Answers, rules: &Rules) -> FieldErrors {
    let mut errors = FieldErrors::new();
    for path in &rules.required {
        let present = match path.split_once('.') {
            Some((g, name)) => answers.get(g).is_some_and(|m| m.contains_key(name)),
            None => answers.get(path.as_str()).is_some_and(|m| !m.is_empty()),
        };
        if !present {
            let name = path.rsplit('.').next().unwrap_or(path);
            errors.add(path.clone(), format!("{} cannot be blank.", label(name)));
        }
    }
    errors
}

fn text(raw: &Json) -> Result<String, &'static str> {
    match raw {
        Json::String(s) => {
            let s = s.trim();
            if s.chars().any(char::is_control) {
                return Err("must not contain control characters.");
            }
            Ok(s.to_string())
        }
        Json::Number(n) => Ok(n.to_string()),
        _ => Err("must be a string."),
    }
}

/// Digits only, once spaces, dashes, dots and parentheses are removed.
fn digits(raw: &Json) -> Result<String, &'static str> {
    let t = text(raw)?;
    let d: String = t.chars().filter(|c| !" -.()".contains(*c)).collect();
    if d.is_empty() || !d.bytes().all(|b| b.is_ascii_digit()) {
        return Err("must contain only digits.");
    }
    Ok(d)
}

/// Checks one answer and returns its normalised value, or what is wrong
/// (a sentence that follows the field's label).
pub fn check(kind: Kind, raw: &Json, today: NaiveDate) -> Result<Json, String> {
    let s = |v: String| Ok(Json::String(v));
    match kind {
        Kind::Text(min, max) => {
            let t = text(raw)?;
            let n = t.chars().count();
            if n < min || n > max {
                return Err(format!("must be {min} to {max} characters."));
            }
            s(t)
        }
        Kind::Title => {
            let t = text(raw)?;
            // Stored as the spec lists it: "Mr" is "Mr.".
            let spelled = |v: &str| {
                v.trim_end_matches('.')
                    .eq_ignore_ascii_case(t.trim_end_matches('.'))
            };
            match TITLES.iter().find(|v| spelled(v)) {
                Some(v) => s(v.to_string()),
                None => Err(format!("must be one of {}.", TITLES.join(", "))),
            }
        }
        Kind::Ownership => {
            let t = text(raw)?;
            OWNERSHIP
                .iter()
                .find(|(label, keys)| label.eq_ignore_ascii_case(&t) || keys.contains(&t.as_str()))
                .map(|(label, _)| Json::String(label.to_string()))
                .ok_or_else(|| {
                    let labels: Vec<&str> = OWNERSHIP.iter().map(|(l, _)| *l).collect();
                    format!("must be one of {}.", labels.join(", "))
                })
        }
        Kind::Code(min, max) => {
            let t = text(raw)?;
            if t.len() < min || t.len() > max || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("must be {min} to {max} digits."));
            }
            s(t)
        }
        Kind::SecCodes => {
            let t = text(raw)?.to_ascii_uppercase();
            let codes: Vec<&str> = t.split(',').map(str::trim).collect();
            if !(2..=16).contains(&t.len()) || codes.iter().any(|c| !SEC_CODES.contains(c)) {
                return Err(format!(
                    "must be SEC codes from {}, separated by commas (2 to 16 characters).",
                    SEC_CODES.join(", ")
                ));
            }
            s(codes.join(","))
        }
        Kind::State => {
            let t = text(raw)?.to_ascii_uppercase();
            if !STATES.contains(&t.as_str()) {
                return Err("must be a two-letter US state or territory code.".into());
            }
            s(t)
        }
        Kind::Zip => {
            let t = text(raw)?;
            let b = t.as_bytes();
            let all = |r: &[u8]| r.iter().all(u8::is_ascii_digit);
            let ok = match b.len() {
                5 | 9 => all(b),
                10 => all(&b[..5]) && b[5] == b'-' && all(&b[6..]),
                _ => false,
            };
            if !ok || t.starts_with("00000") {
                return Err("must be a US ZIP code: 5 digits, 9 digits or 5-4 digits.".into());
            }
            s(t)
        }
        Kind::BirthDate => {
            let t = text(raw)?;
            let date = (t.len() == 10)
                .then(|| NaiveDate::parse_from_str(&t, "%Y-%m-%d").ok())
                .flatten()
                .ok_or("must be a real date written YYYY-MM-DD.")?;
            let adult = today
                .checked_sub_months(chrono::Months::new(18 * 12))
                .unwrap_or(today);
            if date >= today {
                return Err("must be in the past.".into());
            }
            if date > adult {
                return Err("must be at least 18 years ago (owners are adults).".into());
            }
            if date.year() < 1900 {
                return Err("must be after 1900.".into());
            }
            s(t)
        }
        Kind::Ssn => {
            let d = digits(raw)?;
            let ok = d.len() == 9
                && !matches!(&d[..3], "000" | "666")
                && !d.starts_with('9')
                && &d[3..5] != "00"
                && &d[5..] != "0000";
            if !ok {
                return Err("must be a valid 9-digit social security number.".into());
            }
            s(d)
        }
        Kind::License => {
            let t = text(raw)?.to_ascii_uppercase();
            let ok = (5..=16).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
            if !ok {
                return Err("must be 5 to 16 letters, digits or dashes.".into());
            }
            s(t)
        }
        Kind::Phone => {
            let t = text(raw)?;
            // The US country code before the ten digits is dropped.
            let national = t.trim_start().strip_prefix("+1").unwrap_or(&t);
            let mut d = digits(&Json::String(national.to_string()))?;
            if d.len() == 11 && d.starts_with('1') {
                d.remove(0);
            }
            if d.len() != 10 {
                return Err("must be 10 digits.".into());
            }
            s(d)
        }
        Kind::Email => {
            let t = text(raw)?;
            let ok = t.len() <= 254
                && !t.contains(char::is_whitespace)
                && t.split_once('@').is_some_and(|(local, domain)| {
                    !local.is_empty()
                        && !domain.contains('@')
                        && domain.contains('.')
                        && !domain.starts_with('.')
                        && !domain.ends_with('.')
                });
            if !ok {
                return Err("must be an email address.".into());
            }
            s(t)
        }
        Kind::Ein => {
            let t = text(raw)?;
            let b = t.as_bytes();
            let ok = b.len() == 10
                && b[..2].iter().all(u8::is_ascii_digit)
                && b[2] == b'-'
                && b[3..].iter().all(u8::is_ascii_digit);
            if !ok {
                return Err("must be written NN-NNNNNNN.".into());
            }
            s(t)
        }
        Kind::Url => {
            let t = text(raw)?;
            let ok = t.len() <= 255
                && t.parse::<axum::http::Uri>().ok().is_some_and(|u| {
                    matches!(u.scheme_str(), Some("http" | "https"))
                        && u.host().is_some_and(|h| h.contains('.') && !h.starts_with('.'))
                });
            if !ok {
                return Err("must be a URL with its scheme, such as https://example.com.".into());
            }
            s(t)
        }
        Kind::Routing => {
            let t = text(raw)?;
            if t.len() != 9 || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err("must be 9 digits.".into());
            }
            if !crate::cards::aba_ok(&t) {
                return Err("is not a valid ABA routing number (checksum).".into());
            }
            s(t)
        }
        Kind::Account => {
            let t = text(raw)?;
            if !(1..=17).contains(&t.len()) || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err("must be 1 to 17 digits.".into());
            }
            s(t)
        }
        Kind::Equity => {
            // A share in percent, as the spec has it: positive and less
            // than 100, to two decimals (33.33 + 33.33 + 33.34).
            let hundredths = crate::money::parse_text(&text(raw)?, 9_999)
                .ok()
                .filter(|h| *h > 0)
                .ok_or_else(|| {
                    "must be a number above 0 and below 100, with at most two decimals.".to_string()
                })?;
            Ok(equity_json(hundredths))
        }
        Kind::Sales => {
            if let Json::String(t) = raw {
                if let Some(band) = sales_band(t.trim()) {
                    return s(band);
                }
            }
            crate::money::parse(raw, MAX_SALES_CENTS)
                .map(|cents| Json::String(crate::money::format(cents)))
                .map_err(|e| {
                    format!("{e} (at most 999999999.99), or a range such as 0-5000 or >500000.")
                        .replace("must be", "must be an amount,")
                })
        }
        Kind::Flag => match raw {
            Json::Bool(b) => Ok(Json::Bool(*b)),
            _ => match crate::engine::validate::parse_flag(raw) {
                Some(b) => Ok(Json::Bool(b)),
                None => Err("must be true or false.".into()),
            },
        },
    }
}

/// A sales range label: `LOW-HIGH` (whole dollars, low below high) or
/// `>N`; returned normalised (no spaces, no thousands separators).
fn sales_band(t: &str) -> Option<String> {
    let clean: String = t.chars().filter(|c| !matches!(c, ' ' | ',' | '$')).collect();
    let num = |s: &str| {
        (!s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<i64>().ok())
            .flatten()
    };
    if let Some(n) = clean.strip_prefix('>') {
        return num(n).map(|n| format!(">{n}"));
    }
    let (lo, hi) = clean.split_once('-')?;
    let (lo, hi) = (num(lo)?, num(hi)?);
    (lo < hi).then(|| format!("{lo}-{hi}"))
}

/// The least and the most a stored ticket answer may be, in cents: an
/// amount is both; a range `lo-hi` its bounds; `>n` above n, unbounded.
fn ticket_bounds(t: &str) -> Option<(i64, i64)> {
    let whole = |n: &str| n.parse::<i64>().ok().map(|n| n * 100);
    if let Some(n) = t.strip_prefix('>') {
        return whole(n).map(|n| (n + 1, i64::MAX));
    }
    if let Some((lo, hi)) = t.split_once('-') {
        return Some((whole(lo)?, whole(hi)?));
    }
    crate::money::parse_text(t, MAX_SALES_CENTS).ok().map(|c| (c, c))
}

/// All but the last four characters as `X` (values shorter than eight
/// are masked whole), as card numbers are shown.
pub fn mask(plain: &str) -> String {
    crate::engine::mask_text(plain)
}

/// An owner's share as answered: a whole number when it is one (25),
/// else its two decimals (33.33).
fn equity_json(hundredths: i64) -> Json {
    let (whole, frac) = (hundredths / 100, hundredths % 100);
    let text = match frac {
        0 => return Json::from(whole),
        f if f % 10 == 0 => format!("{whole}.{}", f / 10),
        f => format!("{whole}.{f:02}"),
    };
    text.parse::<serde_json::Number>()
        .map(Json::Number)
        .unwrap_or(Json::Null)
}

/// A stored share back in hundredths of a percent.
fn equity_hundredths(share: &Json) -> Option<i64> {
    match share {
        Json::Number(n) => crate::money::parse_text(&n.to_string(), 9_999).ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn today() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, 25).unwrap()
    }

    fn ok(kind: Kind, v: Json) -> Json {
        check(kind, &v, today()).unwrap_or_else(|e| panic!("{v}: {e}"))
    }

    fn bad(kind: Kind, v: Json) {
        assert!(check(kind, &v, today()).is_err(), "{v} accepted");
    }

    #[test]
    fn fields_are_checked_and_normalised() {
        assert_eq!(ok(Kind::Title, json!("Mr")), "Mr.");
        assert_eq!(ok(Kind::Title, json!("mr.")), "Mr.");
        assert_eq!(ok(Kind::Title, json!("miss")), "Miss");
        bad(Kind::Title, json!("Sir"));
        assert_eq!(ok(Kind::Ownership, json!("LLC_S_CORP")), "LLC- S Corp");
        assert_eq!(ok(Kind::Ownership, json!("LLC")), "LLC- Disregarded Entity");
        assert_eq!(ok(Kind::Equity, json!(25)), json!(25));
        assert_eq!(ok(Kind::Equity, json!("33.33")), json!(33.33));
        assert_eq!(ok(Kind::Equity, json!(99.99)), json!(99.99));
        for out_of_range in [json!(0), json!(100), json!(-5), json!(25.555), json!("x")] {
            bad(Kind::Equity, out_of_range);
        }
        assert_eq!(ok(Kind::Ownership, json!("C Corporation")), "C Corporation");
        bad(Kind::Ownership, json!("Cooperative"));
        assert_eq!(ok(Kind::Zip, json!("32606-1234")), "32606-1234");
        ok(Kind::Zip, json!("326061234"));
        bad(Kind::Zip, json!("3260"));
        bad(Kind::Zip, json!("32606 1234"));
        assert_eq!(ok(Kind::Ssn, json!("123-45-6789")), "123456789");
        bad(Kind::Ssn, json!("000456789"));
        bad(Kind::Ssn, json!("12345678"));
        assert_eq!(ok(Kind::Phone, json!("(352) 555-0100")), "3525550100");
        assert_eq!(ok(Kind::Phone, json!("13525550100")), "3525550100");
        assert_eq!(ok(Kind::Phone, json!("+1 352 555 0100")), "3525550100");
        bad(Kind::Phone, json!("23525550100"));
        bad(Kind::Phone, json!("+44 20 7946 0000"));
        ok(Kind::BirthDate, json!("1980-02-29"));
        bad(Kind::BirthDate, json!("1981-02-29"));
        bad(Kind::BirthDate, json!("2020-01-01"));
        bad(Kind::BirthDate, json!("2027-01-01"));
        ok(Kind::BirthDate, json!("2008-11-25"));
        bad(Kind::BirthDate, json!("2008-11-26"));
        ok(Kind::Ein, json!("12-3456789"));
        bad(Kind::Ein, json!("123456789"));
        ok(Kind::Url, json!("https://example.com/shop"));
        bad(Kind::Url, json!("example.com"));
        bad(Kind::Url, json!("ftp://example.com"));
        ok(Kind::Routing, json!("021000021"));
        bad(Kind::Routing, json!("021000022"));
        bad(Kind::Account, json!("123456789012345678"));
        bad(Kind::Equity, json!(101));
        assert_eq!(ok(Kind::Equity, json!(25.5)), json!(25.5));
        assert_eq!(ok(Kind::Sales, json!(1234.5)), "1234.50");
        assert_eq!(ok(Kind::Sales, json!("999999999.99")), "999999999.99");
        bad(Kind::Sales, json!("1000000000.00"));
        bad(Kind::Sales, json!(1.234));
        assert_eq!(ok(Kind::Sales, json!("0 - 5,000")), "0-5000");
        assert_eq!(ok(Kind::Sales, json!(">500000")), ">500000");
        assert_eq!(ticket_bounds("0-500"), Some((0, 50_000)));
        assert_eq!(ticket_bounds(">500000"), Some((50_000_001, i64::MAX)));
        assert_eq!(ticket_bounds("600.00"), Some((60_000, 60_000)));
        bad(Kind::Sales, json!("5000-100"));
        assert_eq!(ok(Kind::SecCodes, json!("web, ccd")), "WEB,CCD");
        bad(Kind::SecCodes, json!("XYZ"));
        assert_eq!(ok(Kind::State, json!("pr")), "PR");
        bad(Kind::State, json!("XX"));
        ok(Kind::Email, json!("a@example.com"));
        bad(Kind::Email, json!("a@b"));
        assert_eq!(ok(Kind::Flag, json!(true)), json!(true));
        bad(Kind::Flag, json!("maybe"));
    }

    #[test]
    fn groups_rules_and_cross_checks() {
        let rules = Rules {
            allowable: vec![],
            defaults: [("salesInformation.amexMarketingOptOut".to_string(), json!(false))].into(),
            fixed: [("customerConsent.secCodes".to_string(), json!("WEB"))].into(),
            required: vec!["bankInformation.bankName".into()],
        };
        let input = json!({
            "organizationInformation": { "employerIdentificationNumber": "12-3456789" },
            "ownerEquity": { "owner1": 60, "owner2": 50 },
            "bankInformation": { "accountNumber": "123456", "accountNumberReEnter": "123457", "bankName": "" },
            "customerConsent": { "secCodes": "PPD" },
            "nope": {},
        });
        let errors = parse(input.as_object().unwrap(), &rules, today()).unwrap_err();
        let keys: Vec<&str> = errors.0.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "bankInformation.accountNumberReEnter",
                "customerConsent.secCodes",
                "nope",
                "ownerEquity"
            ]
        );
        let input = json!({ "organizationInformation": { "employerIdentificationNumber": "12-3456789" } });
        let answers = parse(input.as_object().unwrap(), &rules, today()).unwrap();
        assert_eq!(
            answers["organizationInformation"]["employeeIdentificationNumber"],
            "12-3456789"
        );
        assert_eq!(answers["customerConsent"]["secCodes"], "WEB");
        assert_eq!(answers["salesInformation"]["amexMarketingOptOut"], false);
        assert_eq!(
            missing(&answers, &rules).0.keys().collect::<Vec<_>>(),
            ["bankInformation.bankName"]
        );
        let only_bank = Rules {
            allowable: vec!["bankInformation".into()],
            ..Rules::default()
        };
        let many: Map<String, Json> = (0..100).map(|i| (format!("g{i}"), json!({}))).collect();
        let errors = parse(&many, &Rules::default(), today()).unwrap_err();
        assert_eq!(errors.0.len(), 21);
        assert!(errors.has("_"));
        let input = json!({ "ownerEquity": { "owner1": 100 } });
        assert!(parse(input.as_object().unwrap(), &only_bank, today())
            .unwrap_err()
            .has("ownerEquity.owner1"));
        assert_eq!(mask("123456789"), "XXXXX6789");
    }
}
