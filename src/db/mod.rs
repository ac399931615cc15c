//! Storage: one API over two engines.
//!
//! Everything above this module works with [`Sql`] (text with `?`
//! placeholders plus bound [`Value`]s) and a [`Conn`]. Jobs are plain
//! synchronous closures run on a blocking thread, so business rules that
//! read and then write inside one transaction stay simple code.
//!
//! SQLite funnels every write through one writer thread that commits many
//! jobs together (group commit, each job in its own savepoint); PostgreSQL
//! runs each write job in its own transaction on a pooled connection.

mod migrate;
mod pg_tls;
mod pool;
mod postgres;
mod sqlite;

use crate::error::{ApiError, ApiResult};
use std::sync::Arc;

pub use migrate::MIGRATIONS;

/// The only column types we use: integers (also booleans and money in
/// minor units) and text (also ids, dates and JSON). Never floats.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    Null,
    Int(i64),
    Text(String),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Text(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
    /// Text form used by change logs.
    pub fn to_log_text(&self) -> Option<String> {
        match self {
            Value::Null => None,
            Value::Int(i) => Some(i.to_string()),
            Value::Text(s) => Some(s.clone()),
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.to_string())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Text(s)
    }
}
impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Int(b as i64)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map(Into::into).unwrap_or(Value::Null)
    }
}

pub type Row = Vec<Value>;

/// A statement under construction. Values are always bound, never spliced;
/// identifiers come only from static declarations.
#[derive(Clone, Debug, Default)]
pub struct Sql {
    pub text: String,
    pub params: Vec<Value>,
    /// Planned for its parameters every time it runs (PostgreSQL): for a
    /// query whose best plan depends on the values (a list's substring
    /// filter can use a trigram index only when the planner sees the
    /// needle). Other statements keep one prepared plan per connection.
    pub replan: bool,
}

impl Sql {
    pub fn new(text: &str) -> Self {
        Sql {
            text: text.to_string(),
            params: Vec::new(),
            replan: false,
        }
    }
    /// Appends raw SQL text. Only static text may come here.
    pub fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }
    /// Appends a placeholder bound to `value`.
    pub fn bind(&mut self, value: impl Into<Value>) -> &mut Self {
        self.text.push('?');
        self.params.push(value.into());
        self
    }
    /// Appends `?, ?, ...`, one placeholder per value (for `IN (...)`).
    pub fn bind_list<V: Into<Value>>(&mut self, values: impl IntoIterator<Item = V>) -> &mut Self {
        for (i, value) in values.into_iter().enumerate() {
            if i > 0 {
                self.text.push_str(", ");
            }
            self.bind(value);
        }
        self
    }
    /// Statement with its parameters given at once.
    pub fn with(text: &str, params: Vec<Value>) -> Self {
        debug_assert_eq!(text.matches('?').count(), params.len());
        Sql {
            text: text.to_string(),
            params,
            replan: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("unique constraint violated: {0}")]
    Unique(String),
    /// `table`: the referencing table, when the engine names it
    /// (PostgreSQL does; SQLite says only that some reference failed).
    #[error("foreign key constraint violated: {detail}")]
    ForeignKey { detail: String, table: Option<String> },
    /// The connection was lost or the server is shutting down: retryable.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The job met a concurrent one and was rolled back (PostgreSQL's
    /// deadlock detection or a serialization failure): retryable.
    #[error("conflict with a concurrent transaction: {0}")]
    Conflict(String),
    #[error("database error: {0}")]
    Other(String),
}

impl From<pool::PoolError> for ApiError {
    fn from(e: pool::PoolError) -> Self {
        ApiError::Unavailable(format!("The database is not available: {e}."))
    }
}

impl From<DbError> for ApiError {
    /// An internal error made where `?` met the database error.
    #[track_caller]
    fn from(e: DbError) -> Self {
        match e {
            DbError::Unavailable(detail) => {
                tracing::warn!(error = %detail, "database unavailable");
                ApiError::Unavailable("The database is not available; retry shortly.".into())
            }
            DbError::Conflict(detail) => {
                tracing::warn!(error = %detail, "rolled back after a conflict with a concurrent request");
                ApiError::Unavailable(
                    "The request met a concurrent one and changed nothing; retry shortly.".into(),
                )
            }
            other => ApiError::internal(other),
        }
    }
}

/// A connection, inside a transaction when handed to a write job.
pub trait Conn {
    fn query(&mut self, sql: &Sql) -> Result<Vec<Row>, DbError>;
    fn execute(&mut self, sql: &Sql) -> Result<u64, DbError>;
    fn dialect(&self) -> Dialect;

    /// Runs a query and hands each row to `each` as it arrives, so a
    /// result of any size is never held whole; `each` answers false to
    /// stop early.
    fn query_each(&mut self, sql: &Sql, each: &mut dyn FnMut(Row) -> bool) -> Result<(), DbError> {
        for row in self.query(sql)? {
            if !each(row) {
                break;
            }
        }
        Ok(())
    }

    /// Runs a write whose answer nobody reads (a change log row). An
    /// engine may send it with the job's next statement, or with its
    /// commit, instead of on its own (PostgreSQL pipelines it: one round
    /// trip less). It runs before anything sent after it; its failure
    /// fails the job all the same, surfacing at that next statement or at
    /// the commit. Not for a write whose error a caller handles.
    fn execute_unread(&mut self, sql: &Sql) -> Result<(), DbError> {
        self.execute(sql).map(drop)
    }

    /// Runs a write job's last statement. An engine may send the job's
    /// `COMMIT` with it (PostgreSQL pipelines both: one round trip less),
    /// so the job must send nothing after it and return at once; its
    /// error is this statement's or the commit's, and then nothing of the
    /// job was committed. Outside a write job it is [`Conn::execute`].
    fn execute_and_commit(&mut self, sql: &Sql) -> Result<u64, DbError> {
        self.execute(sql)
    }

    fn query_one(&mut self, sql: &Sql) -> Result<Option<Row>, DbError> {
        Ok(self.query(sql)?.into_iter().next())
    }
    fn query_int(&mut self, sql: &Sql) -> Result<i64, DbError> {
        Ok(self
            .query_one(sql)?
            .and_then(|r| r.into_iter().next())
            .and_then(|v| v.as_int())
            .unwrap_or(0))
    }
}

pub type Job<T> = Box<dyn FnOnce(&mut dyn Conn) -> ApiResult<T> + Send>;

#[derive(Clone)]
pub struct Store {
    engine: Arc<Engine>,
}

enum Engine {
    Sqlite(sqlite::SqliteStore),
    Postgres(postgres::PgStore),
}

impl Store {
    /// Opens the database named by `url` (`sqlite://PATH` or `postgres://...`).
    pub fn open(url: &str, pool_size: usize) -> anyhow::Result<Store> {
        let engine = if let Some(path) = url.strip_prefix("sqlite://") {
            Engine::Sqlite(sqlite::SqliteStore::open(path, pool_size)?)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Engine::Postgres(postgres::PgStore::open(url, pool_size)?)
        } else {
            anyhow::bail!("unsupported database url (use sqlite://PATH or postgres://...)");
        };
        Ok(Store {
            engine: Arc::new(engine),
        })
    }

    pub fn dialect(&self) -> Dialect {
        match &*self.engine {
            Engine::Sqlite(_) => Dialect::Sqlite,
            Engine::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Opens the database and applies pending migrations, off the async
    /// threads: what every command that uses the database does first.
    pub async fn open_and_migrate(url: &str, pool_size: usize) -> anyhow::Result<Store> {
        use anyhow::Context;
        let url = url.to_string();
        tokio::task::spawn_blocking(move || {
            let store = Store::open(&url, pool_size).context("opening the database")?;
            let applied = store.migrate().context("applying migrations")?;
            if applied > 0 {
                tracing::info!(applied, "migrations applied");
            }
            Ok(store)
        })
        .await?
    }

    /// Applies pending migrations; safe to run from several processes.
    pub fn migrate(&self) -> anyhow::Result<usize> {
        match &*self.engine {
            Engine::Sqlite(s) => {
                let applied = s.with_writer_blocking(migrate::apply)?;
                s.catch_up()?;
                Ok(applied)
            }
            Engine::Postgres(p) => p.with_conn_blocking(migrate::apply),
        }
    }

    /// Runs a read-only job on a pooled connection.
    pub async fn read<T, F>(&self, job: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut dyn Conn) -> ApiResult<T> + Send + 'static,
    {
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || match &*engine {
            Engine::Sqlite(s) => s.read(job),
            Engine::Postgres(p) => p.read(job),
        })
        .await
        .map_err(|e| ApiError::internal(format!("read job panicked: {e}")))?
    }

    /// A short read (a lookup by key, as every request's authentication
    /// makes): on SQLite it runs on the calling thread when a reader
    /// connection is idle (a few microseconds, instead of a hand-off to the
    /// blocking pool and back); otherwise it is [`Store::read`].
    pub async fn read_point<T, F>(&self, job: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut dyn Conn) -> ApiResult<T> + Send + 'static,
    {
        let job = match &*self.engine {
            Engine::Sqlite(s) => match s.try_read(job) {
                Ok(result) => return result,
                Err(job) => job,
            },
            Engine::Postgres(_) => job,
        };
        self.read(job).await
    }

    /// `auth_epoch` read from the request's own task, where the engine
    /// can do that more cheaply than a job (PostgreSQL: see
    /// [`postgres::PgStore::auth_epoch`]). `None` on SQLite, whose short
    /// reads already run on the calling thread ([`Store::read_point`]).
    pub async fn auth_epoch(&self) -> ApiResult<Option<i64>> {
        match &*self.engine {
            Engine::Sqlite(_) => Ok(None),
            Engine::Postgres(p) => Ok(Some(p.auth_epoch().await?)),
        }
    }

    /// Runs a job inside a transaction; answers only once it is durable.
    /// An error from the job rolls back everything the job wrote.
    pub async fn write<T, F>(&self, job: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut dyn Conn) -> ApiResult<T> + Send + 'static,
    {
        match &*self.engine {
            Engine::Sqlite(s) => s.write(Box::new(job)).await,
            Engine::Postgres(_) => {
                let engine = self.engine.clone();
                tokio::task::spawn_blocking(move || match &*engine {
                    Engine::Postgres(p) => p.write(job),
                    Engine::Sqlite(_) => unreachable!("engine does not change"),
                })
                .await
                .map_err(|e| ApiError::internal(format!("write job panicked: {e}")))?
            }
        }
    }

    /// Blocking variant for commands that run outside the server.
    pub fn write_blocking<T, F>(&self, job: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut dyn Conn) -> ApiResult<T> + Send + 'static,
    {
        match &*self.engine {
            Engine::Sqlite(s) => s.write_blocking(Box::new(job)),
            Engine::Postgres(p) => p.write(job),
        }
    }

    /// Calls `deliver(channel, payload)` for every PostgreSQL notification
    /// on `channels` (see `PgStore::listen`). SQLite has one serving
    /// process, so there is nothing to listen to: `Ok(false)`.
    pub fn listen(
        &self,
        channels: Vec<String>,
        deliver: Box<dyn Fn(String, String) + Send + Sync>,
    ) -> anyhow::Result<bool> {
        match &*self.engine {
            Engine::Sqlite(_) => Ok(false),
            Engine::Postgres(p) => p.listen(channels, deliver).map(|()| true),
        }
    }

    /// Sends a PostgreSQL notification (nothing on SQLite). It is
    /// delivered when the sending transaction commits: this job is one.
    pub async fn notify(&self, channel: String, payload: String) -> ApiResult<()> {
        if self.dialect() == Dialect::Sqlite {
            return Ok(());
        }
        self.write(move |conn| {
            conn.query(&Sql::with(
                "SELECT CAST(1 AS BIGINT) FROM (SELECT pg_notify(?, ?)) n",
                vec![channel.into(), payload.into()],
            ))?;
            Ok(())
        })
        .await
    }

    /// Checks that the database answers (readiness probe).
    pub async fn ping(&self) -> ApiResult<()> {
        self.read(|c| {
            c.query(&Sql::new("SELECT 1"))?;
            Ok(())
        })
        .await
    }

    /// Marks this process alive for the other nodes sharing the database
    /// (PostgreSQL: an advisory lock held on a connection of its own). A
    /// SQLite database has one serving process, so nothing is needed.
    pub fn hold_node_lock(&self, node_id: &str) -> anyhow::Result<()> {
        match &*self.engine {
            Engine::Sqlite(_) => Ok(()),
            Engine::Postgres(p) => p.hold_node_lock(node_id),
        }
    }

    /// Whether the node that wrote `node_id` is gone. On SQLite every node
    /// but this one is (one process serves a database file).
    pub async fn node_is_dead(&self, node_id: &str, me: &str) -> ApiResult<bool> {
        if node_id == me {
            return Ok(false);
        }
        if self.dialect() == Dialect::Sqlite {
            return Ok(true);
        }
        let node = node_id.to_string();
        self.read(move |conn| {
            let got = conn
                .query_one(&Sql::with(
                    "SELECT CAST(CASE WHEN pg_try_advisory_lock(hashtextextended(?, 0)) THEN 1 ELSE 0 END AS BIGINT)",
                    vec![node.clone().into()],
                ))?
                .and_then(|r| r[0].as_int())
                == Some(1);
            if got {
                conn.query(&Sql::with(
                    "SELECT CAST(CASE WHEN pg_advisory_unlock(hashtextextended(?, 0)) THEN 1 ELSE 0 END AS BIGINT)",
                    vec![node.into()],
                ))?;
            }
            Ok(got)
        })
        .await
    }

    /// Frees the leases (`lease_owner`, `lease_until_ms`) that nodes which
    /// are gone hold on rows of `table` matching `live` (an SQL condition
    /// such as `status = 'pending'`). Returns each such node with the rows
    /// it held. Used by every leased background job.
    pub async fn release_dead_leases(
        &self,
        table: &'static str,
        live: &'static str,
        me: &str,
    ) -> ApiResult<Vec<(String, u64)>> {
        let mine = me.to_string();
        let owners: Vec<String> = self
            .read(move |conn| {
                Ok(conn
                    .query(&Sql::with(
                        &format!(
                            "SELECT DISTINCT lease_owner FROM {table} WHERE {live} \
                             AND lease_owner IS NOT NULL AND lease_owner <> ?"
                        ),
                        vec![mine.into()],
                    ))?
                    .into_iter()
                    .filter_map(|r| r[0].as_str().map(str::to_string))
                    .collect())
            })
            .await?;
        let mut released = Vec::new();
        for owner in owners {
            if !self.node_is_dead(&owner, me).await? {
                continue;
            }
            let node = owner.clone();
            let rows = self
                .write(move |conn| {
                    Ok(conn.execute(&Sql::with(
                        &format!(
                            "UPDATE {table} SET lease_owner = NULL, lease_until_ms = NULL \
                             WHERE lease_owner = ? AND {live}"
                        ),
                        vec![node.into()],
                    ))?)
                })
                .await?;
            if rows > 0 {
                released.push((owner, rows));
            }
        }
        Ok(released)
    }

    /// SQLite group commit counters: (commits, jobs). None on PostgreSQL.
    pub fn writer_stats(&self) -> Option<(u64, u64)> {
        match &*self.engine {
            Engine::Sqlite(s) => Some((
                s.stats.commits.load(std::sync::atomic::Ordering::Relaxed),
                s.stats.jobs.load(std::sync::atomic::Ordering::Relaxed),
            )),
            Engine::Postgres(_) => None,
        }
    }

    /// Stops the SQLite writer after the queued jobs are done.
    pub fn shutdown(&self) {
        if let Engine::Sqlite(s) = &*self.engine {
            s.shutdown();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_store() -> (Store, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("ferrogate-db-{}", crate::ids::new_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("t.db").display());
        let store = Store::open(&url, 2).unwrap();
        store.migrate().unwrap();
        (store, dir)
    }

    /// Many concurrent writes land in shared commits; a failing job undoes
    /// only its own writes, and every acknowledged write is there.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn group_commit_isolates_failing_jobs() {
        let (store, dir) = temp_store();
        let mut handles = Vec::new();
        for i in 0..400i64 {
            let store = store.clone();
            handles.push(tokio::spawn(async move {
                store
                    .write(move |c| {
                        c.execute(&Sql::with(
                            "INSERT INTO developers (id, name, created_ts) VALUES (?, ?, ?)",
                            vec![format!("dev{i:04}").into(), "x".into(), i.into()],
                        ))?;
                        if i % 3 == 0 {
                            return Err(ApiError::BadRequest("refused".into()));
                        }
                        Ok(i)
                    })
                    .await
            }));
        }
        let mut acknowledged = Vec::new();
        for h in handles {
            if let Ok(i) = h.await.unwrap() {
                acknowledged.push(i);
            }
        }
        let stored = store
            .read(|c| Ok(c.query_int(&Sql::new("SELECT COUNT(*) FROM developers"))?))
            .await
            .unwrap();
        assert_eq!(acknowledged.len(), 266);
        assert_eq!(stored, 266, "exactly the acknowledged writes are stored");
        let refused = store
            .read(|c| {
                Ok(c.query_int(&Sql::new(
                    "SELECT COUNT(*) FROM developers WHERE created_ts % 3 = 0",
                ))?)
            })
            .await
            .unwrap();
        assert_eq!(refused, 0);
        let (commits, jobs) = store.writer_stats().unwrap();
        assert!(jobs >= 400, "every job went through the writer");
        assert!(
            commits < jobs,
            "concurrent jobs shared commits ({commits} commits for {jobs} jobs)"
        );
        store.shutdown();
        let _ = std::fs::remove_dir_all(dir);
    }

    /// SQLite keeps the contract of a job's last statement as PostgreSQL
    /// does, where it carries the COMMIT: a statement after it is
    /// refused, and fails the job.
    #[tokio::test]
    async fn nothing_follows_a_jobs_last_statement() {
        let (store, dir) = temp_store();
        let developer = |id: &str| {
            Sql::with(
                "INSERT INTO developers (id, name, created_ts) VALUES (?, 'x', 1)",
                vec![id.into()],
            )
        };
        store
            .write(move |c| Ok(c.execute_and_commit(&developer("d1"))?))
            .await
            .unwrap();
        let after = store
            .write(move |c| {
                c.execute_and_commit(&developer("d2"))?;
                Ok(c.execute(&developer("d3"))?)
            })
            .await;
        assert!(after.is_err());
        let read = store
            .read(move |c| Ok(c.query_int(&Sql::new("SELECT COUNT(*) FROM developers"))?))
            .await
            .unwrap();
        assert_eq!(read, 1, "only the job that ended at its last statement stands");
        store.shutdown();
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn unique_violations_are_typed() {
        let (store, dir) = temp_store();
        let insert = |store: Store| async move {
            store
                .write(|c| {
                    c.execute(&Sql::with(
                        "INSERT INTO developers (id, name, created_ts) VALUES ('d1', 'x', 1)",
                        vec![],
                    ))
                    .map_err(|e| match e {
                        DbError::Unique(_) => ApiError::BadRequest("duplicate".into()),
                        other => other.into(),
                    })
                })
                .await
        };
        assert!(insert(store.clone()).await.is_ok());
        assert!(matches!(
            insert(store.clone()).await,
            Err(ApiError::BadRequest(_))
        ));
        store.shutdown();
        let _ = std::fs::remove_dir_all(dir);
    }
}
