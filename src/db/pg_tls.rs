//! PostgreSQL over TLS, as managed PostgreSQL services require: the
//! `sslmode` and `sslrootcert` parameters of the database URL, with
//! libpq's meanings, on rustls (ring; no OpenSSL, no aws-lc).
//!
//! | `sslmode` | encrypted | certificate checked |
//! |---|---|---|
//! | absent, `disable` | no | - |
//! | `prefer` | if the server offers TLS | no |
//! | `require` | yes | no (as `verify-ca` when `sslrootcert` is given, like libpq) |
//! | `verify-ca` | yes | chain, against `sslrootcert` or the Mozilla roots |
//! | `verify-full` | yes | chain and host name |
//!
//! Without `sslmode` the connection stays plain, as before TLS support:
//! set it explicitly (libpq's own default, `prefer`, verifies nothing).

use postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_rustls::rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::crypto::{ring, verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, Error, RootCertStore, SignatureScheme,
};

/// How a URL asks to connect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// A database URL made ready for the client: the URL without our TLS
/// parameters, and the TLS connector it needs (`None`: plain).
pub struct Target {
    pub config: postgres::Config,
    /// The same settings, for the pooled connections' asynchronous client.
    pub async_config: tokio_postgres::Config,
    pub tls: Option<MakeRustls>,
}

/// Reads `sslmode` and `sslrootcert` from `url` and builds the connector.
pub fn target(url: &str) -> anyhow::Result<Target> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut mode = SslMode::Disable;
    let mut root_file = None;
    let mut rest = form_urlencoded::Serializer::new(String::new());
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        match &*key {
            "sslmode" => {
                mode = match &*value {
                    "disable" => SslMode::Disable,
                    "prefer" => SslMode::Prefer,
                    "require" => SslMode::Require,
                    "verify-ca" => SslMode::VerifyCa,
                    "verify-full" => SslMode::VerifyFull,
                    other => anyhow::bail!(
                        "sslmode={other} is not supported (use disable, prefer, require, verify-ca or verify-full)"
                    ),
                }
            }
            "sslrootcert" => root_file = Some(value.into_owned()),
            _ => {
                rest.append_pair(&key, &value);
            }
        }
    }
    let rest = rest.finish();
    let plain = if rest.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{rest}")
    };
    let mut config: postgres::Config = plain
        .parse()
        .map_err(|e| anyhow::anyhow!("the database URL is not valid: {e}"))?;
    config.ssl_mode(match mode {
        SslMode::Disable => postgres::config::SslMode::Disable,
        SslMode::Prefer => postgres::config::SslMode::Prefer,
        _ => postgres::config::SslMode::Require,
    });
    let tls = match mode {
        SslMode::Disable => None,
        _ => Some(MakeRustls::new(mode, root_file.as_deref())?),
    };
    let mut async_config: tokio_postgres::Config = plain
        .parse()
        .map_err(|e| anyhow::anyhow!("the database URL is not valid: {e}"))?;
    async_config.ssl_mode(config.get_ssl_mode());
    Ok(Target {
        config,
        async_config,
        tls,
    })
}

/// The rustls connector for the `postgres` client.
#[derive(Clone)]
pub struct MakeRustls {
    config: Arc<ClientConfig>,
}

impl MakeRustls {
    fn new(mode: SslMode, root_file: Option<&str>) -> anyhow::Result<MakeRustls> {
        let provider = Arc::new(ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| anyhow::anyhow!("TLS set-up: {e}"))?;
        // libpq: `require` with a root certificate file verifies the chain.
        let mode = match (mode, root_file) {
            (SslMode::Require, Some(_)) => SslMode::VerifyCa,
            (mode, _) => mode,
        };
        let config = match mode {
            SslMode::Prefer | SslMode::Require => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider)))
                .with_no_client_auth(),
            _ => {
                let roots = Arc::new(roots(root_file)?);
                let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                    .build()
                    .map_err(|e| anyhow::anyhow!("TLS set-up: {e}"))?;
                let verifier: Arc<dyn ServerCertVerifier> = if mode == SslMode::VerifyCa {
                    Arc::new(ChainOnly(webpki))
                } else {
                    webpki
                };
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(verifier)
                    .with_no_client_auth()
            }
        };
        Ok(MakeRustls {
            config: Arc::new(config),
        })
    }
}

/// The trusted roots: the certificates of `sslrootcert`, else the
/// Mozilla roots compiled in.
fn roots(file: Option<&str>) -> anyhow::Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    match file {
        Some(path) => {
            for cert in
                CertificateDer::pem_file_iter(path).map_err(|e| anyhow::anyhow!("sslrootcert {path}: {e}"))?
            {
                let cert = cert.map_err(|e| anyhow::anyhow!("sslrootcert {path}: {e}"))?;
                store
                    .add(cert)
                    .map_err(|e| anyhow::anyhow!("sslrootcert {path}: {e}"))?;
            }
            anyhow::ensure!(!store.is_empty(), "sslrootcert {path} holds no certificate");
        }
        None => store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    Ok(store)
}

/// `prefer` / `require`: encrypted, any certificate (libpq's meaning);
/// the handshake's signatures are still checked.
#[derive(Debug)]
struct EncryptOnly(Arc<CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain must lead to a trusted root; the name is not
/// compared.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(Error::InvalidCertificate(CertificateError::NotValidForName))
            | Err(Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

impl<S> MakeTlsConnect<S> for MakeRustls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> io::Result<RustlsConnect> {
        let name = ServerName::try_from(domain.to_string()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("TLS server name {domain:?}: {e}"),
            )
        })?;
        Ok(RustlsConnect {
            config: self.config.clone(),
            name,
        })
    }
}

/// One connection's TLS handshake.
pub struct RustlsConnect {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        let connector = tokio_rustls::TlsConnector::from(self.config);
        Box::pin(async move { connector.connect(self.name, stream).await.map(RustlsStream) })
    }
}

/// A TLS stream the `postgres` client reads and writes.
pub struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    /// No channel binding: SCRAM without `-PLUS`, as with libpq's default
    /// `channel_binding=prefer` against a client that offers none.
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_parameters_are_taken_out_of_the_url() {
        let t =
            target("postgres://app:s3cret@db.example.com:5432/pay?sslmode=verify-full&application_name=fg")
                .unwrap();
        assert!(t.tls.is_some());
        assert_eq!(t.config.get_ssl_mode(), postgres::config::SslMode::Require);
        assert_eq!(t.config.get_application_name(), Some("fg"));
        assert_eq!(t.config.get_dbname(), Some("pay"));
        let plain = target("postgres://postgres@127.0.0.1:5432/x").unwrap();
        assert!(plain.tls.is_none(), "no sslmode: plain, as before");
        assert!(target("postgres://postgres@127.0.0.1/x?sslmode=disable")
            .unwrap()
            .tls
            .is_none());
        assert!(target("postgres://postgres@127.0.0.1/x?sslmode=prefer")
            .unwrap()
            .tls
            .is_some());
    }

    #[test]
    fn refusals_name_the_problem_not_the_password() {
        let e = target("postgres://app:s3cret@h/x?sslmode=allow")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("sslmode=allow"), "{e}");
        assert!(!e.contains("s3cret"));
        let e = target("postgres://app:s3cret@h/x?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("sslrootcert /nonexistent/ca.pem"), "{e}");
        assert!(!e.contains("s3cret"));
    }
}
