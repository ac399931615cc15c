//! The requests that reach a terminal, on the node that takes them:
//! router transactions, router account vaults and device terms. Each is
//! checked whole before the device is asked anything (a request that
//! cannot succeed never prompts a cardholder), handed to the router, and
//! answered from the record the holder made.

use super::router::{refusal, Outcome, Requester, Router, Work};
use super::timeouts;
use crate::db::Store;
use crate::engine::record::Record;
use crate::engine::validate::{blank, for_create, label};
use crate::engine::{self, query, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::payments::actions::{self, Action};
use crate::payments::{idempotency, Idempotency, Origin, Payments};
use crate::resources::{ACCOUNT_VAULT, CONTACT, DEVICE_TERM, TERMINAL, TRANSACTION};
use serde_json::{json, Map, Value as Json};

/// The fields of a router transaction (spec "Router transaction"), and
/// `contact_api_id`, which `save_account` names as an alternative. No
/// account: the terminal reads the card.
pub const TRANSACTION_FIELDS: &[&str] = &[
    "payment_method",
    "action",
    "location_id",
    "terminal_id",
    "transaction_amount",
    "product_transaction_id",
    "billing_street",
    "billing_zip",
    "contact_id",
    "contact_api_id",
    "description",
    "order_num",
    "po_number",
    "tax",
    "transaction_api_id",
    "notification_email_address",
    "advance_deposit",
    "no_show",
    "checkin_date",
    "checkout_date",
    "room_num",
    "room_rate",
    "save_account",
    "auth_code",
];

/// The actions that take a new card.
pub const ACTIONS: &[Action] = &[
    Action::Sale,
    Action::AuthOnly,
    Action::AvsOnly,
    Action::Refund,
    Action::Force,
];

/// The fields of a router account vault (spec), all required.
const VAULT_FIELDS: &[&str] = &[
    "payment_method",
    "action",
    "location_id",
    "contact_id",
    "terminal_id",
];

/// What a request needs besides its body.
pub struct Desk<'a> {
    pub router: &'a Router,
    pub payments: &'a Payments,
    pub store: &'a Store,
}

/// The caller, as the holder acts for them.
pub fn requester(cx: &Cx, offset_s: i64) -> Requester {
    Requester {
        user_id: cx.user_id.clone(),
        location_id: cx.scope.location_id.clone(),
        path: cx.scope.path.clone(),
        tz: cx.scope.tz.name().to_string(),
        leaf: cx.scope.leaf,
        offset_s,
    }
}

/// Refuses members outside `allowed`, naming what the endpoint takes.
fn only(body: &Map<String, Json>, allowed: &[&str], what: &str) -> ApiResult<()> {
    let mut errors = FieldErrors::new();
    for name in body.keys() {
        if !allowed.contains(&name.as_str()) {
            let shown: String = name.chars().take(64).collect();
            errors.add(
                shown,
                format!(
                    "Not accepted on {what}: the terminal reads the card, and the endpoint takes {}.",
                    allowed.join(", ")
                ),
            );
        }
    }
    errors.into_result()
}

/// `payment_method` must be `cc` (the only method terminals take).
fn card_method(body: &Map<String, Json>, errors: &mut FieldErrors) {
    match body.get("payment_method") {
        None | Some(Json::Null) => errors.add("payment_method", blank("payment_method")),
        Some(Json::String(s)) if s == "cc" => {}
        Some(_) => errors.add("payment_method", "Payment Method must be cc on a terminal."),
    }
}

/// The terminal a request names: in the caller's scope, at the request's
/// location, active. Returns it, or records what is wrong.
async fn terminal(
    store: &Store,
    cx: &Cx,
    body: &Map<String, Json>,
    errors: &mut FieldErrors,
) -> ApiResult<Option<Record>> {
    let Some(id) = body
        .get("terminal_id")
        .and_then(Json::as_str)
        .filter(|s| !s.is_empty())
    else {
        errors.add("terminal_id", blank("terminal_id"));
        return Ok(None);
    };
    let (cx2, id) = (cx.clone(), id.to_string());
    let found = store
        .read(move |conn| Ok(query::find(conn, &TERMINAL, &cx2.scope, &id)?))
        .await?;
    let Some(t) = found else {
        errors.add("terminal_id", "terminal_id provided is not valid");
        return Ok(None);
    };
    let location = body
        .get("location_id")
        .and_then(Json::as_str)
        .unwrap_or(&cx.scope.location_id);
    if t.text("location_id") != Some(location) {
        errors.add("terminal_id", "The terminal belongs to another location.");
    } else if t.int("active") == Some(0) {
        errors.add("terminal_id", "The terminal is not active.");
    }
    Ok(Some(t))
}

fn overall_timeout(terminal: &Record) -> i64 {
    timeouts::get(terminal.text("terminal_timeouts"), "overall_timeout").unwrap_or(300)
}

/// `POST /v2/routertransactions`: a card payment on a terminal. Answers
/// `{"routertransaction": ...}` (201) once the terminal is done, the
/// payment approved or declined; a replay of its `Idempotency-Key`
/// answers what the first request stored without asking the terminal
/// again.
pub async fn transaction(
    desk: Desk<'_>,
    cx: &Cx,
    offset_s: i64,
    body: Map<String, Json>,
    idem: Option<Idempotency>,
) -> ApiResult<(u16, Json)> {
    only(&body, TRANSACTION_FIELDS, "router transactions")?;
    // A repeat of a request that was answered: that answer, without
    // asking the terminal again.
    if let Some(i) = &idem {
        if let Some((status, stored)) = idempotency::peek(desk.store, cx, &i.key, &i.fingerprint).await? {
            return Ok((status, router_answer(stored)));
        }
    }
    let mut errors = FieldErrors::new();
    card_method(&body, &mut errors);
    for name in ["location_id", "transaction_amount"] {
        if body.get(name).is_none_or(Json::is_null) {
            errors.add(name, blank(name));
        }
    }
    let terminal = terminal(desk.store, cx, &body, &mut errors).await?;
    let mut payment = body.clone();
    payment.remove("terminal_id");
    let parsed = match actions::parse(&payment, false) {
        Ok(p) if ACTIONS.contains(&p.action) => Some(p),
        Ok(p) => {
            errors.add(
                "action",
                format!(
                    "A terminal takes {}; {} runs on PUT /v2/transactions/{{id}} or POST /v2/transactions.",
                    ACTIONS.iter().map(|a| a.name()).collect::<Vec<_>>().join(", "),
                    p.action.name()
                ),
            );
            None
        }
        Err(ApiError::Validation(found)) => {
            for (field, messages) in found.0 {
                for m in messages {
                    errors.add(field.clone(), m);
                }
            }
            None
        }
        Err(other) => return Err(other),
    };
    errors.into_result()?;
    let (Some(terminal), Some(parsed)) = (terminal, parsed) else {
        return Err(ApiError::field("terminal_id", blank("terminal_id")));
    };
    desk.payments.precheck(cx, parsed, Origin::api()).await?;
    let work = Work::Payment {
        body: payment,
        idempotency: idem.map(|i| (i.key, i.fingerprint)),
    };
    let outcome = desk
        .router
        .submit(
            terminal.id(),
            terminal.text("location_id").unwrap_or_default(),
            work,
            requester(cx, offset_s),
            overall_timeout(&terminal),
        )
        .await?;
    let Outcome::Transaction { id } = outcome else {
        return Err(refusal(&outcome).unwrap_or_else(|| ApiError::internal("unexpected router outcome")));
    };
    let saved = body
        .get("save_account")
        .is_some_and(|v| matches!(v, Json::Bool(true)) || v.as_i64() == Some(1) || v.as_str() == Some("1"));
    let (cx2, id2) = (cx.clone(), id.clone());
    let record = desk
        .store
        .read(move |conn| Ok(query::find(conn, &TRANSACTION, &cx2.scope, &id2)?))
        .await?
        .ok_or_else(|| ApiError::internal("the terminal's transaction is not readable"))?;
    let mut out = engine::render(cx, &record);
    // Since 2026 the reference answers the expiry of a card save_account
    // stored.
    if saved && !record.get("account_vault_id").is_null() {
        let links = out.remove("_links");
        out.insert("exp_date".into(), json!(record.text("exp_date")));
        if let Some(links) = links {
            out.insert("_links".into(), links);
        }
    }
    Ok((201, json!({ "routertransaction": Json::Object(out) })))
}

/// A stored `{"transaction": ...}` answer as the router's.
fn router_answer(stored: Json) -> Json {
    match stored {
        Json::Object(mut map) => match map.remove("transaction") {
            Some(tx) => json!({ "routertransaction": tx }),
            None => Json::Object(map),
        },
        other => other,
    }
}

/// `POST /v2/routeraccountvaults`: a card read on a terminal and stored
/// on a contact. Answers `{"accountvault": ...}` (201).
pub async fn account_vault(
    desk: Desk<'_>,
    cx: &Cx,
    offset_s: i64,
    body: Map<String, Json>,
) -> ApiResult<(u16, Json)> {
    only(&body, VAULT_FIELDS, "router account vaults")?;
    let mut errors = FieldErrors::new();
    card_method(&body, &mut errors);
    match body.get("action") {
        Some(Json::String(s)) if s == "store" => {}
        None | Some(Json::Null) => errors.add("action", blank("action")),
        Some(_) => errors.add("action", "Action must be store."),
    }
    for name in ["location_id", "contact_id"] {
        match body.get(name) {
            Some(Json::String(s)) if !s.is_empty() => {}
            None | Some(Json::Null) => errors.add(name, blank(name)),
            Some(_) => errors.add(name, format!("{} must be an id.", label(name))),
        }
    }
    let terminal = terminal(desk.store, cx, &body, &mut errors).await?;
    if let (Some(contact), Some(location)) = (
        body.get("contact_id").and_then(Json::as_str),
        body.get("location_id").and_then(Json::as_str),
    ) {
        let (cx2, contact) = (cx.clone(), contact.to_string());
        let found = desk
            .store
            .read(move |conn| Ok(query::find(conn, &CONTACT, &cx2.scope, &contact)?))
            .await?;
        match found {
            None => errors.add("contact_id", "contact_id provided is not valid"),
            Some(c) if c.text("location_id") != Some(location) => {
                errors.add("contact_id", "The contact belongs to another location.")
            }
            Some(_) => {}
        }
    }
    errors.into_result()?;
    let Some(terminal) = terminal else {
        return Err(ApiError::field("terminal_id", blank("terminal_id")));
    };
    let outcome = desk
        .router
        .submit(
            terminal.id(),
            terminal.text("location_id").unwrap_or_default(),
            Work::Store { body },
            requester(cx, offset_s),
            overall_timeout(&terminal),
        )
        .await?;
    let Outcome::Vault { id } = outcome else {
        return Err(refusal(&outcome).unwrap_or_else(|| ApiError::internal("unexpected router outcome")));
    };
    let cx2 = cx.clone();
    let vault = desk
        .store
        .read(move |conn| Ok(query::find(conn, &ACCOUNT_VAULT, &cx2.scope, &id)?))
        .await?
        .ok_or_else(|| ApiError::internal("the terminal's account vault is not readable"))?;
    Ok((
        201,
        json!({ "accountvault": Json::Object(engine::render(cx, &vault)) }),
    ))
}

/// `POST /v2/deviceterms`: terms shown on the terminal, recorded with the
/// cardholder's answer (1000 accepted, with the signature; 1601
/// declined, also when the prompt timed out or was cancelled). 201, or
/// 200 for a declined term tried again by its api id.
pub async fn device_term(
    desk: Desk<'_>,
    cx: &Cx,
    offset_s: i64,
    body: Map<String, Json>,
) -> ApiResult<(u16, Json)> {
    let input = for_create(&DEVICE_TERM, &body).map_err(ApiError::Validation)?;
    let (cx2, record) = (cx.clone(), input.record.clone());
    desk.store
        .read(move |conn| crate::resources::deviceterms::precheck(&cx2, conn, &record))
        .await?;
    let mut errors = FieldErrors::new();
    let Some(terminal) = terminal(desk.store, cx, &body, &mut errors).await? else {
        errors.into_result()?;
        return Err(ApiError::field("terminal_id", blank("terminal_id")));
    };
    let outcome = desk
        .router
        .submit(
            terminal.id(),
            terminal.text("location_id").unwrap_or_default(),
            Work::Terms { body },
            requester(cx, offset_s),
            overall_timeout(&terminal),
        )
        .await?;
    let Outcome::Term { id, retried } = outcome else {
        return Err(refusal(&outcome).unwrap_or_else(|| ApiError::internal("unexpected router outcome")));
    };
    let cx2 = cx.clone();
    let term = desk
        .store
        .read(move |conn| Ok(query::find(conn, &DEVICE_TERM, &cx2.scope, &id)?))
        .await?
        .ok_or_else(|| ApiError::internal("the device term is not readable"))?;
    let status = if retried { 200 } else { 201 };
    Ok((
        status,
        json!({ "deviceterm": Json::Object(engine::render(cx, &term)) }),
    ))
}

/// `POST /v2/terminals/{id}/cancel`: stops what the terminal is doing
/// (unless a payment has begun). False when the device is offline.
pub async fn cancel(router: &Router, store: &Store, cx: &Cx, terminal_id: &str) -> ApiResult<bool> {
    let found = find(store, cx, terminal_id).await?;
    router.cancel_terminal(found.id()).await
}

/// A terminal of the caller's scope, or 404.
pub async fn find(store: &Store, cx: &Cx, terminal_id: &str) -> ApiResult<Record> {
    let (cx2, id) = (cx.clone(), terminal_id.to_string());
    store
        .read(move |conn| Ok(query::find(conn, &TERMINAL, &cx2.scope, &id)?))
        .await?
        .ok_or_else(|| ApiError::not_found(TERMINAL.name))
}
