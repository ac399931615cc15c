//! One clock for every "now": handlers read it from the application state,
//! so a test clock that moves time (recurring runs, reminders) replaces it
//! in one place.

#[derive(Debug, Default)]
pub struct Clock;

impl Clock {
    pub fn now_ts(&self) -> i64 {
        chrono::Utc::now().timestamp()
    }
}
