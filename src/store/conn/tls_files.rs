//! The TLS files of the command line (PEM), read and checked at start: a
//! file that holds no certificate (a key given as the CA, say) is named
//! here, not left to fail the handshake as an unrelated `UnknownIssuer`.

use super::{RedisSecurity, StoreError, TlsCertificates};
use redis::ClientTlsConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;

/// What one file must hold.
#[derive(Clone, Copy)]
enum Holds {
    Certificate,
    PrivateKey,
}

impl RedisSecurity {
    /// Reads the TLS files (PEM): a CA bundle, and a client certificate with
    /// its key. Either may be absent; a certificate needs its key. Each file
    /// must hold what its flag says (at least one certificate, or a key).
    pub fn tls_files(
        ca: Option<&Path>,
        cert: Option<&Path>,
        key: Option<&Path>,
    ) -> Result<Option<TlsCertificates>, StoreError> {
        let client_tls = match (cert, key) {
            (Some(cert), Some(key)) => Some(ClientTlsConfig {
                client_cert: read(cert, "--redis-cert-file", Holds::Certificate)?,
                client_key: read(key, "--redis-key-file", Holds::PrivateKey)?,
            }),
            (None, None) => None,
            (Some(path), None) | (None, Some(path)) => {
                return Err(StoreError::TlsFile {
                    path: path.to_owned(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "a client certificate and its key come together",
                    ),
                });
            }
        };
        let root_cert = ca
            .map(|ca| read(ca, "--redis-ca-file", Holds::Certificate))
            .transpose()?;
        Ok(
            (client_tls.is_some() || root_cert.is_some()).then_some(TlsCertificates {
                client_tls,
                root_cert,
            }),
        )
    }
}

/// The file's bytes, once they are known to hold what `flag` needs.
fn read(path: &Path, flag: &'static str, holds: Holds) -> Result<Vec<u8>, StoreError> {
    let bytes = std::fs::read(path).map_err(|source| StoreError::TlsFile {
        path: path.to_owned(),
        source,
    })?;
    let found = match holds {
        Holds::Certificate => CertificateDer::pem_slice_iter(&bytes).any(|c| c.is_ok()),
        Holds::PrivateKey => PrivateKeyDer::from_pem_slice(&bytes).is_ok(),
    };
    if found {
        return Ok(bytes);
    }
    Err(StoreError::TlsFileContent {
        path: path.to_owned(),
        flag,
        expected: match holds {
            Holds::Certificate => "no PEM certificate (-----BEGIN CERTIFICATE-----)",
            Holds::PrivateKey => "no PEM private key (-----BEGIN … PRIVATE KEY-----)",
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_without_what_its_flag_needs_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key.pem");
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIGv0n7nTh4nvbEyP8T1QrGKzRyD1BrfG3aYkOqs6B/H1\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let err = RedisSecurity::tls_files(Some(&key), None, None).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("--redis-ca-file"), "{text}");
        assert!(text.contains("no PEM certificate"), "{text}");
        assert!(text.contains("key.pem"), "{text}");
        assert_eq!(err.reason(), "RedisConfig");
        // The key is fine as a key, and a certificate file needs one.
        let err = RedisSecurity::tls_files(None, Some(&key), Some(&key)).unwrap_err();
        assert!(err.to_string().contains("--redis-cert-file"), "{err}");
    }
}
