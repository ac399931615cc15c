//! Built-in IIN ranges of the card brands and PAN length rules (the Luhn
//! check is `cards::luhn_ok`). Needs no data: brand and length work on an
//! empty database.
//!
//! Ranges are prefixes (`lo..=hi`, both of the same length, compared as
//! digit strings). A number takes the brand of the longest prefix range
//! that contains it, so the Discover co-brand range 622126-622925 wins
//! over UnionPay's 62.

/// A card brand known without any imported data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Brand {
    Visa,
    Mastercard,
    Amex,
    Discover,
    Jcb,
    Diners,
    UnionPay,
    Maestro,
}

impl Brand {
    /// Every brand, for tests and documentation.
    pub const ALL: [Brand; 8] = [
        Brand::Visa,
        Brand::Mastercard,
        Brand::Amex,
        Brand::Discover,
        Brand::Jcb,
        Brand::Diners,
        Brand::UnionPay,
        Brand::Maestro,
    ];

    /// The account vault's `account_type` for a card of this brand: visa,
    /// mc, disc, amex, jcb, diners. UnionPay cards are acquired over the
    /// Discover network (`disc`), Maestro over Mastercard's (`mc`).
    pub fn account_type(self) -> &'static str {
        match self {
            Brand::Visa => "visa",
            Brand::Mastercard | Brand::Maestro => "mc",
            Brand::Amex => "amex",
            Brand::Discover | Brand::UnionPay => "disc",
            Brand::Jcb => "jcb",
            Brand::Diners => "diners",
        }
    }

    /// The brand's own short code (the `scheme` of an imported range file).
    pub fn code(self) -> &'static str {
        match self {
            Brand::Visa => "visa",
            Brand::Mastercard => "mastercard",
            Brand::Amex => "amex",
            Brand::Discover => "discover",
            Brand::Jcb => "jcb",
            Brand::Diners => "diners",
            Brand::UnionPay => "unionpay",
            Brand::Maestro => "maestro",
        }
    }

    /// The name shown as `card_brand` of a BIN record.
    pub fn name(self) -> &'static str {
        match self {
            Brand::Visa => "VISA",
            Brand::Mastercard => "MASTERCARD",
            Brand::Amex => "AMERICAN EXPRESS",
            Brand::Discover => "DISCOVER",
            Brand::Jcb => "JCB",
            Brand::Diners => "DINERS CLUB",
            Brand::UnionPay => "UNIONPAY",
            Brand::Maestro => "MAESTRO",
        }
    }

    /// Reads a scheme name as range files write it (`visa`, `mastercard`,
    /// `mc`, `amex`, `american express`, `discover`, `disc`, `jcb`,
    /// `diners`, `diners club`, `unionpay`, `china union pay`, `maestro`;
    /// any case).
    pub fn from_scheme(text: &str) -> Option<Brand> {
        let t: String = text
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        Some(match t.as_str() {
            "visa" => Brand::Visa,
            "mastercard" | "mc" => Brand::Mastercard,
            "amex" | "americanexpress" => Brand::Amex,
            "discover" | "disc" => Brand::Discover,
            "jcb" => Brand::Jcb,
            "diners" | "dinersclub" | "dinersclubinternational" => Brand::Diners,
            "unionpay" | "chinaunionpay" | "cup" => Brand::UnionPay,
            "maestro" => Brand::Maestro,
            _ => return None,
        })
    }

    /// The PAN lengths the brand issues.
    pub fn pan_lengths(self) -> &'static [usize] {
        match self {
            Brand::Visa => &[13, 16, 19],
            Brand::Mastercard => &[16],
            Brand::Amex => &[15],
            Brand::Discover | Brand::Jcb | Brand::UnionPay => &[16, 17, 18, 19],
            Brand::Diners => &[14, 15, 16, 17, 18, 19],
            Brand::Maestro => &[12, 13, 14, 15, 16, 17, 18, 19],
        }
    }

    pub fn max_pan_length(self) -> usize {
        self.pan_lengths().iter().copied().max().unwrap_or(19)
    }

    /// Whether a PAN of `len` digits is a valid length for this brand.
    pub fn accepts_length(self, len: usize) -> bool {
        self.pan_lengths().contains(&len)
    }

    /// The `detail_card_product` of BIN info: the network a US acquirer
    /// routes the card over (Diners, JCB and UnionPay cards go over
    /// Discover's).
    pub fn card_product(self) -> &'static str {
        match self {
            Brand::Visa => "V",
            Brand::Mastercard | Brand::Maestro => "M",
            Brand::Amex => "A",
            Brand::Discover | Brand::Diners | Brand::Jcb | Brand::UnionPay => "D",
        }
    }

    /// The Discover `issuing_network` code of cards carried by the
    /// Discover network: 00 Discover, 01 Diners, 02 JCB, 03 UnionPay.
    pub fn discover_issuing_network(self) -> Option<&'static str> {
        match self {
            Brand::Discover => Some("00"),
            Brand::Diners => Some("01"),
            Brand::Jcb => Some("02"),
            Brand::UnionPay => Some("03"),
            _ => None,
        }
    }
}

/// A prefix range: numbers whose first `lo.len()` digits lie in `lo..=hi`.
struct IinRange {
    lo: &'static str,
    hi: &'static str,
    brand: Brand,
}

const fn r(lo: &'static str, hi: &'static str, brand: Brand) -> IinRange {
    IinRange { lo, hi, brand }
}

/// The built-in table. Maestro only where no other brand claims the
/// prefix (5018, 5020, 5038, 5893, 6304, 6759, 6761-6763).
static RANGES: &[IinRange] = &[
    r("4", "4", Brand::Visa),
    r("51", "55", Brand::Mastercard),
    r("222100", "272099", Brand::Mastercard),
    r("34", "34", Brand::Amex),
    r("37", "37", Brand::Amex),
    r("6011", "6011", Brand::Discover),
    r("644", "649", Brand::Discover),
    r("65", "65", Brand::Discover),
    r("622126", "622925", Brand::Discover),
    r("3528", "3589", Brand::Jcb),
    r("300", "305", Brand::Diners),
    r("3095", "3095", Brand::Diners),
    r("36", "36", Brand::Diners),
    r("38", "39", Brand::Diners),
    r("62", "62", Brand::UnionPay),
    r("81", "81", Brand::UnionPay),
    r("5018", "5018", Brand::Maestro),
    r("5020", "5020", Brand::Maestro),
    r("5038", "5038", Brand::Maestro),
    r("5893", "5893", Brand::Maestro),
    r("6304", "6304", Brand::Maestro),
    r("6759", "6759", Brand::Maestro),
    r("6761", "6763", Brand::Maestro),
];

/// The brand of a card number or of its leading digits (a BIN). Longest
/// prefix wins. `None` for anything but ASCII digits, for numbers no
/// brand claims, and for prefixes too short to decide (`62212` could be
/// UnionPay or Discover).
pub fn brand_of(digits: &str) -> Option<Brand> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut best: Option<&IinRange> = None;
    for range in RANGES {
        let k = range.lo.len();
        if digits.len() >= k {
            let head = &digits[..k];
            if range.lo <= head && head <= range.hi && best.is_none_or(|b| b.lo.len() < k) {
                best = Some(range);
            }
        }
    }
    let best = best?;
    // A longer range of another brand that the digits could still reach
    // makes the answer undecided.
    let n = digits.len();
    let undecided = RANGES.iter().any(|range| {
        range.lo.len() > n
            && range.brand != best.brand
            && &range.lo[..n] <= digits
            && digits <= &range.hi[..n]
    });
    if undecided {
        None
    } else {
        Some(best.brand)
    }
}

/// Whether `pan` is a plausible card number: digits, a brand, a length
/// that brand issues, and a passing Luhn check.
pub fn pan_ok(pan: &str) -> bool {
    match brand_of(pan) {
        Some(brand) => brand.accepts_length(pan.len()) && crate::cards::luhn_ok(pan),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cards::luhn_ok;

    use crate::processor::sandbox::TEST_CARDS;

    #[test]
    fn reference_test_cards_have_brand_length_and_luhn() {
        for (pan, brand) in TEST_CARDS {
            assert_eq!(brand_of(pan), Some(*brand), "{pan}");
            assert!(luhn_ok(pan), "{pan} passes Luhn");
            assert!(brand.accepts_length(pan.len()), "{pan} length");
            assert!(pan_ok(pan), "{pan}");
        }
        assert_eq!(brand_of("4111111111111111").unwrap().account_type(), "visa");
        assert_eq!(brand_of("5454545454545454").unwrap().account_type(), "mc");
        assert_eq!(brand_of("6011000995500000").unwrap().account_type(), "disc");
        assert_eq!(brand_of("371449635398431").unwrap().account_type(), "amex");
    }

    #[test]
    fn other_well_known_test_numbers() {
        for (pan, brand, code) in [
            ("2223003122003222", Brand::Mastercard, "mc"),
            ("2720992720992729", Brand::Mastercard, "mc"),
            ("378282246310005", Brand::Amex, "amex"),
            ("3530111333300000", Brand::Jcb, "jcb"),
            ("3566002020360505", Brand::Jcb, "jcb"),
            ("30569309025904", Brand::Diners, "diners"),
            ("38520000023237", Brand::Diners, "diners"),
            ("36227206271667", Brand::Diners, "diners"),
            ("6011111111111117", Brand::Discover, "disc"),
            ("6445644564456445", Brand::Discover, "disc"),
            ("6500000000000002", Brand::Discover, "disc"),
            ("6221260000000000", Brand::Discover, "disc"),
            ("6229250000000003", Brand::Discover, "disc"),
            ("6200000000000005", Brand::UnionPay, "disc"),
            ("6229260000000002", Brand::UnionPay, "disc"),
            ("8171999927660000", Brand::UnionPay, "disc"),
            ("6759649826438453", Brand::Maestro, "mc"),
            ("5018000000000009", Brand::Maestro, "mc"),
        ] {
            assert_eq!(brand_of(pan), Some(brand), "{pan}");
            assert_eq!(brand.account_type(), code, "{pan}");
            assert!(luhn_ok(pan), "{pan} passes Luhn");
            assert!(pan_ok(pan), "{pan}");
        }
    }

    #[test]
    fn range_edges() {
        for (bin, brand) in [
            ("222100", Some(Brand::Mastercard)),
            ("222099", None),
            ("272099", Some(Brand::Mastercard)),
            ("272100", None),
            ("510000", Some(Brand::Mastercard)),
            ("559999", Some(Brand::Mastercard)),
            ("560000", None),
            ("500000", None),
            ("340000", Some(Brand::Amex)),
            ("350000", None),
            ("352799", None),
            ("352800", Some(Brand::Jcb)),
            ("358999", Some(Brand::Jcb)),
            ("359000", None),
            ("300000", Some(Brand::Diners)),
            ("305999", Some(Brand::Diners)),
            ("306000", None),
            ("309500", Some(Brand::Diners)),
            ("309600", None),
            ("380000", Some(Brand::Diners)),
            ("399999", Some(Brand::Diners)),
            ("601100", Some(Brand::Discover)),
            ("601200", None),
            ("643999", None),
            ("644000", Some(Brand::Discover)),
            ("649999", Some(Brand::Discover)),
            ("622125", Some(Brand::UnionPay)),
            ("622126", Some(Brand::Discover)),
            ("622925", Some(Brand::Discover)),
            ("622926", Some(Brand::UnionPay)),
            ("810000", Some(Brand::UnionPay)),
            ("820000", None),
            ("000000", None),
            ("100000", None),
            ("700000", None),
            ("900000", None),
        ] {
            assert_eq!(brand_of(bin), brand, "{bin}");
        }
    }

    #[test]
    fn short_and_malformed_prefixes() {
        assert_eq!(brand_of("4"), Some(Brand::Visa));
        assert_eq!(brand_of("37"), Some(Brand::Amex));
        // Undecided: 62212x may be UnionPay or Discover; 2 may be Mastercard.
        assert_eq!(brand_of("62212"), None);
        assert_eq!(brand_of("6221"), None);
        assert_eq!(brand_of("62"), None);
        assert_eq!(brand_of("621"), Some(Brand::UnionPay));
        assert_eq!(brand_of("2"), None);
        assert_eq!(brand_of("2221"), None);
        assert_eq!(brand_of("22210"), None);
        assert_eq!(brand_of("222100"), Some(Brand::Mastercard));
        // 601 may be Discover (6011) or nothing: no full match yet.
        assert_eq!(brand_of("601"), None);
        for bad in ["", "4111 1111", "4111-1111", "abc", "４１１１", "4x"] {
            assert_eq!(brand_of(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn pan_lengths_per_brand() {
        assert!(!pan_ok("41111111111111111"), "17-digit Visa");
        assert!(pan_ok("4222222222222"), "13-digit Visa");
        assert!(!pan_ok("545454545454545"), "15-digit Mastercard");
        assert!(!pan_ok("3714496353984310"), "16-digit Amex");
        assert!(!pan_ok("0000000000000000"), "no brand");
        assert_eq!(Brand::Visa.max_pan_length(), 19);
        assert_eq!(Brand::Mastercard.max_pan_length(), 16);
        assert_eq!(Brand::Amex.max_pan_length(), 15);
        assert_eq!(Brand::Diners.max_pan_length(), 19);
        for b in Brand::ALL {
            assert!(!b.pan_lengths().is_empty());
            assert_eq!(Brand::from_scheme(b.code()), Some(b));
            assert!(b.pan_lengths().iter().all(|l| (12..=19).contains(l)));
        }
        assert_eq!(Brand::from_scheme("MasterCard"), Some(Brand::Mastercard));
        assert_eq!(Brand::from_scheme("American Express"), Some(Brand::Amex));
        assert_eq!(Brand::from_scheme("private label"), None);
    }
}
