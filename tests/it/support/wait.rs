//! Waiting for something another process does (a delivery, a record
//! another node writes): polling the state, never sleeping for a time to
//! pass.

use std::time::{Duration, Instant};

/// Polls `probe` until it answers `Some`, or panics after `limit`
/// naming `what`.
pub fn wait_until<T>(what: &str, limit: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(found) = probe() {
            return found;
        }
        assert!(
            start.elapsed() < limit,
            "gave up waiting for {what} after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
