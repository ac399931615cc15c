//! `ferrogate serve`: open the store, migrate, listen, and shut down
//! gracefully on SIGINT/SIGTERM (in-flight requests finish first).

use crate::clock::Clock;
use crate::config::ServeArgs;
use crate::db::Store;
use crate::engine::events::EventSink;
use crate::http::{metrics::Metrics, AppState};
use anyhow::Context;
use std::io::Write;
use std::sync::Arc;
use tower::Layer;
use tower_http::normalize_path::NormalizePathLayer;

pub async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let keyring = Arc::new(args.db.keyring()?);
    let store = Store::open_and_migrate(&args.db.database_url, args.db.db_pool).await?;
    crate::keys::check(&store, keyring.clone()).await?;
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
    let clock = Clock::system();
    // The postback outbox hears of every change (requests' and the
    // reconciler's) and wakes this process's delivery worker.
    let wake = Arc::new(tokio::sync::Notify::new());
    let sink: Arc<dyn EventSink> =
        Arc::new(crate::postbacks::outbox::Outbox::new(clock.clone(), wake.clone()));
    let payments = crate::payments::Payments::new(
        store.clone(),
        Arc::new(crate::processor::SandboxProcessor::default()),
        keyring.clone(),
        clock.clone(),
        sink.clone(),
    );
    store.hold_node_lock(payments.node_id())?;
    payments
        .start_reconciler()
        .await
        .map_err(|e| anyhow::anyhow!("reconciling pending transactions: {e}"))?;
    let outbound = args.outbound();
    let deliveries = crate::postbacks::worker::Deliveries::new(
        store.clone(),
        keyring.clone(),
        payments.node_id().to_string(),
        outbound.allow_private,
        clock.clone(),
        wake,
    );
    deliveries.start();
    let schedules = crate::billing::scheduler::Schedules::new(
        store.clone(),
        payments.clone(),
        clock.clone(),
        keyring.clone(),
        sink.clone(),
        Arc::from(public_url.as_str()),
    );
    schedules.start();
    let mail_from = args
        .mail_from
        .clone()
        .unwrap_or_else(|| crate::mail::default_sender(&public_url));
    let smtp_ca = match &args.smtp_ca {
        Some(path) => Some(
            std::fs::read(path).with_context(|| format!("reading FERROGATE_SMTP_CA {}", path.display()))?,
        ),
        None => None,
    };
    let mailer = crate::mail::smtp::Mailer::new(
        store.clone(),
        clock.clone(),
        payments.node_id(),
        args.smtp_url.as_deref(),
        smtp_ca.as_deref(),
        mail_from,
    )?;
    mailer.start();
    if !mailer.delivers() {
        tracing::info!(
            "FERROGATE_SMTP_URL is not set: mail stays in the outbox (shown at /dev/mail with the sandbox)"
        );
    }
    let metrics = Arc::new(Metrics::default());
    {
        // Histogram samples are folded into buckets now and then, whether
        // or not anyone scrapes /metrics.
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
            loop {
                tick.tick().await;
                metrics.upkeep();
            }
        });
    }
    let state = AppState {
        store: store.clone(),
        keyring,
        clock,
        public_url: Arc::from(public_url.as_str()),
        metrics: metrics.clone(),
        payments: payments.clone(),
        deliveries,
        schedules,
        mailer,
        sink,
        outbound,
    };
    // The contract: the first stdout line names the address.
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on http://{addr}")?;
        out.flush()?;
    }
    tracing::info!(%addr, public_url, engine = ?store.dialect(), "ferrogate serving");
    // `/v2/contacts/` is `/v2/contacts` (the spec writes some paths with a
    // trailing slash): before routing, so every route gets it.
    let app = NormalizePathLayer::trim_trailing_slash().layer(crate::http::service(state));
    let service = tower::util::MapRequest::new(app, |request: hyper::Request<hyper::body::Incoming>| {
        request.map(axum::body::Body::new)
    });
    serve_http(listener, service, shutdown_signal()).await;
    // Payments whose clients went away may still wait for the processor.
    let unfinished = payments.drain(std::time::Duration::from_secs(15)).await;
    if unfinished > 0 {
        tracing::warn!(
            unfinished,
            "stopping with payments still waiting for the processor; the next start reconciles them"
        );
    }
    tracing::info!("stopped accepting requests; finishing writes");
    tokio::task::spawn_blocking(move || store.shutdown()).await?;
    Ok(())
}

/// Accepts connections until `shutdown`, then lets the requests in flight
/// finish. HTTP/1.1 with half-closed connections allowed: a client that
/// shuts its side right after sending (or closes the socket) still has
/// its request read and served, instead of hyper's default of dropping
/// a request whose connection reads end-of-file.
async fn serve_http<S>(
    listener: tokio::net::TcpListener,
    service: S,
    shutdown: impl std::future::Future<Output = ()>,
) where
    S: tower::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = axum::response::Response,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: back off a moment.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let connection = hyper::server::conn::http1::Builder::new()
            .half_close(true)
            .serve_connection(
                hyper_util::rt::TokioIo::new(stream),
                hyper_util::service::TowerToHyperService::new(service.clone()),
            );
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
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
