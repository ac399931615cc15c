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
//! - ACH "Manager Needed": a TEL, POP or C21 debit of $6.63 is held with
//!   reason 1663 (status 301) until `POST /v2/transactions/{id}/override`,
//!   which answers 131. The amount follows the card triggers' rule (reason
//!   `1000 + amount x 100`); the reference names no ACH trigger for it.
//! - Settlement (3.6): see [`super::settlement::settle_outcome`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rand::Rng;

use super::codes::{Avs, AvsEnhanced, CvvResponse, ReasonCode, StatusId};
use super::settlement::{settle_outcome, SettleOutcome};
use super::*;
use crate::bins::brands::{brand_of, Brand};

/// The reference's sandbox test cards (reference facts 3.3) and their
/// brands; any future expiry works with them.
pub const TEST_CARDS: &[(&str, Brand)] = &[
    ("4111111111111111", Brand::Visa),
    ("4012888888881881", Brand::Visa),
    ("4005562231212149", Brand::Visa),
    ("4485271031055802", Brand::Visa),
    ("4556773060150333", Brand::Visa),
    ("4916065618219339", Brand::Visa),
    ("4485420616463945", Brand::Visa),
    ("4716677219134014", Brand::Visa),
    ("4716917729443632", Brand::Visa),
    ("6011000995500000", Brand::Discover),
    ("371449635398431", Brand::Amex),
    ("5454545454545454", Brand::Mastercard),
    ("5405222222222226", Brand::Mastercard),
    ("5288071301680537", Brand::Mastercard),
    ("5435815271011988", Brand::Mastercard),
    ("5470675332875417", Brand::Mastercard),
    ("5565061411468182", Brand::Mastercard),
    ("5568022953219547", Brand::Mastercard),
    ("5560988568989757", Brand::Mastercard),
    ("5566806760567334", Brand::Mastercard),
];

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

/// $6.63: an ACH debit with SEC code TEL, POP or C21 is held for a
/// manager's approval (reason 1663, "Manager Needed").
pub const MANAGER_NEEDED_AMOUNT: i64 = 663;

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
        approved_amount: Money,
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
            approved_amount: if approved { approved_amount } else { Money::ZERO },
            avs: None,
            avs_enhanced: None,
            cvv_response: None,
            processor_reference: self.reference(),
            delay: Duration::ZERO,
            timed_out: false,
        }
    }

    fn decline(&self, reason: ReasonCode, verbiage: &str) -> ProcessorResponse {
        let mut r = self.answer(StatusId::Declined, reason, Money::ZERO, None);
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

fn positive(amount: Money, what: &str) -> ProcessorResult<()> {
    if amount.is_positive() {
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
        if req.amount.cents() == MANAGER_NEEDED_AMOUNT
            && crate::cards::OVERRIDE_SEC_CODES.contains(&account.sec_code.as_str())
        {
            return Ok(self.decline(ReasonCode::MANAGER_NEEDED, "MANAGER_NEEDED"));
        }
        Ok(self.answer(
            StatusId::PendingOrigination,
            ReasonCode::APPROVED,
            req.amount,
            Some(ach_auth_code()),
        ))
    }
}

impl Simulator for SandboxProcessor {
    fn ach_status_change(
        &self,
        from: StatusId,
        to: StatusId,
        amount: i64,
    ) -> Result<AchStatusChange, String> {
        if !ach_status_change_allowed(from, to) {
            return Err(format!(
                "Status {} cannot change to {} (allowed: 131/132 -> 133 -> 134; any of these -> 201, 301 or 331; 201, 301 and 331 are final).",
                from.code(),
                to.code()
            ));
        }
        let reason = match to {
            StatusId::ChargedBack => Some(ach_chargeback_reason(amount)),
            StatusId::Voided => Some(ReasonCode::VOIDED),
            StatusId::Declined => Some(ReasonCode::DO_NOT_HONOR_GENERAL),
            _ => None,
        };
        Ok(AchStatusChange {
            status_id: to,
            reason,
        })
    }
}

impl Processor for SandboxProcessor {
    fn name(&self) -> &'static str {
        "sandbox"
    }

    fn blocks(&self) -> bool {
        false
    }

    fn simulator(&self) -> Option<&dyn Simulator> {
        Some(self)
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
        let mut response = match amount_trigger(req.amount.cents()) {
            Some(AmountTrigger::Delay(delay)) => self.delayed(delay, ReasonCode::DO_NOT_HONOR_GENERAL),
            Some(AmountTrigger::Decline { name, reason }) => self.decline(reason, name),
            Some(AmountTrigger::PartialAuth) if req.options.allow_partial => self.answer(
                approved_status,
                ReasonCode::PARTIAL_APPROVAL,
                Money::from_cents(PARTIAL_AUTH_APPROVED),
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
        Ok(match amount_trigger(req.amount.cents()) {
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
            Money::ZERO,
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

    fn ach_override(&self, req: &OverrideRequest) -> ProcessorResult {
        positive(req.amount, "amount")?;
        Ok(self.answer(
            StatusId::PendingOrigination,
            ReasonCode::APPROVED,
            req.amount,
            Some(ach_auth_code()),
        ))
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
        let mut response = self.answer(
            StatusId::AvsOnly,
            ReasonCode::APPROVED,
            Money::ZERO,
            Some(card_auth_code()),
        );
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

    fn reverse(&self, _req: &ReversalRequest) -> ProcessorResult {
        // The sandbox keeps no state: whatever was approved is undone.
        Ok(self.answer(StatusId::Voided, ReasonCode::VOIDED, Money::ZERO, None))
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

#[cfg(test)]
mod tests {
    use super::*;

    const VISA: &str = "4111111111111111";
    const AMEX: &str = "371449635398431";

    fn card(pan: &str) -> CardData {
        CardData {
            pan: pan.into(),
            exp_date: "1230".into(),
            ..CardData::default()
        }
    }

    fn sale(amount: i64) -> AuthorizeRequest {
        AuthorizeRequest {
            gateway_id: "t1".into(),
            amount: Money::from_cents(amount),
            card: card(VISA),
            capture: true,
            options: AuthOptions::default(),
        }
    }

    fn original(method: PaymentMethod) -> ProcessorRef {
        ProcessorRef {
            reference: "sbx-1".into(),
            auth_code: Some("a1b2c3".into()),
            method,
        }
    }

    fn ach_account(routing: &str, number: &str) -> AchData {
        AchData {
            account_holder_name: "John Smith".into(),
            account_number: number.into(),
            routing: routing.into(),
            account_type: AchAccountType::Checking,
            sec_code: "PPD".into(),
            check_number: None,
            effective_date: None,
            check_images: None,
        }
    }

    /// 3.1: every amount trigger, on a sale.
    #[test]
    fn card_amount_triggers() {
        // (amount, status_id, reason_code_id, verbiage, approved amount)
        let rows: &[(i64, u16, u16, &str, i64)] = &[
            (500, 301, 1500, "DENY", 0),
            (510, 301, 1510, "CALL", 0),
            (520, 301, 1520, "PKUP", 0),
            (530, 301, 1530, "RETRY", 0),
            (540, 301, 1540, "SETUP", 0),
            (601, 301, 1601, "GENERICFAIL", 0),
            (602, 301, 1602, "CALL", 0),
            (603, 301, 1603, "NOREPLY", 0),
            (604, 301, 1604, "PICKUP_NOFRAUD", 0),
            (605, 301, 1605, "PICKUP_FRAUD", 0),
            (606, 301, 1606, "PICKUP_LOST", 0),
            (607, 301, 1607, "PICKUP_STOLEN", 0),
            (608, 301, 1608, "ACCTERROR", 0),
            (609, 301, 1609, "ALREADY_REVERSED", 0),
            (610, 301, 1610, "BAD_PIN", 0),
            (611, 301, 1611, "CASHBACK_EXCEEDED", 0),
            (612, 301, 1612, "CASHBACK_NOAVAIL", 0),
            (613, 301, 1613, "CID_ERROR", 0),
            (614, 301, 1614, "DATE_ERROR", 0),
            (615, 301, 1615, "DO NOT HONOR", 0),
            (616, 301, 1616, "INSUFFICIENT_FUNDS", 0),
            (617, 301, 1617, "EXCEED_WITHDRAWAL_LIMIT", 0),
            (618, 301, 1618, "INVALID_SERVICE_CODE", 0),
            (619, 301, 1619, "EXCEED_ACTIVITY_LIMIT", 0),
            (620, 301, 1620, "VIOLATION", 0),
            (621, 301, 1621, "ENCRYPTION_ERROR", 0),
            (622, 301, 1622, "CARD_EXPIRED", 0),
            (623, 301, 1623, "REENTER", 0),
            (624, 301, 1624, "SECURITY_VIOLATION", 0),
            (625, 301, 1625, "NOT_PERMITTED_CARD", 0),
            (626, 301, 1626, "NOT_PERMITTED_TRAN", 0),
            (627, 301, 1627, "SYSTEM_ERROR", 0),
            (628, 301, 1628, "BAD_MERCH_ID", 0),
            (629, 301, 1629, "DUPLICATE_BATCH", 0),
            (630, 301, 1630, "REJECTED_BATCH", 0),
            (631, 301, 1631, "ACCOUNT_CLOSED", 0),
            // Neighbours of the triggers approve in full.
            (499, 101, 1000, "", 499),
            (501, 101, 1000, "", 501),
            (550, 101, 1000, "", 550),
            (600, 101, 1000, "", 600),
            (632, 101, 1000, "", 632),
            (200, 101, 1000, "", 200),
            (202, 101, 1000, "", 202),
            (799, 101, 1000, "", 799),
            (900, 101, 1000, "", 900),
            (1000, 101, 1000, "", 1000),
            (9_020_011, 101, 1000, "", 9_020_011),
        ];
        let sandbox = SandboxProcessor::default();
        for &(amount, status, reason, verbiage, approved) in rows {
            let r = sandbox.authorize(&sale(amount)).unwrap();
            assert_eq!(
                (
                    r.status_id.code(),
                    r.reason_code_id.code(),
                    r.approved_amount.cents()
                ),
                (status, reason, approved),
                "{amount}"
            );
            if status == 301 {
                assert_eq!(r.verbiage, verbiage, "{amount}");
                assert_eq!(reason, 1000 + amount as u16, "reason = 1000 + amount x 100");
                assert_eq!(r.auth_code, None);
                assert_eq!(r.response_message, ReasonCode(reason).label());
            } else {
                assert!(
                    r.verbiage.starts_with("Test ") && r.verbiage.len() == 9,
                    "{}",
                    r.verbiage
                );
                let code = r.auth_code.unwrap();
                assert!(
                    code.len() == 6
                        && code
                            .bytes()
                            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                );
            }
            assert_eq!((r.delay, r.timed_out), (Duration::ZERO, false));
            // The same triggers on authonly.
            let mut auth = sale(amount);
            auth.capture = false;
            let r = sandbox.authorize(&auth).unwrap();
            let expected = if status == 101 { 102 } else { status };
            assert_eq!(
                (r.status_id.code(), r.reason_code_id.code()),
                (expected, reason),
                "authonly {amount}"
            );
        }
    }

    /// 3.1: $2.01 approves $1.00 when partial approvals are allowed.
    #[test]
    fn partial_approval() {
        // (capture, allow_partial, status, reason, approved)
        let rows: &[(bool, bool, u16, u16, i64)] = &[
            (true, true, 101, 1201, 100),
            (false, true, 102, 1201, 100),
            (true, false, 301, 1657, 0),
            (false, false, 301, 1657, 0),
        ];
        let sandbox = SandboxProcessor::default();
        for &(capture, allow_partial, status, reason, approved) in rows {
            let mut req = sale(201);
            req.capture = capture;
            req.options.allow_partial = allow_partial;
            let r = sandbox.authorize(&req).unwrap();
            assert_eq!(
                (
                    r.status_id.code(),
                    r.reason_code_id.code(),
                    r.approved_amount.cents()
                ),
                (status, reason, approved),
                "capture {capture} allow {allow_partial}"
            );
        }
    }

    /// 3.1: $8.XX waits XX seconds and answers 1500; a wait reaching the
    /// time-out (10 s by default) is the time-out decline.
    #[test]
    fn delays_and_time_out() {
        // (timeout s, amount, delay s, timed out)
        let rows: &[(u64, i64, u64, bool)] = &[
            (10, 800, 0, false),
            (10, 801, 1, false),
            (10, 805, 5, false),
            (10, 809, 9, false),
            (10, 810, 10, true),
            (10, 830, 10, true),
            (10, 899, 10, true),
            (30, 829, 29, false),
            (30, 830, 30, true),
            (2, 805, 2, true),
        ];
        for &(timeout, amount, delay, timed_out) in rows {
            let sandbox = SandboxProcessor::with_timeout(Duration::from_secs(timeout));
            let r = sandbox.authorize(&sale(amount)).unwrap();
            assert_eq!(
                (r.status_id, r.reason_code_id),
                (StatusId::Declined, ReasonCode(1500)),
                "{amount}"
            );
            assert_eq!(
                (r.delay, r.timed_out),
                (Duration::from_secs(delay), timed_out),
                "{amount} / {timeout} s"
            );
            assert_eq!(r.verbiage, if timed_out { "TIMEOUT" } else { "DELAYED" });
        }
        assert_eq!(
            SandboxProcessor::default().timeout(),
            Duration::from_millis(10_000)
        );
    }

    /// 3.2: AVS test values into avs and avs_enhanced.
    /// A row's street or zip: `-` = not sent.
    fn sent(value: &str) -> Option<String> {
        (value != "-").then(|| value.to_string())
    }

    #[test]
    fn avs_test_values() {
        // (street, zip, avs ("-" = none), avs_enhanced, declined)
        let rows: &[(&str, &str, &str, &str, bool)] = &[
            ("5800 NW 39th AVE", "32606", "GOOD", "Y", false),
            ("5800 nw 39th  ave", "32606", "GOOD", "Y", false),
            ("5800 NW 39th AVE", "32606-1234", "GOOD", "X", false),
            ("2831 NW 41st St STE J", "32615", "BAD", "N", true),
            ("5800 NW 39th AVE", "99999", "ZIP", "A", false),
            ("5800 NW 39th AVE", "-", "ZIP", "A", false),
            ("1 Main St", "32606", "STREET", "Z", false),
            ("-", "32606", "STREET", "Z", false),
            ("1 Main St", "326061234", "STREET", "W", false),
            ("1 Main St", "10001", "BAD", "N", false),
            ("2831 NW 41st St STE J", "32606", "STREET", "Z", false),
            ("2831 NW 41st St STE J", "-", "BAD", "N", false),
            ("-", "-", "-", "V", false),
            ("", " ", "-", "V", false),
        ];
        let sandbox = SandboxProcessor::default();
        for &(street, zip, avs, enhanced, declined) in rows {
            let mut req = sale(1000);
            req.card.billing_street = sent(street);
            req.card.billing_zip = sent(zip);
            let r = sandbox.authorize(&req).unwrap();
            assert_eq!(r.avs.map(|a| a.code()).unwrap_or("-"), avs, "{street:?} {zip:?}");
            assert_eq!(
                r.avs_enhanced.map(|a| a.code()),
                Some(enhanced),
                "{street:?} {zip:?}"
            );
            let expected = if declined { (301, 1655) } else { (101, 1000) };
            assert_eq!(
                (r.status_id.code(), r.reason_code_id.code()),
                expected,
                "{street:?} {zip:?}"
            );
        }
    }

    /// The auto-decline street and zip settings turn a failed check into a
    /// decline (1655); an absent value is not checked.
    #[test]
    fn avs_auto_decline() {
        // (street, zip, auto street, auto zip, declined)
        let rows: &[(&str, &str, bool, bool, bool)] = &[
            ("1 Main St", "32606", true, false, true),
            ("1 Main St", "32606", false, true, false),
            ("5800 NW 39th AVE", "10001", false, true, true),
            ("5800 NW 39th AVE", "10001", true, false, false),
            ("5800 NW 39th AVE", "32606", true, true, false),
            ("-", "-", true, true, false),
        ];
        let sandbox = SandboxProcessor::default();
        for &(street, zip, auto_street, auto_zip, declined) in rows {
            let mut req = sale(1000);
            req.card.billing_street = sent(street);
            req.card.billing_zip = sent(zip);
            req.options.auto_decline_street = auto_street;
            req.options.auto_decline_zip = auto_zip;
            let r = sandbox.authorize(&req).unwrap();
            let expected = if declined { (301, 1655) } else { (101, 1000) };
            assert_eq!(
                (r.status_id.code(), r.reason_code_id.code()),
                expected,
                "{street:?} {zip:?}"
            );
        }
    }

    /// 3.2: CVV test values into cvv_response; P, S, U and X decline only
    /// with auto_decline_cvv.
    #[test]
    fn cvv_test_values() {
        // (card, cvv, cvv_response, declined with auto_decline_cvv)
        let rows: &[(&str, Option<&str>, Option<&str>, bool)] = &[
            (VISA, Some("999"), Some("M"), false),
            (VISA, Some("123"), Some("N"), false),
            (VISA, Some("555"), Some("N"), false),
            (VISA, Some("124"), Some("P"), true),
            (VISA, Some("125"), Some("S"), true),
            (VISA, Some("126"), Some("U"), true),
            (VISA, Some("127"), Some("X"), true),
            (VISA, Some("1234"), Some("N"), false),
            (VISA, None, None, false),
            ("5454545454545454", Some("999"), Some("M"), false),
            ("5454545454545454", Some("127"), Some("X"), true),
            ("6011000995500000", Some("124"), Some("P"), true),
            ("6011000995500000", Some("777"), Some("N"), false),
            (AMEX, Some("1234"), Some("M"), false),
            (AMEX, Some("9999"), Some("N"), false),
            (AMEX, Some("4321"), Some("N"), false),
            (AMEX, Some("9998"), Some("P"), true),
            (AMEX, Some("9997"), Some("S"), true),
            (AMEX, Some("9996"), Some("U"), true),
            (AMEX, Some("9995"), Some("X"), true),
            (AMEX, Some("999"), Some("N"), false),
            (AMEX, Some("124"), Some("N"), false),
            (AMEX, None, None, false),
        ];
        let sandbox = SandboxProcessor::default();
        for &(pan, cvv, response, declines) in rows {
            for auto in [false, true] {
                let mut req = sale(1000);
                req.card = card(pan);
                req.card.cvv = cvv.map(String::from);
                req.options.auto_decline_cvv = auto;
                let r = sandbox.authorize(&req).unwrap();
                assert_eq!(r.cvv_response.map(|c| c.code()), response, "{pan} {cvv:?}");
                let expected = if auto && declines {
                    (301, 1656)
                } else {
                    (101, 1000)
                };
                assert_eq!(
                    (r.status_id.code(), r.reason_code_id.code()),
                    expected,
                    "{pan} {cvv:?} auto {auto}"
                );
            }
        }
    }

    /// 3.3: every test card is a valid number and approves.
    #[test]
    fn test_cards() {
        let rows = TEST_CARDS;
        let sandbox = SandboxProcessor::default();
        for &(pan, brand) in rows {
            assert!(crate::bins::brands::pan_ok(pan), "{pan}");
            assert_eq!(brand_of(pan), Some(brand), "{pan}");
            let mut req = sale(1234);
            req.card = card(pan);
            let r = sandbox.authorize(&req).unwrap();
            assert_eq!(
                (
                    r.status_id.code(),
                    r.reason_code_id.code(),
                    r.approved_amount.cents()
                ),
                (101, 1000, 1234),
                "{pan}"
            );
        }
    }

    /// 3.4: ACH debits and credits answer 131 Pending Origination with an
    /// `AUTH NUM` code and no AVS or CVV.
    #[test]
    fn ach_pending_flow() {
        // (routing, account number, status, reason)
        let rows: &[(&str, &str, u16, u16)] = &[
            ("072000326", "1234", 131, 1000),
            ("072000326", "12345678901234567", 131, 1000),
            ("021000021", "987654321", 131, 1000),
            ("072000326", "123", 301, 1608),
            ("072000326", "123456789012345678", 301, 1608),
            ("072000326", "12ab5678", 301, 1608),
            ("072000327", "123456789", 301, 1599),
            ("12345678", "123456789", 301, 1599),
        ];
        let sandbox = SandboxProcessor::default();
        for &(routing, number, status, reason) in rows {
            let req = AchRequest {
                gateway_id: "t1".into(),
                amount: Money::from_cents(1500),
                account: ach_account(routing, number),
                replaces: None,
            };
            for r in [
                sandbox.ach_debit(&req).unwrap(),
                sandbox.ach_credit(&req).unwrap(),
            ] {
                assert_eq!(
                    (r.status_id.code(), r.reason_code_id.code()),
                    (status, reason),
                    "{routing} {number}"
                );
                assert_eq!((r.avs, r.avs_enhanced, r.cvv_response), (None, None, None));
                if status == 131 {
                    let code = r.auth_code.unwrap();
                    assert!(code.starts_with("AUTH NUM ") && code.len() == 16, "{code}");
                    assert_eq!(r.approved_amount.cents(), 1500);
                }
            }
        }
    }

    /// $6.63 holds a TEL, POP or C21 debit for a manager (1663); other SEC
    /// codes and amounts are not held; the override answers 131.
    #[test]
    fn manager_needed_and_override() {
        let sandbox = SandboxProcessor::default();
        for (sec, amount, held) in [
            ("TEL", 663, true),
            ("POP", 663, true),
            ("C21", 663, true),
            ("WEB", 663, false),
            ("CCD", 663, false),
            ("POP", 664, false),
        ] {
            let mut account = ach_account("072000326", "123456789");
            account.sec_code = sec.into();
            let r = sandbox
                .ach_debit(&AchRequest {
                    gateway_id: "t1".into(),
                    amount: Money::from_cents(amount),
                    account,
                    replaces: None,
                })
                .unwrap();
            let expected = if held { (301, 1663) } else { (131, 1000) };
            assert_eq!(
                (r.status_id.code(), r.reason_code_id.code()),
                expected,
                "{sec} {amount}"
            );
        }
        let r = sandbox
            .ach_override(&OverrideRequest {
                original: original(PaymentMethod::Ach),
                amount: Money::from_cents(663),
            })
            .unwrap();
        assert_eq!((r.status_id.code(), r.reason_code_id.code()), (131, 1000));
        assert!(r.auth_code.unwrap().starts_with("AUTH NUM "));
    }

    /// 1.1: the outcome of every action on the sandbox.
    #[test]
    fn action_outcomes() {
        let sandbox = SandboxProcessor::default();
        let cc = original(PaymentMethod::Cc);
        let ach = original(PaymentMethod::Ach);
        let mut authonly = sale(1000);
        authonly.capture = false;
        // (action, result, status_id, reason_code_id, approved amount)
        let rows: Vec<(&str, ProcessorResponse, u16, u16, i64)> = vec![
            ("sale", sandbox.authorize(&sale(1000)).unwrap(), 101, 1000, 1000),
            ("authonly", sandbox.authorize(&authonly).unwrap(), 102, 1000, 1000),
            (
                "avsonly",
                sandbox.avs_only(&AvsOnlyRequest { card: card(VISA) }).unwrap(),
                121,
                1000,
                0,
            ),
            (
                "force",
                sandbox
                    .force(&ForceRequest {
                        gateway_id: "t1".into(),
                        amount: Money::from_cents(1000),
                        card: card(VISA),
                        auth_code: "ABC123".into(),
                    })
                    .unwrap(),
                101,
                1002,
                1000,
            ),
            (
                "refund cc",
                sandbox
                    .refund(&RefundRequest {
                        gateway_id: "t1".into(),
                        original: cc.clone(),
                        amount: Money::from_cents(400),
                    })
                    .unwrap(),
                111,
                1000,
                400,
            ),
            (
                "refund ach",
                sandbox
                    .refund(&RefundRequest {
                        gateway_id: "t1".into(),
                        original: ach.clone(),
                        amount: Money::from_cents(400),
                    })
                    .unwrap(),
                131,
                1000,
                400,
            ),
            (
                "credit cc",
                sandbox
                    .credit(&CreditRequest {
                        gateway_id: "t1".into(),
                        amount: Money::from_cents(300),
                        card: card(VISA),
                    })
                    .unwrap(),
                111,
                1000,
                300,
            ),
            (
                "authcomplete",
                sandbox
                    .capture(&CaptureRequest {
                        original: cc.clone(),
                        authorized_amount: Money::from_cents(1000),
                        amount: Money::from_cents(800),
                    })
                    .unwrap(),
                101,
                1001,
                800,
            ),
            (
                "authincrement",
                sandbox
                    .increment(&IncrementRequest {
                        original: cc.clone(),
                        authorized_amount: Money::from_cents(1000),
                        amount: Money::from_cents(700),
                    })
                    .unwrap(),
                102,
                1000,
                700,
            ),
            (
                "authincrement declined",
                sandbox
                    .increment(&IncrementRequest {
                        original: cc.clone(),
                        authorized_amount: Money::from_cents(1000),
                        amount: Money::from_cents(616),
                    })
                    .unwrap(),
                301,
                1661,
                0,
            ),
            (
                "void cc",
                sandbox.void(&VoidRequest { original: cc.clone() }).unwrap(),
                201,
                1200,
                0,
            ),
            (
                "void ach",
                sandbox.void(&VoidRequest { original: ach }).unwrap(),
                201,
                1200,
                0,
            ),
            (
                "partialreversal sale",
                sandbox
                    .partial_reversal(&PartialReversalRequest {
                        original: cc.clone(),
                        original_amount: Money::from_cents(1000),
                        new_amount: Money::from_cents(600),
                        captured: true,
                    })
                    .unwrap(),
                101,
                1000,
                600,
            ),
            (
                "partialreversal authonly",
                sandbox
                    .partial_reversal(&PartialReversalRequest {
                        original: cc.clone(),
                        original_amount: Money::from_cents(1000),
                        new_amount: Money::from_cents(600),
                        captured: false,
                    })
                    .unwrap(),
                102,
                1000,
                600,
            ),
        ];
        for (action, r, status, reason, approved) in rows {
            assert_eq!(
                (
                    r.status_id.code(),
                    r.reason_code_id.code(),
                    r.approved_amount.cents()
                ),
                (status, reason, approved),
                "{action}"
            );
        }
        let forced = sandbox
            .force(&ForceRequest {
                gateway_id: "t1".into(),
                amount: Money::from_cents(1000),
                card: card(VISA),
                auth_code: "ABC123".into(),
            })
            .unwrap();
        assert_eq!(forced.auth_code.as_deref(), Some("ABC123"));
        let completed = sandbox
            .capture(&CaptureRequest {
                original: cc.clone(),
                authorized_amount: Money::from_cents(1000),
                amount: Money::from_cents(1000),
            })
            .unwrap();
        assert_eq!(completed.auth_code.as_deref(), Some("a1b2c3"));
        // avsonly answers avs and cvv_response.
        let mut avs_card = card(VISA);
        avs_card.billing_street = Some(AVS_PASS_STREET.into());
        avs_card.billing_zip = Some(AVS_PASS_ZIP.into());
        avs_card.cvv = Some("999".into());
        let r = sandbox.avs_only(&AvsOnlyRequest { card: avs_card }).unwrap();
        assert_eq!(
            (r.avs, r.avs_enhanced, r.cvv_response),
            (Some(Avs::Good), Some(AvsEnhanced::Y), Some(CvvResponse::Match))
        );
        // References are unique.
        let a = sandbox.authorize(&sale(1000)).unwrap().processor_reference;
        let b = sandbox.authorize(&sale(1000)).unwrap().processor_reference;
        assert_ne!(a, b);
    }

    /// Requests the gateway should never send are errors, not declines.
    #[test]
    fn invalid_requests() {
        let sandbox = SandboxProcessor::default();
        let cc = original(PaymentMethod::Cc);
        let errors = [
            sandbox.authorize(&sale(0)).unwrap_err(),
            sandbox.authorize(&sale(-100)).unwrap_err(),
            sandbox
                .authorize(&AuthorizeRequest {
                    gateway_id: "t1".into(),
                    card: card("4111-1111"),
                    ..sale(1000)
                })
                .unwrap_err(),
            sandbox
                .capture(&CaptureRequest {
                    original: cc.clone(),
                    authorized_amount: Money::from_cents(1000),
                    amount: Money::from_cents(1001),
                })
                .unwrap_err(),
            sandbox
                .partial_reversal(&PartialReversalRequest {
                    original: cc.clone(),
                    original_amount: Money::from_cents(1000),
                    new_amount: Money::from_cents(1000),
                    captured: true,
                })
                .unwrap_err(),
            sandbox
                .force(&ForceRequest {
                    gateway_id: "t1".into(),
                    amount: Money::from_cents(1000),
                    card: card(VISA),
                    auth_code: "ABC12".into(),
                })
                .unwrap_err(),
            sandbox
                .refund(&RefundRequest {
                    gateway_id: "t1".into(),
                    original: cc,
                    amount: Money::from_cents(0),
                })
                .unwrap_err(),
        ];
        for e in errors {
            assert!(matches!(e, ProcessorError::Invalid(_)), "{e}");
        }
    }

    /// 3.6 through the trait: the settle decision and the file name.
    #[test]
    fn settle_through_the_trait() {
        let sandbox = SandboxProcessor::default();
        let settle = |amounts: Vec<i64>, attempt| {
            sandbox
                .settle(&SettleRequest {
                    batch_id: "b1".into(),
                    amounts,
                    attempt,
                })
                .unwrap()
        };
        let ok = settle(vec![1000], 1);
        assert_eq!(ok.outcome, SettleOutcome::Settled);
        assert_eq!(ok.settlement_file_name.as_deref(), Some("sandbox-b1-1.csv"));
        let failed = settle(vec![1000, 9_050_424], 1);
        assert_eq!(
            failed.outcome,
            SettleOutcome::Failed {
                status_message: "Settlement Amount is invalid.".into(),
                reason_code_id: None
            }
        );
        assert_eq!(failed.settlement_file_name, None);
        assert!(matches!(
            settle(vec![630, 1000], 1).outcome,
            SettleOutcome::Failed { .. }
        ));
        assert_eq!(settle(vec![630, 1000], 2).outcome, SettleOutcome::Settled);
    }

    /// 1.6: the sandbox ACH status simulator's flow and charge-back reason.
    #[test]
    fn ach_status_flow_and_charge_back_reason() {
        use StatusId::*;
        // (from, to, allowed)
        let rows: &[(StatusId, StatusId, bool)] = &[
            (PendingOrigination, Originated, true),
            (Originating, Originated, true),
            (Originated, AchSettled, true),
            (PendingOrigination, AchSettled, false),
            (PendingOrigination, Originating, false),
            (AchSettled, Originated, false),
            (PendingOrigination, Declined, true),
            (Originating, Voided, true),
            (Originated, ChargedBack, true),
            (AchSettled, ChargedBack, true),
            (Declined, Originated, false),
            (Voided, ChargedBack, false),
            (ChargedBack, Declined, false),
            (Approved, Voided, false),
        ];
        for &(from, to, allowed) in rows {
            assert_eq!(ach_status_change_allowed(from, to), allowed, "{from:?} -> {to:?}");
        }
        // (amount, reason)
        let reasons: &[(i64, u16)] = &[
            (1022, 2122),
            (1001, 2101),
            (583, 2183),
            (1047, 2147),
            (1050, 2150),
            (1048, 2101),
            (1000, 2101),
            (1099, 2101),
        ];
        for &(amount, reason) in reasons {
            assert_eq!(ach_chargeback_reason(amount), ReasonCode(reason), "{amount}");
        }
    }
}
