//! The reference's value tables (section 2) as Rust types with their
//! numeric codes and texts: `status_id`, `type_id`, `reason_code_id`,
//! `entry_mode_id`, `cvv_response`, `avs` / `avs_enhanced`,
//! `trx_source_id` and the batches' `processing_status_id`.

/// A transaction's `status_id` (2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatusId {
    Approved = 101,
    AuthOnly = 102,
    Refunded = 111,
    AvsOnly = 121,
    PendingOrigination = 131,
    Originating = 132,
    Originated = 133,
    AchSettled = 134,
    Reserved = 135,
    Rejected = 136,
    /// Deprecated.
    Settled = 191,
    Voided = 201,
    Declined = 301,
    ChargedBack = 331,
}

impl StatusId {
    pub const ALL: [StatusId; 14] = [
        StatusId::Approved,
        StatusId::AuthOnly,
        StatusId::Refunded,
        StatusId::AvsOnly,
        StatusId::PendingOrigination,
        StatusId::Originating,
        StatusId::Originated,
        StatusId::AchSettled,
        StatusId::Reserved,
        StatusId::Rejected,
        StatusId::Settled,
        StatusId::Voided,
        StatusId::Declined,
        StatusId::ChargedBack,
    ];

    pub fn code(self) -> u16 {
        self as u16
    }

    pub fn from_code(code: u16) -> Option<StatusId> {
        StatusId::ALL.into_iter().find(|s| s.code() == code)
    }

    /// The reference's meaning.
    pub fn label(self) -> &'static str {
        match self {
            StatusId::Approved => "Approved",
            StatusId::AuthOnly => "AuthOnly",
            StatusId::Refunded => "Refunded",
            StatusId::AvsOnly => "AvsOnly",
            StatusId::PendingOrigination => "Pending Origination",
            StatusId::Originating => "Originating",
            StatusId::Originated => "Originated",
            StatusId::AchSettled | StatusId::Settled => "Settled",
            StatusId::Reserved => "Reserved",
            StatusId::Rejected => "Rejected",
            StatusId::Voided => "Voided",
            StatusId::Declined => "Declined",
            StatusId::ChargedBack => "Charged Back",
        }
    }

    /// Whether the outcome approved (or accepted, for ACH) the request:
    /// everything but 201 voided, 301 declined, 136 rejected and 331
    /// charged back.
    pub fn is_approved(self) -> bool {
        !matches!(
            self,
            StatusId::Voided | StatusId::Declined | StatusId::Rejected | StatusId::ChargedBack
        )
    }
}

/// A transaction's `type_id` (2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TypeId {
    /// Sale; also kept by authonly, authcomplete, void and partialreversal.
    Sale = 20,
    AvsOnly = 21,
    /// Deprecated.
    Settle = 22,
    Refund = 30,
    Credit = 40,
    Debit = 50,
}

impl TypeId {
    pub const ALL: [TypeId; 6] = [
        TypeId::Sale,
        TypeId::AvsOnly,
        TypeId::Settle,
        TypeId::Refund,
        TypeId::Credit,
        TypeId::Debit,
    ];

    pub fn code(self) -> u16 {
        self as u16
    }

    pub fn from_code(code: u16) -> Option<TypeId> {
        TypeId::ALL.into_iter().find(|t| t.code() == code)
    }

    pub fn label(self) -> &'static str {
        match self {
            TypeId::Sale => "Sale",
            TypeId::AvsOnly => "AVS Only",
            TypeId::Settle => "Settle",
            TypeId::Refund => "Refund",
            TypeId::Credit => "Credit",
            TypeId::Debit => "Debit",
        }
    }
}

/// A `reason_code_id` (2.2): 1000-1201 approved or neutral, 15xx-18xx
/// declines and errors, 2xxx ACH and Check 21 returns and notifications of
/// change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReasonCode(pub u16);

impl ReasonCode {
    pub const APPROVED: ReasonCode = ReasonCode(1000);
    pub const AUTH_COMPLETED: ReasonCode = ReasonCode(1001);
    pub const FORCED: ReasonCode = ReasonCode(1002);
    pub const AUTH_ONLY_DECLINED: ReasonCode = ReasonCode(1003);
    pub const VOIDED: ReasonCode = ReasonCode(1200);
    pub const PARTIAL_APPROVAL: ReasonCode = ReasonCode(1201);
    pub const DO_NOT_HONOR_GENERAL: ReasonCode = ReasonCode(1500);
    pub const INVALID_AMOUNT_OR_ABA: ReasonCode = ReasonCode(1599);
    pub const GENERIC_DECLINE: ReasonCode = ReasonCode(1601);
    pub const INVALID_CARD_NUMBER: ReasonCode = ReasonCode(1608);
    pub const EXPIRED_CARD: ReasonCode = ReasonCode(1622);
    pub const DUPLICATE_BATCH: ReasonCode = ReasonCode(1629);
    pub const BATCH_REJECTED: ReasonCode = ReasonCode(1630);
    pub const ACH_THROTTLE: ReasonCode = ReasonCode(1651);
    pub const AVS_AUTO_REVERSAL: ReasonCode = ReasonCode(1655);
    pub const CVV_AUTO_REVERSAL: ReasonCode = ReasonCode(1656);
    pub const PARTIAL_AUTH_AUTO_REVERSAL: ReasonCode = ReasonCode(1657);
    pub const PARTIAL_APPROVAL_NOT_SUPPORTED: ReasonCode = ReasonCode(1659);
    pub const DECLINED_AUTH_INCREMENT: ReasonCode = ReasonCode(1661);
    pub const MANAGER_NEEDED: ReasonCode = ReasonCode(1663);
    pub const NO_TRANSACTIONS_IN_BATCH: ReasonCode = ReasonCode(1804);
    pub const BATCH_DOES_NOT_EXIST: ReasonCode = ReasonCode(1805);

    pub fn code(self) -> u16 {
        self.0
    }

    /// Whether the reference knows this code (the table, the present ACH
    /// returns R01-R47, R50-R53, R61-R74, R80-R83, the notifications of
    /// change C01-C13 and C61-C69, and the Check 21 returns).
    pub fn is_known(self) -> bool {
        self.labels().is_some() || self.ach_return().is_some() || self.notification_of_change().is_some()
    }

    /// Every label the reference joins under this code, as it writes them
    /// (`Refer to issuer; Refer to issuer-Special condition`); for ACH and
    /// Check 21 returns the return code and its name where the reference
    /// gives one.
    pub fn labels(self) -> Option<&'static str> {
        REASON_CODES
            .iter()
            .find(|(code, _)| *code == self.0)
            .map(|(_, label)| *label)
            .or_else(|| {
                CHECK21_RETURNS
                    .iter()
                    .find(|(code, _, _)| *code == self.0)
                    .map(|(_, _, label)| *label)
            })
            .or_else(|| {
                ACH_RETURN_NAMES
                    .iter()
                    .find(|(n, _)| 2100 + *n as u16 == self.0)
                    .map(|(_, label)| *label)
            })
    }

    /// The first label: the text to show (`Refer to issuer`). For a code
    /// without a known label, "Unknown".
    pub fn label(self) -> &'static str {
        self.labels()
            .map(|l| l.split("; ").next().unwrap_or(l))
            .unwrap_or("Unknown")
    }

    /// For an ACH return code (2101-2183 present in the reference), the
    /// return number: 2122 -> 22 (R22).
    pub fn ach_return(self) -> Option<u8> {
        let n = self.0.checked_sub(2100)?;
        (n <= 83 && ach_return_present(n as u8)).then_some(n as u8)
    }

    /// `Rejected-R22`: the verbiage of an ACH return.
    pub fn ach_return_verbiage(self) -> Option<String> {
        self.ach_return().map(|n| format!("Rejected-R{n:02}"))
    }

    /// For a notification of change (2201-2213, 2261-2269), `C01`...`C69`.
    pub fn notification_of_change(self) -> Option<String> {
        let n = self.0.checked_sub(2200)?;
        ((1..=13).contains(&n) || (61..=69).contains(&n)).then(|| format!("C{n:02}"))
    }

    /// The reason code of ACH return `Rnn`, if the reference has it.
    pub fn for_ach_return(n: u8) -> Option<ReasonCode> {
        ach_return_present(n).then_some(ReasonCode(2100 + n as u16))
    }
}

/// R01-R47, R50-R53, R61-R74, R80-R83 (no R48-R49, R54-R60, R75-R79).
fn ach_return_present(n: u8) -> bool {
    matches!(n, 1..=47 | 50..=53 | 61..=74 | 80..=83)
}

/// The standard names of the ACH returns the reference spells out.
const ACH_RETURN_NAMES: &[(u8, &str)] = &[
    (1, "Insufficient funds"),
    (2, "Account closed"),
    (3, "No account"),
    (4, "Invalid account number"),
    (7, "Authorization revoked"),
    (8, "Payment stopped"),
    (10, "Customer advises not authorized"),
    (16, "Account frozen"),
    (29, "Corporate customer advises not authorized"),
];

/// ACH returns that have an alternate E-code: R02/E02 ... R29/E29.
pub const ACH_RETURN_E_CODES: [u8; 11] = [2, 3, 4, 5, 7, 8, 10, 14, 15, 16, 29];

/// Check 21 returns: (reason code, return code with its E-code, label).
pub const CHECK21_RETURNS: &[(u16, &str, &str)] = &[
    (2301, "X01", "Misc Check 21 Return"),
    (2304, "X04", "Invalid Image"),
    (2305, "X05 (E95)", "Breach of Warranty"),
    (2306, "X06 (E96)", "Counterfeit / Forgery"),
    (2307, "X07 (E97)", "Refer to Maker"),
    (2308, "X08", "Maximum Payment Attempts"),
    (2309, "X09", "Item Cannot be Re-presented"),
    (2310, "X10", "Not Our Item"),
    (2321, "X21", "Pay None"),
    (2322, "X22", "Pay All"),
    (2323, "X23 (E93)", "Non-Negotiable"),
    (2329, "X29", "Stale Dated"),
    (2345, "X45", "Misc Return"),
    (2371, "X71", "RCK - 2nd Time"),
    (2372, "X72", "RCK Reject - ACH"),
    (2373, "X73", "RCK Reject - Payer"),
];

/// The reason codes 1000-1805 with their labels, verbatim.
pub const REASON_CODES: &[(u16, &str)] = &[
    (1000, "Approved and complete; No reason to decline; ACH - Accepted; First check OK and has been converted"),
    (1001, "AuthCompleted"),
    (1002, "Forced"),
    (1003, "AuthOnly Declined"),
    (1004, "Validation Failure (System Run Trx)"),
    (1005, "Processor Response Invalid"),
    (1200, "Voided"),
    (1201, "Partial Approval"),
    (1500, "Do not honor; General Error; Insufficient funds; Exceeds withdrawal limit; Invalid service code restricted; Activity limit exceeded; Violation, cannot complete; Exceeds issuer withdrawal limit"),
    (1510, "Refer to issuer; Refer to issuer-Special condition"),
    (1518, "Transaction not permitted - Terminal"),
    (1520, "Pick up card (no fraud); Pick up card, special condition (fraud account); Lost card, pick up (fraud account); Stolen card, pick up (fraud account)"),
    (1530, "Re-enter transaction"),
    (1531, "Communication Error"),
    (1540, "Setup Issue, contact Support"),
    (1541, "Device is not signature capable"),
    (1588, "Data could not be de-tokenized"),
    (1599, "Invalid amount; No such issuer; Unable to back out transaction; No checking account; No savings account; Hierarchy Verification Error; Check is OK but cannot be converted. This is a declined transaction; Invalid ABA number, not an ACH participant"),
    (1601, "Generic Decline"),
    (1602, "Call"),
    (1603, "File is temporarily unavailable; Issuer or switch is unavailable"),
    (1604, "Pickup Card - No Fraud"),
    (1605, "Pickup Card - Fraud"),
    (1606, "Pickup Card - Lost"),
    (1607, "Pickup Card - Stolen"),
    (1608, "Invalid card number; No credit account; No account; Verification error; MICR Error"),
    (1609, "Already reversed at switch"),
    (1610, "Incorrect PIN"),
    (1611, "Cashback Exceeded"),
    (1612, "Cashback Not Available"),
    (1613, "CID Error"),
    (1614, "Date Error"),
    (1615, "Do Not Honor"),
    (1616, "NSF"),
    (1617, "Exceeded Withdrawal Limit"),
    (1618, "Transaction not permitted - Card"),
    (1619, "Amount greater than limit"),
    (1620, "Unpaid items, failed negative file check"),
    (1621, "Cryptographic error; Cannot verify PIN"),
    (1622, "Expired card"),
    (1623, "Renter"),
    (1624, "PIN tries exceeded"),
    (1625, "Card Type Verification Error"),
    (1626, "Invalid transaction; Unable to location, no match; Inconsistent data, rev., or repeat; Invalid date; Cash back service not available"),
    (1627, "System malfunction"),
    (1628, "Invalid Merchant ID; Destination not found"),
    (1629, "Duplicate Batch (Already Closed)"),
    (1630, "Batch Rejected"),
    (1631, "Account Closed"),
    (1650, "Contact Support"),
    (1651, "Max Sending - Throttle Limit Hit (ACH only)"),
    (1652, "Max Attempts Exceeded"),
    (1653, "Contact Support"),
    (1654, "Voided - Online Reversal Failed"),
    (1655, "Decline (AVS Auto Reversal)"),
    (1656, "Decline (CVV Auto Reversal)"),
    (1657, "Decline (Partial Auth Auto Reversal)"),
    (1658, "Expired Authorization"),
    (1659, "Declined - Partial Approval not Supported"),
    (1660, "Bank Account Error, please delete and re-add Account Vault"),
    (1661, "Declined AuthIncrement"),
    (1662, "Auto Reversal - Processor can't settle"),
    (1663, "Manager Needed (Needs override transaction)"),
    (1664, "Account Vault Not Found: Sharing Group Unavailable"),
    (1665, "Contact Not Found: Sharing Group Unavailable"),
    (1701, "Chip Reject"),
    (1800, "Cash back limit exceeded; CVV2 Value supplied is invalid"),
    (1801, "Unable to locate, no match; Duplicate check number"),
    (1802, "MID/TID Not Registered"),
    (1803, "Customer requested stop of specific recurring payment; Customer requested stop of all recurring payments from specific merchant"),
    (1804, "No Transactions in Batch"),
    (1805, "Batch Does Not Exist"),
];

/// Defines a fieldless enum with a code and a label per variant, `ALL`,
/// `code()`, `from_code()` and `label()`.
macro_rules! code_enum {
    ($(#[$meta:meta])* $name:ident : $ty:ty { $($(#[$vmeta:meta])* $variant:ident = $code:expr, $label:expr;)+ }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The value as the API carries it.
            pub fn code(self) -> $ty {
                match self {
                    $($name::$variant => $code,)+
                }
            }

            pub fn from_code(code: $ty) -> Option<$name> {
                $name::ALL.iter().copied().find(|v| v.code() == code)
            }

            /// The reference's meaning.
            pub fn label(self) -> &'static str {
                match self {
                    $($name::$variant => $label,)+
                }
            }
        }
    };
}

code_enum! {
    /// `entry_mode_id` (2.3).
    EntryMode: &'static str {
        BarCode = "B", "bar code";
        Swiped = "S", "swiped";
        Keyed = "K", "keyed";
        Chip = "C", "chip (ICC)";
        Contactless = "P", "contactless";
        Fallback = "F", "fallback after a failed chip read";
    }
}

code_enum! {
    /// `cvv_response` (2.3). A blank value (no CVV sent) is `None` of an
    /// `Option<CvvResponse>`.
    CvvResponse: &'static str {
        Match = "M", "match";
        NoMatch = "N", "no match";
        NotProcessed = "P", "not processed";
        Unreadable = "S", "unreadable";
        IssuerNotParticipating = "U", "issuer not participating";
        NoResponse = "X", "no response from the service provider";
    }
}

code_enum! {
    /// Basic `avs` (2.4).
    Avs: &'static str {
        Good = "GOOD", "the street and zip provided both match";
        Bad = "BAD", "neither matches";
        Street = "STREET", "street does not match";
        Zip = "ZIP", "zip does not match";
    }
}

code_enum! {
    /// `avs_enhanced` (2.4).
    AvsEnhanced: &'static str {
        A = "A", "street matches, zip does not";
        B = "B", "street matches; postal code unchecked (international format)";
        C = "C", "street and postal code unchecked (format)";
        D = "D", "name wrong; address and zip match (Amex)";
        E = "E", "AVS error";
        F = "F", "street and postal code match (UK)";
        G = "G", "non-US issuer outside AVS";
        H = "H", "name wrong; address matches (Amex)";
        I = "I", "address not verified (international)";
        J = "J", "name wrong; zip matches (Amex)";
        K = "K", "name matches (Amex)";
        L = "L", "name and zip match (Amex)";
        M = "M", "street and postal code match (international)";
        N = "N", "neither street nor zip matches";
        O = "O", "name and address match (Amex)";
        P = "P", "postal code matches; street unchecked (format)";
        Q = "Q", "name, address and zip match (Amex)";
        R = "R", "retry: system unavailable or timeout";
        S = "S", "service not supported";
        T = "T", "name and all data mismatch (Amex)";
        U = "U", "address information unavailable";
        V = "V", "not requested";
        W = "W", "9-digit zip matches, street does not";
        X = "X", "exact: street and 9-digit zip (abroad: postal code only)";
        Y = "Y", "exact: street and 5-digit zip";
        Z = "Z", "5-digit zip matches; street does not or was absent";
    }
}

code_enum! {
    /// `trx_source_id` (2.5).
    TrxSource: u16 {
        Unknown = 1, "Unknown";
        Mobile = 2, "Mobile";
        Web = 3, "Web";
        Ivr = 4, "IVR";
        ContactStatement = 5, "Contact Statement";
        ContactPaymentMobile = 6, "Contact Payment Mobile";
        ContactPayment = 7, "Contact Payment";
        QuickInvoice = 8, "Quick Invoice";
        Payform = 9, "Payform";
        HostedPaymentPage = 10, "Hosted Payment Page";
        Emulator = 11, "Emulator";
        Integration = 12, "Integration";
        RecurringBilling = 13, "Recurring Billing";
        /// Not implemented by the reference.
        RecurringSecondary = 14, "Recurring Secondary";
        DeclinedRecurringEmail = 15, "Declined Recurring Email";
    }
}

code_enum! {
    /// A batch's `processing_status_id` (2.6; the only values).
    ProcessingStatus: u16 {
        ToSettle = 1, "To Settle";
        Settled = 2, "Settled";
        Error = 3, "Error";
        Reprocess = 4, "Re-process";
        Processing = 5, "Processing";
        ForcedClosed = 6, "Forced Closed";
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn status_and_type_ids() {
        let statuses: &[(u16, &str, bool)] = &[
            (101, "Approved", true),
            (102, "AuthOnly", true),
            (111, "Refunded", true),
            (121, "AvsOnly", true),
            (131, "Pending Origination", true),
            (132, "Originating", true),
            (133, "Originated", true),
            (134, "Settled", true),
            (135, "Reserved", true),
            (136, "Rejected", false),
            (191, "Settled", true),
            (201, "Voided", false),
            (301, "Declined", false),
            (331, "Charged Back", false),
        ];
        assert_eq!(statuses.len(), StatusId::ALL.len());
        for &(code, label, approved) in statuses {
            let s = StatusId::from_code(code).unwrap();
            assert_eq!((s.code(), s.label(), s.is_approved()), (code, label, approved));
        }
        let types: &[(u16, &str)] = &[
            (20, "Sale"),
            (21, "AVS Only"),
            (22, "Settle"),
            (30, "Refund"),
            (40, "Credit"),
            (50, "Debit"),
        ];
        for &(code, label) in types {
            assert_eq!(TypeId::from_code(code).map(TypeId::label), Some(label));
        }
        assert_eq!(StatusId::from_code(100), None);
    }

    #[test]
    fn reason_codes() {
        assert_eq!(REASON_CODES.len(), 72);
        let unique: HashSet<u16> = REASON_CODES.iter().map(|(c, _)| *c).collect();
        assert_eq!(unique.len(), REASON_CODES.len());
        let rows: &[(u16, &str)] = &[
            (1000, "Approved and complete"),
            (1001, "AuthCompleted"),
            (1002, "Forced"),
            (1201, "Partial Approval"),
            (1500, "Do not honor"),
            (1510, "Refer to issuer"),
            (1601, "Generic Decline"),
            (1616, "NSF"),
            (1630, "Batch Rejected"),
            (1631, "Account Closed"),
            (1655, "Decline (AVS Auto Reversal)"),
            (1656, "Decline (CVV Auto Reversal)"),
            (1657, "Decline (Partial Auth Auto Reversal)"),
            (1661, "Declined AuthIncrement"),
            (1804, "No Transactions in Batch"),
            (1805, "Batch Does Not Exist"),
            (2101, "Insufficient funds"),
            (2129, "Corporate customer advises not authorized"),
            (2305, "Breach of Warranty"),
            (2373, "RCK Reject - Payer"),
        ];
        for &(code, label) in rows {
            assert_eq!(ReasonCode(code).label(), label, "{code}");
            assert!(ReasonCode(code).is_known(), "{code}");
        }
        assert_eq!(
            ReasonCode(1510).labels(),
            Some("Refer to issuer; Refer to issuer-Special condition")
        );
        // ACH returns: present and missing ranges.
        for (n, present) in [
            (1, true),
            (47, true),
            (48, false),
            (49, false),
            (50, true),
            (53, true),
            (54, false),
        ] {
            assert_eq!(ReasonCode::for_ach_return(n).is_some(), present, "R{n}");
        }
        for (n, present) in [
            (60, false),
            (61, true),
            (74, true),
            (75, false),
            (79, false),
            (80, true),
            (83, true),
        ] {
            assert_eq!(ReasonCode::for_ach_return(n).is_some(), present, "R{n}");
        }
        assert_eq!(ReasonCode(2122).ach_return(), Some(22));
        assert_eq!(
            ReasonCode(2122).ach_return_verbiage().as_deref(),
            Some("Rejected-R22")
        );
        assert!(ReasonCode(2122).is_known());
        assert_eq!(ReasonCode(2201).notification_of_change().as_deref(), Some("C01"));
        assert_eq!(ReasonCode(2269).notification_of_change().as_deref(), Some("C69"));
        assert_eq!(ReasonCode(2214).notification_of_change(), None);
        assert!(!ReasonCode(2148).is_known());
        assert!(!ReasonCode(1999).is_known());
    }

    #[test]
    fn letter_tables() {
        let entry: &[(&str, EntryMode)] = &[
            ("B", EntryMode::BarCode),
            ("S", EntryMode::Swiped),
            ("K", EntryMode::Keyed),
            ("C", EntryMode::Chip),
            ("P", EntryMode::Contactless),
            ("F", EntryMode::Fallback),
        ];
        for &(code, mode) in entry {
            assert_eq!(EntryMode::from_code(code), Some(mode));
        }
        let cvv = ["M", "N", "P", "S", "U", "X"];
        assert_eq!(CvvResponse::ALL.iter().map(|c| c.code()).collect::<Vec<_>>(), cvv);
        assert_eq!(
            Avs::ALL.iter().map(|a| a.code()).collect::<Vec<_>>(),
            ["GOOD", "BAD", "STREET", "ZIP"]
        );
        let letters: String = AvsEnhanced::ALL.iter().map(|a| a.code()).collect();
        assert_eq!(letters, "ABCDEFGHIJKLMNOPQRSTUVWXYZ");
        assert_eq!(AvsEnhanced::V.label(), "not requested");
        assert_eq!(AvsEnhanced::Y.label(), "exact: street and 5-digit zip");
    }

    #[test]
    fn sources_and_processing_statuses() {
        let sources: Vec<u16> = TrxSource::ALL.iter().map(|s| s.code()).collect();
        assert_eq!(sources, (1..=15).collect::<Vec<_>>());
        assert_eq!(TrxSource::from_code(8), Some(TrxSource::QuickInvoice));
        assert_eq!(TrxSource::from_code(12), Some(TrxSource::Integration));
        let rows: &[(u16, &str)] = &[
            (1, "To Settle"),
            (2, "Settled"),
            (3, "Error"),
            (4, "Re-process"),
            (5, "Processing"),
            (6, "Forced Closed"),
        ];
        for &(code, label) in rows {
            assert_eq!(
                ProcessingStatus::from_code(code).map(ProcessingStatus::label),
                Some(label)
            );
        }
        assert_eq!(ProcessingStatus::from_code(7), None);
    }
}
