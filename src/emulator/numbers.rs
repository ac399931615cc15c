//! Numeric ids for Authorize.Net clients: their schema types `transId` and
//! `subscriptionId` as digits, and integrations keep them in integer
//! columns. A record the emulator answers gets a random number once
//! (table `emulator_numbers`): 11 digits for transactions, batches and
//! split tenders, at most 9 digits for subscriptions and their profiles,
//! whose ids their schema also types `xs:int` (a subscription payment's
//! `subscription.id`, a subscription list's `id`). A number read back
//! names a record id, which the caller then finds in its own tenant scope.

use crate::db::{Conn, Sql};
use crate::error::{ApiError, ApiResult};
use rand::Rng;

/// What a number names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Transaction,
    Subscription,
    /// A subscription's card (their `customerPaymentProfileId`).
    Vault,
    /// A subscription's contact (their `customerProfileId`).
    Contact,
    /// A settlement batch (their `batchId`).
    Batch,
    /// The split tender a partial approval opens (their `splitTenderId`),
    /// by the partially approved transaction.
    SplitTender,
}

impl Kind {
    /// The numbers this kind is drawn from. Subscriptions and profiles
    /// fit `xs:int` (at most 2,147,483,647; theirs are 7 to 9 digits), so
    /// typed clients (.NET's `int`, 32-bit columns) can hold them; the
    /// ranges do not overlap, and `number` is unique across kinds.
    fn range(self) -> std::ops::RangeInclusive<i64> {
        match self {
            Kind::Subscription | Kind::Vault | Kind::Contact => SHORT_LOW..=SHORT_HIGH,
            Kind::Transaction | Kind::Batch | Kind::SplitTender => LOW..=HIGH,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Transaction => "transaction",
            Kind::Subscription => "subscription",
            Kind::Vault => "vault",
            Kind::Contact => "contact",
            Kind::Batch => "batch",
            Kind::SplitTender => "split_tender",
        }
    }
}

const LOW: i64 = 10_000_000_000;
const HIGH: i64 = 99_999_999_999;
/// Seven to nine digits, as their subscription ids are.
const SHORT_LOW: i64 = 1_000_000;
const SHORT_HIGH: i64 = 999_999_999;

/// The record's number, made on first use.
pub fn number_of(conn: &mut dyn Conn, kind: Kind, record_id: &str) -> ApiResult<i64> {
    let find = Sql::with(
        "SELECT number FROM emulator_numbers WHERE kind = ? AND record_id = ?",
        vec![kind.name().into(), record_id.into()],
    );
    for _ in 0..8 {
        if let Some(row) = conn.query_one(&find)? {
            if let Some(n) = row.first().and_then(|v| v.as_int()) {
                return Ok(n);
            }
        }
        let candidate = rand::thread_rng().gen_range(kind.range());
        // A taken number (or a record numbered meanwhile by another
        // request) inserts nothing; the loop then reads or tries again.
        conn.execute(&Sql::with(
            "INSERT INTO emulator_numbers (number, kind, record_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            vec![candidate.into(), kind.name().into(), record_id.into()],
        ))?;
    }
    Err(ApiError::internal("no free emulator number after 8 tries"))
}

/// The record a number names, if any. Text that is not a number of ours
/// names nothing.
pub fn record_of(conn: &mut dyn Conn, kind: Kind, number: &str) -> ApiResult<Option<String>> {
    let Ok(n) = number.trim().parse::<i64>() else {
        return Ok(None);
    };
    let row = conn.query_one(&Sql::with(
        "SELECT record_id FROM emulator_numbers WHERE kind = ? AND number = ?",
        vec![kind.name().into(), n.into()],
    ))?;
    Ok(row
        .and_then(|r| r.into_iter().next())
        .and_then(|v| v.as_str().map(str::to_string)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_and_profile_numbers_fit_their_xs_int() {
        for kind in [Kind::Subscription, Kind::Vault, Kind::Contact] {
            let range = kind.range();
            assert!(*range.end() <= i64::from(i32::MAX), "{kind:?}");
            assert!(*range.start() >= 1_000_000, "{kind:?}: at least 7 digits");
            // Never one of the 11-digit numbers of other kinds.
            assert!(*range.end() < LOW);
        }
        assert_eq!(Kind::Transaction.range(), LOW..=HIGH);
    }
}
