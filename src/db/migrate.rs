//! Schema migrations: one ordered list of SQL files serving both engines,
//! applied in a transaction each and recorded in `schema_migrations`.

use super::{Conn, Dialect, Sql, Value};

/// A migration: version, name, SQL for both engines, SQL for PostgreSQL
/// only (what SQLite already does by itself, or PostgreSQL's own means),
/// and SQL for SQLite only.
pub type Migration = (i64, &'static str, &'static str, &'static str, &'static str);

pub const MIGRATIONS: &[Migration] = &[
    (
        1,
        "foundation",
        include_str!("../../migrations/0001_foundation.sql"),
        "",
        "",
    ),
    (
        2,
        "product_transaction_reads",
        include_str!("../../migrations/0002_product_transaction_reads.sql"),
        "",
        "",
    ),
    (
        3,
        "byte_order_paths",
        "",
        include_str!("../../migrations/0003_byte_order_paths.postgres.sql"),
        "",
    ),
    (4, "bins", include_str!("../../migrations/0004_bins.sql"), "", ""),
    (
        5,
        "account_vaults",
        include_str!("../../migrations/0005_account_vaults.sql"),
        "",
        "",
    ),
    (
        6,
        "data_keys",
        include_str!("../../migrations/0006_data_keys.sql"),
        "",
        "",
    ),
    (
        7,
        "transactions",
        include_str!("../../migrations/0007_transactions.sql"),
        "",
        "",
    ),
    (
        8,
        "postbacks",
        include_str!("../../migrations/0008_postbacks.sql"),
        include_str!("../../migrations/0008_postbacks.postgres.sql"),
        "",
    ),
    (
        9,
        "test_clocks",
        include_str!("../../migrations/0009_test_clocks.sql"),
        "",
        "",
    ),
    (
        10,
        "recurrings_and_mail",
        include_str!("../../migrations/0010_recurrings_and_mail.sql"),
        "",
        "",
    ),
    (
        11,
        "boarding",
        include_str!("../../migrations/0011_boarding.sql"),
        "",
        "",
    ),
    (12, "tags", include_str!("../../migrations/0012_tags.sql"), "", ""),
    (
        13,
        "passwords_and_sessions",
        include_str!("../../migrations/0013_passwords_and_sessions.sql"),
        "",
        "",
    ),
    (
        14,
        "transaction_sample_keys",
        include_str!("../../migrations/0014_transaction_sample_keys.sql"),
        "",
        "",
    ),
    (
        15,
        "hosted_forms",
        include_str!("../../migrations/0015_hosted_forms.sql"),
        "",
        "",
    ),
    (
        16,
        "emulator_numbers",
        include_str!("../../migrations/0016_emulator_numbers.sql"),
        "",
        "",
    ),
    (
        17,
        "quick_invoices",
        include_str!("../../migrations/0017_quick_invoices.sql"),
        "",
        "",
    ),
    (
        18,
        "terminals",
        include_str!("../../migrations/0018_terminals.sql"),
        "",
        "",
    ),
    (
        19,
        "emulator_credentials",
        include_str!("../../migrations/0019_emulator_credentials.sql"),
        "",
        "",
    ),
    (
        20,
        "user_profile",
        include_str!("../../migrations/0020_user_profile.sql"),
        "",
        "",
    ),
    (
        21,
        "terminal_links",
        include_str!("../../migrations/0021_terminal_links.sql"),
        "",
        "",
    ),
    (
        22,
        "search",
        "",
        include_str!("../../migrations/0022_search.postgres.sql"),
        include_str!("../../migrations/0022_search.sqlite.sql"),
    ),
    (
        23,
        "auth_epoch",
        "",
        include_str!("../../migrations/0023_auth_epoch.postgres.sql"),
        include_str!("../../migrations/0023_auth_epoch.sqlite.sql"),
    ),
    (
        24,
        "search_queue",
        "",
        "",
        include_str!("../../migrations/0024_search_queue.sqlite.sql"),
    ),
    (
        25,
        "row_counts",
        "",
        include_str!("../../migrations/0025_row_counts.postgres.sql"),
        include_str!("../../migrations/0025_row_counts.sqlite.sql"),
    ),
    (
        26,
        "config_epoch",
        "",
        include_str!("../../migrations/0026_config_epoch.postgres.sql"),
        include_str!("../../migrations/0026_config_epoch.sqlite.sql"),
    ),
    (
        27,
        "batch_tallies",
        include_str!("../../migrations/0027_batch_tallies.sql"),
        include_str!("../../migrations/0027_batch_tallies.postgres.sql"),
        include_str!("../../migrations/0027_batch_tallies.sqlite.sql"),
    ),
    (
        28,
        "contact_receipts",
        include_str!("../../migrations/0028_contact_receipts.sql"),
        "",
        "",
    ),
    (
        29,
        "duplicate_guards",
        include_str!("../../migrations/0029_duplicate_guards.sql"),
        "",
        "",
    ),
    (
        30,
        "quick_invoice_statuses",
        include_str!("../../migrations/0030_quick_invoice_statuses.sql"),
        "",
        "",
    ),
    (
        31,
        "emulator_transactions",
        include_str!("../../migrations/0031_emulator_transactions.sql"),
        "",
        "",
    ),
    (
        32,
        "location_flags",
        include_str!("../../migrations/0032_location_flags.sql"),
        "",
        "",
    ),
    (
        33,
        "sign_in_failures",
        include_str!("../../migrations/0033_sign_in_failures.sql"),
        "",
        "",
    ),
    (
        34,
        "emulator_subscription_keys",
        include_str!("../../migrations/0034_emulator_subscription_keys.sql"),
        "",
        "",
    ),
    (
        35,
        "device_term_claims",
        include_str!("../../migrations/0035_device_term_claims.sql"),
        "",
        "",
    ),
    (
        36,
        "recurrings_by_contact",
        include_str!("../../migrations/0036_recurrings_by_contact.sql"),
        "",
        "",
    ),
    (
        37,
        "emulator_bill_to_names",
        include_str!("../../migrations/0037_emulator_bill_to_names.sql"),
        "",
        "",
    ),
    (
        38,
        "unique_api_ids_and_vanity_urls",
        "",
        include_str!("../../migrations/0038_unique_api_ids_and_vanity_urls.postgres.sql"),
        include_str!("../../migrations/0038_unique_api_ids_and_vanity_urls.sqlite.sql"),
    ),
    (
        39,
        "sign_ins_keep_the_epoch",
        "",
        include_str!("../../migrations/0039_sign_ins_keep_the_epoch.postgres.sql"),
        include_str!("../../migrations/0039_sign_ins_keep_the_epoch.sqlite.sql"),
    ),
];

/// Applies every migration not yet recorded. Returns how many ran.
pub fn apply(conn: &mut dyn Conn) -> anyhow::Result<usize> {
    let begin = match conn.dialect() {
        Dialect::Sqlite => "BEGIN IMMEDIATE",
        Dialect::Postgres => "BEGIN",
    };
    run(conn, begin)?;
    let result = apply_locked(conn);
    match result {
        Ok(n) => {
            run(conn, "COMMIT")?;
            Ok(n)
        }
        Err(e) => {
            let _ = run(conn, "ROLLBACK");
            Err(e)
        }
    }
}

fn apply_locked(conn: &mut dyn Conn) -> anyhow::Result<usize> {
    if conn.dialect() == Dialect::Postgres {
        // Serialises nodes that start at the same time.
        conn.query(&Sql::new("SELECT pg_advisory_xact_lock(7031987)"))?;
    }
    run(
        conn,
        "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_ts BIGINT NOT NULL)",
    )?;
    let applied: Vec<i64> = conn
        .query(&Sql::new("SELECT version FROM schema_migrations"))?
        .into_iter()
        .filter_map(|r| r.first().and_then(Value::as_int))
        .collect();
    refuse_newer_schema(&applied)?;
    let mut count = 0;
    for (version, name, common, postgres_only, sqlite_only) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        let mut all = statements(common);
        all.extend(statements(match conn.dialect() {
            Dialect::Postgres => postgres_only,
            Dialect::Sqlite => sqlite_only,
        }));
        for statement in all {
            run(conn, &statement).map_err(|e| anyhow::anyhow!("migration {version} ({name}): {e}"))?;
        }
        conn.execute(&Sql::with(
            "INSERT INTO schema_migrations (version, name, applied_ts) VALUES (?, ?, ?)",
            vec![
                Value::Int(*version),
                Value::from(*name),
                Value::Int(crate::clock::Clock::system().now_ts()),
            ],
        ))?;
        count += 1;
    }
    Ok(count)
}

/// A build must not serve a schema that a newer build moved on: its
/// queries would miss what the newer migrations changed (migration 27's
/// batch stripes, for one). Upgrade every node before any node migrates
/// ahead of it; a node started on an older build stops here, saying so.
fn refuse_newer_schema(applied: &[i64]) -> anyhow::Result<()> {
    let known = MIGRATIONS.last().map(|m| m.0).unwrap_or(0);
    match applied.iter().max() {
        Some(&newest) if newest > known => Err(anyhow::anyhow!(
            "the database schema is at migration {newest}, newer than this build knows \
             (it ends at {known}): run the newer build on this node"
        )),
        _ => Ok(()),
    }
}

fn run(conn: &mut dyn Conn, text: &str) -> anyhow::Result<()> {
    conn.execute(&Sql::new(text))?;
    Ok(())
}

/// Splits a file into statements at `;` line ends, dropping comments.
fn statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.split("--").next().unwrap_or("").trim_end();
        if line.trim().is_empty() {
            continue;
        }
        current.push_str(line);
        current.push('\n');
        if line.ends_with(';') {
            let stmt = current.trim().trim_end_matches(';').to_string();
            out.push(stmt);
            current.clear();
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_schema_ahead_of_the_build_is_refused() {
        use super::{refuse_newer_schema, MIGRATIONS};
        let known = MIGRATIONS.last().unwrap().0;
        assert!(refuse_newer_schema(&[]).is_ok());
        assert!(refuse_newer_schema(&[1, known]).is_ok());
        let err = refuse_newer_schema(&[1, known, known + 1])
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("migration {}", known + 1)), "{err}");
        assert!(err.contains("newer build"), "{err}");
    }

    #[test]
    fn splits_statements_and_drops_comments() {
        let s = super::statements("-- c\nCREATE TABLE a (x TEXT); -- tail\n\nINSERT INTO a VALUES ('1');\n");
        assert_eq!(s, vec!["CREATE TABLE a (x TEXT)", "INSERT INTO a VALUES ('1')"]);
    }
}
