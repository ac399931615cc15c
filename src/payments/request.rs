//! What a caller hands the payment operations and what it gets back.
//! Every producer of payments (the API, recurring runs, hosted forms,
//! quick-invoice pay pages, terminals, the emulator) builds the same
//! requests; they differ only in their [`Origin`].

use super::actions::Parsed;
use serde_json::Value as Json;
use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            pub fn new(id: impl Into<String>) -> Self {
                $name(id.into())
            }
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<$name> for crate::db::Value {
            fn from(id: $name) -> crate::db::Value {
                crate::db::Value::Text(id.0)
            }
        }
    };
}

id_type!(
    /// A transaction's id (or, where the request says so, its api id).
    TransactionId
);
id_type!(
    /// A transaction batch's id.
    BatchId
);
id_type!(
    /// A recurring schedule's id, on the payments it creates.
    RecurringId
);
id_type!(
    /// A quick invoice's id, on the payments made against it.
    QuickInvoiceId
);

/// Where a payment comes from: the reference's `trx_source_id` (2.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrxSource {
    Unknown = 1,
    Mobile = 2,
    Web = 3,
    Ivr = 4,
    ContactStatement = 5,
    ContactPaymentMobile = 6,
    ContactPayment = 7,
    QuickInvoice = 8,
    PayForm = 9,
    HostedPaymentPage = 10,
    Emulator = 11,
    /// The direct API (every request to `POST /v2/transactions`).
    Integration = 12,
    RecurringBilling = 13,
    RecurringSecondary = 14,
    DeclinedRecurringEmail = 15,
}

impl TrxSource {
    pub fn code(self) -> i64 {
        self as i64
    }
}

/// Who started a payment, and the record of theirs it belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    pub source: TrxSource,
    /// The schedule whose run this is (sets `is_recurring`).
    pub recurring_id: Option<RecurringId>,
    /// The schedule's attempt this payment is (`<recurring id>:<run>`):
    /// unique among transactions, so one attempt can never charge twice.
    pub recurring_run: Option<String>,
    pub quick_invoice_id: Option<QuickInvoiceId>,
    /// An ACH update: the POP or C21 debit this one replaces (voided in
    /// the same operation; `previous_transaction_id` of the new one).
    pub replaces: Option<TransactionId>,
    /// A card read by a payment terminal (router transactions).
    pub terminal: Option<TerminalRead>,
    /// The hosted payment page the payer paid on.
    pub hosted_payment_page_id: Option<String>,
    /// Refuses the payment as a repeat (the emulator's duplicate check).
    pub duplicate_guard: Option<DuplicateGuard>,
}

/// A key a new payment takes in the write job that stores it as pending,
/// refused while another payment holds it: a repeat of the same request
/// within the window. Taken in that job, so of identical requests sent at
/// once exactly one is charged; declined payments keep their key too.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DuplicateGuard {
    /// What makes two payments the same (the caller's choice of fields).
    pub key: String,
    /// Seconds a taken key refuses repeats; 0 takes the key without
    /// checking it.
    pub window_secs: i64,
}

impl DuplicateGuard {
    /// The field of the `ApiError::Conflict` a repeat is refused with.
    pub const REFUSED_FIELD: &'static str = "duplicate_guard";
    /// The longest window a guard may have (Authorize.Net's bound on
    /// `duplicateWindow`, eight hours): a key taken longer ago refuses
    /// nothing, and the reconciler deletes it.
    pub const LONGEST_WINDOW_SECS: i64 = 28_800;
}

/// Where and how a terminal read the card of a card-present payment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TerminalRead {
    pub terminal_id: String,
    /// The terminal's serial number (`terminal_serial_number`).
    pub serial_number: Option<String>,
    /// Chip, contactless, swiped, keyed or fallback.
    pub entry_mode: crate::processor::EntryMode,
    /// The EMV receipt tags, as JSON text (`emv_receipt_data`).
    pub emv_receipt_data: Option<String>,
}

impl Origin {
    /// A request to the API itself.
    pub fn api() -> Origin {
        Origin::from(TrxSource::Integration)
    }

    /// Whether a card product transaction's surcharge applies. The
    /// reference lets consumer fees through the API, PayForms, hosted
    /// pages, quick invoices and the virtual terminal, not terminals:
    /// their cardholder approves the amount the device shows. Nor the
    /// Authorize.Net emulator, whose `amount` is the total to charge.
    pub fn takes_surcharge(&self) -> bool {
        self.terminal.is_none() && self.source != TrxSource::Emulator
    }
}

impl From<TrxSource> for Origin {
    fn from(source: TrxSource) -> Origin {
        Origin {
            source,
            recurring_id: None,
            recurring_run: None,
            quick_invoice_id: None,
            replaces: None,
            terminal: None,
            hosted_payment_page_id: None,
            duplicate_guard: None,
        }
    }
}

/// An `Idempotency-Key` and the digest of the request it came with.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Idempotency {
    pub key: String,
    pub fingerprint: String,
}

/// A new payment: sale, authonly, avsonly, force, refund, debit, credit.
pub struct NewPayment {
    /// The fields, checked against the action's rules (`actions::parse`).
    pub input: Parsed,
    pub origin: Origin,
    pub idempotency: Option<Idempotency>,
}

/// An action on an existing transaction: authcomplete, authincrement,
/// void, partialreversal, tipadjust, edit.
pub struct FollowUp {
    pub transaction: TransactionId,
    pub input: Parsed,
    pub idempotency: Option<Idempotency>,
}

/// The stored result of an operation, as the API answers it.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// 201 for a new payment, 200 for a follow-up.
    pub status: u16,
    /// `{"transaction": {...}}`.
    pub body: Json,
    /// The answer was stored by an earlier request with the same key.
    pub replayed: bool,
}

impl Reply {
    /// The transaction as answered.
    pub fn transaction(&self) -> &Json {
        &self.body["transaction"]
    }
}
