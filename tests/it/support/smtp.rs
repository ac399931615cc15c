//! A small SMTP server on loopback for the mail tests: it speaks enough
//! of RFC 5321 for a real client (EHLO, AUTH PLAIN/LOGIN, MAIL, RCPT,
//! DATA, RSET, NOOP, QUIT), keeps every message it accepts and can be
//! told to answer RCPT with a given reply.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_rustls::rustls;

/// A message as the sink received it.
#[derive(Clone, Debug)]
pub struct Mail {
    pub from: String,
    pub to: Vec<String>,
    /// The DATA section, dot-unstuffed.
    pub data: String,
    /// The AUTH PLAIN/LOGIN identity the client gave, if any.
    pub auth: Option<(String, String)>,
    /// Received after STARTTLS.
    pub secure: bool,
}

impl Mail {
    /// The message with quoted-printable soft breaks and escapes undone
    /// (the parts here are ASCII), for looking for text in either body.
    pub fn decoded(&self) -> String {
        let unfolded = self.data.replace("=\n", "");
        let bytes = unfolded.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'=' && i + 2 < bytes.len() {
                if let Ok(b) = u8::from_str_radix(&unfolded[i + 1..i + 3], 16) {
                    out.push(b);
                    i += 3;
                    continue;
                }
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).to_string()
    }

    pub fn header(&self, name: &str) -> Option<String> {
        let prefix = format!("{}:", name.to_ascii_lowercase());
        self.data
            .lines()
            .take_while(|l| !l.is_empty())
            .find(|l| l.to_ascii_lowercase().starts_with(&prefix))
            .map(|l| l[prefix.len()..].trim().to_string())
    }
}

#[derive(Default)]
struct State {
    mails: Vec<Mail>,
    /// A reply to RCPT TO instead of 250 (for example "550 5.1.1 no such user").
    rcpt_reply: Option<String>,
}

pub struct SmtpSink {
    pub port: u16,
    state: Arc<Mutex<State>>,
    /// The CA of the sink's certificate (PEM), when it offers STARTTLS.
    pub ca_pem: Option<String>,
}

impl SmtpSink {
    pub fn start() -> SmtpSink {
        SmtpSink::listen(None)
    }

    /// A sink that offers STARTTLS with a certificate for `localhost` from
    /// a throwaway CA.
    pub fn start_tls() -> SmtpSink {
        let (ca_pem, config) = tls_config();
        let mut sink = SmtpSink::listen(Some(config));
        sink.ca_pem = Some(ca_pem);
        sink
    }

    fn listen(tls: Option<Arc<rustls::ServerConfig>>) -> SmtpSink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind smtp sink");
        let port = listener.local_addr().expect("addr").port();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (state, tls) = (shared.clone(), tls.clone());
                std::thread::spawn(move || {
                    let _ = session(stream, &state, tls);
                });
            }
        });
        SmtpSink {
            port,
            state,
            ca_pem: None,
        }
    }

    /// `smtp://user:secret@127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("smtp://sink-user:sink-secret@127.0.0.1:{}", self.port)
    }

    pub fn answer_rcpt(&self, reply: Option<&str>) {
        self.state.lock().unwrap().rcpt_reply = reply.map(str::to_string);
    }

    pub fn mails(&self) -> Vec<Mail> {
        self.state.lock().unwrap().mails.clone()
    }

    /// Waits until at least `n` messages arrived.
    pub fn wait_for(&self, n: usize, limit: Duration) -> Vec<Mail> {
        crate::support::wait::wait_until(&format!("{n} mail(s) at the SMTP sink"), limit, || {
            let mails = self.mails();
            (mails.len() >= n).then_some(mails)
        })
    }
}

/// Either side of a session: plain TCP, or TLS after STARTTLS.
trait Wire: std::io::Read + Write {}
impl<T: std::io::Read + Write> Wire for T {}

/// A CA (PEM) and a server configuration for `localhost` and 127.0.0.1
/// signed by it.
fn tls_config() -> (String, Arc<rustls::ServerConfig>) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
    };
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "Ferrogate test mail CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = leaf.signed_by(&key, &ca_cert, &ca_key).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(ca_cert.der());
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in text.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).unwrap());
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    (pem, Arc::new(config))
}

/// Reads one line (through LF), byte by byte: no buffer can swallow the
/// first bytes of a TLS handshake.
fn read_line(wire: &mut dyn Wire) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        if wire.read(&mut byte)? == 0 {
            break;
        }
        line.push(byte[0]);
        if byte[0] == b'\n' {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&line).to_string())
}

fn session(
    stream: TcpStream,
    state: &Mutex<State>,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut plain = stream;
    plain.write_all(b"220 sink.test ESMTP ready\r\n")?;
    match dialogue(&mut plain, state, tls.is_some(), false)? {
        Next::Done => Ok(()),
        Next::StartTls => {
            let Some(config) = tls else { return Ok(()) };
            let conn = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
            let mut secure = rustls::StreamOwned::new(conn, plain);
            dialogue(&mut secure, state, false, true).map(|_| ())
        }
    }
}

enum Next {
    Done,
    StartTls,
}

fn dialogue(
    wire: &mut dyn Wire,
    state: &Mutex<State>,
    offer_tls: bool,
    secure: bool,
) -> std::io::Result<Next> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let reply = |wire: &mut dyn Wire, text: &str| wire.write_all(format!("{text}\r\n").as_bytes());
    let (mut from, mut to, mut auth) = (String::new(), Vec::new(), None);
    loop {
        let line = read_line(wire)?;
        if line.is_empty() {
            return Ok(Next::Done);
        }
        let line = line.trim_end().to_string();
        let upper = line.to_ascii_uppercase();
        if upper.starts_with("EHLO") {
            reply(wire, "250-sink.test")?;
            if offer_tls {
                reply(wire, "250-STARTTLS")?;
            }
            reply(wire, "250-AUTH PLAIN LOGIN")?;
            reply(wire, "250 8BITMIME")?;
        } else if upper.starts_with("HELO") {
            reply(wire, "250 sink.test")?;
        } else if upper == "STARTTLS" && offer_tls {
            reply(wire, "220 2.0.0 ready to start TLS")?;
            return Ok(Next::StartTls);
        } else if upper.starts_with("AUTH PLAIN") {
            let encoded = line[10..].trim().to_string();
            let encoded = if encoded.is_empty() {
                reply(wire, "334 ")?;
                read_line(wire)?.trim().to_string()
            } else {
                encoded
            };
            let decoded = b64.decode(encoded).unwrap_or_default();
            let parts: Vec<String> = decoded
                .split(|b| *b == 0)
                .map(|p| String::from_utf8_lossy(p).to_string())
                .collect();
            auth = parts
                .get(1)
                .zip(parts.get(2))
                .map(|(u, p)| (u.clone(), p.clone()));
            reply(wire, "235 2.7.0 authenticated")?;
        } else if upper.starts_with("AUTH LOGIN") {
            let mut answers = Vec::new();
            for prompt in ["Username:", "Password:"] {
                wire.write_all(format!("334 {}\r\n", b64.encode(prompt)).as_bytes())?;
                let l = read_line(wire)?;
                answers.push(String::from_utf8_lossy(&b64.decode(l.trim()).unwrap_or_default()).to_string());
            }
            auth = Some((answers[0].clone(), answers[1].clone()));
            reply(wire, "235 2.7.0 authenticated")?;
        } else if upper.starts_with("MAIL FROM:") {
            from = line[10..].trim().trim_matches(['<', '>']).to_string();
            to.clear();
            reply(wire, "250 2.1.0 ok")?;
        } else if upper.starts_with("RCPT TO:") {
            let custom = state.lock().unwrap().rcpt_reply.clone();
            match custom {
                Some(r) => reply(wire, &r)?,
                None => {
                    to.push(
                        line[8..]
                            .trim()
                            .split('>')
                            .next()
                            .unwrap_or("")
                            .trim_matches('<')
                            .to_string(),
                    );
                    reply(wire, "250 2.1.5 ok")?;
                }
            }
        } else if upper == "DATA" {
            reply(wire, "354 end with <CRLF>.<CRLF>")?;
            let mut data = String::new();
            loop {
                let l = read_line(wire)?;
                if l.is_empty() {
                    return Ok(Next::Done);
                }
                if l == ".\r\n" || l == ".\n" {
                    break;
                }
                let l = l.strip_prefix('.').map(str::to_string).unwrap_or(l);
                data.push_str(&l.replace("\r\n", "\n"));
            }
            state.lock().unwrap().mails.push(Mail {
                from: from.clone(),
                to: to.clone(),
                data,
                auth: auth.clone(),
                secure,
            });
            reply(wire, "250 2.0.0 queued")?;
        } else if upper == "RSET" {
            to.clear();
            reply(wire, "250 2.0.0 ok")?;
        } else if upper == "NOOP" {
            reply(wire, "250 2.0.0 ok")?;
        } else if upper == "QUIT" {
            reply(wire, "221 2.0.0 bye")?;
            return Ok(Next::Done);
        } else {
            reply(wire, "502 5.5.2 command not recognized")?;
        }
    }
}
