//! Delivery of the mail outbox by SMTP (lettre). One loop per process
//! leases due messages (PostgreSQL: `FOR UPDATE SKIP LOCKED`, so nodes
//! never take the same one), sends them and writes the outcome back. A
//! refused message (a permanent 5xx answer) fails at once; a transient
//! failure is retried with growing delays, up to [`MAX_ATTEMPTS`].

use crate::clock::Clock;
use crate::db::{Dialect, Sql, Store, Value};
use crate::error::{ApiError, ApiResult};
use lettre::message::{Mailbox, MultiPart};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Attempts before a message is given up.
pub const MAX_ATTEMPTS: i64 = 8;
/// The first retry delay; each next one doubles.
const FIRST_RETRY: Duration = Duration::from_secs(30);
/// How long a lease keeps other nodes off a message: above one send.
const LEASE: Duration = Duration::from_secs(120);
/// One send's limit (connect, dialogue, data).
const SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// Messages taken per round.
const BATCH: i64 = 32;
const POLL: Duration = Duration::from_secs(1);
/// How long [`Mailer::run_once`] waits for messages another worker holds.
const RUN_ONCE_WAIT: Duration = Duration::from_secs(60);

/// The mail service of this process. Cheap to clone.
#[derive(Clone)]
pub struct Mailer {
    store: Store,
    clock: Clock,
    node_id: Arc<str>,
    /// `None`: no SMTP configured; mail stays in the outbox.
    transport: Option<AsyncSmtpTransport<Tokio1Executor>>,
    from_address: Arc<str>,
    wake: Arc<Notify>,
    /// Where attached files are read from.
    files: Arc<dyn crate::files::FileStore>,
}

struct Outgoing {
    id: String,
    recipient: String,
    reply_to: Option<String>,
    from_name: String,
    subject: String,
    text: String,
    html: String,
    attempts: i64,
    /// Files to attach: name, content type, bytes.
    attachments: Vec<(String, String, Vec<u8>)>,
}

/// How an attempt ended.
enum Sent {
    Delivered,
    Retry(String),
    Refused(String),
}

impl Mailer {
    /// `smtp_url` as lettre reads it: `smtp://[user:pass@]host:port`
    /// (plain; `?tls=required` for STARTTLS) or `smtps://` (TLS).
    /// `ca_pem`: the certificate(s) of a private CA the server's
    /// certificate must lead to (`FERROGATE_SMTP_CA`), instead of the
    /// built-in Mozilla roots.
    pub fn new(
        store: Store,
        clock: Clock,
        node_id: &str,
        smtp_url: Option<&str>,
        ca_pem: Option<&[u8]>,
        from_address: String,
        files: Arc<dyn crate::files::FileStore>,
    ) -> anyhow::Result<Mailer> {
        let transport = match smtp_url.map(str::trim).filter(|u| !u.is_empty()) {
            Some(url) => Some(transport(url, ca_pem)?),
            None => None,
        };
        from_address
            .parse::<lettre::Address>()
            .map_err(|e| anyhow::anyhow!("the mail sender address {from_address:?} is not valid: {e}"))?;
        Ok(Mailer {
            store,
            clock,
            node_id: Arc::from(node_id),
            transport,
            from_address: Arc::from(from_address.as_str()),
            wake: Arc::new(Notify::new()),
            files,
        })
    }

    /// Whether mail is delivered (SMTP configured).
    pub fn delivers(&self) -> bool {
        self.transport.is_some()
    }

    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Starts the delivery loop when SMTP is configured.
    pub fn start(&self) {
        if !self.delivers() {
            return;
        }
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                match this.round(None).await {
                    Ok(n) if n > 0 => continue,
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "mail: a delivery round failed; retrying"),
                }
                tokio::select! {
                    _ = this.wake.notified() => {}
                    _ = tokio::time::sleep(POLL) => {}
                }
            }
        });
    }

    /// Sends everything due now (of `location_id`, or everywhere) and
    /// waits for the outcomes. Due messages another worker (this
    /// process's loop, another node) holds are waited for, up to
    /// [`RUN_ONCE_WAIT`], and taken if their lease ends meanwhile, so
    /// that they too are settled when it returns.
    /// Returns the attempts it made; 0 without SMTP.
    pub async fn run_once(&self, location_id: Option<&str>) -> ApiResult<usize> {
        let mut total = 0;
        let give_up = tokio::time::Instant::now() + RUN_ONCE_WAIT;
        for _ in 0..100_000 {
            let n = self.round(location_id).await?;
            total += n;
            if n > 0 {
                continue;
            }
            if !self.delivers() || !self.any_due(location_id).await? || tokio::time::Instant::now() >= give_up
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(total)
    }

    /// When the next retry of `location_id`'s mail falls due, in the
    /// location's time (epoch seconds): a test clock's move steps to it.
    /// `None` without SMTP (nothing is attempted then).
    pub async fn next_due(&self, location_id: &str) -> ApiResult<Option<i64>> {
        if !self.delivers() {
            return Ok(None);
        }
        let now_ms = self.clock.now_ms();
        let location = location_id.to_string();
        self.store
            .read(move |conn| {
                let row = conn.query_one(&Sql::with(
                    "SELECT MIN(m.due_ms), MIN(l.clock_offset_s) FROM mail_outbox m JOIN locations l ON l.id = m.location_id \
                     WHERE m.location_id = ? AND m.status = 'pending' AND m.due_ms > ?",
                    vec![location.into(), now_ms.into()],
                ))?;
                Ok(row.and_then(|r| {
                    let due_ms = r[0].as_int()?;
                    // Rounded up: the step to it must make it due.
                    Some((due_ms + 999).div_euclid(1000) + r[1].as_int().unwrap_or(0))
                }))
            })
            .await
    }

    /// Whether a message (of `location_id`) is still due: being sent
    /// elsewhere, or free again (a lease that ended since this round's
    /// claim) for the next round to take.
    async fn any_due(&self, location_id: Option<&str>) -> ApiResult<bool> {
        let now_ms = self.clock.now_ms();
        let location = location_id.map(str::to_string);
        self.store
            .read(move |conn| {
                let mut sql = Sql::new("SELECT 1 FROM mail_outbox WHERE status = 'pending' AND due_ms <= ");
                sql.bind(now_ms);
                if let Some(location) = location {
                    sql.push(" AND location_id = ").bind(location);
                }
                sql.push(" LIMIT 1");
                Ok(conn.query_one(&sql)?.is_some())
            })
            .await
    }

    async fn round(&self, location_id: Option<&str>) -> ApiResult<usize> {
        let Some(transport) = self.transport.clone() else {
            return Ok(0);
        };
        let claimed = self.claim(location_id).await?;
        let n = claimed.len();
        let mut sends = tokio::task::JoinSet::new();
        // Which message each task sends, for a task that fails.
        let mut tasks = std::collections::HashMap::new();
        for mut message in claimed {
            // Without its files the message still goes (logged).
            if let Err(e) = self.attach(&mut message).await {
                tracing::warn!(message = %message.id, error = %e, "mail: the attached files could not be read");
            }
            let (transport, from) = (transport.clone(), self.from_address.clone());
            let (id, attempts) = (message.id.clone(), message.attempts + 1);
            let task = sends.spawn(async move {
                let sent = send(&transport, &from, &message).await;
                (message.id, message.attempts + 1, sent)
            });
            tasks.insert(task.id(), (id, attempts));
        }
        // Every outcome is recorded, a failed task's too: a round that
        // stopped at one would leave the others' leases to run out, and
        // messages already handed to SMTP would be sent again.
        while let Some(done) = sends.join_next_with_id().await {
            let (id, attempts, sent) = match done {
                Ok((_, outcome)) => outcome,
                Err(e) => {
                    let Some((id, attempts)) = tasks.remove(&e.id()) else {
                        continue;
                    };
                    tracing::error!(message = %id, error = %e, "mail: sending a message failed unexpectedly");
                    (
                        id,
                        attempts,
                        Sent::Refused("the message could not be built".into()),
                    )
                }
            };
            self.record(id, attempts, sent).await?;
        }
        Ok(n)
    }

    async fn claim(&self, location_id: Option<&str>) -> ApiResult<Vec<Outgoing>> {
        let now_ms = self.clock.now_ms();
        let node = self.node_id.to_string();
        let location = location_id.map(str::to_string);
        self.store
            .write(move |conn| {
                let mut sql = Sql::new("UPDATE mail_outbox SET lease_owner = ");
                sql.bind(node)
                    .push(", lease_until_ms = ")
                    .bind(now_ms + LEASE.as_millis() as i64)
                    .push(" WHERE id IN (SELECT id FROM mail_outbox WHERE status = 'pending' AND due_ms <= ")
                    .bind(now_ms)
                    .push(" AND (lease_until_ms IS NULL OR lease_until_ms < ")
                    .bind(now_ms)
                    .push(")");
                if let Some(location) = location {
                    sql.push(" AND location_id = ").bind(location);
                }
                sql.push(" ORDER BY due_ms LIMIT ").bind(BATCH);
                if conn.dialect() == Dialect::Postgres {
                    sql.push(" FOR UPDATE SKIP LOCKED");
                }
                sql.push(
                    ") RETURNING id, recipient, reply_to, from_name, subject, text_body, html_body, attempts",
                );
                Ok(conn
                    .query(&sql)?
                    .into_iter()
                    .map(|r| {
                        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
                        Outgoing {
                            id: text(&r[0]),
                            recipient: text(&r[1]),
                            reply_to: r[2].as_str().map(str::to_string),
                            from_name: text(&r[3]),
                            subject: text(&r[4]),
                            text: text(&r[5]),
                            html: text(&r[6]),
                            attempts: r[7].as_int().unwrap_or(0),
                            attachments: Vec::new(),
                        }
                    })
                    .collect())
            })
            .await
    }

    /// Reads the files `message` carries from the file store. A file gone
    /// from the store is left out (and logged); the message still goes.
    async fn attach(&self, message: &mut Outgoing) -> ApiResult<()> {
        let id = message.id.clone();
        let rows = self
            .store
            .read(move |conn| {
                Ok(conn.query(&Sql::with(
                    "SELECT name, content_type, storage_key FROM mail_attachments WHERE mail_id = ? ORDER BY position",
                    vec![id.into()],
                ))?)
            })
            .await?;
        for row in rows {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            let (name, content_type, key) = (text(&row[0]), text(&row[1]), text(&row[2]));
            let files = self.files.clone();
            let read = tokio::task::spawn_blocking(move || files.get(&key))
                .await
                .map_err(ApiError::internal)?;
            match read {
                Ok(bytes) => message.attachments.push((name, content_type, bytes)),
                Err(e) => {
                    tracing::warn!(message = %message.id, error = %e, "mail: an attached file is missing")
                }
            }
        }
        Ok(())
    }

    async fn record(&self, id: String, attempts: i64, sent: Sent) -> ApiResult<()> {
        let now_ms = self.clock.now_ms();
        let node = self.node_id.to_string();
        let (status, error, due_ms) = match sent {
            Sent::Delivered => ("sent", None, now_ms),
            Sent::Refused(e) => ("failed", Some(e), now_ms),
            Sent::Retry(e) if attempts >= MAX_ATTEMPTS => ("failed", Some(e), now_ms),
            Sent::Retry(e) => {
                let delay = FIRST_RETRY.as_millis() as i64 * (1_i64 << (attempts - 1).clamp(0, 16));
                ("pending", Some(e), now_ms + delay)
            }
        };
        if status == "failed" {
            tracing::warn!(message = %id, attempts, error = ?error, "mail: a message could not be delivered");
        }
        // On the location's clock, as the message's `created_ts`.
        let sent_ts = (status == "sent").then_some(now_ms.div_euclid(1000));
        self.store
            .write(move |conn| {
                conn.execute(&Sql::with(
                    "UPDATE mail_outbox SET status = ?, attempts = ?, last_error = ?, due_ms = ?, \
                     sent_ts = CAST(? AS BIGINT) + COALESCE((SELECT clock_offset_s FROM locations \
                     WHERE locations.id = mail_outbox.location_id), 0), \
                     lease_owner = NULL, lease_until_ms = NULL WHERE id = ? AND lease_owner = ?",
                    vec![
                        status.into(),
                        attempts.into(),
                        Value::from(error),
                        due_ms.into(),
                        Value::from(sent_ts),
                        id.into(),
                        node.into(),
                    ],
                ))?;
                Ok(())
            })
            .await
    }
}

/// The SMTP transport of `url`, with a private CA when given.
fn transport(url: &str, ca_pem: Option<&[u8]>) -> anyhow::Result<AsyncSmtpTransport<Tokio1Executor>> {
    use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
    let mut builder = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
        .map_err(|e| anyhow::anyhow!("FERROGATE_SMTP_URL is not a usable SMTP URL: {e}"))?
        .timeout(Some(SEND_TIMEOUT));
    if let Some(pem) = ca_pem {
        let host = host_of(url).ok_or_else(|| anyhow::anyhow!("FERROGATE_SMTP_URL names no host"))?;
        let certificate = Certificate::from_pem(pem)
            .map_err(|e| anyhow::anyhow!("FERROGATE_SMTP_CA is not a PEM certificate: {e}"))?;
        let parameters = TlsParameters::builder(host)
            .add_root_certificate(certificate)
            .build_rustls()
            .map_err(|e| anyhow::anyhow!("FERROGATE_SMTP_CA: {e}"))?;
        let query = url.split_once('?').map(|(_, q)| q).unwrap_or_default();
        let tls = if url.starts_with("smtps://") {
            Tls::Wrapper(parameters)
        } else if query.contains("tls=required") {
            Tls::Required(parameters)
        } else if query.contains("tls=opportunistic") {
            Tls::Opportunistic(parameters)
        } else {
            anyhow::bail!(
                "FERROGATE_SMTP_CA is set but FERROGATE_SMTP_URL uses no TLS: use smtps:// or ?tls=required"
            );
        };
        builder = builder.tls(tls);
    }
    Ok(builder.build())
}

/// The host of `scheme://[user:pass@]host[:port][/...][?...]`.
fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => host_port.split(':').next()?,
    };
    (!host.is_empty()).then(|| host.to_string())
}

/// The longest sender name shown (a location name has at most 64).
const MAX_DISPLAY_NAME: usize = 64;

/// A name as a mail header can carry it: control characters (a line
/// break above all, which would end the header) become spaces, runs of
/// spaces one, at most [`MAX_DISPLAY_NAME`] characters. `None` when
/// nothing is left: the mail then goes without a name.
pub fn display_name(name: &str) -> Option<String> {
    let cleaned: String = name
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(MAX_DISPLAY_NAME)
        .collect();
    let cleaned = cleaned.trim_end().to_string();
    (!cleaned.is_empty()).then_some(cleaned)
}

/// A mailbox of `address` named `name`, checked to be writable into a
/// header first: lettre's builder panics on one that is not.
fn mailbox(name: Option<&str>, address: &str) -> Result<Mailbox, String> {
    let parsed = address
        .parse::<lettre::Address>()
        .map_err(|e| format!("address {address:?}: {e}"))?;
    let mailbox = Mailbox::new(name.and_then(display_name), parsed);
    let mut written = String::new();
    std::fmt::Write::write_fmt(&mut written, format_args!("{mailbox}"))
        .map_err(|_| format!("the name of {address:?} cannot be written in a mail header"))?;
    Ok(mailbox)
}

/// One delivery attempt.
async fn send(transport: &AsyncSmtpTransport<Tokio1Executor>, from: &str, m: &Outgoing) -> Sent {
    let built = (|| -> Result<lettre::Message, String> {
        let mut builder = lettre::Message::builder()
            .from(mailbox(Some(&m.from_name), from)?)
            .to(mailbox(None, &m.recipient)?)
            .subject(m.subject.clone());
        if let Some(reply_to) = &m.reply_to {
            if let Ok(mb) = mailbox(None, reply_to) {
                builder = builder.reply_to(mb);
            }
        }
        let body = MultiPart::alternative_plain_html(m.text.clone(), m.html.clone());
        if m.attachments.is_empty() {
            return builder.multipart(body).map_err(|e| e.to_string());
        }
        let mut mixed = MultiPart::mixed().multipart(body);
        for (name, content_type, bytes) in &m.attachments {
            let kind =
                lettre::message::header::ContentType::parse(content_type).map_err(|e| e.to_string())?;
            mixed =
                mixed.singlepart(lettre::message::Attachment::new(name.clone()).body(bytes.clone(), kind));
        }
        builder.multipart(mixed).map_err(|e| e.to_string())
    })();
    let message = match built {
        Ok(message) => message,
        Err(e) => return Sent::Refused(e),
    };
    match transport.send(message).await {
        Ok(_) => Sent::Delivered,
        Err(e) if e.is_permanent() => Sent::Refused(e.to_string()),
        Err(e) => Sent::Retry(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::{display_name, host_of, mailbox};

    #[test]
    fn sender_names_are_one_clean_line() {
        assert_eq!(
            display_name("Evil\r\nBcc: evil@evil.com").as_deref(),
            Some("Evil Bcc: evil@evil.com")
        );
        assert_eq!(
            display_name(" Café  \t Ünïcode ").as_deref(),
            Some("Café Ünïcode")
        );
        assert_eq!(display_name("\r\n\u{7}"), None);
        assert_eq!(display_name(&"x".repeat(100)).map(|n| n.len()), Some(64));
        // What lettre would panic on is refused or cleaned before it.
        let built = mailbox(Some("Evil\r\nBcc: evil@evil.com"), "no-reply@example.com").unwrap();
        assert_eq!(built.name.as_deref(), Some("Evil Bcc: evil@evil.com"));
        let message = lettre::Message::builder()
            .from(built)
            .to("pat@example.com".parse().unwrap())
            .subject("s")
            .body(String::from("b"))
            .unwrap();
        let text = String::from_utf8(message.formatted()).unwrap();
        assert!(!text.contains("\r\nBcc:"), "{text}");
        assert!(mailbox(None, "not an address").is_err());
    }

    #[test]
    fn the_host_of_an_smtp_url() {
        assert_eq!(
            host_of("smtp://u:p@mail.example.com:587?tls=required").as_deref(),
            Some("mail.example.com")
        );
        assert_eq!(
            host_of("smtps://mail.example.com").as_deref(),
            Some("mail.example.com")
        );
        assert_eq!(host_of("smtp://[::1]:25").as_deref(), Some("::1"));
        assert_eq!(host_of("smtp://"), None);
    }
}
