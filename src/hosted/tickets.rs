//! Tickets: card or bank data a payer typed on a hosted page, held for a
//! short while so the merchant can store it in a vault without ever
//! seeing it (`POST /v2/accountvaults` with `ticket`). Sealed with the
//! keyring like every stored account number; single use; gone after
//! [`LIFETIME_S`].

use crate::cards::{aba_ok, check_exp, check_pan};
use crate::crypto::Keyring;
use crate::db::{Conn, Sql};
use crate::error::{ApiError, ApiResult, FieldErrors};
use serde_json::{json, Map, Value as Json};

/// How long a ticket can be redeemed.
pub const LIFETIME_S: i64 = 15 * 60;

/// The account fields a ticket holds.
const HELD: &[&str] = &[
    "account_number",
    "exp_date",
    "routing",
    "account_type",
    "account_holder_name",
    "billing_zip",
    "billing_address",
];

fn text<'a>(account: &'a Map<String, Json>, name: &str) -> Option<&'a str> {
    account
        .get(name)
        .and_then(Json::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// Checks what a payer typed, field by field.
pub fn check(method: &str, account: &Map<String, Json>, now: i64) -> Result<(), FieldErrors> {
    let mut errors = FieldErrors::new();
    for name in account.keys() {
        if !HELD.contains(&name.as_str()) {
            errors.add(name.clone(), format!("A ticket does not hold {name}."));
        }
    }
    match method {
        "cc" => {
            match text(account, "account_number") {
                None => errors.add("account_number", "Account Number cannot be blank."),
                Some(pan) => {
                    if let Err(m) = check_pan(pan) {
                        errors.add("account_number", m);
                    }
                }
            }
            match text(account, "exp_date") {
                None => errors.add("exp_date", "Exp Date cannot be blank."),
                Some(exp) => {
                    if let Err(m) = check_exp(exp, now) {
                        errors.add("exp_date", m);
                    }
                }
            }
        }
        "ach" => {
            if !text(account, "routing").is_some_and(aba_ok) {
                errors.add("routing", "Routing must be a valid 9-digit ABA routing number.");
            }
            match text(account, "account_number") {
                Some(n) if (4..=17).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_digit()) => {}
                _ => errors.add("account_number", "Account Number must be 4 to 17 digits."),
            }
            if !matches!(text(account, "account_type"), Some("checking" | "savings")) {
                errors.add("account_type", "Account Type must be checking or savings.");
            }
        }
        _ => errors.add("payment_method", "Payment Method must be cc or ach."),
    }
    for (name, max) in [
        ("account_holder_name", 32),
        ("billing_zip", 10),
        ("billing_address", 64),
    ] {
        if text(account, name).is_some_and(|v| v.chars().count() > max) {
            errors.add(name, format!("{name} must be at most {max} characters."));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Stores a checked account as a ticket; answers the ticket as the API
/// shows it (the number's last four digits only).
pub fn issue(
    conn: &mut dyn Conn,
    keyring: &Keyring,
    location_id: &str,
    user_id: &str,
    method: &str,
    account: &Map<String, Json>,
    now: i64,
) -> ApiResult<Json> {
    check(method, account, now).map_err(ApiError::Validation)?;
    conn.execute(&Sql::with(
        "DELETE FROM tickets WHERE expires_ts < ?",
        vec![now.into()],
    ))?;
    let number = text(account, "account_number").unwrap_or_default().to_string();
    let first_six = (method == "cc").then(|| number[..6].to_string());
    let last_four = number[number.len() - 4..].to_string();
    let id = crate::crypto::random_secret(32);
    let sealed = keyring.encrypt(&Json::Object(account.clone()).to_string());
    conn.execute(&Sql::with(
        "INSERT INTO tickets (id, location_id, user_id, payment_method, account_sealed, first_six, last_four, \
         created_ts, expires_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        vec![
            id.clone().into(),
            location_id.into(),
            user_id.into(),
            method.into(),
            sealed.into(),
            first_six.clone().into(),
            last_four.clone().into(),
            now.into(),
            (now + LIFETIME_S).into(),
        ],
    ))?;
    Ok(json!({
        "id": id,
        "location_id": location_id,
        "payment_method": method,
        "first_six": first_six,
        "last_four": last_four,
        "created_ts": now,
        "expires_ts": now + LIFETIME_S,
    }))
}

/// Deletes the tickets made through user `user_id`'s forms (the user is
/// being deleted): they are single use and short-lived, and a ticket
/// signed by a user who is gone fills no vault.
pub fn forget_user(conn: &mut dyn Conn, user_id: &str) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "DELETE FROM tickets WHERE user_id = ?",
        vec![user_id.into()],
    ))?;
    Ok(())
}

/// Deletes the tickets of `location_id` (the location is being deleted).
pub fn forget_location(conn: &mut dyn Conn, location_id: &str) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "DELETE FROM tickets WHERE location_id = ?",
        vec![location_id.into()],
    ))?;
    Ok(())
}

/// Redeems a ticket of `location_id` (once): its payment method and the
/// account it holds. Any other ticket, a used one or an expired one is
/// "not valid", without saying which.
pub fn redeem(
    conn: &mut dyn Conn,
    keyring: &Keyring,
    ticket: &str,
    location_id: &str,
    now: i64,
) -> ApiResult<(String, Map<String, Json>)> {
    let invalid = || ApiError::field("ticket", "ticket provided is not valid");
    if ticket.len() > 36 || !ticket.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(invalid());
    }
    let taken = conn.execute(&Sql::with(
        "UPDATE tickets SET used_ts = ? WHERE id = ? AND location_id = ? AND used_ts IS NULL AND expires_ts >= ?",
        vec![now.into(), ticket.into(), location_id.into(), now.into()],
    ))?;
    if taken != 1 {
        return Err(invalid());
    }
    let row = conn
        .query_one(&Sql::with(
            "SELECT payment_method, account_sealed FROM tickets WHERE id = ?",
            vec![ticket.into()],
        ))?
        .ok_or_else(invalid)?;
    let method = row[0].as_str().unwrap_or_default().to_string();
    let account = row[1]
        .as_str()
        .and_then(|s| keyring.decrypt(s).ok())
        .and_then(|plain| serde_json::from_str::<Map<String, Json>>(&plain).ok())
        .ok_or_else(invalid)?;
    Ok((method, account))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_holds_a_checked_account_and_nothing_else() {
        let now = 1_700_000_000;
        let card = |v: Json| v.as_object().cloned().unwrap();
        assert!(check(
            "cc",
            &card(json!({"account_number": "4111111111111111", "exp_date": "1239"})),
            now
        )
        .is_ok());
        let bad = check(
            "cc",
            &card(json!({"account_number": "4111111111111112", "exp_date": "0120", "cvv": "123"})),
            now,
        )
        .unwrap_err();
        assert!(bad.has("account_number") && bad.has("exp_date") && bad.has("cvv"));
        let ach = check(
            "ach",
            &card(json!({"routing": "072000326", "account_number": "123", "account_type": "x"})),
            now,
        )
        .unwrap_err();
        assert!(ach.has("account_number") && ach.has("account_type") && !ach.has("routing"));
    }
}
