//! Declarations: a resource is its fields (type, bounds, P/R/U flags,
//! filterable, sortable), default sort, scope, expands, rules, cascades,
//! postback subscription and API shape. The generic engine derives
//! validation, SQL, rendering and OpenAPI from them; generic code asks the
//! declaration, never the resource's name.

use super::rules::Rules;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A record id (24-36 characters).
    Id,
    /// A string of `min..=max` characters (Unicode scalar values).
    Text { min: u32, max: u32 },
    /// An integer within bounds; also accepted as a string of digits.
    Int { min: i64, max: i64 },
    /// 1/0 (also true/false, "1"/"0") in, boolean out.
    Flag,
    /// yyyy-mm-dd
    Date,
    /// Epoch seconds, system generated.
    Ts,
    /// Money: cents inside, a two-decimal string outside; accepts numbers
    /// and decimal strings up to `max` cents.
    Money { max: i64 },
    /// A JSON object or array of at most `max` characters of text, stored
    /// as text and returned parsed.
    Json { max: u32 },
    /// Tag titles: a JSON array of strings (or one comma-separated string)
    /// in, stored as a JSON array of titles, answered as `[{id, title}]`
    /// with the title as the id (as the reference's samples show).
    Tags,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    None,
    /// Letters, digits, spaces and dashes.
    Zip,
    /// Digits only.
    Digits,
    /// Two letters.
    State,
    Email,
    /// Letters and digits only.
    Alnum,
    /// An order or reference number: letters, digits, spaces and `-_./#`
    /// (the reference's samples send `SDKTest 123`).
    Reference,
    /// Letters, digits, '-' and '_' (keys and tokens).
    Token,
    /// An IANA time zone name.
    TimeZone,
    /// An absolute http(s) URL or a bare host name.
    Domain,
    /// Standard base64 with its padding (a Check 21 image).
    Base64,
    /// An IPv4 or IPv6 address.
    Ip,
    /// One line of text: no control characters (a line break, a tab).
    /// For names that go into headers, such as a location's name as the
    /// sender of its mail.
    OneLine,
    /// A name people read and type (a username): no control characters,
    /// no whitespace at either end, none but plain spaces inside.
    Name,
}

/// A closed set of accepted values, checked exactly (no trimming, no case
/// folding) and listed as the field's `enum` in the OpenAPI document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choices {
    Any,
    Text(&'static [&'static str]),
    Int(&'static [i64]),
}

#[derive(Clone, Copy, Debug)]
pub struct Field {
    pub name: &'static str,
    pub column: &'static str,
    pub kind: Kind,
    pub post: bool,
    pub required: bool,
    pub put: bool,
    /// Must be present in every update body too.
    pub put_required: bool,
    pub filter: bool,
    /// Filters match the whole value (identifiers), not a substring.
    pub exact: bool,
    pub sort: bool,
    /// false: accepted as input only (for example `update_if_exists`).
    pub stored: bool,
    /// Stored but not part of the rendered record.
    pub hidden: bool,
    /// A hidden field whose changes the change log still shows, under
    /// this name and masked (a sealed key: that it changed, and by whom);
    /// empty: a hidden field's changes are left out.
    pub logged_as: &'static str,
    /// Stored sealed with the data key, rendered in clear.
    pub encrypted: bool,
    /// A digest of a secret (a password hash): never rendered, and shown
    /// as `********` in change logs.
    pub digest: bool,
    /// Rendered masked (all but the last four characters as `X`), never in
    /// clear: card and bank numbers, SSN digits, licence numbers.
    pub masked: bool,
    pub pattern: Pattern,
    pub choices: Choices,
    /// For ids: the resource the id must name, inside the caller's scope.
    pub refers: Option<&'static Resource>,
    /// A date shown as `0000-00-00` when unset, and accepted so.
    pub zero_date: bool,
    /// A flag answered as 1 or 0 where the spec gives those, not as a
    /// boolean (it takes every form of a flag as input).
    pub numbered: bool,
    pub doc: &'static str,
}

impl Field {
    const fn base(name: &'static str, kind: Kind) -> Field {
        Field {
            name,
            column: name,
            kind,
            post: false,
            required: false,
            put: false,
            put_required: false,
            filter: false,
            exact: false,
            sort: false,
            stored: true,
            hidden: false,
            logged_as: "",
            encrypted: false,
            digest: false,
            masked: false,
            pattern: Pattern::None,
            choices: Choices::Any,
            refers: None,
            zero_date: false,
            numbered: false,
            doc: "",
        }
    }
    pub const fn id(name: &'static str) -> Field {
        Field::base(name, Kind::Id)
    }
    pub const fn text(name: &'static str, min: u32, max: u32) -> Field {
        Field::base(name, Kind::Text { min, max })
    }
    pub const fn int(name: &'static str, min: i64, max: i64) -> Field {
        Field::base(name, Kind::Int { min, max })
    }
    pub const fn flag(name: &'static str) -> Field {
        Field::base(name, Kind::Flag)
    }
    pub const fn date(name: &'static str) -> Field {
        Field::base(name, Kind::Date)
    }
    pub const fn money(name: &'static str, max: i64) -> Field {
        Field::base(name, Kind::Money { max })
    }
    pub const fn json(name: &'static str, max: u32) -> Field {
        Field::base(name, Kind::Json { max })
    }
    pub const fn tags(name: &'static str) -> Field {
        Field::base(name, Kind::Tags)
    }
    pub const fn ts(name: &'static str) -> Field {
        Field::base(name, Kind::Ts).filter().sort()
    }
    pub const fn post(mut self) -> Field {
        self.post = true;
        self
    }
    pub const fn required(mut self) -> Field {
        self.required = true;
        self
    }
    pub const fn put(mut self) -> Field {
        self.put = true;
        self
    }
    pub const fn put_required(mut self) -> Field {
        self.put = true;
        self.put_required = true;
        self
    }
    /// Allowed on create and update.
    pub const fn pu(self) -> Field {
        self.post().put()
    }
    /// See [`Field::numbered`].
    pub const fn numbered(mut self) -> Field {
        self.numbered = true;
        self
    }
    pub const fn filter(mut self) -> Field {
        self.filter = true;
        self
    }
    /// Filterable by whole value (an integrator's id, a code).
    pub const fn exact(mut self) -> Field {
        self.filter = true;
        self.exact = true;
        self
    }
    pub const fn sort(mut self) -> Field {
        self.sort = true;
        self
    }
    pub const fn transient(mut self) -> Field {
        self.stored = false;
        self
    }
    pub const fn hidden(mut self) -> Field {
        self.hidden = true;
        self
    }
    /// Hidden, with its changes in the change log as `name`, masked.
    pub const fn hidden_logged_as(mut self, name: &'static str) -> Field {
        self.hidden = true;
        self.logged_as = name;
        self
    }
    pub const fn encrypted(mut self) -> Field {
        self.encrypted = true;
        self
    }
    /// A secret's digest: hidden, and masked in change logs.
    pub const fn digest(mut self) -> Field {
        self.hidden = true;
        self.digest = true;
        self
    }
    /// Sealed at rest and masked in every response.
    pub const fn secret(mut self) -> Field {
        self.encrypted = true;
        self.masked = true;
        self
    }
    pub const fn pattern(mut self, p: Pattern) -> Field {
        self.pattern = p;
        self
    }
    /// Only these texts are accepted.
    pub const fn one_of(mut self, values: &'static [&'static str]) -> Field {
        self.choices = Choices::Text(values);
        self
    }
    /// Only these integers are accepted.
    pub const fn int_one_of(mut self, values: &'static [i64]) -> Field {
        self.choices = Choices::Int(values);
        self
    }
    pub const fn refers(mut self, r: &'static Resource) -> Field {
        self.refers = Some(r);
        self
    }
    /// Unset reads as `0000-00-00`, and `0000-00-00` sent means unset.
    pub const fn zero_when_unset(mut self) -> Field {
        self.zero_date = true;
        self
    }
    pub const fn column(mut self, c: &'static str) -> Field {
        self.column = c;
        self
    }
    pub const fn doc(mut self, d: &'static str) -> Field {
        self.doc = d;
        self
    }
    pub fn is_system(&self) -> bool {
        !self.post && !self.put
    }
}

/// How a resource's rows are tied to the location tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The row's location is in this column.
    Column(&'static str),
    /// The row is a location itself (its `path` column).
    Location,
}

#[derive(Clone, Copy, Debug)]
pub enum Expand {
    /// Embeds the record that `column` names (null when absent or out of scope).
    BelongsTo {
        name: &'static str,
        target: &'static Resource,
        column: &'static str,
    },
    /// Embeds the records of `target` whose `column` holds this record's id.
    HasMany {
        name: &'static str,
        target: &'static Resource,
        column: &'static str,
    },
    /// The change log of the record, each entry with the `users` record
    /// of who made it (when the caller can see it).
    Changelogs { users: &'static Resource },
    /// Resolved by the resource's rules from the record itself (codes,
    /// flags, its own tags), no other resource's records.
    Custom(&'static str),
    /// Resolved by the resource's rules from records of another resource,
    /// which a caller reads with `permission`: without it the expand is
    /// null, or [] when `many`, as for records out of scope.
    CustomRecords {
        name: &'static str,
        permission: &'static str,
        many: bool,
    },
}

impl Expand {
    pub fn name(&self) -> &'static str {
        match self {
            Expand::BelongsTo { name, .. } | Expand::HasMany { name, .. } => name,
            Expand::Changelogs { .. } => "changelogs",
            Expand::Custom(name) | Expand::CustomRecords { name, .. } => name,
        }
    }

    /// The permission that reads the records this expand embeds, and
    /// whether it embeds many (`None`: it embeds only the record's own
    /// data; a change log checks its users itself).
    pub fn reads(&self) -> Option<(String, bool)> {
        match self {
            Expand::BelongsTo { target, .. } => Some((target.permission("read"), false)),
            Expand::HasMany { target, .. } => Some((target.permission("read"), true)),
            Expand::CustomRecords { permission, many, .. } => Some((permission.to_string(), *many)),
            Expand::Changelogs { .. } | Expand::Custom(_) => None,
        }
    }
}

/// Records of `target` whose `column` names a record: deleted with it, one
/// by one, each with its own change log entry and event.
#[derive(Clone, Copy, Debug)]
pub struct Cascade {
    pub target: &'static Resource,
    pub column: &'static str,
}

/// A resource whose changes postback configs can subscribe to, by its
/// `name`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Postback {
    /// A config names a product transaction and receives only the events
    /// of records with that `product_transaction_id`.
    pub by_product_transaction: bool,
}

/// What the HTTP API shows of a resource beyond its fields: envelope keys
/// and the answers the OpenAPI document lists.
#[derive(Clone, Copy, Debug)]
pub struct Api {
    /// Lists also answer under this key.
    pub list_alias: Option<&'static str>,
    /// A create may answer 200 with an existing record it updated.
    pub create_may_update: bool,
    /// A delete may be refused with 409 (the record still holds others,
    /// or is the caller's own).
    pub delete_may_conflict: bool,
    /// An update takes the create body (an action and the fields it
    /// accepts) instead of the updatable fields.
    pub update_takes_create_body: bool,
    /// Fields a caller may update on their own record (a user's password)
    /// without the permission to update the resource.
    pub own_record_fields: &'static [&'static str],
}

impl Api {
    /// The generic shape, nothing added.
    pub const PLAIN: Api = Api {
        list_alias: None,
        create_may_update: false,
        delete_may_conflict: false,
        update_takes_create_body: false,
        own_record_fields: &[],
    };
}

pub struct Resource {
    /// Envelope key and permission prefix (`contact`).
    pub name: &'static str,
    /// List key and path segment (`contacts`).
    pub plural: &'static str,
    pub table: &'static str,
    /// Model name in change logs (`Contact`).
    pub model: &'static str,
    /// A view that reads use instead of `table`, for a record whose row
    /// alone is not all of it (a transaction batch: its row plus the open
    /// batch's tallies, ADR 0025). Writes always go to `table`.
    pub view: Option<&'static str>,
    pub fields: &'static [Field],
    /// (field, descending)
    pub default_sort: (&'static str, bool),
    /// Records per page when the request does not say.
    pub page_size: u64,
    pub scope: Scope,
    /// Column addressed by `/{api_id}?api_id=1&location_id=...`.
    pub api_id: Option<&'static str>,
    /// The field a unique index guards, named in the 422 of a lost race.
    pub unique: Option<&'static str>,
    pub expands: &'static [Expand],
    /// Extra list parameters the rules understand.
    pub list_params: &'static [&'static str],
    /// Members the rules add to every rendered record: (name, JSON type,
    /// description), for the OpenAPI document.
    pub computed: &'static [(&'static str, &'static str, &'static str)],
    pub rules: &'static dyn Rules,
    /// A substring index over some of its text columns, for the list
    /// filters that match any part of a value.
    pub search: Option<Search>,
    /// Deleted with each record, after `rules.before_delete` agreed.
    pub cascades: &'static [Cascade],
    /// Set when postback configs can subscribe to the resource's events.
    pub postback: Option<Postback>,
    pub api: Api,
    pub doc: &'static str,
}

impl std::fmt::Debug for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Resource({})", self.name)
    }
}

impl Resource {
    /// Where reads find the records: the view if there is one, else the table.
    pub fn reads_from(&self) -> &'static str {
        self.view.unwrap_or(self.table)
    }
    pub fn field(&self, name: &str) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.name == name)
    }
    /// Fields that have a column, in declaration order (the row layout).
    pub fn stored(&self) -> impl Iterator<Item = &'static Field> {
        self.fields.iter().filter(|f| f.stored)
    }

    /// `t.a, t.b, ...`: the stored columns as a select names them, built
    /// once (every read and write of the resource uses them).
    pub fn select_columns(&'static self) -> &'static str {
        static CACHE: ColumnCache = OnceLock::new();
        cached(&CACHE, self, |r| {
            r.stored()
                .map(|f| format!("t.{}", f.column))
                .collect::<Vec<_>>()
                .join(", ")
        })
    }

    /// `a, b, ...`: the stored columns as an insert names them, built once.
    pub fn insert_columns(&'static self) -> &'static str {
        static CACHE: ColumnCache = OnceLock::new();
        cached(&CACHE, self, |r| {
            r.stored().map(|f| f.column).collect::<Vec<_>>().join(", ")
        })
    }
    pub fn stored_index(&self, name: &str) -> Option<usize> {
        self.stored().position(|f| f.name == name)
    }
    pub fn path(&self) -> String {
        format!("/v2/{}", self.plural)
    }
    pub fn expand(&self, name: &str) -> Option<&'static Expand> {
        self.expands.iter().find(|e| e.name() == name)
    }
    pub fn permission(&self, action: &str) -> String {
        format!("{}.{}", self.plural, action)
    }
}

/// A substring index over text columns (ADR 0021). On SQLite an FTS5
/// table `<table>` with the trigram tokenizer and `<table>_rows`
/// (`search_rowid`, `record_id`) mapping its rows to the records, which
/// list filters consult for needles of three characters or more: new
/// records are queued by a trigger and indexed once per group of writes
/// before its commit, changes and deletes followed by triggers
/// (migrations 22 and 24); on PostgreSQL trigram
/// (`pg_trgm`) GIN indexes on the columns, which its planner uses for
/// `ILIKE` by itself.
#[derive(Clone, Copy, Debug)]
pub struct Search {
    /// The FTS5 table (SQLite).
    pub table: &'static str,
    pub columns: &'static [&'static str],
}

/// Texts derived from a resource's declaration, by resource.
type ColumnCache = OnceLock<Mutex<HashMap<usize, &'static str>>>;

/// The cached text of `res` (made by `make` the first time: a resource
/// has one, for the life of the process).
fn cached(
    cache: &'static ColumnCache,
    res: &'static Resource,
    make: impl FnOnce(&Resource) -> String,
) -> &'static str {
    let key = res as *const Resource as usize;
    let mut map = cache
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    map.entry(key)
        .or_insert_with(|| Box::leak(make(res).into_boxed_str()))
}
