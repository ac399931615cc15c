//! Step 2 of every payment: the processor call, outside any database
//! transaction, on a blocking thread (the [`Processor`] trait is
//! synchronous, ADR 0005); then the answer's delay is awaited without
//! holding that thread.

use crate::processor::*;
use std::sync::Arc;

/// The processor request a prepared transaction needs.
#[derive(Clone, Debug)]
pub enum Call {
    Authorize(AuthorizeRequest),
    Force(ForceRequest),
    AvsOnly(AvsOnlyRequest),
    Refund(RefundRequest),
    Credit(CreditRequest),
    AchDebit(AchRequest),
    AchCredit(AchRequest),
    Capture(CaptureRequest),
    Increment(IncrementRequest),
    Void(VoidRequest),
    PartialReversal(PartialReversalRequest),
    AchOverride(OverrideRequest),
    /// Refused by the gateway itself (a velocity limit): a decline with
    /// this reason and text, no processor call.
    Decline(ReasonCode, String),
    /// Nothing to ask (tipadjust, edit).
    Nothing,
}

impl Call {
    fn run(&self, p: &dyn Processor) -> ProcessorResult {
        match self {
            Call::Authorize(r) => p.authorize(r),
            Call::Force(r) => p.force(r),
            Call::AvsOnly(r) => p.avs_only(r),
            Call::Refund(r) => p.refund(r),
            Call::Credit(r) => p.credit(r),
            Call::AchDebit(r) => p.ach_debit(r),
            Call::AchCredit(r) => p.ach_credit(r),
            Call::Capture(r) => p.capture(r),
            Call::Increment(r) => p.increment(r),
            Call::Void(r) => p.void(r),
            Call::PartialReversal(r) => p.partial_reversal(r),
            Call::AchOverride(r) => p.ach_override(r),
            Call::Decline(reason, text) => Ok(local_decline(*reason, text)),
            Call::Nothing => Err(ProcessorError::Unsupported("nothing to call")),
        }
    }

    /// The payment method of the money this call moves.
    fn method(&self) -> PaymentMethod {
        match self {
            Call::AchDebit(_) | Call::AchCredit(_) | Call::AchOverride(_) => PaymentMethod::Ach,
            Call::Refund(r) => r.original.method,
            _ => PaymentMethod::Cc,
        }
    }
}

/// Asks the processor and waits out the answer's delay.
pub async fn ask(processor: &Arc<dyn Processor>, call: Call) -> ProcessorResult {
    let answer = if processor.blocks() {
        let processor = processor.clone();
        tokio::task::spawn_blocking(move || call.run(&*processor))
            .await
            .map_err(|e| ProcessorError::Unavailable(format!("processor call panicked: {e}")))?
    } else {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| call.run(&**processor)))
            .map_err(|_| ProcessorError::Unavailable("processor call panicked".into()))?
    };
    if let Ok(a) = &answer {
        if !a.delay.is_zero() {
            tokio::time::sleep(a.delay).await;
        }
    }
    answer
}

/// The answer to record for a new payment whose call failed outright.
/// When the request may have reached the processor (unavailable, no
/// answer), a timeout reversal by the gateway's id goes first, so no money
/// moves without a record: the payment is then declined with 1531.
pub async fn failure_answer(
    processor: &Arc<dyn Processor>,
    gateway_id: &str,
    call: &Call,
    error: ProcessorError,
) -> ProcessorResponse {
    let reason = match &error {
        ProcessorError::Unavailable(_) => {
            let req = ReversalRequest {
                gateway_id: gateway_id.to_string(),
                amount: Money::ZERO,
                method: call.method(),
            };
            let processor = processor.clone();
            let _ = tokio::task::spawn_blocking(move || processor.reverse(&req)).await;
            ReasonCode(1531)
        }
        _ => ReasonCode(1650),
    };
    tracing::warn!(transaction_id = %gateway_id, error = %error, "processor refused the request");
    local_decline(reason, &error.to_string())
}

/// A decline decided by the gateway.
pub fn local_decline(reason: ReasonCode, text: &str) -> ProcessorResponse {
    ProcessorResponse {
        status_id: StatusId::Declined,
        reason_code_id: reason,
        verbiage: text.chars().take(64).collect(),
        response_message: text.to_string(),
        auth_code: None,
        approved_amount: Money::ZERO,
        avs: None,
        avs_enhanced: None,
        cvv_response: None,
        processor_reference: String::new(),
        delay: std::time::Duration::ZERO,
        timed_out: false,
    }
}
