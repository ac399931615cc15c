//! The one integration-test binary (each test binary costs a link).
//! Every test runs against a real `ferrogate serve` process over HTTP, on
//! SQLite and, when FERROGATE_TEST_DATABASE_URL is set, on PostgreSQL.

// Not every test module uses every helper.
#[allow(dead_code)]
mod support;

mod accountvaults;
mod ach_entries;
mod auth;
mod bad_input;
mod bins;
mod boarding;
mod browser;
mod contacts;
mod conventions;
mod emulator;
mod exports;
mod hardening;
mod hosted;
mod integrator;
mod isolation;
mod locations;
mod nodes;
mod notes;
mod ops;
mod payment_safety;
mod pg_tls;
mod postbacks;
mod quickinvoices;
mod recurrings;
mod reference_samples;
mod router;
mod sign_in;
mod terminals;
mod testclock;
mod transactions;
mod users;
