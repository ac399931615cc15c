//! The terminal domain: payment devices and the requests that reach them.
//!
//! - A device proves itself with its terminal's secret ([`authenticate`])
//!   and keeps one connection open to a node ([`protocol`]); which node
//!   holds it is recorded in [`links`].
//! - The [`router`] hands a request to that node and brings the outcome
//!   back; [`requests`] are the API's side (router transactions, router
//!   account vaults, device terms), [`jobs`] the device's side (the card
//!   read, the payment through the payments core, signatures, terms).
//! - [`timeouts`] are the spec's terminal time-outs, [`prompts`] record a
//!   device term's answer, and [`sim`] is `ferrogate terminal-sim`, a
//!   software device that acts out the reference's mock-device amounts.

pub mod jobs;
pub mod links;
pub mod prompts;
pub mod protocol;
pub mod requests;
pub mod router;
pub mod sim;
pub mod timeouts;

use crate::db::{Sql, Store, Value};
use crate::error::{ApiError, ApiResult};
use serde_json::{Map, Value as Json};

/// A device that proved itself: its terminal.
#[derive(Clone, Debug)]
pub struct Device {
    pub terminal_id: String,
    pub location_id: String,
    pub signature_capture: bool,
    pub timeouts: Map<String, Json>,
}

/// Checks a device's credentials: an active terminal's id and the secret
/// its create answer showed once. The same refusal for an unknown id and
/// a wrong secret.
pub async fn authenticate(store: &Store, terminal_id: &str, secret: &str) -> ApiResult<Device> {
    let refused = || ApiError::Unauthorized("The terminal id or terminal secret is not valid.".into());
    if !crate::ids::looks_like_id(terminal_id) || secret.is_empty() || secret.len() > 256 {
        return Err(refused());
    }
    let id = terminal_id.to_string();
    let row = store
        .read(move |conn| {
            Ok(conn.query_one(&Sql::with(
                "SELECT location_id, active, secret_digest, sig_capture_enable, terminal_timeouts \
                 FROM terminals WHERE id = ?",
                vec![id.into()],
            ))?)
        })
        .await?
        .ok_or_else(refused)?;
    if !verify_secret(secret, row[2].as_str().unwrap_or_default()) {
        return Err(refused());
    }
    if row[1].as_int() == Some(0) {
        return Err(ApiError::Forbidden("The terminal is not active.".into()));
    }
    let stored = row[4].as_str().map(str::to_string);
    Ok(Device {
        terminal_id: terminal_id.to_string(),
        location_id: row[0].as_str().unwrap_or_default().to_string(),
        signature_capture: row[3].as_int() == Some(1),
        timeouts: timeouts::all(stored.as_deref()),
    })
}

/// Characters of a device secret (letters and digits: about 285 bits).
pub const SECRET_LEN: usize = 48;

/// A new device secret, in clear: shown once, stored as its digest.
pub fn new_secret() -> String {
    crate::crypto::random_secret(SECRET_LEN)
}

/// Whether `presented` is the secret whose digest a terminal stores
/// (`secret_digest`), in constant time.
pub fn verify_secret(presented: &str, digest: &str) -> bool {
    crate::crypto::verify_api_key(presented, digest)
}

/// What a device's registration writes on its terminal: the time, the
/// address it reports on the merchant's network (kept only when it is an
/// IPv4 address, as the field holds) and that it is provisioned.
pub async fn record_registration(
    store: &Store,
    terminal_id: &str,
    local_ip: Option<String>,
    now: i64,
) -> ApiResult<()> {
    let terminal = terminal_id.to_string();
    let ip = local_ip.filter(|ip| ip.parse::<std::net::Ipv4Addr>().is_ok());
    store
        .write(move |conn| {
            conn.execute(&Sql::with(
                "UPDATE terminals SET last_registration_ts = ?, is_provisioned = 1, \
                 local_ip_address = COALESCE(?, local_ip_address) WHERE id = ?",
                vec![
                    now.into(),
                    ip.map(Value::Text).unwrap_or(Value::Null),
                    terminal.into(),
                ],
            ))?;
            Ok(())
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_verified_by_its_digest_only() {
        let secret = new_secret();
        assert_eq!(secret.len(), SECRET_LEN);
        let digest = crate::crypto::hash_api_key(&secret);
        assert!(!digest.contains(&secret));
        assert!(verify_secret(&secret, &digest));
        assert!(!verify_secret(&new_secret(), &digest));
    }
}
