//! What a hosted form shows and what its submission becomes: the UI flags
//! of the request (reference 7.2) with their defaults, the fields the
//! payer fills in, and the merge of those fields into the transaction or
//! vault the request describes. No HTTP and no HTML here: the pages
//! render a [`Form`], the handlers hand its submission to the payments
//! core or the vault resource.

use crate::error::FieldErrors;
use serde_json::{Map, Value as Json};

/// Which hosted page a form is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `GET /v2/payform`: a payment.
    PayForm,
    /// `GET /v2/accountform`: a vault only.
    AccountForm,
    /// `GET /hostedpaymentpage`: a payment on a merchant's saved page.
    PaymentPage,
    /// `POST /v2/tickets`: no page, but its hash-key is spent like a form's.
    Ticket,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::PayForm => "payform",
            Kind::AccountForm => "accountform",
            Kind::PaymentPage => "hostedpaymentpage",
            Kind::Ticket => "ticket",
        }
    }

    pub fn parse(name: &str) -> Option<Kind> {
        [Kind::PayForm, Kind::AccountForm, Kind::PaymentPage, Kind::Ticket]
            .into_iter()
            .find(|k| k.name() == name)
    }

    /// The key of the request's data object (`{transaction:{...}}`).
    pub fn envelope(self) -> &'static str {
        match self {
            Kind::AccountForm => "accountvault",
            Kind::Ticket => "ticket",
            _ => "transaction",
        }
    }

    pub fn makes_payment(self) -> bool {
        matches!(self, Kind::PayForm | Kind::PaymentPage)
    }

    /// What the form's user must be allowed to do, when the form opens and
    /// again when the payer submits it (the user's role may have changed
    /// in between).
    pub fn permission(self) -> &'static str {
        if self.makes_payment() {
            "transactions.create"
        } else {
            "accountvaults.create"
        }
    }
}

/// How the payer enters the account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryMethod {
    Manual,
    Terminal,
    Both,
}

/// The UI flags of a form, defaults applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Flags {
    pub display_close_button: bool,
    pub show_account_holder_name: bool,
    pub show_cvv: bool,
    pub show_title: bool,
    pub parent_close: bool,
    pub parent_close_delay: u32,
    pub entry_method: EntryMethod,
    pub show_street: bool,
    pub show_zip: bool,
    pub require_street: bool,
    pub require_zip: bool,
    pub show_second_account_number: bool,
    pub show_service_address_fields: bool,
    pub stylesheet_url: Option<String>,
    pub parent_send_message: bool,
    pub redirect_url_on_approval: Option<String>,
    pub redirect_url_on_decline: Option<String>,
    pub redirect_url_delay: u32,
    /// `en_CA` asks for a province and says "postal code".
    pub canadian: bool,
    /// Payment page only: bounds on an amount the payer types.
    pub min_payment_amount: Option<i64>,
    pub max_payment_amount: Option<i64>,
}

/// The longest delay a page waits before closing or redirecting.
const MAX_DELAY_S: i64 = 600;
const MAX_URL: usize = 256;

/// The flag names, taken out of the data before the rest goes to the
/// transaction or vault (`send_parent_message` is a spelling one of the
/// reference's samples uses; `redirect_url_on_approve` is the payment
/// page's).
pub const FLAG_NAMES: &[&str] = &[
    "display_close_button",
    "show_account_holder_name",
    "show_cvv",
    "show_title",
    "parent_close",
    "parent_close_delay",
    "entry_method",
    "show_street",
    "show_zip",
    "require_street",
    "require_zip",
    "show_second_account_number",
    "show_service_address_fields",
    "stylesheet_url",
    "parent_send_message",
    "send_parent_message",
    "redirect_url_on_approval",
    "redirect_url_on_approve",
    "redirect_url_on_decline",
    "redirect_url_delay",
    "locale",
    "min_payment_amount",
    "max_payment_amount",
];

/// What the product transaction's settings say about the form's address
/// fields and entry method.
#[derive(Clone, Debug, Default)]
pub struct ProductDefaults {
    pub show_street: bool,
    pub show_zip: bool,
    pub require_street: bool,
    pub require_zip: bool,
    pub show_cvv: bool,
    /// e-commerce and MOTO products enter manually; retail, lodging and
    /// restaurant products also offer a terminal.
    pub industry: String,
    /// The surcharge a credit card pays, in basis points (0 for none).
    pub surcharge_bp: i64,
}

impl ProductDefaults {
    /// From a product transaction's settings document.
    pub fn from_settings(settings: &Json) -> ProductDefaults {
        let on = |k: &str| matches!(&settings[k], Json::Bool(true)) || settings[k].as_i64() == Some(1);
        ProductDefaults {
            show_street: on("vt_street") || on("vt_show_street"),
            show_zip: on("vt_zip") || on("vt_show_zip"),
            require_street: on("vt_require_street"),
            require_zip: on("vt_require_zip"),
            show_cvv: !matches!(&settings["vt_cvv"], Json::Bool(false)),
            industry: settings["industry_type"]
                .as_str()
                .unwrap_or("ecommerce")
                .to_string(),
            surcharge_bp: crate::payments::surcharge::rate_bp(settings).unwrap_or(0),
        }
    }
}

/// A flag as the reference's samples send it: true/false, 1/0, or those
/// as text in any case; a blank text is off.
fn boolean(value: &Json) -> Option<bool> {
    match value {
        Json::String(s) if s.trim().is_empty() => Some(false),
        Json::String(s) => crate::engine::validate::parse_flag(&Json::String(s.trim().to_ascii_lowercase())),
        other => crate::engine::validate::parse_flag(other),
    }
}

fn seconds(value: &Json) -> Option<u32> {
    let n = match value {
        Json::Number(n) => n.to_string().parse::<i64>().ok()?,
        Json::String(s) => s.trim().parse::<i64>().ok()?,
        _ => return None,
    };
    (0..=MAX_DELAY_S).contains(&n).then_some(n as u32)
}

/// An absolute http(s) URL of at most 256 characters, without
/// credentials or characters that would end an attribute.
pub fn check_url(text: &str) -> Result<String, String> {
    let t = text.trim();
    if t.len() > MAX_URL {
        return Err(format!("must be at most {MAX_URL} characters"));
    }
    let rest = t
        .strip_prefix("https://")
        .or_else(|| t.strip_prefix("http://"))
        .ok_or("must be an absolute http or https URL")?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let (name, port) = host.rsplit_once(':').unwrap_or((host, ""));
    let name_ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
    let port_ok = port.is_empty() && !host.ends_with(':')
        || !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit());
    if !name_ok || !port_ok {
        return Err("must name a host: letters, digits, dots and dashes, and a port (no credentials)".into());
    }
    if t.chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '<' | '>' | '\'' | '`' | '\\'))
    {
        return Err("contains characters a URL cannot hold".into());
    }
    Ok(t.to_string())
}

/// The origin (`scheme://host[:port]`) of a URL [`check_url`] accepted.
pub fn origin_of(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("https", url));
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    format!("{scheme}://{host}")
}

/// Takes the flags out of `data`, applying defaults; what remains is the
/// transaction's or vault's own fields.
pub fn take_flags(
    kind: Kind,
    data: &mut Map<String, Json>,
    product: &ProductDefaults,
) -> Result<Flags, FieldErrors> {
    let mut errors = FieldErrors::new();
    let mut taken = Map::new();
    for name in FLAG_NAMES {
        if let Some(v) = data.remove(*name) {
            taken.insert(name.to_string(), v);
        }
    }
    let mut flag = |name: &str, default: bool| -> bool {
        match taken.get(name) {
            None | Some(Json::Null) => default,
            Some(v) => boolean(v).unwrap_or_else(|| {
                errors.add(name, format!("{name} must be true, false, 1 or 0."));
                default
            }),
        }
    };
    let display_close_button = flag("display_close_button", true);
    let show_account_holder_name = flag("show_account_holder_name", true);
    let show_cvv = flag("show_cvv", product.show_cvv);
    let show_title = flag("show_title", true);
    let parent_close = flag("parent_close", false);
    let show_street = flag("show_street", product.show_street);
    let show_zip = flag("show_zip", product.show_zip);
    let require_street = flag("require_street", product.require_street);
    let require_zip = flag("require_zip", product.require_zip);
    let show_second_account_number = flag("show_second_account_number", false);
    let show_service_address_fields = flag("show_service_address_fields", false);
    let parent_send_message = flag("parent_send_message", false) || flag("send_parent_message", false);
    let mut delay = |name: &str, default: u32| match taken.get(name) {
        None | Some(Json::Null) => default,
        Some(v) => seconds(v).unwrap_or_else(|| {
            errors.add(
                name,
                format!("{name} must be a number of seconds from 0 to {MAX_DELAY_S}."),
            );
            default
        }),
    };
    let parent_close_delay = delay("parent_close_delay", 10);
    let redirect_url_delay = delay("redirect_url_delay", 0);
    let entry_method = match taken.get("entry_method").and_then(Json::as_str) {
        Some("manual") => EntryMethod::Manual,
        Some("terminal") => EntryMethod::Terminal,
        Some("both") => EntryMethod::Both,
        None if taken.get("entry_method").is_none_or(Json::is_null) => {
            if matches!(product.industry.as_str(), "ecommerce" | "moto") {
                EntryMethod::Manual
            } else {
                EntryMethod::Both
            }
        }
        _ => {
            errors.add("entry_method", "entry_method must be manual, terminal or both.");
            EntryMethod::Manual
        }
    };
    let mut url = |names: &[&str]| -> Option<String> {
        let (name, v) = names.iter().find_map(|n| taken.get(*n).map(|v| (*n, v)))?;
        match v {
            Json::Null => None,
            Json::String(s) if s.trim().is_empty() => None,
            Json::String(s) => check_url(s)
                .map_err(|m| errors.add(name, format!("{name} {m}.")))
                .ok(),
            _ => {
                errors.add(name, format!("{name} must be a URL."));
                None
            }
        }
    };
    let stylesheet_url = url(&["stylesheet_url"]);
    let redirect_url_on_approval = url(&["redirect_url_on_approval", "redirect_url_on_approve"]);
    let redirect_url_on_decline = url(&["redirect_url_on_decline"]);
    let canadian = match taken.get("locale") {
        None | Some(Json::Null) => false,
        Some(Json::String(l)) if l == "en_CA" => true,
        Some(Json::String(l)) if l == "en_US" => false,
        Some(_) => {
            errors.add("locale", "locale must be en_US or en_CA.");
            false
        }
    };
    let mut amount = |name: &str| match taken.get(name) {
        None | Some(Json::Null) => None,
        Some(v) => crate::money::parse(v, 99_999_999_999)
            .map_err(|m| errors.add(name, format!("{name} {m}.")))
            .ok(),
    };
    let min_payment_amount = amount("min_payment_amount");
    let max_payment_amount = amount("max_payment_amount");
    if let (Some(min), Some(max)) = (min_payment_amount, max_payment_amount) {
        // No amount could be paid: the payer would meet every one refused.
        if min > max {
            errors.add(
                "min_payment_amount",
                "min_payment_amount cannot be above max_payment_amount.",
            );
        }
    }
    if kind == Kind::AccountForm && taken.contains_key("min_payment_amount") {
        errors.add("min_payment_amount", "An account form takes no payment amount.");
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Flags {
        display_close_button,
        show_account_holder_name,
        show_cvv,
        show_title,
        parent_close,
        parent_close_delay,
        entry_method,
        show_street,
        show_zip,
        require_street: require_street && show_street,
        require_zip: require_zip && show_zip,
        show_second_account_number,
        show_service_address_fields,
        stylesheet_url,
        parent_send_message,
        redirect_url_on_approval,
        redirect_url_on_decline,
        redirect_url_delay,
        canadian,
        min_payment_amount,
        max_payment_amount,
    })
}

/// How a field is typed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    Text,
    /// Digits typed on a numeric keypad (card and bank numbers).
    Digits,
    /// An amount of money.
    Amount,
    /// checking or savings.
    AccountType,
}

/// One field of a hosted form.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    /// The transaction's or vault's field name (`confirm_account_number`
    /// is the form's own).
    pub name: &'static str,
    pub label: String,
    pub input: Input,
    pub required: bool,
    pub visible: bool,
    pub readonly: bool,
    /// A preset value (never for card or bank data).
    pub value: Option<String>,
    /// The HTML `autocomplete` token, for browsers and password managers.
    pub autocomplete: &'static str,
    pub max_len: u32,
    /// Card or bank data: never echoed back, never preset.
    pub sensitive: bool,
    pub hint: Option<&'static str>,
}

impl Field {
    fn new(name: &'static str, label: &str, input: Input, autocomplete: &'static str, max_len: u32) -> Field {
        Field {
            name,
            label: label.to_string(),
            input,
            required: false,
            visible: true,
            readonly: false,
            value: None,
            autocomplete,
            max_len,
            sensitive: false,
            hint: None,
        }
    }
    fn required(mut self, yes: bool) -> Field {
        self.required = yes;
        self
    }
    fn sensitive(mut self) -> Field {
        self.sensitive = true;
        self
    }
    fn hint(mut self, hint: &'static str) -> Field {
        self.hint = Some(hint);
        self
    }
}

/// The fields that may never be preset by a request (reference 7.3).
pub const NEVER_PRESET: &[&str] = &[
    "account_number",
    "exp_date",
    "cvv",
    "account_holder_name",
    "routing",
];

/// Other sources of the money than the account the payer types: a form
/// charges what is typed on it, so its data may name none of them.
pub const OTHER_SOURCES: &[&str] = &[
    "account_vault_id",
    "account_vault_api_id",
    "previous_transaction_id",
    "previous_transaction_api_id",
    "track_data",
    "ticket",
];

/// The fields the payer fills in (shown and not read-only): mistakes about
/// them are the payer's to correct; any other is the integrator's.
pub fn typed_by_payer(form: &[Field]) -> Vec<&'static str> {
    form.iter()
        .filter(|f| f.visible && !f.readonly)
        .map(|f| f.name)
        .collect()
}

/// What a payer could type into each field the payer fills in: a valid
/// test card or bank account, an expiry some years after `now`, and for
/// an amount the largest the form takes. The payments core's checks run on
/// the form's data with these when it opens, so that a mistake no payer
/// could correct is caught before anyone types a card.
pub fn stand_ins(form: &[Field], flags: &Flags, method: &str, now: i64) -> Vec<(String, String)> {
    let year = chrono::DateTime::from_timestamp(now, 0)
        .map(|d| chrono::Datelike::year(&d))
        .unwrap_or(2030);
    // Without a maximum, a million (in cents): larger than any tip or tax.
    let largest = flags.max_payment_amount.unwrap_or(100_000_000);
    typed_by_payer(form)
        .into_iter()
        .map(|name| {
            let value = match name {
                "account_number" | "confirm_account_number" if method == "ach" => "123456789".to_string(),
                "account_number" => "4111111111111111".to_string(),
                "exp_date" => format!("12{:02}", (year + 5) % 100),
                "cvv" => "999".to_string(),
                "routing" => "072000326".to_string(),
                "account_type" => "checking".to_string(),
                "transaction_amount" => crate::money::Money::from_cents(largest).to_text(),
                "billing_zip" | "service_zip" => "12345".to_string(),
                "billing_state" => "ON".to_string(),
                "service_state" => "NY".to_string(),
                _ => "Pat Payer".to_string(),
            };
            (name.to_string(), value)
        })
        .collect()
}

fn text_of(v: &Json) -> Option<String> {
    match v {
        Json::String(s) if !s.is_empty() => Some(s.clone()),
        Json::Number(n) => Some(n.to_string()),
        Json::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The fields a form shows for a payment method, in order, with the
/// request's values preset where a payer may see them.
pub fn fields(kind: Kind, method: &str, flags: &Flags, data: &Map<String, Json>) -> Vec<Field> {
    let mut out = Vec::new();
    if kind == Kind::PaymentPage {
        out.push(
            Field::new(
                "transaction_amount",
                "Amount",
                Input::Amount,
                "transaction-amount",
                14,
            )
            .required(true),
        );
    }
    if kind == Kind::AccountForm && flags.show_title {
        out.push(Field::new(
            "title",
            "Title for this account",
            Input::Text,
            "off",
            16,
        ));
    }
    if flags.show_account_holder_name {
        let ach = method == "ach";
        out.push(
            Field::new(
                "account_holder_name",
                if ach {
                    "Account holder name"
                } else {
                    "Name on card"
                },
                Input::Text,
                "cc-name",
                32,
            )
            .required(ach),
        );
    }
    if method == "ach" {
        out.push(
            Field::new("routing", "Routing number", Input::Digits, "off", 9)
                .required(true)
                .sensitive()
                .hint("9 digits, bottom left of a check"),
        );
        out.push(
            Field::new("account_number", "Account number", Input::Digits, "off", 17)
                .required(true)
                .sensitive(),
        );
        if flags.show_second_account_number {
            out.push(
                Field::new(
                    "confirm_account_number",
                    "Account number again",
                    Input::Digits,
                    "off",
                    17,
                )
                .required(true)
                .sensitive(),
            );
        }
        out.push(Field::new("account_type", "Account type", Input::AccountType, "off", 8).required(true));
    } else {
        out.push(
            Field::new("account_number", "Card number", Input::Digits, "cc-number", 19)
                .required(true)
                .sensitive(),
        );
        out.push(
            Field::new("exp_date", "Expiry (MM/YY)", Input::Digits, "cc-exp", 5)
                .required(true)
                .sensitive()
                .hint("Month and year, as on the card"),
        );
        if flags.show_cvv && kind != Kind::AccountForm {
            out.push(
                Field::new("cvv", "Security code (CVV)", Input::Digits, "cc-csc", 4)
                    .required(false)
                    .sensitive()
                    .hint("3 or 4 digits"),
            );
        }
    }
    let street_name = if kind == Kind::AccountForm {
        "billing_address"
    } else {
        "billing_street"
    };
    if flags.show_street {
        out.push(
            Field::new(street_name, "Billing street", Input::Text, "address-line1", 64)
                .required(flags.require_street),
        );
    }
    if flags.show_zip || flags.canadian {
        let label = if flags.canadian { "Postal code" } else { "ZIP code" };
        out.push(
            Field::new("billing_zip", label, Input::Text, "postal-code", 10).required(flags.require_zip),
        );
    }
    if flags.canadian {
        out.push(Field::new("billing_state", "Province", Input::Text, "address-level1", 24).required(true));
    }
    if flags.show_service_address_fields && kind != Kind::AccountForm {
        // Named as the transaction's fields, with their lengths.
        for (name, label, max_len) in [
            ("service_address", "Service street", 32),
            ("service_city", "Service city", 36),
            ("service_state", "Service state", 26),
            ("service_zip", "Service ZIP code", 12),
        ] {
            out.push(Field::new(name, label, Input::Text, "off", max_len));
        }
    }
    for f in &mut out {
        if NEVER_PRESET.contains(&f.name) && f.name != "account_holder_name" {
            continue;
        }
        if let Some(v) = data.get(f.name).and_then(text_of) {
            f.value = Some(v);
        }
    }
    out
}

/// A payment page's per-link override of one field (reference 7.3).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Override {
    pub value: Option<Json>,
    pub label: Option<String>,
    pub readonly: Option<bool>,
    pub visible: Option<bool>,
}

/// Applies `field_configuration.body.fields[]`: entries for fields on the
/// form change them; hidden entries for others add transaction fields
/// (`contact_id`, `save_account`, ...) to `hidden`. Card data cannot be
/// preset.
pub fn apply_overrides(
    form: &mut [Field],
    config: &Json,
    hidden: &mut Map<String, Json>,
) -> Result<(), FieldErrors> {
    let mut errors = FieldErrors::new();
    let Some(entries) = config.get("body").and_then(|b| b.get("fields")) else {
        if !config.is_null() {
            errors.add(
                "field_configuration",
                "field_configuration must be {body:{fields:[...]}}.",
            );
        }
        return if errors.is_empty() { Ok(()) } else { Err(errors) };
    };
    let Some(entries) = entries.as_array() else {
        errors.add(
            "field_configuration",
            "field_configuration.body.fields must be a list.",
        );
        return Err(errors);
    };
    for entry in entries {
        let Some(id) = entry.get("id").and_then(Json::as_str) else {
            errors.add("field_configuration", "Each field configuration needs an id.");
            continue;
        };
        let o = Override {
            value: entry.get("value").filter(|v| !v.is_null()).cloned(),
            label: entry.get("label").and_then(Json::as_str).map(str::to_string),
            readonly: entry.get("readonly").and_then(boolean),
            visible: entry.get("visible").and_then(boolean),
        };
        if NEVER_PRESET.contains(&id) && o.value.is_some() {
            errors.add(id.to_string(), format!("The value of {id} cannot be preset."));
            continue;
        }
        match form.iter_mut().find(|f| f.name == id) {
            Some(f) => {
                if let Some(v) = o.value.as_ref().and_then(text_of) {
                    f.value = Some(v);
                }
                if let Some(l) = o.label.filter(|l| !l.trim().is_empty()) {
                    f.label = l.chars().take(64).collect();
                }
                f.readonly = o.readonly.unwrap_or(f.readonly);
                f.visible = o.visible.unwrap_or(f.visible);
                if (f.readonly || !f.visible) && f.required && f.value.is_none() {
                    errors.add(
                        id.to_string(),
                        format!("{id} is required: a read-only or hidden field needs a value."),
                    );
                }
            }
            None if o.visible == Some(false) => match o.value {
                Some(v) => {
                    hidden.insert(id.to_string(), v);
                }
                None => errors.add(id.to_string(), format!("The hidden field {id} needs a value.")),
            },
            None => errors.add(
                id.to_string(),
                format!("{id} is not a field of this page; only hidden entries may add fields."),
            ),
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// An amount the payer cannot change (read-only or hidden) must be one
/// the page can take: checked when the page opens, so that a link no
/// payer could ever complete is refused to its integrator instead.
pub fn check_fixed_amount(form: &[Field], flags: &Flags) -> Result<(), FieldErrors> {
    match form
        .iter()
        .find(|f| f.name == "transaction_amount" && (f.readonly || !f.visible))
    {
        Some(fixed) => merge_submission(std::slice::from_ref(fixed), flags, &[], Map::new()).map(drop),
        None => Ok(()),
    }
}

/// Normalises what a payer typed: spaces and dashes out of numbers,
/// `MM/YY` to `MMYY`.
fn typed(field: &Field, raw: &str) -> String {
    let t = raw.trim();
    match (field.input, field.name) {
        (Input::Digits, "exp_date") => t.chars().filter(char::is_ascii_digit).collect(),
        (Input::Digits, _) => t.chars().filter(|c| !matches!(c, ' ' | '-')).collect(),
        _ => t.to_string(),
    }
}

/// Merges a submission into the request's own fields: every shown,
/// writable field takes what the payer typed; read-only and hidden fields
/// keep their preset value whatever was posted. Answers the body for the
/// transaction or vault, or the payer's mistakes field by field.
pub fn merge_submission(
    form: &[Field],
    flags: &Flags,
    posted: &[(String, String)],
    mut base: Map<String, Json>,
) -> Result<Map<String, Json>, FieldErrors> {
    let mut errors = FieldErrors::new();
    let posted_value = |name: &str| posted.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let mut confirm = None;
    for f in form {
        let value = if f.readonly || !f.visible {
            f.value.clone().unwrap_or_default()
        } else {
            typed(f, posted_value(f.name).unwrap_or_default())
        };
        if value.chars().count() > f.max_len as usize {
            errors.add(
                f.name,
                format!("{} must be at most {} characters.", f.label, f.max_len),
            );
            continue;
        }
        if value.is_empty() {
            if f.required {
                errors.add(f.name, format!("{} is required.", f.label));
            }
            continue;
        }
        // The card's own checks, here with the form's other mistakes: a
        // payer retypes the card once, not once per round of errors.
        let card = base.get("payment_method").and_then(Json::as_str) == Some("cc");
        match f.name {
            "account_number"
                if card
                    && !((13..=19).contains(&value.len())
                        && value.bytes().all(|b| b.is_ascii_digit())
                        && crate::cards::luhn_ok(&value)) =>
            {
                errors.add(
                    f.name,
                    format!(
                        "{} is not a valid card number: check it and type it again.",
                        f.label
                    ),
                );
            }
            "exp_date"
                if card
                    && !(value.len() == 4
                        && value[..2].parse::<u32>().is_ok_and(|m| (1..=12).contains(&m))) =>
            {
                errors.add(
                    f.name,
                    format!("{} must be a month and a year, as MM/YY.", f.label),
                );
            }
            "cvv" if !((3..=4).contains(&value.len()) && value.bytes().all(|b| b.is_ascii_digit())) => {
                errors.add(f.name, format!("{} must be 3 or 4 digits.", f.label));
            }
            "confirm_account_number" => confirm = Some(value),
            "transaction_amount" => match crate::money::parse_text(&value, 99_999_999_999) {
                Ok(cents) => {
                    if flags.min_payment_amount.is_some_and(|min| cents < min) {
                        errors.add(
                            f.name,
                            format!(
                                "The amount must be at least {}.",
                                crate::money::Money::from_cents(flags.min_payment_amount.unwrap_or(0))
                            ),
                        );
                    } else if flags.max_payment_amount.is_some_and(|max| cents > max) {
                        errors.add(
                            f.name,
                            format!(
                                "The amount must be at most {}.",
                                crate::money::Money::from_cents(flags.max_payment_amount.unwrap_or(0))
                            ),
                        );
                    } else {
                        base.insert(
                            f.name.into(),
                            Json::String(crate::money::Money::from_cents(cents).to_text()),
                        );
                    }
                }
                Err(m) => errors.add(f.name, format!("The amount {m}.")),
            },
            _ => {
                base.insert(f.name.into(), Json::String(value));
            }
        }
    }
    if let Some(confirm) = confirm {
        if base.get("account_number").and_then(Json::as_str) != Some(confirm.as_str()) {
            errors.add("confirm_account_number", "The two account numbers do not match.");
        }
    }
    if errors.is_empty() {
        Ok(base)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn defaults() -> ProductDefaults {
        ProductDefaults {
            show_street: true,
            show_zip: true,
            show_cvv: true,
            industry: "ecommerce".into(),
            ..ProductDefaults::default()
        }
    }

    fn obj(v: Json) -> Map<String, Json> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn flags_take_their_defaults_and_leave_the_transaction_fields() {
        let mut data = obj(
            json!({"action": "sale", "transaction_amount": "5.00", "show_cvv": 0,
            "parent_close": "true", "send_parent_message": 1, "redirect_url_on_approval": "https://shop.example/ok"}),
        );
        let flags = take_flags(Kind::PayForm, &mut data, &defaults()).unwrap();
        assert_eq!(data.keys().collect::<Vec<_>>(), ["action", "transaction_amount"]);
        assert!(flags.display_close_button && flags.show_account_holder_name && flags.show_street);
        assert!(!flags.show_cvv && flags.parent_close && flags.parent_send_message);
        assert_eq!(flags.parent_close_delay, 10);
        assert_eq!(flags.entry_method, EntryMethod::Manual);
        assert_eq!(
            flags.redirect_url_on_approval.as_deref(),
            Some("https://shop.example/ok")
        );
        let retail = ProductDefaults {
            industry: "retail".into(),
            ..defaults()
        };
        assert_eq!(
            take_flags(Kind::PayForm, &mut Map::new(), &retail)
                .unwrap()
                .entry_method,
            EntryMethod::Both
        );
    }

    #[test]
    fn bad_flags_are_named() {
        let mut data = obj(
            json!({"show_cvv": "maybe", "entry_method": "swipe", "stylesheet_url": "javascript:alert(1)",
            "redirect_url_delay": -1, "redirect_url_on_decline": "https://a.example/\"><script>"}),
        );
        let errors = take_flags(Kind::PayForm, &mut data, &defaults()).unwrap_err();
        for f in [
            "show_cvv",
            "entry_method",
            "stylesheet_url",
            "redirect_url_delay",
            "redirect_url_on_decline",
        ] {
            assert!(errors.has(f), "{f}: {errors:?}");
        }
    }

    #[test]
    fn card_data_is_never_preset_and_a_submission_keeps_read_only_values() {
        let flags = take_flags(Kind::PaymentPage, &mut Map::new(), &defaults()).unwrap();
        let data = obj(json!({"account_number": "4111111111111111", "billing_zip": "12345"}));
        let mut form = fields(Kind::PaymentPage, "cc", &flags, &data);
        let number = form.iter().find(|f| f.name == "account_number").unwrap();
        assert!(number.value.is_none() && number.sensitive);
        assert_eq!(
            form.iter()
                .find(|f| f.name == "billing_zip")
                .unwrap()
                .value
                .as_deref(),
            Some("12345")
        );
        let mut hidden = Map::new();
        apply_overrides(
            &mut form,
            &json!({"body": {"fields": [
                {"id": "transaction_amount", "value": 7.00, "readonly": true},
                {"id": "contact_id", "value": "c1", "visible": false}]}}),
            &mut hidden,
        )
        .unwrap();
        assert_eq!(hidden["contact_id"], "c1");
        let posted = vec![
            ("transaction_amount".to_string(), "0.01".to_string()),
            ("account_number".into(), "4111 1111 1111 1111".into()),
            ("exp_date".into(), "12/39".into()),
        ];
        let body = merge_submission(&form, &flags, &posted, Map::new()).unwrap();
        assert_eq!(body["transaction_amount"], "7.00");
        assert_eq!(body["account_number"], "4111111111111111");
        assert_eq!(body["exp_date"], "1239");
        let refused = apply_overrides(
            &mut form,
            &json!({"body": {"fields": [{"id": "cvv", "value": "123"}]}}),
            &mut hidden,
        );
        assert!(refused.unwrap_err().has("cvv"));
    }

    #[test]
    fn a_submission_names_each_mistake() {
        let mut data = obj(json!({"show_second_account_number": true, "min_payment_amount": "1.00"}));
        let flags = take_flags(Kind::PayForm, &mut data, &defaults()).unwrap();
        let form = fields(Kind::PayForm, "ach", &flags, &Map::new());
        let posted = vec![
            ("routing".to_string(), "072000326".to_string()),
            ("account_number".into(), "123456789".into()),
            ("confirm_account_number".into(), "123456780".into()),
        ];
        let errors = merge_submission(&form, &flags, &posted, Map::new()).unwrap_err();
        assert!(errors.has("confirm_account_number"));
        assert!(errors.has("account_holder_name") && errors.has("account_type"));
        assert!(!errors.has("routing"));
    }
}
