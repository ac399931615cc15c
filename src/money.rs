//! Money: integer minor units (cents) inside, two-decimal strings outside.
//! Amounts arrive as JSON numbers or decimal strings and are parsed from
//! their text, never through a float.

use serde_json::Value as Json;
use std::fmt;

/// An amount of money in minor units (cents). Where money moves (the
/// payment operations, the processor boundary) amounts are `Money`, so
/// a count, an id or a float cannot stand in for one; records keep the
/// plain integer their column holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Money(i64);

impl Money {
    pub const ZERO: Money = Money(0);

    pub const fn from_cents(cents: i64) -> Money {
        Money(cents)
    }

    pub const fn cents(self) -> i64 {
        self.0
    }

    pub fn is_positive(self) -> bool {
        self.0 > 0
    }

    /// `"12.34"`, as the API answers amounts.
    pub fn to_text(self) -> String {
        format(self.0)
    }

    /// Parses an amount as the API accepts it (see [`parse`]).
    pub fn parse(raw: &Json, max: Money) -> Result<Money, &'static str> {
        parse(raw, max.0).map(Money)
    }

    pub fn checked_add(self, other: Money) -> Option<Money> {
        self.0.checked_add(other.0).map(Money)
    }

    pub fn checked_sub(self, other: Money) -> Option<Money> {
        self.0.checked_sub(other.0).map(Money)
    }
}

impl fmt::Display for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format(self.0))
    }
}

impl std::ops::Add for Money {
    type Output = Money;
    fn add(self, other: Money) -> Money {
        Money(self.0.saturating_add(other.0))
    }
}

impl std::ops::Sub for Money {
    type Output = Money;
    fn sub(self, other: Money) -> Money {
        Money(self.0.saturating_sub(other.0))
    }
}

impl std::ops::Neg for Money {
    type Output = Money;
    fn neg(self) -> Money {
        Money(-self.0)
    }
}

/// Parses an amount into cents. The one grammar of money, in strings and
/// JSON numbers alike (a number is read from the text it was sent in):
/// digits, then optionally a point and one or two digits (`12`, `12.5`,
/// `"12.50"`). No sign, spaces, exponent, bare point or third decimal.
/// `max_cents` bounds the value.
pub fn parse(raw: &Json, max_cents: i64) -> Result<i64, &'static str> {
    let text = match raw {
        // With serde_json's arbitrary_precision a number's text is the
        // one in the request: 1e2 stays "1e2" and is refused like "1e2".
        Json::Number(n) => n.to_string(),
        Json::String(s) => s.clone(),
        _ => return Err("must be a number or a decimal string"),
    };
    parse_text(&text, max_cents)
}

pub fn parse_text(text: &str, max_cents: i64) -> Result<i64, &'static str> {
    const GRAMMAR: &str = "must be digits with at most 2 decimals, such as 10 or 10.00";
    let (whole, frac) = match text.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (text, None),
    };
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return Err(GRAMMAR);
    }
    let frac = frac.unwrap_or("00");
    if frac.is_empty() || frac.len() > 2 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(GRAMMAR);
    }
    let whole = whole.trim_start_matches('0');
    if whole.len() > 15 {
        return Err("is too large");
    }
    let units: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| "is too large")?
    };
    let cents: i64 = format!("{frac:0<2}").parse().unwrap_or(0);
    let total = units
        .checked_mul(100)
        .and_then(|u| u.checked_add(cents))
        .ok_or("is too large")?;
    if total > max_cents {
        return Err("is too large");
    }
    Ok(total)
}

/// `1234` -> `"12.34"`; negative amounts keep their sign.
pub fn format(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let abs = cents.unsigned_abs();
    format!("{sign}{}.{:02}", abs / 100, abs % 100)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn amounts_parse_from_text_without_floats() {
        let max = 999_999_999;
        for (raw, cents) in [
            (json!(10), 1000),
            (json!(10.01), 1001),
            (json!("10.01"), 1001),
            (json!("0.1"), 10),
            (json!("007.5"), 750),
            (json!(0.29), 29),
            (json!(1.15), 115),
            (json!("90504.24"), 9_050_424),
            (json!("0"), 0),
        ] {
            assert_eq!(parse(&raw, max), Ok(cents), "{raw}");
        }
        for raw in [
            json!("10.001"),
            json!("-1"),
            json!("1e3"),
            json!("abc"),
            json!(""),
            json!("."),
            json!(true),
            json!(-5),
            json!("10000000.00"),
            json!("99999999999999999999"),
            json!(1e300),
            json!(" 10.00"),
            json!("10.00 "),
            json!("10."),
            json!(".5"),
            json!("+10.00"),
            json!("10.500"),
            json!("1,000.00"),
            serde_json::from_str::<Json>("1e2").unwrap(),
            serde_json::from_str::<Json>("1.5e1").unwrap(),
            serde_json::from_str::<Json>("10.500").unwrap(),
        ] {
            assert!(parse(&raw, max).is_err(), "{raw}");
        }
    }

    #[test]
    fn money_keeps_cents_and_prints_decimals() {
        let m = Money::parse(&json!("10.05"), Money::from_cents(999_999)).unwrap();
        assert_eq!(m.cents(), 1005);
        assert_eq!(m.to_string(), "10.05");
        assert_eq!((m - Money::from_cents(2005)).to_string(), "-10.00");
        assert_eq!(m + Money::from_cents(95), Money::from_cents(1100));
        assert_eq!(Money::from_cents(i64::MAX).checked_add(m), None);
        assert!(Money::parse(&json!("10.05"), Money::from_cents(1000)).is_err());
        assert!(!Money::ZERO.is_positive());
    }

    #[test]
    fn amounts_format_with_two_decimals() {
        assert_eq!(format(0), "0.00");
        assert_eq!(format(5), "0.05");
        assert_eq!(format(1234), "12.34");
        assert_eq!(format(-250), "-2.50");
    }
}
