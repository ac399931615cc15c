//! The state machine of a recurring schedule: what placeOnHold, activate,
//! skipPayment, deferPayment and a run do to it, as pure functions from
//! the stored record to the next one. Every refusal is a 422 naming what
//! was wrong. The rules, with their reasons, are in ADR 0009.
//!
//! - **Periods.** Period `n` falls on `anchor_date + n intervals`
//!   ([`super::calendar`]); `period` is the next one to run.
//! - **End.** `end_date` (installments: derived) bounds the periods; once
//!   the next period falls after it the schedule is `ended`. A schedule
//!   also ends when its account vault is deleted.
//! - **Hold and activate.** A held schedule has no next run
//!   (`0000-00-00`). Activating resumes at the first period on or after
//!   today: the periods that fell while it was held are not charged. An
//!   installment schedule's end moves later by those periods, so it still
//!   collects its full count (as a deferral would).
//! - **Skip** `k`: the next `k` periods are not charged; the end stays, so
//!   an installment schedule collects `k` fewer payments.
//! - **Defer** `k` (installments only): the next run moves `k` periods
//!   later and so does the end; the full count is still collected.
//! - **Declines.** A declined run is retried [`RETRY_AFTER_DAYS`] after
//!   its period date, while the retry falls before the next period and
//!   within the end; then the period counts as run (an installment is
//!   consumed, approved or not) and the schedule moves on.

use super::calendar::{date_text, parse_date, Interval, Unit};
use crate::db::Value;
use crate::engine::record::Record;
use crate::error::{ApiError, ApiResult};
use chrono::{Days, NaiveDate};

pub const ACTIVE: &str = "active";
pub const ON_HOLD: &str = "on hold";
pub const ENDED: &str = "ended";

/// Days after a period's date at which a declined run is tried again.
pub const RETRY_AFTER_DAYS: [u64; 3] = [1, 3, 5];
/// The most periods one skip or deferral can move.
pub const MAX_MOVE: i64 = 99;

/// Why a schedule ended (`ended_reason`).
pub const ENDED_END_DATE: &str = "end_date_passed";
pub const ENDED_INSTALLMENTS: &str = "installments_collected";
pub const ENDED_VAULT_DELETED: &str = "account_vault_deleted";
pub const ENDED_CONTACT_DELETED: &str = "contact_deleted";

/// The dates of a stored schedule.
pub struct Plan {
    pub anchor: NaiveDate,
    pub interval: Interval,
    pub end: Option<NaiveDate>,
    pub period: i64,
    pub installment: bool,
}

impl Plan {
    pub fn of(r: &Record) -> Plan {
        Plan {
            anchor: r.text("anchor_date").and_then(parse_date).unwrap_or_default(),
            interval: Interval {
                count: r.int("interval").unwrap_or(1).clamp(1, 999) as u32,
                unit: r
                    .text("interval_type")
                    .and_then(Unit::parse)
                    .unwrap_or(Unit::Month),
            },
            end: r.text("end_date").and_then(parse_date),
            period: r.int("period").unwrap_or(0),
            installment: r.text("recurring_type_id") == Some("i"),
        }
    }

    pub fn date(&self, n: i64) -> Option<NaiveDate> {
        self.interval.period_date(self.anchor, n)
    }

    /// Whether period `n` falls within the end.
    fn within(&self, n: i64) -> bool {
        match (self.date(n), self.end) {
            (Some(d), Some(end)) => d <= end,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// Periods left to run from `period`, when the schedule has an end.
    pub fn remaining(&self) -> Option<i64> {
        self.end
            .map(|end| (self.interval.periods_through(self.anchor, end) - self.period).max(0))
    }

    /// The end moved `k` periods later.
    fn end_moved(&self, k: i64) -> Option<NaiveDate> {
        let end = self.end?;
        let through = self.interval.periods_through(self.anchor, end);
        self.interval.end_of(self.anchor, through + k)
    }
}

fn refuse(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::field(field, message)
}

fn status(r: &Record) -> &str {
    r.text("status").unwrap_or(ACTIVE)
}

/// Puts `r` on the next period of its plan (`period` already set): its
/// date becomes `next_run_date`, or the schedule ends when the period
/// falls after the end.
fn schedule(r: &mut Record) {
    let plan = Plan::of(r);
    if plan.within(plan.period) {
        r.set("next_run_date", plan.date(plan.period).map(date_text));
    } else {
        let reason = if plan.installment {
            ENDED_INSTALLMENTS
        } else {
            ENDED_END_DATE
        };
        end(r, reason);
    }
}

/// Ends the schedule for `reason`.
pub fn end(r: &mut Record, reason: &str) {
    r.set("status", ENDED);
    r.set("active", 0);
    r.set("next_run_date", Value::Null);
    drop_retries(r);
    r.set("ended_reason", reason.to_string());
}

/// Drops the retries of a declined period (a hold, an end, a skip, a
/// deferral, a new anchor): none will come, so the last run no longer
/// says one will.
fn drop_retries(r: &mut Record) {
    r.set("retry_count", 0);
    if r.text("last_run_status") == Some("declined_retrying") {
        r.set("last_run_status", "declined");
    }
}

/// The record of a new schedule, from its checked fields: anchor, first
/// period, derived end and totals.
pub fn start(r: &mut Record, on_hold: bool) {
    let start = r.text("start_date").map(str::to_string).unwrap_or_default();
    r.set("anchor_date", start);
    r.set("period", 0);
    r.set("run_seq", 0);
    for counter in ["skip_count", "defer_count", "retry_count", "payment_count"] {
        r.set(counter, 0);
    }
    if r.text("recurring_type_id") == Some("i") {
        let count = r.int("installment_total_count").unwrap_or(0);
        let plan = Plan::of(r);
        r.set(
            "end_date",
            plan.interval.end_of(plan.anchor, count).map(date_text),
        );
        r.set(
            "installment_amount_total",
            count.saturating_mul(r.int("transaction_amount").unwrap_or(0)),
        );
    }
    r.set("status", ACTIVE);
    r.set("active", 1);
    schedule(r);
    if on_hold && status(r) == ACTIVE {
        r.set("status", ON_HOLD);
        r.set("active", 0);
        r.set("next_run_date", Value::Null);
    }
}

/// `placeOnHold`: an active schedule stops running until activated.
pub fn place_on_hold(old: &Record) -> ApiResult<Record> {
    match status(old) {
        ACTIVE => {}
        ON_HOLD => return Err(refuse("status", "The recurring is already on hold.")),
        _ => {
            return Err(refuse(
                "status",
                "The recurring has ended; it cannot be put on hold.",
            ))
        }
    }
    // `active` stays as it is: the state is `status` (the reference's
    // placeOnHold sample answers active "1" with status "on hold");
    // `active` is the PUT flag that holds an ongoing schedule.
    let mut r = old.clone();
    r.set("status", ON_HOLD);
    r.set("next_run_date", Value::Null);
    drop_retries(&mut r);
    Ok(r)
}

/// `activate`: a held schedule resumes at the first period on or after
/// `today` (see the module notes).
pub fn activate(old: &Record, today: NaiveDate) -> ApiResult<Record> {
    match status(old) {
        ON_HOLD => {}
        ACTIVE => return Err(refuse("status", "The recurring is already active.")),
        _ => {
            return Err(refuse(
                "status",
                "The recurring has ended; create a new one instead.",
            ))
        }
    }
    let mut r = old.clone();
    let plan = Plan::of(&r);
    let resume = plan
        .interval
        .first_period_on_or_after(plan.anchor, plan.period, today);
    let missed = resume - plan.period;
    if plan.installment && missed > 0 {
        r.set("end_date", plan.end_moved(missed).map(date_text));
    }
    r.set("period", resume);
    r.set("status", ACTIVE);
    r.set("active", 1);
    drop_retries(&mut r);
    r.set("ended_reason", Value::Null);
    schedule(&mut r);
    Ok(r)
}

/// PUT `next_run_date`: the schedule is re-anchored on `date` (later
/// periods count from it); an installment schedule keeps the number of
/// payments it had left, so its end moves with it.
pub fn move_next_run(old: &Record, date: NaiveDate) -> Record {
    let plan = Plan::of(old);
    let mut r = old.clone();
    r.set("anchor_date", date_text(date));
    r.set("period", 0);
    drop_retries(&mut r);
    if plan.installment {
        let left = plan.remaining().unwrap_or(0);
        r.set("end_date", plan.interval.end_of(date, left).map(date_text));
    }
    r.set("next_run_date", date_text(date));
    r
}

/// Checks a skip or defer count (1 to [`MAX_MOVE`]).
pub fn parse_count(field: &str, raw: Option<&str>) -> ApiResult<i64> {
    let raw = raw.map(str::trim).unwrap_or_default();
    if raw.is_empty() {
        return Err(refuse(
            field,
            format!("{field} is required (a number of payments, 1 to {MAX_MOVE})."),
        ));
    }
    match raw.parse::<i64>() {
        Ok(k) if (1..=MAX_MOVE).contains(&k) => Ok(k),
        _ => Err(refuse(
            field,
            format!("{field} must be a whole number from 1 to {MAX_MOVE}."),
        )),
    }
}

fn require_active(r: &Record, what: &str) -> ApiResult<()> {
    match status(r) {
        ACTIVE => Ok(()),
        ON_HOLD => Err(refuse(
            "status",
            format!("The recurring is on hold; activate it before {what}."),
        )),
        _ => Err(refuse(
            "status",
            format!("The recurring has ended; {what} does not apply."),
        )),
    }
}

/// `skipPayment`: the next `k` periods are not charged.
pub fn skip(old: &Record, k: i64) -> ApiResult<Record> {
    require_active(old, "skipping payments")?;
    let plan = Plan::of(old);
    if let Some(left) = plan.remaining() {
        if k >= left {
            return Err(refuse(
                "skip_count",
                format!("Only {left} payment(s) remain; skipping {k} would skip them all. Delete the recurring instead."),
            ));
        }
    }
    let mut r = old.clone();
    r.set("period", plan.period + k);
    r.set("skip_count", old.int("skip_count").unwrap_or(0) + k);
    drop_retries(&mut r);
    if plan.installment {
        let total = old.int("installment_amount_total").unwrap_or(0);
        let amount = old.int("transaction_amount").unwrap_or(0);
        r.set("installment_amount_total", (total - k * amount).max(0));
    }
    schedule(&mut r);
    refuse_past_the_calendar(&r, "skip_count")?;
    Ok(r)
}

/// `deferPayment` (installments only): the next run and the end move `k`
/// periods later.
pub fn defer(old: &Record, k: i64) -> ApiResult<Record> {
    let plan = Plan::of(old);
    if !plan.installment {
        return Err(refuse(
            "recurring_type_id",
            "deferPayment applies to installment recurrings only; use skipPayment for an ongoing recurring.",
        ));
    }
    require_active(old, "deferring payments")?;
    let mut r = old.clone();
    r.set("end_date", plan.end_moved(k).map(date_text));
    r.set("period", plan.period + k);
    r.set("defer_count", old.int("defer_count").unwrap_or(0) + k);
    drop_retries(&mut r);
    schedule(&mut r);
    refuse_past_the_calendar(&r, "defer_count")?;
    Ok(r)
}

/// Whether a schedule's dates run past what yyyy-mm-dd can say (a year
/// after 9999 is written with a sign and more digits): such a record
/// could no longer be read back through a PUT.
pub fn past_the_calendar(r: &Record) -> bool {
    ["next_run_date", "end_date"]
        .iter()
        .any(|f| r.text(f).is_some_and(|t| t.len() != 10))
}

/// Refuses a move (skip, defer) whose dates would leave the calendar.
fn refuse_past_the_calendar(r: &Record, field: &str) -> ApiResult<()> {
    if past_the_calendar(r) {
        return Err(refuse(
            field,
            format!(
                "{} puts the schedule past 9999-12-31.",
                crate::engine::validate::label(field)
            ),
        ));
    }
    Ok(())
}

/// What one run of a schedule came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    Approved {
        transaction_id: String,
    },
    /// Declined by the processor, or refused before it (an inactive
    /// product transaction or vault): `transaction_id` when a transaction
    /// was recorded.
    Declined {
        transaction_id: Option<String>,
    },
    /// The attempt was interrupted (its transaction reversed by the
    /// reconciler): run again at once, not counted as a decline.
    Interrupted,
}

/// The schedule after a run on `today`.
pub fn after_run(old: &Record, outcome: &RunOutcome, today: NaiveDate) -> Record {
    let mut r = old.clone();
    r.set("run_seq", old.int("run_seq").unwrap_or(0) + 1);
    let plan = Plan::of(old);
    let retries = old.int("retry_count").unwrap_or(0);
    let next_period = |r: &mut Record| {
        r.set("period", plan.period + 1);
        r.set("retry_count", 0);
        schedule(r);
    };
    match outcome {
        RunOutcome::Interrupted => {}
        RunOutcome::Approved { transaction_id } => {
            r.set("last_run_date", date_text(today));
            r.set("last_run_status", "approved");
            r.set("last_transaction_id", transaction_id.clone());
            r.set("payment_count", old.int("payment_count").unwrap_or(0) + 1);
            next_period(&mut r);
        }
        RunOutcome::Declined { transaction_id } => {
            r.set("last_run_date", date_text(today));
            r.set("last_transaction_id", Value::from(transaction_id.clone()));
            let retry = RETRY_AFTER_DAYS
                .get(retries as usize)
                .and_then(|days| plan.date(plan.period)?.checked_add_days(Days::new(*days)));
            let fits = retry.is_some_and(|d| {
                plan.date(plan.period + 1).is_some_and(|next| d < next) && plan.end.is_none_or(|end| d <= end)
            });
            match retry {
                Some(d) if fits => {
                    r.set("retry_count", retries + 1);
                    r.set("last_run_status", "declined_retrying");
                    r.set("next_run_date", date_text(d));
                }
                _ => {
                    r.set("last_run_status", "declined");
                    next_period(&mut r);
                }
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::RECURRING;

    fn d(text: &str) -> NaiveDate {
        parse_date(text).unwrap()
    }

    fn schedule_of(kind: &str, start_date: &str, count: Option<i64>) -> Record {
        let mut r = Record::empty(&RECURRING);
        r.set("interval", 1);
        r.set("interval_type", "m");
        r.set("start_date", start_date);
        r.set("transaction_amount", 1000);
        r.set("recurring_type_id", kind);
        r.set("installment_total_count", Value::from(count));
        start(&mut r, false);
        r
    }

    #[test]
    fn a_new_installment_schedule_derives_its_end_and_total() {
        let r = schedule_of("i", "2019-02-23", Some(20));
        assert_eq!(r.text("end_date"), Some("2020-10-22"));
        assert_eq!(r.int("installment_amount_total"), Some(20_000));
        assert_eq!(r.text("next_run_date"), Some("2019-02-23"));
        assert_eq!(r.text("status"), Some(ACTIVE));
    }

    #[test]
    fn skipping_keeps_the_end_and_shrinks_the_total() {
        let r = schedule_of("i", "2019-02-23", Some(20));
        let s = skip(&r, 2).unwrap();
        assert_eq!(s.text("next_run_date"), Some("2019-04-23"));
        assert_eq!(s.text("end_date"), Some("2020-10-22"));
        assert_eq!(s.int("installment_amount_total"), Some(18_000));
        assert_eq!(s.int("skip_count"), Some(2));
        assert!(skip(&r, 20).is_err(), "skipping every payment is refused");
    }

    #[test]
    fn deferring_moves_the_end() {
        let r = schedule_of("i", "2019-02-23", Some(20));
        let s = defer(&r, 1).unwrap();
        assert_eq!(s.text("next_run_date"), Some("2019-03-23"));
        assert_eq!(s.text("end_date"), Some("2020-11-22"));
        assert_eq!(Plan::of(&s).remaining(), Some(20));
        let ongoing = schedule_of("o", "2019-02-23", None);
        assert!(defer(&ongoing, 1).is_err());
    }

    #[test]
    fn hold_then_activate_resumes_on_the_first_period_from_today() {
        let r = schedule_of("i", "2027-01-31", Some(3));
        let held = place_on_hold(&r).unwrap();
        assert!(held.get("next_run_date").is_null());
        assert!(place_on_hold(&held).is_err());
        let back = activate(&held, d("2027-03-15")).unwrap();
        assert_eq!(back.text("next_run_date"), Some("2027-03-31"));
        // Two periods missed: the end moves two periods later.
        assert_eq!(back.text("end_date"), Some("2027-06-29"));
        assert_eq!(Plan::of(&back).remaining(), Some(3));
        assert!(activate(&back, d("2027-03-15")).is_err());
    }

    #[test]
    fn runs_advance_and_end_with_the_last_installment() {
        let mut r = schedule_of("i", "2027-01-31", Some(2));
        let ok = RunOutcome::Approved {
            transaction_id: "t".into(),
        };
        r = after_run(&r, &ok, d("2027-01-31"));
        assert_eq!(r.text("next_run_date"), Some("2027-02-28"));
        r = after_run(&r, &ok, d("2027-02-28"));
        assert_eq!(r.text("status"), Some(ENDED));
        assert_eq!(r.text("ended_reason"), Some(ENDED_INSTALLMENTS));
        assert_eq!(r.int("payment_count"), Some(2));
    }

    #[test]
    fn declines_retry_then_give_the_period_up() {
        let mut r = schedule_of("o", "2027-01-01", None);
        let no = RunOutcome::Declined { transaction_id: None };
        let mut dates = Vec::new();
        for _ in 0..4 {
            r = after_run(&r, &no, d("2027-01-01"));
            dates.push(r.text("next_run_date").unwrap().to_string());
        }
        assert_eq!(dates, ["2027-01-02", "2027-01-04", "2027-01-06", "2027-02-01"]);
        assert_eq!(r.int("retry_count"), Some(0));
        assert_eq!(r.int("run_seq"), Some(4));
        // Every two days leaves room for one retry only.
        let mut two = schedule_of("o", "2027-01-01", None);
        two.set("interval_type", "d");
        two.set("interval", 2);
        two = after_run(&two, &no, d("2027-01-01"));
        assert_eq!(two.text("next_run_date"), Some("2027-01-02"));
        two = after_run(&two, &no, d("2027-01-02"));
        assert_eq!(two.text("next_run_date"), Some("2027-01-03"));
        assert_eq!(two.text("last_run_status"), Some("declined"));
    }

    #[test]
    fn retries_dropped_are_no_longer_promised() {
        let no = RunOutcome::Declined { transaction_id: None };
        let declined = after_run(&schedule_of("o", "2027-01-01", None), &no, d("2027-01-01"));
        assert_eq!(declined.text("last_run_status"), Some("declined_retrying"));
        let held = place_on_hold(&declined).unwrap();
        assert_eq!(held.text("last_run_status"), Some("declined"));
        let resumed = activate(&held, d("2027-01-02")).unwrap();
        assert_eq!(resumed.text("last_run_status"), Some("declined"));
        assert_eq!(resumed.int("retry_count"), Some(0));
        let skipped = skip(&declined, 1).unwrap();
        assert_eq!(skipped.text("last_run_status"), Some("declined"));
        // An approved run says so whatever comes after.
        let ok = RunOutcome::Approved {
            transaction_id: String::new(),
        };
        let paid = after_run(&schedule_of("o", "2027-01-01", None), &ok, d("2027-01-01"));
        let held = place_on_hold(&paid).unwrap();
        assert_eq!(held.text("last_run_status"), paid.text("last_run_status"));
    }

    #[test]
    fn an_interrupted_run_runs_again_with_a_new_key() {
        let r = schedule_of("o", "2027-01-01", None);
        let again = after_run(&r, &RunOutcome::Interrupted, d("2027-01-01"));
        assert_eq!(again.text("next_run_date"), Some("2027-01-01"));
        assert_eq!(again.int("run_seq"), Some(1));
        assert_eq!(again.int("retry_count"), Some(0));
    }
}
