//! TLS to PostgreSQL on a throw-away cluster of its own
//! ([`cluster::Cluster::start_tls`]): `ssl = on` with a server certificate
//! from a throw-away CA, and TCP clients admitted only over TLS.

use std::path::PathBuf;
use std::sync::OnceLock;

use super::cluster::{Cluster, ServerTls};
use super::tls::Target;
use crate::{Batch, Store, StoreError, Table, WriterMetrics};

/// The server's certificate names `localhost` only (no IP address), so a
/// client that reaches it as `127.0.0.1` sees a name that does not match.
const SERVER_NAME: &str = "localhost";

struct Fixture {
    cluster: Cluster,
    /// The CA that signed the server's certificate, and another one.
    ca: PathBuf,
    other_ca: PathBuf,
    _dir: tempfile::TempDir,
}

fn ca(name: &str) -> rcgen::CertifiedIssuer<'static, rcgen::KeyPair> {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap()
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        use rcgen::{CertificateParams, DnType, KeyPair};
        let issuer = ca("kobo PostgreSQL test CA");
        let other = ca("some other CA");
        let key = KeyPair::generate().unwrap();
        let mut leaf = CertificateParams::new(vec![SERVER_NAME.to_string()]).unwrap();
        leaf.distinguished_name
            .push(DnType::CommonName, SERVER_NAME);
        let cert = leaf.signed_by(&key, &issuer).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, pem: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).unwrap();
            path
        };
        let issuer_cert: &rcgen::Certificate = issuer.as_ref();
        let other_cert: &rcgen::Certificate = other.as_ref();
        let ca = write("ca.pem", issuer_cert.pem());
        let other_ca = write("other-ca.pem", other_cert.pem());
        let cluster = Cluster::start_tls(&ServerTls {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
        .unwrap_or_else(|e| panic!("cannot start a TLS PostgreSQL cluster: {e}"));
        Fixture {
            cluster,
            ca,
            other_ca,
            _dir: dir,
        }
    })
}

/// A fresh database's URL over TCP, reaching the server by `host`.
fn url(host: &str, params: &str) -> String {
    let f = fixture();
    let name = f.cluster.fresh_database_name();
    f.cluster.tcp_url(host, &name, params)
}

/// Whether the server sees the connection `url` opens as TLS.
fn server_sees_tls(url: &str) -> bool {
    let target = Target::parse(url).unwrap();
    super::call(async move {
        let client = super::connect(target).await.unwrap();
        client
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .await
            .unwrap()
            .get::<_, bool>(0)
    })
}

fn refusal(result: Result<Store, StoreError>) -> String {
    match result {
        Ok(_) => panic!("the connection was accepted"),
        Err(StoreError::Postgres(message)) => message,
        Err(other) => panic!("expected a PostgreSQL error, got {other:?}"),
    }
}

#[tokio::test]
async fn verify_full_with_the_servers_ca_connects_over_tls_and_commits() {
    let f = fixture();
    let url = url(
        SERVER_NAME,
        &format!("sslmode=verify-full&sslrootcert={}", f.ca.display()),
    );
    assert!(server_sees_tls(&url));
    let store = Store::connect(&url).unwrap();
    let writer = store.start_writer(WriterMetrics::new());
    let mut batch = Batch::new();
    batch.put_raw(Table::Meta, b"tls".to_vec(), b"over TLS".to_vec());
    writer.commit(batch).await.unwrap();
    let read = store.read().unwrap();
    assert_eq!(
        read.get(Table::Meta, b"tls").unwrap(),
        Some(b"over TLS".to_vec())
    );
}

#[test]
fn verify_full_refuses_a_server_whose_certificate_another_ca_signed() {
    let f = fixture();
    let url = url(
        SERVER_NAME,
        &format!("sslmode=verify-full&sslrootcert={}", f.other_ca.display()),
    );
    let message = refusal(Store::connect(&url));
    assert!(
        message.starts_with("TLS to PostgreSQL (sslmode=verify-full)"),
        "{message}"
    );
    assert!(message.contains("UnknownIssuer"), "{message}");
}

#[test]
fn verify_full_checks_the_host_name_and_verify_ca_does_not() {
    let f = fixture();
    let root = format!("sslrootcert={}", f.ca.display());
    // The certificate names localhost; this client calls it 127.0.0.1.
    let full = url("127.0.0.1", &format!("sslmode=verify-full&{root}"));
    let message = refusal(Store::connect(&full));
    assert!(message.contains("not valid for name"), "{message}");
    let ca_only = url("127.0.0.1", &format!("sslmode=verify-ca&{root}"));
    assert!(server_sees_tls(&ca_only));
    Store::connect(&ca_only).unwrap();
    // And verify-ca still checks the chain.
    let wrong = url(
        "127.0.0.1",
        &format!("sslmode=verify-ca&sslrootcert={}", f.other_ca.display()),
    );
    assert!(refusal(Store::connect(&wrong)).contains("UnknownIssuer"));
}

#[test]
fn require_and_prefer_without_a_root_certificate_encrypt_without_checking_it() {
    assert!(server_sees_tls(&url(SERVER_NAME, "sslmode=require")));
    Store::connect(&url(SERVER_NAME, "sslmode=require")).unwrap();
    assert!(server_sees_tls(&url("127.0.0.1", "sslmode=prefer")));
    // With a root certificate, require checks the chain (libpq's rule).
    let f = fixture();
    let wrong = url(
        SERVER_NAME,
        &format!("sslmode=require&sslrootcert={}", f.other_ca.display()),
    );
    assert!(refusal(Store::connect(&wrong)).contains("UnknownIssuer"));
}

#[test]
fn sslmode_disable_is_refused_by_a_server_that_admits_only_tls() {
    let message = refusal(Store::connect(&url(SERVER_NAME, "sslmode=disable")));
    assert!(message.contains("no encryption"), "{message}");
    assert!(message.contains("sslmode=disable forbids it"), "{message}");
}
