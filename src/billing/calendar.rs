//! Schedule dates. Period `n` of a schedule falls on its anchor date plus
//! `n` intervals, always counted from the anchor: a monthly schedule
//! anchored on January 31 runs on February 28 (29 in a leap year), then
//! March 31, never drifting to the 28th. Dates are the location's local
//! dates; a run falls due at the local midnight that starts its date.

use chrono::{Days, Months, NaiveDate, TimeZone};
use chrono_tz::Tz;

/// The unit of an interval (`interval_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Day,
    Week,
    Month,
}

impl Unit {
    pub fn parse(code: &str) -> Option<Unit> {
        match code {
            "d" => Some(Unit::Day),
            "w" => Some(Unit::Week),
            "m" => Some(Unit::Month),
            _ => None,
        }
    }
}

/// Every `count` days, weeks or months.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    pub count: u32,
    pub unit: Unit,
}

/// The largest period index a schedule can reach (a daily schedule over
/// far more years than any card lives).
const MAX_PERIOD: i64 = 100_000;

impl Interval {
    /// The date of period `n` (0 is the anchor itself).
    pub fn period_date(&self, anchor: NaiveDate, n: i64) -> Option<NaiveDate> {
        let n = u32::try_from(n.clamp(0, MAX_PERIOD)).ok()?;
        let steps = n.checked_mul(self.count)?;
        match self.unit {
            Unit::Day => anchor.checked_add_days(Days::new(u64::from(steps))),
            Unit::Week => anchor.checked_add_days(Days::new(u64::from(steps) * 7)),
            // chrono clamps to the month's last day: Jan 31 + 1 = Feb 28/29.
            Unit::Month => anchor.checked_add_months(Months::new(steps)),
        }
    }

    /// The first period at or after `from` whose date is on or after
    /// `date`.
    pub fn first_period_on_or_after(&self, anchor: NaiveDate, from: i64, date: NaiveDate) -> i64 {
        let mut n = from.max(0);
        while n < MAX_PERIOD && self.period_date(anchor, n).is_some_and(|d| d < date) {
            n += 1;
        }
        n
    }

    /// How many periods from 0 fall on or before `end`: the index of the
    /// first period after it.
    pub fn periods_through(&self, anchor: NaiveDate, end: NaiveDate) -> i64 {
        match end.checked_add_days(Days::new(1)) {
            Some(next) => self.first_period_on_or_after(anchor, 0, next),
            None => MAX_PERIOD,
        }
    }

    /// The last day of a schedule of `periods` periods: the day before
    /// period `periods` would fall (monthly from 2019-02-23, 20 runs:
    /// 2020-10-22).
    pub fn end_of(&self, anchor: NaiveDate, periods: i64) -> Option<NaiveDate> {
        self.period_date(anchor, periods)?.pred_opt()
    }
}

pub fn parse_date(text: &str) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()
}

pub fn date_text(date: NaiveDate) -> String {
    date.format("%Y-%m-%d").to_string()
}

/// The local date of epoch seconds `ts` in `tz`.
pub fn local_date(ts: i64, tz: Tz) -> NaiveDate {
    chrono::DateTime::from_timestamp(ts, 0)
        .map(|d| d.with_timezone(&tz).date_naive())
        .unwrap_or_default()
}

/// Epoch seconds of the local midnight starting `date` in `tz` (the first
/// instant of the day where a time-zone change skips midnight).
pub fn local_midnight(date: NaiveDate, tz: Tz) -> i64 {
    let mut at = date.and_hms_opt(0, 0, 0).unwrap_or_default();
    for _ in 0..4 {
        if let Some(t) = tz.from_local_datetime(&at).earliest() {
            return t.timestamp();
        }
        at += chrono::Duration::minutes(30);
    }
    date.and_hms_opt(0, 0, 0)
        .unwrap_or_default()
        .and_utc()
        .timestamp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(text: &str) -> NaiveDate {
        parse_date(text).unwrap()
    }

    fn monthly() -> Interval {
        Interval {
            count: 1,
            unit: Unit::Month,
        }
    }

    #[test]
    fn month_end_anchors_stay_at_month_end() {
        let iv = monthly();
        let a = d("2027-01-31");
        let dates: Vec<String> = (0..4).map(|n| date_text(iv.period_date(a, n).unwrap())).collect();
        assert_eq!(dates, ["2027-01-31", "2027-02-28", "2027-03-31", "2027-04-30"]);
        assert_eq!(iv.period_date(d("2028-01-31"), 1), Some(d("2028-02-29")));
        // A leap day anchor: Feb 28 in common years, Feb 29 again in 2032.
        let leap = d("2028-02-29");
        assert_eq!(iv.period_date(leap, 12), Some(d("2029-02-28")));
        assert_eq!(iv.period_date(leap, 48), Some(d("2032-02-29")));
    }

    #[test]
    fn days_and_weeks_count_from_the_anchor() {
        let every_10_days = Interval {
            count: 10,
            unit: Unit::Day,
        };
        assert_eq!(
            every_10_days.period_date(d("2028-02-25"), 1),
            Some(d("2028-03-06"))
        );
        let fortnightly = Interval {
            count: 2,
            unit: Unit::Week,
        };
        assert_eq!(fortnightly.period_date(d("2027-12-27"), 2), Some(d("2028-01-24")));
    }

    #[test]
    fn installment_end_is_the_day_before_the_period_after_the_last() {
        // The reference's sample: monthly from 2019-02-23, 20 runs.
        assert_eq!(monthly().end_of(d("2019-02-23"), 20), Some(d("2020-10-22")));
        assert_eq!(monthly().periods_through(d("2019-02-23"), d("2020-10-22")), 20);
        assert_eq!(monthly().periods_through(d("2019-02-23"), d("2020-10-23")), 21);
    }

    #[test]
    fn first_period_on_or_after_a_date() {
        let iv = monthly();
        let a = d("2027-01-31");
        assert_eq!(iv.first_period_on_or_after(a, 0, d("2027-03-01")), 2);
        assert_eq!(iv.first_period_on_or_after(a, 0, d("2027-03-31")), 2);
        assert_eq!(iv.first_period_on_or_after(a, 3, d("2027-01-01")), 3);
    }

    #[test]
    fn local_dates_and_midnights_follow_the_zone() {
        let ny: Tz = "America/New_York".parse().unwrap();
        // 2027-03-01 03:00 UTC is still February 28 in New York.
        let ts = d("2027-03-01")
            .and_hms_opt(3, 0, 0)
            .unwrap()
            .and_utc()
            .timestamp();
        assert_eq!(local_date(ts, ny), d("2027-02-28"));
        let midnight = local_midnight(d("2027-03-01"), ny);
        assert_eq!(
            midnight,
            d("2027-03-01")
                .and_hms_opt(5, 0, 0)
                .unwrap()
                .and_utc()
                .timestamp()
        );
        assert_eq!(local_date(midnight, ny), d("2027-03-01"));
        assert_eq!(local_date(midnight - 1, ny), d("2027-02-28"));
    }
}
