//! The `ferrogate` binary.

use clap::{Parser, Subcommand};
use ferrogate::clock::Clock;
use ferrogate::config::{DbArgs, ServeArgs};
use std::io::Write;
use tracing_subscriber::EnvFilter;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "ferrogate",
    version,
    about = "A self-hostable payment gateway (REST API v2, boarding API v1)."
)]
struct Cli {
    /// Log filter (tracing env-filter syntax), e.g. `info` or `warn,ferrogate=debug`.
    #[arg(long, env = "RUST_LOG", global = true)]
    log: Option<String>,

    /// `text` (default) or `json`: one JSON object per log line.
    #[arg(long, env = "FERROGATE_LOG_FORMAT", global = true, default_value = "text")]
    log_format: LogFormat,

    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the service: the v2 API over HTTP until SIGINT or SIGTERM.
    Serve(ServeArgs),
    /// Apply schema migrations and exit (serve also applies them on start).
    Migrate {
        #[command(flatten)]
        db: DbArgs,
    },
    /// Create a new merchant location with cc and ach product transactions,
    /// a developer id and an admin user; print its credentials as JSON.
    Bootstrap {
        #[command(flatten)]
        db: DbArgs,
        /// Print the credentials as one JSON object (the only format).
        #[arg(long)]
        json: bool,
        /// Name of the new location.
        #[arg(long)]
        name: Option<String>,
    },
    /// BIN data: issuer ranges for GET /v2/bins/{bin} (brand and PAN
    /// length need none).
    Bins {
        #[command(subcommand)]
        command: BinsCommand,
    },
    /// Sandbox test clocks: move a location's time forward (see README,
    /// "Test clocks"). A running server delivers what came due within a
    /// moment; `POST /v2/developer/testclock/advance` also waits for it.
    Testclock {
        #[command(subcommand)]
        command: TestclockCommand,
    },
    /// Boarding (API v1): offers, operator tokens, merchants from signed
    /// applications (see README, "Boarding API").
    Boarding {
        #[command(subcommand)]
        command: ferrogate::boarding::cli::BoardingCommand,
    },
    /// Set a card product transaction's surcharge: a percentage of the
    /// subtotal (at most 3.00) added to credit card sales and
    /// authorizations, never to debit cards; 0 removes it. Prints JSON.
    Surcharge {
        #[command(flatten)]
        db: DbArgs,
        #[arg(long)]
        product_transaction_id: String,
        /// A percentage with at most two decimals (3, 2.5, 0).
        #[arg(long)]
        percent: String,
    },
    /// Data key management.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// A software payment terminal: connects to a gateway's router like a
    /// real device and acts out the reference's mock-device amounts and a
    /// scripted cardholder (see README, "Terminals"). Runs until stopped.
    TerminalSim(ferrogate::terminals::sim::SimArgs),
}

#[derive(Subcommand)]
enum BinsCommand {
    /// Load a CSV file of IIN ranges (format: README, "BIN data").
    /// Idempotent: a second import of the same source replaces the first.
    /// Bad rows are reported by line and skipped; the command fails, with
    /// nothing written, only when the file is unusable.
    Import(ferrogate::bins::import::ImportArgs),
}

#[derive(Subcommand)]
enum TestclockCommand {
    /// Print a location's clock as JSON.
    Show {
        #[command(flatten)]
        db: DbArgs,
        #[arg(long)]
        location_id: String,
    },
    /// Move a location's clock forward and print it as JSON.
    Advance {
        #[command(flatten)]
        db: DbArgs,
        #[arg(long)]
        location_id: String,
        /// Seconds to move forward (0 to ten years).
        #[arg(long)]
        seconds: i64,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Re-encrypt every sealed value under FERROGATE_DATA_KEY. Earlier keys
    /// go in FERROGATE_DATA_KEY_PREVIOUS; servers keep running if they are
    /// configured the same way. Prints a JSON report.
    Rotate {
        #[command(flatten)]
        db: DbArgs,
    },
    /// Print a new random data key (base64 of 32 bytes).
    Generate,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log.as_deref(), cli.log_format);
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr (stdout carries the contract's machine-readable
/// lines): human-readable by default, one JSON object per line with
/// FERROGATE_LOG_FORMAT=json. Request lines carry the request id.
fn init_logging(filter: Option<&str>, format: LogFormat) {
    let filter = filter
        .and_then(|f| EnvFilter::try_new(f).ok())
        // The PostgreSQL client logs server notices at info.
        .unwrap_or_else(|| EnvFilter::new("info,postgres=warn,tokio_postgres=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if matches!(format, LogFormat::Json) {
        builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .init();
    } else {
        builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init();
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    match cli.command {
        Command::Serve(args) => runtime.block_on(ferrogate::server::serve(args)),
        Command::TerminalSim(args) => runtime.block_on(ferrogate::terminals::sim::run(args)),
        Command::Migrate { db } => runtime.block_on(async {
            let store = ferrogate::db::Store::open_and_migrate(&db.database_url, 1).await?;
            tokio::task::spawn_blocking(move || store.shutdown()).await?;
            println!("migrations applied");
            Ok(())
        }),
        Command::Keys {
            command: KeysCommand::Generate,
        } => {
            println!("{}", ferrogate::crypto::generate_data_key());
            Ok(())
        }
        Command::Keys {
            command: KeysCommand::Rotate { db },
        } => runtime.block_on(async {
            let keyring = std::sync::Arc::new(db.keyring()?);
            let store = ferrogate::db::Store::open_and_migrate(&db.database_url, 1).await?;
            ferrogate::keys::check(&store, keyring.clone()).await?;
            let store2 = store.clone();
            let now = Clock::system().now_ts();
            let report = tokio::task::spawn_blocking(move || ferrogate::keys::rotate(&store2, keyring, now))
                .await?
                .map_err(|e| anyhow::anyhow!("rotation failed: {e}"))?;
            tokio::task::spawn_blocking(move || store.shutdown()).await?;
            println!("{}", serde_json::to_string(&report)?);
            anyhow::ensure!(
                report.remaining == 0,
                "{} values are still sealed under other keys: a node may still write with an old key; \
                 restart every node with the new FERROGATE_DATA_KEY and run `keys rotate` again",
                report.remaining
            );
            Ok(())
        }),
        Command::Bootstrap { db, json: _, name } => runtime.block_on(async {
            if let Some(n) = &name {
                let len = n.trim().chars().count();
                anyhow::ensure!((1..=64).contains(&len), "--name must be 1 to 64 characters");
            }
            let keyring = std::sync::Arc::new(db.keyring()?);
            let store = ferrogate::db::Store::open_and_migrate(&db.database_url, 1).await?;
            ferrogate::keys::check(&store, keyring.clone()).await?;
            let now = Clock::system().now_ts();
            let store2 = store.clone();
            let creds =
                tokio::task::spawn_blocking(move || ferrogate::bootstrap::run(&store2, keyring, name, now))
                    .await?
                    .map_err(|e| anyhow::anyhow!("bootstrap failed: {e}"))?;
            tokio::task::spawn_blocking(move || store.shutdown()).await?;
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", serde_json::to_string(&creds)?)?;
            out.flush()?;
            Ok(())
        }),
        Command::Boarding { command } => runtime.block_on(ferrogate::boarding::cli::run(command)),
        Command::Bins {
            command: BinsCommand::Import(args),
        } => runtime.block_on(ferrogate::bins::import::run(args)),
        Command::Surcharge {
            db,
            product_transaction_id,
            percent,
        } => runtime.block_on(async {
            let store = ferrogate::db::Store::open_and_migrate(&db.database_url, 1).await?;
            let answer = store
                .write(move |conn| {
                    ferrogate::payments::surcharge::configure(conn, &product_transaction_id, &percent)
                })
                .await
                .map_err(|e| anyhow::anyhow!("{}", e.body()))?;
            tokio::task::spawn_blocking(move || store.shutdown()).await?;
            println!("{answer}");
            Ok(())
        }),
        Command::Testclock { command } => runtime.block_on(async {
            let (db, location_id, seconds) = match command {
                TestclockCommand::Show { db, location_id } => (db, location_id, None),
                TestclockCommand::Advance {
                    db,
                    location_id,
                    seconds,
                } => (db, location_id, Some(seconds)),
            };
            let store = ferrogate::db::Store::open_and_migrate(&db.database_url, 1).await?;
            let wall = Clock::system().now_ts();
            let scope = ferrogate::testclock::operator_scope();
            let clock = match seconds {
                Some(s) => {
                    store
                        .write(move |conn| ferrogate::testclock::advance(&scope, conn, &location_id, s, wall))
                        .await
                }
                None => {
                    store
                        .read(move |conn| ferrogate::testclock::show(&scope, conn, &location_id, wall))
                        .await
                }
            }
            .map_err(|e| anyhow::anyhow!("{}", e.body()))?;
            tokio::task::spawn_blocking(move || store.shutdown()).await?;
            println!("{}", clock.to_json());
            Ok(())
        }),
    }
}
