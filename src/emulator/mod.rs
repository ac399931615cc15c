//! The Authorize.Net emulator (ADR 0016): integrations written for
//! Authorize.Net run against Ferrogate by changing their endpoint URL.
//!
//! This module is the translation only, with no HTTP in it: their
//! requests (XML or JSON API, AIM name-value pairs) read into our payment
//! and recurring requests, and our records written back as their answers.
//! Payments still go through `payments` with `trx_source_id` 11
//! (Emulator); the handlers are `http::emulator`.

pub mod aim;
pub mod arb;
pub mod codes;
pub mod credentials;
pub mod methods;
pub mod numbers;
pub mod reporting;
pub mod sent;
pub mod shown;
pub mod subscription_keys;
pub mod transaction;
pub mod tree;

use tree::Out;

/// Their `ANetApiResponse` envelope: `refId`, `messages` (result code and
/// messages), then the method's own elements, in the schema's order.
pub fn envelope(
    ref_id: Option<&str>,
    ok: bool,
    message: (&str, &str),
    rest: Vec<(&'static str, Out)>,
) -> Out {
    let mut fields = Vec::new();
    if let Some(r) = ref_id {
        fields.push(("refId", Out::text(r)));
    }
    fields.push((
        "messages",
        Out::Node(vec![
            ("resultCode", Out::text(if ok { "Ok" } else { "Error" })),
            (
                "message",
                Out::Each(vec![Out::Node(vec![
                    ("code", Out::text(message.0)),
                    ("text", Out::text(message.1)),
                ])]),
            ),
        ]),
    ));
    fields.extend(rest);
    Out::Node(fields)
}
