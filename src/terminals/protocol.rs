//! What a device and the gateway say to each other over the device's
//! connection (a WebSocket it opens to `/router/v1/connect`, so it works
//! behind NAT). One JSON object per text message, tagged by `type`.
//! `ferrogate terminal-sim` speaks the device's side; a real device's
//! firmware would speak the same.
//!
//! A device registers once per connection, then waits for work. Each
//! piece of work (`start`) carries a `request_id` that every message
//! about it repeats; a device works on one request at a time.
//!
//! ```text
//! device                               gateway
//!   register {serial_number, ...} -->
//!                                 <--  registered {terminal_id, timeouts}
//!                                 <--  start {request_id, job, timeouts}
//!   card {request_id, card}       -->  (the payment runs at the gateway)
//!                                 <--  result {approved, capture_signature}
//!   signature {request_id, ...}   -->  (only when asked)
//! ```
//!
//! Card data travels only from the device to the gateway node holding its
//! connection; it is never logged ([`CardRead`]'s `Debug` masks it).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

/// The gateway's messages to a device.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToDevice {
    /// The answer to `register`: who the device is and its time-outs.
    Registered {
        terminal_id: String,
        timeouts: Map<String, Json>,
        signature_capture: bool,
    },
    /// Work for the device, with the terminal's time-outs as they stand
    /// now (all nine, in seconds), so a change made since the device
    /// registered applies from the next request. The device applies those
    /// of its own screens: card entry, PIN entry, terms, signature input
    /// and submit, the status display, tip and cashback, and
    /// `transaction_timeout` (how long it waits for `result`). The
    /// gateway applies `overall_timeout`, and backs the device up where a
    /// device that never reports would hold the request: no card within
    /// card entry (plus PIN entry for a payment), no answer to terms
    /// within `device_terms_prompt_timeout`, no signature within its two
    /// time-outs (ADR 0020). A payment the gateway has begun is finished
    /// whatever the device's `transaction_timeout` says.
    Start {
        request_id: String,
        job: DeviceJob,
        #[serde(default)]
        timeouts: Map<String, Json>,
    },
    /// The processor's answer, to display; when `capture_signature`, the
    /// device asks the cardholder to sign and sends `signature`.
    Result {
        request_id: String,
        approved: bool,
        message: String,
        capture_signature: bool,
    },
    /// Stop working on the request (the clerk cancelled, or the gateway
    /// stopped waiting).
    Cancel { request_id: String },
    /// A message the gateway could not use; the connection stays open.
    Error { message: String },
}

/// What a device is asked to do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DeviceJob {
    /// Read a card for a payment of `amount` (dollars, as displayed).
    Payment { action: String, amount: String },
    /// Read a card to store it (a router account vault).
    Store,
    /// Show terms for the cardholder to accept, signing when asked.
    Terms { terms: String, require_signature: bool },
}

/// A device's messages to the gateway.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromDevice {
    /// The first message of a connection: the device's address on the
    /// merchant's network (recorded as the terminal's `local_ip_address`).
    Register {
        #[serde(default)]
        local_ip_address: Option<String>,
    },
    /// The card the cardholder presented.
    Card { request_id: String, card: CardRead },
    /// The request ended on the device without a card or an answer.
    Failed { request_id: String, reason: Failure },
    /// The cardholder's answer to terms.
    Terms {
        request_id: String,
        accepted: bool,
        #[serde(default)]
        signature: Option<String>,
    },
    /// The signature asked for after an approval (base64 PNG, JPEG or
    /// GIF), or why there is none.
    Signature {
        request_id: String,
        #[serde(default)]
        signature: Option<String>,
        #[serde(default)]
        failure: Option<Failure>,
    },
}

/// How the cardholder was verified on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cvm {
    /// No cardholder verification (small contactless amounts, keyed).
    None,
    /// A signature, captured after the approval.
    Signature,
    /// A PIN entered on the device.
    Pin,
}

/// A card as the device read it.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct CardRead {
    /// The card number, digits only.
    pub account_number: String,
    /// `MMYY`.
    pub exp_date: String,
    #[serde(default)]
    pub account_holder_name: Option<String>,
    /// `entry_mode_id`: C chip, P contactless, S swiped, K keyed, F fallback.
    pub entry_mode: String,
    pub cvm: Cvm,
    /// EMV tags for the receipt (TC, TVR, AID, TSI, ATC, APPLAB, APPN, CVM).
    #[serde(default)]
    pub emv_receipt_data: Option<Map<String, Json>>,
}

impl std::fmt::Debug for CardRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let last_four = self
            .account_number
            .get(self.account_number.len().saturating_sub(4)..)
            .unwrap_or("");
        f.debug_struct("CardRead")
            .field("account_number", &format_args!("****{last_four}"))
            .field("entry_mode", &self.entry_mode)
            .field("cvm", &self.cvm)
            .finish_non_exhaustive()
    }
}

/// Why a request ended without a card (or a signature). The reference's
/// mock device acts these out by amount (`terminals::sim`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// The device could not reach what it needed (mock 5.01).
    ConnectError,
    /// A time-out on the device (mock 5.31).
    Timeout,
    /// Cancelled on the device or by the cardholder (mock 5.99).
    Aborted,
    /// No card within `card_entry_timeout` (mock 7.72).
    CardEntryTimeout,
    /// No PIN within `pin_entry_timeout` (mock 7.73).
    PinEntryTimeout,
    /// The device gave up on the processor (`transaction_timeout`, mock 7.70).
    TransactionTimeout,
    /// No touch within `signature_input_timeout` (mock 7.75).
    SignatureInputTimeout,
    /// The signature was not submitted or stored (mock 7.76).
    SignatureSubmitTimeout,
    /// The terms were shown for `device_terms_prompt_timeout` unanswered.
    TermsTimeout,
}

impl Failure {
    /// The code answered to the integrator (`terminal_result`).
    pub fn code(self) -> &'static str {
        match self {
            Failure::ConnectError => "connect_error",
            Failure::Timeout => "timeout",
            Failure::Aborted => "aborted",
            Failure::CardEntryTimeout => "card_entry_timeout",
            Failure::PinEntryTimeout => "pin_entry_timeout",
            Failure::TransactionTimeout => "transaction_timeout",
            Failure::SignatureInputTimeout => "signature_input_timeout",
            Failure::SignatureSubmitTimeout => "signature_submit_timeout",
            Failure::TermsTimeout => "terms_timeout",
        }
    }

    /// What the integrator reads.
    pub fn message(self) -> &'static str {
        match self {
            Failure::ConnectError => "The terminal could not connect; nothing was charged.",
            Failure::Timeout => "The terminal timed out; nothing was charged.",
            Failure::Aborted => "The request was cancelled on the terminal; nothing was charged.",
            Failure::CardEntryTimeout => {
                "No card was presented on the terminal in time; nothing was charged."
            }
            Failure::PinEntryTimeout => "No PIN was entered on the terminal in time; nothing was charged.",
            Failure::TransactionTimeout => {
                "The terminal timed out waiting for the transaction; nothing was charged."
            }
            Failure::SignatureInputTimeout => "The cardholder did not sign in time.",
            Failure::SignatureSubmitTimeout => "The signature was not submitted in time.",
            Failure::TermsTimeout => "The terms were not answered in time.",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_are_tagged_json() {
        let mut timeouts = Map::new();
        timeouts.insert("card_entry_timeout".into(), json!(20));
        let start = ToDevice::Start {
            request_id: "r1".into(),
            job: DeviceJob::Payment {
                action: "sale".into(),
                amount: "7.15".into(),
            },
            timeouts,
        };
        assert_eq!(
            serde_json::to_value(&start).unwrap(),
            json!({ "type": "start", "request_id": "r1",
                "job": { "kind": "payment", "action": "sale", "amount": "7.15" },
                "timeouts": { "card_entry_timeout": 20 } })
        );
        let failed: FromDevice = serde_json::from_value(
            json!({ "type": "failed", "request_id": "r1", "reason": "card_entry_timeout" }),
        )
        .unwrap();
        assert_eq!(
            failed,
            FromDevice::Failed {
                request_id: "r1".into(),
                reason: Failure::CardEntryTimeout
            }
        );
        assert_eq!(Failure::CardEntryTimeout.code(), "card_entry_timeout");
        let store: ToDevice = serde_json::from_value(
            json!({ "type": "start", "request_id": "r2", "job": { "kind": "store" } }),
        )
        .unwrap();
        assert!(matches!(
            store,
            ToDevice::Start {
                job: DeviceJob::Store,
                ..
            }
        ));
    }

    #[test]
    fn a_card_read_never_shows_its_number() {
        let card = CardRead {
            account_number: "4111111111111111".into(),
            exp_date: "1230".into(),
            account_holder_name: None,
            entry_mode: "C".into(),
            cvm: Cvm::Pin,
            emv_receipt_data: None,
        };
        let shown = format!("{card:?}");
        assert!(!shown.contains("411111111111"), "{shown}");
        assert!(shown.contains("****1111"));
    }
}
