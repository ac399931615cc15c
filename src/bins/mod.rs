//! BIN lookup: brand and PAN length from built-in IIN ranges (no data
//! needed), issuer data from imported ranges.

pub mod brands;
pub mod countries;

pub use brands::{brand_of, luhn_ok, pan_ok, Brand};
