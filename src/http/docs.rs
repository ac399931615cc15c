//! `/v2/openapi.json`, generated from the same declarations that drive
//! validation, and a `/docs` page that renders it with no outside assets.

use super::{AppState, MOUNTED};
use crate::engine::query::MAX_PAGE_SIZE;
use crate::engine::resource::{Choices, Field, Kind, Pattern, Resource};
use crate::payments::actions::{Action, POST_ACTIONS, PUT_ACTIONS};
use crate::resources::TRANSACTION;
use axum::extract::State;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Map, Value as Json};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v2/openapi.json", get(openapi_json))
        .route("/docs", get(|| async { Html(DOCS_PAGE) }))
}

async fn openapi_json(State(app): State<AppState>) -> Response {
    axum::Json(openapi(&app.public_url)).into_response()
}

/// The regular expression a pattern's check agrees with (the check in
/// `engine::validate` is the authority; these say the same in the
/// document's terms).
fn pattern_regex(p: Pattern) -> Option<&'static str> {
    Some(match p {
        Pattern::None | Pattern::TimeZone => return None,
        Pattern::Zip => "^[A-Za-z0-9 -]*$",
        Pattern::Digits => "^[0-9]*$",
        Pattern::State => "^[A-Za-z]{2}$",
        Pattern::Alnum => "^[A-Za-z0-9]*$",
        Pattern::Reference => "^[A-Za-z0-9 ._/#-]*$",
        Pattern::Token => "^[A-Za-z0-9_-]*$",
        Pattern::Email => "^[^@\\s]+@[^@\\s.][^@\\s]*\\.[^@\\s]*[^@\\s.]$",
        Pattern::Domain => "^(https?://)?[A-Za-z0-9.:-]+(/[\\s\\S]*)?$",
        Pattern::Base64 => "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$",
        // The server also parses the address; the pattern says its alphabet.
        Pattern::Ip => "^[0-9A-Fa-f:.]*$",
        Pattern::OneLine => "^[^\\u0000-\\u001F\\u007F-\\u009F]*$",
        Pattern::Name => {
            "^[^\\s\\x00-\\x1F\\x7F-\\x9F](?:(?:[^\\s\\x00-\\x1F\\x7F-\\x9F]| )*[^\\s\\x00-\\x1F\\x7F-\\x9F])?$"
        }
    })
}

/// What a field accepts on input, stated exactly as
/// `engine::validate::convert` judges it: each accepted form one branch of
/// `anyOf` (a schema-driven fuzzer then finds no value the document forbids
/// that the server takes).
fn input_schema(f: &Field) -> Json {
    let blank =
        |pattern: &str| json!({ "type": "string", "pattern": pattern, "description": "blank: no value" });
    let mut forms = Vec::new();
    let mut describe = "";
    match f.kind {
        Kind::Id => {
            forms.push(json!({ "type": "string", "pattern": "^[A-Za-z0-9-]{24,36}$" }));
            if !f.required {
                forms.push(blank("^$"));
            }
            if f.zero_date {
                forms.push(json!({ "type": "string", "enum": ["0000-00-00"] }));
            }
        }
        Kind::Text { min, max } => {
            let mut text = json!({ "type": "string", "minLength": min, "maxLength": max });
            if let Some(re) = pattern_regex(f.pattern) {
                text["pattern"] = json!(re);
            }
            match f.choices {
                Choices::Text(values) => text["enum"] = json!(values),
                _ if f.pattern == Pattern::TimeZone => {
                    text = json!({ "$ref": "#/components/schemas/TimeZone" });
                }
                _ => {}
            }
            forms.push(text);
            // Numbers are taken as their digits (zip codes and phone
            // numbers often arrive so), then checked like the text.
            if f.choices == Choices::Any && f.pattern != Pattern::TimeZone {
                forms.push(json!({ "type": "integer", "description": "taken as its digits" }));
            }
            if !f.required {
                forms.push(blank("^\\s*$"));
            }
        }
        Kind::Int { min, max } => {
            let mut int = json!({ "type": "integer", "minimum": min, "maximum": max });
            if let Choices::Int(values) = f.choices {
                int["enum"] = json!(values);
            }
            forms.push(int);
            forms.push(
                json!({ "type": "string", "pattern": "^-?[0-9]+$", "description": "an integer as text" }),
            );
            if !f.required {
                forms.push(blank("^$"));
            }
        }
        Kind::Flag => {
            forms.push(json!({ "type": "boolean" }));
            forms.push(json!({ "type": "integer", "enum": [0, 1] }));
            forms.push(json!({ "type": "string", "enum": ["0", "1", "true", "false"] }));
            describe = "1/0, true/false";
        }
        Kind::Date => {
            forms.push(
                json!({ "type": "string", "format": "date", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$" }),
            );
            if !f.required {
                forms.push(blank("^$"));
            }
            if f.zero_date {
                forms.push(json!({ "type": "string", "enum": ["0000-00-00"], "description": "unset" }));
            }
        }
        Kind::Ts => forms.push(json!({ "type": "integer", "description": "epoch seconds" })),
        Kind::Money { max } => {
            forms.push(json!({ "type": "string", "pattern": "^[0-9]+(\\.[0-9]{1,2})?$" }));
            forms.push(
                json!({ "type": "number", "minimum": 0, "maximum": max as f64 / 100.0,
                "description": "in plain decimal form, at most two decimals (no exponent)" }),
            );
            if !f.required {
                forms.push(blank("^\\s*$"));
            }
            describe = "amount: digits, optionally a point and one or two decimals";
        }
        Kind::Tags => {
            forms.push(
                json!({ "type": "array", "maxItems": crate::engine::validate::MAX_TAGS,
                "items": { "type": "string", "maxLength": crate::engine::validate::MAX_TAG_TITLE } }),
            );
            forms.push(json!({ "type": "string", "description": "comma-separated titles" }));
            describe = "tag titles";
        }
        Kind::Json { max } => {
            forms.push(json!({ "type": "object" }));
            forms.push(json!({ "type": "array" }));
            forms.push(
                json!({ "type": "string", "description": "JSON text of an object or array, or blank" }),
            );
            let _ = max;
        }
    }
    let mut s = if forms.len() == 1 {
        forms.remove(0)
    } else {
        json!({ "anyOf": forms })
    };
    let notes = field_notes(f, describe);
    if let Json::Object(m) = &mut s {
        if !notes.is_empty() {
            m.insert("description".into(), json!(notes));
        }
        m.insert("nullable".into(), json!(!f.required));
    }
    s
}

/// How a field reads in a record.
fn output_schema(f: &Field) -> Json {
    let mut s = match f.kind {
        Kind::Id => json!({ "type": "string", "minLength": 24, "maxLength": 36 }),
        Kind::Text { min, max } => {
            let mut s = json!({ "type": "string", "minLength": min, "maxLength": max });
            if let Choices::Text(values) = f.choices {
                s["enum"] = json!(values);
            }
            s
        }
        Kind::Int { min, max } => {
            let mut s = json!({ "type": "integer", "minimum": min, "maximum": max });
            if let Choices::Int(values) = f.choices {
                s["enum"] = json!(values);
            }
            s
        }
        Kind::Flag if f.numbered => json!({ "type": "integer", "enum": [0, 1] }),
        Kind::Flag => json!({ "type": "boolean" }),
        Kind::Date if f.zero_date => {
            json!({ "type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$", "description": "yyyy-mm-dd; 0000-00-00 when unset" })
        }
        Kind::Date => json!({ "type": "string", "format": "date" }),
        Kind::Ts => json!({ "type": "integer", "description": "epoch seconds" }),
        Kind::Money { .. } => {
            json!({ "type": "string", "pattern": "^[0-9]+\\.[0-9]{2}$", "description": "amount with 2 decimals" })
        }
        Kind::Json { max } => {
            json!({ "description": format!("JSON object or array, at most {max} characters") })
        }
        Kind::Tags => json!({ "type": "array", "items": { "type": "object", "properties": {
            "id": { "type": "string", "description": "the title" }, "title": { "type": "string" } } } }),
    };
    let notes = field_notes(f, "");
    if let Json::Object(m) = &mut s {
        let own = m.get("description").and_then(Json::as_str).map(str::to_string);
        let all = [own.unwrap_or_default(), notes]
            .iter()
            .filter(|n| !n.is_empty())
            .cloned()
            .collect::<Vec<_>>();
        m.insert("description".into(), json!(all.join("; ")));
        m.insert("nullable".into(), json!(!f.required));
        if f.is_system() {
            m.insert("readOnly".into(), json!(true));
        }
    }
    s
}

/// The field's documentation and flags, in words.
fn field_notes(f: &Field, describe: &str) -> String {
    let mut notes = Vec::new();
    if !describe.is_empty() {
        notes.push(describe.to_string());
    }
    if !f.doc.is_empty() {
        notes.push(f.doc.to_string());
    }
    let mut flags = Vec::new();
    if f.post {
        flags.push(if f.required {
            "required on create"
        } else {
            "allowed on create"
        });
    }
    if f.put {
        flags.push(if f.put_required {
            "required on update"
        } else {
            "updatable"
        });
    }
    if !f.stored {
        flags.push("input only");
    }
    notes.push(if flags.is_empty() {
        "read only".into()
    } else {
        flags.join(", ")
    });
    if f.filter {
        let exact = f.exact || f.kind == Kind::Id;
        notes.push(if exact {
            "filter: exact".into()
        } else {
            "filter".into()
        });
    }
    if f.sort {
        notes.push("sortable".into());
    }
    notes.join("; ")
}

fn schemas(res: &Resource) -> (Json, Json, Json) {
    let mut record = Map::new();
    let mut create = Map::new();
    let mut update = Map::new();
    let mut required = Vec::new();
    let mut update_required = Vec::new();
    for f in res.fields {
        if !f.hidden && f.stored {
            record.insert(f.name.into(), output_schema(f));
        }
        let schema = input_schema(f);
        if f.post {
            create.insert(f.name.into(), schema.clone());
            if f.required {
                required.push(f.name);
            }
        }
        if f.put {
            update.insert(f.name.into(), schema);
            if f.put_required {
                update_required.push(f.name);
            }
        } else if crate::engine::validate::may_resend_unchanged(f) {
            let mut schema = schema;
            if let Json::Object(m) = &mut schema {
                let notes = m.get("description").and_then(Json::as_str).unwrap_or("");
                let notes = format!("{notes}; accepted on update only with the stored value");
                m.insert("description".into(), json!(notes));
            }
            update.insert(f.name.into(), schema);
        }
    }
    for (name, kind, doc) in res.computed {
        record.insert(
            (*name).into(),
            json!({ "type": kind, "description": doc, "readOnly": true, "nullable": true }),
        );
    }
    record.insert("_links".into(), json!({ "type": "object" }));
    let mut update = json!({ "type": "object", "properties": update, "additionalProperties": false });
    if !update_required.is_empty() {
        update["required"] = json!(update_required);
    }
    (
        json!({ "type": "object", "properties": record }),
        json!({ "type": "object", "properties": create, "required": required, "additionalProperties": false }),
        update,
    )
}

fn envelope(key: &str, schema: Json) -> Json {
    json!({ "type": "object", "properties": { key: schema }, "required": [key] })
}

fn body(schema: Json) -> Json {
    json!({ "required": true, "content": { "application/json": { "schema": schema } } })
}

fn reply(description: &str, schema: Json) -> Json {
    json!({ "description": description, "content": { "application/json": { "schema": schema } } })
}

fn article(name: &str) -> String {
    match name.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => format!("an {name}"),
        _ => format!("a {name}"),
    }
}

fn expand_list(res: &Resource) -> String {
    let names: Vec<&str> = res.expands.iter().map(|e| e.name()).collect();
    format!("comma list of: {}", names.join(", "))
}

fn filter_doc(f: &Field) -> &'static str {
    match f.kind {
        Kind::Text { .. } if f.exact => "exact; a comma list matches any",
        Kind::Text { .. } => "case-insensitive substring; a comma list matches any",
        Kind::Flag => "1 or 0",
        Kind::Ts => {
            "epoch seconds, a|b range, or today, yesterday, this week, last week, last 30 days, \
             last 90 days, this month, last month, custom (with <field>_from / <field>_to)"
        }
        Kind::Int { .. } | Kind::Date | Kind::Money { .. } => {
            "exact; a|b inclusive range; a comma list matches any"
        }
        Kind::Json { .. } => "not filterable",
        Kind::Tags => "a tag title, matched whole in any case; a comma list matches any",
        Kind::Id => "exact; a comma list matches any",
    }
}

fn list_param_doc(name: &str) -> &'static str {
    match name {
        "relationship" => {
            "direct (default): the caller's own location; child: the locations below it; all: both"
        }
        "product_transaction_active" => "1 or 0: only product transactions with that active flag",
        _ => "",
    }
}

/// The OpenAPI 3.0 document of every mounted resource.
pub fn openapi(public_url: &str) -> Json {
    let mut paths = Map::new();
    let mut components = Map::new();
    let errors = json!({ "$ref": "#/components/schemas/ValidationErrors" });
    let error = json!({ "$ref": "#/components/schemas/Error" });
    let read_errors = json!({
        "401": reply("missing or wrong credentials", error.clone()),
        "403": reply("missing permission", error.clone()),
        "404": reply("not found (or outside the caller's locations)", error.clone()),
        "422": reply("validation failed (unknown parameters, bad values)", errors.clone()),
    });
    let write_errors = merge(
        json!({
            "400": reply("malformed JSON, or a body that is not an object", error.clone()),
            "413": reply("body larger than 1 MiB", error.clone()),
            "415": reply("a form-encoded body (send JSON)", error.clone()),
        }),
        &read_errors,
    );
    for (res, verbs) in MOUNTED {
        let (record, create, update) = schemas(res);
        // A transaction PUT carries an action and the fields it accepts.
        let update = if res.api.update_takes_create_body {
            create.clone()
        } else {
            update
        };
        let name = res.name;
        components.insert(name.into(), record);
        let rref = json!({ "$ref": format!("#/components/schemas/{name}") });
        let one = envelope(name, rref.clone());
        let list = json!({ "type": "object", "properties": {
            res.plural: { "type": "array", "items": rref },
            "meta": { "$ref": "#/components/schemas/Meta" } } });
        let default_sort = format!(
            "{}{}",
            if res.default_sort.1 { "-" } else { "" },
            res.default_sort.0
        );
        let filters: Vec<Json> = res
            .fields
            .iter()
            .filter(|f| f.filter && !f.encrypted)
            .map(|f| json!({ "name": f.name, "in": "query", "schema": { "type": "string" }, "description": filter_doc(f) }))
            .chain(res.list_params.iter().map(|p| {
                json!({ "name": p, "in": "query", "schema": { "type": "string" }, "description": list_param_doc(p) })
            }))
            .chain([
                json!({ "name": "page", "in": "query", "schema": { "type": "integer", "minimum": 1, "default": 1 } }),
                json!({ "name": "page_size", "in": "query",
                    "schema": { "type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": res.page_size } }),
                json!({ "name": "sort", "in": "query", "schema": { "type": "string" },
                    "description": format!("field, or -field for descending; default {default_sort}") }),
                json!({ "name": "expand", "in": "query", "schema": { "type": "string" }, "description": expand_list(res) }),
                json!({ "name": "_format", "in": "query", "schema": { "type": "string", "enum": ["csv", "tsv"] },
                    "description": "csv or tsv: every selected record as a file (no page), in the list's sort; \
                        one line a record with its rendered fields (a voided transaction: its original line, then \
                        the void; an ACH return: the original, then the return, whose id ends in cb). A node runs \
                        a quarter of its database pool's worth of exports at once: one more answers 503 with \
                        Retry-After" }),
            ])
            .collect();
        let mut collection = Map::new();
        collection.insert(
            "get".into(),
            json!({ "summary": format!("List {}", res.plural), "operationId": format!("{}.list", res.plural),
                "tags": [res.plural], "parameters": filters,
                "responses": merge(json!({ "200": { "description": "a page (or, with _format, a file)",
                    "content": { "application/json": { "schema": list },
                        "text/csv": { "schema": { "type": "string" } },
                        "text/tab-separated-values": { "schema": { "type": "string" } } } } }), &read_errors) }),
        );
        if verbs.create {
            // The new record's id leads to the operations on it (the
            // fuzzer follows these links to real records).
            let mut links = Map::new();
            for (verb, on) in [("read", true), ("update", verbs.update), ("delete", verbs.delete)] {
                if on {
                    links.insert(
                        verb.into(),
                        json!({ "operationId": format!("{}.{verb}", res.plural),
                        "parameters": { "id": format!("$response.body#/{name}/id") } }),
                    );
                }
            }
            let mut created = json!({ "201": reply("created", one.clone()) });
            created["201"]["links"] = Json::Object(links);
            if res.api.create_may_update {
                created["200"] = reply(
                    "updated instead (update_if_exists=1 and the contact_api_id exists)",
                    one.clone(),
                );
            }
            collection.insert(
                "post".into(),
                json!({ "summary": format!("Create {}", article(name)), "operationId": format!("{}.create", res.plural),
                    "tags": [res.plural], "description": res.doc,
                    "requestBody": body(envelope(name, create)),
                    "responses": merge(created, &write_errors) }),
            );
        }
        paths.insert(res.path(), Json::Object(collection));

        let mut id_params = vec![
            json!({ "name": "id", "in": "path", "required": true, "schema": { "type": "string" },
            "description": if res.api_id.is_some() { "the record id, or with api_id=1 the integrator's own id" }
                else { "the record id" } }),
        ];
        if let Some(col) = res.api_id {
            id_params.push(
                json!({ "name": "api_id", "in": "query", "schema": { "type": "integer", "enum": [0, 1] },
                "description": format!("1: the path holds the {col}; 0 (or absent): the record id") }),
            );
            id_params.push(
                json!({ "name": "location_id", "in": "query", "schema": { "type": "string" },
                "description": "with api_id=1: the record's location (default: the caller's own)" }),
            );
        }
        let mut item = Map::new();
        item.insert("parameters".into(), Json::Array(id_params));
        item.insert(
            "get".into(),
            json!({ "summary": format!("Read {}", article(name)), "operationId": format!("{}.read", res.plural),
                "tags": [res.plural],
                "parameters": [{ "name": "expand", "in": "query", "schema": { "type": "string" }, "description": expand_list(res) }],
                "responses": merge(json!({ "200": reply("the record", one.clone()) }), &read_errors) }),
        );
        if verbs.update {
            item.insert(
                "put".into(),
                json!({ "summary": format!("Update {}", article(name)), "operationId": format!("{}.update", res.plural),
                    "tags": [res.plural],
                    "requestBody": body(envelope(name, update)),
                    "responses": merge(json!({ "200": reply("updated", one.clone()) }), &write_errors) }),
            );
        }
        if verbs.delete {
            let mut deleted = json!({ "204": { "description": "deleted" } });
            if res.api.delete_may_conflict {
                deleted["409"] = reply(
                    "refused: the record still holds others, or is your own",
                    errors.clone(),
                );
            }
            item.insert(
                "delete".into(),
                json!({ "summary": format!("Delete {}", article(name)), "operationId": format!("{}.delete", res.plural),
                    "tags": [res.plural],
                    "responses": merge(deleted, &read_errors) }),
            );
        }
        paths.insert(format!("{}/{{id}}", res.path()), Json::Object(item));
    }
    paths.insert(
        "/v2/users/me".into(),
        json!({ "get": { "summary": "The caller's own user", "tags": ["users"],
            "responses": merge(json!({ "200": reply("the record", envelope("user", json!({ "$ref": "#/components/schemas/user" }))) }), &read_errors) } }),
    );
    paths.insert(
        "/v2/users/{id}/generateuserapikey".into(),
        json!({ "post": { "summary": "Issue a new API key (the old one stops working; shown once)", "tags": ["users"],
            "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
            "responses": merge(json!({ "200": reply("the new key", json!({ "type": "object", "properties": {
                "user": { "type": "object", "properties": { "user_api_key": { "type": "string" } } } } })) }), &read_errors) } }),
    );
    paths.insert(
        "/v2/users/{id}/generateemulatorkey".into(),
        json!({ "post": { "summary": "Issue a short login and transaction key for Authorize.Net integrations (shown once)",
            "tags": ["users"],
            "description": "Authorize.Net's schema caps a login at 25 characters and a transaction key at 16; this pair \
                (20 and 16 characters) works with the emulator where the user id and API key do not fit. \
                The user's earlier pair stops working.",
            "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
            "responses": merge(json!({ "200": reply("the new pair", json!({ "type": "object", "properties": {
                "user": { "type": "object", "properties": { "emulator_login": { "type": "string" },
                    "emulator_transaction_key": { "type": "string" } } } } })) }), &read_errors) } }),
    );
    let s = |description: &str| json!({ "type": "string", "nullable": true, "description": description });
    let n = |description: &str| json!({ "type": "integer", "nullable": true, "description": description });
    components.insert(
        "bin".into(),
        json!({ "type": "object", "properties": {
            "bin": { "type": "string", "description": "the BIN as asked" },
            "card_brand": s("VISA, MASTERCARD, AMERICAN EXPRESS, DISCOVER, JCB, DINERS CLUB, UNIONPAY, MAESTRO (built in), or the imported scheme"),
            "issuing_organization": s("issuing bank"),
            "card_type": s("CREDIT, DEBIT or CHARGE"),
            "card_category": s("product or category as imported; PREPAID for prepaid cards without one"),
            "issuing_country_name_iso": s("ISO 3166-1 short name"),
            "issuing_country_code_iso_a2": s("ISO 3166-1 alpha-2"),
            "issuing_country_code_iso_a3": s("ISO 3166-1 alpha-3"),
            "issuing_country_iso_number": s("ISO 3166-1 numeric, three digits"),
            "issuing_organization_website": s("issuer website"),
            "issuing_organization_phone": s("issuer phone"),
            "max_pan_length": n("longest card number of the range or brand"),
            "bin_type": s("digits of the matched range's prefix: 8-digit, 6-digit; null when only the brand is known"),
            "is_regulated": { "type": "boolean", "nullable": true,
                "description": "US debit interchange regulation; false for non-US issuers and credit cards; null when unknown" },
            "fsa_indicator": s("not known from range data: null"),
            "created": n("when the matched range was imported (epoch seconds)"),
        } }),
    );
    paths.insert(
        "/v2/bins/{bin}".into(),
        json!({ "get": { "summary": "Look up a BIN: brand, PAN length and issuer", "tags": ["bins"],
            "description": "An 8-digit range match first, then 6 digits. Brand and length come from built-in \
                IIN ranges (no data needed); issuer fields from ranges loaded with `ferrogate bins import`, \
                null where unknown. Permission bins.read (roles 1, 2 and 132).",
            "parameters": [{ "name": "bin", "in": "path", "required": true,
                "schema": { "type": "string", "pattern": "^[0-9]{6,8}$" }, "description": "6 to 8 digits" }],
            "responses": merge(json!({
                "200": reply("the BIN record", envelope("bin", json!({ "$ref": "#/components/schemas/bin" }))),
                "404": reply("no brand or imported range knows the BIN", error.clone()),
                "422": reply("not 6 to 8 digits (errors.bin), or an unknown parameter", errors.clone()),
            }), &read_errors) } }),
    );
    paths.insert(
        "/v2/accountvaults/{id}/bininfo".into(),
        json!({ "get": { "summary": "BIN information of a card vault", "tags": ["accountvaults"],
            "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
            "responses": merge(json!({ "200": reply("the bininfo record", json!({ "type": "object" })) }), &read_errors) } }),
    );
    paths.insert(
        "/v2/accountvaultupdates".into(),
        json!({ "post": { "summary": "Subscribe card vaults to the card account updater, or unsubscribe them",
            "tags": ["accountvaults"],
            "description": "action: subscribe_all (default), subscribe_recurring_only, unsubscribe_all, \
                unsubscribe_non_recurring; account_vault_id and/or product_transaction_id (arrays of ids). \
                Only cc vaults are affected. One transaction; the answer lists what changed.",
            "requestBody": body(envelope("accountvaultupdate", json!({ "type": "object", "properties": {
                "action": { "type": "string" },
                "account_vault_id": { "type": "array", "items": { "type": "string" } },
                "product_transaction_id": { "type": "array", "items": { "type": "string" } } } }))),
            "responses": merge(json!({ "201": reply("what changed", json!({ "type": "object" })) }), &write_errors) } }),
    );
    let idem = json!({ "name": "Idempotency-Key", "in": "header", "schema": { "type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$" },
        "description": "1 to 255 visible ASCII characters; replays the first answer for 24 hours (header idempotent-replayed: true); 409 while the \
            first runs; 422 when reused with another body" });
    // One action field, two verbs: each lists the actions it runs.
    let action_names = |list: &[Action]| list.iter().map(|a| a.name()).collect::<Vec<_>>();
    if let Some(Json::Object(p)) = paths.get_mut("/v2/transactions") {
        if let Some(op) = p.get_mut("post") {
            op["requestBody"]["content"]["application/json"]["schema"]["properties"]["transaction"]
                ["properties"]["action"] = json!({ "type": "string", "enum": action_names(POST_ACTIONS) });
            op["parameters"] = json!([idem.clone()]);
            op["responses"]["409"] = reply(
                "the same Idempotency-Key is still being processed",
                errors.clone(),
            );
        }
    }
    if let Some(Json::Object(p)) = paths.get_mut("/v2/transactions/{id}") {
        if let Some(op) = p.get_mut("put") {
            op["requestBody"]["content"]["application/json"]["schema"]["properties"]["transaction"]
                ["properties"]["action"] = json!({ "type": "string", "enum": action_names(PUT_ACTIONS) });
            op["parameters"] = json!([idem.clone()]);
            op["responses"]["409"] = reply(
                "the same Idempotency-Key is still being processed",
                errors.clone(),
            );
        }
        if let Some(put) = p.get("put").cloned() {
            let mut post = put;
            post["summary"] = json!("Run a follow-up action (the same as PUT)");
            post["operationId"] = json!("transactions.update.post");
            p.insert("post".into(), post);
        }
    }
    let id_param = json!([{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }]);
    let tx_ref = envelope(
        "transaction",
        json!({ "$ref": "#/components/schemas/transaction" }),
    );
    paths.insert(
        "/v2/transactions/{id}/bininfo".into(),
        json!({ "get": { "summary": "BIN information of a card transaction", "tags": ["transactions"],
            "parameters": id_param.clone(),
            "responses": merge(json!({ "200": reply("the bininfo record", json!({ "type": "object" })) }), &read_errors) } }),
    );
    // The grammar of a transaction field, as POST /v2/transactions states it.
    let field_input = |name: &str| TRANSACTION.field(name).map(input_schema).unwrap_or(Json::Null);
    let mut idem_param = id_param.as_array().cloned().unwrap_or_default();
    idem_param.push(idem.clone());
    paths.insert(
        "/v2/transactions/{id}/override".into(),
        json!({ "post": { "summary": "Manager override of an ACH debit held with reason 1663", "tags": ["transactions"],
            "description": "Permission transactions.update. Only TEL, POP and C21 debits that ended in Manager Needed \
                (status 301, reason 1663; the sandbox holds such debits of 6.63) are overridden: the debit is approved \
                as sent (status 131, reason 1000, a new auth_code). Anything else (another SEC code, another result, \
                an override already done, a card transaction) is a 422 that changes nothing. The body is empty \
                (no body, {} or {\"transaction\": {}}).",
            "parameters": idem_param.clone(),
            "requestBody": { "required": false, "content": { "application/json": { "schema":
                envelope("transaction", json!({ "type": "object", "additionalProperties": false, "properties": {} })) } } },
            "responses": merge(json!({ "200": reply("the approved transaction", tx_ref.clone()),
                "409": reply("the same Idempotency-Key is still being processed", errors.clone()) }), &write_errors) } }),
    );
    paths.insert(
        "/v2/transactions/{id}/achupdate".into(),
        json!({ "post": { "summary": "Correct a POP or C21 debit: void it and debit again", "tags": ["transactions"],
            "description": "Permissions transactions.create and transactions.update. The same calendar day (the location's) \
                only, while the original can still be voided (131): the original is voided and a new debit is made \
                with the corrected MICR line (track_data: T<routing>T <account>O <check number>) and amount, taking \
                the original's other details (SEC code, holder, account type, payroll identifier, contact, billing). \
                Check 21 images stay the original's. Answers 201 with the new transaction; its previous_transaction_id \
                names the voided one. Refusals (422) change nothing; on another day refund the debit and POST a new one.",
            "parameters": idem_param,
            "requestBody": body(envelope("transaction", json!({ "type": "object", "additionalProperties": false,
                "required": ["track_data", "transaction_amount"], "properties": {
                "track_data": field_input("track_data"),
                "transaction_amount": field_input("transaction_amount") } }))),
            "responses": merge(json!({ "201": reply("the new transaction", tx_ref.clone()),
                "409": reply("the same Idempotency-Key is still being processed", errors.clone()) }), &write_errors) } }),
    );
    // The router (ADR 0020): requests held open while a terminal works.
    let terminal_errors = merge(
        json!({
            "409": reply("the terminal is working on another request (terminal_result terminal_busy)", errors.clone()),
            "503": reply("the terminal's device is not connected (terminal_result terminal_offline)", errors.clone()),
        }),
        &write_errors,
    );
    let mut router_fields = Map::new();
    for name in crate::terminals::requests::TRANSACTION_FIELDS {
        let schema = match *name {
            "terminal_id" => json!({ "type": "string", "description": "the terminal that reads the card" }),
            "payment_method" => json!({ "type": "string", "enum": ["cc"] }),
            "action" => json!({ "type": "string",
                "enum": crate::terminals::requests::ACTIONS.iter().map(|a| a.name()).collect::<Vec<_>>() }),
            _ => field_input(name),
        };
        router_fields.insert(name.to_string(), schema);
    }
    for name in crate::terminals::requests::IGNORED_TRANSACTION_FIELDS {
        router_fields.insert(
            name.to_string(),
            json!({ "description": "accepted and ignored: the card's type comes from the card the terminal reads" }),
        );
    }
    paths.insert(
        "/v2/routertransactions".into(),
        json!({ "post": { "summary": "A card payment on a terminal", "tags": ["routertransactions"],
            "operationId": "routertransactions.create",
            "description": "Permission transactions.create. The request is held open while the terminal reads the card \
                and the payment runs (at most the terminal's overall_timeout, 300 s by default, counted on the \
                location's clock), then answers the transaction (201, approved or declined; decide by status_id) \
                with the card-present data: entry_mode_id, emv_receipt_data, terminal_id, terminal_serial_number. \
                The body carries no account: the terminal reads it. Refusals that change nothing: 422 for bad fields \
                and for a request that ended on the terminal (terminal_result: connect_error, timeout, aborted, \
                card_entry_timeout, pin_entry_timeout, transaction_timeout, cancelled, overall_timeout), 409 when \
                the terminal is busy, 503 when it is offline. With save_account and a contact the card is stored \
                and the answer carries exp_date; without a contact save_account is ignored. An Idempotency-Key that was answered replays that answer without \
                asking the terminal again.",
            "parameters": [idem.clone()],
            "requestBody": body(envelope("routertransaction", json!({ "type": "object", "additionalProperties": false,
                "required": ["payment_method", "action", "location_id", "terminal_id", "transaction_amount"],
                "properties": Json::Object(router_fields) }))),
            "responses": merge(json!({ "201": reply("the transaction the terminal made",
                envelope("routertransaction", json!({ "$ref": "#/components/schemas/transaction" }))) }), &terminal_errors) } }),
    );
    // Device terms are shown on the terminal before they are recorded.
    if let Some(post) = paths
        .get_mut(&crate::resources::DEVICE_TERM.path())
        .and_then(|p| p.get_mut("post"))
    {
        post["responses"] = merge(post["responses"].take(), &terminal_errors);
    }
    let id_string =
        |description: &str| json!({ "type": "string", "minLength": 1, "description": description });
    paths.insert(
        "/v2/routeraccountvaults".into(),
        json!({ "post": { "summary": "A card read on a terminal and stored on a contact", "tags": ["routeraccountvaults"],
            "operationId": "routeraccountvaults.create",
            "description": "Permission accountvaults.create. Held open while the terminal reads the card (at most its \
                overall_timeout); answers the account vault (201), with the holder's name and expiry as the card \
                gives them. Refusals as for router transactions.",
            "requestBody": body(envelope("routeraccountvault", json!({ "type": "object", "additionalProperties": false,
                "required": ["payment_method", "action", "location_id", "contact_id", "terminal_id"],
                "properties": {
                    "payment_method": { "type": "string", "enum": ["cc"] },
                    "action": { "type": "string", "enum": ["store"] },
                    "location_id": id_string("the contact's and the terminal's location"),
                    "contact_id": id_string("the contact the card is stored on"),
                    "terminal_id": id_string("the terminal that reads the card") } }))),
            "responses": merge(json!({ "201": reply("the stored account vault",
                envelope("accountvault", json!({ "$ref": "#/components/schemas/accountvault" }))) }), &terminal_errors) } }),
    );
    let terminal_ref = json!({ "type": "object", "properties": { "terminal": { "type": "object" } } });
    for path in ["/v2/terminals/{id}/isonline", "/v2/terminals/{id}/isOnline"] {
        paths.insert(
            path.into(),
            json!({ "get": { "summary": "Whether the terminal's device is connected", "tags": ["terminals"],
                "description": "Permission terminals.read. 200 {terminal: {id, is_online: true, last_registration_ts}} \
                    when the device is connected to the router; 503 (terminal_result terminal_offline) when not.",
                "parameters": id_param.clone(),
                "responses": merge(json!({ "200": reply("online", terminal_ref.clone()),
                    "503": reply("offline", errors.clone()) }), &read_errors) } }),
        );
    }
    paths.insert(
        "/v2/terminals/{id}/cancel".into(),
        json!({ "post": { "summary": "Stop what the terminal is doing", "tags": ["terminals"],
            "description": "Permission transactions.create. The request the terminal works on answers 422 with \
                terminal_result cancelled, unless its payment had begun (a payment under way is finished and \
                answered). 202 when the cancel reached the device's node; 503 when the device is offline. No body.",
            "parameters": id_param.clone(),
            "responses": merge(json!({ "202": reply("the cancel was passed on", terminal_ref),
                "503": reply("offline", errors.clone()) }), &read_errors) } }),
    );
    paths.insert(
        "/v2/developer/transactions/{id}".into(),
        json!({ "put": { "summary": "Sandbox ACH status simulator", "tags": ["transactions"],
            "description": "Only status_id changes: 131/132 -> 133 -> 134, or any of these -> 201, 301 or 331 (final).                 331 takes its return reason from the amount's cents (10.22 -> 2122, R22).",
            "parameters": id_param.clone(),
            "requestBody": body(envelope("transaction", json!({ "type": "object", "properties": { "status_id": { "type": "integer" } } }))),
            "responses": merge(json!({ "200": reply("the transaction", tx_ref.clone()) }), &write_errors) } }),
    );
    let clock_ref = envelope(
        "testclock",
        json!({ "type": "object", "properties": {
            "location_id": { "type": "string" }, "offset_seconds": { "type": "integer" },
            "now": { "type": "integer", "description": "the location's now, epoch seconds" },
            "now_text": { "type": "string" },
            "ran": { "type": "object", "description": "advance only: what came due and ran during the move, counted from the location's records (work a background worker took on the way included)",
                "properties": { "postback_attempts": { "type": "integer" },
                    "recurring_runs": { "type": "integer", "description": "recurring runs recorded (approved, declined, refused, or interrupted and made again)" },
                    "notices": { "type": "integer", "description": "recurring notices and quick-invoice reminders written to the mail outbox" },
                    "mail_attempts": { "type": "integer", "description": "SMTP delivery attempts (0 without SMTP)" } } } } }),
    );
    paths.insert(
        "/v2/developer/testclock".into(),
        json!({ "get": { "summary": "Sandbox test clock of a location", "tags": ["developer"],
            "description": "Sandbox only; permission locations.read. The location's time: wall time plus the offset its \
                test clock was moved by (0 until moved).",
            "parameters": [{ "name": "location_id", "in": "query", "required": false, "schema": { "type": "string" },
                "description": "default: the caller's location" }],
            "responses": merge(json!({ "200": reply("the clock", clock_ref.clone()) }), &read_errors) } }),
    );
    paths.insert(
        "/v2/developer/testclock/advance".into(),
        json!({ "post": { "summary": "Move a location's sandbox test clock forward", "tags": ["developer"],
            "description": "Sandbox only; permission locations.update. seconds: 0 to 316224000 (ten years; clocks only \
                move forward; 0 runs what is due now). Requests of the location's users and the records they write \
                carry the moved time. The clock moves in steps, to each moment something of the location falls due on \
                the way (a recurring run, a retry, a notice), and runs it there, in order; pending postback retries \
                come due as if the time had passed; all of it is done before the answer.",
            "requestBody": body(envelope("testclock", json!({ "type": "object", "required": ["seconds"], "properties": {
                "seconds": { "type": "integer", "minimum": 0, "maximum": 316_224_000_i64 },
                "location_id": { "type": "string", "nullable": true, "description": "default: the caller's location" } } }))),
            "responses": merge(json!({ "200": reply("the clock after the move", clock_ref) }), &write_errors) } }),
    );
    let recurring_ref = envelope("recurring", json!({ "$ref": "#/components/schemas/recurring" }));
    for (action, summary, description, count) in [
        (
            "skipPayment",
            "Skip the next payments of a recurring",
            "Permission recurrings.update; active recurrings. The next skip_count runs are not charged: \
             next_run_date moves skip_count intervals later, end_date stays, and an installment recurring \
             collects skip_count fewer payments (installment_amount_total shrinks). 422 when it would skip \
             every remaining payment.",
            Some("skip_count"),
        ),
        (
            "deferPayment",
            "Defer the next payments of an installment recurring",
            "Permission recurrings.update; active installment recurrings only (422 for ongoing ones). \
             next_run_date and end_date move defer_count intervals later; the full count is still collected.",
            Some("defer_count"),
        ),
        (
            "placeOnHold",
            "Put a recurring on hold",
            "Permission recurrings.update; active recurrings. status becomes on hold, next_run_date \
             0000-00-00 (active keeps its value, as the reference's sample shows); nothing runs until \
             activate.",
            None,
        ),
        (
            "activate",
            "Resume a recurring on hold",
            "Permission recurrings.update; recurrings on hold. The next run is the first period date on or \
             after today (the location's date); periods that fell while on hold are not charged, and an \
             installment recurring's end_date moves later by them so the full count is still collected.",
            None,
        ),
    ] {
        let mut parameters = id_param.as_array().cloned().unwrap_or_default();
        if let Some(name) = count {
            parameters.push(json!({ "name": name, "in": "query", "required": true,
                "schema": { "type": "integer", "minimum": 1, "maximum": 99 } }));
        }
        paths.insert(
            format!("/v2/recurrings/{{id}}/{action}"),
            json!({ "post": { "summary": summary, "tags": ["recurrings"], "description": description,
                "parameters": parameters,
                "responses": merge(json!({ "200": reply("the recurring", recurring_ref.clone()) }), &write_errors) } }),
        );
    }
    let invoice_ref = envelope(
        "quickinvoice",
        json!({ "$ref": "#/components/schemas/quickinvoice" }),
    );
    let transaction_body = body(envelope(
        "quickinvoice",
        json!({ "type": "object", "required": ["transaction_id"],
        "properties": { "transaction_id": { "type": "string", "minLength": 1, "maxLength": 36 } } }),
    ));
    for (action, summary, description) in [
        (
            "addTransaction",
            "Count a payment collected elsewhere towards a quick invoice",
            "Permission quickinvoices.update. An approved sale or ACH debit of the invoice's location that pays no \
             other invoice. Answers the invoice with its transactions, remaining_balance and payment_status_id \
             (1 unpaid, 2 paid, 3 partially paid, 4 overpaid) brought up to date.",
        ),
        (
            "removeTransaction",
            "Stop counting a payment towards a quick invoice",
            "Permission quickinvoices.update. The payment stays; the invoice's balance is restored.",
        ),
    ] {
        let mut op = json!({ "summary": summary, "tags": ["quickinvoices"], "description": description,
            "parameters": id_param.clone(), "requestBody": transaction_body.clone(),
            "responses": merge(json!({ "200": reply("the invoice with its transactions", invoice_ref.clone()) }), &write_errors) });
        op["operationId"] = json!(format!("quickinvoice.{action}"));
        paths.insert(format!("/v2/quickinvoices/{{id}}/{action}"), json!({ "put": op }));
    }
    paths.insert(
        "/v2/quickinvoices/{id}/resend".into(),
        json!({ "post": { "summary": "Email a quick invoice again", "tags": ["quickinvoices"],
            "operationId": "quickinvoice.resend",
            "description": "Permission quickinvoices.update. 204; 422 when the invoice has no email address.",
            "parameters": id_param.clone(),
            "responses": merge(json!({ "204": { "description": "queued for mail" } }), &write_errors) } }),
    );
    let file_part = json!({ "type": "object", "required": ["file[file]"], "properties": {
        "file[file]": { "type": "string", "format": "binary",
            "description": "a PDF, PNG, JPEG, GIF or text file of at most 5 MB (judged by its content)" } } });
    paths.insert(
        "/v2/quickinvoices/{id}/files".into(),
        json!({ "post": { "summary": "Add a file to a quick invoice", "tags": ["quickinvoices"],
            "operationId": "quickinvoice.addFile",
            "description": "Permission quickinvoices.update; the location needs file storage (POST /v2/productfiles). \
                At most 4 files per invoice. Shown on the pay page; mailed with the invoice when \
                attach_files_to_email is 1. Answers the invoice with its files and transactions.",
            "parameters": id_param.clone(),
            "requestBody": { "required": true, "content": { "multipart/form-data": { "schema": file_part } } },
            "responses": merge(json!({ "200": reply("the invoice with its files", invoice_ref.clone()),
                "413": reply("a body over 21 MB", error.clone()) }), &write_errors) } }),
    );
    let mut file_params = id_param.as_array().cloned().unwrap_or_default();
    file_params
        .push(json!({ "name": "file_id", "in": "path", "required": true, "schema": { "type": "string" } }));
    paths.insert(
        "/v2/quickinvoices/{id}/files/{file_id}".into(),
        json!({ "delete": { "summary": "Remove a file from a quick invoice", "tags": ["quickinvoices"],
            "operationId": "quickinvoice.removeFile",
            "description": "Permission quickinvoices.update. 204, or 404 when the invoice has no such file.",
            "parameters": file_params,
            "responses": merge(json!({ "204": { "description": "removed" } }), &write_errors) } }),
    );
    paths.insert(
        "/quickinvoice/pay/{token}".into(),
        json!({ "get": { "summary": "The page a customer pays a quick invoice on (the emailed link)",
            "tags": ["quickinvoices"], "operationId": "quickinvoice.payPage", "security": [],
            "parameters": [
                { "name": "token", "in": "path", "required": true, "schema": { "type": "string", "pattern": "^[A-Za-z0-9]{40}$" } },
                { "name": "method", "in": "query", "schema": { "type": "string", "enum": ["cc", "ach"] } } ],
            "responses": {
                "200": { "description": "the page", "content": { "text/html": { "schema": { "type": "string" } } } },
                "404": { "description": "no such invoice", "content": { "text/html": { "schema": { "type": "string" } },
                    "application/json": { "schema": error.clone() } } } } } }),
    );
    paths.insert(
        "/v2/transactionbatches/{id}/settle".into(),
        json!({ "post": { "summary": "Settle (close) a batch", "tags": ["transactionbatches"],
            "description": "Permission transactionbatches.settle. Settled: is_open 0, processing_status_id 2, batch_close_ts,                 settlement_file_name, and every transaction's settle_date. A failed settlement answers 200 with                 processing_status_id 3 and the processor's status_message; settle again after fixing the cause.                 422 (nothing changed; retry shortly) while the batch is already settling or while a void, partial                 reversal or other action on one of its transactions is at the processor.",
            "parameters": id_param.clone(),
            "responses": merge(json!({ "200": reply("the batch", envelope("transactionbatch", json!({ "$ref": "#/components/schemas/transactionbatch" }))) }), &write_errors) } }),
    );
    let delivery_ref = json!({ "$ref": "#/components/schemas/postbackdelivery" });
    paths.insert(
        "/v2/postbackconfigs/{id}/deliveries".into(),
        json!({ "get": { "summary": "The delivery log of a postback config, newest first", "tags": ["postbackconfigs"],
            "description": "Permission postbackdeliveries.read. Takes the filters, sort, pages and expands of                 /v2/postbackdeliveries. status: pending (waiting for an attempt or a retry), delivered (a 2xx came back)                 or failed (number_of_attempts reached).",
            "parameters": id_param.clone(),
            "responses": merge(json!({ "200": reply("the deliveries", json!({ "type": "object", "properties": {
                "postbackdeliveries": { "type": "array", "items": delivery_ref.clone() },
                "meta": { "$ref": "#/components/schemas/Meta" } } })) }), &read_errors) } }),
    );
    paths.insert(
        "/v2/postbackdeliveries/{id}/redeliver".into(),
        json!({ "post": { "summary": "Send a failed delivery again", "tags": ["postbackdeliveries"],
            "description": "Permission postbackdeliveries.redeliver. Only a failed delivery: it becomes pending with no                 attempts made and is sent at once, then retried as its config says. 422 for any other status.",
            "parameters": id_param.clone(),
            "responses": merge(json!({ "200": reply("the delivery", envelope("postbackdelivery", delivery_ref)) }), &write_errors) } }),
    );
    let l3 = envelope(
        "transactionlevel3",
        json!({ "type": "object", "properties": {
        "id": { "type": "string" }, "transaction_id": { "type": "string" }, "level3_data": { "type": "object" } } }),
    );
    paths.insert(
        "/v2/transactionlevel3s".into(),
        json!({ "post": { "summary": "Attach Level 3 data to a card transaction (replaces any earlier data whole)",
            "tags": ["transactionlevel3s"],
            "description": "Nested errors: errors.level3_data[].line_items[].<field>[]. A transaction that cannot take                 Level 3 data answers 422 'not qualified for level 3'.",
            "requestBody": body(l3.clone()),
            "responses": merge(json!({ "201": reply("stored", l3.clone()) }), &write_errors) } }),
    );
    paths.insert(
        "/v2/transactionlevel3s/{id}".into(),
        json!({ "parameters": id_param,
            "get": { "summary": "Read Level 3 data", "tags": ["transactionlevel3s"],
                "responses": merge(json!({ "200": reply("the record", l3) }), &read_errors) },
            "delete": { "summary": "Delete Level 3 data (422 once the transaction is settled)", "tags": ["transactionlevel3s"],
                "responses": merge(json!({ "204": { "description": "deleted" } }), &read_errors) } }),
    );
    components.insert(
        "Error".into(),
        json!({ "type": "object", "properties": {
        "status": { "type": "integer" }, "name": { "type": "string" }, "message": { "type": "string" },
        "request_id": { "type": "string" } } }),
    );
    components.insert("ValidationErrors".into(), json!({ "type": "object", "properties": {
        "errors": { "type": "object", "additionalProperties": { "type": "array", "items": { "type": "string" } } },
        "request_id": { "type": "string" } } }));
    let zones: Vec<&str> = chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name()).collect();
    components.insert(
        "TimeZone".into(),
        json!({ "type": "string", "enum": zones, "description": "an IANA time zone name" }),
    );
    components.insert("Meta".into(), json!({ "type": "object", "properties": {
        "pagination": { "type": "object", "properties": {
            "links": { "type": "object", "description": "self; next and last when there are more pages" },
            "totalCount": { "type": "integer" }, "pageCount": { "type": "integer" },
            "currentPage": { "type": "integer", "description": "zero-based" }, "perPage": { "type": "integer" } } },
        "sort": { "type": "object" } } }));
    paths.extend(super::boarding::openapi_paths(&error, &errors));
    // Operations without a name of their own are named by verb and path
    // (`post.recurrings.id.skipPayment`).
    for (path, item) in paths.iter_mut() {
        let Json::Object(item) = item else { continue };
        for (verb, op) in item.iter_mut().filter(|(v, _)| *v != "parameters") {
            if op.get("operationId").is_none() {
                let segments = path
                    .trim_start_matches("/v2/")
                    .trim_start_matches('/')
                    .split('/')
                    .map(|s| s.trim_matches(|c| c == '{' || c == '}'));
                let name = std::iter::once(verb.as_str())
                    .chain(segments)
                    .collect::<Vec<_>>()
                    .join(".");
                op["operationId"] = json!(name);
            }
        }
    }
    let sign_in = json!({ "type": "object", "required": ["username", "password", "domain"],
        "additionalProperties": false, "properties": {
            "username": { "type": "string", "minLength": 1, "maxLength": 256 },
            "password": { "type": "string", "minLength": 1, "maxLength": 256, "format": "password" },
            "domain": { "type": "string", "minLength": 1, "maxLength": 256,
                "description": "the host the user signs in through (required; not matched)" } } });
    paths.insert(
        "/v2/token".into(),
        json!({ "post": { "summary": "Sign in: a session token for the access-token header or query parameter",
            "operationId": "token.create", "tags": ["token"], "security": [{ "developer-id": [] }],
            "description": "developer-id is required (header or query parameter), here and with the token. The token \
                expires after 15 idle minutes of the user's location time; each use starts them again. Five failed \
                sign-ins in a row (each within 15 minutes of the one before) lock the name for 15 minutes (429 with \
                Retry-After), whether or not a user has it; then the count starts again. An administrator setting \
                the user's password, or enabling the user again, unlocks it; a wrong old_password on PUT \
                /v2/users/{id} counts too. An address that fails 20 times in 15 minutes is held off too. A user \
                whose password another user set (requires_new_password) may only read itself and set its own \
                password until it does.",
            "requestBody": body(json!({ "anyOf": [sign_in.clone(), { "type": "object", "required": ["token"],
                "additionalProperties": false, "properties": { "token": sign_in } }] })),
            "responses": {
                "201": reply("the session", json!({ "type": "object", "properties": { "token": { "type": "object",
                    "properties": { "id": { "type": "string" }, "token": { "type": "string" },
                        "expire": { "type": "integer", "description": "idle minutes" },
                        "expires_ts": { "type": "integer" }, "time": { "type": "integer" },
                        "user_id": { "type": "string" }, "username": { "type": "string" },
                        "first_name": { "type": "string", "nullable": true },
                        "last_name": { "type": "string", "nullable": true },
                        "primary_location_id": { "type": "string" },
                        "timezone": { "type": "string", "nullable": true },
                        "user_type_id": { "type": "integer", "nullable": true },
                        "password_expire_ts": { "type": "integer", "nullable": true },
                        "requires_new_password": { "type": "boolean" } } } } })),
                "400": reply("malformed JSON", error.clone()),
                "401": reply("no or an unknown developer-id; wrong username or password, or a disabled user", error.clone()),
                "422": reply("a field missing, not a string or too long", errors.clone()),
                "429": reply("too many failed sign-ins", error.clone()) } } }),
    );
    paths.insert(
        "/v2/token/{token}".into(),
        json!({ "delete": { "summary": "Sign out: end the session of a token", "operationId": "token.delete",
            "tags": ["token"], "security": [],
            "parameters": [{ "name": "token", "in": "path", "required": true, "schema": { "type": "string" } }],
            "responses": { "204": { "description": "ended" },
                "404": reply("no such session, or it had expired", error.clone()) } } }),
    );
    paths.extend(hosted_paths(&error, &errors));
    // Quick invoices are also created from a multipart form, with files.
    if let Some(content) = paths
        .get_mut("/v2/quickinvoices")
        .and_then(|p| p.pointer_mut("/post/requestBody/content"))
        .and_then(Json::as_object_mut)
    {
        content.insert(
            "multipart/form-data".into(),
            json!({ "schema": { "type": "object",
                "description": "quickinvoice[field] for each field, quickinvoice[item_list][name] for each item, \
                    quickinvoice[tags][n], and up to 4 files as quickinvoice[files][n] (PDF, PNG, JPEG, GIF or \
                    text, 5 MB each; the location needs POST /v2/productfiles first)",
                "additionalProperties": { "type": "string" } } }),
        );
    }
    let mut security_schemes = Map::new();
    for h in ["developer-id", "user-id", "user-api-key", "access-token"] {
        security_schemes.insert(h.into(), json!({ "type": "apiKey", "in": "header", "name": h }));
    }
    security_schemes.insert(
        "operator-token".into(),
        json!({ "type": "http", "scheme": "bearer", "description": "boarding operator token (ferrogate boarding token create)" }),
    );
    json!({
        "openapi": "3.0.3",
        "info": { "title": "Ferrogate API", "version": env!("CARGO_PKG_VERSION"),
            "description": "Payment gateway REST API v2. Credentials: the developer-id, user-id and user-api-key \
                headers (or query parameters, or HTTP Basic with user id and api key). Bodies are JSON wrapped in \
                the singular resource name; lists answer the plural name plus meta." },
        "servers": [{ "url": public_url }],
        "security": [{ "developer-id": [], "user-id": [], "user-api-key": [] }, { "developer-id": [], "access-token": [] }],
        "paths": paths,
        "components": { "schemas": components, "securitySchemes": security_schemes },
    })
}

/// The hosted pages (reference 7): signed with a hash-key, not an API key.
fn hosted_paths(error: &Json, errors: &Json) -> Map<String, Json> {
    let html = |description: &str| {
        json!({ "description": description, "content": {
            "text/html": { "schema": { "type": "string" } },
            "application/json": { "schema": error } } })
    };
    let signed = |in_: &str| {
        json!([
            { "name": "developer-id", "in": in_, "schema": { "type": "string", "minLength": 24, "maxLength": 36 } },
            { "name": "user-id", "in": in_, "schema": { "type": "string", "minLength": 24, "maxLength": 36 } },
            { "name": "timestamp", "in": in_, "schema": { "type": "string", "pattern": "^[0-9]{1,12}$" },
              "description": "epoch seconds; a form opens within 5 minutes of it and submits within 15" },
            { "name": "hash-key", "in": in_, "schema": { "type": "string", "pattern": "^[0-9a-fA-F]{64}$" },
              "description": "lowercase hex HMAC-SHA256 of user-id then timestamp under the user's hash key; one use" },
        ])
    };
    let form = |kind: &str, envelope: &str| {
        let mut params = signed("query").as_array().cloned().unwrap_or_default();
        params.push(json!({ "name": "data", "in": "query", "required": true,
            "schema": { "type": "string", "pattern": "^([0-9a-fA-F]{2})+$", "maxLength": crate::hosted::MAX_DATA_HEX },
            "description": format!("hex of the UTF-8 JSON {{\"{envelope}\": {{...}}}} with the form's fields and UI flags") }));
        json!({ "get": { "summary": format!("Open a hosted {kind}: an HTML page a payer fills in (embeddable in an iframe)"),
            "operationId": format!("{kind}.open"), "tags": ["hosted"], "security": [],
            "parameters": params,
            "responses": {
                "200": html("the form"),
                "400": html("data missing or not hex of JSON"),
                "401": html("Hash key is invalid, or the timestamp has expired"),
                "403": html("the hash-key was used, or the user may not do this"),
                "422": html("the data names fields wrongly (JSON bodies carry the field errors)"),
                "429": html("too many requests") } } })
    };
    let mut paths = Map::new();
    paths.insert("/v2/payform".into(), form("payform", "transaction"));
    paths.insert("/v2/accountform".into(), form("accountform", "accountvault"));
    let account = json!({ "type": "object", "required": ["payment_method"], "additionalProperties": false,
        "properties": {
            "payment_method": { "type": "string", "enum": ["cc", "ach"] },
            "location_id": { "type": "string", "minLength": 24, "maxLength": 36 },
            "account_number": { "type": "string", "maxLength": 19 },
            "exp_date": { "type": "string", "maxLength": 4 },
            "routing": { "type": "string", "maxLength": 9 },
            "account_type": { "type": "string", "enum": ["checking", "savings"] },
            "account_holder_name": { "type": "string", "maxLength": 32 },
            "billing_zip": { "type": "string", "maxLength": 10 },
            "billing_address": { "type": "string", "maxLength": 64 } } });
    paths.insert(
        "/v2/tickets".into(),
        json!({ "post": { "summary": "Keep typed card or bank data as a single-use ticket for POST /v2/accountvaults (15 minutes)",
            "operationId": "ticket.create", "tags": ["hosted"], "security": [],
            "parameters": signed("header"),
            "requestBody": body(json!({ "type": "object", "required": ["ticket"], "additionalProperties": false,
                "properties": { "ticket": account } })),
            "responses": {
                "201": reply("the ticket (the number's last four digits only)", json!({ "type": "object" })),
                "400": reply("malformed JSON", error.clone()),
                "401": reply("Hash key is invalid, or the timestamp has expired", error.clone()),
                "403": reply("the hash-key was used, or the user may not store vaults", error.clone()),
                "422": reply("the account is not valid", errors.clone()),
                "429": reply("too many requests", error.clone()) } } }),
    );
    paths.insert(
        "/hostedpaymentpage".into(),
        json!({ "get": { "summary": "Open a hosted payment page from a link encrypted with the page's key",
            "operationId": "hostedpaymentpage.open", "tags": ["hosted"], "security": [],
            "parameters": [
                { "name": "id", "in": "query", "required": true, "schema": { "type": "string", "maxLength": 36 } },
                { "name": "data", "in": "query", "schema": { "type": "string", "maxLength": crate::hosted::page_cipher::MAX_DATA,
                    "pattern": "^[A-Za-z0-9+/= ]*$" },
                  "description": "base64 of OpenSSL enc -aes-256-cbc -md md5 output over {id, field_configuration, ...}" } ],
            "responses": {
                "200": html("the page"),
                "400": html("id missing, data too long, or data not a JSON object"),
                "401": html("data not sealed with this page's key, or an expired link"),
                "404": html("no such active page"),
                "422": html("field_configuration names fields wrongly"),
                "429": html("too many requests") } } }),
    );
    paths
}

fn merge(mut a: Json, b: &Json) -> Json {
    if let (Json::Object(a), Json::Object(b)) = (&mut a, b) {
        for (k, v) in b {
            a.entry(k.clone()).or_insert(v.clone());
        }
    }
    a
}

/// A self-contained page: fetches the OpenAPI document and lists every
/// operation with its fields. No CDN, so it works offline.
const DOCS_PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Ferrogate API</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d2430;background:#f7f8fa}
header{background:#1d2430;color:#fff;padding:16px 28px}header h1{margin:0;font-size:20px}
main{max-width:1000px;margin:0 auto;padding:20px 28px}
section{background:#fff;border:1px solid #dde2ea;border-radius:8px;margin:14px 0;padding:12px 18px}
h2{font-size:17px;margin:6px 0}.op{margin:8px 0;padding:6px 0;border-top:1px solid #eef0f4}
.m{display:inline-block;min-width:58px;font-weight:600;font-family:monospace}
.get{color:#0a7d32}.post{color:#1257b0}.put{color:#a36100}.delete{color:#b3261e}
code{font-family:ui-monospace,monospace;font-size:13px}table{border-collapse:collapse;width:100%;font-size:13px}
td,th{border-bottom:1px solid #eef0f4;text-align:left;padding:3px 6px;vertical-align:top}
details summary{cursor:pointer;color:#445}
</style></head><body>
<header><h1>Ferrogate API</h1><div id="desc"></div></header>
<main id="out">Loading /v2/openapi.json&hellip;</main>
<script>
fetch('/v2/openapi.json').then(r=>r.json()).then(doc=>{
  const esc=s=>String(s??'').replace(/[&<>"]/g,c=>({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
  document.getElementById('desc').textContent=doc.info.description;
  const schemas=doc.components.schemas, groups={};
  for(const [path,item] of Object.entries(doc.paths)){
    for(const [m,op] of Object.entries(item)){ if(m==='parameters')continue;
      const tag=(op.tags||['other'])[0]; (groups[tag]=groups[tag]||[]).push([m,path,op]); }
  }
  const fields=name=>{const s=schemas[name]; if(!s)return '';
    return '<table><tr><th>field</th><th>type</th><th>notes</th></tr>'+Object.entries(s.properties).map(([k,v])=>
      `<tr><td><code>${esc(k)}</code></td><td>${esc(v.type||'')}${v.maxLength!==undefined?' '+v.minLength+'-'+v.maxLength:''}</td><td>${esc(v.description||'')}</td></tr>`).join('')+'</table>';};
  let html='';
  for(const [tag,ops] of Object.entries(groups)){
    const name=Object.keys(schemas).find(n=>ops.some(o=>JSON.stringify(o[2]).includes('schemas/'+n+'"')));
    html+=`<section><h2>${esc(tag)}</h2>`;
    for(const [m,path,op] of ops){
      html+=`<div class="op"><span class="m ${m}">${m.toUpperCase()}</span> <code>${esc(path)}</code> &mdash; ${esc(op.summary)}`;
      if(op.parameters&&op.parameters.length) html+=`<details><summary>query parameters</summary><table>${op.parameters.map(p=>`<tr><td><code>${esc(p.name)}</code></td><td>${esc(p.description||'')}</td></tr>`).join('')}</table></details>`;
      html+='</div>';
    }
    if(name) html+=`<details><summary>${esc(name)} fields</summary>${fields(name)}</details>`;
    const post=ops.find(o=>o[0]==='post'&&o[2].requestBody);
    if(post){const env=post[2].requestBody.content['application/json'].schema.properties;const inner=env&&Object.values(env)[0];
      if(inner&&inner.properties) html+=`<details><summary>create body</summary><table><tr><th>field</th><th>type</th><th>notes</th></tr>${Object.entries(inner.properties).map(([k,v])=>`<tr><td><code>${esc(k)}</code></td><td>${esc(v.type||'')}</td><td>${esc(v.description||'')}</td></tr>`).join('')}</table></details>`;}
    html+='</section>';
  }
  document.getElementById('out').innerHTML=html;
}).catch(e=>{document.getElementById('out').textContent='Could not load the API description: '+e});
</script></body></html>"#;
