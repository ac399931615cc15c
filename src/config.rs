//! Configuration: environment variables, each with a flag twin (clap reads
//! both; a flag wins). Validated at start; secrets never printed.

use crate::crypto::{generate_data_key, Keyring};
use anyhow::Context;
use std::path::PathBuf;

#[derive(clap::Args, Clone, Debug)]
pub struct DbArgs {
    /// Database: sqlite://PATH (embedded, the default) or postgres://...
    #[arg(
        long,
        env = "FERROGATE_DATABASE_URL",
        default_value = "sqlite://ferrogate.db",
        hide_env_values = true
    )]
    pub database_url: String,

    /// Base64 of 32 random bytes; encrypts card and bank numbers and other
    /// secrets at rest. Unset: generated once into <db dir>/ferrogate.key.
    #[arg(long, env = "FERROGATE_DATA_KEY", hide_env_values = true)]
    pub data_key: Option<String>,

    /// Earlier data keys (comma-separated base64), still accepted for
    /// decryption while `ferrogate keys rotate` re-encrypts under the
    /// current key. Remove them once the rotation has finished.
    #[arg(
        long,
        env = "FERROGATE_DATA_KEY_PREVIOUS",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub data_key_previous: Vec<String>,

    /// Database connections per process (SQLite: reader connections).
    #[arg(long, env = "FERROGATE_DB_POOL", default_value_t = 8)]
    pub db_pool: usize,
}

impl DbArgs {
    /// Where a generated data key is kept: beside the SQLite file, or in
    /// the working directory for PostgreSQL.
    fn key_file(&self) -> PathBuf {
        if let Some(path) = self.database_url.strip_prefix("sqlite://") {
            let dir = std::path::Path::new(path)
                .parent()
                .map(|p| p.to_path_buf())
                .unwrap_or_default();
            return dir.join("ferrogate.key");
        }
        PathBuf::from("ferrogate.key")
    }

    pub fn keyring(&self) -> anyhow::Result<Keyring> {
        let previous = self
            .data_key_previous
            .iter()
            .filter(|k| !k.trim().is_empty())
            .map(|k| Keyring::parse_key(k))
            .collect::<Result<Vec<_>, _>>()
            .context("FERROGATE_DATA_KEY_PREVIOUS")?;
        if let Some(text) = &self.data_key {
            let key = Keyring::parse_key(text).context("FERROGATE_DATA_KEY")?;
            return Ok(Keyring::new(&key, &previous));
        }
        let file = self.key_file();
        if file.exists() {
            let text =
                std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
            let key = Keyring::parse_key(&text).with_context(|| format!("key in {}", file.display()))?;
            return Ok(Keyring::new(&key, &previous));
        }
        let text = generate_data_key();
        write_private(&file, &text).with_context(|| format!("writing {}", file.display()))?;
        tracing::warn!(
            path = %file.display(),
            "FERROGATE_DATA_KEY is not set: generated a data key into this file. Back it up: without it the encrypted data cannot be read. Set FERROGATE_DATA_KEY on every node when running several."
        );
        let key = Keyring::parse_key(&text)?;
        Ok(Keyring::new(&key, &[]))
    }
}

#[cfg(unix)]
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    // create_new: two processes starting at once cannot both write a key.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

#[cfg(not(unix))]
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    std::fs::write(path, text)
}

pub use crate::outbound::OutboundPolicy;

#[derive(clap::Args, Clone, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub db: DbArgs,

    /// Address of the HTTP server; port 0 picks a free port.
    #[arg(long, env = "FERROGATE_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,

    /// Base of `_links` and emailed links. Default: http://<listen address>.
    #[arg(long, env = "FERROGATE_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// Mail delivery: smtp://[user:password@]host:port (plain, or
    /// STARTTLS with ?tls=required), smtps://... (implicit TLS). Unset:
    /// mail stays in the outbox and the sandbox shows it at /dev/mail.
    #[arg(long, env = "FERROGATE_SMTP_URL")]
    pub smtp_url: Option<String>,

    /// Time a client has to send a request's head (request line and
    /// headers), in milliseconds; the connection is closed after it.
    #[arg(long, env = "FERROGATE_HEADER_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_timeout_ms: u64,

    /// Time a client has to send a request's body once its head arrived,
    /// in milliseconds; 408 after it.
    #[arg(long, env = "FERROGATE_BODY_TIMEOUT_MS", default_value_t = 30_000)]
    pub body_timeout_ms: u64,

    /// Time a list export (`_format=csv|tsv`) waits for its client to take
    /// the next part, in milliseconds. A client that reads nothing for
    /// that long loses the export (the file ends incomplete) and the
    /// database connection the export held is freed.
    #[arg(long, env = "FERROGATE_EXPORT_STALL_TIMEOUT_MS", default_value_t = 30_000)]
    pub export_stall_timeout_ms: u64,

    /// Open connections allowed from one client address; more are answered
    /// 503 and closed. Behind a proxy every client has the proxy's address:
    /// raise it there.
    #[arg(long, env = "FERROGATE_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = 256)]
    pub max_connections_per_address: usize,

    /// Requests per second one API user may make (bursts of twice that);
    /// 429 with Retry-After beyond. Counted per node. 0: no limit.
    #[arg(long, env = "FERROGATE_RATE_LIMIT_PER_USER", default_value_t = 2_000)]
    pub rate_limit_per_user: u32,

    /// Requests per second one client address may make (bursts of twice
    /// that); 429 beyond. Counted per node. 0: no limit.
    #[arg(long, env = "FERROGATE_RATE_LIMIT_PER_ADDRESS", default_value_t = 5_000)]
    pub rate_limit_per_address: u32,

    /// PEM file of a private CA that the SMTP server's certificate must
    /// lead to (with smtps:// or ?tls=required); default: the Mozilla roots.
    #[arg(long, env = "FERROGATE_SMTP_CA")]
    pub smtp_ca: Option<std::path::PathBuf>,

    /// Directory of stored files (quick-invoice attachments); a shared
    /// mount when several nodes serve. Default: ferrogate-files beside the
    /// SQLite file, or in the working directory for PostgreSQL.
    #[arg(long, env = "FERROGATE_FILES_DIR")]
    pub files_dir: Option<std::path::PathBuf>,

    /// The sender address of mail (the merchant's name is shown with it).
    /// Default: no-reply@ the host of the public URL.
    #[arg(long, env = "FERROGATE_MAIL_FROM")]
    pub mail_from: Option<String>,

    /// Allow postback URLs on loopback and private networks (refused by
    /// default so a config cannot reach internal services). For tests and
    /// receivers inside a private network.
    #[arg(
        long,
        env = "FERROGATE_POSTBACK_ALLOW_PRIVATE",
        value_parser = clap::builder::BoolishValueParser::new(),
        num_args = 0..=1,
        default_value_t = false,
        default_missing_value = "true"
    )]
    pub postback_allow_private: bool,
}

impl ServeArgs {
    /// The limits on client connections.
    pub fn connection_limits(&self) -> crate::server::ConnectionLimits {
        crate::server::ConnectionLimits {
            header_timeout: std::time::Duration::from_millis(self.header_timeout_ms.max(1)),
            body_timeout: std::time::Duration::from_millis(self.body_timeout_ms.max(1)),
            per_address: self.max_connections_per_address.max(1),
        }
    }

    /// How many list exports may run at once on this node and how long
    /// one waits for a client that does not read.
    pub fn export_limits(&self) -> crate::http::crud::ExportLimits {
        crate::http::crud::ExportLimits::new(
            self.db.db_pool,
            std::time::Duration::from_millis(self.export_stall_timeout_ms.max(1)),
        )
    }

    pub fn outbound(&self) -> OutboundPolicy {
        OutboundPolicy {
            allow_private: self.postback_allow_private,
        }
    }
}
