//! The actions of the transactions endpoint and the fields each accepts
//! (the reference's applicability matrix), checked before anything else.

use crate::engine::validate::{blank, for_create, label, CreateInput};
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::resources::TRANSACTION;
use serde_json::{Map, Value as Json};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Sale,
    AuthOnly,
    AvsOnly,
    Force,
    Refund,
    Debit,
    Credit,
    AuthComplete,
    AuthIncrement,
    Void,
    PartialReversal,
    TipAdjust,
    Edit,
    /// `POST /v2/transactions/{id}/override`: a manager approves an ACH
    /// debit held with 1663.
    Override,
    /// `POST /v2/transactions/{id}/achupdate`: a POP or C21 debit voided
    /// and run again with a corrected MICR line or amount.
    AchUpdate,
}

pub const POST_ACTIONS: &[Action] = &[
    Action::Sale,
    Action::AuthOnly,
    Action::AvsOnly,
    Action::Force,
    Action::Refund,
    Action::Debit,
    Action::Credit,
];
pub const PUT_ACTIONS: &[Action] = &[
    Action::AuthComplete,
    Action::AuthIncrement,
    Action::Void,
    Action::PartialReversal,
    Action::TipAdjust,
    Action::Edit,
];

/// The actions whose amount must be above zero, in the reference's words.
const POSITIVE_AMOUNT: &str = "Transaction amount must be greater than zero for the following actions: \
     [sale, authonly, authcomplete, authincrement, debit, credit, refund, tipadjust]";

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::Sale => "sale",
            Action::AuthOnly => "authonly",
            Action::AvsOnly => "avsonly",
            Action::Force => "force",
            Action::Refund => "refund",
            Action::Debit => "debit",
            Action::Credit => "credit",
            Action::AuthComplete => "authcomplete",
            Action::AuthIncrement => "authincrement",
            Action::Void => "void",
            Action::PartialReversal => "partialreversal",
            Action::TipAdjust => "tipadjust",
            Action::Edit => "edit",
            Action::Override => "override",
            Action::AchUpdate => "achupdate",
        }
    }

    fn parse(s: &str) -> Option<Action> {
        POST_ACTIONS
            .iter()
            .chain(PUT_ACTIONS)
            .copied()
            .find(|a| a.name() == s)
    }

    /// Whether the action charges or checks a card only.
    fn takes_a_card(self) -> bool {
        matches!(
            self,
            Action::Sale | Action::AuthOnly | Action::AvsOnly | Action::Force
        )
    }

    /// Fields the action accepts besides `action` itself.
    fn accepts(self) -> &'static [&'static [&'static str]] {
        match self {
            Action::Sale | Action::AuthOnly => CARD_CREATE,
            Action::Force => FORCE,
            Action::AvsOnly => AVS_ONLY,
            Action::Refund => REFUND,
            Action::Debit => ACH_DEBIT,
            Action::Credit => ACH_CREDIT,
            Action::AuthComplete | Action::AuthIncrement => &[COMPLETE, FOLLOW_UP],
            Action::Void => &[VOID, FOLLOW_UP],
            // A surcharged transaction's new total comes with its parts.
            Action::PartialReversal => &[VOID, &["subtotal_amount", "surcharge_amount", "tax"], FOLLOW_UP],
            Action::TipAdjust => &[&["transaction_amount"]],
            Action::Edit => &[EDIT],
            Action::Override => &[],
            Action::AchUpdate => &[&["track_data", "transaction_amount"]],
        }
    }

    /// Fields of the shared lists that this action still does not take
    /// (the matrix's N among its neighbours' O).
    fn refuses(self) -> &'static [&'static str] {
        match self {
            Action::AuthOnly => &["card_present"],
            Action::Refund => &["advance_deposit"],
            _ => &[],
        }
    }

    /// Whether the amount is required (and must be above zero).
    fn amount_required(self) -> bool {
        matches!(
            self,
            Action::Sale
                | Action::AuthOnly
                | Action::Force
                | Action::Refund
                | Action::Debit
                | Action::Credit
                | Action::AuthIncrement
                | Action::PartialReversal
                | Action::TipAdjust
                | Action::AchUpdate
        )
    }
}

const COMMON_CREATE: &[&str] = &[
    "payment_method",
    "transaction_amount",
    "account_vault_id",
    "account_vault_api_id",
    "account_number",
    "previous_transaction_id",
    "previous_transaction_api_id",
    "account_holder_name",
    "billing_street",
    "billing_zip",
    "billing_city",
    "billing_state",
    "billing_phone",
    "contact_id",
    "contact_api_id",
    "location_id",
    "product_transaction_id",
    "description",
    "notification_email_address",
    "transaction_api_id",
    "order_num",
    "po_number",
    "customer_id",
    "customer_ip",
    "clerk_number",
    "transaction_c1",
    "transaction_c2",
    "transaction_c3",
    "tags",
    "bill_payment",
    "custom_data",
    "save_account",
    "save_account_title",
    "terms_agree",
];

const CARD_ONLY: &[&str] = &[
    "service_address",
    "service_city",
    "service_state",
    "service_zip",
    "service_country",
    "exp_date",
    "cvv",
    "track_data",
    "card_present",
    "tax",
    "tip_amount",
    "subtotal_amount",
    "surcharge_amount",
    "terminal_serial_number",
    "additional_amounts",
    "checkin_date",
    "checkout_date",
    "room_rate",
    "room_num",
    "advance_deposit",
    "no_show",
    "allow_partial_authorization_override",
    "auto_decline_cvv_override",
    "auto_decline_street_override",
    "auto_decline_zip_override",
];

const ACH_ONLY: &[&str] = &[
    "routing",
    "account_type",
    "ach_sec_code",
    "effective_date",
    "check_number",
    "ach_identifier",
    "dl_number",
    "dl_state",
    "dob_year",
    "ssn4",
];

const CARD_CREATE: &[&[&str]] = &[COMMON_CREATE, CARD_ONLY];
const FORCE: &[&[&str]] = &[COMMON_CREATE, CARD_ONLY, &["auth_code"]];
const AVS_ONLY: &[&[&str]] = &[COMMON_CREATE, CARD_ONLY];
const REFUND: &[&[&str]] = &[COMMON_CREATE, CARD_ONLY, ACH_ONLY];
/// A check read at the point of sale (POP, C21): its MICR line and, for
/// Check 21, its images. Debits only: credits use SEC code CCD.
const CHECK_CAPTURE: &[&str] = &["track_data", "image_front", "image_back"];
const ACH_DEBIT: &[&[&str]] = &[COMMON_CREATE, ACH_ONLY, CHECK_CAPTURE];
const ACH_CREDIT: &[&[&str]] = &[COMMON_CREATE, ACH_ONLY];
const COMPLETE: &[&str] = &[
    "transaction_amount",
    "exp_date",
    "account_holder_name",
    "description",
    "notification_email_address",
    "order_num",
    "checkin_date",
    "checkout_date",
    "room_rate",
    "room_num",
    "advance_deposit",
    "no_show",
    "tax",
    "tip_amount",
    "subtotal_amount",
    "surcharge_amount",
    "custom_data",
    "transaction_c1",
    "transaction_c2",
    "transaction_c3",
    "clerk_number",
];
/// Optional on the follow-up actions: checked against the transaction
/// (`payment_method` must match; `transaction_api_id` may be set once).
const FOLLOW_UP: &[&str] = &["payment_method", "transaction_api_id"];
const VOID: &[&str] = &[
    "transaction_amount",
    "account_holder_name",
    "description",
    "notification_email_address",
    "room_rate",
    "room_num",
];
const EDIT: &[&str] = &[
    "tags",
    "contact_id",
    "contact_api_id",
    "move_account_vault",
    "move_account_vault_transactions",
    "description",
];

/// A checked request body: the action and the validated fields.
pub struct Parsed {
    pub action: Action,
    pub input: CreateInput,
}

impl Parsed {
    /// A transient input as text.
    pub fn text(&self, name: &str) -> Option<String> {
        match self.input.transient.get(name) {
            Some(Json::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
            Some(Json::Number(n)) => Some(n.to_string()),
            _ => None,
        }
    }
    /// A transient 1/0 input.
    pub fn flag(&self, name: &str) -> Option<bool> {
        self.input
            .transient
            .get(name)
            .and_then(crate::engine::validate::parse_flag)
    }
    pub fn present(&self, name: &str) -> bool {
        self.input.present.contains(&name)
    }
}

/// Checks a body of `POST /v2/transactions` (`put` false) or
/// `PUT /v2/transactions/{id}` (`put` true): field types and bounds, the
/// action, and the fields that action accepts.
pub fn parse(body: &Map<String, Json>, put: bool) -> ApiResult<Parsed> {
    let action_raw = body.get("action");
    let input = for_create(&TRANSACTION, body).map_err(ApiError::Validation)?;
    let name = match action_raw {
        Some(Json::String(s)) => s.clone(),
        _ => String::new(),
    };
    let allowed = if put { PUT_ACTIONS } else { POST_ACTIONS };
    let names = |list: &[Action]| list.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ");
    let action = match Action::parse(&name) {
        Some(a) if allowed.contains(&a) => a,
        Some(a) => {
            let how = if put {
                "POST /v2/transactions"
            } else {
                "PUT /v2/transactions/{id}"
            };
            return Err(ApiError::field(
                "action",
                format!("The {} action runs with {how}.", a.name()),
            ));
        }
        None => {
            return Err(ApiError::field(
                "action",
                format!("Action must be one of: {}.", names(allowed)),
            ))
        }
    };
    check_fields(action, input, put)
}

/// Checks the body of an action that has an endpoint of its own
/// (override, achupdate): the fields it takes and their bounds.
pub fn parse_for(action: Action, body: &Map<String, Json>) -> ApiResult<Parsed> {
    // The path names the action; the body must not name another.
    if body.contains_key("action") {
        return Err(ApiError::field(
            "action",
            format!(
                "Action is not accepted for the {} action: the path names it.",
                action.name()
            ),
        ));
    }
    let mut body = body.clone();
    body.insert("action".into(), Json::String(action.name().into()));
    let input = for_create(&TRANSACTION, &body).map_err(ApiError::Validation)?;
    check_fields(action, input, true)
}

/// The fields `action` accepts and the rules on its amount, method and
/// auth code. `put`: the action works on an existing transaction.
fn check_fields(action: Action, mut input: CreateInput, put: bool) -> ApiResult<Parsed> {
    let mut errors = FieldErrors::new();
    let accepts = action.accepts();
    // A card's account type comes from its number; clients that send one
    // anyway (the reference's collection sends "mc") are not refused, and
    // what they sent is not kept.
    if action.takes_a_card() && input.present.contains(&"account_type") {
        input.present.retain(|name| *name != "account_type");
        input.record.set("account_type", crate::db::Value::Null);
    }
    for name in &input.present {
        if *name != "action"
            && (!accepts.iter().any(|list| list.contains(name)) || action.refuses().contains(name))
        {
            errors.add(
                *name,
                format!(
                    "{} is not accepted for the {} action.",
                    label(name),
                    action.name()
                ),
            );
        }
    }
    let amount = input.record.int("transaction_amount");
    match amount {
        None if action.amount_required() => errors.add("transaction_amount", blank("transaction_amount")),
        Some(a)
            if a <= 0 && action != Action::AvsOnly && action != Action::Void && action != Action::Edit =>
        {
            errors.add("transaction_amount", POSITIVE_AMOUNT)
        }
        Some(a) if a != 0 && action == Action::AvsOnly => errors.add(
            "transaction_amount",
            "An avsonly request carries no amount (send 0 or leave it out).",
        ),
        _ => {}
    }
    if !put {
        let method = input.record.text("payment_method");
        let expected = match action {
            Action::Sale | Action::AuthOnly | Action::AvsOnly | Action::Force => Some("cc"),
            Action::Debit | Action::Credit => Some("ach"),
            _ => None,
        };
        match (method, expected) {
            (None, _) => errors.add("payment_method", blank("payment_method")),
            (Some(m), Some(e)) if m != e => errors.add(
                "payment_method",
                format!("Payment Method must be {e} for the {} action.", action.name()),
            ),
            (Some(m), None) if m != "cc" && m != "ach" => {
                errors.add("payment_method", "Payment Method must be cc or ach.")
            }
            _ => {}
        }
    }
    if action == Action::Force {
        match input.record.text("auth_code") {
            None => errors.add("auth_code", blank("auth_code")),
            Some(code) if code.chars().count() != 6 => {
                errors.add("auth_code", "Auth Code must be exactly 6 characters.")
            }
            _ => {}
        }
    }
    errors.into_result()?;
    Ok(Parsed { action, input })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Json) -> Map<String, Json> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn actions_run_on_their_verb() {
        assert!(parse(
            &body(json!({"action": "sale", "payment_method": "cc", "transaction_amount": "1.00"})),
            false
        )
        .is_ok());
        let e = parse(&body(json!({"action": "void"})), false).err().unwrap();
        assert!(format!("{:?}", e).contains("PUT /v2/transactions/{id}"));
        let e = parse(&body(json!({"action": "sale"})), true).err().unwrap();
        assert!(format!("{:?}", e).contains("POST /v2/transactions"));
        assert!(parse(&body(json!({"action": "bogus"})), false).is_err());
    }

    #[test]
    fn fields_follow_the_matrix() {
        let e = parse(
            &body(json!({"action": "debit", "payment_method": "ach", "transaction_amount": 5, "cvv": "123"})),
            false,
        )
        .err()
        .unwrap();
        assert!(format!("{:?}", e).contains("Cvv is not accepted for the debit action."));
        let e = parse(
            &body(json!({"action": "tipadjust", "description": "x", "transaction_amount": 1})),
            true,
        )
        .err()
        .unwrap();
        assert!(format!("{:?}", e).contains("Description is not accepted for the tipadjust action."));
        assert!(parse(&body(json!({"action": "force", "payment_method": "cc", "transaction_amount": 5, "auth_code": "abc"})), false).is_err());
        assert!(parse(&body(json!({"action": "force", "payment_method": "cc", "transaction_amount": 5, "auth_code": "abc123"})), false).is_ok());
        assert!(parse(&body(json!({"action": "sale", "payment_method": "cc", "transaction_amount": 5, "auth_code": "abc123"})), false).is_err());
    }

    #[test]
    fn amounts_must_be_positive_with_the_reference_text() {
        let e = parse(
            &body(json!({"action": "sale", "payment_method": "cc", "transaction_amount": "0.00"})),
            false,
        )
        .err()
        .unwrap();
        assert!(format!("{:?}", e).contains(POSITIVE_AMOUNT));
        let e = parse(
            &body(json!({"action": "sale", "payment_method": "ach", "transaction_amount": 1})),
            false,
        )
        .err()
        .unwrap();
        assert!(format!("{:?}", e).contains("Payment Method must be cc for the sale action."));
        assert!(parse(&body(json!({"action": "avsonly", "payment_method": "cc"})), false).is_ok());
    }
}
