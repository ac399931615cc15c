//! Transaction receipts: written when a payment completes, in its
//! transaction, to `notification_email_address` (which then reads
//! `notification_email_sent: true`), to the contact when its
//! `email_trx_receipt` is on, and to the user who made it when theirs is.

use super::{account_label, enqueue, plausible_address, sender, Message};
use crate::clock::timestamp_text;
use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::engine::Cx;
use crate::error::{ApiError, ApiResult};
use crate::money::Money;
use crate::processor::StatusId;
use askama::Template;

/// What a receipt says.
pub struct Receipt {
    pub subject: String,
    pub merchant: String,
    pub approved: bool,
    pub amount: String,
    pub status: String,
    pub date: String,
    pub account: String,
    pub auth_code: Option<String>,
    pub description: Option<String>,
    pub transaction_id: String,
}

#[derive(Template)]
#[template(path = "mail/receipt.txt")]
struct ReceiptText<'a>(&'a Receipt);

#[derive(Template)]
#[template(path = "mail/receipt.html")]
struct ReceiptHtml<'a>(&'a Receipt);

impl std::ops::Deref for ReceiptText<'_> {
    type Target = Receipt;
    fn deref(&self) -> &Receipt {
        self.0
    }
}

impl std::ops::Deref for ReceiptHtml<'_> {
    type Target = Receipt;
    fn deref(&self) -> &Receipt {
        self.0
    }
}

impl Receipt {
    /// The plain text and HTML bodies.
    pub fn render(&self) -> ApiResult<(String, String)> {
        let text = ReceiptText(self).render().map_err(ApiError::internal)?;
        let html = ReceiptHtml(self).render().map_err(ApiError::internal)?;
        Ok((text, html))
    }
}

/// Writes the receipts a completed transaction asks for and marks
/// `notification_email_sent`. Nothing for a zero amount (an AVS check).
pub fn queue(cx: &Cx, conn: &mut dyn Conn, tx: &mut Record) -> ApiResult<()> {
    let amount = tx.int("transaction_amount").unwrap_or(0);
    let named = tx
        .text("notification_email_address")
        .filter(|a| plausible_address(a))
        .map(str::to_string);
    let contact = match tx.text("contact_id") {
        Some(id) => wanted_address(conn, "contacts", id)?,
        None => None,
    };
    let user = match (tx.text("created_user_id"), &cx.user_receipts) {
        (Some(id), Some(known)) if id == cx.user_id => known.clone().filter(|a| plausible_address(a)),
        (Some(id), _) => wanted_address(conn, "users", id)?,
        (None, _) => None,
    };
    let mut recipients: Vec<String> = named.iter().cloned().collect();
    for address in [contact, user].into_iter().flatten() {
        if !recipients.iter().any(|r| r.eq_ignore_ascii_case(&address)) {
            recipients.push(address);
        }
    }
    if recipients.is_empty() || amount == 0 {
        return Ok(());
    }
    let location_id = tx.text("location_id").unwrap_or_default().to_string();
    let from = sender(conn, &location_id)?;
    let status = tx
        .int("status_id")
        .and_then(|s| u16::try_from(s).ok())
        .and_then(StatusId::from_code);
    let approved = status.is_some_and(StatusId::is_approved);
    let receipt = Receipt {
        subject: format!(
            "{}: {} {}",
            from.name,
            if approved {
                "receipt for"
            } else {
                "payment not approved,"
            },
            Money::from_cents(amount).to_text()
        ),
        merchant: from.name.clone(),
        approved,
        amount: Money::from_cents(amount).to_text(),
        status: status.map(StatusId::label).unwrap_or("Unknown").to_string(),
        date: format!("{} UTC", timestamp_text(cx.now)),
        account: account_label(
            tx.text("payment_method"),
            tx.text("account_type"),
            tx.text("last_four"),
        ),
        auth_code: tx.text("auth_code").filter(|c| !c.is_empty()).map(str::to_string),
        description: tx
            .text("description")
            .filter(|d| !d.is_empty())
            .map(str::to_string),
        transaction_id: tx.id().to_string(),
    };
    let (text, html) = receipt.render()?;
    let now_ms = cx.now.saturating_mul(1000);
    for recipient in recipients {
        enqueue(
            conn,
            now_ms,
            &Message {
                location_id: location_id.clone(),
                kind: "receipt",
                recipient,
                reply_to: from.reply_to.clone(),
                from_name: from.name.clone(),
                subject: receipt.subject.clone(),
                text: text.clone(),
                html: html.clone(),
                resource: "transaction",
                resource_id: tx.id().to_string(),
            },
        )?;
    }
    if named.is_some() {
        tx.set("notification_email_sent", 1);
    }
    Ok(())
}

/// The receipt address of a contact or user (`table`), when it wants
/// receipts and the address is plausible.
fn wanted_address(conn: &mut dyn Conn, table: &'static str, id: &str) -> ApiResult<Option<String>> {
    let mut sql = Sql::new("SELECT email, email_trx_receipt FROM ");
    sql.push(table).push(" WHERE id = ").bind(id.to_string());
    Ok(conn
        .query_one(&sql)?
        .and_then(|r| crate::auth::receipts_to(&r[0], &r[1]))
        .filter(|a| plausible_address(a)))
}
