//! One clock for every "now": handlers read it from the application state,
//! so a test clock that moves time (recurring runs, reminders) replaces it
//! in one place.

#[derive(Debug, Default)]
pub struct Clock;

impl Clock {
    pub fn now_ts(&self) -> i64 {
        chrono::Utc::now().timestamp()
    }
    /// Milliseconds, for schedules finer than a second (postback retries).
    pub fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis()
    }
}

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
