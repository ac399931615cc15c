//! Lists as files: `_format=csv` or `_format=tsv` on any list answers
//! every record the filters select (no page), in the list's sort, one
//! line each with the columns of the record as the API renders it. A
//! resource's rules may write a record as several lines (a voided
//! transaction: the original, then the void).

use super::record::Record;
use super::resource::Resource;
use super::{render, Cx};
use serde_json::Value as Json;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Csv,
    Tsv,
}

impl Format {
    pub fn parse(text: &str) -> Option<Format> {
        match text {
            "csv" => Some(Format::Csv),
            "tsv" => Some(Format::Tsv),
            _ => None,
        }
    }
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Csv => "text/csv; charset=utf-8",
            Format::Tsv => "text/tab-separated-values; charset=utf-8",
        }
    }
    pub fn extension(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Tsv => "tsv",
        }
    }
    fn separator(self) -> char {
        match self {
            Format::Csv => ',',
            Format::Tsv => '\t',
        }
    }
}

/// The columns of a resource's export: its rendered fields, in declaration
/// order.
pub fn columns(res: &Resource) -> Vec<&'static str> {
    res.fields
        .iter()
        .filter(|f| f.stored && !f.hidden)
        .map(|f| f.name)
        .collect()
}

/// The header line.
pub fn header(res: &Resource, format: Format) -> String {
    line(
        format,
        columns(res).iter().map(|c| std::borrow::Cow::Borrowed(*c)),
    )
}

/// The lines of one record.
pub fn lines(cx: &Cx, record: &Record, columns: &[&'static str], format: Format) -> String {
    let rendered = render(cx, record);
    let mut out = String::new();
    for row in record.res.rules.export_rows(record, rendered) {
        out.push_str(&line(format, columns.iter().map(|c| cell(row.get(*c)))));
    }
    out
}

fn cell(value: Option<&Json>) -> std::borrow::Cow<'static, str> {
    match value {
        None | Some(Json::Null) => "".into(),
        Some(Json::String(s)) => s.clone().into(),
        Some(Json::Bool(b)) => if *b { "1" } else { "0" }.into(),
        Some(other) => other.to_string().into(),
    }
}

/// One line: CSV fields quoted when they hold a separator, a quote or a
/// line break (RFC 4180); TSV fields with tabs and line breaks turned to
/// spaces. A text that a spreadsheet would run as a formula (`=`, `+`,
/// `@`) is prefixed with `'`.
fn line<'a>(format: Format, cells: impl Iterator<Item = std::borrow::Cow<'a, str>>) -> String {
    let sep = format.separator();
    let mut out = String::new();
    for (i, cell) in cells.enumerate() {
        if i > 0 {
            out.push(sep);
        }
        let guarded = if cell.starts_with(['=', '+', '@']) {
            format!("'{cell}").into()
        } else {
            cell
        };
        match format {
            Format::Csv if guarded.contains([',', '"', '\n', '\r']) => {
                out.push('"');
                out.push_str(&guarded.replace('"', "\"\""));
                out.push('"');
            }
            Format::Csv => out.push_str(&guarded),
            Format::Tsv => out.extend(guarded.chars().map(|c| match c {
                '\t' | '\n' | '\r' => ' ',
                c => c,
            })),
        }
    }
    out.push_str("\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_and_tsv_flattens() {
        let cells = || {
            ["plain", "a,b", "say \"hi\"", "two\nlines", "=SUM(A1)"]
                .into_iter()
                .map(std::borrow::Cow::Borrowed)
        };
        assert_eq!(
            line(Format::Csv, cells()),
            "plain,\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",'=SUM(A1)\r\n"
        );
        assert_eq!(
            line(Format::Tsv, cells()),
            "plain\ta,b\tsay \"hi\"\ttwo lines\t'=SUM(A1)\r\n"
        );
        assert_eq!(cell(Some(&Json::Bool(true))), "1");
        assert_eq!(cell(Some(&serde_json::json!([{"id": "a"}]))), r#"[{"id":"a"}]"#);
    }
}
