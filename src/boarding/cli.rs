//! `ferrogate boarding ...`: the operator's commands. Each prints one JSON
//! object on stdout and works while `serve` runs on the same database.

use super::{applications, offers, operators};
use crate::clock::Clock;
use crate::config::DbArgs;
use crate::db::Store;
use crate::error::ApiError;
use clap::Subcommand;
use serde_json::{json, Map, Value as Json};
use std::sync::Arc;

#[derive(Subcommand)]
pub enum BoardingCommand {
    /// Offers that merchants apply to.
    Offer {
        #[command(subcommand)]
        command: OfferCommand,
    },
    /// Operator tokens for the offer administration endpoints
    /// (`Authorization: Bearer <token>`).
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Applications.
    Application {
        #[command(subcommand)]
        command: ApplicationCommand,
    },
}

#[derive(Subcommand)]
pub enum OfferCommand {
    /// Create an active, published offer with the default keys, reachable
    /// at GET /v1/offer/vanityurl/NAME; print its offer record as JSON.
    Create {
        #[command(flatten)]
        db: DbArgs,
        /// The offer's vanity url (1-64 letters, digits, '-', '_', '.').
        #[arg(long)]
        vanity_url: String,
        /// The offer's name (default: the vanity url).
        #[arg(long)]
        name: Option<String>,
        /// Create it unpublished (not reachable until published).
        #[arg(long)]
        unpublished: bool,
        /// Print the offer as one JSON object (the only format).
        #[arg(long)]
        json: bool,
    },
    /// Print every offer as JSON.
    List {
        #[command(flatten)]
        db: DbArgs,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
pub enum TokenCommand {
    /// Create an operator token and print it (shown once) as JSON.
    Create {
        #[command(flatten)]
        db: DbArgs,
        /// What the token is for.
        #[arg(long, default_value = "operator")]
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Revoke an operator token by its tokenId.
    Revoke {
        #[command(flatten)]
        db: DbArgs,
        #[arg(long)]
        token_id: String,
    },
}

#[derive(Subcommand)]
pub enum ApplicationCommand {
    /// Turn a published (signed) application into a merchant: a location
    /// below the root with cc and ach product transactions, a developer
    /// and an administrator, as `bootstrap` makes them. Prints
    /// {applicationId, status, merchant: <bootstrap credentials>}.
    Merchant {
        #[command(flatten)]
        db: DbArgs,
        /// The applicationId.
        application_id: String,
        #[arg(long)]
        json: bool,
    },
}

/// An API error as the operator sees it: its JSON body.
fn failed(e: ApiError) -> anyhow::Error {
    anyhow::anyhow!("{}", e.body())
}

async fn open(db: &DbArgs) -> anyhow::Result<Store> {
    Store::open_and_migrate(&db.database_url, 1).await
}

async fn close(store: Store) -> anyhow::Result<()> {
    tokio::task::spawn_blocking(move || store.shutdown()).await?;
    Ok(())
}

/// Runs a write job off the async threads and closes the store.
async fn write<T: Send + 'static>(
    store: Store,
    job: impl FnOnce(&mut dyn crate::db::Conn) -> crate::error::ApiResult<T> + Send + 'static,
) -> anyhow::Result<T> {
    let s = store.clone();
    let out = tokio::task::spawn_blocking(move || s.write_blocking(job)).await?;
    close(store).await?;
    out.map_err(failed)
}

pub async fn run(command: BoardingCommand) -> anyhow::Result<()> {
    let now = Clock::system().now_ts();
    let out: Json = match command {
        BoardingCommand::Offer {
            command:
                OfferCommand::Create {
                    db,
                    vanity_url,
                    name,
                    unpublished,
                    json: _,
                },
        } => {
            let mut input = Map::new();
            input.insert("name".into(), json!(name.unwrap_or_else(|| vanity_url.clone())));
            input.insert("vanityUrl".into(), json!(vanity_url));
            input.insert("isActive".into(), json!(true));
            input.insert("isPublished".into(), json!(!unpublished));
            let store = open(&db).await?;
            write(store, move |conn| offers::create(conn, &input, now))
                .await?
                .to_json()
        }
        BoardingCommand::Offer {
            command: OfferCommand::List { db, json: _ },
        } => {
            let store = open(&db).await?;
            let list = write(store, offers::all).await?;
            json!({ "offers": list.iter().map(offers::Offer::to_json).collect::<Vec<_>>() })
        }
        BoardingCommand::Token {
            command: TokenCommand::Create { db, name, json: _ },
        } => {
            let store = open(&db).await?;
            serde_json::to_value(write(store, move |conn| operators::create(conn, &name, now)).await?)?
        }
        BoardingCommand::Token {
            command: TokenCommand::Revoke { db, token_id },
        } => {
            let store = open(&db).await?;
            let id = token_id.clone();
            let revoked = write(store, move |conn| operators::revoke(conn, &id, now)).await?;
            anyhow::ensure!(revoked, "no live operator token has the id {token_id}");
            json!({ "tokenId": token_id, "revoked": true })
        }
        BoardingCommand::Application {
            command:
                ApplicationCommand::Merchant {
                    db,
                    application_id,
                    json: _,
                },
        } => {
            let keyring = Arc::new(db.keyring()?);
            let store = open(&db).await?;
            crate::keys::check(&store, keyring.clone()).await?;
            let boarded = write(store, move |conn| {
                applications::board(conn, &keyring, &application_id, now)
            })
            .await?;
            serde_json::to_value(boarded)?
        }
    };
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{out}")?;
    stdout.flush()?;
    Ok(())
}
