//! Lists as CSV and TSV files (`_format`): every selected record in the
//! list's order, voids and ACH returns as the reference exports them, and
//! exports larger than one streamed chunk.

use crate::engine_tests;
use crate::support::{Tenant, TestApp};
use serde_json::{json, Value};

engine_tests!(
    transactions_export_with_voids_and_returns,
    exports_stream_every_record,
    stalled_exports_leave_the_database_to_payments
);

fn id(v: &Value) -> String {
    v["transaction"]["id"].as_str().unwrap().to_string()
}

fn sale(t: &Tenant, amount: &str) -> Value {
    t.post(
        "/v2/transactions",
        json!({ "transaction": { "action": "sale", "payment_method": "cc",
            "account_number": "4111111111111111", "exp_date": "1239", "transaction_amount": amount,
            "description": "Tea, \"green\"" } }),
    )
    .expect(201)
    .body
}

/// Splits a CSV body into rows of cells (quoted cells may hold commas and
/// doubled quotes; no cell here holds a line break).
fn csv(text: &str) -> Vec<Vec<String>> {
    text.split("\r\n")
        .filter(|l| !l.is_empty())
        .map(|line| {
            let mut cells = Vec::new();
            let mut cell = String::new();
            let mut quoted = false;
            let mut chars = line.chars().peekable();
            while let Some(c) = chars.next() {
                match (c, quoted) {
                    ('"', true) if chars.peek() == Some(&'"') => {
                        cell.push('"');
                        chars.next();
                    }
                    ('"', _) => quoted = !quoted,
                    (',', false) => cells.push(std::mem::take(&mut cell)),
                    (c, _) => cell.push(c),
                }
            }
            cells.push(cell);
            cells
        })
        .collect()
}

fn transactions_export_with_voids_and_returns(app: &TestApp) {
    let t = app.bootstrap();
    let kept = id(&sale(&t, "12.00"));
    let voided = id(&sale(&t, "13.00"));
    t.put(
        &format!("/v2/transactions/{voided}"),
        json!({ "transaction": { "action": "void" } }),
    )
    .expect(200);
    let debit = id(&t
        .post(
            "/v2/transactions",
            json!({ "transaction": { "action": "debit", "payment_method": "ach", "transaction_amount": "10.22",
                "product_transaction_id": t.cred("ach_product_transaction_id"), "ach_sec_code": "WEB",
                "routing": "072000326", "account_number": "123456789012", "account_type": "checking",
                "account_holder_name": "Pat Doe" } }),
        )
        .expect(201)
        .body);
    t.put(
        &format!("/v2/developer/transactions/{debit}"),
        json!({ "transaction": { "status_id": 331 } }),
    )
    .expect(200);

    let r = t.get("/v2/transactions?_format=csv&sort=created_ts").expect(200);
    assert!(
        r.header("content-type").unwrap().starts_with("text/csv"),
        "{:?}",
        r.headers
    );
    assert!(r
        .header("content-disposition")
        .unwrap()
        .contains("transactions.csv"));
    let rows = csv(&r.text);
    let header = &rows[0];
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let (c_id, c_status, c_amount, c_desc) = (
        col("id"),
        col("status_id"),
        col("transaction_amount"),
        col("description"),
    );
    let lines: Vec<(String, String, String)> = rows[1..]
        .iter()
        .map(|r| (r[c_id].clone(), r[c_status].clone(), r[c_amount].clone()))
        .collect();
    assert_eq!(
        lines,
        vec![
            (kept.clone(), "101".into(), "12.00".into()),
            (voided.clone(), "101".into(), "13.00".into()),
            (voided.clone(), "201".into(), "0.00".into()),
            (debit.clone(), "131".into(), "10.22".into()),
            (format!("{debit}cb"), "331".into(), "10.22".into()),
        ],
        "{}",
        r.text
    );
    assert_eq!(rows[1][c_desc], "Tea, \"green\"", "quoted and unquoted intact");
    assert!(
        rows.iter().all(|r| r.len() == header.len()),
        "every line has every column"
    );
    assert!(!r.text.contains("4111111111111111"), "no card number");

    // Filters and TSV.
    let r = t.get("/v2/transactions?_format=tsv&status_id=201").expect(200);
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("text/tab-separated-values"));
    let lines: Vec<&str> = r.text.split("\r\n").filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 3, "header, original, void: {}", r.text);
    assert!(lines[0].split('\t').any(|h| h == "status_id"));
    assert!(
        lines[1].contains("Tea, \"green\""),
        "TSV needs no quoting: {}",
        lines[1]
    );

    // Refusals stay JSON.
    let r = t.get("/v2/transactions?_format=xml");
    assert_eq!(r.status, 422, "{}", r.text);
    assert!(r.body["errors"]["_format"].is_array(), "{}", r.text);
    let r = t.get("/v2/transactions?_format=csv&bogus=1");
    assert_eq!(r.status, 422, "{}", r.text);
    // Another tenant's export holds none of these.
    let other = app.bootstrap();
    let theirs = other.get("/v2/transactions?_format=csv").expect(200);
    assert_eq!(csv(&theirs.text).len(), 1, "only the header: {}", theirs.text);
}

/// An export larger than one streamed chunk arrives whole, every record
/// once, in the list's sort.
fn exports_stream_every_record(app: &TestApp) {
    let t = app.bootstrap();
    let padding = "x".repeat(120);
    for i in 0..600 {
        t.contact(json!({ "last_name": format!("Doe{i:04}"), "contact_c1": padding }));
    }
    let r = t.get("/v2/contacts?_format=csv&sort=last_name").expect(200);
    assert!(
        r.text.len() > 64 * 1024,
        "more than one chunk: {} bytes",
        r.text.len()
    );
    let rows = csv(&r.text);
    let c = rows[0].iter().position(|h| h == "last_name").unwrap();
    let names: Vec<&str> = rows[1..].iter().map(|r| r[c].as_str()).collect();
    let expected: Vec<String> = (0..600).map(|i| format!("Doe{i:04}")).collect();
    assert_eq!(names, expected);
    // The page parameters of a list do not cut an export.
    let r = t.get("/v2/contacts?_format=csv&page_size=5").expect(200);
    assert_eq!(csv(&r.text).len(), 601);
}

/// Sends `GET path` as `t` on a connection of its own with a small
/// receive buffer, asking the server to close it after the answer; the
/// caller reads what it wants of the answer, or nothing.
fn unread_request(app: &TestApp, t: &Tenant, path: &str) -> std::net::TcpStream {
    use std::io::Write;
    let addr = app.base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    receive_buffer(&stream, 64 * 1024);
    let mut head = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
    for k in ["developer_id", "user_id", "user_api_key"] {
        head.push_str(&format!("{}: {}\r\n", k.replace('_', "-"), t.cred(k)));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream
}

/// Sets the socket's receive buffer (SO_RCVBUF): a small one makes a
/// client that does not read stall the server's sending soon.
fn receive_buffer(stream: &std::net::TcpStream, bytes: libc::c_int) {
    use std::os::fd::AsRawFd;
    let set = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &bytes as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(set, 0, "SO_RCVBUF");
}

/// Reads an answer's head (status line and headers) and no more than a
/// little of its body.
fn head_of(stream: &mut std::net::TcpStream) -> String {
    use std::io::Read;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).expect("the answer's head");
        assert!(n > 0, "closed before the head: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).to_string()
}

/// Reads everything until the server closes the connection.
fn rest_of(stream: &mut std::net::TcpStream) -> Vec<u8> {
    use std::io::Read;
    let mut got = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return got,
            Err(e) => panic!("reading the rest: {e}"),
        }
    }
}

/// Exports whose clients do not read cannot take the database from
/// payments: a node runs at most a quarter of its pool's worth of exports
/// at once (one, with the tests' pool of 4; more answer 503 with
/// Retry-After), and drops an export whose client reads nothing for the
/// stall time (1.5 s here), which frees its place and its connection.
/// Without the limits, four such clients held the whole pool and a sale
/// waited 10 s for a 503.
fn stalled_exports_leave_the_database_to_payments(app: &mut TestApp) {
    app.extra_env
        .push(("FERROGATE_EXPORT_STALL_TIMEOUT_MS".into(), "1500".into()));
    app.kill();
    app.spawn();
    let t = app.bootstrap();
    // A file of about 20 MB, far more than the socket buffers and the
    // export's channel hold: a client that does not read stops it.
    for i in 0..40 {
        t.contact(json!({ "last_name": format!("Big{i:02}") }));
    }
    let wide = "x".repeat(500_000);
    crate::support::db::db(app).exec("UPDATE contacts SET header_message = ?", &[&wide]);
    let other = app.bootstrap();
    other.contact(json!({ "last_name": "Small" }));

    let mut stalled = unread_request(app, &t, "/v2/contacts?_format=csv");
    let head = head_of(&mut stalled);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    for _ in 0..3 {
        let mut refused = unread_request(app, &t, "/v2/contacts?_format=csv");
        let answer = String::from_utf8_lossy(&rest_of(&mut refused)).to_string();
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.to_ascii_lowercase().contains("retry-after: 5"), "{answer}");
        assert!(answer.contains("list exports"), "{answer}");
    }
    // Another tenant's payment goes through at once.
    let started = std::time::Instant::now();
    sale(&other, "5.00");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "the sale waited {:?}",
        started.elapsed()
    );
    // The stalled export is dropped: its place is free again, while its
    // client still reads nothing.
    let small = crate::support::wait::wait_until(
        "the stalled export to be dropped",
        std::time::Duration::from_secs(30),
        || Some(other.get("/v2/contacts?_format=csv")).filter(|r| r.status == 200),
    );
    assert_eq!(csv(&small.text).len(), 2, "{}", small.text);
    assert!(app.log().contains("the export was dropped"), "{}", app.log());
    // What it had sent ends without the last chunk: an incomplete
    // transfer, not a short file that looks whole.
    let rest = rest_of(&mut stalled);
    assert!(!rest.ends_with(b"\r\n0\r\n\r\n"), "{} bytes", rest.len());
}
