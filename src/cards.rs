//! Checks on payment account data: card numbers, expiry dates, US routing
//! numbers and SEC codes, with the messages vaults and transactions share.
//! (Card number brands live in `bins`.)

use chrono::{Datelike, TimeZone, Utc};

/// `MMYY` -> (year, month), if well formed.
pub fn parse_exp_date(exp: &str) -> Option<(i32, u32)> {
    if exp.len() != 4 || !exp.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let month: u32 = exp[..2].parse().ok()?;
    let year: i32 = 2000 + exp[2..].parse::<i32>().ok()?;
    (1..=12).contains(&month).then_some((year, month))
}

/// Months from the month of `now` to the expiry month: 0 = expires this
/// month, negative = expired.
pub fn months_until(exp: &str, now: i64) -> Option<i64> {
    let (year, month) = parse_exp_date(exp)?;
    let today = Utc.timestamp_opt(now, 0).single()?;
    Some((year as i64 * 12 + month as i64) - (today.year() as i64 * 12 + today.month() as i64))
}

/// A card number's `account_type` (visa, mc, ...), or why it is refused:
/// 13-19 digits, the Luhn check, a supported brand of a length it issues.
pub fn check_pan(pan: &str) -> Result<&'static str, String> {
    if !(13..=19).contains(&pan.len()) || !pan.bytes().all(|b| b.is_ascii_digit()) {
        return Err("Account Number must be 13 to 19 digits for cc.".into());
    }
    if !luhn_ok(pan) {
        return Err("Account Number is not a valid card number (check digit).".into());
    }
    match crate::bins::brand_of(pan) {
        Some(b) if b.accepts_length(pan.len()) => Ok(b.account_type()),
        Some(b) => Err(format!(
            "Account Number has the wrong length for this {} card.",
            b.name()
        )),
        None => {
            Err("Account Number is not of a supported card brand (visa, mc, disc, amex, jcb, diners).".into())
        }
    }
}

/// `MMYY`, not before the month of `now`.
pub fn check_exp(exp: &str, now: i64) -> Result<(), String> {
    match (parse_exp_date(exp), months_until(exp, now)) {
        (None, _) => Err("Exp Date must be MMYY.".into()),
        (Some(_), Some(m)) if m < 0 => Err("Exp Date is in the past.".into()),
        _ => Ok(()),
    }
}

/// The SEC codes of the reference's ACH processor profiles.
pub const ACH_SEC_CODES: &[&str] = &["CCD", "PPD", "TEL", "WEB", "POP", "C21"];

/// The SEC codes whose debits may be payroll checks (`ach_identifier` P):
/// the person cashing a business or payroll check is not its owner.
pub const PAYROLL_SEC_CODES: &[&str] = &["POP", "C21"];
/// The SEC codes whose "Manager Needed" (1663) results can be overridden.
pub const OVERRIDE_SEC_CODES: &[&str] = &["TEL", "POP", "C21"];
/// The SEC codes of checks read at the point of sale (a MICR line in
/// `track_data`), whose debits can be corrected by an ACH update.
pub const CHECK_SEC_CODES: &[&str] = &["POP", "C21"];

pub fn check_sec_code(code: &str) -> Result<(), String> {
    if ACH_SEC_CODES.contains(&code) {
        Ok(())
    } else {
        Err(format!(
            "Ach Sec Code must be one of {}.",
            ACH_SEC_CODES.join(", ")
        ))
    }
}

/// The Luhn (mod 10) check. False for anything but 2 or more ASCII digits.
pub fn luhn_ok(pan: &str) -> bool {
    if pan.len() < 2 || !pan.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let sum: u32 = pan
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, b)| {
            let d = u32::from(b - b'0');
            if i % 2 == 1 {
                let d = d * 2;
                if d > 9 {
                    d - 9
                } else {
                    d
                }
            } else {
                d
            }
        })
        .sum();
    sum % 10 == 0
}

/// ABA routing number checksum: 3·(d1+d4+d7) + 7·(d2+d5+d8) + (d3+d6+d9) ≡ 0 (mod 10).
pub fn aba_ok(routing: &str) -> bool {
    let digits: Vec<u32> = routing.chars().filter_map(|c| c.to_digit(10)).collect();
    if digits.len() != 9 || routing.len() != 9 {
        return false;
    }
    let sum = 3 * (digits[0] + digits[3] + digits[6])
        + 7 * (digits[1] + digits[4] + digits[7])
        + (digits[2] + digits[5] + digits[8]);
    sum % 10 == 0 && digits.iter().any(|d| *d != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn card_numbers_dates_and_sec_codes() {
        assert_eq!(check_pan("4111111111111111"), Ok("visa"));
        assert!(check_pan("4111111111111112").is_err());
        assert!(check_pan("41111").is_err());
        assert!(check_exp("1399", 0).is_err());
        assert!(check_exp("0100", 1_700_000_000).is_err());
        assert!(check_exp("1299", 1_700_000_000).is_ok());
        assert!(check_sec_code("CCD").is_ok());
        assert!(check_sec_code("XYZ").is_err());
    }

    #[test]
    fn luhn() {
        assert!(luhn_ok("79927398713"));
        assert!(!luhn_ok("79927398710"));
        assert!(!luhn_ok("4111111111111112"));
        assert!(!luhn_ok("4111111111111121"), "transposed digits");
        assert!(luhn_ok("00"));
        assert!(!luhn_ok("0"));
        assert!(!luhn_ok(""));
        assert!(!luhn_ok("4111 1111 1111 1111"));
        assert!(!luhn_ok("411111111111111a"));
        // Every single-digit change of a valid number is caught.
        let pan = "4111111111111111";
        for i in 0..pan.len() {
            for d in b'0'..=b'9' {
                let mut bytes = pan.as_bytes().to_vec();
                if bytes[i] == d {
                    continue;
                }
                bytes[i] = d;
                assert!(!luhn_ok(std::str::from_utf8(&bytes).unwrap()));
            }
        }
    }

    #[test]
    fn routing_numbers() {
        for good in ["072000326", "021000021", "011000015", "122105155"] {
            assert!(aba_ok(good), "{good}");
        }
        for bad in ["072000327", "12345678", "0720003261", "07200032a", "000000000"] {
            assert!(!aba_ok(bad), "{bad}");
        }
    }

    #[test]
    fn expiry_dates() {
        assert_eq!(parse_exp_date("1225"), Some((2025, 12)));
        assert_eq!(parse_exp_date("1325"), None);
        assert_eq!(parse_exp_date("0025"), None);
        assert_eq!(parse_exp_date("12/25"), None);
        // 2026-11-21
        let now = 1_795_263_204;
        assert_eq!(months_until("1126", now), Some(0));
        assert_eq!(months_until("1226", now), Some(1));
        assert_eq!(months_until("1026", now), Some(-1));
        assert_eq!(months_until("0128", now), Some(14));
    }
}
