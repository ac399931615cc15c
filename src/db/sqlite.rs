//! SQLite: a pool of reader connections and one writer thread that
//! group-commits. WAL and `synchronous=FULL`: an acknowledged write
//! survives power loss; group commit amortises the fsync over many jobs.

use super::pool::Pool;
use super::{Conn, DbError, Dialect, Job, Row, Sql, Value};
use crate::error::{ApiError, ApiResult};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use tokio::sync::oneshot;

/// How many jobs one commit may carry at most.
const MAX_GROUP: usize = 256;

type WriteFn = Box<dyn FnOnce(&mut dyn Conn) -> ApiResult<()> + Send>;

struct WriteJob {
    run: WriteFn,
    done: oneshot::Sender<ApiResult<()>>,
}

/// Counters of the writer: how many commits carried how many jobs.
#[derive(Default)]
pub struct WriterStats {
    pub commits: AtomicU64,
    pub jobs: AtomicU64,
}

pub struct SqliteStore {
    readers: Pool<Connection>,
    pub stats: Arc<WriterStats>,
    path: String,
    writer: Mutex<Option<mpsc::Sender<WriteJob>>>,
    writer_thread: Mutex<Option<JoinHandle<()>>>,
}

struct SqliteConn<'a> {
    conn: &'a Connection,
    /// A write job's: its last statement ends it (`execute_and_commit`).
    in_job: bool,
    /// The job sent its last statement: anything after it is a defect,
    /// refused as on PostgreSQL, where that statement carries the COMMIT.
    ended: bool,
}

impl<'a> SqliteConn<'a> {
    fn new(conn: &'a Connection, in_job: bool) -> Self {
        SqliteConn {
            conn,
            in_job,
            ended: false,
        }
    }

    fn check_open(&self) -> Result<(), DbError> {
        if self.ended {
            return Err(DbError::Other("a statement after its job's commit".into()));
        }
        Ok(())
    }
}

impl Conn for SqliteConn<'_> {
    fn query(&mut self, sql: &Sql) -> Result<Vec<Row>, DbError> {
        let mut out = Vec::new();
        self.query_each(sql, &mut |row| {
            out.push(row);
            true
        })?;
        Ok(out)
    }

    fn query_each(&mut self, sql: &Sql, each: &mut dyn FnMut(Row) -> bool) -> Result<(), DbError> {
        self.check_open()?;
        let mut stmt = self.conn.prepare_cached(&sql.text).map_err(map_err)?;
        let columns = stmt.column_count();
        let mut rows = stmt
            .query(rusqlite::params_from_iter(sql.params.iter().map(Bind)))
            .map_err(map_err)?;
        while let Some(row) = rows.next().map_err(map_err)? {
            let mut values = Vec::with_capacity(columns);
            for i in 0..columns {
                values.push(match row.get_ref(i).map_err(map_err)? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(n) => Value::Int(n),
                    ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Real(r) => return Err(DbError::Other(format!("unexpected real value {r}"))),
                    ValueRef::Blob(_) => return Err(DbError::Other("unexpected blob".into())),
                });
            }
            if !each(values) {
                break;
            }
        }
        Ok(())
    }

    fn execute(&mut self, sql: &Sql) -> Result<u64, DbError> {
        self.check_open()?;
        let mut stmt = self.conn.prepare_cached(&sql.text).map_err(map_err)?;
        let n = stmt
            .execute(rusqlite::params_from_iter(sql.params.iter().map(Bind)))
            .map_err(map_err)?;
        Ok(n as u64)
    }

    /// An ordinary statement: the writer commits the group after the job
    /// (ADR 0001). What the job may not do after it is refused as on
    /// PostgreSQL.
    fn execute_and_commit(&mut self, sql: &Sql) -> Result<u64, DbError> {
        let written = self.execute(sql)?;
        self.ended = self.in_job;
        Ok(written)
    }

    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }
}

struct Bind<'a>(&'a Value);

impl rusqlite::ToSql for Bind<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self.0 {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
        })
    }
}

fn map_err(e: rusqlite::Error) -> DbError {
    if let rusqlite::Error::SqliteFailure(code, msg) = &e {
        let text = msg.clone().unwrap_or_default();
        match code.extended_code {
            rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
                return DbError::Unique(text)
            }
            rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY => {
                return DbError::ForeignKey {
                    detail: text,
                    table: None,
                }
            }
            _ => {}
        }
    }
    DbError::Other(e.to_string())
}

fn open_conn(path: &str, writer: bool) -> anyhow::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // A larger page cache and memory-mapped reads spare read syscalls.
    conn.pragma_update(None, "cache_size", -16384)?;
    conn.pragma_update(None, "mmap_size", 268_435_456)?;
    if writer {
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
    } else {
        conn.pragma_update(None, "query_only", "ON")?;
    }
    conn.set_prepared_statement_cache_capacity(256);
    // Unicode lower case for case-insensitive filters on non-ASCII text.
    conn.create_scalar_function(
        "ulower",
        1,
        rusqlite::functions::FunctionFlags::SQLITE_UTF8
            | rusqlite::functions::FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            Ok(match ctx.get_raw(0) {
                ValueRef::Text(t) => Some(String::from_utf8_lossy(t).to_lowercase()),
                _ => None,
            })
        },
    )?;
    Ok(conn)
}

/// Creates a new database file readable by its owner only (SQLite's
/// journal and WAL files take the database file's mode): its secrets are
/// sealed, but nothing else in it is anyone else's to read.
fn create_private(path: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if path.starts_with("file:") || path.starts_with(':') {
        return Ok(());
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other.map(drop),
    }
}

impl SqliteStore {
    pub fn open(path: &str, readers: usize) -> anyhow::Result<Self> {
        if path.is_empty() {
            anyhow::bail!("sqlite:// needs a file path");
        }
        if let Some(dir) = std::path::Path::new(path).parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)?;
            }
        }
        create_private(path)?;
        // The writer opens first so WAL mode is set before readers attach.
        let writer = open_conn(path, true)?;
        let reader_path = path.to_string();
        let readers = Pool::new(
            readers,
            Box::new(move || open_conn(&reader_path, false).map_err(|e| e.to_string())),
        );
        if !readers.all_connected() {
            anyhow::bail!("cannot open reader connections to {path}");
        }
        let (tx, rx) = mpsc::channel::<WriteJob>();
        let stats = Arc::new(WriterStats::default());
        let writer_stats = stats.clone();
        let handle = std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || writer_loop(writer, rx, &writer_stats))?;
        Ok(SqliteStore {
            readers,
            stats,
            path: path.to_string(),
            writer: Mutex::new(Some(tx)),
            writer_thread: Mutex::new(Some(handle)),
        })
    }

    pub fn read<T>(&self, job: impl FnOnce(&mut dyn Conn) -> ApiResult<T>) -> ApiResult<T> {
        self.readers
            .with(|conn| (job(&mut SqliteConn::new(conn, false)), true))?
    }

    /// `read` on an idle reader, if one is idle right now; else the job back.
    pub fn try_read<T, F>(&self, job: F) -> Result<ApiResult<T>, F>
    where
        F: FnOnce(&mut dyn Conn) -> ApiResult<T>,
    {
        let Some(conn) = self.readers.try_take() else {
            return Err(job);
        };
        Ok(self
            .readers
            .run(conn, |conn| (job(&mut SqliteConn::new(conn, false)), true))
            .map_err(ApiError::from)
            .and_then(|r| r))
    }

    fn submit(&self, run: WriteFn) -> ApiResult<oneshot::Receiver<ApiResult<()>>> {
        let (done, rx) = oneshot::channel();
        let sender = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        match sender.as_ref() {
            Some(s) => s
                .send(WriteJob { run, done })
                .map_err(|_| ApiError::Unavailable("database writer stopped".into()))?,
            None => return Err(ApiError::Unavailable("shutting down".into())),
        }
        Ok(rx)
    }

    /// Wraps a typed job so its output waits in a slot until the commit.
    fn wrap<T: Send + 'static>(job: Job<T>) -> (WriteFn, Arc<Mutex<Option<T>>>) {
        let slot = Arc::new(Mutex::new(None));
        let out = slot.clone();
        let run: WriteFn = Box::new(move |conn| {
            let value = job(conn)?;
            *out.lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
            Ok(())
        });
        (run, slot)
    }

    pub async fn write<T: Send + 'static>(&self, job: Job<T>) -> ApiResult<T> {
        let (run, slot) = Self::wrap(job);
        let rx = self.submit(run)?;
        rx.await
            .map_err(|_| ApiError::internal("writer dropped a job"))??;
        take(slot)
    }

    pub fn write_blocking<T: Send + 'static>(&self, job: Job<T>) -> ApiResult<T> {
        let (run, slot) = Self::wrap(job);
        let rx = self.submit(run)?;
        rx.blocking_recv()
            .map_err(|_| ApiError::internal("writer dropped a job"))??;
        take(slot)
    }

    /// Runs `f` on a fresh writing connection (migrations).
    pub fn with_writer_blocking<T>(
        &self,
        f: impl FnOnce(&mut dyn Conn) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let conn = open_conn(&self.path, true)?;
        f(&mut SqliteConn::new(&conn, false))
    }

    /// Does the writer's before-commit work once, in a transaction of its
    /// own: whatever a writer that did not run it left (an older binary,
    /// a change made by hand) is done before we serve.
    pub fn catch_up(&self) -> anyhow::Result<()> {
        let conn = open_conn(&self.path, true)?;
        step(&conn, "BEGIN IMMEDIATE")?;
        match before_commit(&conn).and_then(|_| step(&conn, "COMMIT")) {
            Ok(()) => Ok(()),
            Err(e) => {
                let _ = exec(&conn, "ROLLBACK");
                Err(e.into())
            }
        }
    }

    pub fn shutdown(&self) {
        self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(handle) = self
            .writer_thread
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = handle.join();
        }
    }
}

fn take<T>(slot: Arc<Mutex<Option<T>>>) -> ApiResult<T> {
    slot.lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .ok_or_else(|| ApiError::internal("write job produced no value"))
}

fn exec(conn: &Connection, sql: &str) -> Result<(), DbError> {
    conn.execute_batch(sql).map_err(map_err)
}

/// One statement of the writer's own (BEGIN, SAVEPOINT, RELEASE, COMMIT),
/// prepared once: these run for every job of every group.
fn step(conn: &Connection, sql: &str) -> Result<(), DbError> {
    conn.prepare_cached(sql)
        .and_then(|mut s| s.execute([]))
        .map(|_| ())
        .map_err(map_err)
}

/// Runs what the schema asks of the writer once per group, after its
/// last job and before the commit (`writer_before_commit`, in order):
/// work that costs less once per group than once per job, such as
/// indexing the contacts the group created (FTS5 writes its pending terms
/// out at every savepoint, and each job runs in one). A failure fails the
/// group: its jobs are not committed.
fn before_commit(conn: &Connection) -> Result<(), DbError> {
    let listed = conn
        .prepare_cached("SELECT sql FROM writer_before_commit ORDER BY position")
        .and_then(|mut s| {
            s.query_map([], |row| row.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()
        });
    let statements = match listed {
        Ok(statements) => statements,
        // A database the migrations have not reached yet.
        Err(rusqlite::Error::SqliteFailure(_, Some(message))) if message.contains("no such table") => {
            return Ok(())
        }
        Err(e) => return Err(map_err(e)),
    };
    for sql in &statements {
        step(conn, sql)?;
    }
    Ok(())
}

/// Takes every queued job (up to MAX_GROUP), runs each in a savepoint of
/// one transaction, commits once, then answers them all.
fn writer_loop(conn: Connection, rx: mpsc::Receiver<WriteJob>, stats: &WriterStats) {
    while let Ok(first) = rx.recv() {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(job) => group.push(job),
                Err(_) => break,
            }
        }
        stats.jobs.fetch_add(group.len() as u64, Ordering::Relaxed);
        stats.commits.fetch_add(1, Ordering::Relaxed);
        run_group(&conn, group);
    }
}

fn run_group(conn: &Connection, group: Vec<WriteJob>) {
    if let Err(e) = step(conn, "BEGIN IMMEDIATE") {
        for job in group {
            let _ = job
                .done
                .send(Err(ApiError::Unavailable(format!("database is busy: {e}"))));
        }
        return;
    }
    let mut succeeded = Vec::with_capacity(group.len());
    for job in group {
        let result = step(conn, "SAVEPOINT job").map_err(ApiError::from).and_then(|_| {
            let mut c = SqliteConn::new(conn, true);
            match std::panic::catch_unwind(AssertUnwindSafe(|| (job.run)(&mut c))) {
                Ok(r) => r,
                Err(_) => Err(ApiError::internal("write job panicked")),
            }
        });
        match result {
            Ok(()) => {
                if let Err(e) = step(conn, "RELEASE job") {
                    let _ = exec(conn, "ROLLBACK TO job; RELEASE job");
                    crate::engine::kept::forget_all();
                    let _ = job.done.send(Err(e.into()));
                } else {
                    succeeded.push(job.done);
                }
            }
            Err(e) => {
                // Undo this job only; the others in the group stand.
                let _ = exec(conn, "ROLLBACK TO job; RELEASE job");
                let _ = job.done.send(Err(e));
            }
        }
    }
    let ready = if succeeded.is_empty() {
        Ok(())
    } else {
        before_commit(conn)
    };
    match ready.and_then(|_| step(conn, "COMMIT")) {
        Ok(()) => {
            for done in succeeded {
                let _ = done.send(Ok(()));
            }
        }
        Err(e) => {
            let _ = exec(conn, "ROLLBACK");
            // The group's jobs may have kept what they read of each
            // other's writes, which are now lost.
            crate::engine::kept::forget_all();
            for done in succeeded {
                let _ = done.send(Err(ApiError::internal(format!("commit failed: {e}"))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// New contacts are indexed for search once per group, just before
    /// its commit: a committed contact is found, one whose job failed
    /// leaves nothing behind, and changes made before and after the
    /// indexing are followed.
    #[test]
    fn contacts_are_searchable_when_their_group_commits() {
        let dir = std::env::temp_dir().join(format!("ferrogate-search-{}", crate::ids::new_id()));
        let url = format!("sqlite://{}", dir.join("s.db").display());
        let store = crate::db::Store::open(&url, 2).unwrap();
        store.migrate().unwrap();
        let run = |statements: Vec<(&'static str, Vec<Value>)>| {
            store.write_blocking(move |c| {
                for (sql, params) in statements {
                    c.execute(&Sql::with(sql, params))?;
                }
                Ok(())
            })
        };
        const CONTACT: &str = "INSERT INTO contacts (id, location_id, last_name, created_ts, modified_ts) VALUES (?, 'loc', ?, 0, 0)";
        const RENAME: &str = "UPDATE contacts SET last_name = ? WHERE id = ?";
        const REMOVE: &str = "DELETE FROM contacts WHERE id = ?";
        run(vec![(
            "INSERT INTO locations (id, path, name, created_ts, modified_ts) VALUES ('loc', '/loc/', 'L', 0, 0)",
            vec![],
        )])
        .unwrap();
        let failed = store.write_blocking(|c| {
            c.execute(&Sql::with(CONTACT, vec!["gone".into(), "Lovelace".into()]))?;
            Err::<(), _>(ApiError::internal("the job fails after its insert"))
        });
        assert!(failed.is_err());
        run(vec![(CONTACT, vec!["ada".into(), "Lovelace".into()])]).unwrap();
        run(vec![
            (CONTACT, vec!["tmp".into(), "Temporary".into()]),
            (REMOVE, vec!["tmp".into()]),
        ])
        .unwrap();
        run(vec![
            (CONTACT, vec!["grace".into(), "Hopper".into()]),
            (RENAME, vec!["Hopperton".into(), "grace".into()]),
        ])
        .unwrap();
        // Read the way a reader does, outside the writer (a write job
        // would itself commit a group, and so index the queue).
        let path = dir.join("s.db");
        let found = |needle: &str| -> Vec<String> {
            let reader = open_conn(&path.display().to_string(), false).unwrap();
            let mut statement = reader
                .prepare(
                    "SELECT m.record_id FROM contacts_search_rows m WHERE m.search_rowid IN \
                     (SELECT rowid FROM contacts_search WHERE last_name LIKE ?) ORDER BY 1",
                )
                .unwrap();
            let rows = statement
                .query_map([format!("%{needle}%")], |row| row.get::<_, String>(0))
                .unwrap();
            rows.collect::<Result<Vec<_>, _>>().unwrap()
        };
        assert_eq!(found("ovela"), ["ada"], "the failed job's contact is not there");
        assert_eq!(found("opperton"), ["grace"], "indexed as it was at the commit");
        assert!(found("empor").is_empty(), "created and deleted before the commit");
        let queued = store
            .write_blocking(|c| Ok(c.query_int(&Sql::new("SELECT COUNT(*) FROM contacts_search_queue"))?))
            .unwrap();
        assert_eq!(queued, 0);
        // Once indexed, the update and delete triggers follow the contact.
        run(vec![(RENAME, vec!["Byron".into(), "ada".into()])]).unwrap();
        assert!(found("ovela").is_empty());
        assert_eq!(found("yro"), ["ada"]);
        run(vec![(REMOVE, vec!["ada".into()])]).unwrap();
        assert!(found("yro").is_empty());
        // An id a writer left queued (an older binary) is indexed when
        // the store next opens.
        {
            let other = Connection::open(&path).unwrap();
            other
                .execute_batch(
                    "INSERT INTO contacts (id, location_id, last_name, created_ts, modified_ts) \
                     VALUES ('left', 'loc', 'Leftover', 0, 0)",
                )
                .unwrap();
        }
        assert!(found("eftov").is_empty(), "queued, not yet indexed");
        store.migrate().unwrap();
        assert_eq!(found("eftov"), ["left"]);
        // A new contact takes a fresh search row.
        run(vec![(CONTACT, vec!["alan".into(), "Turing".into()])]).unwrap();
        assert_eq!(found("urin"), ["alan"]);
        assert_eq!(found("opperton"), ["grace"]);
        store.shutdown();
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A database the store creates, and its WAL, are its owner's only;
    /// an existing file keeps the mode its operator gave it. (Under the
    /// usual umask, 022, SQLite alone would make them 0644.)
    #[test]
    fn a_new_database_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("ferrogate-mode-{}", crate::ids::new_id()));
        let path = dir.join("new.db").display().to_string();
        let store = crate::db::Store::open(&format!("sqlite://{path}"), 1).unwrap();
        store.migrate().unwrap();
        let mode = |p: &str| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&format!("{path}-wal")), 0o600);
        drop(store);
        let shared = dir.join("shared.db").display().to_string();
        std::fs::write(&shared, b"").unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o640)).unwrap();
        let store = crate::db::Store::open(&format!("sqlite://{shared}"), 1).unwrap();
        assert_eq!(mode(&shared), 0o640);
        drop(store);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// What the writer and the readers run with: WAL, synchronous=FULL
    /// (2), foreign keys, a busy timeout; readers cannot write.
    #[test]
    fn connections_are_configured_for_durability() {
        let dir = std::env::temp_dir().join(format!("ferrogate-pragma-{}", crate::ids::new_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.db").display().to_string();
        let writer = open_conn(&path, true).unwrap();
        let reader = open_conn(&path, false).unwrap();
        let pragma = |c: &Connection, name: &str| -> String {
            c.query_row(&format!("PRAGMA {name}"), [], |r| {
                r.get::<_, rusqlite::types::Value>(0)
            })
            .map(|v| match v {
                rusqlite::types::Value::Integer(i) => i.to_string(),
                rusqlite::types::Value::Text(t) => t,
                other => format!("{other:?}"),
            })
            .unwrap()
        };
        assert_eq!(pragma(&writer, "journal_mode"), "wal");
        assert_eq!(pragma(&writer, "synchronous"), "2", "FULL");
        assert_eq!(pragma(&writer, "foreign_keys"), "1");
        assert_eq!(pragma(&writer, "busy_timeout"), "10000");
        assert_eq!(pragma(&reader, "foreign_keys"), "1");
        assert_eq!(pragma(&reader, "query_only"), "1");
        assert!(reader.execute_batch("CREATE TABLE x (y TEXT)").is_err());
        drop((writer, reader));
        let _ = std::fs::remove_dir_all(dir);
    }
}
