//! The batch settlement error table of the reference's sandbox (3.6) as
//! data, and the sandbox's settlement decision.
//!
//! When the **last** transaction of a batch has an amount of the form
//! `9XXXX.YY` dollars found in this table, settlement fails (batch
//! `processing_status_id` 3) and the batch's `status_message` holds the
//! row's text byte for byte. The amount encodes the row as `9·TT·RR.FF`:
//! TT the alphabet position of the record type letter, RR that of the
//! record letter (`0` = record 0 = `00`), FF the field. The three rows
//! with `N/A` columns (90999.99, 91999.99, 92199.99) do not follow it.
//!
//! A range row (`90300.00-.06`) covers every cent of the range.

use super::codes::{ProcessingStatus, ReasonCode};

/// One row of the table, exactly as the reference writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SettlementErrorRow {
    /// `90200.11`, or a range `90300.00-.06`.
    pub amount: &'static str,
    /// The "Type Rec Field" column: `B 0 11`, `C 0 0-6`, `I N/A N/A`.
    pub type_rec_field: &'static str,
    /// The batch's `status_message`, verbatim.
    pub message: &'static str,
}

const fn row(
    amount: &'static str,
    type_rec_field: &'static str,
    message: &'static str,
) -> SettlementErrorRow {
    SettlementErrorRow {
        amount,
        type_rec_field,
        message,
    }
}

impl SettlementErrorRow {
    /// The amounts in cents this row covers, inclusive: `90300.00-.06` ->
    /// (9_030_000, 9_030_006). `None` if the amount column is malformed.
    pub fn cents(&self) -> Option<(i64, i64)> {
        let (first, last) = match self.amount.split_once('-') {
            Some((first, last)) => (first, Some(last)),
            None => (self.amount, None),
        };
        let lo = parse_dollars(first)?;
        let hi = match last {
            None => lo,
            Some(tail) => {
                // `.06`: the cents of the same dollar amount.
                let cents = tail.strip_prefix('.')?;
                if cents.len() != 2 || !cents.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                lo - lo % 100 + cents.parse::<i64>().ok()?
            }
        };
        (lo <= hi).then_some((lo, hi))
    }

    /// Whether `amount` (cents) falls in this row.
    pub fn covers(&self, amount: i64) -> bool {
        self.cents().is_some_and(|(lo, hi)| (lo..=hi).contains(&amount))
    }

    /// The record type letter (`B`, `C`, `E`, `I`, `P`, `S`, `U`).
    pub fn record_type(&self) -> Option<char> {
        self.type_rec_field.split(' ').next()?.chars().next()
    }

    /// The record: `Some('0')` for record 0, a letter, or `None` for N/A.
    pub fn record(&self) -> Option<char> {
        let rec = self.type_rec_field.split(' ').nth(1)?;
        (rec != "N/A").then(|| rec.chars().next()).flatten()
    }

    /// The field numbers, inclusive (`0-6` -> (0, 6)); `None` for N/A.
    pub fn fields(&self) -> Option<(u32, u32)> {
        let field = self.type_rec_field.split(' ').nth(2)?;
        if field == "N/A" {
            return None;
        }
        match field.split_once('-') {
            Some((lo, hi)) => Some((lo.parse().ok()?, hi.parse().ok()?)),
            None => {
                let f = field.parse().ok()?;
                Some((f, f))
            }
        }
    }
}

/// `90300.07` -> 9_030_007 cents.
fn parse_dollars(text: &str) -> Option<i64> {
    let (dollars, cents) = text.split_once('.')?;
    if dollars.is_empty()
        || cents.len() != 2
        || !dollars.bytes().all(|b| b.is_ascii_digit())
        || !cents.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    Some(dollars.parse::<i64>().ok()? * 100 + cents.parse::<i64>().ok()?)
}

/// The row whose amount is `amount` (cents), if any.
pub fn settlement_error(amount: i64) -> Option<&'static SettlementErrorRow> {
    SETTLEMENT_ERRORS.iter().find(|r| r.covers(amount))
}

/// What settling a batch leads to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SettleOutcome {
    /// Closed and settled: `processing_status_id` 2.
    Settled,
    /// Not settled: `processing_status_id` 3 and this `status_message`.
    Failed {
        status_message: String,
        /// The reason code when the failure has one (1630 for the $6.30
        /// rejected batch, 1804 for an empty batch); `None` for the
        /// 9XXXX.YY table, which gives only a message.
        reason_code_id: Option<ReasonCode>,
    },
}

impl SettleOutcome {
    /// The batch's `processing_status_id` after this outcome.
    pub fn processing_status(&self) -> ProcessingStatus {
        match self {
            SettleOutcome::Settled => ProcessingStatus::Settled,
            SettleOutcome::Failed { .. } => ProcessingStatus::Error,
        }
    }
}

/// The amount of the $6.30 trigger (REJECTED_BATCH).
pub const REJECTED_BATCH_AMOUNT: i64 = 630;

/// The sandbox's settlement decision for a batch.
///
/// - `amounts`: the batch's transaction amounts in cents, in the order they
///   entered the batch (the last one is the batch's last transaction).
/// - `attempt`: which settle attempt this is for the batch, 1 for the first.
///
/// Rules, in this order: an empty batch fails with 1804 "No Transactions in
/// Batch"; a last amount found in the 9XXXX.YY table fails with that row's
/// text on every attempt; a $6.30 transaction anywhere in the batch fails
/// the first attempt (1630 "Batch Rejected") and lets the second succeed;
/// anything else settles.
pub fn settle_outcome(amounts: &[i64], attempt: u32) -> SettleOutcome {
    let Some(&last) = amounts.last() else {
        return SettleOutcome::Failed {
            status_message: ReasonCode::NO_TRANSACTIONS_IN_BATCH.label().to_string(),
            reason_code_id: Some(ReasonCode::NO_TRANSACTIONS_IN_BATCH),
        };
    };
    if let Some(row) = settlement_error(last) {
        return SettleOutcome::Failed {
            status_message: row.message.to_string(),
            reason_code_id: None,
        };
    }
    if attempt <= 1 && amounts.contains(&REJECTED_BATCH_AMOUNT) {
        return SettleOutcome::Failed {
            status_message: ReasonCode::BATCH_REJECTED.label().to_string(),
            reason_code_id: Some(ReasonCode::BATCH_REJECTED),
        };
    }
    SettleOutcome::Settled
}

/// The complete table of the reference (3.6), in its order.
pub static SETTLEMENT_ERRORS: &[SettlementErrorRow] = &[
    row("90200.11", "B 0 11", "Blocked Terminal Error"),
    row("90300.00-.06", "C 0 0-6", "Contact Merchant Services/Technical Support"),
    row("90300.07", "C 0 7", "MISSING SERIAL NUM – The terminal has not yet completed the boarding process. The Serial Number has not been set up."),
    row("90300.12", "C 0 12", "Terminal not enabled to Capture for either American Express, PayPal or Discover Card"),
    row("90300.15", "C 0 15", "American Express Card Account Number is invalid."),
    row("90300.16", "C 0 16", "Discover/PayPal Card Account Number is invalid."),
    row("90300.17", "C 0 17", "Diners Card Account Number is invalid."),
    row("90300.18", "C 0 18", "Cashback transaction that is not Visa or Discover and is not Debit or Check Service; or an American Express transaction that contains Passenger Transport or Auto Rental without the American Express Auto Rental optional data group."),
    row("90300.21", "C 0 21", "Card Type not activated for the terminal."),
    row("90300.22", "C 0 22", "A non-American Express transaction which includes one of the optional data groups for American Express Transaction Advice Addenda data."),
    row("90300.23", "C 0 23", "Could not translate the Card Account Number."),
    row("90501.01", "E A 01", "American Express Line Item Routing ID is not 'Z'."),
    row("90501.55", "E A 55", "American Express Line Item Type is invalid."),
    row("90501.57", "E A 57", "American Express TAD Line Item Additional Amount Type is invalid."),
    row("90501.58", "E A 58", "American Express TAD Line Item Additional Amount is invalid."),
    row("90501.61", "E A 61", "American Express Retail Line Item Quantity is invalid."),
    row("90501.62", "E A 62", "American Express Retail Line Item Amount is invalid."),
    row("90501.63", "E A 63", "American Express Lodging Line Item Room Rate is invalid."),
    row("90501.64", "E A 64", "American Express Lodging Line Item Number of Nights is invalid."),
    row("90503.06", "E C 06", "Transaction Type is invalid."),
    row("90503.07", "E C 07", "Terminal Transaction Date is invalid."),
    row("90503.08", "E C 08", "Terminal Verification Results missing."),
    row("90503.09", "E C 09", "Transaction Currency Code missing."),
    row("90503.10", "E C 10", "Application Transaction Counter missing."),
    row("90503.11", "E C 11", "Application Interchange Profile missing."),
    row("90503.12", "E C 12", "Application Cryptogram missing."),
    row("90503.13", "E C 13", "Unpredictable Number is missing on a Visa, Mastercard, or American Express transaction."),
    row("90503.14", "E C 14", "Issuer Application Data missing on a Visa or American Express transaction."),
    row("90503.15", "E C 15", "Cryptogram Information Data missing on a Mastercard or American Express transaction."),
    row("90503.16", "E C 16", "Terminal Capability Profile missing on a Visa or Discover transaction"),
    row("90503.17", "E C 17", "Card Sequence Number is missing on a Visa, American Express, or Discover transaction."),
    row("90503.18", "E C 18", "Issuer Authentication Data is missing on a Visa transaction."),
    row("90503.19", "E C 19", "CVM Results are missing on a Mastercard transaction."),
    row("90503.20", "E C 20", "Issuer Script Results are missing on a Visa transaction."),
    row("90503.21", "E C 21", "Form Factor Identifier missing on a Visa transaction."),
    row("90503.25", "E C 25", "Interface Device Serial Number is invalid"),
    row("90504.01", "E D 01", "Routing ID is not 'Z'."),
    row("90504.04", "E D 04", "Routing ID is invalid."),
    row("90504.05", "E D 05", "Record Type or optional data groups are invalid."),
    row("90504.06", "E D 06", "Transaction Code is invalid."),
    row("90504.07", "E D 07", "Cardholder Identification Code is invalid."),
    row("90504.08", "E D 08", "Account Data Source is invalid."),
    row("90504.09", "E D 09", "Cardholder Account Number is invalid."),
    row("90504.10", "E D 10", "Requested ACI value is invalid."),
    row("90504.11", "E D 11", "Returned ACI is invalid."),
    row("90504.12", "E D 12", "Authorization Source Code is invalid."),
    row("90504.13", "E D 13", "Transaction Sequence Number is invalid."),
    row("90504.14", "E D 14", "Response Code is invalid."),
    row("90504.15", "E D 15", "Approval Code is invalid."),
    row("90504.16", "E D 16", "Local Transaction Date is invalid."),
    row("90504.17", "E D 17", "Local Transaction Time is invalid."),
    row("90504.18", "E D 18", "AVS Result Code is invalid."),
    row("90504.19", "E D 19", "Transaction Identifier is invalid."),
    row("90504.20", "E D 20", "Validation Code is invalid."),
    row("90504.21", "E D 21", "Void Indicator is invalid."),
    row("90504.22", "E D 22", "Transaction Status Code is invalid."),
    row("90504.23", "E D 23", "Reimbursement Attribute is invalid."),
    row("90504.24", "E D 24", "Settlement Amount is invalid."),
    row("90504.25", "E D 25", "Authorized Amount is invalid."),
    row("90504.26", "E D 26", "Cashback Amount is invalid."),
    row("90504.27", "E D 27", "Gratuity Amount is invalid."),
    row("90504.28", "E D 28", "Total Authorized Amount is invalid."),
    row("90504.29", "E D 29", "Purchase Identifier Format Code is invalid."),
    row("90504.30", "E D 30", "Purchase Identifier is invalid."),
    row("90504.31", "E D 31", "Market Specific Data ID is invalid."),
    row("90504.32", "E D 32", "Special Program Indicator is invalid."),
    row("90504.33", "E D 33", "Extra Charges is invalid."),
    row("90504.34", "E D 34", "Rental or Check In Date is invalid."),
    row("90504.35", "E D 35", "Merchant Category Code Override is invalid."),
    row("90504.36", "E D 36", "Charge Type is invalid."),
    row("90504.37", "E D 37", "Checkout Date is invalid."),
    row("90504.38", "E D 38", "Stay Duration is invalid."),
    row("90504.39", "E D 39", "Lodging Room Rate is invalid."),
    row("90504.40", "E D 40", "Optional Amount Identifier is invalid."),
    row("90504.41", "E D 41", "Optional Amount is invalid."),
    row("90504.42", "E D 42", "Purchase Order Number is invalid."),
    row("90504.43", "E D 43", "Restricted Ticket Indicator is invalid."),
    row("90504.44", "E D 44", "Multiple Clearing Sequence Number is invalid."),
    row("90504.45", "E D 45", "Multiple Clearing Sequence Count is invalid."),
    row("90504.46", "E D 46", "Ticket Number is invalid."),
    row("90504.47", "E D 47", "Passenger Name or TAD Line Item Count is invalid."),
    row("90504.48", "E D 48", "Departure Date or TAA Line Item Count is invalid."),
    row("90504.49", "E D 49", "City Airport Code is invalid."),
    row("90504.50", "E D 50", "Trip Leg Info is invalid."),
    row("90504.51", "E D 51", "Retrieval Reference Number is invalid."),
    row("90504.52", "E D 52", "System Trace Audit Number is invalid."),
    row("90504.53", "E D 53", "Network Identification Code is invalid."),
    row("90504.54", "E D 54", "Settlement Date is invalid."),
    row("90504.55", "E D 55", "Lane ID is invalid."),
    row("90504.56", "E D 56", "MOTO / e-Commerce Indicator is invalid."),
    row("90504.57", "E D 57", "Renter Name or American Express Auto Rental Pickup Time is invalid."),
    row("90504.58", "E D 58", "Rental Return City is invalid."),
    row("90504.59", "E D 59", "Rental Return State / Country is invalid."),
    row("90504.60", "E D 60", "Rental Return Location ID is invalid."),
    row("90504.61", "E D 61", "Level 3 Order Date or ACH Security Code is invalid."),
    row("90504.62", "E D 62", "Level 3 Line Item Count or ACH Routing Number is invalid."),
    row("90504.64", "E D 64", "American Express CPS Total Tax Amount or Group Version Number is invalid."),
    row("90504.66", "E D 66", "Fleet Motor Fuel Unit of Measure is invalid."),
    row("90504.71", "E D 71", "Fleet Purchase Product Code or ACH Payment Type is invalid."),
    row("90504.72", "E D 72", "ACH Presentment is invalid."),
    row("90504.74", "E D 74", "Fleet Tax Rate or ACH Check Reversal Indicator is invalid."),
    row("90504.75", "E D 75", "VAT Tax Amount is invalid."),
    row("90504.76", "E D 76", "VAT Tax Rate is invalid."),
    row("90504.77", "E D 77", "Line Item Count is invalid."),
    row("90504.78", "E D 78", "Freight Amount is invalid."),
    row("90504.79", "E D 79", "Duty Amount is invalid."),
    row("90504.80", "E D 80", "Destination Postal / ZIP Code is invalid"),
    row("90504.81", "E D 81", "Ship From Postal / ZIP Code is invalid."),
    row("90504.82", "E D 82", "ODG 45 Transaction Security Indicator is invalid."),
    row("90504.83", "E D 83", "Alternate Tax Amount Indicator is invalid."),
    row("90504.84", "E D 84", "Alternate Tax Amount is invalid."),
    row("90504.85", "E D 85", "Line Item Count is invalid."),
    row("90504.86", "E D 86", "Service Development Indicator is invalid."),
    row("90504.91", "E D 91", "Existing Debt Indicator is invalid."),
    row("90504.92", "E D 92", "E-Commerce Goods Indicator is invalid."),
    row("90504.93", "E D 93", "UCAF Collection Indicator or POS Data Code is invalid."),
    row("90504.96", "E D 96", "Merchant Verification Value is invalid."),
    row("90504.99", "E D 99", "Detail Extension ODG 41 Validation Error. The specific tag and value will be added to the error description."),
    row("90505.05", "E E 05", "ETB record received with no terminal authentication."),
    row("90505.06", "E E 06", "Encryption Type is invalid."),
    row("90505.07", "E E 07", "Encrypted Transmission Block Data Size is invalid."),
    row("90505.08", "E E 08", "Encrypted Transmission Block is invalid."),
    row("90511.04", "E K 04", "Routing ID is not 'Z'."),
    row("90511.05", "E K 05", "Record Type is invalid."),
    row("90511.06", "E K 06", "BIN is invalid."),
    row("90511.07", "E K 07", "Agent Number is invalid."),
    row("90511.08", "E K 08", "Chain Number is invalid."),
    row("90511.09", "E K 09", "Merchant Number is invalid."),
    row("90511.10", "E K 10", "Store Number is invalid."),
    row("90511.11", "E K 11", "Terminal Number is invalid."),
    row("90511.12", "E K 12", "Device Code is invalid."),
    row("90511.13", "E K 13", "Merchant Currency Code is invalid."),
    row("90511.14", "E K 14", "Language Indicator is invalid."),
    row("90511.15", "E K 15", "Time Zone Differential is invalid."),
    row("90511.16", "E K 16", "Batch Transmission Date is invalid."),
    row("90511.17", "E K 17", "Batch Number is invalid."),
    row("90511.18", "E K 18", "Blocking Number is invalid."),
    row("90511.19", "E K 19", "Travel Agency Code is invalid."),
    row("90511.20", "E K 20", "Travel Agency Name is invalid."),
    row("90511.21", "E K 21", "Merchant Local Telephone Number is invalid."),
    row("90511.22", "E K 22", "Customer Service Telephone Number is invalid."),
    row("90511.23", "E K 23", "GenKey ID is invalid."),
    row("90511.24", "E K 24", "Developer ID is invalid."),
    row("90511.25", "E K 25", "Version ID is invalid."),
    row("90511.26", "E K 26", "Gateway ID is invalid."),
    row("90511.27", "E K 27", "Payment Service Provider Name is invalid."),
    row("90512.01", "E L 01", "Routing ID is not 'Z'."),
    row("90516.04", "E P 04", "Routing ID is not 'Z'."),
    row("90516.05", "E P 05", "Record Type is invalid."),
    row("90516.06", "E P 06", "Merchant Country Code is invalid."),
    row("90516.07", "E P 07", "Merchant City Code (ZIP/Postal) is invalid."),
    row("90516.08", "E P 08", "Merchant Category Code is invalid."),
    row("90516.09", "E P 09", "Merchant Name/City/State is invalid."),
    row("90516.10", "E P 10", "Merchant Location Number is invalid."),
    row("90516.11", "E P 11", "Merchant Terminal ID Number is invalid."),
    row("90520.04", "E T 04", "Routing ID is not 'Z'."),
    row("90520.05", "E T 05", "Record Type is invalid."),
    row("90520.06", "E T 06", "Batch Transmission Date is invalid."),
    row("90520.07", "E T 07", "Batch Number is invalid."),
    row("90520.08", "E T 08", "Batch Record Count is invalid."),
    row("90520.09", "E T 09", "Batch Hashing Total is invalid."),
    row("90520.10", "E T 10", "Cash Back Total is invalid."),
    row("90520.11", "E T 11", "Batch Net Deposit is invalid."),
    row("90524.06", "E X 06", "Invalid Canadian Tax Line Item Tax Amount Indicator"),
    row("90524.07", "E X 07", "Invalid Canadian Tax Line Item Tax Amount format"),
    row("90524.08", "E X 08", "Invalid Canadian Tax Line Item Tax Rate format"),
    row("90524.09", "E X 09", "Invalid Canadian Tax Line Item Tax Rate Exponent format"),
    row("90524.11", "E X 11", "Invalid Canadian Tax Line Item Tax Type Identifier"),
    row("90999.99", "I N/A N/A", "Input/Output System Error has occurred."),
    row("91600.20", "P 0 20", "Hierarchy Validation Error"),
    row("91600.21", "P 0 21", "Card Type Validation Error"),
    row("91999.99", "S N/A N/A", "Record Sequence Error"),
    row("92199.99", "U N/A N/A", "Unknown Message or System Error has occurred."),
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Alphabet position: A = 1.
    fn position(letter: char) -> i64 {
        letter as i64 - 'A' as i64 + 1
    }

    #[test]
    fn every_row_parses_is_unique_and_follows_the_encoding() {
        assert_eq!(SETTLEMENT_ERRORS.len(), 173);
        let mut amounts = HashSet::new();
        let mut covered: Vec<(i64, i64)> = Vec::new();
        let mut not_encoded = Vec::new();
        for row in SETTLEMENT_ERRORS {
            let (lo, hi) = row
                .cents()
                .unwrap_or_else(|| panic!("{} does not parse", row.amount));
            assert!(amounts.insert(row.amount), "{} repeats", row.amount);
            assert!(
                covered.iter().all(|&(a, b)| hi < a || lo > b),
                "{} overlaps",
                row.amount
            );
            covered.push((lo, hi));
            assert!(
                (9_000_000..10_000_000).contains(&lo),
                "{} is not 9XXXX.YY",
                row.amount
            );
            assert!(
                !row.message.is_empty() && row.message.trim() == row.message,
                "{}",
                row.amount
            );
            let letter = row.record_type().expect("type letter");
            assert!(letter.is_ascii_uppercase(), "{}", row.amount);
            // 9·TT·RR.FF
            match (row.record(), row.fields()) {
                (Some(rec), Some((f_lo, f_hi))) => {
                    let rr = if rec == '0' { 0 } else { position(rec) };
                    let base = 9_000_000 + position(letter) * 10_000 + rr * 100;
                    assert_eq!(
                        (lo, hi),
                        (base + f_lo as i64, base + f_hi as i64),
                        "{}",
                        row.amount
                    );
                }
                (None, None) => not_encoded.push(row.amount),
                other => panic!("{}: {other:?}", row.amount),
            }
        }
        assert_eq!(not_encoded, ["90999.99", "91999.99", "92199.99"]);
        // The N/A rows still start with their type's position: I 09, S 19, U 21.
        for (amount, letter) in [(9_099_999, 'I'), (9_199_999, 'S'), (9_219_999, 'U')] {
            let row = settlement_error(amount).unwrap();
            assert_eq!(row.record_type(), Some(letter));
            assert_eq!((amount - 9_000_000) / 10_000, position(letter));
        }
    }

    #[test]
    fn lookups_from_every_family() {
        let rows: &[(i64, &str)] = &[
            (9_020_011, "Blocked Terminal Error"),
            (9_030_000, "Contact Merchant Services/Technical Support"),
            (9_030_003, "Contact Merchant Services/Technical Support"),
            (9_030_006, "Contact Merchant Services/Technical Support"),
            (
                9_030_007,
                "MISSING SERIAL NUM \u{2013} The terminal has not yet completed the boarding process. The Serial Number has not been set up.",
            ),
            (9_030_015, "American Express Card Account Number is invalid."),
            (9_030_016, "Discover/PayPal Card Account Number is invalid."),
            (9_030_017, "Diners Card Account Number is invalid."),
            (9_030_023, "Could not translate the Card Account Number."),
            (9_050_101, "American Express Line Item Routing ID is not 'Z'."),
            (9_050_164, "American Express Lodging Line Item Number of Nights is invalid."),
            (9_050_306, "Transaction Type is invalid."),
            (9_050_316, "Terminal Capability Profile missing on a Visa or Discover transaction"),
            (9_050_321, "Form Factor Identifier missing on a Visa transaction."),
            (9_050_325, "Interface Device Serial Number is invalid"),
            (9_050_401, "Routing ID is not 'Z'."),
            (9_050_409, "Cardholder Account Number is invalid."),
            (9_050_424, "Settlement Amount is invalid."),
            (9_050_475, "VAT Tax Amount is invalid."),
            (9_050_478, "Freight Amount is invalid."),
            (9_050_480, "Destination Postal / ZIP Code is invalid"),
            (
                9_050_499,
                "Detail Extension ODG 41 Validation Error. The specific tag and value will be added to the error description.",
            ),
            (9_050_505, "ETB record received with no terminal authentication."),
            (9_050_508, "Encrypted Transmission Block is invalid."),
            (9_051_104, "Routing ID is not 'Z'."),
            (9_051_127, "Payment Service Provider Name is invalid."),
            (9_051_201, "Routing ID is not 'Z'."),
            (9_051_606, "Merchant Country Code is invalid."),
            (9_051_611, "Merchant Terminal ID Number is invalid."),
            (9_052_009, "Batch Hashing Total is invalid."),
            (9_052_011, "Batch Net Deposit is invalid."),
            (9_052_406, "Invalid Canadian Tax Line Item Tax Amount Indicator"),
            (9_052_411, "Invalid Canadian Tax Line Item Tax Type Identifier"),
            (9_099_999, "Input/Output System Error has occurred."),
            (9_160_020, "Hierarchy Validation Error"),
            (9_160_021, "Card Type Validation Error"),
            (9_199_999, "Record Sequence Error"),
            (9_219_999, "Unknown Message or System Error has occurred."),
        ];
        for &(amount, message) in rows {
            let row = settlement_error(amount).unwrap_or_else(|| panic!("{amount} not found"));
            assert_eq!(row.message, message, "{amount}");
            assert_eq!(
                settle_outcome(&[1000, amount], 1),
                SettleOutcome::Failed {
                    status_message: message.to_string(),
                    reason_code_id: None
                }
            );
            // Fails on every attempt.
            assert!(matches!(
                settle_outcome(&[amount], 2),
                SettleOutcome::Failed { .. }
            ));
        }
        // Gaps and neighbours are not errors.
        for amount in [
            9_030_008, 9_030_013, 9_050_100, 9_050_463, 9_050_400, 9_000_000, 9_999_999, 9_020_012,
        ] {
            assert_eq!(settlement_error(amount), None, "{amount}");
        }
    }

    #[test]
    fn settle_decisions() {
        use SettleOutcome::*;
        let rejected = Failed {
            status_message: "Batch Rejected".into(),
            reason_code_id: Some(ReasonCode(1630)),
        };
        let empty = Failed {
            status_message: "No Transactions in Batch".into(),
            reason_code_id: Some(ReasonCode(1804)),
        };
        let rows: Vec<(&[i64], u32, SettleOutcome)> = vec![
            (&[1000, 2500], 1, Settled),
            (&[], 1, empty),
            // $6.30 in the batch: first attempt fails, second succeeds.
            (&[630], 1, rejected.clone()),
            (&[630], 2, Settled),
            (&[1000, 630, 2000], 1, rejected),
            (&[1000, 630, 2000], 2, Settled),
            // Only the last transaction's amount counts for the 9XXXX.YY table.
            (&[9_020_011, 1000], 1, Settled),
            (
                &[1000, 9_020_011],
                3,
                Failed {
                    status_message: "Blocked Terminal Error".into(),
                    reason_code_id: None,
                },
            ),
        ];
        for (amounts, attempt, expected) in rows {
            let got = settle_outcome(amounts, attempt);
            assert_eq!(got, expected, "{amounts:?} attempt {attempt}");
        }
        assert_eq!(Settled.processing_status().code(), 2);
        assert_eq!(settle_outcome(&[630], 1).processing_status().code(), 3);
    }
}
