//! One clock for every "now". Tests and the sandbox may shift it.

use std::sync::atomic::{AtomicI64, Ordering};

#[derive(Debug, Default)]
pub struct Clock {
    /// Seconds added to the system time.
    offset: AtomicI64,
}

impl Clock {
    pub fn now_ts(&self) -> i64 {
        chrono::Utc::now().timestamp() + self.offset.load(Ordering::Relaxed)
    }
    pub fn advance(&self, seconds: i64) {
        self.offset.fetch_add(seconds, Ordering::Relaxed);
    }
}
