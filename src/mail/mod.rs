//! Mail: messages written to an outbox in the same database transaction
//! as the change they tell of, then delivered by SMTP when
//! `FERROGATE_SMTP_URL` is set ([`smtp`]), with leases and retries like
//! postbacks. Without SMTP they stay in the outbox, where the sandbox's
//! development mailbox (`/dev/mail`) shows them.
//!
//! Producers: transaction receipts ([`receipts`]) and the notices sent
//! before recurring runs ([`notices`]); quick invoices add theirs. Bodies
//! come from templates (plain text and HTML, `templates/mail/`) and never
//! hold more of an account number than its last four digits.

pub mod notices;
pub mod receipts;
pub mod smtp;

use crate::db::{Conn, Sql, Value};
use crate::error::ApiResult;
use crate::ids::new_id;

/// A message to be sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub location_id: String,
    /// What it is (`receipt`, `recurring_notice`, ...).
    pub kind: &'static str,
    pub recipient: String,
    pub reply_to: Option<String>,
    /// The merchant's name, shown as the sender.
    pub from_name: String,
    pub subject: String,
    pub text: String,
    pub html: String,
    /// The record it is about.
    pub resource: &'static str,
    pub resource_id: String,
}

/// Writes `message` to the outbox (inside the caller's transaction).
/// `now_ms` is the location's time (its test clock included), which the
/// message shows as its `created_ts`; it is due at once in real time
/// (`due_ms` is wall time: the mailer compares it with the wall clock, and
/// moving a test clock moves the location's pending `due_ms` back).
pub fn enqueue(conn: &mut dyn Conn, now_ms: i64, message: &Message) -> ApiResult<String> {
    let (_, offset_s) = crate::billing::location_zone(conn, &message.location_id)?;
    let due_ms = now_ms.saturating_sub(offset_s.saturating_mul(1000));
    let id = new_id();
    conn.execute(&Sql::with(
        "INSERT INTO mail_outbox (id, location_id, kind, recipient, reply_to, from_name, subject, text_body, \
         html_body, resource, resource_id, status, attempts, due_ms, created_ts) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?)",
        vec![
            id.clone().into(),
            message.location_id.clone().into(),
            message.kind.into(),
            message.recipient.clone().into(),
            Value::from(message.reply_to.clone()),
            message.from_name.clone().into(),
            message.subject.clone().into(),
            message.text.clone().into(),
            message.html.clone().into(),
            message.resource.into(),
            message.resource_id.clone().into(),
            due_ms.into(),
            now_ms.div_euclid(1000).into(),
        ],
    ))?;
    Ok(id)
}

/// The merchant a location's mail comes from: its name and reply-to.
pub struct Sender {
    pub name: String,
    pub reply_to: Option<String>,
}

pub fn sender(conn: &mut dyn Conn, location_id: &str) -> ApiResult<Sender> {
    let row = conn.query_one(&Sql::with(
        "SELECT name, email_reply_to FROM locations WHERE id = ?",
        vec![location_id.into()],
    ))?;
    Ok(match row {
        Some(r) => Sender {
            name: r[0].as_str().unwrap_or("Ferrogate").to_string(),
            reply_to: r[1].as_str().filter(|s| !s.is_empty()).map(str::to_string),
        },
        None => Sender {
            name: "Ferrogate".into(),
            reply_to: None,
        },
    })
}

/// How an account shows in mail: its kind and last four digits only.
pub fn account_label(method: Option<&str>, account_type: Option<&str>, last_four: Option<&str>) -> String {
    let kind = match (method, account_type) {
        (Some("ach"), Some(t)) => format!("{t} account"),
        (Some("ach"), None) => "bank account".to_string(),
        (_, Some(t)) => card_brand(t).to_string(),
        (_, None) => "card".to_string(),
    };
    match last_four {
        Some(four) if four.len() == 4 => format!("{kind} ending in {four}"),
        _ => kind,
    }
}

fn card_brand(account_type: &str) -> &str {
    match account_type {
        "visa" => "Visa",
        "mc" => "Mastercard",
        "amex" => "American Express",
        "disc" => "Discover",
        "jcb" => "JCB",
        "diners" => "Diners Club",
        other => other,
    }
}

/// The default sender: `no-reply@` the host of the public URL (or
/// `localhost` when that host is an address, which mail cannot use).
pub fn default_sender(public_url: &str) -> String {
    let host = public_url
        .split("://")
        .nth(1)
        .unwrap_or(public_url)
        .split(['/', ':'])
        .next()
        .unwrap_or_default();
    let usable = host.contains('.') && !host.chars().all(|c| c.is_ascii_digit() || c == '.');
    format!("no-reply@{}", if usable { host } else { "localhost" })
}

/// A plausible address: something@something.tld, no spaces or angle
/// brackets (recipients come from stored, validated fields; this only
/// keeps a malformed one from reaching SMTP).
pub fn plausible_address(address: &str) -> bool {
    let Some((local, domain)) = address.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && domain.contains('.')
        && !address
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '<' | '>' | ',' | ';' | '"'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_show_their_kind_and_last_four_only() {
        assert_eq!(
            account_label(Some("cc"), Some("visa"), Some("1111")),
            "Visa ending in 1111"
        );
        assert_eq!(
            account_label(Some("ach"), Some("checking"), Some("6789")),
            "checking account ending in 6789"
        );
        assert_eq!(account_label(Some("ach"), None, None), "bank account");
    }

    #[test]
    fn addresses_are_checked_before_smtp() {
        assert!(plausible_address("pat@example.com"));
        assert!(!plausible_address("pat@example"));
        assert!(!plausible_address("pat <x>@example.com"));
        assert!(!plausible_address("a@b.com, c@d.com"));
    }
}
