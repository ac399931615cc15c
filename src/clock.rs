//! One clock for every "now". The application state holds a [`Clock`];
//! nothing else asks the operating system for the time of day.
//!
//! Two ways time moves other than by itself:
//!
//! - a **manual** clock (unit tests of workers and schedules) stands still
//!   until the test advances it;
//! - a location's **test clock** (sandbox only): an offset in seconds,
//!   stored on the location (`locations.clock_offset_s`), that moves that
//!   location's time forward. Requests of the location's users and the
//!   records they write carry wall time plus the offset, so a test can
//!   jump a day, a month or a year ahead without waiting. See
//!   `docs/adr/0008-payments-core-and-the-clock.md`.
//!
//! Elapsed-time measurements (request latency, time-outs) use monotonic
//! instants and are not "now": they stay outside the clock.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// The source of "now", in milliseconds since the Unix epoch.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// `None`: the system's wall clock. `Some`: a clock that moves only
    /// when told to.
    manual: Option<Arc<AtomicI64>>,
}

impl Clock {
    /// The system's wall clock.
    pub fn system() -> Clock {
        Clock { manual: None }
    }

    /// A clock standing at `start_ms` until [`Clock::advance`] moves it.
    pub fn manual(start_ms: i64) -> Clock {
        Clock {
            manual: Some(Arc::new(AtomicI64::new(start_ms))),
        }
    }

    pub fn now_ms(&self) -> i64 {
        match &self.manual {
            Some(ms) => ms.load(Ordering::SeqCst),
            None => chrono::Utc::now().timestamp_millis(),
        }
    }

    /// Whole seconds since the epoch.
    pub fn now_ts(&self) -> i64 {
        self.now_ms().div_euclid(1000)
    }

    /// A location's "now": wall time plus its test clock's offset.
    pub fn location_now(&self, offset_s: i64) -> i64 {
        self.now_ts().saturating_add(offset_s)
    }

    /// Moves a manual clock forward; the system clock cannot be moved
    /// (returns false).
    pub fn advance(&self, ms: i64) -> bool {
        match &self.manual {
            Some(now) => {
                now.fetch_add(ms, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }
}

/// The longest single move of a test clock: ten years.
pub const MAX_ADVANCE_S: i64 = 10 * 366 * 86_400;

/// `yyyy-mm-dd` of epoch seconds `ts` in `tz`.
pub fn date_text(ts: i64, tz: chrono_tz::Tz) -> String {
    chrono::DateTime::from_timestamp(ts, 0)
        .map(|d| d.with_timezone(&tz).format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

/// `yyyy-mm-dd hh:mm:ss` (UTC) of epoch seconds `ts`, as the reference
/// writes `timestamp` and `void_date`.
pub fn timestamp_text(ts: i64) -> String {
    chrono::DateTime::from_timestamp(ts, 0)
        .map(|d| d.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let clock = Clock::manual(1_700_000_000_500);
        assert_eq!(clock.now_ts(), 1_700_000_000);
        assert_eq!(clock.now_ms(), 1_700_000_000_500);
        let shared = clock.clone();
        assert!(shared.advance(86_400_000));
        assert_eq!(clock.now_ts(), 1_700_086_400, "clones share the time");
        assert_eq!(clock.location_now(3600), 1_700_090_000);
    }

    #[test]
    fn the_system_clock_cannot_be_moved() {
        let clock = Clock::system();
        assert!(!clock.advance(1000));
        let now = chrono::Utc::now().timestamp();
        assert!((clock.now_ts() - now).abs() <= 1);
    }

    #[test]
    fn dates_are_local_to_the_zone() {
        // 2024-03-01 02:00 UTC is still Feb 29 in New York.
        let ts = 1_709_258_400;
        assert_eq!(date_text(ts, chrono_tz::UTC), "2024-03-01");
        assert_eq!(date_text(ts, chrono_tz::America::New_York), "2024-02-29");
        assert_eq!(timestamp_text(ts), "2024-03-01 02:00:00");
    }
}
