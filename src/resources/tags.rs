//! Tags: a location's catalogue of labels for classifying transactions
//! and recurrings (which carry tag titles in their own `tags` field).

use crate::engine::record::Record;
use crate::engine::resource::{Api, Expand, Field, Resource, Scope};
use crate::engine::rules::NoRules;
use crate::engine::validate::MAX_TAG_TITLE;
use serde_json::Value as Json;

use super::{LOCATION, USER};

pub static TAG: Resource = Resource {
    name: "tag",
    plural: "tags",
    table: "tags",
    model: "Tag",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::id("location_id")
            .post()
            .required()
            .filter()
            .refers(&LOCATION)
            .doc("not updatable"),
        Field::text("title", 1, MAX_TAG_TITLE as u32)
            .pu()
            .required()
            .filter()
            .sort(),
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
            name: "created_user",
            target: &USER,
            column: "created_user_id",
        },
        Expand::Changelogs { users: &USER },
    ],
    list_params: &[],
    computed: &[],
    rules: &NoRules,
    search: None,
    cascades: &[],
    postback: None,
    api: Api::PLAIN,
    doc: "A tag title a location classifies transactions and recurrings with.",
};

/// The `tags` expand of a record that carries tag titles (a transaction,
/// a recurring, a quick invoice): its own `tags`, as the field renders
/// them, so the expand never hides what the record holds.
pub fn expand_of(record: &Record) -> Json {
    record
        .res
        .field("tags")
        .map(|f| crate::engine::to_json(f, record.get("tags")))
        .unwrap_or_else(|| Json::Array(Vec::new()))
}

/// A location's tags as records (a location info's `tags`), oldest first,
/// within the caller's scope.
pub fn of_location(
    cx: &crate::engine::Cx,
    conn: &mut dyn crate::db::Conn,
    location_id: &str,
) -> crate::error::ApiResult<Vec<Json>> {
    let mut sql = crate::engine::query::select(&TAG, &cx.scope);
    sql.push(" AND t.location_id = ")
        .bind(location_id.to_string())
        .push(" ORDER BY t.id ASC LIMIT 500");
    Ok(conn
        .query(&sql)?
        .into_iter()
        .map(|row| Json::Object(crate::engine::render(cx, &Record::from_row(&TAG, row))))
        .collect())
}
