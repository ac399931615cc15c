//! Where a new transaction's money comes from: a vault, a card number, a
//! swiped track, a bank account, or an earlier transaction used as a
//! token. Exactly one source per request.

use super::actions::Parsed;
use crate::cards::{aba_ok, check_exp, check_pan};
use crate::db::Conn;
use crate::engine::record::Record;
use crate::engine::validate::blank;
use crate::engine::{query, Cx};
use crate::error::{ApiResult, FieldErrors};
use crate::processor::{AchAccountType, AchData, CardData, CheckImages, EntryMode};
use crate::resources::{ACCOUNT_VAULT, TRANSACTION};

/// A resolved card.
#[derive(Clone, Debug)]
pub struct Card {
    pub data: CardData,
    pub account_type: &'static str,
}

#[derive(Clone, Debug)]
pub enum Source {
    Card(Card),
    Bank(AchData),
}

/// What the source adds to the transaction record.
pub struct Resolved {
    pub source: Source,
    pub vault: Option<Record>,
    pub previous: Option<Record>,
}

/// Reads track 1 (`%B<PAN>^NAME^YYMM...?`) or track 2
/// (`;<PAN>=YYMM...?`): number, MMYY and, from track 1, the name.
pub fn parse_track(track: &str) -> Option<(String, String, Option<String>)> {
    if let Some(rest) = track.strip_prefix("%B") {
        let mut parts = rest.splitn(3, '^');
        let pan = parts.next()?.trim().to_string();
        let name = parts.next()?.trim().to_string();
        let tail = parts.next()?;
        let yymm = tail.get(..4)?;
        let exp = format!("{}{}", &yymm[2..], &yymm[..2]);
        return Some((pan, exp, (!name.is_empty()).then_some(name)));
    }
    let rest = track.strip_prefix(';')?;
    let (pan, tail) = rest.split_once('=')?;
    let yymm = tail.get(..4)?;
    Some((pan.to_string(), format!("{}{}", &yymm[2..], &yymm[..2]), None))
}

/// A check's MICR line as POP and C21 send it in `track_data`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Micr {
    pub routing: String,
    pub account_number: String,
    pub check_number: Option<String>,
}

/// Reads a MICR line: the routing number between transit symbols `T`,
/// then the account number ending at the on-us symbol `O`, then the check
/// number (`T051904524T 741025349520O 8520748520963`). A check number
/// printed before the first `T` (business checks) is read too. Spaces
/// are ignored.
pub fn parse_micr(line: &str) -> Option<Micr> {
    let digits = |s: &str| -> Option<String> {
        let d: String = s.chars().filter(|c| *c != ' ').collect();
        d.bytes().all(|b| b.is_ascii_digit()).then_some(d)
    };
    let (leading, rest) = line.split_once('T')?;
    let (routing, rest) = rest.split_once('T')?;
    let (account, trailing) = rest.split_once('O')?;
    let routing = digits(routing).filter(|r| r.len() == 9)?;
    let account_number = digits(account).filter(|a| (4..=17).contains(&a.len()))?;
    let check = match (digits(trailing)?, digits(leading)?) {
        (t, _) if !t.is_empty() => Some(t),
        (_, l) if !l.is_empty() => Some(l),
        _ => None,
    };
    if check.as_ref().is_some_and(|c| c.len() > 15) {
        return None;
    }
    Some(Micr {
        routing,
        account_number,
        check_number: check,
    })
}

fn open(cx: &Cx, sealed: Option<&str>) -> Option<String> {
    sealed.and_then(|s| cx.keyring.decrypt(s).ok())
}

fn text(record: &Record, name: &str) -> Option<String> {
    record.text(name).map(str::to_string)
}

/// Finds the transaction named by `previous_transaction_id` or
/// `previous_transaction_api_id` (at `location_id`).
pub fn previous(
    cx: &Cx,
    conn: &mut dyn Conn,
    parsed: &Parsed,
    location_id: &str,
    errors: &mut FieldErrors,
) -> ApiResult<Option<Record>> {
    if let Some(id) = parsed.input.record.text("previous_transaction_id") {
        let found = query::find(conn, &TRANSACTION, &cx.scope, id)?;
        match &found {
            None => errors.add(
                "previous_transaction_id",
                "previous_transaction_id provided is not valid",
            ),
            // The original's location keeps its refunds and its batch.
            Some(prev) if prev.text("location_id") != Some(location_id) => {
                errors.add(
                    "previous_transaction_id",
                    "The previous transaction belongs to another location.",
                );
                return Ok(None);
            }
            Some(_) => {}
        }
        return Ok(found);
    }
    if let Some(api_id) = parsed.text("previous_transaction_api_id") {
        let found = query::find_by_api_id(conn, &TRANSACTION, &cx.scope, location_id, &api_id)?;
        if found.is_none() {
            errors.add(
                "previous_transaction_api_id",
                "previous_transaction_api_id provided is not valid",
            );
        }
        return Ok(found);
    }
    Ok(None)
}

/// Resolves the one account source of a new transaction.
pub fn resolve(
    cx: &Cx,
    conn: &mut dyn Conn,
    parsed: &Parsed,
    method: &str,
    location_id: &str,
    errors: &mut FieldErrors,
) -> ApiResult<Option<Resolved>> {
    let r = &parsed.input.record;
    let given: Vec<&str> = [
        ("account_vault_id", r.text("account_vault_id").is_some()),
        (
            "account_vault_api_id",
            parsed.text("account_vault_api_id").is_some(),
        ),
        ("account_number", r.text("account_number").is_some()),
        // A bank account sent with a check's MICR line is the account;
        // the line stays check data (the reference's payroll sample sends
        // both).
        (
            "track_data",
            parsed.text("track_data").is_some() && !(method == "ach" && r.text("account_number").is_some()),
        ),
        (
            "previous_transaction_id",
            r.text("previous_transaction_id").is_some(),
        ),
        (
            "previous_transaction_api_id",
            parsed.text("previous_transaction_api_id").is_some(),
        ),
    ]
    .into_iter()
    .filter(|(_, present)| *present)
    .map(|(n, _)| n)
    .collect();
    if given.len() > 1 {
        errors.add(
            given[1],
            format!("Send one account source only (sent: {}).", given.join(", ")),
        );
        return Ok(None);
    }
    let Some(&kind) = given.first() else {
        errors.add("account_number", blank("account_number"));
        return Ok(None);
    };
    let holder = text(r, "account_holder_name");
    match kind {
        "account_vault_id" | "account_vault_api_id" => {
            let vault = match r.text("account_vault_id") {
                Some(id) => query::find(conn, &ACCOUNT_VAULT, &cx.scope, id)?,
                None => {
                    let api_id = parsed.text("account_vault_api_id").unwrap_or_default();
                    query::find_by_api_id(conn, &ACCOUNT_VAULT, &cx.scope, location_id, &api_id)?
                }
            };
            let Some(vault) = vault else {
                errors.add(kind, format!("{kind} provided is not valid"));
                return Ok(None);
            };
            if vault.text("location_id") != Some(location_id) {
                errors.add(kind, "The account vault belongs to another location.");
                return Ok(None);
            }
            if vault.text("payment_method") != Some(method) {
                errors.add(kind, format!("The account vault is not a {method} account."));
                return Ok(None);
            }
            if vault.int("active") == Some(0) {
                errors.add(kind, "The account vault is not active.");
                return Ok(None);
            }
            let source = from_stored(cx, &vault, method, holder, Some(r), "billing_address");
            Ok(source.map(|source| Resolved {
                source,
                vault: Some(vault),
                previous: None,
            }))
        }
        "previous_transaction_id" | "previous_transaction_api_id" => {
            let Some(prev) = previous(cx, conn, parsed, location_id, errors)? else {
                return Ok(None);
            };
            if prev.text("payment_method") != Some(method) {
                errors.add(
                    kind,
                    format!("The previous transaction is not a {method} transaction."),
                );
                return Ok(None);
            }
            let Some(source) = from_stored(cx, &prev, method, holder, Some(r), "billing_street") else {
                errors.add(kind, "The previous transaction holds no reusable account data.");
                return Ok(None);
            };
            Ok(Some(Resolved {
                source,
                vault: None,
                previous: Some(prev),
            }))
        }
        "track_data" if method == "ach" => {
            let Some(micr) = parse_micr(&parsed.text("track_data").unwrap_or_default()) else {
                errors.add(
                    "track_data",
                    "Track Data is not a readable MICR line (T<routing>T <account>O <check number>).",
                );
                return Ok(None);
            };
            let bank = bank_fields(r, parsed, holder, Some(micr), errors);
            Ok(bank.map(|b| Resolved {
                source: Source::Bank(b),
                vault: None,
                previous: None,
            }))
        }
        "track_data" => {
            let track = parsed.text("track_data").unwrap_or_default();
            let Some((pan, exp, name)) = parse_track(&track) else {
                errors.add(
                    "track_data",
                    "Track Data is not readable track 1 or track 2 data.",
                );
                return Ok(None);
            };
            let account_type = match check_pan(&pan) {
                Ok(t) => t,
                Err(_) => {
                    errors.add("track_data", "Track Data holds no valid card number.");
                    return Ok(None);
                }
            };
            Ok(Some(Resolved {
                source: Source::Card(Card {
                    data: CardData {
                        pan,
                        exp_date: exp,
                        cvv: parsed.text("cvv"),
                        billing_street: text(r, "billing_street"),
                        billing_zip: text(r, "billing_zip"),
                        account_holder_name: holder.or(name),
                        entry_mode: Some(EntryMode::Swiped),
                    },
                    account_type,
                }),
                vault: None,
                previous: None,
            }))
        }
        _ => {
            let number = r.text("account_number").unwrap_or_default().to_string();
            if method == "cc" {
                let account_type = match check_pan(&number) {
                    Ok(t) => Some(t),
                    Err(msg) => {
                        errors.add("account_number", msg);
                        None
                    }
                };
                match r.text("exp_date") {
                    None => errors.add("exp_date", blank("exp_date")),
                    Some(exp) => {
                        if let Err(msg) = check_exp(exp, cx.now) {
                            errors.add("exp_date", msg);
                        }
                    }
                }
                let Some(account_type) = account_type else {
                    return Ok(None);
                };
                Ok(Some(Resolved {
                    source: Source::Card(Card {
                        data: CardData {
                            pan: number,
                            exp_date: text(r, "exp_date").unwrap_or_default(),
                            cvv: parsed.text("cvv"),
                            billing_street: text(r, "billing_street"),
                            billing_zip: text(r, "billing_zip"),
                            account_holder_name: holder,
                            entry_mode: Some(EntryMode::Keyed),
                        },
                        account_type,
                    }),
                    vault: None,
                    previous: None,
                }))
            } else {
                if !(4..=17).contains(&number.len()) {
                    errors.add("account_number", "Account Number must be 4 to 17 digits for ach.");
                }
                let micr = Micr {
                    routing: String::new(),
                    account_number: number,
                    check_number: None,
                };
                let bank = bank_fields(r, parsed, holder, Some(micr), errors);
                Ok(bank.map(|b| Resolved {
                    source: Source::Bank(b),
                    vault: None,
                    previous: None,
                }))
            }
        }
    }
}

/// The ACH fields of a request with a bank number in it, or a check's
/// MICR line: what the request sends wins over what the line says.
fn bank_fields(
    r: &Record,
    parsed: &Parsed,
    holder: Option<String>,
    micr: Option<Micr>,
    errors: &mut FieldErrors,
) -> Option<AchData> {
    let micr = micr?;
    let routing = text(r, "routing").or((!micr.routing.is_empty()).then_some(micr.routing));
    match &routing {
        None => errors.add("routing", blank("routing")),
        Some(x) if !aba_ok(x) => errors.add("routing", "Routing is not a valid ABA routing number."),
        _ => {}
    }
    let account_type = match r.text("account_type") {
        None => {
            errors.add("account_type", blank("account_type"));
            None
        }
        Some(t) if AchAccountType::parse(t).is_some() => AchAccountType::parse(t),
        Some(_) => {
            errors.add("account_type", "Account Type must be checking or savings.");
            None
        }
    };
    let sec_code = text(r, "ach_sec_code").unwrap_or_default();
    // A check at the point of sale names no holder unless the profile
    // verifies identity (reference 3.4); the profile check says so then.
    let check_at_till = crate::cards::CHECK_SEC_CODES.contains(&sec_code.as_str());
    if holder.is_none() && !check_at_till {
        errors.add("account_holder_name", blank("account_holder_name"));
    }
    let check_images = match (parsed.text("image_front"), parsed.text("image_back")) {
        (Some(front), Some(back)) => Some(CheckImages { front, back }),
        _ => None,
    };
    Some(AchData {
        account_holder_name: if check_at_till {
            holder.unwrap_or_default()
        } else {
            holder?
        },
        account_number: micr.account_number,
        routing: routing?,
        account_type: account_type?,
        sec_code,
        check_number: text(r, "check_number").or(micr.check_number),
        effective_date: text(r, "effective_date"),
        check_images,
    })
}

/// Account data kept (sealed) on a vault or an earlier transaction, with
/// what the request (if any) overrides. `street_column` is where that
/// record keeps the billing street.
fn from_stored(
    cx: &Cx,
    stored: &Record,
    method: &str,
    holder: Option<String>,
    request: Option<&Record>,
    street_column: &str,
) -> Option<Source> {
    let number = open(cx, stored.text("account_number"))?;
    let sent = |name: &str| request.and_then(|r| text(r, name));
    let holder = holder.or_else(|| text(stored, "account_holder_name"));
    if method == "cc" {
        return Some(Source::Card(Card {
            account_type: check_pan(&number).unwrap_or("visa"),
            data: CardData {
                pan: number,
                exp_date: sent("exp_date")
                    .or_else(|| text(stored, "exp_date"))
                    .unwrap_or_default(),
                cvv: None,
                billing_street: sent("billing_street").or_else(|| text(stored, street_column)),
                billing_zip: sent("billing_zip").or_else(|| text(stored, "billing_zip")),
                account_holder_name: holder,
                entry_mode: Some(EntryMode::Keyed),
            },
        }));
    }
    Some(Source::Bank(AchData {
        account_holder_name: holder.unwrap_or_default(),
        account_number: number,
        routing: text(stored, "routing").unwrap_or_default(),
        account_type: stored
            .text("account_type")
            .and_then(AchAccountType::parse)
            .unwrap_or(AchAccountType::Checking),
        sec_code: sent("ach_sec_code")
            .or_else(|| text(stored, "ach_sec_code"))
            .unwrap_or_default(),
        check_number: sent("check_number"),
        effective_date: sent("effective_date"),
        check_images: None,
    }))
}

/// The account of an earlier transaction (a vault made from
/// `previous_transaction_id`), if it kept one.
pub fn account_of(cx: &Cx, tx: &Record) -> Option<Source> {
    let method = tx.text("payment_method").unwrap_or("cc");
    from_stored(cx, tx, method, None, None, "billing_street")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_read_like_the_reference_test_swipes() {
        let t1 =
            "%B4111111111111111^TEST CARD/VI^21121015432112345678?;4111111111111111=21121015432112345678?";
        assert_eq!(
            parse_track(t1),
            Some((
                "4111111111111111".into(),
                "1221".into(),
                Some("TEST CARD/VI".into())
            ))
        );
        let t2 = ";5454545454545454=21121015432112345678?";
        assert_eq!(
            parse_track(t2),
            Some(("5454545454545454".into(), "1221".into(), None))
        );
        assert_eq!(parse_track("garbage"), None);
        assert_eq!(parse_track("%B4111^X"), None);
    }

    #[test]
    fn micr_lines_read_like_the_reference_samples() {
        let micr = |r: &str, a: &str, c: Option<&str>| {
            Some(Micr {
                routing: r.into(),
                account_number: a.into(),
                check_number: c.map(str::to_string),
            })
        };
        assert_eq!(
            parse_micr("T051904524T 741025349520O 8520748520963"),
            micr("051904524", "741025349520", Some("8520748520963"))
        );
        assert_eq!(
            parse_micr("T211287447T 234565432678O 4567890234567"),
            micr("211287447", "234565432678", Some("4567890234567"))
        );
        assert_eq!(
            parse_micr("001234 T072000326T 123456789O"),
            micr("072000326", "123456789", Some("001234"))
        );
        assert_eq!(
            parse_micr("T072000326T 123456789O"),
            micr("072000326", "123456789", None)
        );
        for bad in [
            "",
            "garbage",
            "T07200032T 123456789O 1",
            "T072000326T 123O 1",
            "T072000326T 12345678901234567890O 1",
            "T072000326T 12x456789O 1",
            "T072000326T 123456789 1",
            "T072000326T 123456789O 1234567890123456",
        ] {
            assert_eq!(parse_micr(bad), None, "{bad}");
        }
    }
}
