//! Standard Webhooks signatures.
