//! A `ferrogate terminal-sim` process: the software terminal the router
//! tests connect, one per terminal. It prints one line per event on
//! stdout, which a reader thread collects for the test.

use super::{Tenant, BIN};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Sim {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    pub terminal_id: String,
}

/// A new terminal at the tenant's location: its id and device secret.
pub fn terminal(t: &Tenant, extra: Value) -> (String, String) {
    let mut body =
        json!({ "location_id": t.location_id(), "serial_number": format!("SIM-{}", rand::random::<u32>()) });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let r = t.post("/v2/terminals", json!({ "terminal": body })).expect(201);
    let tm = &r.body["terminal"];
    (
        tm["id"].as_str().unwrap().to_string(),
        tm["terminal_secret"].as_str().unwrap().to_string(),
    )
}

impl Sim {
    /// Starts a simulator for the terminal against `base` and waits until
    /// it has registered.
    pub fn start(base: &str, terminal_id: &str, secret: &str, args: &[&str]) -> Sim {
        let sim = Sim::spawn(base, terminal_id, secret, args);
        sim.wait_line(&format!("connected {terminal_id}"), Duration::from_secs(20));
        sim
    }

    /// Starts a simulator without waiting for it to connect.
    pub fn spawn(base: &str, terminal_id: &str, secret: &str, args: &[&str]) -> Sim {
        let mut child = Command::new(BIN)
            .arg("terminal-sim")
            .args([
                "--url",
                base,
                "--terminal-id",
                terminal_id,
                "--terminal-secret",
                secret,
            ])
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start terminal-sim");
        let lines = Arc::new(Mutex::new(Vec::new()));
        for stream in [
            Box::new(child.stdout.take().expect("stdout")) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().expect("stderr")),
        ] {
            let lines = lines.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    lines.lock().unwrap().push(line);
                }
            });
        }
        Sim {
            child,
            lines,
            terminal_id: terminal_id.to_string(),
        }
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits for a line containing `needle`; returns it.
    pub fn wait_line(&self, needle: &str, limit: Duration) -> String {
        let until = Instant::now() + limit;
        loop {
            if let Some(l) = self.lines().into_iter().find(|l| l.contains(needle)) {
                return l;
            }
            assert!(
                Instant::now() < until,
                "terminal-sim printed no line with {needle:?}: {:#?}",
                self.lines()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The JSON events printed so far with `"event": kind`.
    pub fn events(&self, kind: &str) -> Vec<Value> {
        self.lines()
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["event"] == kind)
            .collect()
    }

    /// Waits until `n` events of `kind` were printed.
    pub fn wait_events(&self, kind: &str, n: usize) -> Vec<Value> {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let found = self.events(kind);
            if found.len() >= n {
                return found;
            }
            assert!(
                Instant::now() < until,
                "expected {n} {kind} events: {:#?}",
                self.lines()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the simulator at once (the device is unplugged).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits for the process to end by itself; its exit status.
    pub fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let until = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < until,
                "terminal-sim did not exit: {:#?}",
                self.lines()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        self.kill();
    }
}
