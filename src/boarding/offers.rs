//! Offers: what a prospective merchant applies to, found by its vanity
//! URL, with the rules its applications follow (which answers it takes,
//! requires, fixes and defaults).

use super::answers::{self, Rules};
use super::{iso, new_uuid_v4, text_field};
use crate::db::{Conn, DbError, Sql, Value};
use crate::error::{ApiError, ApiResult, FieldErrors};
use serde_json::{json, Map, Value as Json};
use std::collections::BTreeMap;

/// An offer as stored.
#[derive(Debug, Clone)]
pub struct Offer {
    pub id: String,
    pub name: String,
    pub vertical_name: Option<String>,
    pub partner_id: Option<String>,
    pub vertical_preset_id: Option<String>,
    pub pricing_bundle_id: Option<String>,
    pub vanity_url: String,
    pub vanity_domain: Option<String>,
    pub presentational_state: Json,
    pub keys_allowable: Vec<String>,
    pub keys_default_value: BTreeMap<String, Json>,
    pub keys_fixed_value: BTreeMap<String, Json>,
    pub keys_required_value: Vec<String>,
    pub is_active: bool,
    pub is_published: bool,
    pub published_ts: Option<i64>,
    pub created_ts: i64,
    pub modified_ts: i64,
}

const COLUMNS: &str =
    "id, name, vertical_name, partner_id, vertical_preset_id, pricing_bundle_id, vanity_url, \
    vanity_domain, presentational_state, keys_allowable, keys_default_value, keys_fixed_value, \
    keys_required_value, is_active, is_published, published_ts, created_ts, modified_ts";

impl Offer {
    /// The offer record of the spec.
    pub fn to_json(&self) -> Json {
        json!({
            "offerId": self.id,
            "name": self.name,
            "verticalName": self.vertical_name,
            "partnerId": self.partner_id,
            "verticalPresetId": self.vertical_preset_id,
            "pricingBundleId": self.pricing_bundle_id,
            "vanityUrl": self.vanity_url,
            "vanityDomain": self.vanity_domain,
            "presentationalState": self.presentational_state,
            "keysAllowable": self.keys_allowable,
            "keysDefaultValue": self.keys_default_value,
            "keysFixedValue": self.keys_fixed_value,
            "keysRequiredValue": self.keys_required_value,
            "isActive": self.is_active,
            "isPublished": self.is_published,
            "publishedAt": self.published_ts.map(iso),
            "createdAt": iso(self.created_ts),
        })
    }

    pub fn rules(&self) -> Rules {
        Rules {
            allowable: self.keys_allowable.clone(),
            defaults: self.keys_default_value.clone(),
            fixed: self.keys_fixed_value.clone(),
            required: self.keys_required_value.clone(),
        }
    }

    /// Whether applications may be made to it.
    pub fn is_open(&self) -> bool {
        self.is_active && self.is_published
    }

    fn from_row(r: &[Value]) -> ApiResult<Offer> {
        let t = |i: usize| r[i].as_str().map(str::to_string);
        let j = |i: usize| -> ApiResult<Json> {
            serde_json::from_str(r[i].as_str().unwrap_or("null")).map_err(ApiError::internal)
        };
        Ok(Offer {
            id: t(0).unwrap_or_default(),
            name: t(1).unwrap_or_default(),
            vertical_name: t(2),
            partner_id: t(3),
            vertical_preset_id: t(4),
            pricing_bundle_id: t(5),
            vanity_url: t(6).unwrap_or_default(),
            vanity_domain: t(7),
            presentational_state: j(8)?,
            keys_allowable: serde_json::from_value(j(9)?).map_err(ApiError::internal)?,
            keys_default_value: serde_json::from_value(j(10)?).map_err(ApiError::internal)?,
            keys_fixed_value: serde_json::from_value(j(11)?).map_err(ApiError::internal)?,
            keys_required_value: serde_json::from_value(j(12)?).map_err(ApiError::internal)?,
            is_active: r[13].as_int() == Some(1),
            is_published: r[14].as_int() == Some(1),
            published_ts: r[15].as_int(),
            created_ts: r[16].as_int().unwrap_or(0),
            modified_ts: r[17].as_int().unwrap_or(0),
        })
    }

    fn params(&self) -> Vec<Value> {
        fn js<T: serde::Serialize>(v: &T) -> String {
            serde_json::to_string(v).unwrap_or_default()
        }
        vec![
            self.name.clone().into(),
            self.vertical_name.clone().into(),
            self.partner_id.clone().into(),
            self.vertical_preset_id.clone().into(),
            self.pricing_bundle_id.clone().into(),
            self.vanity_url.clone().into(),
            self.vanity_domain.clone().into(),
            self.presentational_state.to_string().into(),
            js(&self.keys_allowable).into(),
            js(&self.keys_default_value).into(),
            js(&self.keys_fixed_value).into(),
            js(&self.keys_required_value).into(),
            self.is_active.into(),
            self.is_published.into(),
            self.published_ts.into(),
            self.modified_ts.into(),
        ]
    }
}

/// The keys an offer made without any gets: every group may be answered;
/// what a merchant account needs is required; ACH consent is fixed to
/// WEB; Amex marketing is not opted out of unless the merchant says so.
pub fn default_rules() -> Rules {
    let mut required: Vec<String> = vec![
        "businessOwnership.ownershipType",
        "businessIndustry.industryType",
        "businessIndustry.industrySic",
        "organizationInformation.organizationName",
        "organizationInformation.employeeIdentificationNumber",
        "organizationContact.firstName",
        "organizationContact.lastName",
        "organizationContact.phoneNumber",
        "organizationContact.emailAddress",
        "organizationLocation.address",
        "organizationLocation.city",
        "organizationLocation.state",
        "organizationLocation.zipCode",
        "organizationLocation.phoneNumber",
        "ownerEquity.owner1",
        "bankInformation.routingNumber",
        "bankInformation.accountNumber",
        "bankInformation.accountNumberReEnter",
        "bankInformation.bankName",
        "salesInformation.monthlyVolume",
        "salesInformation.averageTicket",
        "salesInformation.highestTicket",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    for name in [
        "title",
        "firstName",
        "lastName",
        "address",
        "city",
        "state",
        "zipCode",
        "dateOfBirth",
        "socialSecurityNumber",
        "phoneNumber",
        "emailAddress",
    ] {
        required.push(format!("owner1Information.{name}"));
    }
    Rules {
        allowable: answers::GROUPS.iter().map(|g| g.name.to_string()).collect(),
        defaults: [("salesInformation.amexMarketingOptOut".to_string(), json!(false))].into(),
        fixed: [("customerConsent.secCodes".to_string(), json!("WEB"))].into(),
        required,
    }
}

/// Pages of sections, one section per answer group, each field with its
/// label and, for enumerations, its options: what a form needs to draw.
pub fn default_presentational_state() -> Json {
    let page = |header: &str, groups: &[&str]| {
        let sections: Vec<Json> = groups
            .iter()
            .filter_map(|g| answers::group(g))
            .map(|g| {
                let fields: Vec<Json> = g
                    .fields
                    .iter()
                    .map(|f| {
                        let mut field = json!({ "key": format!("{}.{}", g.name, f.name), "label": answers::label(f.name) });
                        let options: Option<Vec<&str>> = match f.kind {
                            answers::Kind::Title => Some(answers::TITLES.to_vec()),
                            answers::Kind::Ownership => Some(answers::OWNERSHIP.iter().map(|(l, _)| *l).collect()),
                            answers::Kind::State => Some(answers::STATES.to_vec()),
                            answers::Kind::SecCodes => Some(answers::SEC_CODES.to_vec()),
                            _ => None,
                        };
                        if let Some(options) = options {
                            field["options"] = json!(options);
                        }
                        field
                    })
                    .collect();
                json!({ "header": g.header, "key": g.name, "fields": fields })
            })
            .collect();
        json!({ "header": header, "sections": sections })
    };
    json!({ "pages": [
        page("Business", &["businessOwnership", "businessIndustry", "organizationInformation",
            "organizationContact", "organizationLocation", "organizationAddress", "customerConsent"]),
        page("Owners", &["owner1Information", "owner2Information", "owner3Information",
            "owner4Information", "ownerEquity"]),
        page("Banking and sales", &["bankInformation", "salesInformation"]),
    ]})
}

/// Checks an offer's key rules: every key names a group or field, and
/// every fixed or default value is a valid answer (kept normalised, as
/// applications will hold it).
fn check_rules(offer: &mut Offer, today: chrono::NaiveDate, errors: &mut FieldErrors) {
    let echo = crate::engine::validate::echo_name;
    // What the offer requires or presets must be answerable under it, or no
    // application could ever be completed.
    let rules = offer.rules();
    let preset = offer
        .keys_default_value
        .keys()
        .map(|k| ("keysDefaultValue", k))
        .chain(offer.keys_fixed_value.keys().map(|k| ("keysFixedValue", k)))
        .chain(offer.keys_required_value.iter().map(|k| ("keysRequiredValue", k)));
    for (name, k) in preset {
        if !rules.allows_key(k) {
            errors.add(
                name,
                format!(
                    "{} is not among keysAllowable: no application could answer it.",
                    echo(k)
                ),
            );
        }
    }
    let known = |k: &str| answers::group(k).is_some() || answers::field(k).is_some();
    for (name, keys) in [
        ("keysAllowable", &offer.keys_allowable),
        ("keysRequiredValue", &offer.keys_required_value),
    ] {
        for k in keys.iter().filter(|k| !known(k)) {
            errors.add(
                name,
                format!("{} is not an answer group or a dotted answer path.", echo(k)),
            );
        }
    }
    for (name, values) in [
        ("keysDefaultValue", &mut offer.keys_default_value),
        ("keysFixedValue", &mut offer.keys_fixed_value),
    ] {
        for (k, v) in values.iter_mut() {
            match answers::field(k) {
                None => errors.add(name, format!("{} is not a dotted answer path.", echo(k))),
                Some((_, spec)) if spec.sensitive => {
                    errors.add(name, format!("{k} is sensitive and cannot be preset."))
                }
                Some((_, spec)) => match answers::check(spec.kind, v, today) {
                    Ok(normal) => *v = normal,
                    Err(e) => errors.add(
                        format!("{name}.{k}"),
                        format!("{} {e}", answers::label(spec.name)),
                    ),
                },
            }
        }
    }
}

fn string_list(raw: &Json, name: &str, errors: &mut FieldErrors) -> Vec<String> {
    match raw.as_array() {
        Some(items) if items.iter().all(Json::is_string) && items.len() <= 200 => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => {
            errors.add(
                name,
                format!("{} must be an array of strings.", answers::label(name)),
            );
            Vec::new()
        }
    }
}

fn value_map(raw: &Json, name: &str, errors: &mut FieldErrors) -> BTreeMap<String, Json> {
    match raw.as_object() {
        Some(m) if m.len() <= 200 => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        _ => {
            errors.add(
                name,
                format!("{} must be an object of dotted paths.", answers::label(name)),
            );
            BTreeMap::new()
        }
    }
}

fn flag(raw: &Json, name: &str, errors: &mut FieldErrors) -> bool {
    crate::engine::validate::parse_flag(raw).unwrap_or_else(|| {
        errors.add(name, format!("{} must be true or false.", answers::label(name)));
        false
    })
}

fn vanity_ok(v: &str) -> bool {
    (1..=64).contains(&v.len())
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// Applies an operator's fields to `offer` (a new one, or a stored one
/// for an update, where omitted fields keep their value).
pub fn apply_input(offer: &mut Offer, input: &Map<String, Json>, now: i64) -> ApiResult<()> {
    let mut errors = FieldErrors::new();
    let was_published = offer.is_published;
    for (key, raw) in input {
        let opt = |errors: &mut FieldErrors, max| text_field(raw, key, 1, max, errors);
        match key.as_str() {
            "name" => match opt(&mut errors, 128) {
                Some(v) => offer.name = v,
                None if !errors.has(key) => errors.add(key.clone(), "Name cannot be blank."),
                None => {}
            },
            "vanityUrl" => match raw.as_str().filter(|v| vanity_ok(v)) {
                Some(v) => offer.vanity_url = v.to_string(),
                None => errors.add(
                    key.clone(),
                    "Vanity url must be 1 to 64 letters, digits, '-', '_' or '.'.",
                ),
            },
            "verticalName" => offer.vertical_name = opt(&mut errors, 128),
            "partnerId" => offer.partner_id = opt(&mut errors, 64),
            "verticalPresetId" => offer.vertical_preset_id = opt(&mut errors, 64),
            "pricingBundleId" => offer.pricing_bundle_id = opt(&mut errors, 64),
            "vanityDomain" => offer.vanity_domain = opt(&mut errors, 255),
            "presentationalState" => match raw {
                Json::Object(_) if raw.to_string().len() <= 65_536 => {
                    offer.presentational_state = raw.clone()
                }
                _ => errors.add(
                    key.clone(),
                    "Presentational state must be an object (at most 64 KiB).",
                ),
            },
            "keysAllowable" => offer.keys_allowable = string_list(raw, key, &mut errors),
            "keysRequiredValue" => offer.keys_required_value = string_list(raw, key, &mut errors),
            "keysDefaultValue" => offer.keys_default_value = value_map(raw, key, &mut errors),
            "keysFixedValue" => offer.keys_fixed_value = value_map(raw, key, &mut errors),
            "isActive" => offer.is_active = flag(raw, key, &mut errors),
            "isPublished" => offer.is_published = flag(raw, key, &mut errors),
            "offerId" | "publishedAt" | "createdAt" => errors.add(
                key.clone(),
                format!("{} is set by the server.", answers::label(key)),
            ),
            other => errors.add(
                crate::engine::validate::echo_name(other),
                "Unknown member of an offer.".to_string(),
            ),
        }
    }
    if offer.vanity_url.is_empty() && !errors.has("vanityUrl") {
        errors.add("vanityUrl", "Vanity url cannot be blank.");
    }
    if offer.name.is_empty() && !errors.has("name") {
        errors.add("name", "Name cannot be blank.");
    }
    check_rules(offer, super::today(now), &mut errors);
    errors.into_result()?;
    if offer.is_published && !was_published {
        offer.published_ts = Some(now);
    }
    offer.modified_ts = now;
    Ok(())
}

/// A new offer with the default keys and presentational state.
pub fn blank(now: i64) -> Offer {
    let rules = default_rules();
    Offer {
        id: new_uuid_v4(),
        name: String::new(),
        vertical_name: None,
        partner_id: None,
        vertical_preset_id: None,
        pricing_bundle_id: None,
        vanity_url: String::new(),
        vanity_domain: None,
        presentational_state: default_presentational_state(),
        keys_allowable: rules.allowable,
        keys_default_value: rules.defaults,
        keys_fixed_value: rules.fixed,
        keys_required_value: rules.required,
        is_active: true,
        is_published: false,
        published_ts: None,
        created_ts: now,
        modified_ts: now,
    }
}

fn taken() -> ApiError {
    let mut errors = FieldErrors::new();
    errors.add("vanityUrl", "Another offer already uses this vanity url.");
    ApiError::Conflict(errors)
}

/// Creates an offer from an operator's fields.
pub fn create(conn: &mut dyn Conn, input: &Map<String, Json>, now: i64) -> ApiResult<Offer> {
    let mut offer = blank(now);
    apply_input(&mut offer, input, now)?;
    let mut params: Vec<Value> = vec![offer.id.clone().into()];
    params.extend(offer.params());
    params.push(offer.created_ts.into());
    conn.execute(&Sql::with(
        "INSERT INTO boarding_offers (id, name, vertical_name, partner_id, vertical_preset_id, pricing_bundle_id, \
         vanity_url, vanity_domain, presentational_state, keys_allowable, keys_default_value, keys_fixed_value, \
         keys_required_value, is_active, is_published, published_ts, modified_ts, created_ts) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        params,
    ))
    .map_err(|e| match e {
        DbError::Unique(_) => taken(),
        other => other.into(),
    })?;
    Ok(offer)
}

/// Changes the fields given; the others keep their value.
pub fn update(conn: &mut dyn Conn, id: &str, input: &Map<String, Json>, now: i64) -> ApiResult<Offer> {
    let mut offer = find(conn, id)?.ok_or_else(|| ApiError::not_found("Offer"))?;
    apply_input(&mut offer, input, now)?;
    let mut params = offer.params();
    params.push(offer.id.clone().into());
    conn.execute(&Sql::with(
        "UPDATE boarding_offers SET name = ?, vertical_name = ?, partner_id = ?, vertical_preset_id = ?, \
         pricing_bundle_id = ?, vanity_url = ?, vanity_domain = ?, presentational_state = ?, keys_allowable = ?, \
         keys_default_value = ?, keys_fixed_value = ?, keys_required_value = ?, is_active = ?, is_published = ?, \
         published_ts = ?, modified_ts = ? WHERE id = ?",
        params,
    ))
    .map_err(|e| match e {
        DbError::Unique(_) => taken(),
        other => other.into(),
    })?;
    Ok(offer)
}

pub fn find(conn: &mut dyn Conn, id: &str) -> ApiResult<Option<Offer>> {
    // Anything but a UUID names no offer (and never reaches the database:
    // PostgreSQL refuses a NUL in text).
    let Some(id) = super::parse_uuid(id) else {
        return Ok(None);
    };
    let mut sql = Sql::new(&format!("SELECT {COLUMNS} FROM boarding_offers WHERE id = "));
    sql.bind(id);
    conn.query_one(&sql)?.map(|r| Offer::from_row(&r)).transpose()
}

/// The open (active and published) offer at a vanity url.
pub fn find_open_by_vanity(conn: &mut dyn Conn, vanity: &str) -> ApiResult<Option<Offer>> {
    if !vanity_ok(vanity) {
        return Ok(None);
    }
    let mut sql = Sql::new(&format!(
        "SELECT {COLUMNS} FROM boarding_offers WHERE vanity_url = "
    ));
    sql.bind(vanity.to_string());
    Ok(conn
        .query_one(&sql)?
        .map(|r| Offer::from_row(&r))
        .transpose()?
        .filter(Offer::is_open))
}

/// Every offer, newest first.
pub fn all(conn: &mut dyn Conn) -> ApiResult<Vec<Offer>> {
    rows(
        conn,
        Sql::new(&format!(
            "SELECT {COLUMNS} FROM boarding_offers ORDER BY created_ts DESC, id DESC"
        )),
    )
}

/// `limit` offers, newest first, after the first `offset`; and how many
/// there are in all.
pub fn page(conn: &mut dyn Conn, offset: u64, limit: u64) -> ApiResult<(Vec<Offer>, u64)> {
    let mut sql = Sql::new(&format!(
        "SELECT {COLUMNS} FROM boarding_offers ORDER BY created_ts DESC, id DESC LIMIT "
    ));
    sql.bind(limit as i64).push(" OFFSET ").bind(offset as i64);
    let offers = rows(conn, sql)?;
    let total = conn.query_int(&Sql::new("SELECT COUNT(*) FROM boarding_offers"))?;
    Ok((offers, total as u64))
}

fn rows(conn: &mut dyn Conn, sql: Sql) -> ApiResult<Vec<Offer>> {
    conn.query(&sql)?.iter().map(|r| Offer::from_row(r)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_keys_are_valid_and_every_group_is_presented() {
        let mut offer = blank(1_764_000_000);
        let mut errors = FieldErrors::new();
        let today = super::super::today(offer.created_ts);
        check_rules(&mut offer, today, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        let presented = offer.presentational_state.to_string();
        for g in answers::GROUPS {
            assert!(
                presented.contains(&format!("\"key\":\"{}\"", g.name)),
                "{}",
                g.name
            );
        }
        assert!(vanity_ok("acme-hardware_2.0"));
        assert!(!vanity_ok("has space"));
        assert!(!vanity_ok(""));
    }
}
