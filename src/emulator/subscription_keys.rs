//! Authorize.Net's duplicate subscription check (E00012) as a uniqueness
//! constraint (table `emulator_subscription_keys`): a new subscription
//! takes its key ([`super::arb::duplicate_key`]) in the write job that
//! creates it, and keeps it while it runs. A read before the write would
//! let two identical requests sent at once both create one.

use crate::billing::transitions;
use crate::db::{Conn, Sql};
use crate::error::ApiResult;

/// Takes `key` for the new recurring `recurring_id`. `Ok(None)`: taken;
/// `Ok(Some(holder))`: a running subscription (the recurring `holder`)
/// holds it, and the caller refuses the new one (rolling back its job).
///
/// The insert waits for a concurrent taker of the same key (PostgreSQL's
/// unique index; SQLite's single writer), so it sees that one's row once
/// it commits. A key whose subscription ended (or is gone) is taken over
/// only if it still names that one, so of two takers one wins.
pub fn claim(conn: &mut dyn Conn, key: &str, recurring_id: &str) -> ApiResult<Option<String>> {
    for _ in 0..4 {
        let inserted = conn.execute(&Sql::with(
            "INSERT INTO emulator_subscription_keys (guard_key, recurring_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
            vec![key.into(), recurring_id.into()],
        ))?;
        if inserted == 1 {
            return Ok(None);
        }
        let holder = conn
            .query_one(&Sql::with(
                "SELECT recurring_id FROM emulator_subscription_keys WHERE guard_key = ?",
                vec![key.into()],
            ))?
            .and_then(|r| r.into_iter().next())
            .and_then(|v| v.as_str().map(str::to_string));
        // Released meanwhile (its subscription changed): insert again.
        let Some(holder) = holder else { continue };
        let status = conn
            .query_one(&Sql::with(
                "SELECT status FROM recurrings WHERE id = ?",
                vec![holder.clone().into()],
            ))?
            .and_then(|r| r.into_iter().next())
            .and_then(|v| v.as_str().map(str::to_string));
        if status.is_some_and(|s| s != transitions::ENDED) {
            return Ok(Some(holder));
        }
        let moved = conn.execute(&Sql::with(
            "UPDATE emulator_subscription_keys SET recurring_id = ? WHERE guard_key = ? AND recurring_id = ?",
            vec![recurring_id.into(), key.into(), holder.into()],
        ))?;
        if moved == 1 {
            return Ok(None);
        }
    }
    Err(crate::error::ApiError::Unavailable(
        "The request met a concurrent one and changed nothing; retry shortly.".into(),
    ))
}

/// Frees the key of a subscription whose card, amount or bill-to changed:
/// it no longer is what the key describes.
pub fn release(conn: &mut dyn Conn, recurring_id: &str) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "DELETE FROM emulator_subscription_keys WHERE recurring_id = ?",
        vec![recurring_id.into()],
    ))?;
    Ok(())
}
