//! Ferrogate: a self-hostable payment gateway serving the REST API v2.

pub mod auth;
pub mod billing;
pub mod bins;
pub mod boarding;
pub mod bootstrap;
pub mod cards;
pub mod clock;
pub mod config;
pub mod crypto;
pub mod db;
pub mod engine;
pub mod error;
pub mod http;
pub mod http_errors;
pub mod ids;
pub mod keys;
pub mod level3;
pub mod mail;
pub mod money;
pub mod outbound;
pub mod payments;
pub mod postbacks;
pub mod processor;
pub mod resources;
pub mod server;
pub mod testclock;
