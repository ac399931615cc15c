//! The files of a quick invoice: at most [`MAX_FILES_PER_INVOICE`] of
//! [`MAX_FILE_BYTES`] each, typed by content, only once the location has
//! enabled file storage (`POST /v2/productfiles`). The rows are here; the
//! bytes are in the file store, written before the row and removed after
//! it.

use crate::db::{Conn, Sql};
use crate::error::{ApiError, ApiResult, FieldErrors};
use crate::files::{safe_name, sniff, MAX_FILES_PER_INVOICE, MAX_FILE_BYTES};
use serde_json::{json, Value as Json};

/// A file as uploaded.
pub struct Upload {
    pub field: String,
    pub name: String,
    pub bytes: Vec<u8>,
}

/// A checked upload: its safe name, its type by content, its bytes.
pub struct Checked {
    pub name: String,
    pub content_type: &'static str,
    pub bytes: Vec<u8>,
}

/// Checks uploads one by one (size, type by content, count with those the
/// invoice already has).
pub fn check(uploads: Vec<Upload>, already: usize) -> Result<Vec<Checked>, FieldErrors> {
    let mut errors = FieldErrors::new();
    if already + uploads.len() > MAX_FILES_PER_INVOICE {
        errors.add(
            "files",
            format!("An invoice holds at most {MAX_FILES_PER_INVOICE} files; it has {already}."),
        );
    }
    let mut out = Vec::new();
    for u in uploads {
        if u.bytes.len() > MAX_FILE_BYTES {
            errors.add(
                u.field.clone(),
                format!("{} is larger than 5 MB.", safe_name(&u.name)),
            );
            continue;
        }
        match sniff(&u.bytes) {
            Some(content_type) => out.push(Checked {
                name: safe_name(&u.name),
                content_type,
                bytes: u.bytes,
            }),
            None => errors.add(
                u.field.clone(),
                format!(
                    "{} is not a PDF, PNG, JPEG, GIF or text file (judged by its content).",
                    safe_name(&u.name)
                ),
            ),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// Refuses files for a location that has not enabled file storage.
pub fn require_storage(conn: &mut dyn Conn, location_id: &str) -> ApiResult<()> {
    let enabled = conn
        .query_one(&Sql::with(
            "SELECT 1 FROM product_files WHERE location_id = ? LIMIT 1",
            vec![location_id.into()],
        ))?
        .is_some();
    if enabled {
        Ok(())
    } else {
        Err(ApiError::field(
            "files",
            "File storage is not enabled for this location: POST /v2/productfiles first.",
        ))
    }
}

pub fn count(conn: &mut dyn Conn, invoice_id: &str) -> ApiResult<usize> {
    Ok(conn.query_int(&Sql::with(
        "SELECT COUNT(*) FROM quick_invoice_files WHERE quick_invoice_id = ?",
        vec![invoice_id.into()],
    ))? as usize)
}

/// Records a stored file of an invoice.
pub fn record(
    conn: &mut dyn Conn,
    invoice_id: &str,
    location_id: &str,
    user_id: &str,
    file: &Checked,
    key: &str,
    now: i64,
) -> ApiResult<()> {
    conn.execute(&Sql::with(
        "INSERT INTO quick_invoice_files (id, quick_invoice_id, location_id, name, content_type, size, storage_key, \
         created_user_id, created_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        vec![
            crate::ids::new_id().into(),
            invoice_id.into(),
            location_id.into(),
            file.name.clone().into(),
            file.content_type.into(),
            (file.bytes.len() as i64).into(),
            key.into(),
            user_id.into(),
            now.into(),
        ],
    ))?;
    Ok(())
}

/// A stored file: id, name, content type, size, key.
pub struct Stored {
    pub id: String,
    pub name: String,
    pub content_type: String,
    pub size: i64,
    pub key: String,
    pub created_ts: i64,
}

impl Stored {
    pub fn to_json(&self) -> Json {
        json!({ "id": self.id, "name": self.name, "content_type": self.content_type,
            "size": self.size, "created_ts": self.created_ts })
    }
}

/// The invoice's files, oldest first.
pub fn list(conn: &mut dyn Conn, invoice_id: &str) -> ApiResult<Vec<Stored>> {
    let rows = conn.query(&Sql::with(
        "SELECT id, name, content_type, size, storage_key, created_ts FROM quick_invoice_files \
         WHERE quick_invoice_id = ? ORDER BY created_ts, id",
        vec![invoice_id.into()],
    ))?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let text = |i: usize| r[i].as_str().unwrap_or_default().to_string();
            Stored {
                id: text(0),
                name: text(1),
                content_type: text(2),
                size: r[3].as_int().unwrap_or(0),
                key: text(4),
                created_ts: r[5].as_int().unwrap_or(0),
            }
        })
        .collect())
}

/// Removes a file's row; answers its key (the caller removes the bytes
/// once the change is committed), or `None` if the invoice has no such
/// file.
pub fn remove(conn: &mut dyn Conn, invoice_id: &str, file_id: &str) -> ApiResult<Option<String>> {
    let Some(file) = list(conn, invoice_id)?.into_iter().find(|f| f.id == file_id) else {
        return Ok(None);
    };
    conn.execute(&Sql::with(
        "DELETE FROM quick_invoice_files WHERE id = ?",
        vec![file.id.into()],
    ))?;
    Ok(Some(file.key))
}

/// Attaches the invoice's files to a mail in the outbox.
pub fn attach_to_mail(conn: &mut dyn Conn, mail_id: &str, files: &[Stored]) -> ApiResult<()> {
    for (position, f) in files.iter().enumerate() {
        conn.execute(&Sql::with(
            "INSERT INTO mail_attachments (mail_id, position, name, content_type, storage_key) VALUES (?, ?, ?, ?, ?)",
            vec![
                mail_id.into(),
                (position as i64).into(),
                f.name.clone().into(),
                f.content_type.clone().into(),
                f.key.clone().into(),
            ],
        ))?;
    }
    Ok(())
}
