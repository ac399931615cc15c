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
    let files_dir = args
        .files_dir
        .clone()
        .unwrap_or_else(|| crate::files::default_dir(&args.db.database_url));
    let files: Arc<dyn crate::files::FileStore> = Arc::new(crate::files::LocalDir::new(files_dir));
    let mailer = crate::mail::smtp::Mailer::new(
        store.clone(),
        clock.clone(),
        payments.node_id(),
        args.smtp_url.as_deref(),
        smtp_ca.as_deref(),
        mail_from,
        files.clone(),
    )?;
    mailer.start();
    if !mailer.delivers() {
        tracing::info!(
            "FERROGATE_SMTP_URL is not set: mail stays in the outbox (shown at /dev/mail with the sandbox)"
        );
    }
    // Terminal requests reach the node that holds the device.
    let router = crate::terminals::router::Router::new(
        store.clone(),
        clock.clone(),
        keyring.clone(),
        payments.node_id(),
    );
    router
        .start(Arc::new(crate::terminals::jobs::Jobs {
            store: store.clone(),
            payments: payments.clone(),
            clock: clock.clone(),
            keyring: keyring.clone(),
            sink: sink.clone(),
            public_url: Arc::from(public_url.as_str()),
        }))
        .await?;
    // Expired sessions and forgotten failed sign-ins go.
    crate::sessions::Sweeper::new(store.clone(), clock.clone()).start();
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
    let state = AppState::new(crate::http::App {
        store: store.clone(),
        keyring,
        clock,
        public_url: Arc::from(public_url.as_str()),
        metrics: metrics.clone(),
        payments: payments.clone(),
        deliveries,
        schedules,
        mailer,
        rate_limits: Arc::new(crate::http::ratelimit::RateLimits::new(
            crate::http::ratelimit::Rate::of(args.rate_limit_per_user),
            crate::http::ratelimit::Rate::of(args.rate_limit_per_address),
        )),
        sink,
        outbound,
        files,
        router,
        callers: Default::default(),
        exports: Arc::new(args.export_limits()),
    });
    let shutdown = shutdown_signal();
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
    serve_http(listener, service, args.connection_limits(), shutdown).await;
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
/// How long a client may take and how many connections it may hold.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// To send a request's head; the connection is closed after it.
    pub header_timeout: std::time::Duration,
    /// To send a request's body once its head arrived (408 after it).
    pub body_timeout: std::time::Duration,
    /// Open connections from one address.
    pub per_address: usize,
}

/// The body time limit, set once at start (the body extractor reads it).
static BODY_TIMEOUT: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();

/// The time a request's body may take to arrive.
pub fn body_timeout() -> std::time::Duration {
    BODY_TIMEOUT
        .get()
        .copied()
        .unwrap_or(std::time::Duration::from_secs(30))
}

/// Open connections per client address.
#[derive(Default)]
struct PerAddress(std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>);

impl PerAddress {
    /// Counts a new connection from `ip`, unless it already has `limit`.
    fn enter(&self, ip: std::net::IpAddr, limit: usize) -> bool {
        let mut open = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = open.entry(ip).or_default();
        if *n >= limit {
            return false;
        }
        *n += 1;
        true
    }

    fn leave(&self, ip: std::net::IpAddr) {
        let mut open = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = open.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&ip);
            }
        }
    }
}

/// What a refused connection reads before it is closed.
const TOO_MANY: &str = "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
    connection: close\r\ncontent-length: 110\r\n\r\n\
    {\"status\":503,\"name\":\"Service Unavailable\",\"message\":\"Too many connections from your address; retry shortly.\"}";

async fn serve_http<S>(
    listener: tokio::net::TcpListener,
    service: S,
    limits: ConnectionLimits,
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
    // Graceful shutdown by hand: hyper-util's watcher does not take an
    // upgradeable connection (a device's WebSocket). Each connection holds
    // a clone of `open_tx`; shutdown tells them to finish through `stop`
    // and waits until every clone is dropped.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (open_tx, mut all_closed) = tokio::sync::mpsc::channel::<()>(1);
    let _ = BODY_TIMEOUT.set(limits.body_timeout);
    let open = std::sync::Arc::new(PerAddress::default());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
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
        let ip = peer.ip();
        if !open.enter(ip, limits.per_address) {
            tracing::warn!(%ip, limit = limits.per_address, "refused a connection: too many from one address");
            tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                let mut stream = stream;
                let _ = tokio::time::timeout(
                    std::time::Duration::from_secs(1),
                    stream.write_all(TOO_MANY.as_bytes()),
                )
                .await;
                let _ = stream.shutdown().await;
            });
            continue;
        }
        // Every request of the connection carries its client's address.
        let addressed = tower::util::MapRequest::new(service.clone(), move |mut req: hyper::Request<_>| {
            req.extensions_mut()
                .insert(crate::http::ratelimit::ClientAddr(ip));
            req
        });
        let connection = hyper::server::conn::http1::Builder::new()
            .half_close(true)
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .serve_connection(
                hyper_util::rt::TokioIo::new(crate::http_errors::OurErrors::new(stream)),
                hyper_util::service::TowerToHyperService::new(addressed),
            )
            .with_upgrades();
        let open = open.clone();
        let (mut stop, held) = (stop_rx.clone(), open_tx.clone());
        tokio::spawn(async move {
            let mut connection = std::pin::pin!(connection);
            let stopping = async move {
                let _ = stop.wait_for(|stop| *stop).await.is_ok();
            };
            let ended = tokio::select! {
                ended = connection.as_mut() => ended,
                _ = stopping => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = ended {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            open.leave(ip);
            drop(held);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(open_tx);
    let _ = all_closed.recv().await;
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is
/// called, not when it is first polled: called before the `listening on`
/// line, a signal sent right after that line stops the server gracefully
/// instead of killing it.
#[cfg(unix)]
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let interrupt = signal(SignalKind::interrupt());
    let terminate = signal(SignalKind::terminate());
    async move {
        let wait = |s: std::io::Result<tokio::signal::unix::Signal>| async move {
            match s {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = wait(interrupt) => {},
            _ = wait(terminate) => {},
        }
        tracing::info!("shutdown signal received");
    }
}

#[cfg(not(unix))]
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    async {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutdown signal received");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_whole_http_answer() {
        let (head, body) = TOO_MANY.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())));
        assert!(serde_json::from_str::<serde_json::Value>(body).is_ok());
    }

    #[test]
    fn connections_are_counted_per_address() {
        let open = PerAddress::default();
        let ip: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        assert!(open.enter(ip, 2) && open.enter(ip, 2));
        assert!(!open.enter(ip, 2));
        open.leave(ip);
        assert!(open.enter(ip, 2));
        let other: std::net::IpAddr = "::1".parse().unwrap();
        assert!(open.enter(other, 2));
    }
}
