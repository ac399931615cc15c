//! The payment processor boundary: the [`Processor`] trait an acquirer
//! connector implements, its request and response types, and the built-in
//! [`SandboxProcessor`] reproducing the reference's sandbox.
//!
//! # Synchronous by design
//!
//! The trait is plain synchronous (`fn`, not `async fn`), and `Send + Sync`
//! so that an `Arc<dyn Processor>` can be shared by the server. The crate's
//! storage is synchronous too (rusqlite, postgres) and runs on tokio's
//! blocking pool; the transaction service calls the processor the same way,
//! with `tokio::task::spawn_blocking`, outside any DB transaction. A real
//! connector may block on its network call there; it must enforce its own
//! time-out and answer with a time-out decline rather than hang.
//!
//! A processor never sleeps to simulate latency: a slow answer (the
//! sandbox's $8.XX triggers) is returned as [`ProcessorResponse::delay`],
//! which the caller awaits (`tokio::time::sleep`) without holding a
//! blocking thread, and which tests can read without waiting.
//!
//! Money is integer minor units (`i64` cents) throughout.

pub mod codes;
pub mod sandbox;
pub mod settlement;

use std::time::Duration;

pub use crate::money::Money;
pub use codes::{Avs, AvsEnhanced, CvvResponse, EntryMode, ProcessingStatus, ReasonCode, StatusId, TypeId};
pub use sandbox::SandboxProcessor;
pub use settlement::{SettleOutcome, SettlementErrorRow, SETTLEMENT_ERRORS};

/// The default processor time-out of the reference: 10,000 ms.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Card data of a request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CardData {
    /// The card number, digits only.
    pub pan: String,
    /// `MMYY`.
    pub exp_date: String,
    /// The CVV if sent (3 or 4 digits).
    pub cvv: Option<String>,
    pub billing_street: Option<String>,
    pub billing_zip: Option<String>,
    pub account_holder_name: Option<String>,
    /// `None` = keyed.
    pub entry_mode: Option<EntryMode>,
}

/// `checking` or `savings`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AchAccountType {
    Checking,
    Savings,
}

impl AchAccountType {
    /// `checking` or `savings`, as the API carries it.
    pub fn as_str(self) -> &'static str {
        match self {
            AchAccountType::Checking => "checking",
            AchAccountType::Savings => "savings",
        }
    }

    pub fn parse(s: &str) -> Option<AchAccountType> {
        match s {
            "checking" => Some(AchAccountType::Checking),
            "savings" => Some(AchAccountType::Savings),
            _ => None,
        }
    }
}

/// Bank account data of an ACH request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AchData {
    pub account_holder_name: String,
    /// 4-17 digits for the sandbox.
    pub account_number: String,
    /// 9-digit ABA routing number.
    pub routing: String,
    pub account_type: AchAccountType,
    /// PPD, CCD, WEB, TEL, POP or C21.
    pub sec_code: String,
    pub check_number: Option<String>,
    /// `YYYY-MM-DD`; default today.
    pub effective_date: Option<String>,
    /// C21: the check's images, for the processor only.
    pub check_images: Option<CheckImages>,
}

/// The front and back images of a Check 21 item, base64 as sent.
#[derive(Clone, PartialEq, Eq)]
pub struct CheckImages {
    pub front: String,
    pub back: String,
}

/// Sizes only: an image shows the account number and can be 64 KB, so
/// it never reaches a log line through `{:?}`.
impl std::fmt::Debug for CheckImages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckImages")
            .field("front_len", &self.front.len())
            .field("back_len", &self.back.len())
            .finish()
    }
}

/// The payment method of the transaction an operation refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PaymentMethod {
    Cc,
    Ach,
}

impl PaymentMethod {
    /// `cc` or `ach`, as the API carries it.
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentMethod::Cc => "cc",
            PaymentMethod::Ach => "ach",
        }
    }

    pub fn parse(s: &str) -> Option<PaymentMethod> {
        match s {
            "cc" => Some(PaymentMethod::Cc),
            "ach" => Some(PaymentMethod::Ach),
            _ => None,
        }
    }
}

/// The processor's handle on an earlier transaction (an authorization,
/// a sale, an ACH debit): what a connector needs to refer to it again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessorRef {
    /// The [`ProcessorResponse::processor_reference`] of the original.
    pub reference: String,
    /// Its auth code, if it had one.
    pub auth_code: Option<String>,
    pub method: PaymentMethod,
}

/// Per-request checks that turn an approval into a decline (the product
/// transaction's settings, or their `_override` request fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuthOptions {
    /// Partial approvals accepted (`allow_partial_authorization`); without
    /// it a partial approval is auto-reversed (1657).
    pub allow_partial: bool,
    /// `auto_decline_cvv`: a CVV result P, S, U or X declines (1656).
    pub auto_decline_cvv: bool,
    /// `auto_decline_street`: a failed street check declines (1655).
    pub auto_decline_street: bool,
    /// `auto_decline_zip`: a failed zip check declines (1655).
    pub auto_decline_zip: bool,
}

/// sale (`capture` true) or authonly (`capture` false).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizeRequest {
    /// The gateway's id of the transaction this request creates: a
    /// connector sends it as its merchant reference, so an unconfirmed
    /// request can be reversed by it (see [`Processor::reverse`]).
    pub gateway_id: String,
    pub amount: Money,
    pub card: CardData,
    pub capture: bool,
    pub options: AuthOptions,
}

/// authcomplete: capture an authorization for its amount or less.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureRequest {
    pub original: ProcessorRef,
    /// What the authorization approved.
    pub authorized_amount: Money,
    /// What to capture: at most `authorized_amount`.
    pub amount: Money,
}

/// authincrement on an open authorization.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IncrementRequest {
    pub original: ProcessorRef,
    pub authorized_amount: Money,
    /// The `transaction_amount` sent with the increment (whether it is the
    /// increment or the new total is not stated by the reference; the
    /// service decides and the processor echoes it).
    pub amount: Money,
}

/// void of a card transaction before settlement, or of an ACH one before
/// the cut-off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoidRequest {
    pub original: ProcessorRef,
}

/// partialreversal: reduce an authorization or unsettled sale.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartialReversalRequest {
    pub original: ProcessorRef,
    pub original_amount: Money,
    /// The reduced final amount, below `original_amount`.
    pub new_amount: Money,
    /// Whether the original was captured (a sale, 101) or is an open
    /// authorization (102).
    pub captured: bool,
}

/// refund of an earlier card or ACH transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefundRequest {
    /// The gateway's id of the transaction this request creates: a
    /// connector sends it as its merchant reference, so an unconfirmed
    /// request can be reversed by it (see [`Processor::reverse`]).
    pub gateway_id: String,
    pub original: ProcessorRef,
    pub amount: Money,
}

/// An unreferenced card refund (money back to a card without an original).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreditRequest {
    /// The gateway's id of the transaction this request creates: a
    /// connector sends it as its merchant reference, so an unconfirmed
    /// request can be reversed by it (see [`Processor::reverse`]).
    pub gateway_id: String,
    pub amount: Money,
    pub card: CardData,
}

/// ACH debit or credit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AchRequest {
    /// The gateway's id of the transaction this request creates: a
    /// connector sends it as its merchant reference, so an unconfirmed
    /// request can be reversed by it (see [`Processor::reverse`]).
    pub gateway_id: String,
    pub amount: Money,
    pub account: AchData,
    /// An ACH update (POP, C21): the voided item this debit replaces, with
    /// its MICR line or amount corrected. Its images stay the original's.
    pub replaces: Option<ProcessorRef>,
}

/// Manager override of an ACH debit held with "Manager Needed" (1663):
/// the merchant's manager approves it as it was sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverrideRequest {
    pub original: ProcessorRef,
    pub amount: Money,
}

/// avsonly: the address (and CVV) checked without an amount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AvsOnlyRequest {
    pub card: CardData,
}

/// force: post a sale with a voice authorization's code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForceRequest {
    /// The gateway's id of the transaction this request creates: a
    /// connector sends it as its merchant reference, so an unconfirmed
    /// request can be reversed by it (see [`Processor::reverse`]).
    pub gateway_id: String,
    pub amount: Money,
    pub card: CardData,
    /// Exactly 6 characters.
    pub auth_code: String,
}

/// Reverse whatever an unconfirmed request did: the gateway lost the
/// answer (a crash, a time-out) and does not know whether the processor
/// approved. Named by the gateway id the request carried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReversalRequest {
    pub gateway_id: String,
    pub amount: Money,
    pub method: PaymentMethod,
}

/// Settle (close) a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettleRequest {
    /// The gateway's batch id, for the connector's file name.
    pub batch_id: String,
    /// The amounts of the batch's transactions in cents, in the order they
    /// entered the batch.
    pub amounts: Vec<i64>,
    /// Which settle attempt of this batch this is: 1 for the first.
    pub attempt: u32,
}

/// The processor's answer to a transaction request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessorResponse {
    pub status_id: StatusId,
    pub reason_code_id: ReasonCode,
    /// Short processor text: `Test 1234` on approvals, the trigger's result
    /// name on sandbox declines (`DENY`, `INSUFFICIENT_FUNDS`).
    pub verbiage: String,
    /// The processor's code and text (`response_message`).
    pub response_message: String,
    pub auth_code: Option<String>,
    /// What was approved (less than requested on a partial approval, 0 on
    /// a decline).
    pub approved_amount: Money,
    pub avs: Option<Avs>,
    pub avs_enhanced: Option<AvsEnhanced>,
    pub cvv_response: Option<CvvResponse>,
    /// The processor's id of this operation, to refer to it later.
    pub processor_reference: String,
    /// How long the answer takes to arrive: the caller awaits it before
    /// finishing the transaction. Never more than the time-out.
    pub delay: Duration,
    /// The answer did not arrive within the processor time-out; the
    /// response is the time-out decline.
    pub timed_out: bool,
}

impl ProcessorResponse {
    pub fn is_approved(&self) -> bool {
        self.status_id.is_approved()
    }
}

/// The processor's answer to a settle request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SettleResponse {
    pub outcome: SettleOutcome,
    /// Set when settled.
    pub settlement_file_name: Option<String>,
}

/// A request the processor could not take at all (as opposed to a decline,
/// which is a [`ProcessorResponse`]).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProcessorError {
    /// The request breaks a rule the gateway should have checked (capture
    /// above the authorization, force without a 6-character code, ...).
    #[error("invalid processor request: {0}")]
    Invalid(String),
    /// The processor does not offer this operation.
    #[error("operation not supported by the processor: {0}")]
    Unsupported(&'static str),
    /// The processor could not be reached or answered nonsense.
    #[error("processor unavailable: {0}")]
    Unavailable(String),
}

pub type ProcessorResult<T = ProcessorResponse> = Result<T, ProcessorError>;

/// An acquirer connector. Every method is synchronous and may block on the
/// network: call it from `spawn_blocking` (unless [`Processor::blocks`]
/// says it never does), outside any DB transaction, then await `delay`.
pub trait Processor: Send + Sync {
    /// A short name for logs and records (`sandbox`).
    fn name(&self) -> &'static str;

    /// Whether a call may block (network I/O). One that never does (the
    /// sandbox computes its answer in memory and hands any delay back as
    /// `delay`) is called on the request's own thread, sparing a hand-off
    /// to the blocking pool.
    fn blocks(&self) -> bool {
        true
    }

    /// sale (`capture` true: authorize and capture) or authonly.
    fn authorize(&self, req: &AuthorizeRequest) -> ProcessorResult;

    /// authcomplete: capture an authorization (for its amount or less).
    fn capture(&self, req: &CaptureRequest) -> ProcessorResult;

    /// authincrement.
    fn increment(&self, req: &IncrementRequest) -> ProcessorResult;

    /// void (card or ACH).
    fn void(&self, req: &VoidRequest) -> ProcessorResult;

    /// partialreversal.
    fn partial_reversal(&self, req: &PartialReversalRequest) -> ProcessorResult;

    /// refund of an earlier transaction (card or ACH).
    fn refund(&self, req: &RefundRequest) -> ProcessorResult;

    /// Unreferenced card refund.
    fn credit(&self, req: &CreditRequest) -> ProcessorResult;

    /// ACH debit (money from the account).
    fn ach_debit(&self, req: &AchRequest) -> ProcessorResult;

    /// ACH credit (money to the account).
    fn ach_credit(&self, req: &AchRequest) -> ProcessorResult;

    /// avsonly.
    fn avs_only(&self, req: &AvsOnlyRequest) -> ProcessorResult;

    /// Manager override of a TEL, POP or C21 debit held with 1663. A
    /// processor without manager holds never has anything to override.
    fn ach_override(&self, _req: &OverrideRequest) -> ProcessorResult {
        Err(ProcessorError::Unsupported("ach override"))
    }

    /// force.
    fn force(&self, req: &ForceRequest) -> ProcessorResult;

    /// Timeout reversal: undo the request sent for `gateway_id`, if it
    /// reached the processor at all. Must be safe to repeat.
    fn reverse(&self, req: &ReversalRequest) -> ProcessorResult;

    /// Close a batch.
    fn settle(&self, req: &SettleRequest) -> ProcessorResult<SettleResponse>;

    /// The controls a test processor gives developers (the sandbox's ACH
    /// status changes); `None` for a real connector, so the developer
    /// endpoints are not served at all.
    fn simulator(&self) -> Option<&dyn Simulator> {
        None
    }
}

/// What a test processor lets a developer drive by hand, standing in for
/// the bank: an ACH transaction's later life (origination, settlement,
/// returns) happens days after the request on a real network.
pub trait Simulator: Send + Sync {
    /// The change of an ACH transaction from `from` to `to`, for an amount
    /// of `amount` cents, or why the flow does not allow it.
    fn ach_status_change(&self, from: StatusId, to: StatusId, amount: i64)
        -> Result<AchStatusChange, String>;
}

/// What an allowed ACH status change does to the transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AchStatusChange {
    pub status_id: StatusId,
    /// The reason to record with the new status, if it has one.
    pub reason: Option<ReasonCode>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn trait_objects_are_shareable() {
        fn assert_send_sync<T: Send + Sync + ?Sized>() {}
        assert_send_sync::<dyn Processor>();
        let p: Arc<dyn Processor> = Arc::new(SandboxProcessor::default());
        assert_eq!(p.name(), "sandbox");
        let handle = std::thread::spawn(move || p.name());
        assert_eq!(handle.join().unwrap(), "sandbox");
    }
}
