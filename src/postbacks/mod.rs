//! Postbacks: events written with the change (the outbox), delivered at
//! least once by background workers, signed, logged and retried.

pub mod send;
pub mod signing;
