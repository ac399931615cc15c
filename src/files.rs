//! Stored files (quick-invoice attachments): the bytes in a [`FileStore`]
//! (a local directory by default, `FERROGATE_FILES_DIR`), the rows that
//! say what they are in the database. A file's type is read from its
//! first bytes, never from its name; its key is random, never the name.

use std::io;
use std::path::{Path, PathBuf};

/// The largest file kept.
pub const MAX_FILE_BYTES: usize = 5 * 1024 * 1024;
/// The most files an invoice holds.
pub const MAX_FILES_PER_INVOICE: usize = 4;

/// Where file bytes live. Keys are ours (random, alphanumeric).
pub trait FileStore: Send + Sync {
    fn put(&self, key: &str, bytes: &[u8]) -> io::Result<()>;
    fn get(&self, key: &str) -> io::Result<Vec<u8>>;
    fn delete(&self, key: &str) -> io::Result<()>;
}

/// Files in a directory (shared storage when several nodes serve them).
pub struct LocalDir {
    root: PathBuf,
}

impl LocalDir {
    pub fn new(root: impl Into<PathBuf>) -> LocalDir {
        LocalDir { root: root.into() }
    }

    fn path(&self, key: &str) -> io::Result<PathBuf> {
        if key.is_empty() || key.len() > 64 || !key.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a file key"));
        }
        Ok(self.root.join(key))
    }
}

impl FileStore for LocalDir {
    fn put(&self, key: &str, bytes: &[u8]) -> io::Result<()> {
        std::fs::create_dir_all(&self.root)?;
        let path = self.path(key)?;
        // Written aside and renamed: a reader never sees half a file.
        let partial = self.root.join(format!("{key}.partial"));
        std::fs::write(&partial, bytes)?;
        std::fs::rename(&partial, path)
    }

    fn get(&self, key: &str) -> io::Result<Vec<u8>> {
        std::fs::read(self.path(key)?)
    }

    fn delete(&self, key: &str) -> io::Result<()> {
        match std::fs::remove_file(self.path(key)?) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

/// The default directory: beside the SQLite file, or in the working
/// directory for PostgreSQL.
pub fn default_dir(database_url: &str) -> PathBuf {
    if let Some(path) = database_url.strip_prefix("sqlite://") {
        let dir = Path::new(path)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        return dir.join("ferrogate-files");
    }
    PathBuf::from("ferrogate-files")
}

/// The type of a file by its content: PDF, PNG, JPEG, GIF, or UTF-8 text
/// (CSV included). Anything else is refused.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"%PDF-") {
        return Some("application/pdf");
    }
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Some("image/png");
    }
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return Some("image/jpeg");
    }
    if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        return Some("image/gif");
    }
    let text = std::str::from_utf8(bytes).ok()?;
    let printable = text
        .chars()
        .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'));
    (!text.is_empty() && printable).then_some("text/plain")
}

/// A file name safe to show and to send in a header: the last path
/// component, without control characters or quotes, at most 128
/// characters.
pub fn safe_name(name: &str) -> String {
    let last = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let cleaned: String = last
        .chars()
        .filter(|c| !c.is_control() && !matches!(c, '"' | ';'))
        .take(128)
        .collect();
    let trimmed = cleaned.trim().trim_start_matches('.').to_string();
    if trimmed.is_empty() {
        "file".into()
    } else {
        trimmed
    }
}

/// A new random key.
pub fn new_key() -> String {
    crate::crypto::random_secret(32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_come_from_content_not_names() {
        assert_eq!(sniff(b"%PDF-1.7\n..."), Some("application/pdf"));
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\n...."), Some("image/png"));
        assert_eq!(sniff(&[0xFF, 0xD8, 0xFF, 0xE0]), Some("image/jpeg"));
        assert_eq!(sniff(b"GIF89a..."), Some("image/gif"));
        assert_eq!(sniff(b"item,amount\nBread,4.00\n"), Some("text/plain"));
        assert_eq!(sniff(b"MZ\x90\x00\x03"), None, "an executable");
        assert_eq!(sniff(b"\x7fELF\x02"), None);
        assert_eq!(sniff(b""), None);
    }

    #[test]
    fn names_are_made_safe() {
        assert_eq!(safe_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_name("C:\\\\docs\\\\invoice.pdf"), "invoice.pdf");
        assert_eq!(safe_name("a\"b\";c\r\n.pdf"), "abc.pdf");
        assert_eq!(safe_name(".."), "file");
    }

    #[test]
    fn a_directory_store_round_trips_and_refuses_foreign_keys() {
        let dir = std::env::temp_dir().join(format!("fg-files-{}", new_key()));
        let store = LocalDir::new(&dir);
        store.put("abc123", b"hello").unwrap();
        assert_eq!(store.get("abc123").unwrap(), b"hello");
        store.delete("abc123").unwrap();
        store.delete("abc123").unwrap();
        assert!(store.get("abc123").is_err());
        assert!(store.put("../x", b"no").is_err());
        std::fs::remove_dir_all(dir).ok();
    }
}
