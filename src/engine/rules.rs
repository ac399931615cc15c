//! The hooks through which a resource adds its business rules to the
//! generic engine. Every hook has a do-nothing default.

use super::record::Record;
use super::validate::{CreateInput, UpdateInput};
use super::Cx;
use crate::db::{Conn, Sql};
use crate::error::ApiResult;
use serde_json::{Map, Value as Json};

pub trait Rules: Sync {
    /// Checks and completes a new record before it is inserted. Returning
    /// a record asks the engine to update that one instead (upsert).
    fn before_create(
        &self,
        _cx: &Cx,
        _conn: &mut dyn Conn,
        _input: &mut CreateInput,
    ) -> ApiResult<Option<Record>> {
        Ok(None)
    }

    fn after_create(&self, _cx: &Cx, _conn: &mut dyn Conn, _record: &Record) -> ApiResult<()> {
        Ok(())
    }

    /// Checks an update; `new` holds the old record with the changes applied.
    fn before_update(
        &self,
        _cx: &Cx,
        _conn: &mut dyn Conn,
        _old: &Record,
        _new: &mut Record,
    ) -> ApiResult<()> {
        Ok(())
    }

    /// Applies what an update sent (`input`: its transient inputs, which
    /// may be none, and the stored fields it sent, changed or not) to
    /// `new`, before [`Rules::before_update`] checks it. The default
    /// refuses transient inputs: a resource that declares an updatable
    /// transient field resolves it.
    fn update_transient(
        &self,
        _cx: &Cx,
        _conn: &mut dyn Conn,
        _old: &Record,
        _new: &mut Record,
        input: &UpdateInput,
    ) -> ApiResult<()> {
        let mut errors = crate::error::FieldErrors::new();
        for name in input.transient.keys() {
            errors.add(
                name.clone(),
                format!("{} cannot be changed.", super::validate::label(name)),
            );
        }
        errors.into_result()
    }

    fn after_update(&self, _cx: &Cx, _conn: &mut dyn Conn, _old: &Record, _new: &Record) -> ApiResult<()> {
        Ok(())
    }

    /// Refuses a delete (for example while the record still holds others).
    fn before_delete(&self, _cx: &Cx, _conn: &mut dyn Conn, _record: &Record) -> ApiResult<()> {
        Ok(())
    }

    /// Adds or reshapes rendered members.
    fn render(&self, _cx: &Cx, _record: &Record, _out: &mut Map<String, Json>) {}

    /// The lines a record is in a list export (`_format=csv|tsv`): by
    /// default itself.
    fn export_rows(&self, _record: &Record, rendered: Map<String, Json>) -> Vec<Map<String, Json>> {
        vec![rendered]
    }

    /// Resolves an `Expand::Custom`.
    fn expand(&self, _cx: &Cx, _conn: &mut dyn Conn, _record: &Record, _name: &str) -> ApiResult<Json> {
        Ok(Json::Null)
    }

    /// Renders a record as a read answers it (alone, or in a list with the
    /// list's own parameters in `extra`), for aggregates that need the
    /// database to render. `None`: the generic rendering with `expand`.
    fn render_read(
        &self,
        _cx: &Cx,
        _conn: &mut dyn Conn,
        _record: &Record,
        _extra: &[(String, String)],
        _expand: &[String],
    ) -> ApiResult<Option<Json>> {
        Ok(None)
    }

    /// Adds conditions for the resource's own list parameters.
    fn list_conditions(&self, _cx: &Cx, _extra: &[(String, String)], _sql: &mut Sql) {}

    /// Checks the resource's own list parameters (422 on bad values).
    fn check_list_params(&self, _extra: &[(String, String)]) -> ApiResult<()> {
        Ok(())
    }
}

/// Rules of a resource that has none of its own.
pub struct NoRules;
impl Rules for NoRules {}
