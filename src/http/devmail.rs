//! `/dev/mail`: the development mailbox of the sandbox. Lists the mail
//! outbox of the caller's locations (newest first) and shows each
//! message, plain text and HTML; `?format=json` (or `Accept:
//! application/json`) answers JSON. Authenticated like the API (headers,
//! or HTTP Basic with the user id and api key plus `?developer-id=`),
//! for users who may read quick invoices; served only with the sandbox
//! processor.

use super::extract::{query_pairs, IdPath};
use super::AppState;
use crate::auth::Caller;
use crate::clock::timestamp_text;
use crate::db::{Sql, Value};
use crate::error::{ApiError, ApiResult};
use askama::Template;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value as JsonValue};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/dev/mail", get(list))
        .route("/dev/mail/{id}", get(show))
}

/// A message as the pages show it.
struct Shown {
    id: String,
    kind: String,
    recipient: String,
    reply_to: Option<String>,
    from_name: String,
    subject: String,
    status: String,
    last_error: Option<String>,
    text: String,
    html: String,
    resource: Option<String>,
    resource_id: Option<String>,
    created_ts: i64,
    sent_ts: Option<i64>,
    written: String,
    href: String,
}

impl Shown {
    fn to_json(&self) -> JsonValue {
        json!({
            "id": self.id,
            "kind": self.kind,
            "recipient": self.recipient,
            "reply_to": self.reply_to,
            "from_name": self.from_name,
            "subject": self.subject,
            "status": self.status,
            "last_error": self.last_error,
            "text": self.text,
            "html": self.html,
            "resource": self.resource,
            "resource_id": self.resource_id,
            "created_ts": self.created_ts,
            "sent_ts": self.sent_ts,
        })
    }
}

#[derive(Template)]
#[template(path = "dev/mail.html")]
struct ListPage {
    title: &'static str,
    home: String,
    delivers: bool,
    messages: Vec<Shown>,
}

#[derive(Template)]
#[template(path = "dev/message.html")]
struct MessagePage {
    title: String,
    home: String,
    m: Shown,
}

/// The query string that carries `developer-id` into the page's links.
fn carry(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .find(|(k, _)| k == "developer-id")
        .map(|(_, v)| {
            format!(
                "?developer-id={}",
                form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>()
            )
        })
        .unwrap_or_default()
}

fn wants_json(headers: &HeaderMap, pairs: &[(String, String)]) -> bool {
    pairs.iter().any(|(k, v)| k == "format" && v == "json")
        || headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|a| a.contains("application/json") && !a.contains("text/html"))
}

/// Credentials refused: a page that lets a browser ask for them.
fn refused(e: ApiError, json_wanted: bool) -> Response {
    if json_wanted {
        return e.into_response();
    }
    let body = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Sign in · Ferrogate</title></head>\
        <body><main><h1>Sign in to the development mailbox</h1>\
        <p>Send your API credentials: the developer-id, user-id and user-api-key headers, or open \
        <code>/dev/mail?developer-id=YOUR_DEVELOPER_ID</code> and sign in with your user id as the user name \
        and your user api key as the password.</p></main></body></html>";
    (
        StatusCode::UNAUTHORIZED,
        [(
            header::WWW_AUTHENTICATE,
            "Basic realm=\"Ferrogate development mailbox\"",
        )],
        Html(body),
    )
        .into_response()
}

/// The permission the mailbox needs.
const MAILBOX_PERMISSION: &str = "quickinvoices.read";

/// The caller, whether JSON was asked for, and the query to carry into
/// links; or the refusal page.
fn signed_in(
    headers: &HeaderMap,
    caller: Result<Caller, ApiError>,
    q: Option<String>,
) -> Result<(Caller, bool, String), Box<Response>> {
    let pairs = query_pairs(q.as_deref());
    let json_wanted = wants_json(headers, &pairs);
    // Mail holds customers' addresses and invoices' pay links: the
    // mailbox is for users who may read quick invoices (a role without
    // it, or none, is refused).
    match caller.and_then(|c| c.perms.require(MAILBOX_PERMISSION).map(|_| c)) {
        Ok(c) => Ok((c, json_wanted, carry(&pairs))),
        Err(e) => Err(Box::new(refused(e, json_wanted))),
    }
}

async fn load(app: &AppState, caller: &Caller, id: Option<String>, carry: &str) -> ApiResult<Vec<Shown>> {
    let (lower, upper) = caller.scope.bounds();
    let carry = carry.to_string();
    app.store
        .read(move |conn| {
            let mut sql = Sql::new(
                "SELECT m.id, m.kind, m.recipient, m.reply_to, m.from_name, m.subject, m.status, m.last_error, \
                 m.text_body, m.html_body, m.resource, m.resource_id, m.created_ts, m.sent_ts \
                 FROM mail_outbox m JOIN locations s ON s.id = m.location_id WHERE s.path >= ",
            );
            sql.bind(lower).push(" AND s.path < ").bind(upper);
            if let Some(id) = id {
                sql.push(" AND m.id = ").bind(id);
            }
            sql.push(" ORDER BY m.created_ts DESC, m.id DESC LIMIT 500");
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            Ok(conn
                .query(&sql)?
                .into_iter()
                .map(|r| {
                    let id = text(&r[0]);
                    let created_ts = r[12].as_int().unwrap_or(0);
                    Shown {
                        href: format!("/dev/mail/{id}{carry}"),
                        id,
                        kind: text(&r[1]),
                        recipient: text(&r[2]),
                        reply_to: r[3].as_str().map(str::to_string),
                        from_name: text(&r[4]),
                        subject: text(&r[5]),
                        status: text(&r[6]),
                        last_error: r[7].as_str().map(str::to_string),
                        text: text(&r[8]),
                        html: text(&r[9]),
                        resource: r[10].as_str().map(str::to_string),
                        resource_id: r[11].as_str().map(str::to_string),
                        created_ts,
                        sent_ts: r[13].as_int(),
                        written: format!("{} UTC", timestamp_text(created_ts)),
                    }
                })
                .collect())
        })
        .await
}

async fn list(
    State(app): State<AppState>,
    headers: HeaderMap,
    caller: Result<Caller, ApiError>,
    RawQuery(q): RawQuery,
) -> Response {
    let (caller, json_wanted, carry) = match signed_in(&headers, caller, q) {
        Ok(v) => v,
        Err(refusal) => return *refusal,
    };
    let messages = match load(&app, &caller, None, &carry).await {
        Ok(m) => m,
        Err(e) => return e.into_response(),
    };
    if json_wanted {
        let list: Vec<JsonValue> = messages.iter().map(Shown::to_json).collect();
        return Json(json!({ "messages": list })).into_response();
    }
    let page = ListPage {
        title: "Development mailbox",
        home: format!("/dev/mail{carry}"),
        delivers: app.mailer.delivers(),
        messages,
    };
    render(page.render())
}

async fn show(
    State(app): State<AppState>,
    headers: HeaderMap,
    caller: Result<Caller, ApiError>,
    IdPath(id): IdPath,
    RawQuery(q): RawQuery,
) -> Response {
    let (caller, json_wanted, carry) = match signed_in(&headers, caller, q) {
        Ok(v) => v,
        Err(refusal) => return *refusal,
    };
    let found = match load(&app, &caller, Some(id), &carry).await {
        Ok(mut m) => m.pop(),
        Err(e) => return e.into_response(),
    };
    let Some(m) = found else {
        if json_wanted {
            return ApiError::not_found("message").into_response();
        }
        let page = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Not found · Ferrogate</title></head>\
            <body><main><h1>No such message</h1><p>It does not exist or belongs to a location you cannot see.</p></main></body></html>";
        return (StatusCode::NOT_FOUND, Html(page)).into_response();
    };
    if json_wanted {
        return Json(json!({ "message": m.to_json() })).into_response();
    }
    let page = MessagePage {
        title: m.subject.clone(),
        home: format!("/dev/mail{carry}"),
        m,
    };
    render(page.render())
}

fn render(page: Result<String, askama::Error>) -> Response {
    match page {
        Ok(html) => Html(html).into_response(),
        Err(e) => ApiError::internal(e).into_response(),
    }
}
