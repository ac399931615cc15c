//! Postbacks: events written with the change (the outbox), delivered at
//! least once by background workers, signed, logged and retried.
//!
//! - [`outbox`] adds a delivery row per matching config inside the
//!   transaction of the change: it is the engine's event sink
//!   ([`outbox::Outbox`]), called from `engine::events::record`.
//! - [`worker`] leases due rows, sends them with [`send`] and records the
//!   outcome; several nodes share the rows through leases.
//! - [`signing`] computes Standard Webhooks signatures.

pub mod outbox;
pub mod schedule;
pub mod send;
pub mod signing;
pub mod worker;

use std::sync::OnceLock;

/// Process-wide delivery policy, set once by `serve`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Policy {
    /// Loopback and private targets are allowed (tests, private networks).
    pub allow_private: bool,
}

static POLICY: OnceLock<Policy> = OnceLock::new();

/// Sets the policy; the first call wins (one `serve` per process).
pub fn set_policy(policy: Policy) {
    let _ = POLICY.set(policy);
}

/// The policy in force: private targets refused unless `serve` said so.
pub fn policy() -> Policy {
    POLICY.get().copied().unwrap_or_default()
}
