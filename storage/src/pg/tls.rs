//! TLS between kobo and PostgreSQL: libpq's `sslmode` and `sslrootcert`
//! URL parameters, carried out with rustls.
//!
//! tokio-postgres parses only `sslmode=disable|prefer|require` and rejects
//! `verify-ca`, `verify-full` and `sslrootcert`, so [`Target::parse`] takes
//! both parameters out of the URL itself and hands the rest on, with the
//! `sslmode` tokio-postgres should negotiate (`disable`, `prefer`, or
//! `require` for the three modes that insist on TLS). What the handshake
//! checks is this module's [`ServerCertVerifier`] choice, per mode:
//!
//! | `sslmode` | TLS | certificate chain | host name |
//! |---|---|---|---|
//! | `disable` | never | - | - |
//! | `prefer` (default) | when the server offers it, else in clear | not checked | not checked |
//! | `require` | always (refused when the server has none) | checked when `sslrootcert` is given, else not | not checked |
//! | `verify-ca` | always | checked | not checked |
//! | `verify-full` | always | checked | checked |
//!
//! These are libpq's meanings. Chains are checked against the PEM file
//! `sslrootcert` names, or the system's trusted roots when it is absent
//! or `system` (libpq's `sslrootcert=system`). `prefer`, and `require`
//! without a root certificate, encrypt without knowing who answers: they
//! stop a passive listener, not an impostor; kobo logs a warning at start
//! for a network connection in either mode. Unix-socket connections never
//! use TLS (PostgreSQL offers none there).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error as TlsError, SignatureScheme};
use tokio_postgres::config::{Host, SslMode as WireMode};
use tokio_postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{describe, redact};
use crate::StoreError;

/// libpq's `sslmode` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Option<SslMode> {
        Some(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// What tokio-postgres negotiates for this mode.
    fn wire(self) -> WireMode {
        match self {
            SslMode::Disable => WireMode::Disable,
            SslMode::Prefer => WireMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => WireMode::Require,
        }
    }
}

/// Where and how to connect: tokio-postgres's [`Config`] and the TLS
/// connector its `sslmode` calls for (`None`: never TLS).
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) config: Config,
    pub(crate) tls: Option<MakeRustlsConnect>,
    /// The mode as given (or `prefer`).
    pub(crate) mode: SslMode,
    /// Whether the chain is checked.
    pub(crate) verified: bool,
}

impl Target {
    /// Parses a connection string (URL or `key=value` form), its `sslmode`
    /// and `sslrootcert` included, and builds the TLS connector (reading
    /// the root certificates). Errors name the URL with its password
    /// redacted.
    pub(crate) fn parse(url: &str) -> Result<Target, StoreError> {
        let bad = |what: String| StoreError::Postgres(format!("{}: {what}", redact(url)));
        let (rest, sslmode, sslrootcert) = take_tls_params(url);
        let mode = match sslmode.as_deref() {
            None => SslMode::Prefer,
            Some(v) => SslMode::parse(v).ok_or_else(|| {
                bad(format!(
                    "sslmode={v} is not one of disable, prefer, require, verify-ca, verify-full"
                ))
            })?,
        };
        let mut config: Config = rest.parse().map_err(|e| bad(describe(&e)))?;
        config.ssl_mode(mode.wire());
        if config.get_application_name().is_none() {
            config.application_name("kobo");
        }
        let verified = match mode {
            SslMode::Disable | SslMode::Prefer => false,
            SslMode::Require => sslrootcert.is_some(),
            SslMode::VerifyCa | SslMode::VerifyFull => true,
        };
        let tls = match mode {
            SslMode::Disable => None,
            _ => Some(MakeRustlsConnect::new(client_config(
                mode,
                sslrootcert.as_deref(),
            )?)),
        };
        Ok(Target {
            config,
            tls,
            mode,
            verified,
        })
    }

    /// Whether any host is reached over the network (not a Unix socket).
    pub(crate) fn over_network(&self) -> bool {
        self.config
            .get_hosts()
            .iter()
            .any(|h| matches!(h, Host::Tcp(_)))
            || !self.config.get_hostaddrs().is_empty()
    }

    /// Logs, once per store, that a network connection is not (or not
    /// fully) protected.
    pub(crate) fn warn_if_weak(&self, url: &str) {
        if !self.over_network() || self.mode == SslMode::VerifyFull {
            return;
        }
        let url = redact(url);
        match self.mode {
            SslMode::Disable => tracing::warn!(
                %url,
                "PostgreSQL over the network without TLS (sslmode=disable): \
                 money records cross the network in clear; use sslmode=verify-full"
            ),
            SslMode::Prefer | SslMode::Require if !self.verified => tracing::warn!(
                %url,
                sslmode = self.mode.as_str(),
                "PostgreSQL's certificate is not checked: an impostor could answer; \
                 use sslmode=verify-full (with sslrootcert=/path/ca.pem for a private CA)"
            ),
            _ => tracing::warn!(
                %url,
                sslmode = self.mode.as_str(),
                "PostgreSQL's host name is not checked against its certificate; \
                 use sslmode=verify-full"
            ),
        }
    }
}

/// Splits `sslmode` and `sslrootcert` out of a connection string: the
/// string without them, and their (last) values. Handles the URL form
/// (`postgres://...?sslmode=verify-full&sslrootcert=/ca.pem`,
/// percent-encoded values decoded) and the `key=value` form.
fn take_tls_params(url: &str) -> (String, Option<String>, Option<String>) {
    let mut sslmode = None;
    let mut sslrootcert = None;
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else {
            return (url.to_string(), None, None);
        };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            match pair.split_once('=') {
                Some(("sslmode", v)) => sslmode = Some(percent_decode(v)),
                Some(("sslrootcert", v)) => sslrootcert = Some(percent_decode(v)),
                _ => kept.push(pair),
            }
        }
        let rest = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return (rest, sslmode, sslrootcert);
    }
    let mut kept = Vec::new();
    for word in url.split_whitespace() {
        match word.split_once('=') {
            Some(("sslmode", v)) => sslmode = Some(v.trim_matches('\'').to_string()),
            Some(("sslrootcert", v)) => sslrootcert = Some(v.trim_matches('\'').to_string()),
            _ => kept.push(word),
        }
    }
    (kept.join(" "), sslmode, sslrootcert)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap() * 16 + hex(l).unwrap()) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The roots chains are checked against: the PEM file `sslrootcert`
/// names, or the system's (absent or `system`).
fn roots(sslrootcert: Option<&str>) -> Result<rustls::RootCertStore, StoreError> {
    let mut roots = rustls::RootCertStore::empty();
    match sslrootcert {
        Some(path) if path != "system" => {
            let bad = |e: String| StoreError::Postgres(format!("sslrootcert={path}: {e}"));
            let certs = CertificateDer::pem_file_iter(path)
                .map_err(|e| bad(e.to_string()))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad(e.to_string()))?;
            if certs.is_empty() {
                return Err(bad("holds no PEM certificate".into()));
            }
            for cert in certs {
                roots.add(cert).map_err(|e| bad(e.to_string()))?;
            }
        }
        _ => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err(StoreError::Postgres(
                    "no trusted root certificates found on this system for sslmode's \
                     certificate check; name a CA file with sslrootcert=/path/ca.pem"
                        .into(),
                ));
            }
        }
    }
    Ok(roots)
}

fn client_config(
    mode: SslMode,
    sslrootcert: Option<&str>,
) -> Result<rustls::ClientConfig, StoreError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match (mode, sslrootcert) {
        (SslMode::VerifyFull, _) => webpki(roots(sslrootcert)?, &provider)?,
        (SslMode::VerifyCa, _) | (SslMode::Require, Some(_)) => {
            Arc::new(ChainOnly(webpki(roots(sslrootcert)?, &provider)?))
        }
        _ => Arc::new(Unchecked(provider.clone())),
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Postgres(format!("TLS set-up: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(config)
}

fn webpki(
    roots: rustls::RootCertStore,
    provider: &Arc<rustls::crypto::CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, StoreError> {
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| StoreError::Postgres(format!("TLS set-up: {e}")))
}

/// `verify-ca` (and `require` with a root certificate): rustls's own
/// verifier, whose one accepted failure is the name check (it checks the
/// chain, validity and usage first, the name last).
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(TlsError::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer`, and `require` without a root certificate: libpq's
/// encryption without authentication. The handshake's signatures are still
/// checked (against the presented certificate's key), the certificate
/// itself is not.
#[derive(Debug)]
struct Unchecked(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_and_sslrootcert_are_taken_out_of_a_url_and_the_rest_kept() {
        let (rest, mode, root) = take_tls_params(
            "postgres://kobo@db:5432/kobo?sslmode=verify-full&application_name=a&sslrootcert=%2Fetc%2Fca.pem",
        );
        assert_eq!(rest, "postgres://kobo@db:5432/kobo?application_name=a");
        assert_eq!(mode.as_deref(), Some("verify-full"));
        assert_eq!(root.as_deref(), Some("/etc/ca.pem"));
        let (rest, mode, root) = take_tls_params("postgresql:///kobo?sslmode=disable");
        assert_eq!(rest, "postgresql:///kobo");
        assert_eq!(mode.as_deref(), Some("disable"));
        assert_eq!(root, None);
        let (rest, mode, root) =
            take_tls_params("host=db user=kobo sslmode=require sslrootcert=/ca.pem dbname=kobo");
        assert_eq!(rest, "host=db user=kobo dbname=kobo");
        assert_eq!(mode.as_deref(), Some("require"));
        assert_eq!(root.as_deref(), Some("/ca.pem"));
    }

    #[test]
    fn an_unknown_sslmode_is_refused_by_name() {
        let Err(StoreError::Postgres(e)) = Target::parse("postgres://db/kobo?sslmode=allow-any")
        else {
            panic!("an unknown sslmode was accepted");
        };
        assert!(e.contains("sslmode=allow-any is not one of"), "{e}");
    }

    #[test]
    fn a_missing_root_certificate_file_is_refused_by_name() {
        let Err(StoreError::Postgres(e)) =
            Target::parse("postgres://db/kobo?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem")
        else {
            panic!("a missing sslrootcert was accepted");
        };
        assert!(e.contains("sslrootcert=/nonexistent/ca.pem"), "{e}");
    }

    #[test]
    fn the_default_is_prefer_and_only_verify_modes_and_require_with_a_root_check_the_chain() {
        let t = Target::parse("postgres://db/kobo").unwrap();
        assert_eq!((t.mode, t.verified), (SslMode::Prefer, false));
        assert_eq!(t.config.get_ssl_mode(), WireMode::Prefer);
        let t = Target::parse("postgres://db/kobo?sslmode=disable").unwrap();
        assert!(t.tls.is_none());
        let t = Target::parse("postgres://db/kobo?sslmode=require").unwrap();
        assert_eq!((t.mode, t.verified), (SslMode::Require, false));
        assert_eq!(t.config.get_ssl_mode(), WireMode::Require);
    }
}
