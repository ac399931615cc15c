//! The built-in sandbox processor, the default: it reproduces the
//! reference's sandbox (section 3) without any network.
//!
//! - Card amount triggers (3.1): $2.01 partial approval of $1.00, $5.00,
//!   $5.10, $5.20, $5.30, $5.40 and $6.01-$6.31 declines with reason
//!   `1000 + amount × 100`, $8.XX a response delayed by XX seconds with
//!   reason 1500, a delay reaching the processor time-out (10 s by
//!   default) ending in the time-out decline.
//! - AVS test values (3.2) into `avs` and `avs_enhanced`; CVV test values
//!   into `cvv_response`, with `auto_decline_cvv`.
//! - Any card number (the test cards of 3.3 included) is approved unless a
//!   rule above declines it.
//! - ACH (3.4): any valid routing number and a 4-17 digit account number;
//!   debits, credits and refunds answer 131 Pending Origination.
//! - Settlement (3.6): see [`super::settlement::settle_outcome`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rand::Rng;

use super::codes::{Avs, AvsEnhanced, CvvResponse, ReasonCode, StatusId};
use super::settlement::{settle_outcome, SettleOutcome};
use super::*;
use crate::bins::brands::{brand_of, Brand};

/// The sandbox's result names of the decline triggers (3.1), by amount in
/// cents. Each declines with reason `1000 + cents`.
pub const DECLINE_TRIGGERS: &[(i64, &str)] = &[
    (500, "DENY"),
    (510, "CALL"),
    (520, "PKUP"),
    (530, "RETRY"),
    (540, "SETUP"),
    (601, "GENERICFAIL"),
    (602, "CALL"),
    (603, "NOREPLY"),
    (604, "PICKUP_NOFRAUD"),
    (605, "PICKUP_FRAUD"),
    (606, "PICKUP_LOST"),
    (607, "PICKUP_STOLEN"),
    (608, "ACCTERROR"),
    (609, "ALREADY_REVERSED"),
    (610, "BAD_PIN"),
    (611, "CASHBACK_EXCEEDED"),
    (612, "CASHBACK_NOAVAIL"),
    (613, "CID_ERROR"),
    (614, "DATE_ERROR"),
    (615, "DO NOT HONOR"),
    (616, "INSUFFICIENT_FUNDS"),
    (617, "EXCEED_WITHDRAWAL_LIMIT"),
    (618, "INVALID_SERVICE_CODE"),
    (619, "EXCEED_ACTIVITY_LIMIT"),
    (620, "VIOLATION"),
    (621, "ENCRYPTION_ERROR"),
    (622, "CARD_EXPIRED"),
    (623, "REENTER"),
    (624, "SECURITY_VIOLATION"),
    (625, "NOT_PERMITTED_CARD"),
    (626, "NOT_PERMITTED_TRAN"),
    (627, "SYSTEM_ERROR"),
    (628, "BAD_MERCH_ID"),
    (629, "DUPLICATE_BATCH"),
    (630, "REJECTED_BATCH"),
    (631, "ACCOUNT_CLOSED"),
];

/// $2.01: PARTIAL_AUTH.
pub const PARTIAL_AUTH_AMOUNT: i64 = 201;
/// What a $2.01 partial approval approves: $1.00.
pub const PARTIAL_AUTH_APPROVED: i64 = 100;
/// $8.00-$8.99: delayed response.
pub const DELAY_AMOUNTS: std::ops::RangeInclusive<i64> = 800..=899;

/// What an amount triggers in the sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AmountTrigger {
    /// $2.01: a $1.00 partial approval (reason 1201).
    PartialAuth,
    /// A decline with the sandbox's result name and reason.
    Decline { name: &'static str, reason: ReasonCode },
    /// $8.XX: the answer comes after XX seconds, reason 1500.
    Delay(Duration),
}

/// The trigger of an amount in cents, if it is one.
pub fn amount_trigger(amount: i64) -> Option<AmountTrigger> {
    if amount == PARTIAL_AUTH_AMOUNT {
        return Some(AmountTrigger::PartialAuth);
    }
    if DELAY_AMOUNTS.contains(&amount) {
        return Some(AmountTrigger::Delay(Duration::from_secs((amount - 800) as u64)));
    }
    DECLINE_TRIGGERS
        .iter()
        .find(|(cents, _)| *cents == amount)
        .map(|(cents, name)| AmountTrigger::Decline {
            name,
            reason: ReasonCode(1000 + *cents as u16),
        })
}

/// The AVS test address that passes (3.2).
pub const AVS_PASS_STREET: &str = "5800 NW 39th AVE";
pub const AVS_PASS_ZIP: &str = "32606";
/// The AVS test address that denies the transaction (3.2).
pub const AVS_DENY_STREET: &str = "2831 NW 41st St STE J";
pub const AVS_DENY_ZIP: &str = "32615";

/// The sandbox's AVS result for an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AvsResult {
    /// `None` when neither street nor zip was sent.
    pub avs: Option<Avs>,
    pub avs_enhanced: AvsEnhanced,
    /// The deny test address: the transaction is declined on AVS.
    pub deny: bool,
    /// A street was sent and did not match.
    pub street_failed: bool,
    /// A zip was sent and did not match.
    pub zip_failed: bool,
}

fn normalize(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_ascii_lowercase()
}

/// Zip digits without a dash or space: `32606-1234` -> `326061234`.
fn zip_digits(zip: &str) -> String {
    zip.chars()
        .filter(|c| !matches!(c, '-' | ' '))
        .collect::<String>()
        .to_ascii_lowercase()
}

/// The AVS check of the sandbox (3.2). Street and zip compare ignoring
/// case and repeated spaces; a 9-digit zip matches on its first five
/// digits. The pass address gives GOOD/Y (X with a 9-digit zip), the deny
/// address BAD/N and a decline, the pass street with another zip ZIP/A,
/// the pass zip with another street STREET/Z (W with a 9-digit zip), no
/// address at all no `avs` and V, anything else BAD/N (check failed, not
/// declined).
pub fn avs_check(street: Option<&str>, zip: Option<&str>) -> AvsResult {
    let street = street.map(normalize).filter(|s| !s.is_empty());
    let zip = zip.map(zip_digits).filter(|z| !z.is_empty());
    if street.is_none() && zip.is_none() {
        return AvsResult {
            avs: None,
            avs_enhanced: AvsEnhanced::V,
            deny: false,
            street_failed: false,
            zip_failed: false,
        };
    }
    let zip9 = zip.as_deref().is_some_and(|z| z.len() == 9);
    let zip_is = |test: &str| {
        zip.as_deref()
            .is_some_and(|z| z == test || (z.len() == 9 && z.starts_with(test)))
    };
    let street_is = |test: &str| street.as_deref() == Some(normalize(test).as_str());
    if street_is(AVS_DENY_STREET) && zip_is(AVS_DENY_ZIP) {
        return AvsResult {
            avs: Some(Avs::Bad),
            avs_enhanced: AvsEnhanced::N,
            deny: true,
            street_failed: true,
            zip_failed: true,
        };
    }
    let street_ok = street_is(AVS_PASS_STREET);
    let zip_ok = zip_is(AVS_PASS_ZIP);
    let (avs, avs_enhanced) = match (street_ok, zip_ok) {
        (true, true) if zip9 => (Avs::Good, AvsEnhanced::X),
        (true, true) => (Avs::Good, AvsEnhanced::Y),
        (true, false) => (Avs::Zip, AvsEnhanced::A),
        (false, true) if zip9 => (Avs::Street, AvsEnhanced::W),
        (false, true) => (Avs::Street, AvsEnhanced::Z),
        (false, false) => (Avs::Bad, AvsEnhanced::N),
    };
    AvsResult {
        avs: Some(avs),
        avs_enhanced,
        deny: false,
        street_failed: street.is_some() && !street_ok,
        zip_failed: zip.is_some() && !zip_ok,
    }
}

/// The CVV test values (3.2): (result, Visa / MC / Discover value, Amex
/// value). Any other value sent gives N.
pub const CVV_TEST_VALUES: &[(CvvResponse, &str, &str)] = &[
    (CvvResponse::Match, "999", "1234"),
    (CvvResponse::NoMatch, "123", "9999"),
    (CvvResponse::NotProcessed, "124", "9998"),
    (CvvResponse::Unreadable, "125", "9997"),
    (CvvResponse::IssuerNotParticipating, "126", "9996"),
    (CvvResponse::NoResponse, "127", "9995"),
];

/// The sandbox's `cvv_response` for a card and CVV: `None` when no CVV
/// was sent. Amex cards use the Amex column, every other card the
/// Visa / MC / Discover one.
pub fn cvv_check(pan: &str, cvv: Option<&str>) -> Option<CvvResponse> {
    let cvv = cvv.map(str::trim).filter(|c| !c.is_empty())?;
    let amex = brand_of(pan) == Some(Brand::Amex);
    let found = CVV_TEST_VALUES
        .iter()
        .find(|(_, other, amex_value)| if amex { *amex_value == cvv } else { *other == cvv });
    Some(
        found
            .map(|(result, _, _)| *result)
            .unwrap_or(CvvResponse::NoMatch),
    )
}

/// Whether `auto_decline_cvv` declines on this CVV result: P, S, U and X
/// do; M, N and a blank do not (3.2).
pub fn cvv_auto_declines(result: Option<CvvResponse>) -> bool {
    matches!(
        result,
        Some(
            CvvResponse::NotProcessed
                | CvvResponse::Unreadable
                | CvvResponse::IssuerNotParticipating
                | CvvResponse::NoResponse
        )
    )
}

/// The ACH status simulator's allowed changes (1.6): 131 or 132 -> 133 ->
/// 134, or any of these -> 301, 201 or 331; 301, 201 and 331 are final.
pub fn ach_status_change_allowed(from: StatusId, to: StatusId) -> bool {
    use StatusId::*;
    let open = matches!(from, PendingOrigination | Originating | Originated | AchSettled);
    match to {
        Originated => matches!(from, PendingOrigination | Originating),
        AchSettled => from == Originated,
        Declined | Voided | ChargedBack => open,
        _ => false,
    }
}

/// The reason code of a sandbox charge-back (status 331): the first two
/// decimals of the amount are the return number, `10.22` -> 2122 (R22).
/// Cents that are not a return the reference has (00, R48-R49, R54-R60,
/// R75-R79, above R83) give R01 (2101).
pub fn ach_chargeback_reason(amount: i64) -> ReasonCode {
    ReasonCode::for_ach_return((amount.rem_euclid(100)) as u8).unwrap_or(ReasonCode(2101))
}

/// The sandbox processor.
#[derive(Debug)]
pub struct SandboxProcessor {
    timeout: Duration,
    sequence: AtomicU64,
}

impl Default for SandboxProcessor {
    fn default() -> Self {
        SandboxProcessor::with_timeout(DEFAULT_TIMEOUT)
    }
}

impl SandboxProcessor {
    /// A sandbox whose answers time out after `timeout`.
    pub fn with_timeout(timeout: Duration) -> Self {
        SandboxProcessor {
            timeout,
            sequence: AtomicU64::new(0),
        }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    fn reference(&self) -> String {
        let n = self.sequence.fetch_add(1, Ordering::Relaxed);
        format!("sbx-{n:010}-{:08x}", rand::thread_rng().gen::<u32>())
    }

    /// A response with the common fields filled: `Test NNNN` verbiage,
    /// the reason's label as message, no delay.
    fn answer(
        &self,
        status_id: StatusId,
        reason: ReasonCode,
        approved_amount: i64,
        auth_code: Option<String>,
    ) -> ProcessorResponse {
        let approved = status_id.is_approved();
        ProcessorResponse {
            status_id,
            reason_code_id: reason,
            verbiage: if approved {
                test_verbiage()
            } else {
                reason.label().to_string()
            },
            response_message: reason.label().to_string(),
            auth_code: if approved { auth_code } else { None },
            approved_amount: if approved { approved_amount } else { 0 },
            avs: None,
            avs_enhanced: None,
            cvv_response: None,
            processor_reference: self.reference(),
            delay: Duration::ZERO,
            timed_out: false,
        }
    }

    fn decline(&self, reason: ReasonCode, verbiage: &str) -> ProcessorResponse {
        let mut r = self.answer(StatusId::Declined, reason, 0, None);
        r.verbiage = verbiage.to_string();
        r
    }

    /// The delayed $8.XX answer: reason 1500 after the delay, or the
    /// time-out decline when the delay reaches the time-out.
    fn delayed(&self, delay: Duration, reason: ReasonCode) -> ProcessorResponse {
        if delay >= self.timeout {
            let mut r = self.decline(reason, "TIMEOUT");
            r.response_message = format!("Processor time-out after {} ms", self.timeout.as_millis());
            r.delay = self.timeout;
            r.timed_out = true;
            r
        } else {
            let mut r = self.decline(reason, "DELAYED");
            r.delay = delay;
            r
        }
    }
}

fn test_verbiage() -> String {
    format!("Test {:04}", rand::thread_rng().gen_range(0..10_000))
}

/// 6 lowercase hex characters (3.7).
fn card_auth_code() -> String {
    format!("{:06x}", rand::thread_rng().gen_range(0..0x100_0000u32))
}

/// `AUTH NUM 272-172` (3.4 sample).
fn ach_auth_code() -> String {
    let mut rng = rand::thread_rng();
    format!(
        "AUTH NUM {:03}-{:03}",
        rng.gen_range(0..1000),
        rng.gen_range(0..1000)
    )
}

fn positive(amount: i64, what: &str) -> ProcessorResult<()> {
    if amount > 0 {
        Ok(())
    } else {
        Err(ProcessorError::Invalid(format!(
            "{what} must be greater than zero"
        )))
    }
}

fn card_present(card: &CardData) -> ProcessorResult<()> {
    if card.pan.is_empty() || !card.pan.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ProcessorError::Invalid("card number must be digits".into()));
    }
    Ok(())
}

impl SandboxProcessor {
    fn ach(&self, req: &AchRequest) -> ProcessorResult {
        positive(req.amount, "amount")?;
        let account = &req.account;
        if !crate::cards::aba_ok(&account.routing) {
            return Ok(self.decline(
                ReasonCode::INVALID_AMOUNT_OR_ABA,
                "Invalid ABA number, not an ACH participant",
            ));
        }
        let digits = account.account_number.len();
        if !(4..=17).contains(&digits) || !account.account_number.bytes().all(|b| b.is_ascii_digit()) {
            return Ok(self.decline(ReasonCode::INVALID_CARD_NUMBER, "No account"));
        }
        Ok(self.answer(
            StatusId::PendingOrigination,
            ReasonCode::APPROVED,
            req.amount,
            Some(ach_auth_code()),
        ))
    }
}

impl Processor for SandboxProcessor {
    fn name(&self) -> &'static str {
        "sandbox"
    }

    fn authorize(&self, req: &AuthorizeRequest) -> ProcessorResult {
        positive(req.amount, "amount")?;
        card_present(&req.card)?;
        let avs = avs_check(
            req.card.billing_street.as_deref(),
            req.card.billing_zip.as_deref(),
        );
        let cvv = cvv_check(&req.card.pan, req.card.cvv.as_deref());
        let approved_status = if req.capture {
            StatusId::Approved
        } else {
            StatusId::AuthOnly
        };
        let mut response = match amount_trigger(req.amount) {
            Some(AmountTrigger::Delay(delay)) => self.delayed(delay, ReasonCode::DO_NOT_HONOR_GENERAL),
            Some(AmountTrigger::Decline { name, reason }) => self.decline(reason, name),
            Some(AmountTrigger::PartialAuth) if req.options.allow_partial => self.answer(
                approved_status,
                ReasonCode::PARTIAL_APPROVAL,
                PARTIAL_AUTH_APPROVED,
                Some(card_auth_code()),
            ),
            Some(AmountTrigger::PartialAuth) => {
                self.decline(ReasonCode::PARTIAL_AUTH_AUTO_REVERSAL, "PARTIAL_AUTH")
            }
            None => self.answer(
                approved_status,
                ReasonCode::APPROVED,
                req.amount,
                Some(card_auth_code()),
            ),
        };
        if response.is_approved() {
            let o = req.options;
            let reversal = if avs.deny
                || (o.auto_decline_street && avs.street_failed)
                || (o.auto_decline_zip && avs.zip_failed)
            {
                Some(ReasonCode::AVS_AUTO_REVERSAL)
            } else if o.auto_decline_cvv && cvv_auto_declines(cvv) {
                Some(ReasonCode::CVV_AUTO_REVERSAL)
            } else {
                None
            };
            if let Some(reason) = reversal {
                let reference = response.processor_reference;
                response = self.decline(reason, reason.label());
                response.processor_reference = reference;
            }
        }
        response.avs = avs.avs;
        response.avs_enhanced = Some(avs.avs_enhanced);
        response.cvv_response = cvv;
        Ok(response)
    }

    fn capture(&self, req: &CaptureRequest) -> ProcessorResult {
        positive(req.amount, "amount")?;
        if req.amount > req.authorized_amount {
            return Err(ProcessorError::Invalid(
                "capture above the authorized amount".into(),
            ));
        }
        Ok(self.answer(
            StatusId::Approved,
            ReasonCode::AUTH_COMPLETED,
            req.amount,
            req.original.auth_code.clone(),
        ))
    }

    fn increment(&self, req: &IncrementRequest) -> ProcessorResult {
        positive(req.amount, "amount")?;
        Ok(match amount_trigger(req.amount) {
            Some(AmountTrigger::Decline { name, .. }) => {
                self.decline(ReasonCode::DECLINED_AUTH_INCREMENT, name)
            }
            Some(AmountTrigger::Delay(delay)) => self.delayed(delay, ReasonCode::DECLINED_AUTH_INCREMENT),
            Some(AmountTrigger::PartialAuth) | None => self.answer(
                StatusId::AuthOnly,
                ReasonCode::APPROVED,
                req.amount,
                req.original.auth_code.clone(),
            ),
        })
    }

    fn void(&self, req: &VoidRequest) -> ProcessorResult {
        Ok(self.answer(
            StatusId::Voided,
            ReasonCode::VOIDED,
            0,
            req.original.auth_code.clone(),
        ))
    }

    fn partial_reversal(&self, req: &PartialReversalRequest) -> ProcessorResult {
        positive(req.new_amount, "new amount")?;
        if req.new_amount >= req.original_amount {
            return Err(ProcessorError::Invalid(
                "a partial reversal must lower the amount".into(),
            ));
        }
        let status = if req.captured {
            StatusId::Approved
        } else {
            StatusId::AuthOnly
        };
        Ok(self.answer(
            status,
            ReasonCode::APPROVED,
            req.new_amount,
            req.original.auth_code.clone(),
        ))
    }

    fn refund(&self, req: &RefundRequest) -> ProcessorResult {
        positive(req.amount, "amount")?;
        Ok(match req.original.method {
            PaymentMethod::Cc => self.answer(
                StatusId::Refunded,
                ReasonCode::APPROVED,
                req.amount,
                Some(card_auth_code()),
            ),
            PaymentMethod::Ach => self.answer(
                StatusId::PendingOrigination,
                ReasonCode::APPROVED,
                req.amount,
                Some(ach_auth_code()),
            ),
        })
    }

    fn credit(&self, req: &CreditRequest) -> ProcessorResult {
        positive(req.amount, "amount")?;
        card_present(&req.card)?;
        Ok(self.answer(
            StatusId::Refunded,
            ReasonCode::APPROVED,
            req.amount,
            Some(card_auth_code()),
        ))
    }

    fn ach_debit(&self, req: &AchRequest) -> ProcessorResult {
        self.ach(req)
    }

    fn ach_credit(&self, req: &AchRequest) -> ProcessorResult {
        self.ach(req)
    }

    fn avs_only(&self, req: &AvsOnlyRequest) -> ProcessorResult {
        card_present(&req.card)?;
        let avs = avs_check(
            req.card.billing_street.as_deref(),
            req.card.billing_zip.as_deref(),
        );
        let mut response = self.answer(StatusId::AvsOnly, ReasonCode::APPROVED, 0, Some(card_auth_code()));
        response.avs = avs.avs;
        response.avs_enhanced = Some(avs.avs_enhanced);
        response.cvv_response = cvv_check(&req.card.pan, req.card.cvv.as_deref());
        Ok(response)
    }

    fn force(&self, req: &ForceRequest) -> ProcessorResult {
        positive(req.amount, "amount")?;
        card_present(&req.card)?;
        if req.auth_code.chars().count() != 6 {
            return Err(ProcessorError::Invalid(
                "auth_code must be exactly 6 characters".into(),
            ));
        }
        Ok(self.answer(
            StatusId::Approved,
            ReasonCode::FORCED,
            req.amount,
            Some(req.auth_code.clone()),
        ))
    }

    fn settle(&self, req: &SettleRequest) -> ProcessorResult<SettleResponse> {
        let outcome = settle_outcome(&req.amounts, req.attempt);
        let settlement_file_name = (outcome == SettleOutcome::Settled)
            .then(|| format!("sandbox-{}-{}.csv", req.batch_id, req.attempt.max(1)));
        Ok(SettleResponse {
            outcome,
            settlement_file_name,
        })
    }
}
