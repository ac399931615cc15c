//! AIM (Advanced Integration Method) 3.0 and 3.1: name-value pairs at
//! `/gateway/transact.dll`, answered as one delimited line. The fields
//! are renamed into the XML API's `transactionRequest` so that both read
//! one way (`transaction::plan`).

use super::transaction::{Kind, Outcome};
use serde_json::{json, Map, Value as Json};

/// A request's pairs, looked up without regard to case (their examples
/// mix `x_Login` and `x_login`).
pub struct Fields(Vec<(String, String)>);

impl Fields {
    pub fn new(pairs: Vec<(String, String)>) -> Fields {
        Fields(pairs)
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// The value as sent, untrimmed (a delimiter may be a tab or space).
    fn raw(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    fn flag(&self, name: &str) -> Option<bool> {
        self.get(name).map(|v| {
            matches!(
                v.to_ascii_uppercase().as_str(),
                "TRUE" | "T" | "YES" | "Y" | "1" | "ON"
            )
        })
    }
}

/// How the answer is delimited: `x_delim_char` (default comma) and
/// `x_encap_char` (default none), each echoed whole, since clients split
/// on the full string they sent (Magento's module sends `(~)`), and the
/// response version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    pub delim: String,
    pub encap: String,
    /// 3.1 answers 55 fields, 3.0 the first 38.
    pub v31: bool,
}

impl Shape {
    pub fn of(f: &Fields) -> Shape {
        Shape {
            delim: f.raw("x_delim_char").unwrap_or(",").to_string(),
            encap: f.raw("x_encap_char").unwrap_or_default().to_string(),
            v31: f.get("x_version") != Some("3.0"),
        }
    }
}

/// What a request must not ask for: relay response (a page posted to the
/// merchant's site) is not emulated.
pub fn unsupported(f: &Fields) -> Option<&'static str> {
    if f.flag("x_relay_response") == Some(true) {
        return Some("Relay Response is not supported: send x_relay_response=FALSE and x_delim_data=TRUE.");
    }
    None
}

/// The pairs as a `transactionRequest`.
pub fn request(f: &Fields) -> Map<String, Json> {
    let mut r = Map::new();
    let x_type = f.get("x_type").unwrap_or("AUTH_CAPTURE").to_ascii_uppercase();
    let kind = [
        Kind::AuthCapture,
        Kind::AuthOnly,
        Kind::PriorAuthCapture,
        Kind::CaptureOnly,
        Kind::Refund,
        Kind::Void,
    ]
    .into_iter()
    .find(|k| k.aim().0 == x_type);
    r.insert(
        "transactionType".into(),
        json!(kind.map(Kind::api_name).unwrap_or(&x_type)),
    );
    let settings: Vec<Json> = [
        ("testRequest", f.get("x_test_request")),
        ("duplicateWindow", f.get("x_duplicate_window")),
        ("allowPartialAuth", f.get("x_allow_partial_auth")),
    ]
    .into_iter()
    .filter_map(|(name, value)| value.map(|v| json!({ "settingName": name, "settingValue": v })))
    .collect();
    if !settings.is_empty() {
        r.insert("transactionSettings".into(), json!({ "setting": settings }));
    }
    let mut put = |key: &str, value: Option<&str>| {
        if let Some(v) = value {
            r.insert(key.into(), json!(v));
        }
    };
    put("amount", f.get("x_amount"));
    put("refTransId", f.get("x_trans_id"));
    put("authCode", f.get("x_auth_code"));
    put("poNumber", f.get("x_po_num"));
    put("customerIP", f.get("x_customer_ip"));
    let group = |pairs: &[(&str, &str)]| -> Option<Json> {
        let m: Map<String, Json> = pairs
            .iter()
            .filter_map(|(ours, theirs)| f.get(theirs).map(|v| (ours.to_string(), json!(v))))
            .collect();
        (!m.is_empty()).then_some(Json::Object(m))
    };
    if f.get("x_method")
        .is_some_and(|m| m.eq_ignore_ascii_case("ECHECK"))
    {
        r.insert("payment".into(), json!({ "bankAccount": {} }));
    } else {
        // A credit's card (the last four digits will do) must be the
        // referenced sale's.
        if let Some(card) = group(&[
            ("cardNumber", "x_card_num"),
            ("expirationDate", "x_exp_date"),
            ("cardCode", "x_card_code"),
        ]) {
            r.insert("payment".into(), json!({ "creditCard": card }));
        }
    }
    if let Some(bill) = group(&[
        ("firstName", "x_first_name"),
        ("lastName", "x_last_name"),
        ("address", "x_address"),
        ("city", "x_city"),
        ("state", "x_state"),
        ("zip", "x_zip"),
    ]) {
        r.insert("billTo".into(), bill);
    }
    if let Some(order) = group(&[
        ("invoiceNumber", "x_invoice_num"),
        ("description", "x_description"),
    ]) {
        r.insert("order".into(), order);
    }
    if let Some(customer) = group(&[("id", "x_cust_id")]) {
        r.insert("customer".into(), customer);
    }
    r
}

/// The delimited answer, fields in AIM's documented order: 1 response
/// code, 2 subcode, 3 reason code, 4 reason text, 5 authorization code,
/// 6 AVS, 7 transaction id, 8 invoice, 9 description, 10 amount,
/// 11 method, 12 type, 13 customer id, 14-24 bill-to (first and last
/// name, company, address, city, state, zip, country, phone, fax, email),
/// 25-32 ship-to, 33 tax, 34 duty, 35 freight, 36 tax exempt, 37 PO
/// number, 38 MD5 hash; 3.1 adds 39 card code response, 40 CAVV, 41-50
/// empty, 51 account number, 52 card type, 53 split tender id,
/// 54 requested amount, 55 balance on card.
pub fn answer(f: &Fields, outcome: &Outcome, shape: &Shape) -> String {
    let echo = |name: &str| f.get(name).unwrap_or_default().to_string();
    let amount = if outcome.amount.is_empty() {
        echo("x_amount")
    } else {
        outcome.amount.clone()
    };
    let kind = outcome
        .kind
        .map(|k| k.aim().1.to_string())
        .unwrap_or_else(|| echo("x_type").to_ascii_lowercase());
    let mut fields: Vec<String> = vec![
        outcome.reason.response.code().to_string(),
        "1".into(),
        outcome.reason.code.to_string(),
        outcome.text.clone(),
        outcome.auth_code.clone(),
        outcome.avs.to_string(),
        outcome.trans_id.clone(),
        echo("x_invoice_num"),
        echo("x_description"),
        amount.clone(),
        // The method asked for, even when refused (eChecks are not served).
        if echo("x_method").eq_ignore_ascii_case("ECHECK") {
            "ECHECK".into()
        } else {
            "CC".into()
        },
        kind,
        echo("x_cust_id"),
    ];
    for name in [
        "x_first_name",
        "x_last_name",
        "x_company",
        "x_address",
        "x_city",
        "x_state",
        "x_zip",
        "x_country",
        "x_phone",
        "x_fax",
        "x_email",
        "x_ship_to_first_name",
        "x_ship_to_last_name",
        "x_ship_to_company",
        "x_ship_to_address",
        "x_ship_to_city",
        "x_ship_to_state",
        "x_ship_to_zip",
        "x_ship_to_country",
        "x_tax",
        "x_duty",
        "x_freight",
        "x_tax_exempt",
        "x_po_num",
    ] {
        fields.push(echo(name));
    }
    // 38: the MD5 hash, retired by Authorize.Net; empty.
    fields.push(String::new());
    if shape.v31 {
        fields.push(outcome.cvv.to_string());
        fields.push(String::new());
        fields.extend(std::iter::repeat_n(String::new(), 10));
        fields.push(outcome.account_number.clone());
        fields.push(outcome.account_type.clone());
        match &outcome.split_tender {
            Some(split) => fields.extend([
                split.id.clone(),
                split.requested_amount.clone(),
                split.balance_on_card.clone(),
            ]),
            None => fields.extend([String::new(), amount, String::new()]),
        }
    }
    fields
        .iter()
        .map(|v| {
            // The delimiter cannot appear inside an unencapsulated value.
            let v = if shape.encap.is_empty() {
                v.replace(shape.delim.as_str(), " ")
            } else {
                v.replace(shape.encap.as_str(), "")
            };
            format!("{}{v}{}", shape.encap, shape.encap)
        })
        .collect::<Vec<_>>()
        .join(&shape.delim)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emulator::codes;
    use crate::emulator::transaction::{plan, Refusal};

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        Fields::new(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn pairs_read_like_a_transaction_request() {
        let f = fields(&[
            ("x_Type", "auth_only"),
            ("x_amount", "3.10"),
            ("x_card_num", "4111111111111111"),
            ("x_exp_date", "12/30"),
            ("x_first_name", "Pat"),
        ]);
        let p = plan(&request(&f)).unwrap();
        assert_eq!(p.kind, Kind::AuthOnly);
        assert_eq!(p.body["exp_date"], "1230");
        let echeck = fields(&[("x_method", "ECHECK"), ("x_amount", "1.00")]);
        assert_eq!(plan(&request(&echeck)).unwrap_err().reason.code, 18);
    }

    #[test]
    fn the_answer_is_delimited_in_their_order() {
        let f = fields(&[("x_invoice_num", "A,1"), ("x_amount", "1.00")]);
        let outcome = Outcome::refused(Some(Kind::Void), &Refusal::new(codes::BAD_TRANS_ID));
        let plain = answer(&f, &outcome, &Shape::of(&f));
        let parts: Vec<&str> = plain.split(',').collect();
        assert_eq!(parts.len(), 55);
        assert_eq!(
            &parts[..4],
            &["3", "1", "15", "The transaction ID is invalid or not present."]
        );
        assert_eq!(parts[7], "A 1");
        assert_eq!(parts[10], "CC");
        assert_eq!(parts[11], "void");
        let echeck = fields(&[("x_method", "echeck"), ("x_amount", "1.00")]);
        let refused = Outcome::refused(Some(Kind::AuthCapture), &Refusal::new(codes::BAD_TRANS_ID));
        let line = answer(&echeck, &refused, &Shape::of(&echeck));
        assert_eq!(line.split(',').nth(10), Some("ECHECK"), "the method asked for");
        let piped = fields(&[
            ("x_delim_char", "|"),
            ("x_encap_char", "\""),
            ("x_version", "3.0"),
        ]);
        let line = answer(&piped, &outcome, &Shape::of(&piped));
        assert_eq!(line.split('|').count(), 38);
        assert!(line.starts_with("\"3\"|\"1\"|\"15\"|"));
        // Several characters are echoed whole (Magento sends `(~)`).
        let magento = fields(&[("x_delim_char", "(~)"), ("x_encap_char", "''")]);
        let line = answer(&magento, &outcome, &Shape::of(&magento));
        assert_eq!(line.split("(~)").count(), 55);
        assert!(line.starts_with("''3''(~)''1''(~)''15''(~)"), "{line}");
    }
}
