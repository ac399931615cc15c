//! The payment service: transactions through the processor, batches and
//! settlement, Level 3 data, idempotency, velocity limits and the
//! reconciliation of what a crash left pending. Handlers live in
//! `http::transactions`; records are declared in `resources`.

pub mod actions;
pub mod batches;
pub mod idempotency;
pub mod level3;
pub mod reconcile;
pub mod service;
pub mod source;
pub mod state;
pub mod velocity;

pub use service::Payments;
