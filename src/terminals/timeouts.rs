//! Terminal timeouts (spec, Limits): nine named values in seconds, each
//! with a default and bounds. A terminal stores all nine as a JSON object;
//! what a create or update sends is laid over what is there (the defaults
//! on create), so a client may send only the members it changes.

use serde_json::{Map, Value as Json};

/// (name, default, min, max), in seconds, as the spec's table gives them.
pub const TABLE: &[(&str, i64, i64, i64)] = &[
    ("card_entry_timeout", 120, 20, 120),
    ("device_terms_prompt_timeout", 60, 5, 300),
    ("overall_timeout", 300, 30, 300),
    ("pin_entry_timeout", 30, 20, 50),
    ("signature_input_timeout", 10, 10, 50),
    ("signature_submit_timeout", 30, 20, 50),
    ("status_display_time", 7, 1, 30),
    ("tip_cashback_timeout", 30, 20, 50),
    ("transaction_timeout", 10, 10, 20),
];

/// Every timeout at its default, as stored.
pub fn defaults() -> Map<String, Json> {
    TABLE
        .iter()
        .map(|(name, default, _, _)| (name.to_string(), Json::from(*default)))
        .collect()
}

/// One timeout of a stored object (its default when absent or damaged).
/// For the router: `get(terminal.text("terminal_timeouts"), "overall_timeout")`.
pub fn get(stored: Option<&str>, name: &str) -> Option<i64> {
    let (_, default, _, _) = TABLE.iter().find(|(n, ..)| *n == name)?;
    let value = stored
        .and_then(|s| serde_json::from_str::<Map<String, Json>>(s).ok())
        .and_then(|m| m.get(name).and_then(Json::as_i64));
    Some(value.unwrap_or(*default))
}

/// All nine of a stored object, each at its default when absent or
/// damaged: what a device is sent.
pub fn all(stored: Option<&str>) -> Map<String, Json> {
    TABLE
        .iter()
        .filter_map(|(name, ..)| Some((name.to_string(), Json::from(get(stored, name)?))))
        .collect()
}

/// A member's value: a JSON integer or a string of digits.
fn seconds(v: &Json) -> Option<i64> {
    match v {
        Json::Number(n) => n.as_i64(),
        Json::String(s) if !s.is_empty() && s.len() <= 6 && s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse().ok()
        }
        _ => None,
    }
}

/// `sent` (the field's JSON text, `None` when not sent or cleared) laid
/// over `base` (the stored object; the defaults when `None`). A cleared
/// field is every default again. Returns the stored text, or messages.
pub fn merge(base: Option<&str>, sent: Option<&str>) -> Result<String, Vec<String>> {
    let mut out = defaults();
    if let Some(stored) = base.and_then(|s| serde_json::from_str::<Map<String, Json>>(s).ok()) {
        for (k, v) in stored {
            if out.contains_key(&k) {
                out.insert(k, v);
            }
        }
    }
    let Some(sent) = sent else {
        return Ok(Json::Object(defaults()).to_string());
    };
    let sent = match serde_json::from_str::<Json>(sent) {
        Ok(Json::Object(m)) => m,
        _ => {
            return Err(vec![
                "terminal_timeouts must be an object of timeouts in seconds.".into(),
            ])
        }
    };
    let mut errors = Vec::new();
    for (name, value) in &sent {
        let Some((_, _, min, max)) = TABLE.iter().find(|(n, ..)| n == name) else {
            let shown: String = name.chars().take(64).collect();
            errors.push(format!(
                "{shown} is not a terminal timeout (known: {}).",
                TABLE.iter().map(|t| t.0).collect::<Vec<_>>().join(", ")
            ));
            continue;
        };
        match seconds(value) {
            Some(s) if (*min..=*max).contains(&s) => {
                out.insert(name.clone(), Json::from(s));
            }
            _ => errors.push(format!(
                "{name} must be a whole number of seconds from {min} to {max}."
            )),
        }
    }
    if errors.is_empty() {
        Ok(Json::Object(out).to_string())
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(s: &str) -> Map<String, Json> {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn defaults_bounds_and_overlay() {
        let all = merge(None, Some("{}")).unwrap();
        assert_eq!(parsed(&all), defaults());
        assert_eq!(get(Some(&all), "overall_timeout"), Some(300));
        let changed = merge(
            Some(&all),
            Some(r#"{"overall_timeout":30,"pin_entry_timeout":"50"}"#),
        )
        .unwrap();
        let m = parsed(&changed);
        assert_eq!(m["overall_timeout"], 30);
        assert_eq!(m["pin_entry_timeout"], 50);
        assert_eq!(m["card_entry_timeout"], 120);
        // Later changes keep earlier ones.
        let again = merge(Some(&changed), Some(r#"{"status_display_time":1}"#)).unwrap();
        assert_eq!(parsed(&again)["overall_timeout"], 30);
        // Cleared: the defaults.
        assert_eq!(parsed(&merge(Some(&again), None).unwrap()), defaults());
        for bad in [
            r#"{"overall_timeout":301}"#,
            r#"{"overall_timeout":29}"#,
            r#"{"status_display_time":0}"#,
            r#"{"transaction_timeout":21}"#,
            r#"{"pin_entry_timeout":"2x"}"#,
            r#"{"pin_entry_timeout":true}"#,
            r#"{"pin_entry_timeout":25.5}"#,
            r#"{"nap_timeout":5}"#,
            r#"[1,2]"#,
        ] {
            assert!(merge(None, Some(bad)).is_err(), "{bad}");
        }
        for (name, default, min, max) in TABLE {
            assert!(min <= default && default <= max, "{name}");
        }
    }
}
