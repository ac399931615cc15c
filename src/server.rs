//! `ferrogate serve`: open the store, migrate, listen, and shut down
//! gracefully on SIGINT/SIGTERM (in-flight requests finish first).

use crate::clock::Clock;
use crate::config::ServeArgs;
use crate::db::Store;
use crate::engine::events::EventSink;
use crate::http::{app, metrics::Metrics, AppState};
use anyhow::Context;
use axum::extract::Request;
use std::io::Write;
use std::sync::Arc;

/// Reconciles what an earlier process left pending, then keeps doing so
/// in the background (other nodes may die while this one runs).
async fn start_reconciler(
    store: Store,
    payments: crate::payments::Payments,
    keyring: Arc<crate::crypto::Keyring>,
    sink: Arc<dyn EventSink>,
) -> anyhow::Result<()> {
    let now = Clock.now_ts();
    let report = crate::payments::reconcile::run_once(&store, &payments, keyring.clone(), sink.clone(), now)
        .await
        .map_err(|e| anyhow::anyhow!("reconciling pending transactions: {e}"))?;
    if report != Default::default() {
        tracing::warn!(?report, "reconciled what an interrupted run left pending");
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(10));
        tick.tick().await;
        loop {
            tick.tick().await;
            match crate::payments::reconcile::run_once(
                &store,
                &payments,
                keyring.clone(),
                sink.clone(),
                Clock.now_ts(),
            )
            .await
            {
                Ok(r) if r != Default::default() => {
                    tracing::warn!(report = ?r, "reconciled interrupted work")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "reconciliation pass failed"),
            }
        }
    });
    Ok(())
}

pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let keyring = Arc::new(args.db.keyring()?);
    let store = open_store(&args.db.database_url, args.db.db_pool).await?;
    check_data_keys(&store, keyring.clone()).await?;
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    let public_url = args
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}"))
        .trim_end_matches('/')
        .to_string();
    if args.smtp_url.is_some() {
        tracing::info!("FERROGATE_SMTP_URL is set; mail delivery arrives with the invoices feature");
    }
    let payments = crate::payments::Payments::new(Arc::new(crate::processor::SandboxProcessor::default()));
    store.hold_node_lock(&payments.node_id)?;
    // The postback outbox hears of every change: requests', and the
    // reconciler's reversals.
    let sink: Arc<dyn EventSink> = Arc::new(crate::postbacks::outbox::Outbox);
    start_reconciler(store.clone(), payments.clone(), keyring.clone(), sink.clone()).await?;
    crate::postbacks::set_policy(crate::postbacks::Policy {
        allow_private: args.postback_allow_private,
    });
    crate::postbacks::worker::start(store.clone(), keyring.clone(), payments.node_id.to_string());
    let state = AppState {
        store: store.clone(),
        keyring,
        clock: Arc::new(Clock),
        public_url: Arc::from(public_url.as_str()),
        metrics: Arc::new(Metrics::default()),
        payments: payments.clone(),
        sink,
    };
    // The contract: the first stdout line names the address.
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on http://{addr}")?;
        out.flush()?;
    }
    tracing::info!(%addr, public_url, engine = ?store.dialect(), "ferrogate serving");
    let service = tower::Layer::layer(
        &tower::util::MapRequestLayer::new(trim_trailing_slash),
        app(state),
    );
    axum::serve(listener, axum::ServiceExt::<Request>::into_make_service(service))
        .with_graceful_shutdown(shutdown_signal())
        .await?;
    tracing::info!("stopped accepting requests; finishing writes");
    tokio::task::spawn_blocking(move || store.shutdown()).await?;
    Ok(())
}

/// `/v2/contacts/` is `/v2/contacts` (the spec writes some paths with a
/// trailing slash). Runs before routing, so every route gets it.
fn trim_trailing_slash(mut req: Request) -> Request {
    let path = req.uri().path();
    if path.len() > 1 && path.ends_with('/') {
        let trimmed = path.trim_end_matches('/');
        let trimmed = if trimmed.is_empty() { "/" } else { trimmed };
        let new = match req.uri().query() {
            Some(q) => format!("{trimmed}?{q}"),
            None => trimmed.to_string(),
        };
        if let Ok(uri) = new.parse() {
            *req.uri_mut() = uri;
        }
    }
    req
}

/// Checks that this process's data keys can open what the database holds,
/// then records the current key as in use.
pub async fn check_data_keys(
    store: &Store,
    keyring: std::sync::Arc<crate::crypto::Keyring>,
) -> anyhow::Result<()> {
    let store = store.clone();
    tokio::task::spawn_blocking(move || {
        store
            .write_blocking(move |conn| crate::keys::register(conn, &keyring, chrono::Utc::now().timestamp()))
            .map_err(|e| match e {
                crate::error::ApiError::Internal(message) => anyhow::anyhow!(message),
                other => anyhow::anyhow!("{other}"),
            })
    })
    .await?
}

/// Opens the database and applies pending migrations.
pub async fn open_store(url: &str, pool: usize) -> anyhow::Result<Store> {
    let url = url.to_string();
    tokio::task::spawn_blocking(move || {
        let store = Store::open(&url, pool).context("opening the database")?;
        let applied = store.migrate().context("applying migrations")?;
        if applied > 0 {
            tracing::info!(applied, "migrations applied");
        }
        Ok(store)
    })
    .await?
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown signal received");
}
