//! The notice a contact gets `notification_days` before a recurring run.

use super::{account_label, enqueue, plausible_address, sender, Message};
use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::error::{ApiError, ApiResult};
use crate::money::Money;
use askama::Template;

pub struct Notice {
    pub subject: String,
    pub merchant: String,
    pub name: String,
    pub amount: String,
    pub run_date: String,
    pub account: String,
    pub description: Option<String>,
    pub reply_to: Option<String>,
}

#[derive(Template)]
#[template(path = "mail/recurring_notice.txt")]
struct NoticeText<'a>(&'a Notice);

#[derive(Template)]
#[template(path = "mail/recurring_notice.html")]
struct NoticeHtml<'a>(&'a Notice);

impl std::ops::Deref for NoticeText<'_> {
    type Target = Notice;
    fn deref(&self) -> &Notice {
        self.0
    }
}

impl std::ops::Deref for NoticeHtml<'_> {
    type Target = Notice;
    fn deref(&self) -> &Notice {
        self.0
    }
}

/// Writes the notice of `recurring`'s next run to its contact. Returns
/// false when the contact has no usable address (nothing to send).
/// `now_ms`: the location's time.
pub fn recurring_notice(conn: &mut dyn Conn, now_ms: i64, recurring: &Record) -> ApiResult<bool> {
    let contact = match recurring.text("contact_id") {
        Some(id) => conn.query_one(&Sql::with(
            "SELECT email, first_name, last_name FROM contacts WHERE id = ?",
            vec![id.into()],
        ))?,
        None => None,
    };
    let Some(contact) = contact else {
        return Ok(false);
    };
    let Some(email) = contact[0]
        .as_str()
        .filter(|a| plausible_address(a))
        .map(str::to_string)
    else {
        return Ok(false);
    };
    let name = [contact[1].as_str(), contact[2].as_str()]
        .into_iter()
        .flatten()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let vault = conn.query_one(&Sql::with(
        "SELECT payment_method, account_type, last_four FROM account_vaults WHERE id = ?",
        vec![recurring.text("account_vault_id").unwrap_or_default().into()],
    ))?;
    let account = match &vault {
        Some(v) => account_label(v[0].as_str(), v[1].as_str(), v[2].as_str()),
        None => "your account on file".to_string(),
    };
    let location_id = recurring.text("location_id").unwrap_or_default().to_string();
    let from = sender(conn, &location_id)?;
    let amount = Money::from_cents(recurring.int("transaction_amount").unwrap_or(0)).to_text();
    let run_date = recurring.text("next_run_date").unwrap_or_default().to_string();
    let notice = Notice {
        subject: format!("{}: payment of {amount} scheduled for {run_date}", from.name),
        merchant: from.name.clone(),
        name: if name.is_empty() { "customer".into() } else { name },
        amount,
        run_date,
        account,
        description: recurring
            .text("description")
            .filter(|d| !d.is_empty())
            .map(str::to_string),
        reply_to: from.reply_to.clone(),
    };
    let text = NoticeText(&notice).render().map_err(ApiError::internal)?;
    let html = NoticeHtml(&notice).render().map_err(ApiError::internal)?;
    enqueue(
        conn,
        now_ms,
        &Message {
            location_id,
            kind: "recurring_notice",
            recipient: email,
            reply_to: from.reply_to,
            from_name: from.name,
            subject: notice.subject,
            text,
            html,
            resource: "recurring",
            resource_id: recurring.id().to_string(),
        },
    )?;
    Ok(true)
}
