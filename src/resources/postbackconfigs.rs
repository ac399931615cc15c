//! Postback configs: which events of which resource at a location are sent
//! where. Basic-auth credentials and the signing secret are sealed at rest
//! and never rendered in clear.

use crate::db::{Conn, Sql, Value};
use crate::engine::record::Record;
use crate::engine::resource::{Api, Expand, Field, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::validate::CreateInput;
use crate::engine::{query, Cx};
use crate::error::{ApiError, ApiResult, FieldErrors};
use serde_json::{Map, Value as Json};

use super::{ALL, LOCATION, PRODUCT_TRANSACTION, USER};

pub static POSTBACK_CONFIG: Resource = Resource {
    name: "postbackconfig",
    plural: "postbackconfigs",
    table: "postback_configs",
    model: "PostbackConfig",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::id("location_id")
            .pu()
            .required()
            .exact()
            .refers(&LOCATION)
            .doc("location whose resource events are wanted"),
        Field::text("resource", 1, 32)
            .pu()
            .required()
            .exact()
            .one_of(SUBSCRIBABLE),
        Field::id("product_transaction_id")
            .pu()
            .exact()
            .refers(&PRODUCT_TRANSACTION)
            .doc("required for transaction and transactionbatch"),
        Field::text("url", 1, 2048).pu().required().filter().doc(
            "absolute http(s) URL; private and loopback targets need FERROGATE_POSTBACK_ALLOW_PRIVATE=1",
        ),
        Field::flag("on_create").numbered().pu().filter(),
        Field::flag("on_update").numbered().pu().filter(),
        Field::flag("on_delete").numbered().pu().filter(),
        Field::flag("is_active")
            .numbered()
            .pu()
            .filter()
            .doc("1 when not sent"),
        Field::text("format", 1, 32).pu().exact().one_of(&["api-default"]),
        Field::int("number_of_attempts", 1, MAX_ATTEMPTS)
            .pu()
            .filter()
            .doc("attempts before a delivery fails (1-10; 1 when not sent)"),
        Field::int("attempt_interval", 1, 86_400)
            .pu()
            .filter()
            .doc("seconds between attempts (1-86400; 300 when not sent)"),
        Field::text("expands", 0, 512)
            .pu()
            .doc("comma list of the resource's expands added to the data, e.g. changelogs"),
        Field::text("basic_auth_username", 0, 255)
            .pu()
            .encrypted()
            .hidden()
            .doc("write-only; sealed at rest"),
        Field::text("basic_auth_password", 0, 255)
            .pu()
            .encrypted()
            .hidden()
            .doc("write-only; sealed at rest"),
        Field::text("signing_secret", 0, 128)
            .pu()
            .encrypted()
            .hidden()
            .doc("whsec_ + base64 of 24-64 bytes: adds Standard Webhooks signature headers; write-only"),
        Field::id("created_user_id").hidden(),
        Field::id("modified_user_id").hidden(),
        Field::ts("created_ts"),
        Field::ts("modified_ts"),
    ],
    default_sort: ("id", true),
    page_size: 20,
    scope: Scope::Column("location_id"),
    api_id: None,
    unique: None,
    expands: &[
        Expand::BelongsTo {
            name: "location",
            target: &LOCATION,
            column: "location_id",
        },
        Expand::BelongsTo {
            name: "product_transaction",
            target: &PRODUCT_TRANSACTION,
            column: "product_transaction_id",
        },
        Expand::Custom("basic_auth_username"),
        Expand::Custom("basic_auth_password"),
        Expand::Changelogs { users: &USER },
    ],
    list_params: &[],
    computed: &[
        (
            "has_basic_auth",
            "boolean",
            "deliveries carry an Authorization: Basic header",
        ),
        (
            "has_signing_secret",
            "boolean",
            "deliveries carry webhook-id, webhook-timestamp and webhook-signature headers",
        ),
    ],
    rules: &ConfigRules,
    search: None,
    cascades: &[],
    postback: None,
    api: Api::PLAIN,
    doc: "A postback subscription: events of a resource at a location, sent to a URL.",
};

pub const MAX_ATTEMPTS: i64 = 10;

/// The names of the resources that declare a `postback` (a unit test
/// holds the two lists together).
const SUBSCRIBABLE: &[&str] = &["contact", "transaction", "transactionbatch", "accountvault"];

/// The resource a config can subscribe to by this name: one that declares
/// a `postback`.
pub fn subscribable(name: &str) -> Option<&'static Resource> {
    ALL.iter()
        .copied()
        .find(|r| r.postback.is_some() && r.name == name)
}

/// What a masked credential looks like in a response.
const MASK: &str = "********";

struct ConfigRules;

impl ConfigRules {
    /// Checks a complete config (after defaults or with the update
    /// applied) and normalises its expands.
    /// `sealed`: whether the credentials in `record` are already sealed
    /// (an update) or still clear (a create, before the engine seals).
    fn check(&self, cx: &Cx, conn: &mut dyn Conn, record: &mut Record, sealed: bool) -> ApiResult<()> {
        let mut errors = FieldErrors::new();
        let resource = record.text("resource").unwrap_or_default().to_string();
        let target = subscribable(&resource);
        if target.is_none() {
            errors.add(
                "resource",
                "Resource must be one of contact, transaction, transactionbatch, accountvault.",
            );
        }
        let needs_pt = target
            .and_then(|t| t.postback)
            .is_some_and(|p| p.by_product_transaction);
        match record.text("product_transaction_id").map(str::to_string) {
            None if needs_pt => errors.add(
                "product_transaction_id",
                "Product Transaction Id cannot be blank for transaction and transactionbatch postbacks.",
            ),
            Some(pt_id) => {
                let pt = query::find(conn, &PRODUCT_TRANSACTION, &cx.scope, &pt_id)?;
                if pt.as_ref().and_then(|p| p.text("location_id")) != record.text("location_id") {
                    errors.add(
                        "product_transaction_id",
                        "Product Transaction Id must belong to the config's location.",
                    );
                }
            }
            None => {}
        }
        let url = record.text("url").unwrap_or_default().to_string();
        if let Err(message) = crate::postbacks::send::check_url(&url, cx.outbound.allow_private) {
            errors.add("url", message);
        }
        if record.text("format") != Some("api-default") {
            errors.add("format", "Format must be api-default.");
        }
        if let Some(target) = target {
            let mut names: Vec<&str> = Vec::new();
            for name in record
                .text("expands")
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                if target.expand(name).is_none() {
                    errors.add("expands", query::unknown_expand(target, name));
                } else if !names.contains(&name) {
                    names.push(name);
                }
            }
            let normalised = names.join(",");
            record.set("expands", normalised);
        }
        let user = credential(cx, record, "basic_auth_username", sealed);
        let password = credential(cx, record, "basic_auth_password", sealed);
        match (&user, &password) {
            (Some(u), _) if u.contains(':') => errors.add(
                "basic_auth_username",
                "Basic Auth Username cannot contain a colon.",
            ),
            (Some(_), None) => errors.add(
                "basic_auth_password",
                "Basic Auth Password cannot be blank when a username is set.",
            ),
            (None, Some(_)) => errors.add(
                "basic_auth_username",
                "Basic Auth Username cannot be blank when a password is set.",
            ),
            _ => {}
        }
        if let Some(secret) = credential(cx, record, "signing_secret", sealed) {
            if let Err(message) = crate::postbacks::signing::parse_secret(&secret) {
                errors.add("signing_secret", message);
            }
        }
        errors.into_result()
    }
}

/// A credential in clear; an empty string counts as unset.
fn credential(cx: &Cx, record: &Record, name: &str, sealed: bool) -> Option<String> {
    let text = record.text(name)?;
    let plain = if sealed {
        cx.keyring.decrypt(text).ok()?
    } else {
        text.to_string()
    };
    Some(plain).filter(|s| !s.is_empty())
}

const CREDENTIALS: [&str; 3] = ["basic_auth_username", "basic_auth_password", "signing_secret"];

impl Rules for ConfigRules {
    fn before_create(
        &self,
        cx: &Cx,
        conn: &mut dyn Conn,
        input: &mut CreateInput,
    ) -> ApiResult<Option<Record>> {
        let record = &mut input.record;
        for (name, default) in [
            ("on_create", Value::Int(0)),
            ("on_update", Value::Int(0)),
            ("on_delete", Value::Int(0)),
            ("is_active", Value::Int(1)),
            ("format", Value::from("api-default")),
            ("number_of_attempts", Value::Int(1)),
            ("attempt_interval", Value::Int(300)),
            ("expands", Value::from("")),
        ] {
            if record.get(name).is_null() {
                record.set(name, default);
            }
        }
        // Still clear here: the engine seals after this hook.
        for name in CREDENTIALS {
            if credential(cx, record, name, false).is_none() {
                record.set(name, Value::Null);
            }
        }
        self.check(cx, conn, record, false).map(|_| None)
    }

    fn before_update(&self, cx: &Cx, conn: &mut dyn Conn, _old: &Record, new: &mut Record) -> ApiResult<()> {
        for (name, default) in [
            ("format", Value::from("api-default")),
            ("expands", Value::from("")),
        ] {
            if new.get(name).is_null() {
                new.set(name, default);
            }
        }
        for name in CREDENTIALS {
            if credential(cx, new, name, true).is_none() {
                new.set(name, Value::Null);
            }
        }
        for name in [
            "on_create",
            "on_update",
            "on_delete",
            "is_active",
            "number_of_attempts",
            "attempt_interval",
        ] {
            if new.get(name).is_null() {
                return Err(ApiError::field(
                    name,
                    format!("{} cannot be blank.", crate::engine::validate::label(name)),
                ));
            }
        }
        self.check(cx, conn, new, true)
    }

    /// Pending and past deliveries go with the config.
    fn before_delete(&self, _cx: &Cx, conn: &mut dyn Conn, record: &Record) -> ApiResult<()> {
        conn.execute(&Sql::with(
            "DELETE FROM postback_deliveries WHERE postback_config_id = ?",
            vec![record.id().into()],
        ))?;
        Ok(())
    }

    fn render(&self, _cx: &Cx, record: &Record, out: &mut Map<String, Json>) {
        let links = out.remove("_links");
        out.insert(
            "has_basic_auth".into(),
            Json::Bool(!record.get("basic_auth_password").is_null()),
        );
        out.insert(
            "has_signing_secret".into(),
            Json::Bool(!record.get("signing_secret").is_null()),
        );
        if let Some(links) = links {
            out.insert("_links".into(), links);
        }
    }

    /// Credentials are shown masked: whether they are set, never what.
    fn expand(&self, _cx: &Cx, _conn: &mut dyn Conn, record: &Record, name: &str) -> ApiResult<Json> {
        Ok(match record.get(name) {
            Value::Null => Json::Null,
            _ => Json::String(MASK.into()),
        })
    }
}

pub static POSTBACK_DELIVERY: Resource = Resource {
    name: "postbackdelivery",
    plural: "postbackdeliveries",
    table: "postback_deliveries",
    model: "PostbackDelivery",
    view: None,
    fields: &[
        Field::id("id").filter().sort().doc("also the webhook-id header of signed deliveries"),
        Field::id("postback_config_id").exact(),
        Field::text("resource", 1, 32).exact(),
        Field::text("type", 1, 16)
            .column("event_type")
            .exact()
            .doc("CREATE, UPDATE or DELETE"),
        Field::id("record_id").exact().doc("id of the record the event is about"),
        Field::text("status", 1, 16)
            .exact()
            .sort()
            .doc("pending, delivered or failed"),
        Field::int("number_of_attempts", 0, 1_000_000)
            .column("attempts")
            .filter()
            .doc("attempts made so far"),
        Field::int("last_response_code", 0, 999)
            .filter()
            .doc("HTTP status of the last attempt; null when it got no answer"),
        Field::text("last_error", 0, 1024).doc("why the last attempt failed, when it got no answer"),
        Field::text("last_response", 0, 1024).doc("the first 1 KiB of the last answer's body"),
        Field::ts("last_attempt_ts"),
        Field::ts("next_attempt_ts"),
        Field::ts("delivered_ts"),
        Field::ts("created_ts"),
        Field::id("location_id").hidden(),
        Field::text("payload", 0, u32::MAX).hidden(),
    ],
    default_sort: ("id", true),
    page_size: 20,
    scope: Scope::Column("location_id"),
    api_id: None,
    unique: None,
    expands: &[
        Expand::BelongsTo {
            name: "postback_config",
            target: &POSTBACK_CONFIG,
            column: "postback_config_id",
        },
        Expand::Custom("data"),
    ],
    list_params: &[],
    computed: &[],
    rules: &DeliveryRules,
    search: None,
    cascades: &[],
    postback: None,
    api: Api::PLAIN,
    doc: "One event sent (or to be sent) to a postback config's URL: the delivery log. POST /{id}/redeliver sends a failed one again.",
};

struct DeliveryRules;

impl Rules for DeliveryRules {
    /// `data`: the record as it was sent.
    fn expand(&self, _cx: &Cx, _conn: &mut dyn Conn, record: &Record, name: &str) -> ApiResult<Json> {
        Ok(match (name, record.text("payload")) {
            ("data", Some(text)) => serde_json::from_str(text).unwrap_or(Json::Null),
            _ => Json::Null,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_declared_choices_are_the_resources_with_postbacks() {
        let mut with_postbacks: Vec<&str> = ALL
            .iter()
            .filter(|r| r.postback.is_some())
            .map(|r| r.name)
            .collect();
        let mut declared = SUBSCRIBABLE.to_vec();
        with_postbacks.sort_unstable();
        declared.sort_unstable();
        assert_eq!(with_postbacks, declared);
    }
}
