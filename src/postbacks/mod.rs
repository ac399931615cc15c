//! Postbacks: events written with the change (the outbox), delivered at
//! least once by background workers, signed, logged and retried.
//!
//! - [`outbox`] adds a delivery row per matching config inside the
//!   transaction of the change: it is the engine's event sink
//!   ([`outbox::Outbox`]), called from `engine::events::record`.
//! - [`worker`] leases due rows, sends them with [`send`] and records the
//!   outcome; several nodes share the rows through leases.
//! - [`signing`] computes Standard Webhooks signatures.
//!
//! Where deliveries may go is the [`crate::outbound::OutboundPolicy`] the
//! worker is started with and every operation's context carries (config
//! checks refuse what the worker would refuse).

pub mod outbox;
pub mod schedule;
pub mod send;
pub mod signing;
pub mod worker;
