//! Outbound HTTP for postback deliveries.
