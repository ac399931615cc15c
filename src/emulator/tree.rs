//! The two wire formats of Authorize.Net's API, read into one shape and
//! written from one shape.
//!
//! A request, XML or JSON, becomes a JSON object: an element with child
//! elements is an object, a repeated element an array, any other element
//! its text. A response is an [`Out`] tree, which knows the one place the
//! two formats differ: a list is a wrapper element around repeated items
//! in XML and a plain array in JSON.

use quick_xml::events::Event;
use quick_xml::Reader;
use serde_json::{Map, Value as Json};

/// The schema's namespace, on every XML response's root element.
pub const NAMESPACE: &str = "AnetApi/xml/v1/schema/AnetApiSchema.xsd";

/// Deepest nesting a request may have (the schema's is below ten).
const MAX_DEPTH: usize = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Xml,
    Json,
}

/// A request read: its format, the root element (the API method) and the
/// method's fields.
#[derive(Debug)]
pub struct Parsed {
    pub format: Format,
    pub method: String,
    pub body: Map<String, Json>,
}

/// A body that could not be read, with the format to answer in.
#[derive(Debug)]
pub struct Unreadable {
    pub format: Format,
    pub message: String,
}

/// Reads a request body. The format is recognised by its first character
/// (the official libraries send `Content-Type: application/json` or
/// `text/xml`; some integrations send neither faithfully): `<` is XML,
/// `{` or `[` JSON, anything else the format the content type
/// `declared`, so a JSON client's unreadable body is answered in JSON.
pub fn parse(raw: &[u8], declared: Format) -> Result<Parsed, Unreadable> {
    let raw = raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw);
    let first = raw.iter().find(|b| !b.is_ascii_whitespace()).copied();
    match (first, declared) {
        (Some(b'<'), _) => parse_xml(raw),
        (Some(b'{' | b'['), _) | (_, Format::Json) => parse_json(raw),
        _ => parse_xml(raw),
    }
}

fn parse_json(raw: &[u8]) -> Result<Parsed, Unreadable> {
    let unreadable = |message: &str| Unreadable {
        format: Format::Json,
        message: message.to_string(),
    };
    let value: Json =
        serde_json::from_slice(raw).map_err(|_| unreadable("The request is not valid JSON."))?;
    let Json::Object(outer) = value else {
        return Err(unreadable("The request must be a JSON object."));
    };
    if outer.len() != 1 {
        return Err(unreadable(
            "The request must be one object named after the API method.",
        ));
    }
    let Some((method, Json::Object(body))) = outer.into_iter().next() else {
        return Err(unreadable("The API method's value must be an object."));
    };
    if depth(&Json::Object(body.clone())) > MAX_DEPTH {
        return Err(unreadable("The request is nested too deeply."));
    }
    Ok(Parsed {
        format: Format::Json,
        method,
        body,
    })
}

fn depth(v: &Json) -> usize {
    match v {
        Json::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        Json::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// An element being read: its name, its children so far, its text.
struct Open {
    name: String,
    children: Map<String, Json>,
    text: String,
    has_children: bool,
}

impl Open {
    fn new(name: String) -> Open {
        Open {
            name,
            children: Map::new(),
            text: String::new(),
            has_children: false,
        }
    }

    fn value(self) -> Json {
        if self.has_children {
            Json::Object(self.children)
        } else {
            Json::String(self.text.trim().to_string())
        }
    }

    fn add(&mut self, name: String, value: Json) {
        self.has_children = true;
        match self.children.get_mut(&name) {
            Some(Json::Array(items)) => items.push(value),
            Some(existing) => {
                let first = existing.take();
                *existing = Json::Array(vec![first, value]);
            }
            None => {
                self.children.insert(name, value);
            }
        }
    }
}

fn local(name: &[u8]) -> String {
    let name = String::from_utf8_lossy(name);
    match name.rsplit_once(':') {
        Some((_, local)) => local.to_string(),
        None => name.into_owned(),
    }
}

fn parse_xml(raw: &[u8]) -> Result<Parsed, Unreadable> {
    let unreadable = |message: String| Unreadable {
        format: Format::Xml,
        message,
    };
    let text = std::str::from_utf8(raw).map_err(|_| unreadable("The request is not UTF-8 text.".into()))?;
    // Never the parser's own message: it quotes the request (an entity
    // name, a tag), which may hold a card number. Where it failed is
    // enough to find the fault.
    let malformed = |at: u64| {
        unreadable(format!(
            "An error occurred while parsing the XML request: it is not well-formed near byte {at}."
        ))
    };
    let mut reader = Reader::from_str(text);
    let mut stack: Vec<Open> = Vec::new();
    let mut root: Option<(String, Json)> = None;
    loop {
        let event = reader
            .read_event()
            .map_err(|_| malformed(reader.error_position()))?;
        match event {
            Event::Start(e) => {
                if root.is_some() {
                    return Err(unreadable("Only one root element is allowed.".into()));
                }
                if stack.len() >= MAX_DEPTH {
                    return Err(unreadable("The request is nested too deeply.".into()));
                }
                stack.push(Open::new(local(e.name().as_ref())));
            }
            Event::Empty(e) => {
                let name = local(e.name().as_ref());
                match stack.last_mut() {
                    Some(parent) => parent.add(name, Json::String(String::new())),
                    None if root.is_none() => root = Some((name, Json::Object(Map::new()))),
                    None => return Err(unreadable("Only one root element is allowed.".into())),
                }
            }
            Event::Text(t) => {
                let piece = t.unescape().map_err(|_| malformed(reader.buffer_position()))?;
                match stack.last_mut() {
                    Some(open) => open.text.push_str(&piece),
                    None if piece.trim().is_empty() => {}
                    None => return Err(unreadable("Text is not allowed outside the root element.".into())),
                }
            }
            Event::CData(c) => {
                if let Some(open) = stack.last_mut() {
                    open.text.push_str(&String::from_utf8_lossy(&c.into_inner()));
                }
            }
            Event::End(_) => {
                let Some(done) = stack.pop() else {
                    return Err(unreadable("An end tag has no start tag.".into()));
                };
                let name = done.name.clone();
                let value = done.value();
                match stack.last_mut() {
                    Some(parent) => parent.add(name, value),
                    None => root = Some((name, value)),
                }
            }
            Event::Eof => break,
            Event::DocType(_) => return Err(unreadable("A DOCTYPE is not allowed.".into())),
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) => {}
        }
    }
    if !stack.is_empty() {
        return Err(unreadable("The XML ends inside an element.".into()));
    }
    let Some((method, value)) = root else {
        return Err(unreadable("The request is empty.".into()));
    };
    let body = match value {
        Json::Object(m) => m,
        _ => Map::new(),
    };
    Ok(Parsed {
        format: Format::Xml,
        method,
        body,
    })
}

// ---------------------------------------------------------------------
// Reading the fields of a request

/// The value at a dotted path; the first of a repeated element.
pub fn at<'a>(body: &'a Map<String, Json>, path: &str) -> Option<&'a Json> {
    let mut parts = path.split('.');
    let mut current = first(body.get(parts.next()?)?);
    for part in parts {
        current = first(current.as_object()?.get(part)?);
    }
    Some(current)
}

fn first(v: &Json) -> &Json {
    match v {
        Json::Array(items) => items.first().unwrap_or(v),
        other => other,
    }
}

/// The text at a dotted path, trimmed; `None` when absent or empty, and
/// when the value itself is a list: a single value sent as a JSON array
/// (`"amount": [5]`), or an XML element the schema allows once given
/// twice, is not that value.
pub fn text(body: &Map<String, Json>, path: &str) -> Option<String> {
    let (parent, leaf) = match path.rsplit_once('.') {
        Some((parent, leaf)) => (object(body, parent)?, leaf),
        None => (body, path),
    };
    match parent.get(leaf)? {
        Json::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Json::Number(n) => Some(n.to_string()),
        Json::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The object at a dotted path.
pub fn object<'a>(body: &'a Map<String, Json>, path: &str) -> Option<&'a Map<String, Json>> {
    at(body, path)?.as_object()
}

// ---------------------------------------------------------------------
// Writing a response

/// A response element's content.
#[derive(Clone, Debug, PartialEq)]
pub enum Out {
    Text(String),
    /// Child elements in the schema's order.
    Node(Vec<(&'static str, Out)>),
    /// The element repeated once per item (JSON: an array under its name).
    Each(Vec<Out>),
    /// A wrapper element around items named by the first field (JSON: an
    /// array under the wrapper's name).
    List(&'static str, Vec<Out>),
}

impl Out {
    pub fn text(s: impl Into<String>) -> Out {
        Out::Text(s.into())
    }
}

/// The response document: a UTF-8 byte order mark first, as Authorize.Net
/// sends it and its libraries strip it.
pub fn render(format: Format, root: &str, body: &Out) -> Vec<u8> {
    let mut out = b"\xEF\xBB\xBF".to_vec();
    match format {
        Format::Xml => {
            let mut s = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?>");
            s.push_str(&format!(
                "<{root} xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" \
                 xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\" xmlns=\"{NAMESPACE}\">"
            ));
            write_content(&mut s, body);
            s.push_str(&format!("</{root}>"));
            out.extend_from_slice(s.as_bytes());
        }
        Format::Json => {
            let value = to_json(body);
            out.extend_from_slice(value.to_string().as_bytes());
        }
    }
    out
}

fn write_content(s: &mut String, content: &Out) {
    match content {
        Out::Text(t) => s.push_str(&quick_xml::escape::escape(t.as_str())),
        Out::Node(fields) => {
            for (name, value) in fields {
                write_element(s, name, value);
            }
        }
        Out::Each(_) | Out::List(..) => {}
    }
}

fn write_element(s: &mut String, name: &str, value: &Out) {
    match value {
        Out::Each(items) => {
            for item in items {
                write_element(s, name, item);
            }
        }
        Out::List(item_name, items) => {
            s.push_str(&format!("<{name}>"));
            for item in items {
                write_element(s, item_name, item);
            }
            s.push_str(&format!("</{name}>"));
        }
        other => {
            s.push_str(&format!("<{name}>"));
            write_content(s, other);
            s.push_str(&format!("</{name}>"));
        }
    }
}

pub fn to_json(content: &Out) -> Json {
    match content {
        Out::Text(t) => Json::String(t.clone()),
        Out::Node(fields) => Json::Object(fields.iter().map(|(k, v)| (k.to_string(), to_json(v))).collect()),
        Out::Each(items) | Out::List(_, items) => Json::Array(items.iter().map(to_json).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_and_json_requests_read_alike() {
        let xml = br#"<?xml version="1.0"?><createTransactionRequest xmlns="AnetApi/xml/v1/schema/AnetApiSchema.xsd"><merchantAuthentication><name>u</name><transactionKey>k&amp;1</transactionKey></merchantAuthentication><transactionRequest><transactionType>authCaptureTransaction</transactionType><amount>5</amount><lineItems><lineItem><itemId>1</itemId></lineItem><lineItem><itemId>2</itemId></lineItem></lineItems><poNumber/></transactionRequest></createTransactionRequest>"#;
        let x = parse(xml, Format::Xml).unwrap();
        assert_eq!(x.format, Format::Xml);
        assert_eq!(x.method, "createTransactionRequest");
        assert_eq!(
            text(&x.body, "merchantAuthentication.transactionKey").as_deref(),
            Some("k&1")
        );
        assert_eq!(
            text(&x.body, "transactionRequest.lineItems.lineItem.itemId").as_deref(),
            Some("1")
        );
        assert_eq!(text(&x.body, "transactionRequest.poNumber"), None);
        // A value given as a list is no value.
        let listed = parse(br#"{"m":{"amount":[5],"a":{"b":["x"]}}}"#, Format::Json).unwrap();
        assert_eq!(text(&listed.body, "amount"), None);
        assert_eq!(text(&listed.body, "a.b"), None);
        let json = br#"{"createTransactionRequest":{"merchantAuthentication":{"name":"u","transactionKey":"k&1"},"transactionRequest":{"transactionType":"authCaptureTransaction","amount":5}}}"#;
        let j = parse(json, Format::Xml).unwrap();
        assert_eq!(j.format, Format::Json);
        assert_eq!(text(&j.body, "transactionRequest.amount").as_deref(), Some("5"));
        assert_eq!(
            text(&j.body, "merchantAuthentication.name"),
            text(&x.body, "merchantAuthentication.name")
        );
    }

    #[test]
    fn unreadable_bodies_say_so_in_their_format() {
        assert_eq!(parse(b"{oops", Format::Xml).unwrap_err().format, Format::Json);
        assert_eq!(parse(b"<a><b></a>", Format::Xml).unwrap_err().format, Format::Xml);
        assert!(parse(b"", Format::Xml).is_err());
        assert!(parse(b"<!DOCTYPE x [<!ENTITY e \"e\">]><x>&e;</x>", Format::Xml).is_err());
        assert!(parse(&b"<a>".repeat(100), Format::Xml).is_err());
        // What the parser met is never repeated: it may be a card number.
        for bad in [
            &b"<x><cardNumber>&4111111111111111;</cardNumber></x>"[..],
            b"<x></x4111111111111111>",
        ] {
            let e = parse(bad, Format::Xml).unwrap_err();
            assert!(!e.message.contains("4111"), "{}", e.message);
            assert!(e.message.contains("near byte "), "{}", e.message);
        }
        // What is neither is answered in the format the client declared.
        assert_eq!(parse(b"[1]", Format::Xml).unwrap_err().format, Format::Json);
        assert_eq!(parse(b"\"x\"", Format::Json).unwrap_err().format, Format::Json);
        assert_eq!(parse(b"5", Format::Xml).unwrap_err().format, Format::Xml);
    }

    #[test]
    fn lists_differ_between_the_formats() {
        let body = Out::Node(vec![
            ("code", Out::text("1")),
            ("message", Out::Each(vec![Out::text("a"), Out::text("b")])),
            ("errors", Out::List("error", vec![Out::text("x<")])),
        ]);
        let xml = String::from_utf8(render(Format::Xml, "r", &body)).unwrap();
        assert!(xml.starts_with('\u{feff}'));
        assert!(
            xml.contains("<message>a</message><message>b</message><errors><error>x&lt;</error></errors></r>")
        );
        let json = String::from_utf8(render(Format::Json, "r", &body)).unwrap();
        assert_eq!(
            json.trim_start_matches('\u{feff}'),
            r#"{"code":"1","message":["a","b"],"errors":["x<"]}"#
        );
    }
}
