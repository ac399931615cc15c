//! The requests that reach a terminal, on the node that takes them:
//! router transactions, router account vaults and device terms. Each is
//! checked whole before the device is asked anything (a request that
//! cannot succeed never prompts a cardholder), handed to the router, and
//! answered from the record the holder made.

use super::protocol::Failure;
use super::router::{refusal, Limits, Outcome, Requester, Router, Work};
use super::timeouts;
use crate::db::Store;
use crate::engine::record::Record;
use crate::engine::resource::Resource;
use crate::engine::validate::{blank, for_create, label, parse_flag};
use crate::engine::{self, query, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::payments::actions::{self, Action, Parsed};
use crate::payments::{idempotency, Idempotency, Origin, Payments};
use crate::resources::{deviceterms, ACCOUNT_VAULT, CONTACT, DEVICE_TERM, TERMINAL, TRANSACTION};
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

/// Accepted on router transactions and ignored: a card's type comes from
/// the card the terminal reads (the reference's Python sample sends
/// `account_type`; the spec has it only among the answer's read-only
/// fields), as `/v2/transactions` ignores it on card payments.
pub const IGNORED_TRANSACTION_FIELDS: &[&str] = &["account_type"];

/// The actions that take a new card.
pub const ACTIONS: &[Action] = &[
    Action::Sale,
    Action::AuthOnly,
    Action::AvsOnly,
    Action::Refund,
    Action::Force,
];

/// A router transaction's `billing_street` takes 64 characters (spec;
/// 32 on other transactions).
const ROUTER_STREET_MAX: usize = 64;

/// And its `billing_zip` 10 (spec; 12 on other transactions).
const ROUTER_ZIP_MAX: usize = 10;

/// The fields of a router account vault (spec), all required.
const VAULT_FIELDS: &[&str] = &[
    "payment_method",
    "action",
    "location_id",
    "contact_id",
    "terminal_id",
];

/// What the terminal requests run with.
pub struct Services<'a> {
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

/// A router transaction's body (without `terminal_id`) as a payment
/// request, on both sides of the router: the transaction's rules, but
/// `billing_street` up to 64 characters.
pub fn parse_payment(body: &Map<String, Json>) -> ApiResult<Parsed> {
    let mut body = body.clone();
    let street = match body.remove("billing_street") {
        None | Some(Json::Null) => None,
        Some(Json::String(s)) if s.trim().is_empty() => None,
        Some(Json::String(s)) if s.trim().chars().count() <= ROUTER_STREET_MAX => Some(s.trim().to_string()),
        Some(_) => {
            return Err(ApiError::field(
                "billing_street",
                format!("Billing Street must be a text of at most {ROUTER_STREET_MAX} characters."),
            ))
        }
    };
    let mut parsed = actions::parse(&body, false)?;
    if parsed
        .input
        .record
        .text("billing_zip")
        .is_some_and(|zip| zip.chars().count() > ROUTER_ZIP_MAX)
    {
        return Err(ApiError::field(
            "billing_zip",
            format!("Billing Zip should contain at most {ROUTER_ZIP_MAX} characters."),
        ));
    }
    if let Some(street) = street {
        parsed.input.record.set("billing_street", street);
        parsed.input.present.push("billing_street");
    }
    Ok(parsed)
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

/// A record of the caller's scope.
async fn find(store: &Store, cx: &Cx, res: &'static Resource, id: &str) -> ApiResult<Option<Record>> {
    let (cx, id) = (cx.clone(), id.to_string());
    store
        .read(move |conn| Ok(query::find(conn, res, &cx.scope, &id)?))
        .await
}

/// The terminal a request names: in the caller's scope, at the request's
/// location, active. Returns it, or records what is wrong.
async fn terminal(
    store: &Store,
    cx: &Cx,
    body: &Map<String, Json>,
    errors: &mut FieldErrors,
) -> ApiResult<Option<Record>> {
    let id = match body.get("terminal_id") {
        Some(Json::String(s)) if !s.is_empty() => s.as_str(),
        None | Some(Json::Null) | Some(Json::String(_)) => {
            errors.add("terminal_id", blank("terminal_id"));
            return Ok(None);
        }
        Some(_) => {
            errors.add("terminal_id", "Terminal Id must be a string.");
            return Ok(None);
        }
    };
    let Some(t) = find(store, cx, &TERMINAL, id).await? else {
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

/// Added to a device's own prompt time-out before the gateway stops
/// waiting for it: the device's report of that time-out may be on its way.
const DEVICE_SLACK_S: i64 = 5;

/// How long the origin waits (ADR 0020): the terminal's
/// `overall_timeout`, and the device's prompt, made of the time-outs
/// named in `prompt`, answered as `failure` when nothing came back
/// within their sum (and a little slack).
fn limits(terminal: &Record, prompt: &[&str], failure: Failure) -> Limits {
    let stored = terminal.text("terminal_timeouts");
    let seconds = |name: &str| timeouts::get(stored, name).unwrap_or(0);
    Limits {
        overall_s: timeouts::get(stored, "overall_timeout").unwrap_or(300),
        prompt: Some((
            prompt.iter().map(|name| seconds(name)).sum::<i64>() + DEVICE_SLACK_S,
            failure,
        )),
    }
}

/// The record the holder made, or the refusal the outcome stands for.
/// Also whether a device term was an earlier one tried again.
async fn record_of(
    store: &Store,
    cx: &Cx,
    res: &'static Resource,
    outcome: Outcome,
) -> ApiResult<(Record, bool)> {
    let (id, retried) = match outcome {
        Outcome::Transaction { id } | Outcome::Vault { id } => (id, false),
        Outcome::Term { id, retried } => (id, retried),
        other => {
            return Err(
                refusal(&other).unwrap_or_else(|| ApiError::internal("a router outcome without a record"))
            )
        }
    };
    let record = find(store, cx, res, &id)
        .await?
        .ok_or_else(|| ApiError::internal("the record a terminal made is not readable"))?;
    Ok((record, retried))
}

/// `POST /v2/routertransactions`: a card payment on a terminal. Answers
/// `{"routertransaction": ...}` (201) once the terminal is done, the
/// payment approved or declined; a replay of its `Idempotency-Key`
/// answers what the first request stored without asking the terminal
/// again.
pub async fn transaction(
    services: Services<'_>,
    cx: &Cx,
    offset_s: i64,
    body: Map<String, Json>,
    idem: Option<Idempotency>,
) -> ApiResult<(u16, Json)> {
    let mut body = body;
    for name in IGNORED_TRANSACTION_FIELDS {
        body.remove(*name);
    }
    only(&body, TRANSACTION_FIELDS, "router transactions")?;
    let saved = body.get("save_account").and_then(parse_flag) == Some(true);
    // A repeat of a request that was answered: that answer, without
    // asking the terminal again.
    if let Some(i) = &idem {
        if let Some((status, stored)) = idempotency::peek(services.store, cx, &i.key, &i.fingerprint).await? {
            return replay(services.store, cx, status, stored, saved).await;
        }
    }
    let mut errors = FieldErrors::new();
    card_method(&body, &mut errors);
    for name in ["location_id", "transaction_amount"] {
        if body.get(name).is_none_or(Json::is_null) {
            errors.add(name, blank(name));
        }
    }
    let terminal = terminal(services.store, cx, &body, &mut errors).await?;
    let mut payment = body;
    payment.remove("terminal_id");
    let parsed = match parse_payment(&payment) {
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
    services.payments.precheck(cx, parsed, Origin::api()).await?;
    let work = Work::Payment {
        body: payment,
        idempotency: idem,
    };
    let outcome = services
        .router
        .submit(
            terminal.id(),
            work,
            requester(cx, offset_s),
            // The card comes once it is presented, its PIN entered and
            // any tip or cashback chosen (screens the device times).
            limits(
                &terminal,
                &["card_entry_timeout", "pin_entry_timeout", "tip_cashback_timeout"],
                Failure::CardEntryTimeout,
            ),
        )
        .await?;
    let (record, _) = record_of(services.store, cx, &TRANSACTION, outcome).await?;
    Ok((201, transaction_answer(cx, &record, saved)))
}

/// `{"routertransaction": ...}`; since 2026 the reference answers the
/// expiry of a card `save_account` stored.
fn transaction_answer(cx: &Cx, record: &Record, saved: bool) -> Json {
    let mut out = engine::render(cx, record);
    if saved && !record.get("account_vault_id").is_null() {
        let links = out.remove("_links");
        out.insert("exp_date".into(), json!(record.text("exp_date")));
        if let Some(links) = links {
            out.insert("_links".into(), links);
        }
    }
    json!({ "routertransaction": Json::Object(out) })
}

/// The answer kept under an `Idempotency-Key`, as the router answers: the
/// payment core keeps `{"transaction": ...}`.
async fn replay(store: &Store, cx: &Cx, status: u16, stored: Json, saved: bool) -> ApiResult<(u16, Json)> {
    let id = stored["transaction"]["id"].as_str().map(str::to_string);
    let record = match id {
        Some(id) => find(store, cx, &TRANSACTION, &id).await?,
        None => None,
    };
    Ok(match record {
        Some(record) => (status, transaction_answer(cx, &record, saved)),
        // A refusal kept under the key: as it was.
        None => (status, stored),
    })
}

/// `POST /v2/routeraccountvaults`: a card read on a terminal and stored
/// on a contact. Answers `{"accountvault": ...}` (201).
pub async fn account_vault(
    services: Services<'_>,
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
    let terminal = terminal(services.store, cx, &body, &mut errors).await?;
    if let (Some(contact), Some(location)) = (
        body.get("contact_id").and_then(Json::as_str),
        body.get("location_id").and_then(Json::as_str),
    ) {
        match find(services.store, cx, &CONTACT, contact).await? {
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
    let outcome = services
        .router
        .submit(
            terminal.id(),
            Work::Store { body },
            requester(cx, offset_s),
            limits(&terminal, &["card_entry_timeout"], Failure::CardEntryTimeout),
        )
        .await?;
    let (vault, _) = record_of(services.store, cx, &ACCOUNT_VAULT, outcome).await?;
    Ok((
        201,
        json!({ "accountvault": Json::Object(engine::render(cx, &vault)) }),
    ))
}

/// `POST /v2/deviceterms`: terms shown on the terminal, recorded with the
/// cardholder's answer (1000 accepted, with the signature; 1601
/// declined, also when the prompt timed out or was cancelled). 201, or
/// 200 for a declined term tried again by its api id. The answer shows
/// the signature the device captured, as reads do.
///
/// A `device_terms_api_id` is claimed before anything is checked or
/// shown and released when the request ends, so two requests naming the
/// same api id cannot both prompt a cardholder for a term only one of
/// them could record.
pub async fn device_term(
    services: Services<'_>,
    cx: &Cx,
    offset_s: i64,
    body: Map<String, Json>,
) -> ApiResult<(u16, Json)> {
    let input = for_create(&DEVICE_TERM, &body).map_err(ApiError::Validation)?;
    // Checked before the claim too, so that no claim is ever made at a
    // location outside the caller's scope (prompt_term checks again under
    // the claim, where the answer counts).
    let (cx2, record) = (cx.clone(), input.record.clone());
    services
        .store
        .read(move |conn| deviceterms::precheck(&cx2, conn, &record))
        .await?;
    let claim = match (
        input.record.text("location_id"),
        input.record.text("device_terms_api_id").filter(|s| !s.is_empty()),
    ) {
        (Some(location), Some(api_id)) => Some(ApiIdClaim {
            location_id: location.to_string(),
            api_id: api_id.to_string(),
            claim_id: crate::ids::new_id(),
        }),
        _ => None,
    };
    let mut held = ClaimHeld {
        store: services.store.clone(),
        claim: None,
    };
    if let Some(c) = claim {
        let (now, taking) = (cx.now, c.clone());
        services
            .store
            .write(move |conn| {
                deviceterms::claim_api_id(conn, &taking.location_id, &taking.api_id, &taking.claim_id, now)
            })
            .await?;
        held.claim = Some(c);
    }
    let answered = prompt_term(&services, cx, offset_s, body, input.record).await;
    if let Some(c) = held.claim.take() {
        if let Err(e) = c.release(services.store).await {
            // Taken over once stale (see deviceterms::claim_api_id).
            tracing::warn!(error = %e, "a device term's api id claim was not released");
        }
    }
    answered
}

/// A claim the request holds until it releases it. A client that hangs
/// up does not end the request (its work is a task of its own, see
/// `http::service`); dropped unreleased all the same (a panic, a
/// shutdown), the claim is released by a task of its own rather than
/// left for the stale time.
struct ClaimHeld {
    store: Store,
    claim: Option<ApiIdClaim>,
}

impl Drop for ClaimHeld {
    fn drop(&mut self) {
        if let Some(c) = self.claim.take() {
            let store = self.store.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    if let Err(e) = c.release(&store).await {
                        tracing::warn!(error = %e, "a device term's api id claim was not released");
                    }
                });
            }
        }
    }
}

impl ApiIdClaim {
    async fn release(self, store: &Store) -> ApiResult<()> {
        store
            .write(move |conn| {
                deviceterms::release_api_id(conn, &self.location_id, &self.api_id, &self.claim_id)
            })
            .await
    }
}

/// A `device_terms_api_id` held by one request.
#[derive(Clone)]
struct ApiIdClaim {
    location_id: String,
    api_id: String,
    claim_id: String,
}

/// The device term's checks, its prompt and the answer (the api id, if
/// any, is claimed).
async fn prompt_term(
    services: &Services<'_>,
    cx: &Cx,
    offset_s: i64,
    body: Map<String, Json>,
    record: Record,
) -> ApiResult<(u16, Json)> {
    let cx2 = cx.clone();
    services
        .store
        .read(move |conn| deviceterms::precheck(&cx2, conn, &record))
        .await?;
    let mut errors = FieldErrors::new();
    let Some(terminal) = terminal(services.store, cx, &body, &mut errors).await? else {
        errors.into_result()?;
        return Err(ApiError::field("terminal_id", blank("terminal_id")));
    };
    let outcome = services
        .router
        .submit(
            terminal.id(),
            Work::Terms { body },
            requester(cx, offset_s),
            limits(&terminal, &["device_terms_prompt_timeout"], Failure::TermsTimeout),
        )
        .await?;
    let (term, retried) = record_of(services.store, cx, &DEVICE_TERM, outcome).await?;
    let status = if retried { 200 } else { 201 };
    let cx2 = cx.clone();
    let shown = services
        .store
        .read(move |conn| engine::render_read(&cx2, conn, &term, &[], &[]))
        .await?;
    Ok((status, json!({ "deviceterm": shown })))
}

/// A terminal of the caller's scope, or 404.
pub async fn terminal_of(store: &Store, cx: &Cx, terminal_id: &str) -> ApiResult<Record> {
    find(store, cx, &TERMINAL, terminal_id)
        .await?
        .ok_or_else(|| ApiError::not_found(TERMINAL.name))
}
