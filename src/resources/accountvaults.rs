//! Account vaults: tokens standing for a card (`cc`) or bank account
//! (`ach`). The full number, SSN digits and licence number are sealed at
//! rest and masked in every response; CVV is never accepted.

use crate::cards::{aba_ok, check_exp, check_pan, check_sec_code, months_until};
use crate::db::Conn;
use crate::engine::record::Record;
use crate::engine::resource::{Api, Expand, Field, Pattern, Postback, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::validate::{blank, CreateInput};
use crate::engine::{query, render, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use serde_json::{json, Map, Value as Json};

use super::notes::notes_cascade;
use super::product_transactions::{ach_profiles, check_identity, default_for, settings};
use super::{CONTACT, LOCATION, USER};

pub static ACCOUNT_VAULT: Resource = Resource {
    name: "accountvault",
    plural: "accountvaults",
    table: "account_vaults",
    model: "AccountVault",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::text("title", 0, 64).pu().filter().sort(),
        Field::text("payment_method", 2, 3)
            .post()
            .required()
            .exact()
            .one_of(super::PAYMENT_METHODS),
        Field::text("account_holder_name", 1, 32)
            .pu()
            .filter()
            .sort()
            .doc("required for ach"),
        Field::text("account_number", 4, 19)
            .post()
            .secret()
            .pattern(Pattern::Digits)
            .doc("cc 13-19 digits (Luhn), ach 4-19; returned masked"),
        // Bounds are checked as MMYY by the rules, with a message that says so.
        Field::text("exp_date", 1, 16).pu().filter().doc("MMYY, cc only"),
        Field::text("account_type", 1, 32)
            .post()
            .exact()
            .doc("ach: checking or savings; cc: derived brand"),
        Field::flag("is_company").post().filter().doc("required for ach"),
        Field::text("routing", 9, 9)
            .post()
            .exact()
            .pattern(Pattern::Digits)
            .doc("ach: ABA routing number"),
        Field::text("account_vault_api_id", 1, 36)
            .pu()
            .exact()
            .pattern(Pattern::Alnum)
            .doc("unique per location"),
        Field::text("accountvault_c1", 0, 128).pu().filter(),
        Field::text("accountvault_c2", 0, 128).pu().filter(),
        Field::text("accountvault_c3", 0, 128).pu().filter(),
        Field::text("ach_sec_code", 0, 3)
            .pu()
            .exact()
            .one_of(crate::cards::ACH_SEC_CODES)
            .doc("ach; WEB when not given"),
        Field::text("billing_address", 1, 32).pu().filter(),
        Field::text("billing_city", 1, 36).pu().filter(),
        Field::text("billing_state", 2, 2)
            .pu()
            .filter()
            .pattern(Pattern::State),
        Field::text("billing_zip", 4, 12)
            .pu()
            .filter()
            .pattern(Pattern::Zip),
        Field::text("billing_phone", 1, 10)
            .pu()
            .filter()
            .pattern(Pattern::Digits),
        Field::id("contact_id").pu().filter().refers(&CONTACT),
        Field::text("customer_id", 1, 50).pu().exact(),
        Field::text("dl_number", 1, 50)
            .pu()
            .secret()
            .doc("with dl_state; returned masked"),
        Field::text("dl_state", 2, 2)
            .pu()
            .filter()
            .pattern(Pattern::State)
            .doc("with dl_number"),
        Field::text("dob_year", 4, 4).post().pattern(Pattern::Digits),
        Field::text("ssn4", 4, 4)
            .post()
            .secret()
            .pattern(Pattern::Digits)
            .doc("returned masked"),
        Field::text("ticket", 1, 36)
            .post()
            .transient()
            .doc("create from a hosted-form ticket"),
        Field::id("previous_transaction_id")
            .post()
            .transient()
            .doc("create from a transaction"),
        Field::id("location_id")
            .post()
            .required()
            .filter()
            .refers(&LOCATION),
        Field::text("first_six", 0, 6).filter(),
        Field::text("last_four", 0, 4).filter(),
        Field::flag("has_recurring").filter(),
        Field::int("active", 0, 1).filter(),
        Field::flag("cau_subscribed")
            .filter()
            .doc("subscribed to the card account updater"),
        Field::ts("cau_subscribed_ts"),
        Field::id("created_user_id").exact(),
        Field::id("modified_user_id").hidden(),
        Field::ts("created_ts"),
        Field::ts("modified_ts"),
    ],
    default_sort: ("id", true),
    page_size: 20,
    scope: Scope::Column("location_id"),
    api_id: Some("account_vault_api_id"),
    unique: Some("account_vault_api_id"),
    expands: &[
        Expand::BelongsTo {
            name: "contact",
            target: &CONTACT,
            column: "contact_id",
        },
        Expand::BelongsTo {
            name: "created_user",
            target: &USER,
            column: "created_user_id",
        },
        Expand::BelongsTo {
            name: "location",
            target: &LOCATION,
            column: "location_id",
        },
        Expand::CustomRecords {
            name: "product_transaction",
            permission: "producttransactions.read",
            many: false,
        },
        Expand::CustomRecords {
            name: "signature",
            permission: "signatures.read",
            many: false,
        },
        Expand::CustomRecords {
            name: "account_vault_cau_product_transaction",
            permission: "producttransactions.read",
            many: false,
        },
        Expand::Custom("account_vault_cau_logs"),
        Expand::Changelogs { users: &USER },
    ],
    list_params: &[],
    computed: &[(
        "expiring_in_months",
        "integer",
        "months until exp_date (0: this month, negative: expired); null for ach",
    )],
    rules: &AccountVaultRules,
    search: None,
    cascades: &[notes_cascade()],
    postback: Some(Postback {
        by_product_transaction: false,
    }),
    api: Api::PLAIN,
    doc: "A token standing for a card or bank account: use account_vault_id instead of card data.",
};

struct AccountVaultRules;

/// Where the payment data of a new vault comes from.
enum Source {
    /// Card or bank numbers in the request.
    Direct,
    /// A single-use ticket from a hosted form (hosted forms issue them).
    Ticket,
    /// The account of an earlier transaction (the transactions feature).
    PreviousTransaction,
}

fn source(input: &CreateInput) -> Source {
    let text = |k: &str| input.transient.get(k).and_then(Json::as_str).map(str::to_string);
    match (text("ticket"), text("previous_transaction_id")) {
        (Some(t), _) if !t.trim().is_empty() => Source::Ticket,
        (_, Some(p)) if !p.trim().is_empty() => Source::PreviousTransaction,
        _ => Source::Direct,
    }
}

fn present(record: &Record, field: &str) -> bool {
    !record.get(field).is_null()
}

fn check_card(cx: &Cx, record: &mut Record, errors: &mut FieldErrors, creating: bool) {
    if creating {
        match record.text("account_number").map(str::to_string) {
            None => errors.add("account_number", blank("account_number")),
            Some(pan) => match check_pan(&pan) {
                Ok(account_type) => {
                    record.set("account_type", account_type);
                    record.set("first_six", pan[..6].to_string());
                    record.set("last_four", pan[pan.len() - 4..].to_string());
                }
                Err(msg) => errors.add("account_number", msg),
            },
        }
        for ach_only in ["routing", "is_company", "dob_year", "ssn4", "ach_sec_code"] {
            if present(record, ach_only) {
                errors.add(ach_only, format!("{ach_only} applies to ach accounts only."));
            }
        }
    }
    match record.text("exp_date") {
        None => errors.add("exp_date", blank("exp_date")),
        Some(exp) => {
            if let Err(msg) = check_exp(exp, cx.now) {
                errors.add("exp_date", msg);
            }
        }
    }
}

fn check_bank(conn: &mut dyn Conn, cx: &Cx, record: &mut Record, errors: &mut FieldErrors) -> ApiResult<()> {
    match record.text("account_number") {
        None => errors.add("account_number", blank("account_number")),
        Some(n) => {
            if !(4..=19).contains(&n.len()) {
                errors.add("account_number", "Account Number must be 4 to 19 digits for ach.");
            } else {
                // Bank numbers can be short: no leading digits, and the last
                // four only when they are at most half of the number.
                let n = n.to_string();
                if n.len() >= 8 {
                    record.set("last_four", n[n.len() - 4..].to_string());
                }
            }
        }
    }
    match record.text("routing") {
        None => errors.add("routing", blank("routing")),
        Some(r) if !aba_ok(r) => errors.add("routing", "Routing is not a valid ABA routing number."),
        _ => {}
    }
    match record.text("account_type") {
        None => errors.add("account_type", blank("account_type")),
        Some("checking" | "savings") => {}
        Some(_) => errors.add("account_type", "Account Type must be checking or savings."),
    }
    for field in ["is_company", "account_holder_name"] {
        if !present(record, field) {
            errors.add(field, blank(field));
        }
    }
    if present(record, "exp_date") {
        errors.add("exp_date", "exp_date applies to cc accounts only.");
    }
    match record.text("ach_sec_code") {
        None => record.set("ach_sec_code", "WEB"),
        Some(code) => {
            if let Err(msg) = check_sec_code(code) {
                errors.add("ach_sec_code", msg);
            }
        }
    }
    // What the location's ACH processor profile requires.
    let location_id = record.text("location_id").unwrap_or_default().to_string();
    if let Some(pt) = default_for(conn, cx, &location_id, "ach")? {
        // The profile of the vault's SEC code, else the first one.
        let profiles = ach_profiles(&settings(&pt));
        let code = record.text("ach_sec_code").unwrap_or("WEB");
        let profile = profiles
            .iter()
            .find(|p| p.sec_code == code)
            .or(profiles.first())
            .cloned()
            .unwrap_or_default();
        check_identity(&profile.required, |f| present(record, f), errors);
        for field in &profile.required {
            if ACCOUNT_VAULT.field(field).is_some() && !present(record, field) {
                errors.add(field.as_str(), blank(field));
            }
        }
    }
    Ok(())
}

/// dl_number and dl_state go together.
fn check_licence(record: &Record, errors: &mut FieldErrors) {
    match (present(record, "dl_number"), present(record, "dl_state")) {
        (true, false) => errors.add("dl_state", "Dl State must be sent together with dl_number."),
        (false, true) => errors.add("dl_number", "Dl Number must be sent together with dl_state."),
        _ => {}
    }
}

fn api_id_taken(conn: &mut dyn Conn, cx: &Cx, record: &Record) -> ApiResult<bool> {
    match (record.text("location_id"), record.text("account_vault_api_id")) {
        (Some(loc), Some(api_id)) => Ok(
            query::find_by_api_id(conn, &ACCOUNT_VAULT, &cx.scope, loc, api_id)?
                .is_some_and(|other| other.id() != record.id()),
        ),
        _ => Ok(false),
    }
}

/// Fills a new vault from a hosted page's ticket. It is redeemed inside
/// the vault's own write job, so a vault refused after this point rolls
/// the redemption back. The request may not also carry account data.
fn from_ticket(cx: &Cx, conn: &mut dyn Conn, input: &mut CreateInput) -> ApiResult<()> {
    let ticket = input
        .transient
        .get("ticket")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .trim()
        .to_string();
    let record = &mut input.record;
    for field in ["account_number", "exp_date", "routing"] {
        if !record.get(field).is_null() {
            return Err(ApiError::field(
                field,
                format!("Send {field} or ticket, not both."),
            ));
        }
    }
    let location_id = record.text("location_id").unwrap_or_default().to_string();
    let (method, account) = crate::hosted::tickets::redeem(conn, &cx.keyring, &ticket, &location_id, cx.now)?;
    if let Some(sent) = record.text("payment_method") {
        if sent != method {
            return Err(ApiError::field(
                "payment_method",
                format!("The ticket holds a {method} account."),
            ));
        }
    }
    record.set("payment_method", method);
    for (name, value) in account {
        if let Json::String(v) = value {
            let always = matches!(name.as_str(), "account_number" | "exp_date" | "routing");
            if always || record.get(&name).is_null() {
                record.set(&name, v);
            }
        }
    }
    Ok(())
}

/// Fills a new vault from the account of an earlier transaction (its
/// sealed number, expiry or bank details); what the request sends wins.
fn from_transaction(cx: &Cx, conn: &mut dyn Conn, input: &mut CreateInput) -> ApiResult<()> {
    let id = input
        .transient
        .get("previous_transaction_id")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_string();
    let invalid = || {
        ApiError::field(
            "previous_transaction_id",
            "previous_transaction_id provided is not valid",
        )
    };
    let tx = query::find(conn, &super::TRANSACTION, &cx.scope, &id)?.ok_or_else(invalid)?;
    let source = crate::payments::source::account_of(cx, &tx).ok_or_else(invalid)?;
    let record = &mut input.record;
    if !record.get("account_number").is_null() {
        return Err(ApiError::field(
            "account_number",
            "Send account_number or previous_transaction_id, not both.",
        ));
    }
    let method = tx.text("payment_method").unwrap_or("cc").to_string();
    if let Some(sent) = record.text("payment_method") {
        if sent != method {
            return Err(ApiError::field(
                "payment_method",
                format!("The previous transaction is a {method} transaction."),
            ));
        }
    }
    record.set("payment_method", method);
    let mut fill = |name: &str, value: Option<String>| {
        if record.get(name).is_null() {
            record.set(name, value);
        }
    };
    fill(
        "account_holder_name",
        tx.text("account_holder_name").map(str::to_string),
    );
    fill("billing_zip", tx.text("billing_zip").map(str::to_string));
    fill("billing_address", tx.text("billing_street").map(str::to_string));
    match source {
        crate::payments::source::Source::Card(card) => {
            fill("exp_date", Some(card.data.exp_date));
            record.set("account_number", card.data.pan);
        }
        crate::payments::source::Source::Bank(bank) => {
            fill("routing", Some(bank.routing));
            fill("account_type", tx.text("account_type").map(str::to_string));
            fill("ach_sec_code", Some(bank.sec_code.clone()));
            if record.get("is_company").is_null() {
                record.set("is_company", (bank.sec_code == "CCD") as i64);
            }
            record.set("account_number", bank.account_number);
        }
    }
    Ok(())
}

impl Rules for AccountVaultRules {
    fn before_create(
        &self,
        cx: &Cx,
        conn: &mut dyn Conn,
        input: &mut CreateInput,
    ) -> ApiResult<Option<Record>> {
        match source(input) {
            Source::Direct => {}
            Source::Ticket => from_ticket(cx, conn, input)?,
            Source::PreviousTransaction => from_transaction(cx, conn, input)?,
        }
        let record = &mut input.record;
        let mut errors = FieldErrors::new();
        match record.text("payment_method") {
            Some("cc") => {
                let sent = record.text("account_type").map(str::to_string);
                check_card(cx, record, &mut errors, true);
                if let (Some(sent), Some(derived)) = (sent, record.text("account_type")) {
                    if sent != derived {
                        errors.add(
                            "account_type",
                            format!("account_type is derived from the card number for cc ({derived})."),
                        );
                    }
                }
            }
            Some("ach") => check_bank(conn, cx, record, &mut errors)?,
            _ => errors.add("payment_method", "Payment Method must be cc or ach."),
        }
        check_licence(record, &mut errors);
        if api_id_taken(conn, cx, record)? {
            errors.add(
                "account_vault_api_id",
                "Account Vault Api Id has already been taken at this location.",
            );
        }
        errors.into_result()?;
        record.set("has_recurring", 0);
        record.set("active", 1);
        record.set("cau_subscribed", 0);
        Ok(None)
    }

    fn before_update(&self, cx: &Cx, conn: &mut dyn Conn, old: &Record, new: &mut Record) -> ApiResult<()> {
        let mut errors = FieldErrors::new();
        if new.get("exp_date") != old.get("exp_date") {
            if old.text("payment_method") == Some("cc") {
                check_card(cx, new, &mut errors, false);
            } else {
                errors.add("exp_date", "exp_date applies to cc accounts only.");
            }
        }
        check_licence(new, &mut errors);
        if new.get("ach_sec_code") != old.get("ach_sec_code") {
            match (old.text("payment_method"), new.text("ach_sec_code")) {
                (Some("cc"), Some(_)) => {
                    errors.add("ach_sec_code", "ach_sec_code applies to ach accounts only.")
                }
                (_, Some(code)) => {
                    if let Err(msg) = check_sec_code(code) {
                        errors.add("ach_sec_code", msg);
                    }
                }
                _ => {}
            }
        }
        if old.text("payment_method") == Some("ach") && !present(new, "account_holder_name") {
            errors.add("account_holder_name", blank("account_holder_name"));
        }
        if new.get("account_vault_api_id") != old.get("account_vault_api_id") && api_id_taken(conn, cx, new)?
        {
            errors.add(
                "account_vault_api_id",
                "Account Vault Api Id has already been taken at this location.",
            );
        }
        errors.into_result()
    }

    fn before_delete(&self, cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
        // A vault that an active recurring charges cannot go (recurrings set
        // has_recurring while they are active); held ones end with it.
        if record.int("has_recurring") == Some(1) {
            return Err(ApiError::field("id", crate::billing::VAULT_BILLED));
        }
        crate::billing::end_for_vault(cx, conn, record.id())?;
        // The record was read unlocked: a schedule may have been set up since.
        crate::billing::refuse_vault_delete_if_billed(conn, record.id())
    }

    fn render(&self, cx: &Cx, record: &Record, out: &mut Map<String, Json>) {
        let months = match (record.text("payment_method"), record.text("exp_date")) {
            (Some("cc"), Some(exp)) => months_until(exp, cx.now).map(Json::from).unwrap_or(Json::Null),
            _ => Json::Null,
        };
        out.insert("expiring_in_months".into(), months);
    }

    fn expand(&self, cx: &Cx, conn: &mut dyn Conn, record: &Record, name: &str) -> ApiResult<Json> {
        Ok(match name {
            "product_transaction" => {
                let method = record.text("payment_method").unwrap_or("cc");
                let location = record.text("location_id").unwrap_or_default();
                match default_for(conn, cx, location, method)? {
                    Some(pt) => Json::Object(render(cx, &pt)),
                    None => Json::Null,
                }
            }
            "account_vault_cau_logs" => json!([]),
            "signature" => super::signatures::latest(cx, conn, "AccountVault", record.id())?,
            // The updater's product transaction arrives with its feature.
            _ => Json::Null,
        })
    }
}
