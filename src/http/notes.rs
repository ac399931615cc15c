//! Notes under the record they are attached to, as the reference links
//! them: `/v2/contacts/{id}/notes` lists a contact's notes and
//! `/v2/contacts/{id}/notes/{note_id}` reads, updates or deletes one (a
//! note's `_links.self`). Each path answers what `/v2/notes` does, for
//! the notes of that record only.

use super::crud::{self, list_within, Within};
use super::extract::{IdPath, RawBody};
use super::AppState;
use crate::auth::Caller;
use crate::db::Sql;
use crate::error::{ApiError, ApiResult};
use crate::resources::notes::TARGETS;
use crate::resources::NOTE;
use axum::extract::{Path, RawQuery, State};
use axum::routing::get;
use axum::Router;

pub fn routes() -> Router<AppState> {
    let mut router = Router::new();
    for parent in TARGETS {
        let list = move |s: State<AppState>, c: Caller, IdPath(id): IdPath, RawQuery(q): RawQuery| {
            let within = Within {
                parent,
                path: format!("{}/{id}/notes", parent.path()),
                parent_id: id,
                column: "resource_id",
            };
            list_within(&NOTE, s.0, c, q, Some(within))
        };
        let read = move |s: State<AppState>, c: Caller, Path(ids): Path<(String, String)>, q: RawQuery| async move {
            let id = note_of(&s.0, &ids).await?;
            crud::read(&NOTE, s, c, id, q).await
        };
        let update = move |s: State<AppState>,
                           c: Caller,
                           Path(ids): Path<(String, String)>,
                           q: RawQuery,
                           b: RawBody| async move {
            let id = note_of(&s.0, &ids).await?;
            crud::update(&NOTE, s, c, id, q, b).await
        };
        let delete = move |s: State<AppState>, c: Caller, Path(ids): Path<(String, String)>, q: RawQuery| async move {
            let id = note_of(&s.0, &ids).await?;
            crud::delete(&NOTE, s, c, id, q).await
        };
        router = router
            .route(&format!("{}/{{id}}/notes", parent.path()), get(list))
            .route(
                &format!("{}/{{id}}/notes/{{note_id}}", parent.path()),
                get(read).put(update).delete(delete),
            );
    }
    router
}

/// The note of a nested path, if it is attached to the record the path
/// names (a note never moves to another record); 404 otherwise. Scope
/// and permissions are checked by the handler it is passed to.
async fn note_of(app: &AppState, (parent_id, note_id): &(String, String)) -> ApiResult<IdPath> {
    let (parent_id, note_id) = (parent_id.clone(), note_id.clone());
    let id = note_id.clone();
    let attached = app
        .store
        .read(move |conn| {
            Ok(conn.query_int(&Sql::with(
                "SELECT COUNT(*) FROM notes WHERE id = ? AND resource_id = ?",
                vec![id.into(), parent_id.into()],
            ))? > 0)
        })
        .await?;
    if !attached {
        return Err(ApiError::not_found("note"));
    }
    Ok(IdPath(note_id))
}
