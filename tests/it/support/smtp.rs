//! A small SMTP server on loopback for the mail tests: it speaks enough
//! of RFC 5321 for a real client (EHLO, AUTH PLAIN/LOGIN, MAIL, RCPT,
//! DATA, RSET, NOOP, QUIT), keeps every message it accepts and can be
//! told to answer RCPT with a given reply.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A message as the sink received it.
#[derive(Clone, Debug)]
pub struct Mail {
    pub from: String,
    pub to: Vec<String>,
    /// The DATA section, dot-unstuffed.
    pub data: String,
    /// The AUTH PLAIN/LOGIN identity the client gave, if any.
    pub auth: Option<(String, String)>,
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
}

impl SmtpSink {
    pub fn start() -> SmtpSink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind smtp sink");
        let port = listener.local_addr().expect("addr").port();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = shared.clone();
                std::thread::spawn(move || {
                    let _ = session(stream, &state);
                });
            }
        });
        SmtpSink { port, state }
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

fn session(stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut out = stream.try_clone()?;
    let mut lines = BufReader::new(stream);
    let reply = |out: &mut TcpStream, text: &str| out.write_all(format!("{text}\r\n").as_bytes());
    reply(&mut out, "220 sink.test ESMTP ready")?;
    let (mut from, mut to, mut auth) = (String::new(), Vec::new(), None);
    loop {
        let mut line = String::new();
        if lines.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim_end().to_string();
        let upper = line.to_ascii_uppercase();
        if upper.starts_with("EHLO") {
            reply(&mut out, "250-sink.test")?;
            reply(&mut out, "250-AUTH PLAIN LOGIN")?;
            reply(&mut out, "250 8BITMIME")?;
        } else if upper.starts_with("HELO") {
            reply(&mut out, "250 sink.test")?;
        } else if upper.starts_with("AUTH PLAIN") {
            let encoded = line[10..].trim().to_string();
            let encoded = if encoded.is_empty() {
                reply(&mut out, "334 ")?;
                let mut l = String::new();
                lines.read_line(&mut l)?;
                l.trim().to_string()
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
            reply(&mut out, "235 2.7.0 authenticated")?;
        } else if upper.starts_with("AUTH LOGIN") {
            let mut ask = |out: &mut TcpStream, prompt: &str| -> std::io::Result<String> {
                out.write_all(format!("334 {}\r\n", b64.encode(prompt)).as_bytes())?;
                let mut l = String::new();
                lines.read_line(&mut l)?;
                Ok(String::from_utf8_lossy(&b64.decode(l.trim()).unwrap_or_default()).to_string())
            };
            let user = ask(&mut out, "Username:")?;
            let pass = ask(&mut out, "Password:")?;
            auth = Some((user, pass));
            reply(&mut out, "235 2.7.0 authenticated")?;
        } else if upper.starts_with("MAIL FROM:") {
            from = line[10..].trim().trim_matches(['<', '>']).to_string();
            to.clear();
            reply(&mut out, "250 2.1.0 ok")?;
        } else if upper.starts_with("RCPT TO:") {
            let custom = state.lock().unwrap().rcpt_reply.clone();
            match custom {
                Some(r) => reply(&mut out, &r)?,
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
                    reply(&mut out, "250 2.1.5 ok")?;
                }
            }
        } else if upper == "DATA" {
            reply(&mut out, "354 end with <CRLF>.<CRLF>")?;
            let mut data = String::new();
            loop {
                let mut l = String::new();
                if lines.read_line(&mut l)? == 0 {
                    return Ok(());
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
            });
            reply(&mut out, "250 2.0.0 queued")?;
        } else if upper == "RSET" {
            to.clear();
            reply(&mut out, "250 2.0.0 ok")?;
        } else if upper == "NOOP" {
            reply(&mut out, "250 2.0.0 ok")?;
        } else if upper == "QUIT" {
            reply(&mut out, "221 2.0.0 bye")?;
            return Ok(());
        } else {
            reply(&mut out, "502 5.5.2 command not recognized")?;
        }
    }
}
