//! A small blocking connection pool. Every slot survives: a broken
//! connection leaves an empty slot that the next user reconnects, so an
//! outage of the database never shrinks the pool for good; a caller waits
//! at most `WAIT` for a slot.

use std::panic::AssertUnwindSafe;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a caller waits for a free slot before giving up.
const WAIT: Duration = Duration::from_secs(10);

pub type Connector<C> = Box<dyn Fn() -> Result<C, String> + Send + Sync>;

pub struct Pool<C> {
    idle: Mutex<Vec<Option<C>>>,
    available: Condvar,
    connect: Connector<C>,
}

#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("no database connection became free in time")]
    Timeout,
    #[error("cannot connect to the database: {0}")]
    Connect(String),
}

impl<C> Pool<C> {
    /// `size` slots; connections are made up front where possible, else on
    /// first use.
    pub fn new(size: usize, connect: Connector<C>) -> Self {
        let slots = (0..size.max(1)).map(|_| connect().ok()).collect();
        Pool {
            idle: Mutex::new(slots),
            available: Condvar::new(),
            connect,
        }
    }

    /// Whether every slot holds a live connection (used at start-up).
    pub fn all_connected(&self) -> bool {
        self.idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .all(Option::is_some)
    }

    /// Takes every idle connection out of the pool (for a controlled drop).
    pub fn drain(&self) -> Vec<C> {
        self.idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .flatten()
            .collect()
    }

    fn take_slot(&self) -> Result<Option<C>, PoolError> {
        let deadline = Instant::now() + WAIT;
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(slot) = idle.pop() {
                return Ok(slot);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(PoolError::Timeout);
            }
            idle = self
                .available
                .wait_timeout(idle, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn put_back(&self, slot: Option<C>) {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).push(slot);
        self.available.notify_one();
    }

    /// A connection broke: the idle ones most likely went with it (a
    /// restart, a failover, sessions terminated), so they are dropped too
    /// and remade on their next use, instead of each failing one request.
    fn broken(&self) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        for slot in idle.iter_mut() {
            *slot = None;
        }
        idle.push(None);
        drop(idle);
        self.available.notify_one();
    }

    /// An idle connection, if one is idle right now (for a caller that
    /// must not wait here); run it with [`Pool::run`], which gives it back.
    pub fn try_take(&self) -> Option<C> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        match idle.pop() {
            Some(Some(conn)) => Some(conn),
            Some(None) => {
                idle.push(None);
                None
            }
            None => None,
        }
    }

    /// Runs `f` with a connection. `f` returns whether the connection is
    /// still healthy; a broken one is dropped and its slot left empty.
    pub fn with<T>(&self, f: impl FnOnce(&mut C) -> (T, bool)) -> Result<T, PoolError> {
        let conn = match self.take_slot()? {
            Some(c) => c,
            None => match (self.connect)() {
                Ok(c) => c,
                Err(e) => {
                    self.put_back(None);
                    return Err(PoolError::Connect(e));
                }
            },
        };
        self.run(conn, f)
    }

    /// Runs `f` on a connection taken from the pool and gives it back.
    pub fn run<T>(&self, mut conn: C, f: impl FnOnce(&mut C) -> (T, bool)) -> Result<T, PoolError> {
        match std::panic::catch_unwind(AssertUnwindSafe(|| f(&mut conn))) {
            Ok((result, true)) => {
                self.put_back(Some(conn));
                Ok(result)
            }
            Ok((result, false)) => {
                drop(conn);
                self.broken();
                Ok(result)
            }
            Err(panic) => {
                // A connection left mid-transaction by a panic is not reused.
                drop(conn);
                self.put_back(None);
                std::panic::resume_unwind(panic)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn broken_connections_are_replaced_after_an_outage() {
        let up = Arc::new(AtomicBool::new(true));
        let made = Arc::new(AtomicUsize::new(0));
        let (u, m) = (up.clone(), made.clone());
        let pool: Pool<usize> = Pool::new(
            2,
            Box::new(move || {
                if u.load(Ordering::SeqCst) {
                    Ok(m.fetch_add(1, Ordering::SeqCst))
                } else {
                    Err("down".into())
                }
            }),
        );
        // The database goes away: connections break and cannot be remade.
        up.store(false, Ordering::SeqCst);
        for _ in 0..5 {
            let _ = pool.with(|_| ((), false));
        }
        assert!(matches!(pool.with(|_| ((), true)), Err(PoolError::Connect(_))));
        // It comes back: both slots work again; nobody waits forever.
        up.store(true, Ordering::SeqCst);
        for _ in 0..4 {
            assert!(pool.with(|_| ((), true)).is_ok());
        }
        assert!(pool.all_connected() || made.load(Ordering::SeqCst) >= 3);
    }

    #[test]
    fn one_broken_connection_retires_the_idle_ones() {
        let made = Arc::new(AtomicUsize::new(0));
        let m = made.clone();
        let pool: Pool<usize> = Pool::new(3, Box::new(move || Ok(m.fetch_add(1, Ordering::SeqCst))));
        assert_eq!(made.load(Ordering::SeqCst), 3);
        // One request finds its connection dead; the next ones get new
        // connections, not the other two made before the outage.
        let _ = pool.with(|_| ((), false));
        let seen: Vec<usize> = (0..3).map(|_| pool.with(|c| (*c, true)).unwrap()).collect();
        assert!(seen.iter().all(|c| *c >= 3), "{seen:?}");
    }
}
