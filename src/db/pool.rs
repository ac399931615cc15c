//! A tiny blocking connection pool: connections are made up front and
//! handed out to blocking threads; a caller waits while all are busy.

use std::panic::AssertUnwindSafe;
use std::sync::{Condvar, Mutex};

pub struct Pool<C> {
    idle: Mutex<Vec<C>>,
    available: Condvar,
}

impl<C> Pool<C> {
    pub fn new(connections: Vec<C>) -> Self {
        Pool {
            idle: Mutex::new(connections),
            available: Condvar::new(),
        }
    }

    /// Runs `f` with a connection. `f` returns the connection's fate:
    /// `false` drops it (it is broken) and asks `reconnect` for a new one.
    pub fn with<T>(&self, f: impl FnOnce(&mut C) -> (T, bool), reconnect: impl FnOnce() -> Option<C>) -> T {
        let mut conn = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(c) = idle.pop() {
                    break c;
                }
                idle = self.available.wait(idle).unwrap_or_else(|p| p.into_inner());
            }
        };
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| f(&mut conn)));
        let (result, healthy) = match outcome {
            Ok(r) => r,
            Err(panic) => {
                // A connection left mid-transaction by a panic is not reused.
                drop(conn);
                if let Some(fresh) = reconnect() {
                    self.put_back(fresh);
                }
                std::panic::resume_unwind(panic)
            }
        };
        let back = if healthy { Some(conn) } else { reconnect() };
        if let Some(conn) = back {
            self.put_back(conn);
        }
        result
    }

    fn put_back(&self, conn: C) {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).push(conn);
        self.available.notify_one();
    }
}
