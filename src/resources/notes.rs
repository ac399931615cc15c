//! Notes: free text attached to any record through resource + resource_id.

use crate::db::{Conn, Sql};
use crate::engine::record::Record;
use crate::engine::resource::{Api, Cascade, Expand, Field, Resource, Scope};
use crate::engine::rules::Rules;
use crate::engine::validate::CreateInput;
use crate::engine::{location_of, query, Cx};
use crate::error::{ApiError, ApiResult};
use serde_json::{json, Map, Value as Json};

use super::{ACCOUNT_VAULT, CONTACT, LOCATION, USER};

pub static NOTE: Resource = Resource {
    name: "note",
    plural: "notes",
    table: "notes",
    model: "Note",
    view: None,
    fields: &[
        Field::id("id").filter().sort(),
        Field::id("resource_id").post().required().filter(),
        Field::text("resource", 1, 32)
            .post()
            .required()
            .filter()
            .doc("Contact, Location, User or AccountVault"),
        Field::text("note", 0, 16384).pu().filter(),
        Field::text("visibility_group_id", 0, 36).pu().exact(),
        Field::id("location_id").hidden(),
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
        Expand::Custom("visibility_group"),
        Expand::Changelogs { users: &USER },
    ],
    // The reference's list links name a note's record so.
    list_params: &["model_id", "model_name"],
    computed: &[],
    rules: &NoteRules,
    search: None,
    cascades: &[],
    postback: None,
    api: Api::PLAIN,
    doc: "A note on a record.",
};

/// Declared among the cascades of every resource notes can be attached
/// to: the notes of a record are deleted with it.
pub const fn notes_cascade() -> Cascade {
    Cascade {
        target: &NOTE,
        column: "resource_id",
    }
}

/// The resources a note can be attached to; each declares [`notes_cascade`].
pub(crate) static TARGETS: [&Resource; 4] = [&CONTACT, &LOCATION, &USER, &ACCOUNT_VAULT];

/// The record a note can be attached to, by its resource name.
fn target(resource: &str) -> Option<&'static Resource> {
    TARGETS
        .into_iter()
        .find(|r| r.model.eq_ignore_ascii_case(resource) || r.name.eq_ignore_ascii_case(resource))
}

struct NoteRules;

impl Rules for NoteRules {
    fn before_create(
        &self,
        cx: &Cx,
        conn: &mut dyn Conn,
        input: &mut CreateInput,
    ) -> ApiResult<Option<Record>> {
        let resource = input.record.text("resource").unwrap_or_default().to_string();
        let res = target(&resource).ok_or_else(|| {
            ApiError::field(
                "resource",
                "Resource must be one of Contact, Location, User, AccountVault.",
            )
        })?;
        let parent_id = input.record.text("resource_id").unwrap_or_default().to_string();
        let parent = query::find(conn, res, &cx.scope, &parent_id)?
            .ok_or_else(|| ApiError::field("resource_id", "resource_id provided is not valid"))?;
        input.record.set("resource", res.model);
        input.record.set("location_id", location_of(&parent));
        Ok(None)
    }

    fn check_list_params(&self, extra: &[(String, String)]) -> ApiResult<()> {
        for (k, v) in extra {
            if k == "model_name" && target(v).is_none() {
                return Err(ApiError::field(
                    "model_name",
                    "Model Name must be one of Contact, Location, User, AccountVault.",
                ));
            }
        }
        Ok(())
    }

    /// `model_id` and `model_name`: the reference's names of
    /// `resource_id` and `resource`.
    fn list_conditions(&self, _cx: &Cx, extra: &[(String, String)], sql: &mut Sql) {
        for (k, v) in extra {
            match k.as_str() {
                "model_id" => {
                    sql.push(" AND t.resource_id = ").bind(v.clone());
                }
                "model_name" => {
                    if let Some(res) = target(v) {
                        sql.push(" AND t.resource = ").bind(res.model);
                    }
                }
                _ => {}
            }
        }
    }

    fn render(&self, cx: &Cx, record: &Record, out: &mut Map<String, Json>) {
        if let (Some(res), Some(parent)) = (
            record.text("resource").and_then(target),
            record.text("resource_id"),
        ) {
            // Under its record, as the reference links it (http::notes
            // serves that path).
            if let Some(Json::Object(links)) = out.get_mut("_links") {
                links.insert(
                    "self".into(),
                    json!({ "href": cx.href(&format!("{}/{parent}/notes/{}", res.path(), record.id())) }),
                );
                links.insert(
                    "for".into(),
                    json!({ "href": cx.href(&format!("{}/{parent}", res.path())) }),
                );
            }
        }
    }
}
