//! Authorize.Net's result codes, and the one table that maps our
//! `reason_code_id` (reference 2.2) to them. The README's emulator section
//! and ADR 0016 show the same table.

/// `responseCode`: 1 approved, 2 declined, 3 error, 4 held for review.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponseCode {
    Approved = 1,
    Declined = 2,
    Error = 3,
    Held = 4,
}

impl ResponseCode {
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// A response reason: their numeric reason code and its text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reason {
    pub response: ResponseCode,
    pub code: u16,
    pub text: &'static str,
}

const fn reason(response: ResponseCode, code: u16, text: &'static str) -> Reason {
    Reason { response, code, text }
}

pub const APPROVED: Reason = reason(ResponseCode::Approved, 1, "This transaction has been approved.");
pub const DECLINED: Reason = reason(ResponseCode::Declined, 2, "This transaction has been declined.");
pub const REFERRAL: Reason = reason(ResponseCode::Declined, 3, "This transaction has been declined.");
pub const PICK_UP: Reason = reason(ResponseCode::Declined, 4, "This transaction has been declined.");
pub const BAD_AMOUNT: Reason = reason(ResponseCode::Error, 5, "A valid amount is required.");
pub const BAD_CARD: Reason = reason(ResponseCode::Error, 6, "The credit card number is invalid.");
pub const BAD_EXPIRY: Reason = reason(ResponseCode::Error, 7, "Credit card expiration date is invalid.");
pub const EXPIRED: Reason = reason(ResponseCode::Error, 8, "The credit card has expired.");
pub const DUPLICATE: Reason = reason(
    ResponseCode::Error,
    11,
    "A duplicate transaction has been submitted.",
);
/// What a request in test mode answers: approved, and nothing charged.
pub const TEST_MODE: Reason = reason(
    ResponseCode::Approved,
    1,
    "(TESTMODE) This transaction has been approved.",
);
pub const NO_AUTH_CODE: Reason = reason(
    ResponseCode::Error,
    12,
    "An authorization code is required but not present.",
);
pub const BAD_LOGIN: Reason = reason(
    ResponseCode::Error,
    13,
    "The merchant login ID or password is invalid or the account is inactive.",
);
pub const NO_PERMISSION: Reason = reason(
    ResponseCode::Error,
    123,
    "This account has not been given the permission(s) required for this request.",
);
pub const BAD_TRANS_ID: Reason = reason(
    ResponseCode::Error,
    15,
    "The transaction ID is invalid or not present.",
);
pub const NOT_FOUND: Reason = reason(ResponseCode::Error, 16, "The transaction cannot be found.");
/// An unknown `transactionType` (or AIM `x_type`).
pub const BAD_TYPE: Reason = reason(ResponseCode::Error, 69, "The transaction type is invalid.");
pub const NO_ACH: Reason = reason(
    ResponseCode::Error,
    18,
    "ACH transactions are not accepted by this merchant.",
);
pub const TRY_AGAIN: Reason = reason(
    ResponseCode::Error,
    19,
    "An error occurred during processing. Please try again.",
);
pub const AVS_MISMATCH: Reason = reason(
    ResponseCode::Declined,
    27,
    "The transaction has been declined because of an AVS mismatch with the address provided.",
);
pub const CALL_PROVIDER: Reason = reason(
    ResponseCode::Error,
    35,
    "An error occurred during processing. Call Merchant Service Provider.",
);
pub const CVV_MISMATCH: Reason = reason(ResponseCode::Declined, 44, "This transaction has been declined.");
pub const OVER_AUTHORIZED: Reason = reason(
    ResponseCode::Error,
    47,
    "The amount requested for settlement cannot be greater than the original amount authorized.",
);
pub const NO_CREDIT: Reason = reason(
    ResponseCode::Error,
    54,
    "The referenced transaction does not meet the criteria for issuing a credit.",
);
pub const OVER_CREDITED: Reason = reason(
    ResponseCode::Error,
    55,
    "The sum of credits against the referenced transaction would exceed original debit amount.",
);
pub const BAD_CVV: Reason = reason(
    ResponseCode::Error,
    78,
    "The Card Code (CVV2/CVC2/CID) is invalid.",
);
pub const HELD: Reason = reason(
    ResponseCode::Held,
    253,
    "Your order has been received. Thank you for your business!",
);
/// A partial approval (our 1201): held, so the cart asks for another
/// payment for the balance.
pub const PARTIALLY_APPROVED: Reason = reason(
    ResponseCode::Held,
    295,
    "The amount of this request was only partially approved on the given prepaid card. \
     An additional payment is required to fulfill the balance of this transaction.",
);
/// A void of a voided transaction and a capture of a captured one are
/// successes to Authorize.Net (responseCode 1), with their own reason so
/// clients can tell nothing new happened.
pub const ALREADY_VOIDED: Reason = reason(
    ResponseCode::Approved,
    310,
    "This transaction has already been voided.",
);
pub const ALREADY_CAPTURED: Reason = reason(
    ResponseCode::Approved,
    311,
    "This transaction has already been captured.",
);

/// Our `reason_code_id` as Authorize.Net's response. The table:
///
/// | our reason_code_id | their responseCode / reason |
/// |---|---|
/// | 1000, 1001, 1002, 1200 | 1 / 1 approved |
/// | 1201 | 4 / 295 partially approved |
/// | 1663 | 4 / 253 held for review |
/// | 1510, 1602 | 2 / 3 referral |
/// | 1520, 1604-1607 | 2 / 4 pick up card |
/// | 1608 | 3 / 6 card number invalid |
/// | 1614 | 3 / 7 expiration date invalid |
/// | 1622 | 3 / 8 card expired |
/// | 1613, 1656, 1800 | 2 / 44 card code mismatch |
/// | 1655 | 2 / 27 AVS mismatch |
/// | 1530, 1531, 1603, 1621, 1627, 1004, 1005 | 3 / 19 error, try again |
/// | 1540, 1628 | 3 / 35 error, call the provider |
/// | any other (1003, 1500, 1599, 1601, 1615-1620, 1631, ...) | 2 / 2 declined |
pub fn of_reason(reason_code_id: i64) -> Reason {
    match reason_code_id {
        1000 | 1001 | 1002 | 1200 => APPROVED,
        1201 => PARTIALLY_APPROVED,
        1663 => HELD,
        1510 | 1602 => REFERRAL,
        1520 | 1604..=1607 => PICK_UP,
        1608 => BAD_CARD,
        1614 => BAD_EXPIRY,
        1622 => EXPIRED,
        1613 | 1656 | 1800 => CVV_MISMATCH,
        1655 => AVS_MISMATCH,
        1530 | 1531 | 1603 | 1621 | 1627 | 1004 | 1005 => TRY_AGAIN,
        1540 | 1628 => CALL_PROVIDER,
        _ => DECLINED,
    }
}

/// Our `avs_enhanced` letter as their `avsResultCode`. Letters both use
/// mean the same; ours that they lack map to the nearest they have. No
/// address sent (our V) is their B; no AVS at all (voids, refunds,
/// captures) their P.
pub fn avs(avs_enhanced: Option<&str>) -> &'static str {
    match avs_enhanced.unwrap_or_default() {
        "A" => "A",
        "B" => "B",
        "E" => "E",
        "G" | "C" | "I" => "G",
        "N" | "T" => "N",
        "R" => "R",
        "S" => "S",
        "U" => "U",
        "W" => "W",
        "X" => "X",
        "Y" | "M" | "F" | "D" | "Q" | "O" => "Y",
        "Z" | "P" | "J" | "L" => "Z",
        "H" | "K" => "A",
        "V" => "B",
        _ => "P",
    }
}

/// Our `cvv_response` as their `cvvResultCode` (no X there: U).
pub fn cvv(cvv_response: Option<&str>) -> &'static str {
    match cvv_response.unwrap_or_default() {
        "M" => "M",
        "N" => "N",
        "P" => "P",
        "S" => "S",
        "U" | "X" => "U",
        _ => "",
    }
}

/// Our card brand as their `accountType`.
pub fn card_type(account_type: Option<&str>) -> &'static str {
    match account_type.unwrap_or_default() {
        "visa" => "Visa",
        "mc" => "MasterCard",
        "amex" => "AmericanExpress",
        "disc" => "Discover",
        "jcb" => "JCB",
        "diners" => "DinersClub",
        _ => "",
    }
}

/// The top-level messages (`messages.message.code`).
pub mod api {
    pub const OK: (&str, &str) = ("I00001", "Successful.");
    pub const UNREADABLE: &str = "E00003";
    pub const UNKNOWN_METHOD: (&str, &str) = ("E00004", "The name of the requested API method is invalid.");
    pub const BAD_AUTH: (&str, &str) = (
        "E00007",
        "User authentication failed due to invalid authentication values.",
    );
    /// No records match a list request: a success.
    pub const NO_RECORDS: (&str, &str) = ("I00004", "No records found.");
    pub const DENIED: (&str, &str) = (
        "E00011",
        "Access denied. You do not have the appropriate permissions.",
    );
    /// Their E00011 for the Transaction Details API (details, lists,
    /// batches) when the account may not use it: ours, a caller who may
    /// not read transactions or batches.
    pub const NO_REPORTING: (&str, &str) = (
        "E00011",
        "Access denied. You do not have permissions to call the Transaction Details API.",
    );
    /// A new subscription identical to a running one (ARB's duplicate
    /// check).
    pub const DUPLICATE_SUBSCRIPTION: (&str, &str) = ("E00012", "A duplicate subscription already exists.");
    pub const INVALID_FIELD: &str = "E00013";
    pub const MISSING_FIELD: &str = "E00014";
    pub const START_IN_PAST: (&str, &str) =
        ("E00017", "Start Date must not occur before the submission date.");
    pub const CARD_EXPIRES_FIRST: (&str, &str) = (
        "E00018",
        "Credit Card expires before the start of the subscription.",
    );
    pub const BAD_INTERVAL: (&str, &str) = (
        "E00022",
        "The interval length must be 7 to 365 days or 1 to 12 months.",
    );
    pub const FAILED: (&str, &str) = ("E00027", "The transaction was unsuccessful.");
    /// A subscription's interval is fixed once created.
    pub const INTERVAL_FIXED: (&str, &str) = ("E00034", "The interval information cannot be changed.");
    pub const NO_SUBSCRIPTION: (&str, &str) = ("E00035", "The subscription cannot be found.");
    pub const CANCELED: (&str, &str) = ("E00037", "Subscriptions that are canceled cannot be updated.");
    /// Canceling a subscription that already ended (canceled or expired).
    pub const ALREADY_CANCELED: (&str, &str) = ("E00038", "The subscription has already been canceled.");
    pub const NO_RECORD: (&str, &str) = ("E00040", "The record cannot be found.");
    /// An account without customer profiles: every CIM method, and a
    /// payment or subscription by customer profile.
    pub const NO_CIM: (&str, &str) = ("E00044", "Customer Information Manager is not enabled.");
    pub const INTERNAL: (&str, &str) = ("E00001", "An error occurred during processing. Please try again.");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_triggers_map_to_their_codes() {
        assert_eq!(of_reason(1000), APPROVED);
        // Amount 5.00 declines with our 1500: their 2 / 2.
        assert_eq!(of_reason(1500).response, ResponseCode::Declined);
        assert_eq!(of_reason(1500).code, 2);
        assert_eq!(of_reason(1622), EXPIRED);
        assert_eq!(of_reason(1663).response.code(), 4);
        // $2.01 approved for $1.00: their 4 / 295.
        assert_eq!((of_reason(1201).response.code(), of_reason(1201).code), (4, 295));
        assert_eq!(avs(Some("V")), "B");
        assert_eq!(avs(None), "P");
        assert_eq!(cvv(Some("X")), "U");
        assert_eq!(cvv(None), "");
    }
}
