//! The parts of a transaction's amount: its tax and tip, and on a
//! surcharged card charge its subtotal and surcharge. When an amount
//! shrinks after the parts were set (a capture or partial reversal for
//! less, a partial approval), the parts are fitted to it here, so a
//! record never shows parts that add up to more than was charged.

use crate::engine::record::Record;

/// Tax and tip lowered to fit in `amount`: the tax first, the tip to what
/// is left. An unset part stays unset.
pub fn fit_tax_and_tip(tax: Option<i64>, tip: Option<i64>, amount: i64) -> (Option<i64>, Option<i64>) {
    let tax = tax.map(|tax| tax.min(amount));
    let room = amount - tax.unwrap_or(0);
    (tax, tip.map(|tip| tip.min(room)))
}

/// The parts of `record` (as requested) fitted to a partial approval of
/// `approved` cents: tax and tip by [`fit_tax_and_tip`]; a surcharged
/// charge's surcharge keeps its share of the goods (the rate it was
/// charged at, whatever the account's rate is now) and the subtotal
/// takes the rest, with the tip no larger than it.
pub fn refit_partial(record: &mut Record, approved: i64) {
    let (tax, mut tip) = fit_tax_and_tip(record.int("tax"), record.int("tip_amount"), approved);
    let goods = approved - tax.unwrap_or(0);
    let subtotal = record.int("subtotal_amount");
    let surcharge = record.int("surcharge_amount").filter(|s| *s > 0);
    match (subtotal, surcharge) {
        (Some(subtotal), Some(surcharge)) if subtotal + surcharge > 0 => {
            let whole = subtotal + surcharge;
            let new_surcharge = (surcharge * goods + whole / 2) / whole;
            let new_subtotal = goods - new_surcharge;
            record.set("subtotal_amount", new_subtotal);
            record.set("surcharge_amount", new_surcharge);
            tip = tip.map(|tip| tip.min(new_subtotal));
        }
        (Some(_), _) => record.set("subtotal_amount", goods),
        _ => {}
    }
    if let Some(tax) = tax {
        record.set("tax", tax);
    }
    if let Some(tip) = tip {
        record.set("tip_amount", tip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tax_first_then_tip() {
        assert_eq!(fit_tax_and_tip(Some(400), Some(300), 500), (Some(400), Some(100)));
        assert_eq!(fit_tax_and_tip(Some(400), Some(300), 200), (Some(200), Some(0)));
        assert_eq!(fit_tax_and_tip(None, Some(300), 200), (None, Some(200)));
        assert_eq!(fit_tax_and_tip(Some(100), None, 1000), (Some(100), None));
    }
}
