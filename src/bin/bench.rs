//! ferrogate-bench: load generator for the contact, account vault and
//! transaction endpoints of a running `ferrogate serve`.
//!
//! It speaks plain HTTP/1.1 with keep-alive over one TCP connection per
//! concurrent client, so it needs no HTTP client crate and what it measures is
//! the server, not a client library. Only loopback targets are accepted: this
//! is a local benchmarking tool, not a traffic generator for other hosts.

use std::{
    fmt,
    net::{SocketAddr, ToSocketAddrs},
    path::{Path, PathBuf},
    process::{Command, ExitCode, Stdio},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, PoisonError,
    },
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, ensure, Context, Result};
use chrono::Datelike;
use clap::{Parser, ValueEnum};
use ferrogate::processor::sandbox::TEST_CARDS;
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Value};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};
use uuid::Uuid;

const CONTACTS_PATH: &str = "/v2/contacts";
const VAULTS_PATH: &str = "/v2/accountvaults";
const TRANSACTIONS_PATH: &str = "/v2/transactions";
/// The bare-http scenario's body: about the size of a contact create.
const ECHO_BODY: &str = r#"{"contact":{"location_id":"01a2119a5c987190b1f20fdb7f4fa240","first_name":"Bench","last_name":"Echo","email":"bench@example.com","address":"1 Main St","city":"Austin","state":"TX","zip":"78701","contact_api_id":"bench-echo-0001"}}"#;
const PAGE_PATH: &str = "/v2/contacts?page_size=20";
const LIST_PATH: &str = "/v2/contacts?page_size=20&last_name=Bench1&sort=-created_ts";
/// Amount of every bench sale: an ordinary approval in the sandbox, not one
/// of its trigger amounts (5.XX declines, 8.XX delays, 2.01 partial, 6.30).
const SALE_AMOUNT: &str = "10.00";
/// The processor's answer that counts a sale as a success: 101 Approved.
const SALE_APPROVED: u64 = 101;
/// Cheapest request that proves the server is up and accepts our credentials.
const PROBE_PATH: &str = "/v2/contacts?page_size=1";

/// Largest response head we accept; real heads are a few hundred bytes.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Largest response body we buffer, so a broken server cannot eat our memory.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// Spare capacity reserved before each socket read.
const READ_CHUNK: usize = 16 * 1024;
/// How much of an error body to show; enough to read a JSON error message.
const MAX_ERROR_BODY_CHARS: usize = 500;

/// Clients used to create rows for --seed-rows and for the id pools of the
/// get scenarios.
const SEED_CONCURRENCY: usize = 64;
const SEED_PROGRESS_EVERY: Duration = Duration::from_secs(10);
/// contact-get, vault-get and sale-vault pick from at least this many ids.
const GET_POOL_MIN: usize = 1000;
/// Cap on remembered ids per resource. A uniform sample of this size over
/// every row created keeps memory flat when seeding a million rows, while the
/// get scenarios still read rows spread over the whole table rather than only
/// recent ones.
const ID_POOL_CAP: usize = 100_000;
/// Pause after a transport error so a dead server does not turn every client
/// into a busy loop of connection attempts.
const ERROR_BACKOFF: Duration = Duration::from_millis(10);

#[derive(Parser, Debug)]
#[command(
    name = "ferrogate-bench",
    version,
    about = "Load generator for the contact, account vault and transaction endpoints of a running `ferrogate serve`"
)]
struct Args {
    /// Server base URL; must be http:// on a loopback address.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,

    /// ferrogate binary run as `<bin> bootstrap --json` to create a fresh bench
    /// tenant (it inherits the environment, e.g. FERROGATE_DATABASE_URL).
    #[arg(long, default_value = "./target/release/ferrogate")]
    ferrogate_bin: PathBuf,

    /// Use the tenant in this JSON file (output of `ferrogate bootstrap
    /// --json`) instead of bootstrapping a new one.
    #[arg(long, conflicts_with = "save_credentials")]
    credentials: Option<PathBuf>,

    /// Write the bootstrapped tenant's credentials to this file, to reuse the
    /// same tenant later with --credentials.
    #[arg(long)]
    save_credentials: Option<PathBuf>,

    /// Scenarios to run, in order. The get scenarios (and sale-vault, which
    /// charges vaults) use rows this process created, first creating enough
    /// (1000) if it has too few.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "contact-create,contact-get,contact-list"
    )]
    scenarios: Vec<Scenario>,

    /// Concurrent clients (one connection each); a comma list runs every
    /// scenario at each level.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "16",
        value_parser = clap::value_parser!(u32).range(1..=10_000)
    )]
    concurrency: Vec<u32>,

    /// Open loop at this many requests per second (per scenario and
    /// concurrency level): request i is due at start + i/rate whether or not
    /// earlier ones have been answered, and its latency counts from that due
    /// time, so time spent waiting for a free client (one of --concurrency)
    /// is included. Without it every client sends back to back (closed loop).
    #[arg(long, value_parser = parse_rate)]
    rate: Option<f64>,

    /// Measured seconds per scenario and concurrency level.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    duration: Duration,

    /// Unmeasured seconds before each measurement, on the same connections.
    #[arg(long, default_value = "2", value_parser = parse_seconds)]
    warmup: Duration,

    /// Per-request timeout in seconds, connecting included.
    #[arg(long, default_value = "10", value_parser = parse_seconds)]
    timeout: Duration,

    /// Before the scenarios, create contacts (not vaults) until the tenant
    /// has at least this many.
    #[arg(long, default_value_t = 0)]
    seed_rows: u64,

    /// Print one JSON object per result line instead of text.
    #[arg(long)]
    json: bool,

    /// Instead of the scenarios: create this many monthly recurrings on one
    /// vault, all first due tomorrow, then move the tenant's test clock a
    /// day forward and time the scheduler charging them all (sandbox only).
    #[arg(long)]
    scheduler_run: Option<u64>,

    /// Before the scenarios, at each concurrency level: PostgreSQL's own
    /// ceiling on this machine, pgbench's TPC-B (scale 1, prepared
    /// statements, two threads) for --duration on a scratch database of the
    /// server in FERROGATE_DATABASE_URL (created and dropped). Needs
    /// `pgbench` on the PATH; skipped with a note on SQLite.
    #[arg(long)]
    pgbench: bool,
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    Duration::try_from_secs_f64(secs).map_err(|_| format!("`{s}` is not a valid duration"))
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(rate),
        _ => Err(format!("`{s}` is not a positive number of requests per second")),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// POST /v2/contacts, a new contact each time.
    #[value(name = "contact-create")]
    ContactCreate,
    /// GET /v2/contacts/{id} of random contacts this process created.
    #[value(name = "contact-get")]
    ContactGet,
    /// GET /v2/contacts, one page of 20 filtered by last name and sorted.
    #[value(name = "contact-list")]
    ContactList,
    /// POST /v2/accountvaults, a new card vault each time (rotating test cards).
    #[value(name = "vault-create")]
    VaultCreate,
    /// GET /v2/accountvaults/{id} of random vaults this process created.
    #[value(name = "vault-get")]
    VaultGet,
    /// POST /v2/transactions: a card sale by card number (rotating sandbox
    /// test cards), processor call, batch entry and change log included.
    #[value(name = "sale-card")]
    SaleCard,
    /// POST /v2/transactions: a card sale by account_vault_id, on random
    /// vaults this process created.
    #[value(name = "sale-vault")]
    SaleVault,
    /// POST /v2/contacts with a postback config subscribed to contact
    /// creates: a receiver in this process records each delivery, and the
    /// run reports deliveries per second and the delay from the create's
    /// response to the delivery. The server needs
    /// FERROGATE_POSTBACK_ALLOW_PRIVATE=1 (the receiver is on loopback).
    #[value(name = "postback-contact")]
    PostbackContact,
    /// GET /v2/contacts: the first page of 20, unfiltered, in the default
    /// order, with the total count.
    #[value(name = "contact-page")]
    ContactPage,
    /// GET /v2/contacts searching one contact by a fragment of its last name
    /// (`last_name=ch<n>` for a random n among the latest nine tenths of
    /// the contacts created as `Bench<n>`: one match, or a few, whatever
    /// the tenant's size), sorted, with the total count: a customer search.
    #[value(name = "contact-search")]
    ContactSearch,
    /// POST /echo of a contact-sized JSON body to a bare axum server started
    /// inside this process, which parses the body and serializes it back:
    /// the machine's HTTP ceiling for this client, measured in the same run
    /// as the other scenarios so they can be given as a ratio to it.
    #[value(name = "bare-http")]
    BareHttp,
}

/// What a scenario does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Create,
    Get,
    List,
    Sale,
    /// The bare HTTP echo.
    Echo,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::ContactCreate => "contact-create",
            Scenario::ContactGet => "contact-get",
            Scenario::ContactList => "contact-list",
            Scenario::VaultCreate => "vault-create",
            Scenario::VaultGet => "vault-get",
            Scenario::SaleCard => "sale-card",
            Scenario::SaleVault => "sale-vault",
            Scenario::PostbackContact => "postback-contact",
            Scenario::ContactSearch => "contact-search",
            Scenario::ContactPage => "contact-page",
            Scenario::BareHttp => "bare-http",
        }
    }

    /// The resource the scenario creates, reads or (for sale-vault) charges.
    fn resource(self) -> Resource {
        match self {
            Scenario::ContactCreate
            | Scenario::ContactGet
            | Scenario::ContactList
            | Scenario::ContactSearch
            | Scenario::ContactPage
            | Scenario::PostbackContact
            // Touches no resource: the pool of contacts is never used.
            | Scenario::BareHttp => Resource::Contact,
            Scenario::VaultCreate | Scenario::VaultGet | Scenario::SaleVault => Resource::Vault,
            Scenario::SaleCard => Resource::Transaction,
        }
    }

    fn action(self) -> Action {
        match self {
            Scenario::ContactCreate | Scenario::VaultCreate | Scenario::PostbackContact => Action::Create,
            Scenario::ContactGet | Scenario::VaultGet => Action::Get,
            Scenario::ContactList | Scenario::ContactSearch | Scenario::ContactPage => Action::List,
            Scenario::SaleCard | Scenario::SaleVault => Action::Sale,
            Scenario::BareHttp => Action::Echo,
        }
    }

    /// Whether the scenario picks ids from the pool of its resource.
    fn uses_pool(self) -> bool {
        matches!(
            self,
            Scenario::ContactGet | Scenario::VaultGet | Scenario::SaleVault
        )
    }

    fn expected_status(self) -> u16 {
        match self.action() {
            Action::Create | Action::Sale => 201,
            Action::Get | Action::List | Action::Echo => 200,
        }
    }
}

/// The kinds of rows the bench creates and reads, each with its own id pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resource {
    Contact,
    Vault,
    /// Only created (by the sale scenarios), never read back by id.
    Transaction,
}

impl Resource {
    /// Collection path; single rows are at `{path}/{id}`.
    fn path(self) -> &'static str {
        match self {
            Resource::Contact => CONTACTS_PATH,
            Resource::Vault => VAULTS_PATH,
            Resource::Transaction => TRANSACTIONS_PATH,
        }
    }

    /// JSON pointer to the new row's id in a create response.
    fn id_pointer(self) -> &'static str {
        match self {
            Resource::Contact => "/contact/id",
            Resource::Vault => "/accountvault/id",
            Resource::Transaction => "/transaction/id",
        }
    }

    /// Plural noun for messages.
    fn plural(self) -> &'static str {
        match self {
            Resource::Contact => "contacts",
            Resource::Vault => "account vaults",
            Resource::Transaction => "transactions",
        }
    }

    /// The scenario whose responses bulk creation of this resource is judged by.
    fn create_scenario(self) -> Scenario {
        match self {
            Resource::Contact => Scenario::ContactCreate,
            Resource::Vault => Scenario::VaultCreate,
            Resource::Transaction => Scenario::SaleCard,
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    // Report errors as one readable chain rather than anyhow's Debug output,
    // which adds a backtrace whenever RUST_BACKTRACE happens to be set.
    main_inner(args).unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitCode::FAILURE
    })
}

fn main_inner(args: Args) -> Result<ExitCode> {
    ensure!(!args.duration.is_zero(), "--duration must be greater than 0");
    ensure!(!args.timeout.is_zero(), "--timeout must be greater than 0");
    let target = resolve_target(&args.url)?;
    // Credentials come first and synchronously: bootstrapping is a blocking
    // child process, and there is no point starting the runtime without them.
    let credentials = load_credentials(&args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(run(args, target, credentials))
}

async fn run(args: Args, target: Target, credentials: Credentials) -> Result<ExitCode> {
    // The HTTP ceiling: a bare echo server in this process, on loopback.
    let echo = if args.scenarios.contains(&Scenario::BareHttp) {
        let addr = start_echo_server().await?;
        Some(Arc::new(Api::new(
            Target {
                addr,
                host: addr.to_string(),
            },
            &credentials,
            args.timeout,
        )))
    } else {
        None
    };
    let api = Arc::new(Api::new(target, &credentials, args.timeout));
    let existing = probe(&api, &args.url).await?;

    if args.seed_rows > 0 {
        seed(&api, args.seed_rows, existing, args.json).await?;
    }
    if let Some(schedules) = args.scheduler_run {
        scheduler::run(&api, schedules, args.json).await?;
        return Ok(ExitCode::SUCCESS);
    }

    if args.pgbench {
        for &concurrency in &args.concurrency {
            let duration = args.duration;
            let json = args.json;
            tokio::task::spawn_blocking(move || pgbench::run(concurrency, duration, json))
                .await
                .context("pgbench task")??;
        }
    }

    let mut failed = Vec::new();
    for &scenario in &args.scenarios {
        for &concurrency in &args.concurrency {
            if scenario.uses_pool() {
                fill_pool(&api, scenario).await?;
            }
            let run = Run {
                scenario,
                concurrency: concurrency as usize,
                rate: args.rate,
                warmup: args.warmup,
                duration: args.duration,
            };
            if scenario == Scenario::PostbackContact {
                postbacks::prepare(&api).await?;
            }
            let result = match (&echo, scenario) {
                (Some(echo), Scenario::BareHttp) => run_scenario(echo, run).await?,
                _ => run_scenario(&api, run).await?,
            };
            result.print(args.json);
            if scenario == Scenario::PostbackContact {
                postbacks::report(concurrency as usize, args.rate, args.json).await;
            }
            if result.all_failed() {
                failed.push(format!("{} c={}", scenario.name(), concurrency));
            }
        }
    }

    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("every request failed in: {}", failed.join(", "));
        Ok(ExitCode::FAILURE)
    }
}

/// Starts a minimal axum server answering `POST /echo` with the JSON body
/// it parsed, serialized again; returns its address.
async fn start_echo_server() -> Result<SocketAddr> {
    use axum::routing::post;
    let app = axum::Router::new().route(
        "/echo",
        post(|axum::Json(body): axum::Json<Value>| async move { axum::Json(body) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the echo server")?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr)
}

// ---------------------------------------------------------------------------
// Target and credentials
// ---------------------------------------------------------------------------

struct Target {
    addr: SocketAddr,
    /// Value of the Host header, exactly as given in --url.
    host: String,
}

/// Parses `http://host[:port][/]` and insists that the host resolves only to
/// loopback addresses, so the tool cannot be pointed at someone else's server.
fn resolve_target(url: &str) -> Result<Target> {
    let authority = url
        .strip_prefix("http://")
        .with_context(|| format!("--url {url}: only http:// URLs are supported"))?
        .trim_end_matches('/');
    ensure!(
        !authority.is_empty() && !authority.contains(['/', '?', '#', '@']),
        "--url {url}: expected http://host:port with no path, query or user info"
    );
    let (host, port) = match authority.strip_prefix('[') {
        // Bracketed IPv6 literal, e.g. [::1]:8080.
        Some(rest) => {
            let (host, after) = rest
                .split_once(']')
                .with_context(|| format!("--url {url}: unterminated IPv6 address"))?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    let port: u16 = match port {
        Some(p) => p
            .parse()
            .with_context(|| format!("--url {url}: invalid port `{p}`"))?,
        None => 80,
    };
    let mut addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .with_context(|| format!("--url {url}: cannot resolve `{host}`"))?
        .collect();
    ensure!(!addrs.is_empty(), "--url {url}: `{host}` resolves to nothing");
    if let Some(bad) = addrs.iter().find(|a| !a.ip().is_loopback()) {
        bail!(
            "--url {url}: {} is not a loopback address; only local servers may be benchmarked",
            bad.ip()
        );
    }
    // `localhost` often resolves to ::1 first while servers commonly listen on
    // 127.0.0.1 only, so prefer IPv4.
    addrs.sort_by_key(|a| a.is_ipv6());
    Ok(Target {
        addr: addrs[0],
        host: authority.to_string(),
    })
}

struct Credentials {
    developer_id: String,
    user_id: String,
    user_api_key: String,
    location_id: String,
    /// The card product transaction sales name; without it the server takes
    /// the location's default.
    cc_product_transaction_id: Option<String>,
}

fn load_credentials(args: &Args) -> Result<Credentials> {
    let value = match &args.credentials {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading credentials from {}", path.display()))?;
            serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))?
        }
        None => {
            let value = bootstrap(&args.ferrogate_bin)?;
            if let Some(path) = &args.save_credentials {
                save_credentials(path, &value)?;
                eprintln!("saved bench tenant credentials to {}", path.display());
            }
            value
        }
    };
    parse_credentials(&value)
}

/// Creates a fresh tenant with `ferrogate bootstrap --json` and returns the
/// JSON object it prints.
fn bootstrap(bin: &Path) -> Result<Value> {
    let name = format!("bench-{:08x}", rand::random::<u32>());
    eprintln!("bootstrapping tenant {name} with {}", bin.display());
    let output = Command::new(bin)
        .args(["bootstrap", "--json", "--name", &name])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| {
            format!(
                "running {} (build it with `cargo build --release`, or pass --ferrogate-bin or --credentials)",
                bin.display()
            )
        })?;
    ensure!(
        output.status.success(),
        "`{} bootstrap` failed: {}",
        bin.display(),
        output.status
    );
    let stdout = String::from_utf8(output.stdout).context("bootstrap output is not UTF-8")?;
    // Normally stdout is exactly one JSON object; tolerate stray log lines
    // before it by falling back to the last line that looks like an object.
    serde_json::from_str(stdout.trim())
        .or_else(|_| {
            let line = stdout
                .lines()
                .rev()
                .find(|l| l.trim_start().starts_with('{'))
                .unwrap_or_default();
            serde_json::from_str(line)
        })
        .with_context(|| format!("bootstrap did not print a JSON object; stdout was: {stdout}"))
}

fn save_credentials(path: &Path, value: &Value) -> Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    // The file holds an API key: keep it private to the user.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(format!("{value:#}\n").as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

fn parse_credentials(value: &Value) -> Result<Credentials> {
    let field = |name: &str| -> Result<String> {
        let text = match value.get(name) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => bail!("credentials: missing string field `{name}`"),
        };
        // Values go verbatim into request headers and JSON bodies.
        ensure!(
            !text.is_empty() && !text.contains(['\r', '\n']),
            "credentials: field `{name}` is empty or contains a line break"
        );
        Ok(text)
    };
    Ok(Credentials {
        developer_id: field("developer_id")?,
        user_id: field("user_id")?,
        user_api_key: field("user_api_key")?,
        location_id: field("location_id")?,
        cc_product_transaction_id: field("cc_product_transaction_id").ok(),
    })
}

// ---------------------------------------------------------------------------
// Minimal HTTP/1.1 keep-alive client
// ---------------------------------------------------------------------------

struct Response {
    status: u16,
    body: Vec<u8>,
    /// False when the server will close the connection after this response.
    keep_alive: bool,
}

/// One keep-alive connection. Requests are strictly sequential (no
/// pipelining), so at most one response is outstanding.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn connect(addr: SocketAddr) -> Result<Conn> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        // Requests go out in a single write; Nagle would only add delay.
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: Vec::with_capacity(READ_CHUNK),
        })
    }

    async fn round_trip(&mut self, request: &[u8]) -> Result<Response> {
        ensure!(
            self.buf.is_empty(),
            "server sent unsolicited bytes on an idle connection"
        );
        self.stream.write_all(request).await.context("sending request")?;
        self.read_response().await
    }

    async fn read_response(&mut self) -> Result<Response> {
        let head_end = loop {
            if let Some(pos) = find(&self.buf, b"\r\n\r\n") {
                break pos + 4;
            }
            ensure!(
                self.buf.len() <= MAX_HEAD_BYTES,
                "response head larger than {MAX_HEAD_BYTES} bytes"
            );
            if self.fill().await? == 0 {
                bail!("server closed the connection before sending a response");
            }
        };
        let head = parse_head(&self.buf[..head_end])?;
        self.buf.drain(..head_end);

        let mut keep_alive = head.keep_alive;
        let body = match head.content_length {
            Some(len) => {
                ensure!(len <= MAX_BODY_BYTES, "response body of {len} bytes is too large");
                while self.buf.len() < len {
                    if self.fill().await? == 0 {
                        bail!("server closed the connection in the middle of a response body");
                    }
                }
                self.buf.drain(..len).collect()
            }
            // These statuses never carry a body.
            None if head.status < 200 || head.status == 204 || head.status == 304 => Vec::new(),
            // No length given: the body runs until the server closes.
            None => {
                while self.fill().await? > 0 {
                    ensure!(self.buf.len() <= MAX_BODY_BYTES, "response body is too large");
                }
                keep_alive = false;
                std::mem::take(&mut self.buf)
            }
        };
        Ok(Response {
            status: head.status,
            body,
            keep_alive,
        })
    }

    /// Reads more bytes into the buffer; returns 0 at end of stream.
    async fn fill(&mut self) -> Result<usize> {
        self.buf.reserve(READ_CHUNK);
        self.stream
            .read_buf(&mut self.buf)
            .await
            .context("reading response")
    }
}

struct Head {
    status: u16,
    content_length: Option<usize>,
    keep_alive: bool,
}

fn parse_head(raw: &[u8]) -> Result<Head> {
    let text = std::str::from_utf8(raw).context("response head is not valid UTF-8")?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    ensure!(
        version.starts_with("HTTP/1."),
        "not an HTTP/1.x response: {status_line:?}"
    );
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("bad status line: {status_line:?}"))?;

    let mut head = Head {
        status,
        content_length: None,
        // HTTP/1.0 closes by default, HTTP/1.1 keeps the connection open.
        keep_alive: version != "HTTP/1.0",
    };
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line
            .split_once(':')
            .with_context(|| format!("malformed response header: {line:?}"))?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            head.content_length = Some(
                value
                    .parse()
                    .with_context(|| format!("bad Content-Length: {value:?}"))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            // The server sends Content-Length for JSON; decoding chunked
            // bodies is deliberately out of scope for this tool.
            bail!(
                "unsupported response Transfer-Encoding: {value} (only Content-Length bodies are supported)"
            );
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(',').map(str::trim) {
                if token.eq_ignore_ascii_case("close") {
                    head.keep_alive = false;
                } else if token.eq_ignore_ascii_case("keep-alive") {
                    head.keep_alive = true;
                }
            }
        }
    }
    Ok(head)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

// ---------------------------------------------------------------------------
// Ferrogate API requests
// ---------------------------------------------------------------------------

/// Everything the clients share: where to connect, how to authenticate, and
/// the ids of rows created so far.
struct Api {
    target: Target,
    /// The three auth header lines, rendered once.
    auth_headers: String,
    location_id: String,
    cc_product_transaction_id: Option<String>,
    /// MMYY of December four years ahead: valid for vaults and sales.
    exp_date: String,
    timeout: Duration,
    /// Numbers the contacts this process creates (Bench1, Bench2, ...).
    next_contact: AtomicU64,
    /// Counts the vaults this process creates, to rotate through TEST_CARDS.
    next_vault: AtomicU64,
    /// Counts the card-number sales, to rotate through TEST_CARDS.
    next_sale: AtomicU64,
    contact_ids: Mutex<IdPool>,
    vault_ids: Mutex<IdPool>,
    /// Stays empty: sales are not read back.
    transaction_ids: Mutex<IdPool>,
}

impl Api {
    fn new(target: Target, credentials: &Credentials, timeout: Duration) -> Api {
        let auth_headers = format!(
            "developer-id: {}\r\nuser-id: {}\r\nuser-api-key: {}\r\n",
            credentials.developer_id, credentials.user_id, credentials.user_api_key
        );
        Api {
            target,
            auth_headers,
            location_id: credentials.location_id.clone(),
            cc_product_transaction_id: credentials.cc_product_transaction_id.clone(),
            exp_date: format!("12{:02}", (chrono::Utc::now().year() + 4) % 100),
            timeout,
            next_contact: AtomicU64::new(1),
            next_vault: AtomicU64::new(0),
            next_sale: AtomicU64::new(0),
            contact_ids: Mutex::new(IdPool::default()),
            vault_ids: Mutex::new(IdPool::default()),
            transaction_ids: Mutex::new(IdPool::default()),
        }
    }

    fn request(&self, method: &str, path: &str, body: Option<&str>) -> Vec<u8> {
        let (body_headers, body) = match body {
            Some(body) => (
                format!(
                    "Content-Type: application/json\r\nContent-Length: {}\r\n",
                    body.len()
                ),
                body,
            ),
            None => (String::new(), ""),
        };
        format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{}Accept: application/json\r\n{body_headers}\r\n{body}",
            self.target.host, self.auth_headers
        )
        .into_bytes()
    }

    /// A POST creating a new row of `resource`.
    fn create_request(&self, resource: Resource) -> Vec<u8> {
        match resource {
            Resource::Contact => self.create_contact_request(),
            Resource::Vault => self.create_vault_request(),
            Resource::Transaction => self.sale_card_request(),
        }
    }

    /// A POST creating a new contact with a unique number and contact_api_id.
    fn create_contact_request(&self) -> Vec<u8> {
        let n = self.next_contact.fetch_add(1, Ordering::Relaxed);
        let body = json!({
            "contact": {
                "location_id": self.location_id,
                "last_name": format!("Bench{n}"),
                "first_name": "Load",
                "email": format!("bench{n}@example.com"),
                "contact_api_id": Uuid::now_v7().simple().to_string(),
                "city": "Springfield",
            }
        });
        self.request("POST", CONTACTS_PATH, Some(&body.to_string()))
    }

    /// A POST creating a card vault for the next test card, with a unique
    /// account_vault_api_id.
    fn create_vault_request(&self) -> Vec<u8> {
        let n = self.next_vault.fetch_add(1, Ordering::Relaxed);
        let body = json!({
            "accountvault": {
                "location_id": self.location_id,
                "payment_method": "cc",
                "account_number": test_card(n),
                "exp_date": self.exp_date,
                "account_holder_name": "Bench Card",
                "account_vault_api_id": Uuid::now_v7().simple().to_string(),
            }
        });
        self.request("POST", VAULTS_PATH, Some(&body.to_string()))
    }

    /// A card sale by card number, the next test card in turn.
    fn sale_card_request(&self) -> Vec<u8> {
        let n = self.next_sale.fetch_add(1, Ordering::Relaxed);
        let mut tx = self.sale_fields();
        tx.insert("account_number".into(), json!(test_card(n)));
        tx.insert("exp_date".into(), json!(self.exp_date));
        tx.insert("account_holder_name".into(), json!("Bench Card"));
        self.sale_request(tx)
    }

    /// A card sale charging the vault `vault_id`.
    fn sale_vault_request(&self, vault_id: &str) -> Vec<u8> {
        let mut tx = self.sale_fields();
        tx.insert("account_vault_id".into(), json!(vault_id));
        self.sale_request(tx)
    }

    /// What every bench sale sends besides its account.
    fn sale_fields(&self) -> serde_json::Map<String, Value> {
        let mut tx = serde_json::Map::new();
        tx.insert("action".into(), json!("sale"));
        tx.insert("payment_method".into(), json!("cc"));
        tx.insert("location_id".into(), json!(self.location_id));
        if let Some(pt) = &self.cc_product_transaction_id {
            tx.insert("product_transaction_id".into(), json!(pt));
        }
        tx.insert("transaction_amount".into(), json!(SALE_AMOUNT));
        tx
    }

    fn sale_request(&self, tx: serde_json::Map<String, Value>) -> Vec<u8> {
        let body = json!({ "transaction": tx });
        self.request("POST", TRANSACTIONS_PATH, Some(&body.to_string()))
    }

    /// Sends one request on `conn`, connecting first if needed. The whole
    /// exchange is bounded by the timeout so a stuck server cannot stall the
    /// run; the connection is dropped after any failure or `Connection: close`.
    async fn exchange(&self, conn: &mut Option<Conn>, request: &[u8]) -> Result<Response> {
        let attempt = async {
            if conn.is_none() {
                *conn = Some(Conn::connect(self.target.addr).await?);
            }
            match conn.as_mut() {
                Some(c) => c.round_trip(request).await,
                None => Err(anyhow!("no connection")),
            }
        };
        let result = match tokio::time::timeout(self.timeout, attempt).await {
            Ok(result) => result,
            Err(_) => Err(anyhow!("no response within {:?}", self.timeout)),
        };
        if !matches!(&result, Ok(r) if r.keep_alive) {
            *conn = None;
        }
        result
    }

    fn id_pool(&self, resource: Resource) -> std::sync::MutexGuard<'_, IdPool> {
        let pool = match resource {
            Resource::Contact => &self.contact_ids,
            Resource::Vault => &self.vault_ids,
            Resource::Transaction => &self.transaction_ids,
        };
        pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn remember(&self, resource: Resource, id: String) {
        self.id_pool(resource).add(id);
    }

    fn id_count(&self, resource: Resource) -> usize {
        self.id_pool(resource).ids.len()
    }

    fn id_snapshot(&self, resource: Resource) -> Arc<Vec<String>> {
        Arc::new(self.id_pool(resource).ids.clone())
    }
}

/// The `n`th card of the sandbox's test cards, in turn.
fn test_card(n: u64) -> &'static str {
    TEST_CARDS[(n % TEST_CARDS.len() as u64) as usize].0
}

/// Reservoir sample (at most ID_POOL_CAP) of the ids of one resource created
/// so far.
#[derive(Default)]
struct IdPool {
    ids: Vec<String>,
    seen: u64,
}

impl IdPool {
    fn add(&mut self, id: String) {
        self.seen += 1;
        if self.ids.len() < ID_POOL_CAP {
            self.ids.push(id);
        } else {
            let slot = rand::thread_rng().gen_range(0..self.seen);
            if let Some(entry) = usize::try_from(slot).ok().and_then(|i| self.ids.get_mut(i)) {
                *entry = id;
            }
        }
    }
}

/// Checks a response against what the scenario expects; for creates, also
/// returns the new row's id.
fn judge(scenario: Scenario, response: &Response) -> Result<Option<String>, ErrorSample> {
    if response.status != scenario.expected_status() {
        return Err(ErrorSample::from_response(response, ""));
    }
    if scenario.action() == Action::Sale {
        // A sale counts only when the processor approved it in full.
        let status = serde_json::from_slice::<Value>(&response.body)
            .ok()
            .and_then(|v| v.pointer("/transaction/status_id").and_then(Value::as_u64));
        return match status {
            Some(SALE_APPROVED) => Ok(None),
            _ => Err(ErrorSample::from_response(
                response,
                &format!("transaction.status_id is not {SALE_APPROVED}: "),
            )),
        };
    }
    if scenario.action() != Action::Create {
        return Ok(None);
    }
    let pointer = scenario.resource().id_pointer();
    let id = serde_json::from_slice::<Value>(&response.body)
        .ok()
        .and_then(|v| match v.pointer(pointer) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        });
    match id {
        Some(id) => Ok(Some(id)),
        None => Err(ErrorSample::from_response(
            response,
            &format!("response has no {}: ", pointer[1..].replace('/', ".")),
        )),
    }
}

/// The first failure of a run, shown once so the cause of errors is visible.
#[derive(Clone, Debug)]
struct ErrorSample {
    status: Option<u16>,
    detail: String,
}

impl ErrorSample {
    fn from_response(response: &Response, note: &str) -> ErrorSample {
        let body: String = String::from_utf8_lossy(&response.body)
            .chars()
            .take(MAX_ERROR_BODY_CHARS)
            .collect();
        ErrorSample {
            status: Some(response.status),
            detail: format!("{note}{body}"),
        }
    }

    fn transport(error: &anyhow::Error) -> ErrorSample {
        ErrorSample {
            status: None,
            detail: format!("{error:#}"),
        }
    }
}

impl fmt::Display for ErrorSample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.status {
            Some(status) => write!(f, "HTTP {status}: {}", self.detail),
            None => write!(f, "transport error: {}", self.detail),
        }
    }
}

/// Checks that the server is reachable and accepts our credentials before
/// any load is generated, and returns the tenant's contact count if the
/// list response reports one.
async fn probe(api: &Api, url: &str) -> Result<Option<u64>> {
    let mut conn = None;
    let request = api.request("GET", PROBE_PATH, None);
    let response = api
        .exchange(&mut conn, &request)
        .await
        .with_context(|| format!("cannot reach Ferrogate at {url} (is `ferrogate serve` running?)"))?;
    if matches!(response.status, 401 | 403) {
        bail!(
            "the server rejected the bench credentials: {}",
            ErrorSample::from_response(&response, "")
        );
    }
    if response.status != 200 {
        eprintln!(
            "warning: GET {PROBE_PATH} returned {}",
            ErrorSample::from_response(&response, "")
        );
        return Ok(None);
    }
    let body: Value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    // Lists carry their total in meta.pagination.totalCount.
    Ok(body
        .pointer("/meta/pagination/totalCount")
        .and_then(Value::as_u64))
}

// ---------------------------------------------------------------------------
// Bulk creation: --seed-rows and the id pools of the get scenarios
// ---------------------------------------------------------------------------

#[derive(Default)]
struct CreateProgress {
    /// Rows some client is creating or has created; never exceeds the target.
    claimed: AtomicU64,
    created: AtomicU64,
    errors: AtomicU64,
    first_error: Mutex<Option<ErrorSample>>,
}

impl CreateProgress {
    /// Claims one more row to create, unless the target is already covered.
    fn claim(&self, target: u64) -> bool {
        self.claimed
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                (c < target).then_some(c + 1)
            })
            .is_ok()
    }
}

struct CreateSummary {
    created: u64,
    errors: u64,
    elapsed: Duration,
    first_error: Option<ErrorSample>,
}

impl CreateSummary {
    fn rate(&self) -> f64 {
        self.created as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Creates `count` rows of `resource` as fast as possible with
/// SEED_CONCURRENCY clients, remembering their ids. Failed creates are
/// retried, but the run gives up once errors pass a small budget, so a broken
/// server cannot keep it going forever.
async fn create_rows(
    api: &Arc<Api>,
    resource: Resource,
    count: u64,
    label: &'static str,
    show_progress: bool,
) -> Result<CreateSummary> {
    let progress = Arc::new(CreateProgress::default());
    let max_errors = 100 + count / 100;
    let clients = usize::try_from(count).unwrap_or(usize::MAX).min(SEED_CONCURRENCY);
    let started = Instant::now();

    let reporter = show_progress.then(|| {
        let progress = Arc::clone(&progress);
        tokio::spawn(async move {
            let (mut last_count, mut last_time) = (0, Instant::now());
            loop {
                tokio::time::sleep(SEED_PROGRESS_EVERY).await;
                let created = progress.created.load(Ordering::Relaxed);
                let rate = (created - last_count) as f64 / last_time.elapsed().as_secs_f64();
                eprintln!(
                    "{label}: {created}/{count} created, {rate:.0}/s over the last {}s, {} errors",
                    SEED_PROGRESS_EVERY.as_secs(),
                    progress.errors.load(Ordering::Relaxed)
                );
                (last_count, last_time) = (created, Instant::now());
            }
        })
    });

    let workers: Vec<_> = (0..clients)
        .map(|_| {
            let api = Arc::clone(api);
            let progress = Arc::clone(&progress);
            tokio::spawn(async move {
                let mut conn = None;
                while progress.errors.load(Ordering::Relaxed) < max_errors && progress.claim(count) {
                    let request = api.create_request(resource);
                    let outcome = match api.exchange(&mut conn, &request).await {
                        Ok(response) => judge(resource.create_scenario(), &response),
                        Err(e) => {
                            tokio::time::sleep(ERROR_BACKOFF).await;
                            Err(ErrorSample::transport(&e))
                        }
                    };
                    match outcome {
                        Ok(id) => {
                            if let Some(id) = id {
                                api.remember(resource, id);
                            }
                            progress.created.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(sample) => {
                            // Hand the row back so it is retried.
                            progress.claimed.fetch_sub(1, Ordering::Relaxed);
                            progress.errors.fetch_add(1, Ordering::Relaxed);
                            progress
                                .first_error
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .get_or_insert(sample);
                        }
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.context("create client task failed")?;
    }
    if let Some(reporter) = reporter {
        reporter.abort();
    }

    let first_error = progress
        .first_error
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    Ok(CreateSummary {
        created: progress.created.load(Ordering::Relaxed),
        errors: progress.errors.load(Ordering::Relaxed),
        elapsed: started.elapsed(),
        first_error,
    })
}

/// Grows the tenant to at least `target_rows` contacts.
async fn seed(api: &Arc<Api>, target_rows: u64, existing: Option<u64>, json: bool) -> Result<()> {
    let existing = existing.unwrap_or_else(|| {
        eprintln!(
            "warning: the contact list reports no total count, so existing rows cannot be \
             counted; creating all {target_rows}"
        );
        0
    });
    if existing >= target_rows {
        eprintln!("seed: tenant already has {existing} contacts (>= {target_rows}), nothing to create");
        return Ok(());
    }
    let needed = target_rows - existing;
    eprintln!("seed: tenant has {existing} contacts, creating {needed} more with {SEED_CONCURRENCY} clients");
    let summary = create_rows(api, Resource::Contact, needed, "seed", true).await?;
    if json {
        println!(
            "{}",
            json!({
                "scenario": "seed",
                "target": target_rows,
                "existing": existing,
                "created": summary.created,
                "errors": summary.errors,
                "elapsed_s": round(summary.elapsed.as_secs_f64(), 3),
                "creates_per_s": round(summary.rate(), 1),
            })
        );
    } else {
        println!(
            "seed  target={target_rows}  existing={existing}  created={}  errors={}  elapsed={:.1}s  rate={:.1}/s",
            summary.created,
            summary.errors,
            summary.elapsed.as_secs_f64(),
            summary.rate()
        );
    }
    if let Some(first) = &summary.first_error {
        eprintln!("seed: first error: {first}");
    }
    ensure!(
        summary.created == needed,
        "seeding stopped after {} errors with {} of {needed} contacts created",
        summary.errors,
        summary.created
    );
    Ok(())
}

/// A get scenario (or sale-vault) needs existing ids of its resource; create
/// some if this process has too few.
async fn fill_pool(api: &Arc<Api>, scenario: Scenario) -> Result<()> {
    let resource = scenario.resource();
    let name = scenario.name();
    let plural = resource.plural();
    let have = api.id_count(resource);
    if have >= GET_POOL_MIN {
        return Ok(());
    }
    let missing = (GET_POOL_MIN - have) as u64;
    eprintln!("{name}: creating {missing} {plural} to use");
    let summary = create_rows(api, resource, missing, "pool", false).await?;
    if let Some(first) = &summary.first_error {
        eprintln!("{name}: first error while creating {plural}: {first}");
    }
    ensure!(
        api.id_count(resource) > 0,
        "{name}: could not create any {plural} to use"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Timed scenario runs
// ---------------------------------------------------------------------------

/// What one client measured.
#[derive(Default)]
struct ClientStats {
    requests: u64,
    errors: u64,
    /// Latency of each request that got a response, in microseconds.
    latencies_us: Vec<u32>,
    /// Earliest failure, with the time its request started.
    first_error: Option<(Instant, ErrorSample)>,
}

impl ClientStats {
    fn merge(&mut self, other: ClientStats) {
        self.requests += other.requests;
        self.errors += other.errors;
        self.latencies_us.extend(other.latencies_us);
        if let Some((at, sample)) = other.first_error {
            if self.first_error.as_ref().is_none_or(|(mine, _)| at < *mine) {
                self.first_error = Some((at, sample));
            }
        }
    }
}

/// How a client builds its next request.
enum RequestSource {
    Create(Resource),
    /// contact-search: `last_name=ch<n>`, n in `[from, to)`.
    Search(u64, u64),
    Get(Resource, Arc<Vec<String>>),
    Fixed(Vec<u8>),
    SaleVault(Arc<Vec<String>>),
}

/// One measurement: a scenario at one concurrency level.
#[derive(Clone, Copy)]
struct Run {
    scenario: Scenario,
    concurrency: usize,
    /// Open-loop requests per second; None for closed loop.
    rate: Option<f64>,
    warmup: Duration,
    duration: Duration,
}

/// The open-loop schedule: request `i` is due at `start + i / rate`. The
/// clients take due times in order, so a request waits for a free client
/// when all are busy, and that wait counts in its latency.
struct Pacer {
    start: Instant,
    rate: f64,
    next: AtomicU64,
}

impl Pacer {
    fn next_due(&self) -> Instant {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        self.start + Duration::from_secs_f64(i as f64 / self.rate)
    }
}

async fn run_scenario(api: &Arc<Api>, run: Run) -> Result<RunResult> {
    let Run {
        scenario,
        concurrency,
        rate,
        warmup,
        duration,
    } = run;
    let start = Instant::now();
    let measure_from = start + warmup;
    let until = measure_from + duration;
    let pacer = rate.map(|rate| {
        Arc::new(Pacer {
            start,
            rate,
            next: AtomicU64::new(0),
        })
    });
    let resource = scenario.resource();
    // contact-search picks among the contacts named Bench<n>: as many as
    // this process made or, reusing a tenant, the tenant has.
    let searched = if scenario == Scenario::ContactSearch {
        let made = api.next_contact.load(Ordering::Relaxed);
        let existing = probe(api, "").await?.unwrap_or(0);
        let to = made.max(existing).max(10);
        Some((to / 10, to))
    } else {
        None
    };
    // Taken once and shared: the id pool can hold 100k ids.
    let ids = scenario.uses_pool().then(|| api.id_snapshot(resource));
    let clients: Vec<_> = (0..concurrency)
        .map(|_| {
            let source = match (&ids, scenario.action()) {
                (Some(ids), Action::Sale) => RequestSource::SaleVault(Arc::clone(ids)),
                (Some(ids), _) => RequestSource::Get(resource, Arc::clone(ids)),
                (None, Action::List) => match (searched, scenario) {
                    (Some((from, to)), _) => RequestSource::Search(from, to),
                    (None, Scenario::ContactPage) => {
                        RequestSource::Fixed(api.request("GET", PAGE_PATH, None))
                    }
                    (None, _) => RequestSource::Fixed(api.request("GET", LIST_PATH, None)),
                },
                (None, Action::Echo) => RequestSource::Fixed(api.request("POST", "/echo", Some(ECHO_BODY))),
                (None, _) => RequestSource::Create(resource),
            };
            let pacer = pacer.clone();
            tokio::spawn(run_client(
                Arc::clone(api),
                scenario,
                source,
                pacer,
                measure_from,
                until,
            ))
        })
        .collect();

    let mut total = ClientStats::default();
    for client in clients {
        total.merge(client.await.context("client task failed")?);
    }
    // Requests started before `until` are allowed to finish and are counted,
    // so the elapsed time runs to the last completion.
    let elapsed = measure_from.elapsed();
    total.latencies_us.sort_unstable();
    Ok(RunResult {
        scenario,
        concurrency,
        rate,
        requests: total.requests,
        errors: total.errors,
        elapsed,
        latencies_us: total.latencies_us,
        first_error: total.first_error.map(|(_, sample)| sample),
    })
}

/// One client on one connection: sends requests back to back (or at the
/// pacer's due times) until `until`, recording only those that start after
/// the warmup.
async fn run_client(
    api: Arc<Api>,
    scenario: Scenario,
    source: RequestSource,
    pacer: Option<Arc<Pacer>>,
    measure_from: Instant,
    until: Instant,
) -> ClientStats {
    let mut stats = ClientStats::default();
    let mut conn = None;
    let mut rng = StdRng::from_entropy();
    while Instant::now() < until {
        // Open loop: the latency runs from the due time, not from when this
        // client got round to it.
        let due = match &pacer {
            Some(pacer) => {
                let due = pacer.next_due();
                if due >= until {
                    break;
                }
                tokio::time::sleep_until(due.into()).await;
                Some(due)
            }
            None => None,
        };
        let built;
        let request: &[u8] = match &source {
            RequestSource::Create(resource) => {
                built = api.create_request(*resource);
                &built
            }
            RequestSource::Get(resource, ids) => {
                let id = &ids[rng.gen_range(0..ids.len())];
                built = api.request("GET", &format!("{}/{id}", resource.path()), None);
                &built
            }
            RequestSource::SaleVault(ids) => {
                built = api.sale_vault_request(&ids[rng.gen_range(0..ids.len())]);
                &built
            }
            RequestSource::Search(from, to) => {
                let n = rng.gen_range(*from..*to);
                built = api.request(
                    "GET",
                    &format!("{CONTACTS_PATH}?page_size=20&last_name=ch{n}&sort=-created_ts"),
                    None,
                );
                &built
            }
            RequestSource::Fixed(request) => request,
        };

        let started = due.unwrap_or_else(Instant::now);
        let result = api.exchange(&mut conn, request).await;
        let latency = started.elapsed();
        let (responded, outcome) = match result {
            Ok(response) => (true, judge(scenario, &response)),
            Err(e) => {
                tokio::time::sleep(ERROR_BACKOFF).await;
                (false, Err(ErrorSample::transport(&e)))
            }
        };
        if let (Ok(Some(id)), Scenario::PostbackContact) = (&outcome, scenario) {
            postbacks::created(id, started >= measure_from);
        }
        // Created ids feed later get runs of the same resource, warmup included.
        if let (Ok(Some(id)), RequestSource::Create(resource)) = (&outcome, &source) {
            api.remember(*resource, id.clone());
        }
        if started < measure_from {
            continue;
        }
        stats.requests += 1;
        if responded {
            stats
                .latencies_us
                .push(u32::try_from(latency.as_micros()).unwrap_or(u32::MAX));
        }
        if let Err(sample) = outcome {
            stats.errors += 1;
            if stats.first_error.is_none() {
                stats.first_error = Some((started, sample));
            }
        }
    }
    stats
}

struct RunResult {
    scenario: Scenario,
    concurrency: usize,
    rate: Option<f64>,
    /// Requests started in the measured window, failures included.
    requests: u64,
    errors: u64,
    elapsed: Duration,
    /// Sorted ascending.
    latencies_us: Vec<u32>,
    first_error: Option<ErrorSample>,
}

impl RunResult {
    fn all_failed(&self) -> bool {
        self.errors == self.requests
    }

    fn rps(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    /// Nearest-rank percentile in milliseconds; None without any responses.
    fn percentile_ms(&self, p: f64) -> Option<f64> {
        let n = self.latencies_us.len();
        if n == 0 {
            return None;
        }
        let rank = ((p / 100.0) * n as f64).ceil() as usize;
        Some(f64::from(self.latencies_us[rank.clamp(1, n) - 1]) / 1000.0)
    }

    fn print(&self, json: bool) {
        let [p50, p90, p99, max] = [50.0, 90.0, 99.0, 100.0].map(|p| self.percentile_ms(p));
        if json {
            let ms = |v: Option<f64>| v.map(|v| round(v, 3));
            println!(
                "{}",
                json!({
                    "scenario": self.scenario.name(),
                    "concurrency": self.concurrency,
                    "rate": self.rate,
                    "requests": self.requests,
                    "errors": self.errors,
                    "elapsed_s": round(self.elapsed.as_secs_f64(), 3),
                    "rps": round(self.rps(), 1),
                    "p50_ms": ms(p50),
                    "p90_ms": ms(p90),
                    "p99_ms": ms(p99),
                    "max_ms": ms(max),
                    "first_error": self.first_error.as_ref().map(|e| json!({
                        "status": e.status,
                        "detail": e.detail,
                    })),
                })
            );
        } else {
            let ms = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}ms"));
            let rate = self.rate.map_or_else(String::new, |r| format!("  rate={r}"));
            println!(
                "{:<14}  c={:<4}{rate}  requests={}  errors={}  rps={:.1}  p50={}  p90={}  p99={}  max={}",
                self.scenario.name(),
                self.concurrency,
                self.requests,
                self.errors,
                self.rps(),
                ms(p50),
                ms(p90),
                ms(p99),
                ms(max)
            );
        }
        // Once per run, on stderr so --json output stays machine-readable.
        if let Some(first) = &self.first_error {
            eprintln!(
                "{} c={}: first error: {first}",
                self.scenario.name(),
                self.concurrency
            );
        }
    }
}

fn round(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}

// ---------------------------------------------------------------------------
// Postback delivery: a receiver in this process
// ---------------------------------------------------------------------------

mod postbacks {
    use super::{round, Api, Value};
    use anyhow::{Context, Result};
    use serde_json::json;
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    use std::time::{Duration, Instant};

    /// When each measured contact's create answered, and when its CREATE
    /// postback arrived.
    #[derive(Default)]
    struct Probe {
        created: HashMap<String, Instant>,
        received: HashMap<String, Instant>,
        first_created: Option<Instant>,
    }

    fn probe() -> &'static Mutex<Probe> {
        static PROBE: OnceLock<Mutex<Probe>> = OnceLock::new();
        PROBE.get_or_init(Mutex::default)
    }

    /// Starts the receiver and subscribes it to the tenant's contact
    /// creates, once per process; clears what an earlier run recorded.
    pub async fn prepare(api: &Api) -> Result<()> {
        static URL: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
        let url = URL
            .get_or_try_init(|| async {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                let url = format!("http://{}/bench-receiver", listener.local_addr()?);
                let app = axum::Router::new().route("/bench-receiver", axum::routing::post(receive));
                tokio::spawn(async move { axum::serve(listener, app).await });
                let body = json!({ "postbackconfig": {
                    "location_id": api.location_id, "resource": "contact", "url": url,
                    "on_create": 1, "on_update": 0, "on_delete": 0, "number_of_attempts": 3, "attempt_interval": 1 } });
                let request = api.request("POST", "/v2/postbackconfigs", Some(&body.to_string()));
                let response = api.exchange(&mut None, &request).await?;
                anyhow::ensure!(
                    response.status == 201,
                    "creating the postback config answered {}: {} (does the server run with FERROGATE_POSTBACK_ALLOW_PRIVATE=1?)",
                    response.status,
                    String::from_utf8_lossy(&response.body)
                );
                Ok::<String, anyhow::Error>(url)
            })
            .await
            .context("starting the postback receiver")?;
        let _ = url;
        *probe().lock().unwrap_or_else(|e| e.into_inner()) = Probe::default();
        Ok(())
    }

    async fn receive(body: axum::body::Bytes) -> &'static str {
        let at = Instant::now();
        let id = form_urlencoded::parse(&body)
            .find(|(k, _)| k == "data")
            .and_then(|(_, data)| serde_json::from_str::<Value>(&data).ok())
            .and_then(|v| v["id"].as_str().map(str::to_string));
        if let Some(id) = id {
            probe()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .received
                .entry(id)
                .or_insert(at);
        }
        "ok"
    }

    /// Records a create's answer; only measured ones count.
    pub fn created(id: &str, measured: bool) {
        if !measured {
            return;
        }
        let now = Instant::now();
        let mut p = probe().lock().unwrap_or_else(|e| e.into_inner());
        p.first_created.get_or_insert(now);
        p.created.insert(id.to_string(), now);
    }

    /// Waits (up to 60 s) for the measured creates' postbacks, then prints
    /// deliveries per second and the delay percentiles.
    pub async fn report(concurrency: usize, rate: Option<f64>, json: bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let done = {
                let p = probe().lock().unwrap_or_else(|e| e.into_inner());
                p.created.keys().all(|id| p.received.contains_key(id))
            };
            if done || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let p = probe().lock().unwrap_or_else(|e| e.into_inner());
        let mut delays_us: Vec<u64> = Vec::with_capacity(p.created.len());
        let mut last = None::<Instant>;
        for (id, created) in &p.created {
            if let Some(at) = p.received.get(id) {
                delays_us.push(at.saturating_duration_since(*created).as_micros() as u64);
                last = Some(last.map_or(*at, |l: Instant| l.max(*at)));
            }
        }
        delays_us.sort_unstable();
        let events = p.created.len();
        let delivered = delays_us.len();
        let span = match (p.first_created, last) {
            (Some(first), Some(last)) => last.saturating_duration_since(first).as_secs_f64(),
            _ => 0.0,
        };
        let per_second = if span > 0.0 { delivered as f64 / span } else { 0.0 };
        let pct = |q: f64| -> Option<f64> {
            let n = delays_us.len();
            (n > 0).then(|| {
                let rank = ((q / 100.0) * n as f64).ceil() as usize;
                delays_us[rank.clamp(1, n) - 1] as f64 / 1000.0
            })
        };
        let [p50, p90, p99, max] = [50.0, 90.0, 99.0, 100.0].map(pct);
        if json {
            let ms = |v: Option<f64>| v.map(|v| round(v, 3));
            println!(
                "{}",
                json!({ "scenario": "postback-delivery", "concurrency": concurrency, "rate": rate,
                    "events": events, "delivered": delivered, "deliveries_per_s": round(per_second, 1),
                    "delay_p50_ms": ms(p50), "delay_p90_ms": ms(p90), "delay_p99_ms": ms(p99), "delay_max_ms": ms(max) })
            );
        } else {
            let ms = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}ms"));
            println!(
                "{:<14}  c={:<4}  events={events}  delivered={delivered}  deliveries/s={per_second:.1}  delay p50={}  p90={}  p99={}  max={}",
                "postback-delivery",
                concurrency,
                ms(p50),
                ms(p90),
                ms(p99),
                ms(max)
            );
        }
    }
}

/// `--scheduler-run N`: the recurring scheduler charging N due schedules.
/// PostgreSQL's ceiling in the same run: pgbench's TPC-B.
mod pgbench {
    use super::*;

    const SCRATCH: &str = "ferrogate_pgbench";

    pub fn run(concurrency: u32, duration: Duration, json: bool) -> Result<()> {
        let url = std::env::var("FERROGATE_DATABASE_URL").unwrap_or_default();
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            eprintln!("--pgbench: FERROGATE_DATABASE_URL is not a PostgreSQL URL; skipped");
            return Ok(());
        }
        let Some((base, _db)) = url.split('?').next().unwrap_or_default().rsplit_once('/') else {
            bail!("--pgbench: cannot read the database name of FERROGATE_DATABASE_URL");
        };
        let scratch = format!("{base}/{SCRATCH}");
        let mut admin = postgres::Client::connect(&url, postgres::NoTls)
            .context("--pgbench: connecting to FERROGATE_DATABASE_URL")?;
        // One statement each: several in one string run as one transaction,
        // which DROP and CREATE DATABASE refuse.
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {SCRATCH} WITH (FORCE)"))?;
        admin.batch_execute(&format!("CREATE DATABASE {SCRATCH}"))?;
        let init = Command::new("pgbench")
            .args(["-i", "-s", "1", "-q", &scratch])
            .output();
        let init = match init {
            Ok(out) => out,
            Err(e) => {
                eprintln!("--pgbench: pgbench could not run ({e}); skipped");
                return Ok(());
            }
        };
        ensure!(
            init.status.success(),
            "pgbench -i failed: {}",
            String::from_utf8_lossy(&init.stderr)
        );
        let out = Command::new("pgbench")
            .args([
                "-c",
                &concurrency.to_string(),
                "-j",
                "2",
                "-T",
                &duration.as_secs().max(1).to_string(),
                "-M",
                "prepared",
                &scratch,
            ])
            .stdin(Stdio::null())
            .output()
            .context("running pgbench")?;
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {SCRATCH} WITH (FORCE)"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let value = |prefix: &str| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix(prefix))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|v| v.parse::<f64>().ok())
        };
        let (Some(tps), latency) = (value("tps = "), value("latency average = ")) else {
            bail!(
                "pgbench printed no tps: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        if json {
            println!(
                "{}",
                json!({ "scenario": "pgbench", "concurrency": concurrency, "rps": tps,
                    "latency_avg_ms": latency })
            );
        } else {
            println!(
                "pgbench         c={concurrency:<5} tps={tps:.1}  latency_avg={:.2}ms  (TPC-B, scale 1, -M prepared)",
                latency.unwrap_or(0.0)
            );
        }
        Ok(())
    }
}

mod scheduler {
    use super::{round, Api, Conn};
    use anyhow::{bail, ensure, Context, Result};
    use serde_json::{json, Value};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// Clients creating the schedules.
    const CREATORS: usize = 64;

    /// One request on a connection of its own, with its own time limit.
    async fn call(
        api: &Api,
        conn: &mut Option<Conn>,
        method: &str,
        path: &str,
        body: Option<Value>,
        limit: Duration,
    ) -> Result<(u16, Value)> {
        let request = api.request(method, path, body.map(|b| b.to_string()).as_deref());
        if conn.is_none() {
            *conn = Some(Conn::connect(api.target.addr).await?);
        }
        let Some(c) = conn.as_mut() else {
            bail!("no connection")
        };
        let response = tokio::time::timeout(limit, c.round_trip(&request))
            .await
            .with_context(|| format!("{method} {path}: no answer within {limit:?}"))??;
        if !response.keep_alive {
            *conn = None;
        }
        let body = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
        Ok((response.status, body))
    }

    async fn total(api: &Api, conn: &mut Option<Conn>, path: &str) -> Result<u64> {
        let (status, body) = call(api, conn, "GET", path, None, Duration::from_secs(60)).await?;
        ensure!(status == 200, "GET {path}: {status} {body}");
        body["meta"]["pagination"]["totalCount"]
            .as_u64()
            .with_context(|| format!("GET {path}: no totalCount"))
    }

    pub async fn run(api: &Arc<Api>, schedules: u64, json_out: bool) -> Result<()> {
        let mut conn = None;
        let short = Duration::from_secs(30);
        let (status, body) = call(
            api,
            &mut conn,
            "POST",
            "/v2/contacts",
            Some(
                json!({ "contact": { "location_id": api.location_id, "last_name": "Scheduler",
                "email": "scheduler@example.com" } }),
            ),
            short,
        )
        .await?;
        ensure!(status == 201, "creating the contact: {status} {body}");
        let contact = body["contact"]["id"].as_str().unwrap_or_default().to_string();
        let (status, body) = call(
            api,
            &mut conn,
            "POST",
            "/v2/accountvaults",
            Some(
                json!({ "accountvault": { "location_id": api.location_id, "payment_method": "cc",
                "contact_id": contact, "account_number": "4111111111111111", "exp_date": api.exp_date } }),
            ),
            short,
        )
        .await?;
        ensure!(status == 201, "creating the vault: {status} {body}");
        let vault = body["accountvault"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let (status, body) = call(api, &mut conn, "GET", "/v2/developer/testclock", None, short).await?;
        ensure!(
            status == 200,
            "reading the test clock (sandbox only): {status} {body}"
        );
        let now = body["testclock"]["now"].as_i64().context("the clock's now")?;
        let today = chrono::DateTime::from_timestamp(now, 0)
            .context("now")?
            .date_naive();
        let tomorrow = today.succ_opt().context("tomorrow")?;

        // The schedules, created through the API by many clients.
        let created = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let mut creators = tokio::task::JoinSet::new();
        for _ in 0..CREATORS {
            let (api, created, vault) = (api.clone(), created.clone(), vault.clone());
            let start_date = tomorrow.format("%Y-%m-%d").to_string();
            creators.spawn(async move {
                let mut conn = None;
                while created.fetch_add(1, Ordering::Relaxed) < schedules {
                    let body = json!({ "recurring": { "location_id": api.location_id, "account_vault_id": vault,
                        "transaction_amount": "10.00", "interval": 1, "interval_type": "m",
                        "start_date": start_date } });
                    let (status, answer) = call(&api, &mut conn, "POST", "/v2/recurrings", Some(body), Duration::from_secs(60)).await?;
                    ensure!(status == 201, "creating a recurring: {status} {answer}");
                }
                Ok::<(), anyhow::Error>(())
            });
        }
        while let Some(done) = creators.join_next().await {
            done??;
        }
        let create_s = started.elapsed().as_secs_f64();

        // Move the clock to 01:00 tomorrow: everything falls due at once.
        let target = tomorrow
            .and_hms_opt(1, 0, 0)
            .context("01:00")?
            .and_utc()
            .timestamp();
        // A fresh connection: the server has closed the one left idle
        // while the schedules were created (its keep-alive time limit).
        conn = None;
        let started = Instant::now();
        let (status, answer) = call(
            api,
            &mut conn,
            "POST",
            "/v2/developer/testclock/advance",
            Some(json!({ "testclock": { "seconds": target - now } })),
            Duration::from_secs(7200),
        )
        .await?;
        ensure!(status == 200, "advancing the clock: {status} {answer}");
        let mut charged = 0;
        while started.elapsed() < Duration::from_secs(7200) {
            charged = total(api, &mut conn, "/v2/transactions?is_recurring=1&page_size=1").await?;
            if charged >= schedules {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let run_s = started.elapsed().as_secs_f64();
        let approved = total(
            api,
            &mut conn,
            "/v2/transactions?is_recurring=1&status_id=101&page_size=1",
        )
        .await?;
        let line = json!({
            "scenario": "scheduler-run",
            "schedules": schedules,
            "create_seconds": round(create_s, 2),
            "creates_per_second": round(schedules as f64 / create_s, 1),
            "run_seconds": round(run_s, 2),
            "charges": charged,
            "approved": approved,
            "charges_per_second": round(charged as f64 / run_s, 1),
            "ran_during_the_advance": answer["testclock"]["ran"]["recurring_runs"],
        });
        if json_out {
            println!("{line}");
        } else {
            println!(
                "scheduler-run: {schedules} schedules created in {create_s:.1} s ({:.0}/s); \
                 {charged} charged ({approved} approved) in {run_s:.1} s: {:.0} charges/s",
                schedules as f64 / create_s,
                charged as f64 / run_s
            );
        }
        ensure!(
            charged == schedules,
            "{charged} charges for {schedules} schedules"
        );
        Ok(())
    }
}
