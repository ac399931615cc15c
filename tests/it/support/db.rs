//! Direct database access to a test server's database, for checks the
//! API cannot make (what is stored at rest, rows the API cannot create).

use super::wait::wait_until;
use super::{Engine, TestApp};
use std::time::Duration;

/// A connection to a test server's database.
pub enum Db {
    Sqlite(rusqlite::Connection),
    Postgres(postgres::Client),
}

/// Opens the database of `app` (SQLite: the path of `sqlite://PATH`).
pub fn db(app: &TestApp) -> Db {
    match app.engine {
        Engine::Sqlite => {
            let path = app.database_url.strip_prefix("sqlite://").expect("sqlite:// url");
            let conn = rusqlite::Connection::open(path).expect("open sqlite database");
            conn.busy_timeout(std::time::Duration::from_secs(20))
                .expect("busy timeout");
            Db::Sqlite(conn)
        }
        Engine::Postgres => Db::Postgres(
            postgres::Client::connect(&app.database_url, postgres::NoTls).expect("connect to postgres"),
        ),
    }
}

/// PostgreSQL: waits until a backend of the test's database waits for a
/// lock, that is until the request `running` reached a row the test holds
/// in an open transaction; `failure` if the request finished first,
/// having waited for nothing.
pub fn wait_for_lock_wait<T>(app: &TestApp, running: &std::thread::JoinHandle<T>, failure: &str) {
    wait_until(
        "a request to wait for a lock the test holds",
        Duration::from_secs(10),
        || {
            let waiting = db(app).count(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
                &[],
            );
            assert!(waiting > 0 || !running.is_finished(), "{failure}");
            (waiting > 0).then_some(())
        },
    );
}

/// `?` placeholders as `$1, $2, ...`.
fn numbered(sql: &str) -> String {
    let mut out = String::new();
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push_str(&format!("${n}"));
        } else {
            out.push(c);
        }
    }
    out
}

/// Text parameters as the PostgreSQL client takes them.
fn pg_params<'a>(params: &'a [&'a str]) -> Vec<&'a (dyn postgres::types::ToSql + Sync)> {
    params
        .iter()
        .map(|s| s as &(dyn postgres::types::ToSql + Sync))
        .collect()
}

impl Db {
    /// Runs one statement with text parameters written `?`.
    pub fn exec(&mut self, sql: &str, params: &[&str]) -> u64 {
        match self {
            Db::Sqlite(c) => c
                .execute(sql, rusqlite::params_from_iter(params.iter()))
                .unwrap_or_else(|e| panic!("{sql}: {e}")) as u64,
            Db::Postgres(c) => c
                .execute(numbered(sql).as_str(), &pg_params(params))
                .unwrap_or_else(|e| panic!("{sql}: {e}")),
        }
    }

    /// The value a one-row, one-column query answers.
    fn scalar<T>(&mut self, sql: &str, params: &[&str]) -> T
    where
        T: rusqlite::types::FromSql + for<'r> postgres::types::FromSql<'r>,
    {
        match self {
            Db::Sqlite(c) => c
                .query_row(sql, rusqlite::params_from_iter(params.iter()), |r| r.get(0))
                .unwrap_or_else(|e| panic!("{sql}: {e}")),
            Db::Postgres(c) => c
                .query_one(numbered(sql).as_str(), &pg_params(params))
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
                .get::<_, T>(0),
        }
    }

    /// The text a one-row, one-column query answers.
    pub fn text(&mut self, sql: &str, params: &[&str]) -> String {
        self.scalar(sql, params)
    }

    /// The integer a one-row, one-column query answers.
    pub fn count(&mut self, sql: &str, params: &[&str]) -> i64 {
        self.scalar(sql, params)
    }

    /// Asserts that the kept row counts (migration 25) equal a count of
    /// the rows, for every counted table and every location.
    #[track_caller]
    pub fn assert_counts_kept(&mut self) {
        for table in ferrogate::engine::query::COUNTED {
            let wrong = self.count(
                &format!(
                    "SELECT COUNT(*) FROM (SELECT l.id FROM locations l \
                     WHERE (SELECT COUNT(*) FROM {table} r WHERE r.location_id = l.id) \
                     <> (SELECT COALESCE(SUM(c.n), 0) FROM row_counts c WHERE c.table_name = ? AND c.location_id = l.id)) w"
                ),
                &[*table],
            );
            assert_eq!(wrong, 0, "locations whose kept count of {table} is wrong");
        }
    }

    /// Every `table.column` of the database whose text contains `needle`.
    pub fn columns_containing(&mut self, needle: &str) -> Vec<String> {
        let mut found = Vec::new();
        match self {
            Db::Sqlite(c) => {
                let tables: Vec<String> = c
                    .prepare(
                        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
                    )
                    .unwrap()
                    .query_map([], |r| r.get(0))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                for table in tables {
                    let columns: Vec<String> = c
                        .prepare(&format!("PRAGMA table_info(\"{table}\")"))
                        .unwrap()
                        .query_map([], |r| r.get(1))
                        .unwrap()
                        .collect::<Result<_, _>>()
                        .unwrap();
                    for column in columns {
                        let n: i64 = c
                            .query_row(
                                &format!(
                                    "SELECT COUNT(*) FROM \"{table}\" WHERE instr(CAST(\"{column}\" AS TEXT), ?1) > 0"
                                ),
                                [needle],
                                |r| r.get(0),
                            )
                            .unwrap();
                        if n > 0 {
                            found.push(format!("{table}.{column}"));
                        }
                    }
                }
            }
            Db::Postgres(c) => {
                let columns: Vec<(String, String)> = c
                    .query(
                        "SELECT table_name::text, column_name::text FROM information_schema.columns \
                         WHERE table_schema = current_schema() AND data_type IN ('text', 'character varying')",
                        &[],
                    )
                    .unwrap()
                    .iter()
                    .map(|r| (r.get(0), r.get(1)))
                    .collect();
                for (table, column) in columns {
                    let n: i64 = c
                        .query_one(
                            &format!("SELECT COUNT(*) FROM \"{table}\" WHERE strpos(\"{column}\", $1) > 0"),
                            &[&needle],
                        )
                        .unwrap()
                        .get(0);
                    if n > 0 {
                        found.push(format!("{table}.{column}"));
                    }
                }
            }
        }
        found
    }
}
