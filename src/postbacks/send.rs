//! Outbound HTTP for postback deliveries: one POST per attempt, on a fresh
//! connection, to an address this module has checked itself.
//!
//! A postback URL is chosen by a merchant, so the request must not reach
//! the gateway's own network (SSRF) unless the operator allows it, must not
//! hold a worker longer than [`ATTEMPT_TIMEOUT`], and must not let the
//! receiver fill our memory. Hence: we resolve the host, refuse it if any of
//! its addresses is not public, and connect to the address we checked (a DNS
//! answer that changes between check and connect, "rebinding", changes
//! nothing); the whole attempt runs under one deadline; and at most
//! [`MAX_RESPONSE_EXCERPT`] bytes of the response body are read.
//!
//! Not done, on purpose: redirects are not followed (a 3xx is simply not an
//! acknowledgement), proxies from the environment are not used, and the
//! connection is never reused.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::http::uri::PathAndQuery;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::{timeout_at, Instant};
#[cfg(test)]
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

/// The bound on one attempt: resolve, connect, TLS, send and response head.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of the response body kept for the delivery log.
pub const MAX_RESPONSE_EXCERPT: usize = 1024;
/// How long the excerpt may take once the status is in (and within the
/// attempt's deadline): the status is the answer, the body only a note.
const EXCERPT_WAIT: Duration = Duration::from_secs(2);
/// Bound on what hyper buffers of a response head: a receiver cannot make
/// an attempt hold more than this (hyper's default is about 400 KiB).
const MAX_RESPONSE_BUFFER: usize = 64 * 1024;
const MAX_URL_LEN: usize = 2048;
const USER_AGENT: &str = "Ferrogate-Postbacks/1";
const ALLOW_PRIVATE_HINT: &str = "set FERROGATE_POSTBACK_ALLOW_PRIVATE=1 to allow";

/// Headers this module sets, or that would change how the message is
/// framed or the connection handled; a configured header may not use them.
const RESERVED_HEADERS: &[&str] = &[
    "connection",
    "content-length",
    "content-type",
    "expect",
    "host",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
];

/// One delivery attempt's request. `body` is form-urlencoded; this module
/// adds Host, Content-Type, Content-Length, User-Agent and Connection.
#[derive(Clone)]
pub struct Outgoing {
    pub url: String,
    /// Extra headers (signature, configured ones); names must pass
    /// [`check_header`].
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Header values (Authorization!) and the body stay out of debug output.
impl fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Outgoing")
            .field("url", &self.url)
            .field("header_names", &names)
            .field("body_len", &self.body.len())
            .finish()
    }
}

/// What an attempt came to, for the delivery log.
///
/// `status` is set when a response head arrived; `error` when none did
/// (and then says why, without the request's headers or body). `excerpt`
/// is at most [`MAX_RESPONSE_EXCERPT`] bytes of the response body, as text
/// safe to store (lossy UTF-8, no NUL), possibly cut short.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Outcome {
    pub status: Option<u16>,
    pub error: Option<String>,
    pub excerpt: String,
}

impl Outcome {
    /// The receiver took the delivery: it answered 2xx.
    pub fn acknowledged(&self) -> bool {
        matches!(self.status, Some(200..=299))
    }

    fn failed(error: impl Into<String>) -> Outcome {
        Outcome {
            status: None,
            error: Some(error.into()),
            excerpt: String::new(),
        }
    }
}

/// Config-time check of a postback URL: absolute http or https, a host, no
/// user:password@, at most 2048 characters, a valid port if any; and, when
/// `!allow_private`, not an IP literal outside public unicast space nor
/// `localhost` / `*.localhost`. Names are not resolved here: [`post`]
/// checks what they resolve to at each attempt.
///
/// The error is a sentence for the user (a 422 on field `url`).
pub fn check_url(url: &str, allow_private: bool) -> Result<(), String> {
    let target = parse_url(url)?;
    if !allow_private {
        match &target.host {
            Host::Ip(ip) if !is_public(*ip) => {
                return Err(format!(
                    "URL host {ip} is a private, loopback or reserved address; postbacks go to public addresses only (the operator allows others with FERROGATE_POSTBACK_ALLOW_PRIVATE)."
                ))
            }
            Host::Name(name) if is_local_name(name) => {
                return Err(format!(
                    "URL host {name} is this machine; postbacks go to public hosts only (the operator allows others with FERROGATE_POSTBACK_ALLOW_PRIVATE)."
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Config-time check of an extra header: a valid name that is not one this
/// module sets or one that changes framing, and a value HTTP allows
/// (visible ASCII, spaces, tabs). Never echoes the value, nor a name that
/// is not a valid header name (it may be a pasted "Authorization: …").
pub fn check_header(name: &str, value: &str) -> Result<(), String> {
    header_pair(name, value).map(|_| ())
}

/// One POST to `out.url`, bounded by [`ATTEMPT_TIMEOUT`]. Never panics and
/// never returns early without an [`Outcome`]; see there for its fields.
pub async fn post(out: &Outgoing, allow_private: bool) -> Outcome {
    post_with_roots(out, allow_private, None).await
}

/// [`post`], trusting `extra_roots` besides the built-in Mozilla roots (for
/// tests with their own CA, or an operator's private CA).
pub async fn post_with_roots(
    out: &Outgoing,
    allow_private: bool,
    extra_roots: Option<Arc<RootCertStore>>,
) -> Outcome {
    let limits = Limits {
        attempt: ATTEMPT_TIMEOUT,
        excerpt_wait: EXCERPT_WAIT,
    };
    attempt(out, allow_private, extra_roots.as_deref(), limits).await
}

/// The time bounds of an attempt, apart so tests can shorten them.
#[derive(Clone, Copy)]
struct Limits {
    attempt: Duration,
    excerpt_wait: Duration,
}

async fn attempt(
    out: &Outgoing,
    allow_private: bool,
    extra_roots: Option<&RootCertStore>,
    limits: Limits,
) -> Outcome {
    let deadline = Instant::now() + limits.attempt;
    let target = match parse_url(&out.url) {
        Ok(target) => target,
        Err(e) => return Outcome::failed(e),
    };
    let request = match build_request(&target, out) {
        Ok(request) => request,
        Err(e) => return Outcome::failed(e),
    };
    let tls = if target.https {
        match crate::outbound::tls_config(extra_roots) {
            Ok(config) => Some(config),
            Err(e) => return Outcome::failed(e),
        }
    } else {
        None
    };
    let sent = timeout_at(deadline, open_and_send(&target, request, tls, allow_private)).await;
    let (response, connection) = match sent {
        Ok(Ok(sent)) => sent,
        Ok(Err(e)) => return Outcome::failed(e),
        Err(_) => return Outcome::failed(format!("timed out after {}", describe_duration(limits.attempt))),
    };
    let status = response.status().as_u16();
    // The status is the answer; a slow or endless body only ends the read.
    let mut body = response.into_body();
    let mut kept = Vec::new();
    let excerpt_until = deadline.min(Instant::now() + limits.excerpt_wait);
    let _ = timeout_at(excerpt_until, read_excerpt(&mut body, &mut kept)).await;
    drop(body);
    drop(connection); // closes the socket, whatever the receiver still sends
    Outcome {
        status: Some(status),
        error: None,
        excerpt: excerpt_text(&kept),
    }
}

/// Resolve, check, connect, TLS if https, send; the response head.
async fn open_and_send(
    target: &Target,
    request: Request<Full<Bytes>>,
    tls: Option<Arc<ClientConfig>>,
    allow_private: bool,
) -> Result<(Response<Incoming>, Connection), String> {
    let addrs = resolve(target, allow_private).await?;
    let tcp = connect(&addrs).await?;
    let Some(config) = tls else {
        return send_on(tcp, request).await;
    };
    let name = match &target.host {
        Host::Ip(ip) => ServerName::from(*ip),
        Host::Name(name) => ServerName::try_from(name.trim_end_matches('.').to_string())
            .map_err(|_| format!("{name} is not a valid TLS server name"))?,
    };
    let stream = TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake with {} failed: {e}", target.host_header))?;
    send_on(stream, request).await
}

/// The addresses to try: the IP literal, or what the name resolves to;
/// all of them public unless `allow_private`.
async fn resolve(target: &Target, allow_private: bool) -> Result<Vec<SocketAddr>, String> {
    let addrs: Vec<SocketAddr> = match &target.host {
        Host::Ip(ip) => vec![SocketAddr::new(*ip, target.port)],
        Host::Name(name) => {
            if !allow_private && is_local_name(name) {
                return Err(format!("target host {name} is not public ({ALLOW_PRIVATE_HINT})"));
            }
            tokio::net::lookup_host((name.as_str(), target.port))
                .await
                .map_err(|e| format!("could not resolve {name}: {e}"))?
                .collect()
        }
    };
    if addrs.is_empty() {
        return Err(format!("could not resolve {}: no addresses", target.host_header));
    }
    if !allow_private {
        // Any, not all: otherwise a name with one public and one private
        // address would reach the private one whenever it came first.
        if let Some(addr) = addrs.iter().find(|a| !is_public(a.ip())) {
            return Err(format!(
                "target address {} is not public ({ALLOW_PRIVATE_HINT})",
                addr.ip()
            ));
        }
    }
    Ok(addrs)
}

/// The first address that accepts a TCP connection, in resolver order.
async fn connect(addrs: &[SocketAddr]) -> Result<TcpStream, String> {
    let mut last_error = String::from("no addresses to connect to");
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                // One small request: do not wait to coalesce its segments.
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last_error = format!("could not connect to {addr}: {e}"),
        }
    }
    Err(last_error)
}

/// The task driving one HTTP/1 connection. Dropping this aborts it, which
/// closes the socket: on a timeout, or once the excerpt is read.
struct Connection(JoinHandle<()>);

impl Drop for Connection {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn send_on<S>(
    stream: S,
    request: Request<Full<Bytes>>,
) -> Result<(Response<Incoming>, Connection), String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(MAX_RESPONSE_BUFFER)
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP handshake failed: {}", describe_error(&e)))?;
    let connection = Connection(tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %describe_error(&e), "postback connection ended with an error");
        }
    }));
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| format!("HTTP exchange failed: {}", describe_error(&e)))?;
    Ok((response, connection))
}

/// Up to [`MAX_RESPONSE_EXCERPT`] bytes of body into `kept`; it is filled
/// in place so what arrived survives the caller's timeout.
async fn read_excerpt(body: &mut Incoming, kept: &mut Vec<u8>) {
    while kept.len() < MAX_RESPONSE_EXCERPT {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    let room = MAX_RESPONSE_EXCERPT - kept.len();
                    kept.extend_from_slice(&data[..data.len().min(room)]);
                }
            }
            // A broken body does not change the outcome: the status is in.
            Some(Err(_)) | None => return,
        }
    }
}

/// The excerpt as text that any database column takes: lossy UTF-8
/// without a character cut in half at the end, NUL replaced, at most
/// [`MAX_RESPONSE_EXCERPT`] bytes.
fn excerpt_text(bytes: &[u8]) -> String {
    let bytes = match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => &bytes[..e.valid_up_to()],
        _ => bytes,
    };
    let mut text = String::from_utf8_lossy(bytes).replace('\0', "\u{FFFD}");
    if text.len() > MAX_RESPONSE_EXCERPT {
        let mut end = MAX_RESPONSE_EXCERPT;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// An error and its causes, e.g. "connection error: Connection reset by
/// peer". hyper's errors name what failed, never the message's content.
fn describe_error(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

fn describe_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

fn build_request(target: &Target, out: &Outgoing) -> Result<Request<Full<Bytes>>, String> {
    let mut builder = Request::post(target.path.as_str())
        .header(header::HOST, target.host_header.as_str())
        .header(header::USER_AGENT, USER_AGENT)
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::CONTENT_LENGTH, out.body.len())
        .header(header::CONNECTION, "close");
    for (name, value) in &out.headers {
        let (name, value) = header_pair(name, value)?;
        builder = builder.header(name, value);
    }
    builder
        .body(Full::new(Bytes::copy_from_slice(&out.body)))
        .map_err(|_| "could not build the request".to_string())
}

fn header_pair(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), String> {
    let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else {
        return Err("Header names must be letters, digits and !#$%&'*+-.^_`|~ only.".to_string());
    };
    if RESERVED_HEADERS.contains(&name.as_str()) {
        return Err(format!(
            "Header {name} is set by Ferrogate and cannot be configured."
        ));
    }
    let Ok(value) = HeaderValue::from_str(value) else {
        return Err(format!(
            "Header {name} must have a value of printable ASCII characters."
        ));
    };
    Ok((name, value))
}

// ---- URLs ----

#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    /// Lowercase, as written (a trailing dot kept).
    Name(String),
    Ip(IpAddr),
}

/// A parsed postback URL.
#[derive(Debug)]
struct Target {
    https: bool,
    host: Host,
    port: u16,
    /// Path and query, as sent in the request line; never empty.
    path: String,
    /// The Host header: host, and the port when not the scheme's default.
    host_header: String,
}

const URL_SHAPE: &str = "URL must be absolute and start with http:// or https://.";

fn parse_url(url: &str) -> Result<Target, String> {
    if url.len() > MAX_URL_LEN {
        return Err(format!("URL must be at most {MAX_URL_LEN} characters."));
    }
    // This also keeps CR, LF and spaces out of the request line.
    if !url.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(
            "URL must be ASCII without spaces (percent-encode the path, use punycode for the host)."
                .to_string(),
        );
    }
    let (scheme, rest) = url.split_once("://").ok_or(URL_SHAPE)?;
    let https = if scheme.eq_ignore_ascii_case("https") {
        true
    } else if scheme.eq_ignore_ascii_case("http") {
        false
    } else {
        return Err(URL_SHAPE.to_string());
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    if authority.contains('@') {
        return Err("URL must not contain a user name or password.".to_string());
    }
    let (host, port) = split_host_port(authority)?;
    let default_port = if https { 443 } else { 80 };
    let port = match port {
        None => default_port,
        Some(text) => parse_port(text)?,
    };
    // The fragment is the receiver's browser's business, never sent.
    let tail = tail.split('#').next().unwrap_or_default();
    let path = if tail.starts_with('/') {
        tail.to_string()
    } else {
        format!("/{tail}")
    };
    // hyper's own parser: a URL accepted here can be sent later.
    if path.parse::<PathAndQuery>().is_err() {
        return Err("URL path and query must percent-encode special characters.".to_string());
    }
    let host_text = match &host {
        Host::Name(name) => name.clone(),
        Host::Ip(IpAddr::V4(ip)) => ip.to_string(),
        Host::Ip(IpAddr::V6(ip)) => format!("[{ip}]"),
    };
    let host_header = if port == default_port {
        host_text
    } else {
        format!("{host_text}:{port}")
    };
    Ok(Target {
        https,
        host,
        port,
        path,
        host_header,
    })
}

fn split_host_port(authority: &str) -> Result<(Host, Option<&str>), String> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (inside, after) = rest.split_once(']').ok_or("URL host has a [ without its ].")?;
        let ip: Ipv6Addr = inside
            .parse()
            .map_err(|_| "URL host in brackets must be an IPv6 address.")?;
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or("URL must have a : between the host and the port.")?,
            ),
        };
        return Ok((Host::Ip(IpAddr::V6(ip)), port));
    }
    match authority.split_once(':') {
        Some((_, port)) if port.contains(':') => {
            Err("URL must put an IPv6 address in brackets, like http://[2001:db8::1]/.".to_string())
        }
        Some((host, port)) => Ok((parse_host(host)?, Some(port))),
        None => Ok((parse_host(authority)?, None)),
    }
}

fn parse_host(host: &str) -> Result<Host, String> {
    if host.is_empty() {
        return Err("URL must have a host.".to_string());
    }
    let name = host.to_ascii_lowercase();
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_');
    if !name.bytes().all(allowed) {
        return Err(
            "URL host must be a domain name (punycode for international names) or an IP address.".to_string(),
        );
    }
    let bare = name.strip_suffix('.').unwrap_or(&name);
    if bare.is_empty() || bare.len() > 253 || bare.split('.').any(|l| l.is_empty() || l.len() > 63) {
        return Err("URL host is not a valid domain name.".to_string());
    }
    // A numeric last label makes resolvers read the whole name as an IPv4
    // address, including forms like 127.1, 0x7f.0.0.1 or 2130706433; only
    // the plain dotted form is accepted, so what we check is what is used.
    let last = bare.rsplit('.').next().unwrap_or_default();
    if last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x") {
        return bare
            .parse::<Ipv4Addr>()
            .map(|ip| Host::Ip(IpAddr::V4(ip)))
            .map_err(|_| "URL host must be an IPv4 address in the form 203.0.113.7.".to_string());
    }
    Ok(Host::Name(name))
}

fn parse_port(text: &str) -> Result<u16, String> {
    let port = if text.len() <= 5 && !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse::<u16>().ok()
    } else {
        None
    };
    match port {
        Some(port) if port != 0 => Ok(port),
        _ => Err("URL port must be a number from 1 to 65535.".to_string()),
    }
}

/// `localhost` and its subdomains, which resolvers answer locally
/// (RFC 6761) whatever DNS says.
fn is_local_name(name: &str) -> bool {
    let bare = name.strip_suffix('.').unwrap_or(name);
    bare == "localhost" || bare.ends_with(".localhost")
}

// ---- Public addresses ----

/// IPv4 ranges that are not public unicast: "this network", private,
/// CGNAT, loopback, link-local, IETF protocol assignments, documentation,
/// benchmarking, multicast, reserved and broadcast.
const V4_NOT_PUBLIC: &[([u8; 4], u32)] = &[
    ([0, 0, 0, 0], 8),
    ([10, 0, 0, 0], 8),
    ([100, 64, 0, 0], 10),
    ([127, 0, 0, 0], 8),
    ([169, 254, 0, 0], 16),
    ([172, 16, 0, 0], 12),
    ([192, 0, 0, 0], 24),
    ([192, 0, 2, 0], 24),
    ([192, 168, 0, 0], 16),
    ([198, 18, 0, 0], 15),
    ([198, 51, 100, 0], 24),
    ([203, 0, 113, 0], 24),
    ([224, 0, 0, 0], 4),
    ([240, 0, 0, 0], 4), // includes 255.255.255.255
];

/// IPv6 ranges that are not public unicast. Those embedding an IPv4
/// address (mapped, NAT64, 6to4) are judged by that address instead.
const V6_NOT_PUBLIC: &[(u128, u32)] = &[
    (0, 96),                      // ::, ::1, IPv4-compatible (deprecated)
    (0x0064_ff9b_0001 << 80, 48), // local-use NAT64
    (0x0100 << 112, 64),          // discard-only
    (0x2001_0000 << 96, 32),      // Teredo
    (0x2001_0db8 << 96, 32),      // documentation
    (0xfc00 << 112, 7),           // unique local
    (0xfe80 << 112, 10),          // link-local
    (0xfec0 << 112, 10),          // site-local (deprecated)
    (0xff00 << 112, 8),           // multicast
];

/// Whether a postback may go to `ip` without FERROGATE_POSTBACK_ALLOW_PRIVATE.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => is_public_v4(ip),
        IpAddr::V6(ip) => is_public_v6(ip),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let bits = u32::from(ip);
    !V4_NOT_PUBLIC.iter().any(|&(net, len)| {
        let mask = u32::MAX << (32 - len);
        bits & mask == u32::from(Ipv4Addr::from(net)) & mask
    })
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let bits = u128::from(ip);
    let in_net = |net: u128, len: u32| {
        let mask = u128::MAX << (128 - len);
        bits & mask == net & mask
    };
    // IPv4-mapped ::ffff:0:0/96 and NAT64 64:ff9b::/96: the low 32 bits.
    if in_net(0xffff << 32, 96) || in_net(0x0064_ff9b << 96, 96) {
        return is_public_v4(Ipv4Addr::from(bits as u32));
    }
    // 6to4 2002::/16: the 32 bits after the prefix.
    if in_net(0x2002 << 112, 16) {
        return is_public_v4(Ipv4Addr::from((bits >> 80) as u32));
    }
    !V6_NOT_PUBLIC.iter().any(|&(net, len)| in_net(net, len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    const SECRET_HEADER_VALUE: &str = "Bearer sekret-token-123";
    const BODY: &[u8] = b"event=sale.approved&amount=12.34&card_last4=4242";

    fn outgoing(url: String) -> Outgoing {
        Outgoing {
            url,
            headers: vec![
                ("Authorization".to_string(), SECRET_HEADER_VALUE.to_string()),
                ("webhook-id".to_string(), "msg_1".to_string()),
            ],
            body: BODY.to_vec(),
        }
    }

    fn short(attempt_ms: u64, excerpt_wait_ms: u64) -> Limits {
        Limits {
            attempt: Duration::from_millis(attempt_ms),
            excerpt_wait: Duration::from_millis(excerpt_wait_ms),
        }
    }

    /// Errors must never carry the request's header values or body.
    fn assert_no_secrets(outcome: &Outcome) {
        let error = outcome.error.as_deref().unwrap_or_default();
        assert!(!error.contains("sekret"), "{error}");
        assert!(!error.contains("card_last4"), "{error}");
    }

    /// What a test receiver saw of a request.
    #[derive(Debug)]
    struct Seen {
        head: String,
        body: Vec<u8>,
    }

    impl Seen {
        fn request_line(&self) -> &str {
            self.head.lines().next().unwrap()
        }

        fn header(&self, name: &str) -> Option<&str> {
            self.head.lines().skip(1).find_map(|line| {
                let (n, v) = line.split_once(':')?;
                n.eq_ignore_ascii_case(name).then(|| v.trim())
            })
        }
    }

    async fn read_request<S: AsyncRead + Unpin>(stream: &mut S) -> Seen {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8(buf[..end].to_vec()).unwrap();
                let seen = Seen {
                    head,
                    body: Vec::new(),
                };
                let len: usize = seen.header("content-length").unwrap().parse().unwrap();
                while buf.len() < end + 4 + len {
                    let n = stream.read(&mut chunk).await.unwrap();
                    assert!(n > 0, "request cut short");
                    buf.extend_from_slice(&chunk[..n]);
                }
                return Seen {
                    body: buf[end + 4..end + 4 + len].to_vec(),
                    ..seen
                };
            }
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "request cut short");
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    async fn listener() -> (TcpListener, u16) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        (listener, port)
    }

    /// A receiver for one connection: reads the request, then hands the
    /// stream to `respond`; the task's result is what it saw.
    async fn receiver<F, Fut>(respond: F) -> (u16, JoinHandle<Seen>)
    where
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        let (listener, port) = listener().await;
        let task = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let seen = read_request(&mut stream).await;
            respond(stream).await;
            seen
        });
        (port, task)
    }

    /// A receiver answering `response` verbatim, then closing.
    async fn answering(response: &'static str) -> (u16, JoinHandle<Seen>) {
        receiver(move |mut stream| async move {
            stream.write_all(response.as_bytes()).await.unwrap();
            let _ = stream.shutdown().await;
        })
        .await
    }

    #[tokio::test]
    async fn acknowledged_2xx_and_the_receiver_sees_the_request() {
        let (port, seen) = answering("HTTP/1.1 201 Created\r\nContent-Length: 11\r\n\r\nthanks, ok!").await;
        let out = outgoing(format!(
            "http://127.0.0.1:{port}/hooks/in?merchant=7&x=a%20b#frag"
        ));
        let outcome = post(&out, true).await;
        assert_eq!(
            outcome,
            Outcome {
                status: Some(201),
                error: None,
                excerpt: "thanks, ok!".to_string()
            }
        );
        assert!(outcome.acknowledged());

        let seen = seen.await.unwrap();
        assert_eq!(seen.request_line(), "POST /hooks/in?merchant=7&x=a%20b HTTP/1.1");
        let host = format!("127.0.0.1:{port}");
        assert_eq!(seen.header("host"), Some(host.as_str()));
        assert_eq!(
            seen.header("content-type"),
            Some("application/x-www-form-urlencoded")
        );
        assert_eq!(
            seen.header("content-length"),
            Some(BODY.len().to_string().as_str())
        );
        assert_eq!(seen.header("user-agent"), Some("Ferrogate-Postbacks/1"));
        assert_eq!(seen.header("connection"), Some("close"));
        assert_eq!(seen.header("authorization"), Some(SECRET_HEADER_VALUE));
        assert_eq!(seen.header("webhook-id"), Some("msg_1"));
        assert_eq!(seen.body, BODY);
    }

    #[tokio::test]
    async fn a_url_without_a_path_posts_to_slash() {
        let (port, seen) = answering("HTTP/1.1 204 No Content\r\n\r\n").await;
        let outcome = post(&outgoing(format!("http://127.0.0.1:{port}?a=1")), true).await;
        assert_eq!(outcome.status, Some(204));
        assert!(outcome.acknowledged());
        assert_eq!(outcome.excerpt, "");
        assert_eq!(seen.await.unwrap().request_line(), "POST /?a=1 HTTP/1.1");
    }

    #[tokio::test]
    async fn non_2xx_is_reported_and_not_acknowledged() {
        for (response, status, excerpt) in [
            (
                "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy",
                503,
                "busy",
            ),
            ("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", 404, ""),
            // Redirects are not followed.
            (
                "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/\r\nContent-Length: 0\r\n\r\n",
                302,
                "",
            ),
            // An interim 1xx is skipped; the final status counts.
            (
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 500 Oops\r\nContent-Length: 3\r\n\r\nbad",
                500,
                "bad",
            ),
        ] {
            let (port, seen) = answering(response).await;
            let outcome = post(&outgoing(format!("http://127.0.0.1:{port}/")), true).await;
            assert_eq!(outcome.status, Some(status), "{outcome:?}");
            assert_eq!(outcome.error, None);
            assert_eq!(outcome.excerpt, excerpt);
            assert!(!outcome.acknowledged());
            seen.await.unwrap();
        }
    }

    #[test]
    fn acknowledged_means_2xx() {
        let with = |status| Outcome {
            status,
            ..Outcome::default()
        };
        assert!(with(Some(200)).acknowledged());
        assert!(with(Some(299)).acknowledged());
        assert!(!with(Some(199)).acknowledged());
        assert!(!with(Some(300)).acknowledged());
        assert!(!with(None).acknowledged());
    }

    #[tokio::test]
    async fn a_refused_connection_is_an_error() {
        let (listener, port) = listener().await;
        drop(listener);
        let outcome = post(&outgoing(format!("http://127.0.0.1:{port}/")), true).await;
        assert_eq!(outcome.status, None);
        assert!(!outcome.acknowledged());
        let error = outcome.error.as_deref().unwrap();
        assert!(
            error.starts_with(&format!("could not connect to 127.0.0.1:{port}: ")),
            "{error}"
        );
        assert!(error.to_lowercase().contains("refused"), "{error}");
        assert_no_secrets(&outcome);
    }

    #[tokio::test]
    async fn a_silent_receiver_times_out() {
        let (port, _seen) = receiver(|stream| async move {
            // Holds the connection open, never answering.
            tokio::time::sleep(Duration::from_secs(30)).await;
            drop(stream);
        })
        .await;
        let started = std::time::Instant::now();
        let out = outgoing(format!("http://127.0.0.1:{port}/"));
        let outcome = attempt(&out, true, None, short(1000, 2000)).await;
        let elapsed = started.elapsed();
        assert_eq!(outcome.error.as_deref(), Some("timed out after 1 s"));
        assert_eq!(outcome.status, None);
        assert!(elapsed >= Duration::from_millis(900), "{elapsed:?}");
        // Far below the receiver's 30 s, with room for a loaded machine.
        assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    }

    #[tokio::test]
    async fn a_receiver_that_never_accepts_times_out() {
        // The kernel completes the handshake into the backlog; nobody reads.
        let (_listener, port) = listener().await;
        let out = outgoing(format!("http://127.0.0.1:{port}/"));
        let outcome = attempt(&out, true, None, short(500, 2000)).await;
        assert_eq!(outcome.error.as_deref(), Some("timed out after 500 ms"));
    }

    #[tokio::test]
    async fn an_endless_body_is_capped_and_does_not_hold_us() {
        let (port, seen) = receiver(|mut stream| async move {
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
                .await
                .unwrap();
            // No length: the body runs until we close, which must be soon.
            let chunk = vec![b'x'; 64 * 1024];
            let started = std::time::Instant::now();
            while stream.write_all(&chunk).await.is_ok() {
                assert!(started.elapsed() < Duration::from_secs(15), "still read");
            }
        })
        .await;
        let started = std::time::Instant::now();
        let out = outgoing(format!("http://127.0.0.1:{port}/"));
        let outcome = attempt(&out, true, None, short(30_000, 20_000)).await;
        // Well under the 20 s excerpt wait: reading stops at the cap.
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
        assert_eq!(outcome.status, Some(200));
        assert_eq!(outcome.excerpt, "x".repeat(MAX_RESPONSE_EXCERPT));
        // The receiver's writes fail: we closed the connection.
        tokio::time::timeout(Duration::from_secs(15), seen)
            .await
            .expect("the connection was not closed")
            .unwrap();
    }

    #[tokio::test]
    async fn a_slow_body_keeps_what_arrived_within_the_wait() {
        let (port, _seen) = receiver(|mut stream| async move {
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello")
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_secs(30)).await;
        })
        .await;
        let started = std::time::Instant::now();
        let out = outgoing(format!("http://127.0.0.1:{port}/"));
        let outcome = attempt(&out, true, None, short(5000, 300)).await;
        let elapsed = started.elapsed();
        assert_eq!(
            outcome,
            Outcome {
                status: Some(200),
                error: None,
                excerpt: "hello".to_string()
            }
        );
        assert!(elapsed >= Duration::from_millis(250), "{elapsed:?}");
        // Far below the receiver's 30 s, with room for a loaded machine.
        assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    }

    #[tokio::test]
    async fn private_targets_are_refused_without_connecting() {
        let (listener, port) = listener().await;
        for host in ["127.0.0.1", "localhost", "LocalHost."] {
            let out = outgoing(format!("http://{host}:{port}/"));
            let outcome = attempt(&out, false, None, short(1000, 100)).await;
            let error = outcome.error.as_deref().unwrap();
            assert!(
                error.ends_with(" is not public (set FERROGATE_POSTBACK_ALLOW_PRIVATE=1 to allow)"),
                "{error}"
            );
            assert_eq!(outcome.status, None);
        }
        let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
        assert!(accepted.is_err(), "a refused target was connected to");

        // Connecting to these would time out; refusing them does not.
        for (url, address) in [
            ("http://10.1.2.3/", "10.1.2.3"),
            ("https://[::1]:8443/", "::1"),
            ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),
            ("http://100.64.0.1/", "100.64.0.1"),
            ("http://[::ffff:192.168.0.1]/", "::ffff:192.168.0.1"),
            ("http://[64:ff9b::a00:1]/", "64:ff9b::a00:1"),
            ("http://0.0.0.0/", "0.0.0.0"),
        ] {
            let outcome = attempt(&outgoing(url.to_string()), false, None, short(1000, 100)).await;
            assert_eq!(
                outcome.error,
                Some(format!(
                    "target address {address} is not public (set FERROGATE_POSTBACK_ALLOW_PRIVATE=1 to allow)"
                )),
                "{url}"
            );
            assert_no_secrets(&outcome);
        }
    }

    #[tokio::test]
    async fn bad_urls_and_headers_fail_before_connecting() {
        let outcome = post(&outgoing("ftp://example.com/".to_string()), false).await;
        assert_eq!(outcome.error.as_deref(), Some(URL_SHAPE));

        let (listener, port) = listener().await;
        for (name, value) in [
            ("Content-Length", "1"),
            ("Host", "other.example"),
            ("Transfer-Encoding", "chunked"),
            ("X-Sig", "line\r\nbreak: sekret"),
            ("Bad Name", "sekret"),
        ] {
            let mut out = outgoing(format!("http://127.0.0.1:{port}/"));
            out.headers.push((name.to_string(), value.to_string()));
            let outcome = post(&out, true).await;
            assert!(outcome.error.is_some(), "{name}");
            assert_no_secrets(&outcome);
        }
        let accepted = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await;
        assert!(accepted.is_err(), "a bad request was sent");
    }

    #[test]
    fn check_header_refuses_reserved_names_and_bad_values() {
        assert_eq!(check_header("Authorization", "Bearer abc"), Ok(()));
        assert_eq!(check_header("X-Merchant", "7"), Ok(()));
        assert_eq!(
            check_header("Content-Type", "application/json"),
            Err("Header content-type is set by Ferrogate and cannot be configured.".to_string())
        );
        for name in ["host", "Connection", "TE", "upgrade", "user-agent"] {
            assert!(check_header(name, "x").is_err(), "{name}");
        }
        let err = check_header("X-Token", "abc\ndef").unwrap_err();
        assert_eq!(
            err,
            "Header x-token must have a value of printable ASCII characters."
        );
        for name in ["", "Authorization: Bearer sekret", "X Y", "é"] {
            let err = check_header(name, "v").unwrap_err();
            assert!(!err.contains("sekret"), "{err}");
        }
    }

    #[test]
    fn check_url_accepts_public_http_and_https() {
        for url in [
            "https://example.com",
            "https://example.com/",
            "HTTPS://Example.COM/Path?Q=1",
            "http://example.com:8080/a/b?c=d&e=%20f",
            "https://example.com?x=1",
            "https://example.com#frag",
            "https://example.com./",
            "http://a_b.example.com/",
            "https://xn--bcher-kva.example/",
            "https://8.8.8.8/",
            "https://[2606:4700:4700::1111]:8443/x",
            "http://172.32.0.1/",
            "http://100.128.0.1/",
            "http://198.20.0.1/",
            "http://11.0.0.1/",
            "http://[2002:808:808::1]/",
            "https://localhost.example.com/",
            "http://123.example/",
        ] {
            assert_eq!(check_url(url, false), Ok(()), "{url}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN - 20));
        assert_eq!(long.len(), MAX_URL_LEN);
        assert_eq!(check_url(&long, false), Ok(()));
    }

    #[test]
    fn check_url_refuses_malformed_urls() {
        let too_long = format!("https://example.com/{}", "a".repeat(MAX_URL_LEN));
        let refused = [
            "",
            "example.com",
            "//example.com/",
            "ftp://example.com/",
            "javascript://example.com/",
            "http:/example.com/",
            "http://",
            "http:///path",
            "http://?q",
            "http://user:pw@example.com/",
            "http://user@example.com/",
            "http://example.com@evil.example/",
            "http://good.example\\@evil.example/",
            "http://example.com:0/",
            "http://example.com:65536/",
            "http://example.com:123456/",
            "http://example.com:-1/",
            "http://example.com:abc/",
            "http://example.com:/",
            "http://exa mple.com/",
            "http://example.com/a b",
            "http://example.com/\r\nX: y",
            "http://exämple.com/",
            "http://example..com/",
            "http://.example.com/",
            "http://%65xample.com/",
            "http://[::1/",
            "http://::1/",
            "http://[zz::1]/",
            "http://[fe80::1%25eth0]/",
            "http://[::1]x/",
            "http://1.2.3.4.5/",
            "http://127.1/",
            "http://2130706433/",
            "http://0x7f.0.0.1/",
            "http://010.0.0.1/",
            "http://256.1.1.1/",
            too_long.as_str(),
        ];
        for url in refused {
            for allow_private in [false, true] {
                let err = check_url(url, allow_private).unwrap_err();
                assert!(err.starts_with("URL "), "{url}: {err}");
                assert!(err.ends_with('.'), "{url}: {err}");
            }
        }
    }

    #[test]
    fn check_url_refuses_private_hosts_unless_allowed() {
        for host in [
            "127.0.0.1",
            "127.255.0.9",
            "10.0.0.1",
            "172.16.5.4",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "198.18.0.1",
            "198.19.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "198.51.100.1",
            "203.0.113.1",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "[::]",
            "[::1]",
            "[::127.0.0.1]",
            "[fc00::1]",
            "[fd12:3456::1]",
            "[fe80::1]",
            "[febf::1]",
            "[fec0::1]",
            "[ff02::1]",
            "[2001:db8::1]",
            "[2001::1]",
            "[::ffff:127.0.0.1]",
            "[::ffff:10.0.0.1]",
            "[::ffff:a9fe:a9fe]",
            "[64:ff9b::7f00:1]",
            "[64:ff9b:1::1]",
            "[2002:a00:1::]",
            "[100::1]",
            "localhost",
            "LOCALHOST",
            "localhost.",
            "api.localhost",
        ] {
            let url = format!("http://{host}:8080/hook");
            let err = check_url(&url, false).unwrap_err();
            assert!(err.starts_with("URL host "), "{url}: {err}");
            assert!(err.contains("only"), "{url}: {err}");
            assert!(err.contains("FERROGATE_POSTBACK_ALLOW_PRIVATE"), "{url}: {err}");
            assert_eq!(check_url(&url, true), Ok(()), "{url}");
        }
    }

    #[test]
    fn targets_carry_host_header_port_and_path() {
        let t = parse_url("https://Example.com:443").unwrap();
        assert_eq!(
            (t.https, t.port, t.path.as_str(), t.host_header.as_str()),
            (true, 443, "/", "example.com")
        );
        let t = parse_url("http://[2001:db8::1]:8080/a?b#c").unwrap();
        assert_eq!(t.host, Host::Ip("2001:db8::1".parse().unwrap()));
        assert_eq!(
            (t.https, t.port, t.path.as_str(), t.host_header.as_str()),
            (false, 8080, "/a?b", "[2001:db8::1]:8080")
        );
        let t = parse_url("http://203.0.113.7:80/").unwrap();
        assert_eq!((t.port, t.host_header.as_str()), (80, "203.0.113.7"));
    }

    #[test]
    fn excerpt_text_is_storable() {
        assert_eq!(excerpt_text(b"ok"), "ok");
        assert_eq!(excerpt_text(b"a\0b"), "a\u{FFFD}b");
        assert_eq!(excerpt_text(b"a\xffb"), "a\u{FFFD}b");
        // A character cut at the end of what was read is dropped.
        assert_eq!(excerpt_text("héllo wörld".as_bytes()[..9].as_ref()), "héllo w");
        // Lossy decoding cannot push it past the cap.
        let text = excerpt_text(&[0xff; MAX_RESPONSE_EXCERPT]);
        assert!(text.len() <= MAX_RESPONSE_EXCERPT);
        assert!(text.chars().all(|c| c == '\u{FFFD}'));
    }

    #[test]
    fn outgoing_debug_hides_header_values_and_body() {
        let text = format!("{:?}", outgoing("https://example.com/".to_string()));
        assert!(text.contains("Authorization"), "{text}");
        assert!(!text.contains("sekret"), "{text}");
        assert!(!text.contains("card_last4"), "{text}");
    }

    #[test]
    fn post_can_be_spawned() {
        fn assert_send<T: Send>(_: &T) {}
        let out = outgoing("https://example.com/".to_string());
        assert_send(&post(&out, false));
        assert_send(&post_with_roots(&out, false, None));
    }

    // ---- TLS ----

    const LOCAL_NAMES: &[&str] = &["localhost", "127.0.0.1"];

    /// A throwaway CA and a server configuration with a certificate it
    /// signed for `names` (DNS names or IP addresses).
    fn test_pki(names: &[&str]) -> (Arc<RootCertStore>, Arc<rustls::ServerConfig>) {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
            KeyUsagePurpose,
        };
        use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "Ferrogate test CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca.self_signed(&ca_key).unwrap();

        let leaf_key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut leaf = CertificateParams::new(names).unwrap();
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let leaf_cert = leaf.signed_by(&leaf_key, &ca_cert, &ca_key).unwrap();

        let mut roots = RootCertStore::empty();
        roots.add(ca_cert.der().clone()).unwrap();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![leaf_cert.der().clone()], key)
            .unwrap();
        (Arc::new(roots), Arc::new(server))
    }

    /// An https receiver answering 200 "tls ok" to each request; returns
    /// its port and a channel of the request lines it saw.
    async fn tls_receiver(
        config: Arc<rustls::ServerConfig>,
    ) -> (u16, tokio::sync::mpsc::UnboundedReceiver<String>) {
        let (listener, port) = listener().await;
        let (seen_tx, seen_rx) = tokio::sync::mpsc::unbounded_channel();
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                let acceptor = acceptor.clone();
                let seen_tx = seen_tx.clone();
                tokio::spawn(async move {
                    // An untrusting client aborts the handshake: no request.
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let seen = read_request(&mut tls).await;
                    let _ = seen_tx.send(seen.request_line().to_string());
                    let response = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\ntls ok";
                    tls.write_all(response.as_bytes()).await.unwrap();
                    let _ = tls.shutdown().await;
                });
            }
        });
        (port, seen_rx)
    }

    #[tokio::test]
    async fn https_to_a_server_signed_by_a_trusted_ca() {
        let (roots, server) = test_pki(LOCAL_NAMES);
        let (port, mut seen) = tls_receiver(server).await;
        for host in ["localhost", "127.0.0.1"] {
            let out = outgoing(format!("https://{host}:{port}/tls?x=1"));
            let outcome = post_with_roots(&out, true, Some(roots.clone())).await;
            assert_eq!(
                outcome,
                Outcome {
                    status: Some(200),
                    error: None,
                    excerpt: "tls ok".to_string()
                },
                "{host}"
            );
            assert_eq!(seen.recv().await.unwrap(), "POST /tls?x=1 HTTP/1.1");
        }
    }

    #[tokio::test]
    async fn https_refuses_an_untrusted_certificate() {
        let (_roots, server) = test_pki(LOCAL_NAMES);
        let (port, mut seen) = tls_receiver(server.clone()).await;
        let out = outgoing(format!("https://localhost:{port}/"));
        let outcome = post(&out, true).await;
        assert_eq!(outcome.status, None);
        let error = outcome.error.as_deref().unwrap();
        assert!(
            error.starts_with(&format!("TLS handshake with localhost:{port} failed: ")),
            "{error}"
        );
        assert!(error.contains("certificate"), "{error}");
        assert_no_secrets(&outcome);

        // Trusting a different CA does not help either.
        let (other_roots, _) = test_pki(LOCAL_NAMES);
        let outcome = post_with_roots(&out, true, Some(other_roots)).await;
        assert!(outcome.error.unwrap().contains("certificate"));
        assert!(seen.try_recv().is_err(), "a request went over untrusted TLS");
    }

    #[tokio::test]
    async fn https_checks_the_name_in_the_certificate() {
        let (roots, server) = test_pki(&["other.example"]);
        let (port, mut seen) = tls_receiver(server).await;
        let out = outgoing(format!("https://localhost:{port}/"));
        let outcome = post_with_roots(&out, true, Some(roots)).await;
        let error = outcome.error.unwrap();
        assert!(error.contains("certificate not valid for name"), "{error}");
        assert!(seen.try_recv().is_err(), "a request went to the wrong name");
    }
}
