//! PostgreSQL over TLS against the local server, with a certificate
//! authority and a server certificate made by the test: `verify-full`
//! connects and every connection of the server is encrypted; a wrong CA
//! and a wrong host name are refused with the reason; `verify-ca` checks
//! the chain only.

use crate::support::wait::wait_until;
use crate::support::{no_postgres, Engine, TestApp, BIN};
use serde_json::json;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A CA certificate (PEM), and a server certificate for `localhost` with
/// its key, signed by that CA.
struct Pki {
    ca: String,
    cert: String,
    key: String,
}

fn pki() -> Pki {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "Ferrogate test database CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = leaf.signed_by(&key, &ca_cert, &ca_key).unwrap();
    Pki {
        ca: pem("CERTIFICATE", ca_cert.der()),
        cert: pem("CERTIFICATE", cert.der()),
        key: pem("PRIVATE KEY", &key.serialize_der()),
    }
}

/// DER as PEM (rcgen's own PEM output is a feature we do not build).
fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let text = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The uid and gid the database server runs as (it must own its key).
fn postgres_user() -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    let line = passwd.lines().find(|l| l.starts_with("postgres:"))?;
    let mut f = line.split(':').skip(2);
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// Points the server's TLS at our certificate, and back when dropped.
struct ServerTls {
    admin: String,
}

impl ServerTls {
    fn set(admin: &str, cert: &Path, key: &Path) -> ServerTls {
        let mut c = postgres::Client::connect(admin, postgres::NoTls).expect("admin connection");
        // ALTER SYSTEM runs outside a transaction block: one statement each.
        c.batch_execute(&format!("ALTER SYSTEM SET ssl_cert_file = '{}'", cert.display()))
            .unwrap();
        c.batch_execute(&format!("ALTER SYSTEM SET ssl_key_file = '{}'", key.display()))
            .unwrap();
        c.batch_execute("ALTER SYSTEM SET ssl = on").unwrap();
        c.batch_execute("SELECT pg_reload_conf()").unwrap();
        ServerTls {
            admin: admin.to_string(),
        }
    }
}

impl Drop for ServerTls {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            for setting in ["ssl_cert_file", "ssl_key_file", "ssl"] {
                let _ = c.batch_execute(&format!("ALTER SYSTEM RESET {setting}"));
            }
            let _ = c.batch_execute("SELECT pg_reload_conf()");
        }
    }
}

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `ferrogate migrate` against `url`: its exit status and stderr.
fn migrate(app: &TestApp, url: &str) -> (bool, String) {
    let out = Command::new(BIN)
        .args(["migrate"])
        .env("FERROGATE_DATABASE_URL", url)
        .env("FERROGATE_DATA_KEY", &app.data_key)
        .output()
        .expect("run ferrogate");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn postgres_over_verified_tls() {
    let Some(mut app) = TestApp::start(Engine::Postgres) else {
        no_postgres();
        return;
    };
    let admin = std::env::var("FERROGATE_TEST_DATABASE_URL").unwrap();
    let Some((uid, gid)) = postgres_user() else {
        panic!("the local PostgreSQL server's user is needed to own the test key");
    };
    let dir: PathBuf = app.dir.join("pg-tls");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&app.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (ours, other) = (pki(), pki());
    let (ca, wrong_ca, cert, key) = (
        dir.join("ca.pem"),
        dir.join("other-ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    );
    write(&ca, &ours.ca, 0o644);
    write(&wrong_ca, &other.ca, 0o644);
    write(&cert, &ours.cert, 0o644);
    write(&key, &ours.key, 0o600);
    std::os::unix::fs::chown(&key, Some(uid), Some(gid)).expect("give the key to the database server");
    let _tls = ServerTls::set(&admin, &cert, &key);

    let db = app.database_url.rsplit('/').next().unwrap().to_string();
    let url = |host: &str, mode: &str, root: &Path| {
        format!(
            "postgres://postgres@{host}:5432/{db}?sslmode={mode}&sslrootcert={}",
            root.display()
        )
    };
    // The reload is asynchronous: wait until the server presents our certificate.
    let verified = url("localhost", "verify-full", &ca);
    wait_until(
        "the server to present the test certificate",
        Duration::from_secs(20),
        || migrate(&app, &verified).0.then_some(()),
    );

    // The service on verify-full: every one of its connections is encrypted.
    app.kill();
    app.database_url = verified.clone();
    app.spawn();
    let t = app.bootstrap();
    t.contact(json!({ "last_name": "Encrypted" }));
    let mut c = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
    let row = c
        .query_one(
            "SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl) \
             FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.datname = $1",
            &[&db],
        )
        .unwrap();
    let (encrypted, plain): (i64, i64) = (row.get(0), row.get(1));
    assert!(encrypted >= 1, "the server's connections are encrypted");
    assert_eq!(plain, 0, "no plain connection to the service's database");

    // Refusals say why.
    let (ok, err) = migrate(&app, &url("localhost", "verify-full", &wrong_ca));
    assert!(!ok && err.contains("invalid peer certificate"), "wrong CA: {err}");
    let (ok, err) = migrate(&app, &url("127.0.0.1", "verify-full", &ca));
    assert!(
        !ok && err.contains("not valid for name"),
        "wrong host name: {err}"
    );
    // verify-ca checks the chain only; require alone checks nothing.
    assert!(migrate(&app, &url("127.0.0.1", "verify-ca", &ca)).0);
    let (ok, err) = migrate(&app, &url("127.0.0.1", "verify-ca", &wrong_ca));
    assert!(!ok && err.contains("invalid peer certificate"), "{err}");
    let require = format!("postgres://postgres@127.0.0.1:5432/{db}?sslmode=require");
    assert!(migrate(&app, &require).0);
    let (ok, err) = migrate(
        &app,
        &format!("postgres://postgres@127.0.0.1:5432/{db}?sslmode=allow"),
    );
    assert!(!ok && err.contains("sslmode=allow"), "{err}");
}
