//! `ferrogate bins import FILE.csv`: reads a range file, normalises every
//! prefix to an 8-digit range, and replaces the ranges of the same source
//! in one transaction (so importing a file twice leaves the same rows).
//!
//! The format (README "BIN data"): comma-separated, RFC 4180 quoting, a
//! header row naming the columns in any order:
//!
//! | column | meaning |
//! |---|---|
//! | `iin_start` | required: the prefix, 1 to 8 digits |
//! | `iin_end` | last prefix of a range (empty: the single prefix `iin_start`) |
//! | `number_length` | PAN length, 12-19 |
//! | `scheme` | visa, mastercard, amex, discover, jcb, diners, unionpay, maestro, or another network name |
//! | `brand` | the product or category name (`Visa/Dankort`, `Platinum`) |
//! | `type` | credit, debit, charge (or prepaid) |
//! | `prepaid` | y/n (also yes/no, true/false, 1/0) |
//! | `country` | ISO 3166 alpha-2 (alpha-3 and numeric are read too) |
//! | `bank_name`, `bank_url`, `bank_phone`, `bank_city` | issuer details |
//! | `regulated` | y/n: the issuer is regulated (US debit interchange cap) |
//! | `card_class` | business, consumer, corporate, purchasing, ... |
//! | `number_luhn`, `bank_logo` | accepted and ignored |
//!
//! Other columns are ignored and named in the summary.

use super::countries::{self, Country};
use super::Brand;
use crate::config::DbArgs;
use crate::db::{Conn, Sql, Value};
use crate::error::ApiResult;
use anyhow::Context;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// `ferrogate bins import`.
#[derive(clap::Args, Clone, Debug)]
pub struct ImportArgs {
    /// The CSV file to load (format: README, "BIN data"; the header of the
    /// binlist range files is read as is).
    pub file: PathBuf,

    /// Name the ranges are stored under. Importing under the same name
    /// again replaces all of them in one transaction. Default: the file
    /// name without its extension.
    #[arg(long)]
    pub source: Option<String>,

    /// Check the file and print the summary without writing anything.
    #[arg(long)]
    pub dry_run: bool,

    #[command(flatten)]
    pub db: DbArgs,
}

/// How many row problems are printed; the rest are counted.
const SHOWN_PROBLEMS: usize = 50;

/// Runs the command: problems go to stderr, the summary to stdout. An
/// error means the file was unusable (or the database unreachable) and
/// nothing was written.
pub async fn run(args: ImportArgs) -> anyhow::Result<()> {
    let file = args.file.display().to_string();
    let bytes = std::fs::read(&args.file).with_context(|| format!("reading {file}"))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = good.iter().filter(|b| **b == b'\n').count() + 1;
        anyhow::anyhow!("{file}: line {line}: the file is not UTF-8 text")
    })?;
    let parsed = parse(&text).map_err(|e| anyhow::anyhow!("{file}: {e}; nothing imported"))?;
    let source = match args.source {
        Some(s) => s,
        None => args
            .file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    if source.trim().is_empty() || source.chars().count() > 100 || source.chars().any(char::is_control) {
        anyhow::bail!("the source name must be 1 to 100 printable characters (--source NAME)");
    }
    {
        let mut err = String::new();
        for p in parsed.problems.iter().take(SHOWN_PROBLEMS) {
            let what = if p.skipped { "row skipped" } else { "warning" };
            let _ = writeln!(err, "{file}: line {}: {} ({what})", p.line, p.message);
        }
        if parsed.problems.len() > SHOWN_PROBLEMS {
            let _ = writeln!(
                err,
                "... and {} more problems",
                parsed.problems.len() - SHOWN_PROBLEMS
            );
        }
        eprint!("{err}");
    }
    let mut out = String::new();
    let _ = writeln!(out, "read {} rows from {file}", parsed.rows);
    let warnings = parsed.problems.len() - parsed.skipped();
    let _ = writeln!(
        out,
        "skipped {} bad rows; {warnings} warnings ({} repeated ranges, the later row kept)",
        parsed.skipped(),
        parsed.duplicates
    );
    if !parsed.ignored_columns.is_empty() {
        let _ = writeln!(out, "ignored columns: {}", parsed.ignored_columns.join(", "));
    }
    if args.dry_run {
        let _ = writeln!(
            out,
            "dry run: {} ranges would replace those of source \"{source}\"; nothing written",
            parsed.ranges.len()
        );
        print!("{out}");
        return Ok(());
    }
    let db = crate::db::Store::open_and_migrate(&args.db.database_url, 1).await?;
    let now = crate::clock::Clock::system().now_ts();
    let (db2, source2) = (db.clone(), source.clone());
    let stored = tokio::task::spawn_blocking(move || {
        db2.write_blocking(move |conn| store(conn, &source2, &parsed.ranges, now))
    })
    .await?;
    tokio::task::spawn_blocking(move || db.shutdown()).await?;
    let stored = stored.map_err(|e| anyhow::anyhow!("storing the ranges failed, nothing imported: {e}"))?;
    let _ = writeln!(
        out,
        "source \"{source}\": removed {} ranges, stored {} ranges",
        stored.removed, stored.written
    );
    let _ = writeln!(out, "the table holds {} ranges", stored.total);
    print!("{out}");
    Ok(())
}

/// A range ready to store.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRange {
    pub start: i64,
    pub end: i64,
    /// Digits of the prefix as the file gave it (6 for `411111`).
    pub prefix_len: i64,
    pub scheme: Option<String>,
    pub category: Option<String>,
    pub card_type: Option<String>,
    pub prepaid: Option<bool>,
    /// Alpha-2 as given; the other codes when ISO 3166 knows it.
    pub country_code: Option<String>,
    pub country: Option<&'static Country>,
    pub bank_name: Option<String>,
    pub bank_url: Option<String>,
    pub bank_phone: Option<String>,
    pub bank_city: Option<String>,
    pub pan_length: Option<i64>,
    pub regulated: Option<bool>,
    pub card_class: Option<String>,
}

/// Something wrong with one row.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// 1-based line of the file where the row starts.
    pub line: usize,
    pub message: String,
    /// The row was left out (otherwise it was kept, with the value dropped).
    pub skipped: bool,
}

/// A parsed file.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Data rows read (blank lines not counted).
    pub rows: usize,
    /// Unique ranges, in file order of their last occurrence.
    pub ranges: Vec<NewRange>,
    pub problems: Vec<Problem>,
    /// Rows whose range an earlier row already had (the later row is kept).
    pub duplicates: usize,
    pub ignored_columns: Vec<String>,
}

impl Parsed {
    pub fn skipped(&self) -> usize {
        self.problems.iter().filter(|p| p.skipped).count()
    }
}

const KNOWN: &[&str] = &[
    "iin_start",
    "iin_end",
    "number_length",
    "number_luhn",
    "scheme",
    "brand",
    "type",
    "prepaid",
    "country",
    "bank_name",
    "bank_logo",
    "bank_url",
    "bank_phone",
    "bank_city",
    "regulated",
    "card_class",
];

/// The longest text kept in a free-text column.
const MAX_TEXT: usize = 255;

/// Parses a whole file. `Err` means the file is unusable as a whole (no
/// header, no `iin_start` column, a quote never closed, no data rows).
pub fn parse(text: &str) -> Result<Parsed, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let records = records(text)?;
    let mut records = records.into_iter();
    let Some((_, header)) = records.next() else {
        return Err("the file is empty: expected a header row naming the columns".into());
    };
    let header: Vec<String> = header.iter().map(|h| h.trim().to_ascii_lowercase()).collect();
    let mut columns: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut ignored = Vec::new();
    for (i, name) in header.iter().enumerate() {
        match KNOWN.iter().find(|k| **k == name) {
            Some(known) => {
                if columns.insert(known, i).is_some() {
                    return Err(format!("line 1: the column {name} appears twice"));
                }
            }
            None => ignored.push(name.clone()),
        }
    }
    if !columns.contains_key("iin_start") {
        return Err(format!(
            "line 1: no iin_start column (the header names: {}); see README \"BIN data\" for the format",
            header.join(", ")
        ));
    }
    let mut parsed = Parsed {
        ignored_columns: ignored,
        ..Parsed::default()
    };
    let mut by_range: BTreeMap<(i64, i64), (usize, usize)> = BTreeMap::new();
    let mut kept: Vec<Option<NewRange>> = Vec::new();
    for (line, fields) in records {
        if fields.len() == 1 && fields[0].trim().is_empty() {
            continue;
        }
        parsed.rows += 1;
        if fields.len() != header.len() {
            parsed.problems.push(Problem {
                line,
                message: format!("{} fields where the header has {}", fields.len(), header.len()),
                skipped: true,
            });
            continue;
        }
        let cells = Cells {
            columns: &columns,
            fields: &fields,
        };
        match row(&cells, line, &mut parsed.problems) {
            Ok(range) => {
                let key = (range.start, range.end);
                if let Some((first_line, index)) = by_range.get(&key).copied() {
                    parsed.duplicates += 1;
                    parsed.problems.push(Problem {
                        line,
                        message: format!("the range repeats line {first_line}; this later row is kept"),
                        skipped: false,
                    });
                    kept[index] = None;
                }
                by_range.insert(key, (line, kept.len()));
                kept.push(Some(range));
            }
            Err(message) => parsed.problems.push(Problem {
                line,
                message,
                skipped: true,
            }),
        }
    }
    parsed.ranges = kept.into_iter().flatten().collect();
    if parsed.rows == 0 {
        return Err("the file has a header but no data rows".into());
    }
    if parsed.ranges.is_empty() {
        return Err(format!(
            "none of the {} rows is usable (first problem: line {}: {})",
            parsed.rows, parsed.problems[0].line, parsed.problems[0].message
        ));
    }
    Ok(parsed)
}

/// The fields of one row, by column name.
struct Cells<'a> {
    columns: &'a BTreeMap<&'static str, usize>,
    fields: &'a [String],
}

impl<'a> Cells<'a> {
    /// The trimmed field, or "" when the file has no such column.
    fn get(&self, name: &str) -> &'a str {
        self.columns
            .get(name)
            .map(|i| self.fields[*i].trim())
            .unwrap_or("")
    }
}

/// Reads one data row; `Err` skips it. Warnings go to `problems`.
fn row(cells: &Cells, line: usize, problems: &mut Vec<Problem>) -> Result<NewRange, String> {
    let get = |name: &str| cells.get(name);
    let start_text = get("iin_start");
    let end_text = get("iin_end");
    let start_digits = prefix(start_text, "iin_start")?;
    let end_digits = if end_text.is_empty() {
        start_digits
    } else {
        prefix(end_text, "iin_end")?
    };
    let start = pad(start_digits, b'0');
    let end = pad(end_digits, b'9');
    if end < start {
        return Err(format!("iin_end {end_text} comes before iin_start {start_text}"));
    }
    let pan_length = match get("number_length") {
        "" => None,
        t => match t.parse::<i64>() {
            Ok(n) if (12..=19).contains(&n) => Some(n),
            _ => return Err(format!("number_length {t:?} is not a PAN length (12 to 19)")),
        },
    };
    let mut prepaid = flag(get("prepaid"), "prepaid")?;
    let card_type = match get("type").to_ascii_lowercase().as_str() {
        "" => None,
        t @ ("credit" | "debit" | "charge") => Some(t.to_string()),
        "prepaid" => {
            prepaid = Some(true);
            None
        }
        other => {
            return Err(format!(
                "type {other:?} is not one of credit, debit, charge, prepaid"
            ))
        }
    };
    let scheme = match get("scheme") {
        "" => None,
        s => Some(match Brand::from_scheme(s) {
            Some(b) => b.code().to_string(),
            None => text(s, "scheme")?.to_ascii_lowercase(),
        }),
    };
    let (country_code, country) = match get("country") {
        "" => (None, None),
        code => match countries::find(code) {
            Some(c) => (Some(c.alpha2.to_string()), Some(c)),
            None if code.len() == 2 && code.bytes().all(|b| b.is_ascii_alphabetic()) => {
                problems.push(Problem {
                    line,
                    message: format!(
                        "country {code:?} is not in ISO 3166-1: kept as given, without alpha-3, number or name"
                    ),
                    skipped: false,
                });
                (Some(code.to_ascii_uppercase()), None)
            }
            None => return Err(format!("country {code:?} is not an ISO 3166-1 code")),
        },
    };
    let opt = |name: &str| -> Result<Option<String>, String> {
        match get(name) {
            "" => Ok(None),
            t => text(t, name).map(Some),
        }
    };
    Ok(NewRange {
        start,
        end,
        prefix_len: start_digits.len() as i64,
        scheme,
        category: opt("brand")?,
        card_type,
        prepaid,
        country_code,
        country,
        bank_name: opt("bank_name")?,
        bank_url: opt("bank_url")?,
        bank_phone: opt("bank_phone")?,
        bank_city: opt("bank_city")?,
        pan_length,
        regulated: flag(get("regulated"), "regulated")?,
        card_class: opt("card_class")?.map(|c| c.to_ascii_lowercase()),
    })
}

fn prefix<'a>(t: &'a str, name: &str) -> Result<&'a str, String> {
    if t.is_empty() {
        return Err(format!("{name} is empty"));
    }
    if !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{name} {t:?} is not digits"));
    }
    if t.len() > 8 {
        return Err(format!("{name} {t} is longer than 8 digits"));
    }
    Ok(t)
}

/// The 8-digit form of a prefix: `411111` starts at 41111100 (fill `0`)
/// and ends at 41111199 (fill `9`).
pub fn pad(digits: &str, fill: u8) -> i64 {
    let mut s = digits.as_bytes().to_vec();
    s.resize(8, fill);
    std::str::from_utf8(&s)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn flag(t: &str, name: &str) -> Result<Option<bool>, String> {
    match t.to_ascii_lowercase().as_str() {
        "" => Ok(None),
        "y" | "yes" | "true" | "1" => Ok(Some(true)),
        "n" | "no" | "false" | "0" => Ok(Some(false)),
        other => Err(format!("{name} {other:?} is not y or n")),
    }
}

fn text(t: &str, name: &str) -> Result<String, String> {
    if t.chars().count() > MAX_TEXT {
        return Err(format!("{name} is longer than {MAX_TEXT} characters"));
    }
    if t.chars().any(|c| c.is_control()) {
        return Err(format!("{name} holds control characters"));
    }
    Ok(t.to_string())
}

/// Splits CSV text into records (RFC 4180: `"` quotes, `""` inside quotes,
/// commas and line breaks inside quotes; CRLF or LF). Each record comes
/// with the line it starts on.
fn records(text: &str) -> Result<Vec<(usize, Vec<String>)>, String> {
    let mut out = Vec::new();
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut line = 1;
    let mut start_line = 1;
    let mut quoted = false;
    let mut quote_line = 0;
    let mut chars = text.chars().peekable();
    let mut any = false;
    while let Some(c) = chars.next() {
        any = true;
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                '\n' => {
                    line += 1;
                    field.push(c);
                }
                _ => field.push(c),
            }
            continue;
        }
        match c {
            '"' if field.trim().is_empty() => {
                field.clear();
                quoted = true;
                quote_line = line;
            }
            ',' => fields.push(std::mem::take(&mut field)),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' | '\r' => {
                fields.push(std::mem::take(&mut field));
                out.push((start_line, std::mem::take(&mut fields)));
                line += 1;
                start_line = line;
                any = false;
            }
            _ => field.push(c),
        }
    }
    if quoted {
        return Err(format!("line {quote_line}: a quoted field is never closed"));
    }
    if any {
        fields.push(field);
        out.push((start_line, fields));
    }
    Ok(out)
}

/// What a store did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Ranges of the same source deleted first.
    pub removed: u64,
    /// Ranges written.
    pub written: usize,
    /// Ranges in the table afterwards (all sources).
    pub total: i64,
}

/// Rows per INSERT statement.
const CHUNK: usize = 100;

const COLUMNS: &str =
    "range_start, range_end, span_digits, prefix_len, scheme, category, card_type, prepaid, \
     country_a2, country_a3, country_numeric, country_name, bank_name, bank_url, bank_phone, bank_city, \
     pan_length, regulated, card_class, source, created_ts";

/// Replaces every range of `source` with `ranges`, in the caller's
/// transaction. A range another source also has is taken over (the newer
/// import wins).
pub fn store(conn: &mut dyn Conn, source: &str, ranges: &[NewRange], now: i64) -> ApiResult<Stored> {
    let removed = conn.execute(&Sql::with(
        "DELETE FROM bin_ranges WHERE source = ?",
        vec![source.into()],
    ))?;
    let n_cols = COLUMNS.split(',').count();
    for chunk in ranges.chunks(CHUNK) {
        let mut sql = Sql::new(&format!("INSERT INTO bin_ranges ({COLUMNS}) VALUES "));
        for (i, r) in chunk.iter().enumerate() {
            if i > 0 {
                sql.push(", ");
            }
            let values: Vec<Value> = vec![
                r.start.into(),
                r.end.into(),
                span_digits(r.start, r.end).into(),
                r.prefix_len.into(),
                r.scheme.clone().into(),
                r.category.clone().into(),
                r.card_type.clone().into(),
                r.prepaid.into(),
                r.country_code.clone().into(),
                r.country.map(|c| c.alpha3).into(),
                r.country.map(|c| c.numeric).into(),
                r.country.map(|c| c.name).into(),
                r.bank_name.clone().into(),
                r.bank_url.clone().into(),
                r.bank_phone.clone().into(),
                r.bank_city.clone().into(),
                r.pan_length.into(),
                r.regulated.into(),
                r.card_class.clone().into(),
                source.into(),
                now.into(),
            ];
            debug_assert_eq!(values.len(), n_cols);
            sql.push("(");
            for (j, v) in values.into_iter().enumerate() {
                if j > 0 {
                    sql.push(", ");
                }
                sql.bind(v);
            }
            sql.push(")");
        }
        sql.push(" ON CONFLICT (range_start, range_end) DO UPDATE SET ");
        let updates: Vec<String> = COLUMNS
            .split(',')
            .map(str::trim)
            .filter(|c| !matches!(*c, "range_start" | "range_end"))
            .map(|c| format!("{c} = excluded.{c}"))
            .collect();
        sql.push(&updates.join(", "));
        conn.execute(&sql)?;
    }
    let total = conn.query_int(&Sql::new("SELECT COUNT(*) FROM bin_ranges"))?;
    Ok(Stored {
        removed,
        written: ranges.len(),
        total,
    })
}

/// The width class of a range: the least `c` with `end - start + 1 <= 10^c`.
/// Lookups search one class at a time within a bounded window.
pub fn span_digits(start: i64, end: i64) -> i64 {
    let width = end - start + 1;
    let mut c = 0;
    let mut limit = 1i64;
    while limit < width {
        limit *= 10;
        c += 1;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "iin_start,iin_end,number_length,number_luhn,scheme,brand,type,prepaid,country,bank_name,bank_logo,bank_url,bank_phone,bank_city";

    fn file(rows: &[&str]) -> String {
        let mut s = String::from(HEADER);
        for r in rows {
            s.push('\n');
            s.push_str(r);
        }
        s.push('\n');
        s
    }

    #[test]
    fn normalises_prefixes_to_8_digit_ranges() {
        let p = parse(&file(&[
            "411111,,,,visa,,credit,,US,BANK A,,www.a.com,123,Town",
            "45710040,45710045,16,,visa,Visa/Dankort,debit,,DK,Nordea,,www.nordea.dk,+45,Vordingborg",
            "371241,371242,,,amex,,credit,,US,AMERICAN EXPRESS,,,,",
            "4,,,,visa,,,,,,,,,",
            "5,5,,,MasterCard,,debit,y,usa,,,,,",
        ]))
        .unwrap();
        assert_eq!(p.rows, 5);
        assert!(p.problems.is_empty(), "{:?}", p.problems);
        let r: Vec<(i64, i64, i64)> = p.ranges.iter().map(|r| (r.start, r.end, r.prefix_len)).collect();
        assert_eq!(
            r,
            vec![
                (41111100, 41111199, 6),
                (45710040, 45710045, 8),
                (37124100, 37124299, 6),
                (40000000, 49999999, 1),
                (50000000, 59999999, 1),
            ]
        );
        let a = &p.ranges[0];
        assert_eq!(a.scheme.as_deref(), Some("visa"));
        assert_eq!(a.card_type.as_deref(), Some("credit"));
        assert_eq!(a.country.unwrap().alpha3, "USA");
        assert_eq!(a.bank_city.as_deref(), Some("Town"));
        assert_eq!(p.ranges[1].pan_length, Some(16));
        assert_eq!(p.ranges[1].category.as_deref(), Some("Visa/Dankort"));
        let mc = &p.ranges[4];
        assert_eq!(mc.scheme.as_deref(), Some("mastercard"));
        assert_eq!(mc.prepaid, Some(true));
        assert_eq!(
            mc.country_code.as_deref(),
            Some("US"),
            "alpha-3 read as its alpha-2"
        );
    }

    #[test]
    fn bad_rows_are_reported_with_their_lines() {
        let p = parse(&file(&[
            "411111,,,,visa,,credit,,US,OK,,,,",
            "41a111,,,,visa,,credit,,US,X,,,,",
            "411112,411110,,,visa,,credit,,US,X,,,,",
            "411113,,99,,visa,,credit,,US,X,,,,",
            "411114,,,,visa,,gold,,US,X,,,,",
            "411115,,,,visa,,credit,maybe,US,X,,,,",
            "411116,,,,visa,,credit,,ZZZ,X,,,,",
            "411117,,,,visa,,credit,,US",
            "411118,,,,visa,,credit,,XK,Kosovo bank,,,,",
            "123456789,,,,visa,,credit,,US,X,,,,",
            "",
            "411111,,,,visa,,debit,,US,LATER,,,,",
        ]))
        .unwrap();
        let lines: Vec<(usize, bool)> = p.problems.iter().map(|p| (p.line, p.skipped)).collect();
        assert_eq!(
            lines,
            vec![
                (3, true),
                (4, true),
                (5, true),
                (6, true),
                (7, true),
                (8, true),
                (9, true),
                (10, false),
                (11, true),
                (13, false),
            ],
            "{:#?}",
            p.problems
        );
        assert_eq!(p.rows, 11, "the blank line is not a row");
        assert_eq!(p.skipped(), 8);
        assert_eq!(p.duplicates, 1);
        // The repeated range keeps its later row only.
        assert_eq!(p.ranges.len(), 2);
        assert_eq!(p.ranges[1].bank_name.as_deref(), Some("LATER"));
        assert_eq!(p.ranges[0].country_code.as_deref(), Some("XK"));
        assert!(p.ranges[0].country.is_none());
        assert!(p.problems[0].message.contains("iin_start"));
        assert!(p.problems[6].message.contains("fields"));
    }

    #[test]
    fn unusable_files_fail_as_a_whole() {
        assert!(parse("").unwrap_err().contains("empty"));
        assert!(parse("bin,bank\n411111,x\n").unwrap_err().contains("iin_start"));
        assert!(parse(HEADER).unwrap_err().contains("no data rows"));
        assert!(parse(&file(&["x,,,,,,,,,,,,,"]))
            .unwrap_err()
            .contains("none of the 1 rows"));
        assert!(parse(&file(&["411111,,,,visa,,credit,,US,\"never closed,,,,"]))
            .unwrap_err()
            .contains("line 2: a quoted field is never closed"));
        assert!(parse("iin_start,iin_start\n1,1\n").unwrap_err().contains("twice"));
    }

    #[test]
    fn csv_quoting_crlf_bom_and_column_order() {
        let text = "\u{feff}Bank_Name,IIN_START,extra\r\n\"BANK OF AMERICA, N.A. (USA)\",411111,z\r\n\"Say \"\"hi\"\"\nthere\",422222,\r\n523456,,\r\n";
        let p = parse(text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.ignored_columns, vec!["extra".to_string()]);
        assert_eq!(p.ranges.len(), 1, "{:?}", p.problems);
        assert_eq!(
            p.ranges[0].bank_name.as_deref(),
            Some("BANK OF AMERICA, N.A. (USA)")
        );
        assert_eq!(p.problems.len(), 2, "{:?}", p.problems);
        // The quoted line break is refused as a control character, on the
        // line where its row starts; the next row's line is still right.
        assert_eq!(p.problems[0].line, 3);
        assert_eq!(p.problems[1].line, 5);
        assert!(p.problems[1].message.contains("iin_start"));
        // No trailing newline; quoted empty fields.
        let p = parse("iin_start,bank_name\n411111,\"\"").unwrap();
        assert_eq!(p.ranges[0].bank_name, None);
    }

    #[test]
    fn span_classes() {
        assert_eq!(span_digits(41111100, 41111100), 0);
        assert_eq!(span_digits(41111100, 41111109), 1);
        assert_eq!(span_digits(41111100, 41111110), 2);
        assert_eq!(span_digits(41111100, 41111199), 2);
        assert_eq!(span_digits(37124100, 37124299), 3);
        assert_eq!(span_digits(40000000, 49999999), 7);
        assert_eq!(span_digits(0, 99999999), 8);
        assert_eq!(pad("411111", b'0'), 41111100);
        assert_eq!(pad("411111", b'9'), 41111199);
        assert_eq!(pad("45710040", b'9'), 45710040);
    }
}
