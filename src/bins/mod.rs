//! BIN lookup: brand and PAN length from built-in IIN ranges (no data
//! needed), issuer data from ranges imported with `ferrogate bins import`.
//!
//! Imported ranges are stored as 8-digit ranges (`411111` is 41111100 to
//! 41111199). A lookup takes the narrowest stored range that contains the
//! BIN: an 8-digit range first, then a 6-digit one, then wider ones. A
//! 6- or 7-digit BIN stands for all its 8-digit extensions, so only a range
//! containing all of them answers it.

pub mod brands;
pub mod countries;
pub mod import;

pub use brands::{brand_of, pan_ok, Brand};

use crate::db::{Conn, DbError, Row, Sql, Value};
use crate::error::ApiResult;
use serde_json::{json, Value as Json};

/// An imported range as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredRange {
    pub start: i64,
    pub end: i64,
    pub prefix_len: i64,
    pub scheme: Option<String>,
    pub category: Option<String>,
    pub card_type: Option<String>,
    pub prepaid: Option<bool>,
    pub country_a2: Option<String>,
    pub country_a3: Option<String>,
    pub country_numeric: Option<String>,
    pub country_name: Option<String>,
    pub bank_name: Option<String>,
    pub bank_url: Option<String>,
    pub bank_phone: Option<String>,
    pub bank_city: Option<String>,
    pub pan_length: Option<i64>,
    pub regulated: Option<bool>,
    pub card_class: Option<String>,
    pub source: String,
    pub created_ts: i64,
}

const SELECT: &str = "SELECT range_start, range_end, prefix_len, scheme, category, card_type, prepaid, \
     country_a2, country_a3, country_numeric, country_name, bank_name, bank_url, bank_phone, bank_city, \
     pan_length, regulated, card_class, source, created_ts FROM bin_ranges";

impl StoredRange {
    fn from_row(row: Row) -> StoredRange {
        let mut it = row.into_iter();
        let mut next = || it.next().unwrap_or(Value::Null);
        let int = |v: Value| v.as_int();
        let text = |v: Value| match v {
            Value::Text(s) => Some(s),
            _ => None,
        };
        let flag = |v: Value| v.as_int().map(|i| i != 0);
        StoredRange {
            start: int(next()).unwrap_or(0),
            end: int(next()).unwrap_or(0),
            prefix_len: int(next()).unwrap_or(0),
            scheme: text(next()),
            category: text(next()),
            card_type: text(next()),
            prepaid: flag(next()),
            country_a2: text(next()),
            country_a3: text(next()),
            country_numeric: text(next()),
            country_name: text(next()),
            bank_name: text(next()),
            bank_url: text(next()),
            bank_phone: text(next()),
            bank_city: text(next()),
            pan_length: int(next()),
            regulated: flag(next()),
            card_class: text(next()),
            source: text(next()).unwrap_or_default(),
            created_ts: int(next()).unwrap_or(0),
        }
    }
}

/// The narrowest stored range containing every 8-digit key in `lo..=hi`.
/// Ranges are searched one width class at a time (`span_digits` c: at
/// most 10^c keys wide), each within the only window of starts that can
/// hold such a range, so every query is a bounded index scan.
pub fn find_range(conn: &mut dyn Conn, lo: i64, hi: i64) -> Result<Option<StoredRange>, DbError> {
    let mut width = 1i64;
    for class in 0..=8i64 {
        let sql = Sql::with(
            &format!(
                "{SELECT} WHERE span_digits = ? AND range_start <= ? AND range_start >= ? AND range_end >= ? \
                 ORDER BY range_end - range_start, range_start DESC LIMIT 1"
            ),
            vec![class.into(), lo.into(), (hi - width + 1).into(), hi.into()],
        );
        if let Some(row) = conn.query_one(&sql)? {
            return Ok(Some(StoredRange::from_row(row)));
        }
        width *= 10;
    }
    Ok(None)
}

/// The message of a BIN that is not 6 to 8 digits.
pub const BIN_MESSAGE: &str = "BIN must be 6 to 8 digits.";

/// Whether `text` is a BIN the lookup endpoint takes: 6 to 8 ASCII digits.
pub fn is_bin(text: &str) -> bool {
    (6..=8).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit())
}

/// What is known about a BIN.
#[derive(Clone, Debug, PartialEq)]
pub struct Lookup {
    /// The digits looked up (at most 8).
    pub bin: String,
    /// From the built-in ranges.
    pub brand: Option<Brand>,
    /// From the imported ranges.
    pub range: Option<StoredRange>,
}

/// Looks up a BIN or a card number: its first 8 digits (all of them when
/// fewer). A 6-digit BIN is answered by ranges that contain all of
/// `BIN00..=BIN99`. Anything but ASCII digits knows nothing.
pub fn lookup(conn: &mut dyn Conn, digits: &str) -> Result<Lookup, DbError> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(Lookup {
            bin: String::new(),
            brand: None,
            range: None,
        });
    }
    let key = &digits[..digits.len().min(8)];
    let range = find_range(conn, import::pad(key, b'0'), import::pad(key, b'9'))?;
    Ok(Lookup {
        bin: key.to_string(),
        brand: brand_of(key),
        range,
    })
}

fn upper(s: &str) -> String {
    s.to_uppercase()
}

impl Lookup {
    /// Whether anything at all is known (otherwise the lookup is a 404).
    pub fn is_known(&self) -> bool {
        self.brand.is_some() || self.range.is_some()
    }

    /// The brand named by the issuer data, else the built-in one.
    fn scheme_brand(&self) -> Option<Brand> {
        self.range
            .as_ref()
            .and_then(|r| r.scheme.as_deref())
            .and_then(Brand::from_scheme)
            .or(self.brand)
    }

    /// The network a card is routed over: the built-in brand, else the
    /// issuer data's.
    fn network(&self) -> Option<Brand> {
        self.brand.or_else(|| self.scheme_brand())
    }

    fn card_brand(&self) -> Option<String> {
        if let Some(b) = self.scheme_brand() {
            return Some(b.name().to_string());
        }
        self.range.as_ref().and_then(|r| r.scheme.as_deref()).map(upper)
    }

    fn max_pan_length(&self) -> Option<i64> {
        self.range
            .as_ref()
            .and_then(|r| r.pan_length)
            .or_else(|| self.scheme_brand().map(|b| b.max_pan_length() as i64))
    }

    fn prepaid(&self) -> bool {
        self.range.as_ref().and_then(|r| r.prepaid) == Some(true)
    }

    /// Regulated (US debit interchange cap): as imported; otherwise known
    /// false only for non-US issuers and for credit or charge cards.
    fn regulated(&self) -> Option<bool> {
        let r = self.range.as_ref()?;
        if r.regulated.is_some() {
            return r.regulated;
        }
        if r.country_a2.as_deref().is_some_and(|c| c != "US") {
            return Some(false);
        }
        match r.card_type.as_deref() {
            Some("credit" | "charge") if !self.prepaid() => Some(false),
            _ => None,
        }
    }

    /// The `bin` record of `GET /v2/bins/{bin}`; null where unknown.
    pub fn bin_json(&self) -> Json {
        let r = self.range.as_ref();
        let text = |f: fn(&StoredRange) -> &Option<String>| r.and_then(|r| f(r).clone());
        let category = text(|r| &r.category)
            .or_else(|| text(|r| &r.card_class).map(|c| upper(&c)))
            .or_else(|| self.prepaid().then(|| "PREPAID".to_string()));
        json!({
            "bin": self.bin,
            "card_brand": self.card_brand(),
            "issuing_organization": text(|r| &r.bank_name),
            "card_type": text(|r| &r.card_type).map(|t| upper(&t)),
            "card_category": category,
            "issuing_country_name_iso": text(|r| &r.country_name),
            "issuing_country_code_iso_a2": text(|r| &r.country_a2),
            "issuing_country_code_iso_a3": text(|r| &r.country_a3),
            "issuing_country_iso_number": text(|r| &r.country_numeric),
            "issuing_organization_website": text(|r| &r.bank_url),
            "issuing_organization_phone": text(|r| &r.bank_phone),
            "max_pan_length": self.max_pan_length(),
            "bin_type": r.map(|r| format!("{}-digit", r.prefix_len)),
            "is_regulated": self.regulated(),
            "fsa_indicator": Json::Null,
            "created": r.map(|r| r.created_ts),
        })
    }

    /// The `bininfo` fields (reference value sets); null, or blank where
    /// the reference blanks, when unknown.
    pub fn bininfo_json(&self) -> Json {
        let r = self.range.as_ref();
        let card_type = r.and_then(|r| r.card_type.as_deref());
        // The spec's set only: a prepaid card shows as such in
        // prepaid_indicator and keeps its type here (debit, mostly),
        // which is what surcharging asks.
        let fund_source = card_type.filter(|t| ["credit", "debit", "charge"].contains(t));
        let indicator = match card_type {
            Some("credit" | "charge") if !self.prepaid() => Some("X"),
            _ => None,
        };
        let issuing_network = match self.network() {
            Some(Brand::Discover | Brand::Diners | Brand::Jcb | Brand::UnionPay) => {
                self.scheme_brand().and_then(Brand::discover_issuing_network)
            }
            _ => None,
        };
        json!({
            "issuer_bank_name": r.and_then(|r| r.bank_name.as_deref()).map(|n| n.chars().take(60).collect::<String>()),
            "country_code": r.and_then(|r| r.country_a3.clone()),
            "detail_card_product": self.network().map(Brand::card_product),
            "detail_card_indicator": indicator,
            "fsa_indicator": Json::Null,
            "prepaid_indicator": if self.prepaid() { "P" } else { "" },
            "product_id": Json::Null,
            "regulator_indicator": self.regulated().map(|b| if b { "B" } else { "N" }),
            "visa_product_sub_type": Json::Null,
            "visa_large_ticket_indicator": Json::Null,
            "account_fund_source": fund_source,
            "card_class": r.and_then(|r| r.card_class.clone()),
            "token_ind": Json::Null,
            "issuing_network": issuing_network,
        })
    }
}

/// The `bininfo` of a card number or BIN (the account vault's
/// `GET /v2/accountvaults/{id}/bininfo`). Anything but 6 to 19 digits
/// gives the all-unknown record.
pub fn bininfo(conn: &mut dyn Conn, pan_or_bin: &str) -> ApiResult<Json> {
    let usable = (6..=19).contains(&pan_or_bin.len()) && pan_or_bin.bytes().all(|b| b.is_ascii_digit());
    let found = if usable {
        lookup(conn, pan_or_bin)?
    } else {
        Lookup {
            bin: String::new(),
            brand: None,
            range: None,
        }
    };
    Ok(found.bininfo_json())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Store;

    fn store() -> (Store, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("ferrogate-bins-{}", crate::ids::new_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::open(&format!("sqlite://{}", dir.join("t.db").display()), 1).unwrap();
        store.migrate().unwrap();
        (store, dir)
    }

    const CSV: &str = "iin_start,iin_end,number_length,number_luhn,scheme,brand,type,prepaid,country,bank_name,bank_logo,bank_url,bank_phone,bank_city
411111,,,,visa,,credit,,US,JPMORGAN CHASE BANK N.A.,,www.chase.com,+1 800 432 3117,
41111150,41111159,,,visa,Classic,debit,,US,EIGHT DIGIT BANK,,,,
45710500,45710599,16,,visa,Visa/Dankort,debit,,DK,Sparekassen,,www.spks.dk,,
45710516,,16,,visa,Visa/Dankort,debit,,DK,Sparekassen 16,,,,
453748,,,,visa,,debit,y,CA,SCOTIABANK,,,,
622202,,,,unionpay,,debit,,CN,ICBC,,www.icbc.com.cn,+86 95588,Beijing
601100,,,,discover,,credit,,US,DISCOVER,,,8003472683,
900000,,,,privatelabel,,credit,,US,STORE CARD BANK,,,,
";

    fn with_data<T: Send + 'static>(f: impl FnOnce(&mut dyn Conn) -> ApiResult<T> + Send + 'static) -> T {
        let (store, dir) = store();
        let parsed = import::parse(CSV).unwrap();
        assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
        store
            .write_blocking(move |c| import::store(c, "test", &parsed.ranges, 1_700_000_000))
            .unwrap();
        let out = store.write_blocking(f).unwrap();
        store.shutdown();
        let _ = std::fs::remove_dir_all(dir);
        out
    }

    #[test]
    fn narrowest_range_wins_and_6_digit_bins_need_the_whole_block() {
        with_data(|c| {
            let name = |c: &mut dyn Conn, bin: &str| -> Option<String> {
                lookup(c, bin).unwrap().range.and_then(|r| r.bank_name)
            };
            assert_eq!(name(c, "411111").as_deref(), Some("JPMORGAN CHASE BANK N.A."));
            assert_eq!(name(c, "41111100").as_deref(), Some("JPMORGAN CHASE BANK N.A."));
            assert_eq!(name(c, "41111155").as_deref(), Some("EIGHT DIGIT BANK"));
            assert_eq!(name(c, "4111115").as_deref(), Some("EIGHT DIGIT BANK"));
            assert_eq!(
                name(c, "4111111111111111").as_deref(),
                Some("JPMORGAN CHASE BANK N.A.")
            );
            assert_eq!(name(c, "4111115511111111").as_deref(), Some("EIGHT DIGIT BANK"));
            assert_eq!(name(c, "45710516").as_deref(), Some("Sparekassen 16"));
            assert_eq!(name(c, "45710517").as_deref(), Some("Sparekassen"));
            assert_eq!(name(c, "457105").as_deref(), Some("Sparekassen"));
            // A 6-digit BIN that only 8-digit ranges partly cover.
            assert_eq!(name(c, "457100"), None);
            assert_eq!(name(c, "411112"), None);
            for odd in ["", "ÜÜÜÜÜÜÜÜÜ", "4111111x", "4111 111"] {
                let found = lookup(c, odd).unwrap();
                assert!(!found.is_known(), "{odd:?}");
            }
            Ok(())
        })
    }

    #[test]
    fn bin_record_fields() {
        let (chase, eight, unionpay, private, brand_only, nothing) = with_data(|c| {
            Ok((
                lookup(c, "411111")?.bin_json(),
                lookup(c, "41111155")?.bin_json(),
                lookup(c, "622202")?.bin_json(),
                lookup(c, "900000")?,
                lookup(c, "222300")?.bin_json(),
                lookup(c, "000000")?,
            ))
        });
        assert_eq!(chase["bin"], "411111");
        assert_eq!(chase["card_brand"], "VISA");
        assert_eq!(chase["issuing_organization"], "JPMORGAN CHASE BANK N.A.");
        assert_eq!(chase["card_type"], "CREDIT");
        assert_eq!(chase["card_category"], Json::Null);
        assert_eq!(chase["issuing_country_name_iso"], "United States");
        assert_eq!(chase["issuing_country_code_iso_a2"], "US");
        assert_eq!(chase["issuing_country_code_iso_a3"], "USA");
        assert_eq!(chase["issuing_country_iso_number"], "840");
        assert_eq!(chase["issuing_organization_website"], "www.chase.com");
        assert_eq!(chase["issuing_organization_phone"], "+1 800 432 3117");
        assert_eq!(chase["max_pan_length"], 19);
        assert_eq!(chase["bin_type"], "6-digit");
        assert_eq!(chase["is_regulated"], false, "US credit is not regulated");
        assert_eq!(chase["fsa_indicator"], Json::Null);
        assert_eq!(chase["created"], 1_700_000_000);
        assert_eq!(chase.as_object().unwrap().len(), 16);

        assert_eq!(eight["bin_type"], "8-digit");
        assert_eq!(eight["card_category"], "Classic");
        assert_eq!(eight["is_regulated"], Json::Null, "US debit: unknown");

        assert_eq!(unionpay["card_brand"], "UNIONPAY");
        assert_eq!(unionpay["is_regulated"], false);

        assert!(private.is_known(), "imported data alone is enough");
        assert_eq!(private.bin_json()["card_brand"], "PRIVATELABEL");
        assert_eq!(private.bin_json()["max_pan_length"], Json::Null);

        assert_eq!(brand_only["card_brand"], "MASTERCARD");
        assert_eq!(brand_only["max_pan_length"], 16);
        for (k, v) in brand_only.as_object().unwrap() {
            if !matches!(k.as_str(), "bin" | "card_brand" | "max_pan_length") {
                assert_eq!(*v, Json::Null, "{k}");
            }
        }
        assert!(!nothing.is_known());
    }

    #[test]
    fn bininfo_fields() {
        let (visa, prepaid, unionpay, discover, amex_brand_only, short, letters) = with_data(|c| {
            Ok((
                bininfo(c, "4111111111111111")?,
                bininfo(c, "4537480000000000")?,
                bininfo(c, "6222020000000000")?,
                bininfo(c, "6011000995500000")?,
                bininfo(c, "371449635398431")?,
                bininfo(c, "41111")?,
                bininfo(c, "4111x11111111111")?,
            ))
        });
        let keys = [
            "issuer_bank_name",
            "country_code",
            "detail_card_product",
            "detail_card_indicator",
            "fsa_indicator",
            "prepaid_indicator",
            "product_id",
            "regulator_indicator",
            "visa_product_sub_type",
            "visa_large_ticket_indicator",
            "account_fund_source",
            "card_class",
            "token_ind",
            "issuing_network",
        ];
        for info in [
            &visa,
            &prepaid,
            &unionpay,
            &discover,
            &amex_brand_only,
            &short,
            &letters,
        ] {
            let got: Vec<&str> = info.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(got, keys);
        }
        assert_eq!(visa["issuer_bank_name"], "JPMORGAN CHASE BANK N.A.");
        assert_eq!(visa["country_code"], "USA");
        assert_eq!(visa["detail_card_product"], "V");
        assert_eq!(visa["detail_card_indicator"], "X");
        assert_eq!(visa["prepaid_indicator"], "");
        assert_eq!(visa["regulator_indicator"], "N");
        assert_eq!(visa["account_fund_source"], "credit");
        assert_eq!(visa["issuing_network"], Json::Null);

        assert_eq!(prepaid["prepaid_indicator"], "P");
        assert_eq!(
            prepaid["account_fund_source"], "debit",
            "the spec's set (credit, debit, charge): prepaid shows in prepaid_indicator"
        );
        assert_eq!(prepaid["country_code"], "CAN");
        assert_eq!(prepaid["regulator_indicator"], "N", "non-US");
        assert_eq!(prepaid["detail_card_indicator"], Json::Null);

        assert_eq!(
            unionpay["detail_card_product"], "D",
            "co-brand range: Discover network"
        );
        assert_eq!(unionpay["issuing_network"], "03");
        assert_eq!(unionpay["account_fund_source"], "debit");
        assert_eq!(discover["issuing_network"], "00");
        assert_eq!(discover["detail_card_product"], "D");

        assert_eq!(amex_brand_only["detail_card_product"], "A");
        assert_eq!(amex_brand_only["issuer_bank_name"], Json::Null);
        assert_eq!(amex_brand_only["account_fund_source"], Json::Null);
        assert_eq!(amex_brand_only["regulator_indicator"], Json::Null);
        assert_eq!(amex_brand_only["prepaid_indicator"], "");

        for nothing in [&short, &letters] {
            assert_eq!(nothing["detail_card_product"], Json::Null);
            assert_eq!(nothing["issuer_bank_name"], Json::Null);
        }
    }

    #[test]
    fn long_bank_names_are_cut_to_60_characters_in_bininfo() {
        let lookup = Lookup {
            bin: "411111".into(),
            brand: Some(Brand::Visa),
            range: Some(StoredRange {
                start: 41111100,
                end: 41111199,
                prefix_len: 6,
                scheme: None,
                category: None,
                card_type: None,
                prepaid: None,
                country_a2: None,
                country_a3: None,
                country_numeric: None,
                country_name: None,
                bank_name: Some("Ü".repeat(80)),
                bank_url: None,
                bank_phone: None,
                bank_city: None,
                pan_length: None,
                regulated: Some(true),
                card_class: Some("business".into()),
                source: "t".into(),
                created_ts: 0,
            }),
        };
        let info = lookup.bininfo_json();
        assert_eq!(info["issuer_bank_name"].as_str().unwrap().chars().count(), 60);
        assert_eq!(info["regulator_indicator"], "B");
        assert_eq!(info["card_class"], "business");
        assert_eq!(lookup.bin_json()["is_regulated"], true);
        assert_eq!(lookup.bin_json()["card_category"], "BUSINESS");
    }

    #[test]
    fn bin_validation() {
        for ok in ["411111", "4111111", "41111111"] {
            assert!(is_bin(ok), "{ok}");
        }
        for bad in ["41111", "411111111", "41111a", "", "４１１１１１", "411 111"] {
            assert!(!is_bin(bad), "{bad:?}");
        }
    }

    #[test]
    fn reimport_replaces_the_source() {
        let (store, dir) = store();
        let first = import::parse(CSV).unwrap();
        let second = import::parse("iin_start,scheme,bank_name\n411111,visa,RENAMED\n").unwrap();
        let (a, b, c) = store
            .write_blocking(move |c| {
                let a = import::store(c, "test", &first.ranges, 1)?;
                let b = import::store(c, "test", &first.ranges, 2)?;
                let c2 = import::store(c, "test", &second.ranges, 3)?;
                Ok((a, b, c2))
            })
            .unwrap();
        assert_eq!((a.removed, a.written, a.total), (0, 8, 8));
        assert_eq!((b.removed, b.written, b.total), (8, 8, 8));
        assert_eq!((c.removed, c.written, c.total), (8, 1, 1));
        // Another source's identical range is taken over, not duplicated.
        let other = import::parse("iin_start,bank_name\n411111,OTHER\n").unwrap();
        let (d, row) = store
            .write_blocking(move |c| {
                let d = import::store(c, "other", &other.ranges, 4)?;
                Ok((d, lookup(c, "411111")?.range))
            })
            .unwrap();
        assert_eq!((d.removed, d.total), (0, 1));
        let row = row.unwrap();
        assert_eq!(
            (row.source.as_str(), row.bank_name.as_deref()),
            ("other", Some("OTHER"))
        );
        store.shutdown();
        let _ = std::fs::remove_dir_all(dir);
    }
}
