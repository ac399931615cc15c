//! The test harness: each test starts the real `ferrogate` binary on port
//! 0 against a fresh database (a temporary SQLite file, or a fresh
//! PostgreSQL database when FERROGATE_TEST_DATABASE_URL is set), creates
//! tenants with `ferrogate bootstrap --json` and talks plain HTTP to it.

pub mod db;
pub mod receiver;
pub mod sim;
pub mod smtp;
pub mod wait;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_ferrogate");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// Runs `test` on SQLite, or on PostgreSQL when configured (else skips,
/// see [`no_postgres`]). The app is lent mutably so a test may restart it
/// (`kill`, `spawn`).
pub fn run_on(engine: Engine, test: impl FnOnce(&mut TestApp)) {
    match TestApp::start(engine) {
        Some(mut app) => test(&mut app),
        None => no_postgres(),
    }
}

/// A PostgreSQL test without FERROGATE_TEST_DATABASE_URL: skipped on a
/// developer's machine, but a failure when `CI` is set, so CI cannot pass
/// with half of its tests silently not run. (A database that is set but
/// unreachable fails everywhere: the connection is expected.)
pub fn no_postgres() {
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but FERROGATE_TEST_DATABASE_URL is not: the PostgreSQL tests must run in CI"
    );
    eprintln!("skipped: FERROGATE_TEST_DATABASE_URL is not set");
}

/// Declares each listed test once per engine: `name::sqlite`,
/// `name::postgres`. A test takes `&TestApp`, or `&mut TestApp` when it
/// restarts the server.
#[macro_export]
macro_rules! engine_tests {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn sqlite() {
                    $crate::support::run_on($crate::support::Engine::Sqlite, |app| super::$name(app));
                }
                #[test]
                fn postgres() {
                    $crate::support::run_on($crate::support::Engine::Postgres, |app| super::$name(app));
                }
            }
        )*
    };
}

pub struct TestApp {
    pub engine: Engine,
    pub base: String,
    pub database_url: String,
    pub dir: PathBuf,
    pub data_key: String,
    /// More environment for the server process.
    pub extra_env: Vec<(String, String)>,
    child: Option<Child>,
    pg_admin: Option<(String, String)>,
}

fn unique() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

/// A fresh data key for a test server.
fn data_key() -> String {
    use base64::Engine as _;
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl TestApp {
    pub fn start(engine: Engine) -> Option<TestApp> {
        let dir = std::env::temp_dir().join(format!("ferrogate-it-{}", unique()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let (database_url, pg_admin) = match engine {
            Engine::Sqlite => (format!("sqlite://{}", dir.join("test.db").display()), None),
            Engine::Postgres => {
                let admin = std::env::var("FERROGATE_TEST_DATABASE_URL").ok()?;
                let name = format!("fg_it_{}", unique());
                let mut client =
                    postgres::Client::connect(&admin, postgres::NoTls).expect("connect to postgres");
                client
                    .batch_execute(&format!("CREATE DATABASE {name}"))
                    .expect("create database");
                let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
                (format!("{base}/{name}"), Some((admin.clone(), name)))
            }
        };
        let mut app = TestApp {
            engine,
            base: String::new(),
            database_url,
            dir,
            data_key: data_key(),
            extra_env: Vec::new(),
            child: None,
            pg_admin,
        };
        app.spawn();
        Some(app)
    }

    /// Starts (or restarts) the server process on a free port.
    pub fn spawn(&mut self) {
        let log = std::fs::File::create(self.dir.join("server.log")).expect("log file");
        let mut child = Command::new(BIN)
            .arg("serve")
            .env("FERROGATE_DATABASE_URL", &self.database_url)
            .env("FERROGATE_LISTEN", "127.0.0.1:0")
            .env("FERROGATE_DATA_KEY", &self.data_key)
            // Stored files stay in the test's own directory (with
            // PostgreSQL the default is the working directory).
            .env("FERROGATE_FILES_DIR", self.dir.join("files"))
            .env("FERROGATE_DB_POOL", "4")
            .env("RUST_LOG", "info")
            // Postback tests deliver to receivers on loopback.
            .env("FERROGATE_POSTBACK_ALLOW_PRIVATE", "1")
            .env_remove("FERROGATE_PUBLIC_URL")
            .envs(self.extra_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start ferrogate serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read listening line");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}; log: {}", self.log()))
            .to_string();
        self.base = addr;
        self.child = Some(child);
    }

    /// Sends SIGTERM and waits for a graceful exit.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("server running");
        unsafe_kill(child.id(), "TERM");
        child.wait().expect("wait")
    }

    /// Kills the server with SIGKILL: no shutdown code runs.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("server running");
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Runs a `ferrogate` command against this app's database.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new(BIN)
            .args(args)
            .env("FERROGATE_DATABASE_URL", &self.database_url)
            .env("FERROGATE_DATA_KEY", &self.data_key)
            .output()
            .expect("run ferrogate")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Runs `ferrogate bootstrap --json` against this server's database.
    pub fn bootstrap(&self) -> Tenant {
        let out = Command::new(BIN)
            .args(["bootstrap", "--json"])
            .env("FERROGATE_DATABASE_URL", &self.database_url)
            .env("FERROGATE_DATA_KEY", &self.data_key)
            // Stored files stay in the test's own directory (with
            // PostgreSQL the default is the working directory).
            .env("FERROGATE_FILES_DIR", self.dir.join("files"))
            .output()
            .expect("run bootstrap");
        assert!(
            out.status.success(),
            "bootstrap failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8(out.stdout).expect("utf8");
        assert_eq!(
            stdout.trim().lines().count(),
            1,
            "bootstrap prints exactly one line: {stdout}"
        );
        let creds: Value = serde_json::from_str(stdout.trim()).expect("bootstrap JSON");
        Tenant {
            base: self.base.clone(),
            creds,
        }
    }

    pub fn client(&self) -> Client {
        Client {
            base: self.base.clone(),
        }
    }
}

fn unsafe_kill(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status();
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some((admin, name)) = self.pg_admin.take() {
            if let Ok(mut c) = postgres::Client::connect(&admin, postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
            }
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("server log kept in {}", self.dir.display());
        }
    }
}

/// An HTTP response as the tests see it.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub body: Value,
    pub text: String,
    pub headers: Vec<(String, String)>,
}

impl Resp {
    /// The ids of a list answer's records, in order (`key`: the plural).
    pub fn ids(&self, key: &str) -> Vec<String> {
        self.body[key]
            .as_array()
            .unwrap_or_else(|| panic!("no {key} list in {}", self.text))
            .iter()
            .map(|x| x["id"].as_str().unwrap_or_default().to_string())
            .collect()
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    /// Asserts the status, printing the body when it differs.
    #[track_caller]
    pub fn expect(self, status: u16) -> Resp {
        assert_eq!(self.status, status, "unexpected status; body: {}", self.text);
        self
    }
    /// The messages of a validation error for `field`.
    pub fn errors(&self, field: &str) -> Vec<String> {
        self.body["errors"][field]
            .as_array()
            .map(|a| a.iter().filter_map(|m| m.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    }
}

/// Plain HTTP with no credentials unless given.
pub struct Client {
    pub base: String,
}

impl Client {
    pub fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> Resp {
        let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build();
        let mut req = agent.request(method, &format!("{}{}", self.base, path));
        for (k, v) in headers {
            req = req.set(k, v);
        }
        let has_type = headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
        let result = match body {
            Some(b) if has_type => req.send_string(b),
            Some(b) => req.set("content-type", "application/json").send_string(b),
            None => req.call(),
        };
        let resp = match result {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{method} {path}: transport error {e}"),
        };
        let status = resp.status();
        let headers = resp
            .headers_names()
            .into_iter()
            .filter_map(|n| resp.header(&n).map(|v| (n.clone(), v.to_string())))
            .collect();
        let text = resp.into_string().unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Resp {
            status,
            body,
            text,
            headers,
        }
    }
}

/// A bootstrapped tenant: its credentials and helpers per verb.
#[derive(Clone)]
pub struct Tenant {
    pub base: String,
    pub creds: Value,
}

impl Tenant {
    pub fn cred(&self, key: &str) -> String {
        self.creds[key]
            .as_str()
            .unwrap_or_else(|| panic!("credential {key}"))
            .to_string()
    }
    pub fn location_id(&self) -> String {
        self.cred("location_id")
    }
    pub fn user_id(&self) -> String {
        self.cred("user_id")
    }
    /// The same tenant acting as another user.
    pub fn as_user(&self, user_id: &str, api_key: &str) -> Tenant {
        let mut creds = self.creds.clone();
        creds["user_id"] = json!(user_id);
        creds["user_api_key"] = json!(api_key);
        Tenant {
            base: self.base.clone(),
            creds,
        }
    }
    fn auth(&self) -> [(String, String); 3] {
        [
            ("developer-id".into(), self.cred("developer_id")),
            ("user-id".into(), self.cred("user_id")),
            ("user-api-key".into(), self.cred("user_api_key")),
        ]
    }
    pub fn send(&self, method: &str, path: &str, body: Option<&str>) -> Resp {
        let auth = self.auth();
        let headers: Vec<(&str, &str)> = auth.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        Client {
            base: self.base.clone(),
        }
        .send(method, path, &headers, body)
    }
    pub fn get(&self, path: &str) -> Resp {
        self.send("GET", path, None)
    }
    pub fn post(&self, path: &str, body: Value) -> Resp {
        self.send("POST", path, Some(&body.to_string()))
    }
    pub fn put(&self, path: &str, body: Value) -> Resp {
        self.send("PUT", path, Some(&body.to_string()))
    }
    pub fn delete(&self, path: &str) -> Resp {
        self.send("DELETE", path, None)
    }

    /// Creates a contact with the given extra fields; returns its record.
    pub fn contact(&self, fields: Value) -> Value {
        let mut c = json!({ "location_id": self.location_id(), "last_name": "Doe" });
        if let (Some(c), Some(f)) = (c.as_object_mut(), fields.as_object()) {
            for (k, v) in f {
                c.insert(k.clone(), v.clone());
            }
        }
        self.post("/v2/contacts", json!({ "contact": c }))
            .expect(201)
            .body["contact"]
            .clone()
    }

    /// Creates a user at `location_id` with a known API key, optionally
    /// with a role; returns (user id, api key).
    pub fn user(&self, location_id: &str, role: Option<&str>) -> (String, String) {
        let key = format!("K{}", uuid::Uuid::new_v4().simple());
        let body = json!({ "user": {
            "primary_location_id": location_id,
            "username": format!("u{}", uuid::Uuid::new_v4().simple()),
            "email": "someone@example.com",
            "user_api_key": key,
        }});
        let id = self.post("/v2/users", body).expect(201).body["user"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        if let Some(role) = role {
            self.post(
                "/v2/authroleusers",
                json!({ "authroleuser": { "user_id": id, "auth_role_id": role } }),
            )
            .expect(201);
        }
        (id, key)
    }

    /// Creates a child location under `parent`; returns its id.
    pub fn location(&self, parent: &str, name: &str) -> String {
        let body = json!({ "location": { "parent_id": parent, "name": name, "branding_domain_url": "pay.example.com" } });
        self.post("/v2/locations", body).expect(201).body["location"]["id"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

/// A JSON string value, or a panic naming what was there instead.
pub fn str_of(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("expected a string, got {v}"))
        .to_string()
}

/// The field names of a validation error body.
pub fn error_fields(r: &Resp) -> std::collections::BTreeSet<String> {
    r.body["errors"]
        .as_object()
        .unwrap_or_else(|| panic!("no errors object: {}", r.text))
        .keys()
        .cloned()
        .collect()
}

/// A set of field names, to compare with `error_fields`.
pub fn fields(names: &[&str]) -> std::collections::BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}
