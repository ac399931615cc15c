//! A postback receiver: a real HTTP server on loopback that records every
//! request and answers as its script says, and the helpers that read the
//! delivery log. Used by the postback and the multi-node tests.

use super::Tenant;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Lower-cased names.
    pub headers: BTreeMap<String, String>,
    pub body: String,
    /// The form fields, in the order sent.
    pub form: Vec<(String, String)>,
}

impl Received {
    pub fn field(&self, name: &str) -> &str {
        self.form
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no form field {name} in {:?}", self.form))
    }
    pub fn data(&self) -> Value {
        serde_json::from_str(self.field("data")).expect("data is JSON")
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// What the receiver answers.
#[derive(Clone, Copy, Debug)]
pub enum Reply {
    Status(u16),
    /// Keeps the connection open without answering.
    Hang,
}

type Script = Box<dyn FnMut(&Received) -> Reply + Send>;

/// A real HTTP receiver on loopback that records every request and
/// answers as its script says.
pub struct Receiver {
    pub url: String,
    log: Arc<Mutex<Vec<Received>>>,
    script: Arc<Mutex<Script>>,
}

impl Receiver {
    pub fn start(path: &str) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind receiver");
        let url = format!("http://{}{path}", listener.local_addr().expect("addr"));
        let log: Arc<Mutex<Vec<Received>>> = Arc::default();
        let script: Arc<Mutex<Script>> = Arc::new(Mutex::new(Box::new(|_| Reply::Status(200))));
        let (l, s) = (log.clone(), script.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (l, s) = (l.clone(), s.clone());
                std::thread::spawn(move || serve_one(stream, &l, &s));
            }
        });
        Receiver { url, log, script }
    }

    pub fn answer(&self, script: impl FnMut(&Received) -> Reply + Send + 'static) {
        *self.script.lock().unwrap() = Box::new(script);
    }

    pub fn received(&self) -> Vec<Received> {
        self.log.lock().unwrap().clone()
    }

    /// Waits until `n` requests have arrived (or panics after `limit`).
    pub fn wait_for(&self, n: usize, limit: Duration) -> Vec<Received> {
        let start = Instant::now();
        loop {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            assert!(
                start.elapsed() < limit,
                "receiver got {} of {n} requests: {:?}",
                got.len(),
                got.iter().map(|r| r.form.clone()).collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn serve_one(stream: TcpStream, log: &Mutex<Vec<Received>>, script: &Mutex<Script>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let body = String::from_utf8_lossy(&body).to_string();
    let form = form_urlencoded::parse(body.as_bytes())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let received = Received {
        method,
        path,
        headers,
        body,
        form,
    };
    let reply = (script.lock().unwrap())(&received);
    log.lock().unwrap().push(received);
    let mut stream = stream;
    match reply {
        Reply::Status(code) => {
            let _ = write!(
                stream,
                "HTTP/1.1 {code} Answer\r\nContent-Length: 11\r\nConnection: close\r\n\r\nanswer {code}"
            );
        }
        Reply::Hang => std::thread::sleep(Duration::from_secs(30)),
    }
}

/// Creates a config; returns its record.
pub fn config(t: &Tenant, fields: Value) -> Value {
    let mut c = json!({ "location_id": t.location_id(), "on_create": 1, "on_update": 1, "on_delete": 1 });
    for (k, v) in fields.as_object().expect("object") {
        c[k] = v.clone();
    }
    t.post("/v2/postbackconfigs", json!({ "postbackconfig": c }))
        .expect(201)
        .body["postbackconfig"]
        .clone()
}

/// The config's delivery log, newest first.
pub fn deliveries(t: &Tenant, config_id: &str) -> Vec<Value> {
    t.get(&format!(
        "/v2/postbackconfigs/{config_id}/deliveries?page_size=100"
    ))
    .expect(200)
    .body["postbackdeliveries"]
        .as_array()
        .expect("list")
        .clone()
}

/// Waits until the config's log satisfies `done`.
pub fn wait_log(t: &Tenant, config_id: &str, limit: Duration, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let log = deliveries(t, config_id);
        if done(&log) {
            return log;
        }
        assert!(start.elapsed() < limit, "delivery log never settled: {log:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
