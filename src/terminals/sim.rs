//! `ferrogate terminal-sim`: a software payment terminal. It connects to
//! the gateway like a real device (a WebSocket to `/router/v1/connect`,
//! authenticated by the terminal's id and secret), registers, and answers
//! each request as a cardholder would: it presents a card, signs, accepts
//! or declines terms. The reference's mock-device amounts (reference
//! facts 3.5) pick the behaviour of a payment; flags script the rest.
//!
//! Time-outs are acted out at once: a device that reports "card entry
//! timed out" has, as far as the gateway can tell, waited its
//! `card_entry_timeout`. Only 7.71 (the overall time-out) is acted by
//! not answering at all, so the gateway's own deadline ends the request.
//!
//! Every request it handles is printed on stdout as one JSON line, after
//! a first line `connected <terminal id>`; a test or a person can follow
//! along. Card numbers are printed masked.

use super::protocol::{CardRead, Cvm, DeviceJob, Failure, FromDevice, ToDevice};
use base64::Engine as _;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Map, Value as Json};
use std::io::Write;
use std::time::Duration;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

/// How the cardholder presents a card when the amount picks nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Entry {
    Chip,
    Contactless,
    Swipe,
    Keyed,
}

impl Entry {
    /// Its `entry_mode_id`.
    fn code(self) -> &'static str {
        match self {
            Entry::Chip => "C",
            Entry::Contactless => "P",
            Entry::Swipe => "S",
            Entry::Keyed => "K",
        }
    }
}

/// What the cardholder does with terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TermsAnswer {
    Accept,
    Decline,
    /// The prompt times out on the device.
    Timeout,
}

/// What the cardholder does when asked to sign.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SignAnswer {
    Sign,
    /// Walks away: the signature input times out.
    Refuse,
}

/// `ferrogate terminal-sim` flags.
#[derive(clap::Args, Clone, Debug)]
pub struct SimArgs {
    /// The gateway's base URL (`http://` or `https://`).
    #[arg(long, env = "FERROGATE_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The terminal's id (from `POST /v2/terminals`).
    #[arg(long, env = "FERROGATE_TERMINAL_ID")]
    pub terminal_id: String,
    /// The terminal's secret (`terminal_secret` in the create answer).
    #[arg(long, env = "FERROGATE_TERMINAL_SECRET", hide_env_values = true)]
    pub terminal_secret: String,
    /// The address the device reports on the merchant's network.
    #[arg(long, default_value = "192.168.1.77")]
    pub local_ip: String,
    /// The card presented when the amount does not pick one.
    #[arg(long, default_value = "4111111111111111")]
    pub card: String,
    /// Its expiry, MMYY (default: December, three years on).
    #[arg(long)]
    pub exp: Option<String>,
    /// The name on the card.
    #[arg(long, default_value = "SAMPLE TEST")]
    pub name: String,
    /// How the card is presented when the amount does not say.
    #[arg(long, value_enum, default_value = "chip")]
    pub entry: Entry,
    /// How the cardholder is verified when the amount does not say.
    #[arg(long, value_enum, default_value = "none")]
    pub cvm: CvmArg,
    /// The cardholder's answer to device terms.
    #[arg(long, value_enum, default_value = "accept")]
    pub terms: TermsAnswer,
    /// The cardholder's answer when asked to sign after an approval.
    #[arg(long, value_enum, default_value = "sign")]
    pub signature: SignAnswer,
    /// Milliseconds the cardholder takes before presenting a card or
    /// answering terms.
    #[arg(long, default_value_t = 0)]
    pub think_ms: u64,
    /// Exit when the connection ends instead of connecting again.
    #[arg(long)]
    pub no_reconnect: bool,
}

/// `--cvm`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CvmArg {
    None,
    Signature,
    Pin,
}

impl From<CvmArg> for Cvm {
    fn from(c: CvmArg) -> Cvm {
        match c {
            CvmArg::None => Cvm::None,
            CvmArg::Signature => Cvm::Signature,
            CvmArg::Pin => Cvm::Pin,
        }
    }
}

/// A test card of each brand (reference facts 3.3).
const VISA: &str = "4111111111111111";
const VISA_DEBIT: &str = "4556773060150333";
const MASTERCARD: &str = "5454545454545454";
const AMEX: &str = "371449635398431";
const DISCOVER: &str = "6011000995500000";
const BRANDS: &[&str] = &[VISA, MASTERCARD, AMEX, DISCOVER];

/// What the device does with a payment of `cents`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Act {
    /// Report a failure at once.
    Fail(Failure),
    /// Never answer (7.71): the gateway's deadline ends it.
    Hang,
    /// Present a card; `sign_failure` is what happens when asked to sign.
    Present {
        number: String,
        entry: &'static str,
        cvm: Cvm,
        sign_failure: Option<Failure>,
    },
}

/// The reference's mock-device amounts (3.5); anything else presents the
/// configured card. 7.10-7.21 pick a random brand, as the reference says.
pub fn act_for(cents: i64, args: &SimArgs, random_brand: usize) -> Act {
    let brand = BRANDS[random_brand % BRANDS.len()].to_string();
    let present = |number: String, entry: &'static str, cvm: Cvm| Act::Present {
        number,
        entry,
        cvm,
        sign_failure: None,
    };
    match cents {
        501 => Act::Fail(Failure::ConnectError),
        531 => Act::Fail(Failure::Timeout),
        599 => Act::Fail(Failure::Aborted),
        770 => Act::Fail(Failure::TransactionTimeout),
        771 => Act::Hang,
        772 => Act::Fail(Failure::CardEntryTimeout),
        773 => Act::Fail(Failure::PinEntryTimeout),
        775 | 776 => Act::Present {
            number: brand,
            entry: "C",
            cvm: Cvm::Signature,
            sign_failure: Some(if cents == 775 {
                Failure::SignatureInputTimeout
            } else {
                Failure::SignatureSubmitTimeout
            }),
        },
        710 => present(brand, "K", Cvm::None),
        711 => present(VISA_DEBIT.into(), "S", Cvm::Pin),
        712 => present(brand, "S", Cvm::Signature),
        713 => present(brand, "S", Cvm::None),
        714 => present(brand, "C", Cvm::None),
        715 => present(brand, "C", Cvm::Signature),
        716 => present(brand, "C", Cvm::Pin),
        717 => present(VISA_DEBIT.into(), "C", Cvm::Pin),
        718 => present(brand, "P", Cvm::None),
        719 => present(brand, "P", Cvm::Signature),
        720 => present(brand, "P", Cvm::Pin),
        721 => present(VISA_DEBIT.into(), "P", Cvm::Pin),
        750..=753 => present(BRANDS[(cents - 750) as usize].into(), "K", Cvm::None),
        754..=757 => present(BRANDS[(cents - 754) as usize].into(), "S", Cvm::None),
        _ => present(args.card.clone(), args.entry.code(), args.cvm.into()),
    }
}

/// A 1×1 PNG: what the signature pad captures.
fn signature_png() -> String {
    const PNG: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00,
        0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4, 0x89, 0x00,
        0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x60, 0x60, 0x60, 0xf8, 0x0f, 0x00, 0x01,
        0x04, 0x01, 0x00, 0x5f, 0xe5, 0xc3, 0x4b, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42,
        0x60, 0x82,
    ];
    base64::engine::general_purpose::STANDARD.encode(PNG)
}

/// The EMV tags a chip or contactless read puts on the receipt.
fn emv_tags(number: &str, cvm: Cvm) -> Map<String, Json> {
    let (aid, label) = match number.as_bytes().first() {
        Some(b'4') => ("A0000000031010", "VISA CREDIT"),
        Some(b'5') => ("A0000000041010", "MASTERCARD"),
        Some(b'3') => ("A00000002501", "AMERICAN EXPRESS"),
        _ => ("A0000001523010", "DISCOVER"),
    };
    let verified = match cvm {
        Cvm::Pin => "PIN VERIFIED",
        Cvm::Signature => "SIGNATURE",
        Cvm::None => "NO CVM",
    };
    let tc: String = (0..16)
        .map(|_| char::from(b"0123456789ABCDEF"[rand::random::<u8>() as usize % 16]))
        .collect();
    let mut tags = Map::new();
    for (k, v) in [
        ("AID", aid),
        ("APPLAB", label),
        ("APPN", label),
        ("CVM", verified),
        ("TVR", "0000008000"),
        ("TSI", "E800"),
        ("ATC", "0001"),
    ] {
        tags.insert(k.into(), json!(v));
    }
    tags.insert("TC".into(), json!(tc));
    tags
}

/// The last four digits only (what a receipt shows).
fn masked(number: &str) -> String {
    let digits: Vec<char> = number.chars().collect();
    let last: String = digits[digits.len().saturating_sub(4)..].iter().collect();
    format!("****{last}")
}

fn default_exp() -> String {
    use chrono::Datelike;
    let year = chrono::Utc::now().year() + 3;
    format!("12{:02}", year % 100)
}

/// One line on stdout (what a test or a person follows).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// `http(s)://host[:port]` to the device's WebSocket address.
pub fn connect_url(base: &str) -> Result<String, String> {
    let base = base.trim_end_matches('/');
    if let Some(rest) = base.strip_prefix("https://") {
        Ok(format!("wss://{rest}/router/v1/connect"))
    } else if let Some(rest) = base.strip_prefix("http://") {
        Ok(format!("ws://{rest}/router/v1/connect"))
    } else {
        Err(format!("--url must start with http:// or https:// (got {base})"))
    }
}

/// Runs the simulator until the connection ends (with `--no-reconnect`)
/// or forever, connecting again after a pause when it drops.
pub async fn run(args: SimArgs) -> anyhow::Result<()> {
    let url = connect_url(&args.url).map_err(anyhow::Error::msg)?;
    let mut pause = Duration::from_millis(200);
    loop {
        match session(&args, &url).await {
            Ok(()) => pause = Duration::from_millis(200),
            Err(SimError::Refused(why)) => anyhow::bail!("the gateway refused the terminal: {why}"),
            Err(SimError::Lost(why)) => {
                if args.no_reconnect {
                    anyhow::bail!("the connection ended: {why}");
                }
                say(&json!({ "event": "disconnected", "reason": why }).to_string());
            }
        }
        if args.no_reconnect {
            return Ok(());
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(10));
    }
}

enum SimError {
    /// The gateway will not take this terminal (bad credentials).
    Refused(String),
    /// The connection could not be made or ended.
    Lost(String),
}

/// A connection, plain or TLS.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

type Socket = tokio_tungstenite::WebSocketStream<Box<dyn Io>>;

async fn open(args: &SimArgs, url: &str) -> Result<Socket, SimError> {
    let mut request = url
        .into_client_request()
        .map_err(|e| SimError::Refused(format!("bad url: {e}")))?;
    let headers = request.headers_mut();
    for (name, value) in [
        ("terminal-id", args.terminal_id.as_str()),
        ("terminal-secret", args.terminal_secret.as_str()),
    ] {
        let value = value
            .parse()
            .map_err(|_| SimError::Refused(format!("{name} is not a valid header value")))?;
        headers.insert(name, value);
    }
    let tls = url.starts_with("wss://");
    let host = request.uri().host().unwrap_or_default().to_string();
    let port = request.uri().port_u16().unwrap_or(if tls { 443 } else { 80 });
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| SimError::Lost(format!("connecting to {host}:{port}: {e}")))?;
    let _ = tcp.set_nodelay(true);
    let io: Box<dyn Io> = if tls {
        let config = crate::outbound::tls_config(None).map_err(SimError::Lost)?;
        let name = tokio_rustls::rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|_| SimError::Refused(format!("{host} is not a host name")))?;
        let stream = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| SimError::Lost(format!("TLS with {host}: {e}")))?;
        Box::new(stream)
    } else {
        Box::new(tcp)
    };
    match tokio_tungstenite::client_async(request, io).await {
        Ok((socket, _)) => Ok(socket),
        Err(tokio_tungstenite::tungstenite::Error::Http(response))
            if matches!(response.status().as_u16(), 401 | 403) =>
        {
            let body = response
                .body()
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).to_string())
                .unwrap_or_default();
            Err(SimError::Refused(format!("{} {body}", response.status())))
        }
        Err(e) => Err(SimError::Lost(e.to_string())),
    }
}

/// What the device is doing for a request.
struct Working {
    request_id: String,
    task: tokio::task::JoinHandle<()>,
}

/// One connection: register, then answer requests until it ends.
async fn session(args: &SimArgs, url: &str) -> Result<(), SimError> {
    let socket = open(args, url).await?;
    let (mut sink, mut stream) = socket.split();
    let register = FromDevice::Register {
        local_ip_address: Some(args.local_ip.clone()),
    };
    send(&mut sink, &register).await?;
    // What request tasks want to send, written by this loop alone.
    let (out_tx, mut out_rx) = tokio::sync::mpsc::unbounded_channel::<FromDevice>();
    let mut working: Option<Working> = None;
    // The approvals waiting for a signature: request id → what happens.
    let mut awaiting_signature: std::collections::HashMap<String, Option<Failure>> = Default::default();
    loop {
        tokio::select! {
            outgoing = out_rx.recv() => {
                if let Some(message) = outgoing {
                    send(&mut sink, &message).await?;
                }
            }
            incoming = stream.next() => {
                let text = match incoming {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(Message::Close(_))) | None => return Err(SimError::Lost("closed by the gateway".into())),
                    Some(Err(e)) => return Err(SimError::Lost(e.to_string())),
                    Some(Ok(_)) => continue,
                };
                let Ok(message) = serde_json::from_str::<ToDevice>(&text) else {
                    continue;
                };
                match message {
                    ToDevice::Registered { terminal_id, .. } => say(&format!("connected {terminal_id}")),
                    ToDevice::Start { request_id, job, timeouts } => {
                        if let Some(w) = working.take() {
                            w.task.abort();
                        }
                        let (task, sign) = start(args, &request_id, job, &timeouts, out_tx.clone());
                        if let Some(failure) = sign {
                            awaiting_signature.insert(request_id.clone(), failure);
                        }
                        working = Some(Working { request_id, task });
                    }
                    ToDevice::Result { request_id, approved, message, capture_signature } => {
                        let failure = awaiting_signature.remove(&request_id).flatten();
                        say(&json!({ "event": "result", "request_id": request_id, "approved": approved,
                            "message": message, "capture_signature": capture_signature }).to_string());
                        if capture_signature {
                            let answer = match (failure, args.signature) {
                                (Some(f), _) => FromDevice::Signature { request_id, signature: None, failure: Some(f) },
                                (None, SignAnswer::Refuse) => FromDevice::Signature {
                                    request_id, signature: None, failure: Some(Failure::SignatureInputTimeout),
                                },
                                (None, SignAnswer::Sign) => FromDevice::Signature {
                                    request_id, signature: Some(signature_png()), failure: None,
                                },
                            };
                            send(&mut sink, &answer).await?;
                        }
                    }
                    ToDevice::Cancel { request_id } => {
                        if working.as_ref().is_some_and(|w| w.request_id == request_id) {
                            if let Some(w) = working.take() {
                                w.task.abort();
                            }
                        }
                        say(&json!({ "event": "cancelled", "request_id": request_id }).to_string());
                    }
                    ToDevice::Error { message } => {
                        say(&json!({ "event": "gateway_error", "message": message }).to_string());
                    }
                }
            }
        }
    }
}

async fn send(
    sink: &mut futures_util::stream::SplitSink<Socket, Message>,
    message: &FromDevice,
) -> Result<(), SimError> {
    let text = serde_json::to_string(message).map_err(|e| SimError::Lost(e.to_string()))?;
    sink.send(Message::Text(text.into()))
        .await
        .map_err(|e| SimError::Lost(e.to_string()))
}

/// Starts acting out a request; returns its task and, for a payment that
/// will be asked for a signature, what the cardholder does then. The
/// request's time-outs are printed with it (a device's time-outs are
/// acted out at once, see the module's notes).
fn start(
    args: &SimArgs,
    request_id: &str,
    job: DeviceJob,
    timeouts: &Map<String, Json>,
    out: tokio::sync::mpsc::UnboundedSender<FromDevice>,
) -> (tokio::task::JoinHandle<()>, Option<Option<Failure>>) {
    let think = Duration::from_millis(args.think_ms);
    let request_id = request_id.to_string();
    let exp = args.exp.clone().unwrap_or_else(default_exp);
    let card_of = |number: String, entry: &str, cvm: Cvm| CardRead {
        emv_receipt_data: matches!(entry, "C" | "P").then(|| emv_tags(&number, cvm)),
        account_number: number,
        exp_date: exp.clone(),
        account_holder_name: Some(args.name.clone()),
        entry_mode: entry.to_string(),
        cvm,
    };
    let (reply, sign): (Option<FromDevice>, Option<Option<Failure>>) = match &job {
        DeviceJob::Payment { amount, .. } => {
            let cents = crate::money::parse_text(amount, i64::MAX).unwrap_or(0);
            match act_for(cents, args, rand::random::<u8>() as usize) {
                Act::Fail(reason) => (
                    Some(FromDevice::Failed {
                        request_id: request_id.clone(),
                        reason,
                    }),
                    None,
                ),
                Act::Hang => (None, None),
                Act::Present {
                    number,
                    entry,
                    cvm,
                    sign_failure,
                } => (
                    Some(FromDevice::Card {
                        request_id: request_id.clone(),
                        card: card_of(number, entry, cvm),
                    }),
                    Some(sign_failure),
                ),
            }
        }
        DeviceJob::Store => (
            Some(FromDevice::Card {
                request_id: request_id.clone(),
                card: card_of(args.card.clone(), args.entry.code(), args.cvm.into()),
            }),
            None,
        ),
        DeviceJob::Terms {
            require_signature, ..
        } => (
            Some(match args.terms {
                TermsAnswer::Accept => FromDevice::Terms {
                    request_id: request_id.clone(),
                    accepted: true,
                    signature: require_signature.then(signature_png),
                },
                TermsAnswer::Decline => FromDevice::Terms {
                    request_id: request_id.clone(),
                    accepted: false,
                    signature: None,
                },
                TermsAnswer::Timeout => FromDevice::Failed {
                    request_id: request_id.clone(),
                    reason: Failure::TermsTimeout,
                },
            }),
            None,
        ),
    };
    let shown = match &reply {
        Some(FromDevice::Card { card, .. }) => {
            json!({ "card": masked(&card.account_number), "entry_mode": card.entry_mode, "cvm": card.cvm })
        }
        Some(FromDevice::Failed { reason, .. }) => json!({ "failed": reason.code() }),
        Some(FromDevice::Terms { accepted, .. }) => json!({ "terms_accepted": accepted }),
        _ => json!({ "waiting": true }),
    };
    say(
        &json!({ "event": "request", "request_id": request_id, "job": job, "timeouts": timeouts,
        "answer": shown })
        .to_string(),
    );
    let task = tokio::spawn(async move {
        let Some(reply) = reply else {
            return;
        };
        if !think.is_zero() {
            tokio::time::sleep(think).await;
        }
        let _ = out.send(reply);
    });
    (task, sign)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> SimArgs {
        SimArgs {
            url: "http://127.0.0.1:1".into(),
            terminal_id: "t".into(),
            terminal_secret: "s".into(),
            local_ip: "192.168.1.77".into(),
            card: VISA.into(),
            exp: None,
            name: "SAMPLE TEST".into(),
            entry: Entry::Chip,
            cvm: CvmArg::None,
            terms: TermsAnswer::Accept,
            signature: SignAnswer::Sign,
            think_ms: 0,
            no_reconnect: true,
        }
    }

    #[test]
    fn the_reference_amounts_pick_the_behaviour() {
        let a = args();
        assert_eq!(act_for(501, &a, 0), Act::Fail(Failure::ConnectError));
        assert_eq!(act_for(531, &a, 0), Act::Fail(Failure::Timeout));
        assert_eq!(act_for(599, &a, 0), Act::Fail(Failure::Aborted));
        assert_eq!(act_for(770, &a, 0), Act::Fail(Failure::TransactionTimeout));
        assert_eq!(act_for(771, &a, 0), Act::Hang);
        assert_eq!(act_for(772, &a, 0), Act::Fail(Failure::CardEntryTimeout));
        assert_eq!(act_for(773, &a, 0), Act::Fail(Failure::PinEntryTimeout));
        let Act::Present {
            number, entry, cvm, ..
        } = act_for(752, &a, 3)
        else {
            panic!()
        };
        assert_eq!((number.as_str(), entry, cvm), (AMEX, "K", Cvm::None));
        let Act::Present { number, entry, .. } = act_for(757, &a, 0) else {
            panic!()
        };
        assert_eq!((number.as_str(), entry), (DISCOVER, "S"));
        let Act::Present {
            number, entry, cvm, ..
        } = act_for(717, &a, 0)
        else {
            panic!()
        };
        assert_eq!((number.as_str(), entry, cvm), (VISA_DEBIT, "C", Cvm::Pin));
        let Act::Present { entry, cvm, .. } = act_for(719, &a, 1) else {
            panic!()
        };
        assert_eq!((entry, cvm), ("P", Cvm::Signature));
        let Act::Present { sign_failure, .. } = act_for(776, &a, 2) else {
            panic!()
        };
        assert_eq!(sign_failure, Some(Failure::SignatureSubmitTimeout));
        // Anything else: the configured card, entry and CVM.
        let Act::Present {
            number, entry, cvm, ..
        } = act_for(1000, &a, 0)
        else {
            panic!()
        };
        assert_eq!((number.as_str(), entry, cvm), (VISA, "C", Cvm::None));
        // 7.10-7.21 pick a brand at random: every brand can come up.
        let brands: std::collections::BTreeSet<String> = (0..4)
            .filter_map(|r| match act_for(714, &a, r) {
                Act::Present { number, .. } => Some(number),
                _ => None,
            })
            .collect();
        assert_eq!(brands.len(), 4);
    }

    #[test]
    fn urls_and_the_signature_image() {
        assert_eq!(
            connect_url("http://127.0.0.1:8080/").unwrap(),
            "ws://127.0.0.1:8080/router/v1/connect"
        );
        assert_eq!(
            connect_url("https://pay.example.com").unwrap(),
            "wss://pay.example.com/router/v1/connect"
        );
        assert!(connect_url("ftp://x").is_err());
        let png = base64::engine::general_purpose::STANDARD
            .decode(signature_png())
            .unwrap();
        assert_eq!(crate::files::sniff(&png), Some("image/png"));
    }
}
