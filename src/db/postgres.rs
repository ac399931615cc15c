//! PostgreSQL: a pool of clients used from blocking threads, each with a
//! small runtime of its own. Each write job runs in its own transaction;
//! PostgreSQL groups concurrent commits by itself. A job's `BEGIN` is sent
//! together with its first statement, in one round trip, and writes whose
//! answer nobody reads go out ahead of the next statement or the commit
//! (see [`run`]).

use super::pg_tls::Target;
use super::pool::Pool;
use super::{Conn, DbError, Dialect, Row, Sql, Value};
use crate::error::{ApiError, ApiResult};
use postgres::types::{to_sql_checked, IsNull, ToSql, Type};
use postgres::NoTls;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use tokio_postgres::{Client, Statement};

pub struct PgStore {
    target: Arc<Target>,
    pool: Pool<PgConn>,
    /// The connection every request's `auth_epoch` read shares (see
    /// [`PgStore::auth_epoch`]); made on first use, again after it drops.
    epoch_reader: std::sync::Mutex<Option<Arc<EpochReader>>>,
    /// Held by the one caller connecting a new shared reader.
    epoch_connecting: tokio::sync::Mutex<()>,
}

/// An asynchronous client driven by the server's own runtime, and its
/// prepared read of `auth_epoch`.
struct EpochReader {
    client: Client,
    read: Statement,
}

/// How long the shared epoch read (or its connecting) may take before it
/// counts as a lost connection.
const EPOCH_READ_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Drives a connection of the shared reader until it ends, and says why
/// if it was not closed by its client.
async fn log_end<F: Future<Output = Result<(), postgres::Error>>>(connection: F) {
    if let Err(e) = connection.await {
        tracing::warn!(error = %e, "the shared epoch connection ended");
    }
}

pub struct PgConn {
    /// Runs this connection's I/O, only while a statement is awaited (a
    /// current-thread runtime polls the connection task inside `block_on`).
    runtime: tokio::runtime::Runtime,
    /// Always there until the connection is dropped (see `Drop`).
    client: Option<Client>,
    /// The task that drives the connection: awaited on drop, so that it
    /// says goodbye to the server (see `Drop`).
    connection: Option<tokio::task::JoinHandle<()>>,
    /// Prepared statements by their `$n` text: saves a round trip a query.
    statements: HashMap<String, Statement>,
    /// A write job began and has sent nothing yet: its `BEGIN` goes out
    /// with the first statement (pipelined, one round trip for both), and
    /// a job that sends nothing needs no `COMMIT`.
    begin_pending: bool,
    /// A write job is running: its unread writes may wait in `unread`.
    in_job: bool,
    /// Writes whose answers nobody reads (`Conn::execute_unread`), sent
    /// ahead of the job's next statement or of its `COMMIT`.
    unread: Vec<(Statement, Vec<Value>)>,
    /// Set once the job's last statement went out with its `COMMIT`
    /// (`Conn::execute_and_commit`): its transaction is over, committed
    /// (`true`) or, the statement having failed, rolled back.
    over: Option<bool>,
}

impl PgConn {
    fn connect(target: &Target) -> anyhow::Result<PgConn> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (client, connection) = match &target.tls {
            None => {
                let (client, connection) = runtime.block_on(target.async_config.connect(NoTls))?;
                (client, runtime.spawn(async move { drop(connection.await) }))
            }
            Some(tls) => {
                let (client, connection) = runtime.block_on(target.async_config.connect(tls.clone()))?;
                (client, runtime.spawn(async move { drop(connection.await) }))
            }
        };
        Ok(PgConn {
            runtime,
            client: Some(client),
            connection: Some(connection),
            statements: HashMap::new(),
            begin_pending: false,
            in_job: false,
            unread: Vec::new(),
            over: None,
        })
    }

    fn client(&self) -> Result<&Client, DbError> {
        self.client
            .as_ref()
            .ok_or_else(|| DbError::Unavailable("the connection is closed".into()))
    }

    fn is_closed(&self) -> bool {
        self.client.as_ref().is_none_or(Client::is_closed)
    }

    /// A plain synchronous client, for the connections that only listen or
    /// hold a lock.
    fn connect_sync(target: &Target) -> anyhow::Result<postgres::Client> {
        Ok(match &target.tls {
            None => target.config.connect(NoTls)?,
            Some(tls) => target.config.connect(tls.clone())?,
        })
    }

    fn prepare(&mut self, sql: &Sql) -> Result<Statement, DbError> {
        let text = numbered(&sql.text);
        if sql.replan {
            // A statement of its own, dropped after this run: PostgreSQL
            // plans a new statement's first runs for their parameters.
            return self
                .runtime
                .block_on(self.client()?.prepare(&text))
                .map_err(map_err);
        }
        if let Some(s) = self.statements.get(&text) {
            return Ok(s.clone());
        }
        let stmt = self
            .runtime
            .block_on(self.client()?.prepare(&text))
            .map_err(map_err)?;
        if self.statements.len() > 512 {
            self.statements.clear();
        }
        self.statements.insert(text, stmt.clone());
        Ok(stmt)
    }

    fn batch(&mut self, text: &str) -> Result<(), DbError> {
        self.runtime
            .block_on(self.client()?.batch_execute(text))
            .map_err(map_err)
    }

    /// Refuses a statement after the job's commit: it would run outside
    /// the job's transaction (a defect in the job, reported as one).
    fn check_open(&self) -> Result<(), DbError> {
        if self.over.is_some() {
            return Err(DbError::Other("a statement after its job's commit".into()));
        }
        Ok(())
    }

    /// What the job has queued to go ahead of its next statement: its
    /// `BEGIN`, its unread writes (see [`run`]).
    fn take_queued(&mut self) -> (bool, Vec<(Statement, Vec<Value>)>) {
        (
            std::mem::take(&mut self.begin_pending),
            std::mem::take(&mut self.unread),
        )
    }

    /// Sends what the job has queued on its own, before a statement that
    /// cannot travel with it.
    fn flush(&mut self) -> Result<(), DbError> {
        let (begin, unread) = self.take_queued();
        run(&self.runtime, self.client()?, begin, &unread, async { Ok(()) })
    }
}

/// Closes the connection as the synchronous client did: the client's
/// last handle goes, and the connection task, polled once more, sends
/// `Terminate` and ends (the server would otherwise log an unexpected end
/// of file for every pooled connection closed).
impl Drop for PgConn {
    fn drop(&mut self) {
        let Some(task) = self.connection.take() else {
            return;
        };
        drop(self.client.take());
        let wait = std::time::Duration::from_millis(200);
        let _ = self
            .runtime
            .block_on(async { tokio::time::timeout(wait, task).await });
    }
}

/// Awaits `statement` on `client`, preceded by `BEGIN` when `begin` and
/// by the `unread` writes: every request is written before any answer is
/// awaited (pipelining; tokio-postgres queues a request when its future is
/// first polled, and they are first polled here in order), and PostgreSQL
/// runs them in that order. The first failure is the answer: after it
/// PostgreSQL refuses the rest of the transaction. `BEGIN` fails only with
/// the connection, which then runs nothing after it.
fn run<T>(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    begin: bool,
    unread: &[(Statement, Vec<Value>)],
    statement: impl Future<Output = Result<T, postgres::Error>>,
) -> Result<T, DbError> {
    use std::pin::Pin;
    use std::task::Poll;
    if !begin && unread.is_empty() {
        return runtime.block_on(statement).map_err(map_err);
    }
    let binds: Vec<Vec<Bind>> = unread
        .iter()
        .map(|(_, params)| params.iter().map(Bind).collect())
        .collect();
    let refs: Vec<Vec<&(dyn ToSql + Sync)>> = binds
        .iter()
        .map(|b| b.iter().map(|p| p as &(dyn ToSql + Sync)).collect())
        .collect();
    type Ahead<'a> = Pin<Box<dyn Future<Output = Result<(), postgres::Error>> + 'a>>;
    let mut ahead: Vec<Ahead> = Vec::with_capacity(unread.len() + 1);
    if begin {
        ahead.push(Box::pin(client.batch_execute("BEGIN")));
    }
    for ((stmt, _), refs) in unread.iter().zip(&refs) {
        ahead.push(Box::pin(
            async move { client.execute(stmt, refs).await.map(drop) },
        ));
    }
    let mut statement = std::pin::pin!(statement);
    let mut done: Vec<Option<Result<(), postgres::Error>>> = ahead.iter().map(|_| None).collect();
    let mut result = None;
    runtime.block_on(std::future::poll_fn(|cx| {
        for (future, out) in ahead.iter_mut().zip(done.iter_mut()) {
            if out.is_none() {
                if let Poll::Ready(r) = future.as_mut().poll(cx) {
                    *out = Some(r);
                }
            }
        }
        if result.is_none() {
            if let Poll::Ready(r) = statement.as_mut().poll(cx) {
                result = Some(r);
            }
        }
        if result.is_some() && done.iter().all(Option::is_some) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }));
    for out in done.into_iter().flatten() {
        out.map_err(map_err)?;
    }
    result
        .ok_or_else(|| DbError::Other("a pipelined statement did not finish".into()))?
        .map_err(map_err)
}

/// Rewrites `?` placeholders as `$1, $2, ...`. Our SQL never carries
/// literals (every value is bound), so a `?` is always a placeholder.
fn numbered(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut n = 0;
    for ch in text.chars() {
        if ch == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(ch);
        }
    }
    out
}

#[derive(Debug)]
struct Bind<'a>(&'a Value);

impl ToSql for Bind<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                Type::BOOL => (*i != 0).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR => i.to_string().to_sql(ty, out),
                _ => Err(format!("cannot bind an integer as {ty}").into()),
            },
            Value::Text(s) => match *ty {
                Type::INT8 => s.parse::<i64>()?.to_sql(ty, out),
                _ => s.as_str().to_sql(ty, out),
            },
        }
    }
    fn accepts(_: &Type) -> bool {
        true
    }
    to_sql_checked!();
}

fn decode(row: &postgres::Row) -> Result<Row, DbError> {
    let mut values = Vec::with_capacity(row.len());
    for (i, column) in row.columns().iter().enumerate() {
        let ty = column.type_();
        let v = match *ty {
            Type::INT8 => row.try_get::<_, Option<i64>>(i).map(Value::from),
            Type::INT4 => row
                .try_get::<_, Option<i32>>(i)
                .map(|v| Value::from(v.map(i64::from))),
            Type::INT2 => row
                .try_get::<_, Option<i16>>(i)
                .map(|v| Value::from(v.map(i64::from))),
            Type::BOOL => row
                .try_get::<_, Option<bool>>(i)
                .map(|v| Value::from(v.map(i64::from))),
            Type::VOID => Ok(Value::Null),
            _ => row.try_get::<_, Option<String>>(i).map(Value::from),
        }
        .map_err(|e| DbError::Other(format!("column {}: {e}", column.name())))?;
        values.push(v);
    }
    Ok(values)
}

fn map_err(e: postgres::Error) -> DbError {
    if let Some(db) = e.as_db_error() {
        let text = format!("{} ({})", db.message(), db.constraint().unwrap_or_default());
        return classify(db.code().code(), text, db.table());
    }
    // A closed connection or an I/O failure talking to the server.
    let io = std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>());
    if e.is_closed() || io {
        return DbError::Unavailable(e.to_string());
    }
    DbError::Other(e.to_string())
}

/// A server error by its SQLSTATE (`text` describes it; `table` is the
/// table the server names, for a foreign key the referencing one).
fn classify(code: &str, text: String, table: Option<&str>) -> DbError {
    match code {
        "23505" => DbError::Unique(text),
        "23503" => DbError::ForeignKey {
            detail: text,
            table: table.map(str::to_string),
        },
        // Deadlock detected, serialization failure: the server rolled the
        // job back, and the same request may succeed when sent again.
        "40P01" | "40001" => DbError::Conflict(text),
        // Connection exceptions, and an operator or failover ending the session.
        c if c.starts_with("08") || c.starts_with("57P") => DbError::Unavailable(text),
        _ => DbError::Other(format!("{code}: {text}")),
    }
}

impl Conn for PgConn {
    fn query(&mut self, sql: &Sql) -> Result<Vec<Row>, DbError> {
        self.check_open()?;
        let stmt = self.prepare(sql)?;
        let params: Vec<Bind> = sql.params.iter().map(Bind).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        let (begin, unread) = self.take_queued();
        let client = self.client()?;
        let rows = run(&self.runtime, client, begin, &unread, client.query(&stmt, &refs))?;
        rows.iter().map(decode).collect()
    }

    fn query_each(&mut self, sql: &Sql, each: &mut dyn FnMut(Row) -> bool) -> Result<(), DbError> {
        self.check_open()?;
        use futures_util::StreamExt;
        let stmt = self.prepare(sql)?;
        self.flush()?;
        let params: Vec<Bind> = sql.params.iter().map(Bind).collect();
        let rows = self
            .runtime
            .block_on(
                self.client()?
                    .query_raw(&stmt, params.iter().map(|p| p as &dyn ToSql)),
            )
            .map_err(map_err)?;
        let mut rows = std::pin::pin!(rows);
        while let Some(row) = self.runtime.block_on(rows.next()) {
            if !each(decode(&row.map_err(map_err)?)?) {
                break;
            }
        }
        Ok(())
    }

    fn execute(&mut self, sql: &Sql) -> Result<u64, DbError> {
        self.check_open()?;
        let stmt = self.prepare(sql)?;
        let params: Vec<Bind> = sql.params.iter().map(Bind).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        let (begin, unread) = self.take_queued();
        let client = self.client()?;
        run(
            &self.runtime,
            client,
            begin,
            &unread,
            client.execute(&stmt, &refs),
        )
    }

    fn execute_unread(&mut self, sql: &Sql) -> Result<(), DbError> {
        self.check_open()?;
        if !self.in_job {
            return self.execute(sql).map(drop);
        }
        let stmt = self.prepare(sql)?;
        self.unread.push((stmt, sql.params.clone()));
        Ok(())
    }

    fn execute_and_commit(&mut self, sql: &Sql) -> Result<u64, DbError> {
        if !self.in_job {
            return self.execute(sql);
        }
        self.check_open()?;
        let stmt = self.prepare(sql)?;
        let params: Vec<Bind> = sql.params.iter().map(Bind).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        let (begin, unread) = self.take_queued();
        let client = self.client()?;
        let commit_sent = std::cell::Cell::new(false);
        let last_and_commit = async {
            use std::task::Poll;
            let mut write = std::pin::pin!(client.execute(&stmt, &refs));
            // The first poll sends the statement, or fails before sending
            // anything (its parameters did not encode): then no COMMIT may
            // follow, and the job rolls back as any failed job does.
            let first = std::future::poll_fn(|cx| Poll::Ready(write.as_mut().poll(cx))).await;
            if let Poll::Ready(result) = first {
                return result;
            }
            // Sent: the COMMIT goes right behind it, before either answer
            // is awaited. After a failed statement PostgreSQL still runs
            // it, as a rollback.
            commit_sent.set(true);
            let (written, committed) =
                futures_util::future::join(write, client.batch_execute("COMMIT")).await;
            let written = written?;
            committed?;
            Ok(written)
        };
        let result = run(&self.runtime, client, begin, &unread, last_and_commit);
        // Once the COMMIT is sent the transaction is over, whatever the
        // answers (a broken connection is discarded).
        self.over = commit_sent.get().then_some(result.is_ok());
        result
    }

    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }
}

impl PgStore {
    pub fn open(url: &str, size: usize) -> anyhow::Result<Self> {
        let target = Arc::new(super::pg_tls::target(url)?);
        let for_pool = target.clone();
        let pool = Pool::new(
            size,
            Box::new(move || PgConn::connect(&for_pool).map_err(|e| e.to_string())),
        );
        if !pool.all_connected() {
            // Fail fast at start-up with the real reason.
            PgConn::connect(&target)?;
        }
        Ok(PgStore {
            pool,
            target,
            epoch_reader: std::sync::Mutex::new(None),
            epoch_connecting: tokio::sync::Mutex::new(()),
        })
    }

    /// `auth_epoch`, which every request authenticated by API key reads
    /// (ADR 0021). Read on one connection that all requests share, from
    /// the request's own task: tokio-postgres pipelines the reads of
    /// concurrent requests on it, and none of them takes a pooled
    /// connection or a hand-off to a blocking thread and back, which cost
    /// more than the read itself. Still one read per request, so a change
    /// is seen by the very next request on every node. A read that fails
    /// for want of the connection (closed, or no answer in
    /// [`EPOCH_READ_WAIT`]) drops it and tries once more on a new one.
    pub async fn auth_epoch(&self) -> Result<i64, DbError> {
        let reader = self.epoch_reader().await?;
        match Self::read_epoch(&reader).await {
            Err(DbError::Unavailable(_)) => {
                self.forget_epoch_reader(&reader);
                let fresh = self.epoch_reader().await?;
                Self::read_epoch(&fresh).await
            }
            read => read,
        }
    }

    async fn read_epoch(reader: &EpochReader) -> Result<i64, DbError> {
        let read = tokio::time::timeout(EPOCH_READ_WAIT, reader.client.query_opt(&reader.read, &[]));
        let row = match read.await {
            Ok(row) => row.map_err(map_err)?,
            Err(_) => {
                return Err(DbError::Unavailable(
                    "the epoch read had no answer in time".into(),
                ))
            }
        };
        // As `query_int` reads it: no row is epoch 0.
        row.map_or(Ok(0), |row| row.try_get::<_, i64>(0))
            .map_err(|e| DbError::Other(e.to_string()))
    }

    /// The shared reader, connected by one caller at a time when there is
    /// none or it has closed (the others wait for that one).
    async fn epoch_reader(&self) -> Result<Arc<EpochReader>, DbError> {
        let current = || {
            self.epoch_reader
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .filter(|r| !r.client.is_closed())
        };
        if let Some(reader) = current() {
            return Ok(reader);
        }
        let _connecting = self.epoch_connecting.lock().await;
        if let Some(reader) = current() {
            return Ok(reader);
        }
        let fresh = Arc::new(self.connect_epoch_reader().await.map_err(|e| match e {
            // Refused, full, unreachable: the database is not available
            // to this node, as when the pool cannot connect.
            DbError::Other(detail) | DbError::Conflict(detail) => DbError::Unavailable(detail),
            other => other,
        })?);
        *self.epoch_reader.lock().unwrap_or_else(|p| p.into_inner()) = Some(fresh.clone());
        Ok(fresh)
    }

    /// Drops `reader` if it is still the shared one.
    fn forget_epoch_reader(&self, reader: &Arc<EpochReader>) {
        let mut shared = self.epoch_reader.lock().unwrap_or_else(|p| p.into_inner());
        if shared.as_ref().is_some_and(|r| Arc::ptr_eq(r, reader)) {
            *shared = None;
        }
    }

    /// Connects the shared reader; its connection task runs on the
    /// calling runtime and ends when the client is dropped.
    async fn connect_epoch_reader(&self) -> Result<EpochReader, DbError> {
        let config = &self.target.async_config;
        let connect = async {
            let client = match &self.target.tls {
                None => {
                    let (client, connection) = config.connect(NoTls).await?;
                    tokio::spawn(log_end(connection));
                    client
                }
                Some(tls) => {
                    let (client, connection) = config.connect(tls.clone()).await?;
                    tokio::spawn(log_end(connection));
                    client
                }
            };
            let read = client.prepare("SELECT n FROM auth_epoch WHERE id = 1").await?;
            Ok::<_, postgres::Error>(EpochReader { client, read })
        };
        match tokio::time::timeout(EPOCH_READ_WAIT, connect).await {
            Ok(connected) => connected.map_err(map_err),
            Err(_) => Err(DbError::Unavailable(
                "no connection for the epoch read in time".into(),
            )),
        }
    }

    /// Holds a session-level advisory lock named after this process for as
    /// long as the process lives, on a connection of its own: other nodes
    /// probe the lock to tell a live node from a dead one. The connection
    /// is re-established (and the lock retaken) if it drops.
    pub fn hold_node_lock(&self, node_id: &str) -> anyhow::Result<()> {
        let url = self.target.clone();
        let node = node_id.to_string();
        let take = move |url: &Target, node: &str| -> anyhow::Result<postgres::Client> {
            let mut conn = PgConn::connect_sync(url)?;
            conn.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", &[&node])?;
            Ok(conn)
        };
        // The synchronous client owns a runtime: connect on the lock's own
        // thread, never on an async worker, and report the first attempt.
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("node-lock".into())
            .spawn(move || {
                let mut conn = match take(&url, &node) {
                    Ok(c) => {
                        let _ = ready_tx.send(Ok(()));
                        Some(c)
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                loop {
                    std::thread::sleep(std::time::Duration::from_secs(2));
                    let alive = conn.as_mut().is_some_and(|c| c.simple_query("SELECT 1").is_ok());
                    if !alive {
                        conn = take(&url, &node)
                            .map_err(|e| tracing::warn!(error = %e, "node lock lost; retrying"))
                            .ok();
                    }
                }
            })?;
        ready_rx
            .recv()
            .map_err(|_| anyhow::anyhow!("the node lock thread stopped"))??;
        Ok(())
    }

    /// Listens on `channels` on a connection of its own (a thread that
    /// reconnects and listens again when the connection drops) and hands
    /// each notification's channel and payload to `deliver`. Notifications
    /// sent while the connection was down are lost: listeners must treat
    /// them as wake-ups with time-outs behind them, never as the only copy
    /// of anything.
    pub fn listen(
        &self,
        channels: Vec<String>,
        deliver: Box<dyn Fn(String, String) + Send + Sync>,
    ) -> anyhow::Result<()> {
        let url = self.target.clone();
        let subscribe = move |url: &Target, channels: &[String]| -> anyhow::Result<postgres::Client> {
            let mut conn = PgConn::connect_sync(url)?;
            for channel in channels {
                conn.batch_execute(&format!("LISTEN \"{}\"", channel.replace('"', "")))?;
            }
            Ok(conn)
        };
        // The synchronous client owns a runtime: connect on the listener's
        // own thread, never on an async worker, and report the first try.
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("pg-listen".into())
            .spawn(move || {
                let mut conn = match subscribe(&url, &channels) {
                    Ok(c) => {
                        let _ = ready_tx.send(Ok(()));
                        Some(c)
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                loop {
                    let Some(c) = conn.as_mut() else {
                        std::thread::sleep(std::time::Duration::from_secs(1));
                        conn = subscribe(&url, &channels)
                            .map_err(|e| tracing::warn!(error = %e, "listening for notifications; retrying"))
                            .ok();
                        continue;
                    };
                    let mut broken = false;
                    {
                        let mut notes = c.notifications();
                        let mut each = notes.timeout_iter(std::time::Duration::from_secs(5));
                        loop {
                            match postgres::fallible_iterator::FallibleIterator::next(&mut each) {
                                Ok(Some(n)) => deliver(n.channel().to_string(), n.payload().to_string()),
                                Ok(None) => break,
                                Err(_) => {
                                    broken = true;
                                    break;
                                }
                            }
                        }
                    }
                    // A quiet spell: make sure the connection still lives.
                    if broken || c.is_closed() || c.simple_query("SELECT 1").is_err() {
                        conn = None;
                    }
                }
            })?;
        ready_rx
            .recv()
            .map_err(|_| anyhow::anyhow!("the listener thread stopped"))?
    }

    pub fn read<T>(&self, job: impl FnOnce(&mut dyn Conn) -> ApiResult<T>) -> ApiResult<T> {
        self.pool.with(|conn| {
            let result = job(conn);
            let healthy = !conn.is_closed();
            (result, healthy)
        })?
    }

    pub fn write<T>(&self, job: impl FnOnce(&mut dyn Conn) -> ApiResult<T>) -> ApiResult<T> {
        self.pool.with(|conn| {
            let result = run_in_transaction(conn, job);
            let healthy = !conn.is_closed();
            (result, healthy)
        })?
    }

    pub fn with_conn_blocking<T>(
        &self,
        f: impl FnOnce(&mut dyn Conn) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        self.pool.with(|conn| (f(conn), !conn.is_closed()))?
    }
}

/// Each synchronous client owns a small runtime, which must not be dropped
/// on an async worker thread (tokio panics there, aborting the process at
/// shutdown). Whoever drops the store last, the clients go on a plain thread.
impl Drop for PgStore {
    fn drop(&mut self) {
        let conns = self.pool.drain();
        if !conns.is_empty() {
            let _ = std::thread::spawn(move || drop(conns)).join();
        }
    }
}

fn run_in_transaction<T>(conn: &mut PgConn, job: impl FnOnce(&mut dyn Conn) -> ApiResult<T>) -> ApiResult<T> {
    conn.begin_pending = true;
    conn.in_job = true;
    conn.over = None;
    let result = job(conn);
    conn.in_job = false;
    if let Some(committed) = conn.over.take() {
        // The job's last statement carried the COMMIT: nothing is left to
        // send, and nothing was queued after it (`check_open`).
        if let (true, Err(e)) = (committed, &result) {
            tracing::error!(error = %e, "a write job failed after its commit: what it wrote stands");
        }
        return result;
    }
    match result {
        Ok(value) => {
            if conn.begin_pending && conn.unread.is_empty() {
                // Nothing to send: no transaction was opened.
                conn.begin_pending = false;
                return Ok(value);
            }
            // Unread writes go with the COMMIT; if one failed, PostgreSQL
            // answers the COMMIT by rolling back, and the job fails.
            let (begin, unread) = conn.take_queued();
            let client = conn.client()?;
            match run(
                &conn.runtime,
                client,
                begin,
                &unread,
                client.batch_execute("COMMIT"),
            ) {
                Ok(()) => Ok(value),
                Err(e) => {
                    let _ = conn.batch("ROLLBACK");
                    Err(ApiError::from(e))
                }
            }
        }
        Err(e) => {
            // Unread writes never go out; nor does a BEGIN never sent.
            conn.unread.clear();
            if !std::mem::take(&mut conn.begin_pending) {
                let _ = conn.batch("ROLLBACK");
            }
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch database of the test server, or `None` (skipped) when no
    /// PostgreSQL is configured outside CI.
    fn scratch() -> Option<(PgStore, postgres::Client, String)> {
        let Ok(url) = std::env::var("FERROGATE_TEST_DATABASE_URL") else {
            assert!(
                std::env::var("CI").is_err(),
                "CI runs need FERROGATE_TEST_DATABASE_URL"
            );
            return None;
        };
        let mut admin = postgres::Client::connect(&url, NoTls).expect("connect to the test server");
        let name = format!("fg_unit_{}", crate::ids::new_id());
        admin.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        let store = PgStore::open(&scratch_url(&name), 2).unwrap();
        store
            .with_conn_blocking(|c| {
                c.execute(&Sql::new("CREATE TABLE t (id TEXT PRIMARY KEY)"))?;
                Ok(())
            })
            .unwrap();
        Some((store, admin, name))
    }

    /// Drops the scratch database `name` (and whoever is still in it).
    fn drop_scratch(admin: &mut postgres::Client, name: &str) {
        admin
            .batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)"))
            .unwrap();
    }

    /// The address of the scratch database `name` on the test server.
    fn scratch_url(name: &str) -> String {
        let url = std::env::var("FERROGATE_TEST_DATABASE_URL").unwrap();
        let (base, _) = url.rsplit_once('/').unwrap();
        format!("{base}/{name}")
    }

    fn ids(store: &PgStore) -> Vec<String> {
        store
            .read(|c| {
                Ok(c.query(&Sql::new("SELECT id FROM t ORDER BY id"))?
                    .into_iter()
                    .map(|r| r[0].as_str().unwrap_or_default().to_string())
                    .collect())
            })
            .unwrap()
    }

    fn insert(id: &str) -> Sql {
        Sql::with("INSERT INTO t (id) VALUES (?)", vec![id.into()])
    }

    /// Unread writes travel with the job's next statement or its commit:
    /// later statements see them, their failure fails the whole job, and
    /// a failing job sends none of them.
    #[test]
    fn unread_writes_run_in_order_and_fail_their_job() {
        let Some((store, mut admin, name)) = scratch() else {
            return;
        };
        // Seen by the next statement of the same job; committed.
        let seen = store
            .write(|c| {
                c.execute_unread(&insert("a"))?;
                c.execute_unread(&insert("b"))?;
                Ok(c.query_int(&Sql::new("SELECT COUNT(*) FROM t"))?)
            })
            .unwrap();
        assert_eq!(seen, 2);
        // Only unread writes: they go with the COMMIT.
        store.write(|c| Ok(c.execute_unread(&insert("c"))?)).unwrap();
        assert_eq!(ids(&store), ["a", "b", "c"]);
        // One that fails at the commit takes the job's other writes along.
        let failed = store.write(|c| {
            c.execute(&insert("d"))?;
            c.execute_unread(&insert("e"))?;
            c.execute_unread(&insert("a"))?;
            Ok(())
        });
        assert!(failed.is_err());
        // One that fails before a later statement: that statement answers
        // with the unread write's error, the first failure.
        let failed = store.write(|c| {
            c.execute_unread(&insert("b"))?;
            Ok(c.query_int(&Sql::new("SELECT COUNT(*) FROM t"))?)
        });
        assert!(failed.is_err());
        // A job that fails sends none.
        let refused: ApiResult<()> = store.write(|c| {
            c.execute_unread(&insert("f"))?;
            Err(ApiError::BadRequest("refused".into()))
        });
        assert!(refused.is_err());
        assert_eq!(ids(&store), ["a", "b", "c"]);
        // The connections still work, in and out of jobs.
        store.write(|c| Ok(c.execute_unread(&insert("g"))?)).unwrap();
        store.read(|c| Ok(c.execute_unread(&insert("h"))?)).unwrap();
        assert_eq!(ids(&store), ["a", "b", "c", "g", "h"]);
        drop(store);
        drop_scratch(&mut admin, &name);
    }

    /// A job's last statement may carry its COMMIT: what the job wrote is
    /// committed when it answers; if it fails, nothing of the job is, its
    /// error is the statement's own (a unique violation stays one), and
    /// the connection is ready for the next job. A statement after it is
    /// refused, and nothing of that job is committed twice.
    #[test]
    fn a_last_statement_commits_its_job() {
        let Some((store, mut admin, name)) = scratch() else {
            return;
        };
        let mut other = postgres::Client::connect(&scratch_url(&name), NoTls).unwrap();
        let committed = |other: &mut postgres::Client| -> i64 {
            other.query_one("SELECT COUNT(*) FROM t", &[]).unwrap().get(0)
        };
        // Committed by the time the statement answers, before the job ends.
        store
            .write(|c| {
                c.execute_unread(&insert("a"))?;
                assert_eq!(c.execute_and_commit(&insert("b"))?, 1);
                assert_eq!(committed(&mut other), 2, "visible to another session already");
                Ok(())
            })
            .unwrap();
        // A failing last statement: its own error, and the job's other
        // writes (awaited and unread) are not committed.
        let failed = store.write(|c| {
            c.execute(&insert("c"))?;
            c.execute_unread(&insert("d"))?;
            Ok(c.execute_and_commit(&insert("a"))?)
        });
        assert!(failed.is_err());
        let unique = store.write(|c| {
            Ok(matches!(
                c.execute_and_commit(&insert("a")),
                Err(DbError::Unique(_))
            ))
        });
        assert!(unique.unwrap(), "a unique violation is reported as one");
        assert_eq!(ids(&store), ["a", "b"]);
        // One that fails before it is sent (a value its column cannot
        // take): no COMMIT follows it, and the job rolls back.
        let unsent = store.write(|c| {
            c.execute(&Sql::new("CREATE TABLE n (v BIGINT)"))?;
            c.execute(&insert("i"))?;
            Ok(c.execute_and_commit(&Sql::with("INSERT INTO n (v) VALUES (?)", vec!["x".into()]))?)
        });
        assert!(unsent.is_err());
        assert_eq!(ids(&store), ["a", "b"]);
        // A statement after the commit is refused; the commit stands.
        let after = store.write(|c| {
            c.execute_and_commit(&insert("e"))?;
            Ok(c.execute(&insert("f"))?)
        });
        assert!(after.is_err());
        assert_eq!(ids(&store), ["a", "b", "e"]);
        // The pooled connections go on, in jobs and out of them.
        store.write(|c| Ok(c.execute(&insert("g"))?)).unwrap();
        store.read(|c| Ok(c.execute_and_commit(&insert("h"))?)).unwrap();
        assert_eq!(ids(&store), ["a", "b", "e", "g", "h"]);
        drop(other);
        drop(store);
        drop_scratch(&mut admin, &name);
    }

    /// Every request's `auth_epoch` read shares one connection from the
    /// caller's own task, and sees each change at once; when that
    /// connection drops, the reads that meet it go on on a new one.
    #[tokio::test]
    async fn the_shared_epoch_read_sees_every_change_and_reconnects() {
        let Some((store, mut admin, name)) = tokio::task::spawn_blocking(scratch).await.unwrap() else {
            return;
        };
        let store = Arc::new(store);
        let setup = store.clone();
        tokio::task::spawn_blocking(move || {
            setup.with_conn_blocking(|c| {
                c.execute(&Sql::new(
                    "CREATE TABLE auth_epoch (id BIGINT PRIMARY KEY, n BIGINT NOT NULL)",
                ))?;
                c.execute(&Sql::new("INSERT INTO auth_epoch (id, n) VALUES (1, 7)"))?;
                Ok(())
            })
        })
        .await
        .unwrap()
        .unwrap();
        assert_eq!(store.auth_epoch().await.unwrap(), 7);
        let reads = futures_util::future::join_all((0..20).map(|_| store.auth_epoch())).await;
        assert!(reads.iter().all(|r| matches!(r, Ok(7))), "{reads:?}");
        let other_url = scratch_url(&name);
        let change = move |n: i64| {
            let url = other_url.clone();
            tokio::task::spawn_blocking(move || {
                let mut other = postgres::Client::connect(&url, NoTls).unwrap();
                other.execute("UPDATE auth_epoch SET n = $1", &[&n]).unwrap();
            })
        };
        // A change made elsewhere is the very next read's answer.
        change(8).await.unwrap();
        assert_eq!(store.auth_epoch().await.unwrap(), 8);
        change(9).await.unwrap();
        let (admin, name) = tokio::task::spawn_blocking(move || {
            // The shared connection is ended from the server's side.
            let shared =
                "FROM pg_stat_activity WHERE datname = $1 AND query LIKE 'SELECT n FROM auth_epoch%'";
            let ended = admin
                .query(&format!("SELECT pg_terminate_backend(pid) {shared}"), &[&name])
                .unwrap();
            assert_eq!(ended.len(), 1, "one shared connection");
            let gone = (0..500).any(|_| {
                let left: i64 = admin
                    .query_one(&format!("SELECT COUNT(*) {shared}"), &[&name])
                    .unwrap()
                    .get(0);
                left == 0 || {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    false
                }
            });
            assert!(gone, "the shared connection's backend ended");
            (admin, name)
        })
        .await
        .unwrap();
        // Reads that meet the dropped connection try again on a new one,
        // which one of them makes for all.
        let reads = futures_util::future::join_all((0..20).map(|_| store.auth_epoch())).await;
        assert!(reads.iter().all(|r| matches!(r, Ok(9))), "{reads:?}");
        let mut admin = admin;
        tokio::task::spawn_blocking(move || {
            drop(store);
            drop_scratch(&mut admin, &name);
        })
        .await
        .unwrap();
    }

    /// A job that PostgreSQL rolls back to break a deadlock fails as a
    /// conflict, which the API answers with 503 "retry", not as an
    /// internal error.
    #[test]
    fn a_deadlocked_job_fails_as_a_retryable_conflict() {
        let Some((store, mut admin, name)) = scratch() else {
            return;
        };
        store
            .write(|c| Ok(c.execute(&insert("a"))? + c.execute(&insert("b"))?))
            .unwrap();
        let mut other = postgres::Client::connect(&scratch_url(&name), NoTls).unwrap();
        // The job's backend detects the deadlock (after its default
        // second), not this session, which waits longer before looking.
        other
            .batch_execute("SET deadlock_timeout = '60s'; BEGIN")
            .unwrap();
        other.execute("UPDATE t SET id = id WHERE id = 'b'", &[]).unwrap();
        let (locked_tx, locked_rx) = std::sync::mpsc::channel();
        let job = std::thread::spawn(move || {
            let result = store.write(|c| {
                c.execute(&Sql::new("UPDATE t SET id = id WHERE id = 'a'"))?;
                locked_tx.send(()).unwrap();
                c.execute(&Sql::new("UPDATE t SET id = id WHERE id = 'b'"))?;
                Ok(())
            });
            drop(store);
            result
        });
        locked_rx.recv().unwrap();
        // This session now waits for 'a', which the job holds while it
        // waits for 'b', which this session holds.
        let mine = other.execute("UPDATE t SET id = id WHERE id = 'a'", &[]);
        let failed = job
            .join()
            .unwrap()
            .expect_err("one side of the deadlock is rolled back");
        assert!(mine.is_ok(), "this session waited longer and went on");
        other.batch_execute("COMMIT").unwrap();
        assert!(
            matches!(&failed, ApiError::Unavailable(m) if m.contains("concurrent")),
            "{failed:?}"
        );
        assert_eq!(failed.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE);
        drop(other);
        drop_scratch(&mut admin, &name);
    }
}
