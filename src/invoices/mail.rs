//! The mail of a quick invoice: the invoice itself (on creation with
//! `send_email`, and on resend), its reminders and the thank-you after a
//! payment, written to the mail outbox in the caller's transaction.

use crate::db::Conn;
use crate::engine::record::Record;
use crate::error::{ApiError, ApiResult};
use crate::mail::{enqueue, plausible_address, sender, Message};
use crate::money::Money;
use askama::Template;

/// Which message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The invoice, sent or sent again.
    Invoice,
    /// A reminder before the due date.
    Upcoming,
    /// A reminder on the due date.
    DueToday,
    /// A reminder after the due date.
    Overdue,
    /// After a payment.
    Thanks,
}

impl Kind {
    fn outbox_kind(self) -> &'static str {
        match self {
            Kind::Invoice => "quick_invoice",
            Kind::Upcoming | Kind::DueToday | Kind::Overdue => "quick_invoice_reminder",
            Kind::Thanks => "quick_invoice_thanks",
        }
    }
}

#[derive(Template)]
#[template(path = "mail/quick_invoice.txt")]
struct Text<'a>(&'a Body);

#[derive(Template)]
#[template(path = "mail/quick_invoice.html")]
struct Html<'a>(&'a Body);

impl std::ops::Deref for Text<'_> {
    type Target = Body;
    fn deref(&self) -> &Body {
        self.0
    }
}

impl std::ops::Deref for Html<'_> {
    type Target = Body;
    fn deref(&self) -> &Body {
        self.0
    }
}

pub struct Body {
    subject: String,
    merchant: String,
    lead: String,
    title: String,
    invoice_number: Option<String>,
    item_header: Option<String>,
    item_footer: Option<String>,
    items: Vec<(String, String)>,
    amount_due: String,
    remaining: String,
    due_date: String,
    note: Option<String>,
    link: String,
    show_link: bool,
    /// The names of the attached files.
    files: Vec<String>,
}

fn text(r: &Record, name: &str) -> Option<String> {
    r.text(name).filter(|t| !t.is_empty()).map(str::to_string)
}

/// Writes `kind` of message about invoice `r` to its address. Answers
/// false when the invoice has no usable address. `link` is the pay page;
/// `paid_cents` the payment a thank-you is for. The invoice's files go
/// along (all but the thank-you) when `attach_files_to_email` is set.
pub fn queue(
    conn: &mut dyn Conn,
    now: i64,
    r: &Record,
    kind: Kind,
    link: &str,
    paid_cents: Option<i64>,
) -> ApiResult<bool> {
    let Some(recipient) = text(r, "email").filter(|a| plausible_address(a)) else {
        return Ok(false);
    };
    let location_id = r.text("location_id").unwrap_or_default().to_string();
    let from = sender(conn, &location_id)?;
    let money = |name: &str| Money::from_cents(r.int(name).unwrap_or(0)).to_text();
    let title = r.text("title").unwrap_or_default().to_string();
    let due_date = r.text("due_date").unwrap_or_default().to_string();
    let (subject, lead) = match kind {
        Kind::Invoice => (
            format!("{}: invoice {title}", from.name),
            format!(
                "{} sent you an invoice for {}.",
                from.name,
                money("remaining_balance")
            ),
        ),
        Kind::Upcoming => (
            format!("{}: invoice {title} is due on {due_date}", from.name),
            format!("A reminder: {} is due on {due_date}.", money("remaining_balance")),
        ),
        Kind::DueToday => (
            format!("{}: invoice {title} is due today", from.name),
            format!("A reminder: {} is due today.", money("remaining_balance")),
        ),
        Kind::Overdue => (
            format!("{}: invoice {title} is past due", from.name),
            format!(
                "Invoice {title} was due on {due_date}; {} remains to pay.",
                money("remaining_balance")
            ),
        ),
        Kind::Thanks => (
            format!("{}: thank you for your payment", from.name),
            format!(
                "Thank you: we received your payment of {} for invoice {title}.",
                Money::from_cents(paid_cents.unwrap_or(0)).to_text()
            ),
        ),
    };
    let files = if r.int("attach_files_to_email") == Some(1) && kind != Kind::Thanks {
        super::attachments::list(conn, r.id())?
    } else {
        Vec::new()
    };
    let body = Body {
        subject: subject.clone(),
        merchant: from.name.clone(),
        lead,
        title,
        invoice_number: text(r, "invoice_number"),
        item_header: text(r, "item_header"),
        item_footer: text(r, "item_footer"),
        items: super::item_lines(r),
        amount_due: money("amount_due"),
        remaining: money("remaining_balance"),
        due_date,
        note: text(r, "note"),
        link: link.to_string(),
        show_link: kind != Kind::Thanks || r.int("remaining_balance").unwrap_or(0) > 0,
        files: files.iter().map(|f| f.name.clone()).collect(),
    };
    let text_body = Text(&body).render().map_err(ApiError::internal)?;
    let html_body = Html(&body).render().map_err(ApiError::internal)?;
    let mail_id = enqueue(
        conn,
        now.saturating_mul(1000),
        &Message {
            location_id,
            kind: kind.outbox_kind(),
            recipient,
            reply_to: from.reply_to.clone(),
            from_name: from.name,
            subject,
            text: text_body,
            html: html_body,
            resource: "quickinvoice",
            resource_id: r.id().to_string(),
        },
    )?;
    super::attachments::attach_to_mail(conn, &mail_id, &files)?;
    Ok(true)
}
