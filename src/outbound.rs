//! Where the gateway's own outbound requests (postbacks) may go. Decided
//! once from the flags (`config`) and handed down (the application state,
//! the postback worker, the context of every operation), never a global.
//! A core type: the engine's context carries it without knowing postbacks.
//! Also the TLS client configuration every outbound connection uses
//! (postbacks, and `ferrogate terminal-sim` to a `https://` gateway).

use std::sync::{Arc, OnceLock};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutboundPolicy {
    /// Loopback and private targets are allowed (tests, private networks).
    pub allow_private: bool,
}

/// The client TLS configuration: ring, TLS 1.2 and 1.3, Mozilla's roots
/// (compiled in, so containers need no CA bundle), HTTP/1.1 by ALPN. Built
/// once; a configuration with extra roots is built per call (tests).
pub fn tls_config(extra_roots: Option<&RootCertStore>) -> Result<Arc<ClientConfig>, String> {
    static DEFAULT: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    match extra_roots {
        None => DEFAULT.get_or_init(|| build_tls_config(None)).clone(),
        Some(extra) => build_tls_config(Some(extra)),
    }
}

fn build_tls_config(extra_roots: Option<&RootCertStore>) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(extra) = extra_roots {
        roots.roots.extend(extra.roots.iter().cloned());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
