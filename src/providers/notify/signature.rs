//! Webhook signatures as the Standard Webhooks specification defines them,
//! so that receivers verify with any of its libraries:
//!
//! | header | value |
//! |---|---|
//! | `webhook-id` | the message id: the ticket id, the same on every re-send |
//! | `webhook-timestamp` | unix seconds at sending |
//! | `webhook-signature` | `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">` |
//!
//! The id and the timestamp are signed with the body, so a receiver that
//! rejects stale timestamps (the libraries' tolerance is five minutes)
//! rejects a captured delivery replayed later, and one that deduplicates on
//! the id turns a replay within the tolerance into no effect.
//!
//! The secret has the specification's form: `whsec_` then the base64 of
//! 24 to 64 random bytes; the key is the decoded bytes.
//!
//! The signature of earlier versions (`X-AssetScan-Signature: sha256=<hex
//! HMAC-SHA256 of the body>`, keyed with the secret's text, and
//! `X-AssetScan-Timestamp`) is sent as well while `legacySignature` is set:
//! deprecated, removed in 0.3.0.

use crate::providers::secret::Secret;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

pub const ID_HEADER: &str = "webhook-id";
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
pub const SIGNATURE_HEADER: &str = "webhook-signature";

/// Deprecated with `legacySignature`; removed in 0.3.0.
pub const LEGACY_TIMESTAMP_HEADER: &str = "X-AssetScan-Timestamp";
/// Deprecated with `legacySignature`; removed in 0.3.0.
pub const LEGACY_SIGNATURE_HEADER: &str = "X-AssetScan-Signature";

const SECRET_PREFIX: &str = "whsec_";
/// The specification's bounds on the decoded secret, in bytes.
const SECRET_BYTES: std::ops::RangeInclusive<usize> = 24..=64;

/// Why a configured secret cannot sign. Never quotes the secret.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SigningSecretError {
    #[error(
        "a Standard Webhooks secret starts with `whsec_` (then the base64 of 24 to 64 random bytes)"
    )]
    NoPrefix,
    #[error("the part after `whsec_` is not standard base64")]
    NotBase64,
    #[error("the secret decodes to {0} bytes; the specification asks for 24 to 64")]
    Length(usize),
    #[error("HMAC-SHA256 refused the key: {0}")]
    Key(String),
}

/// The signing keys of one channel. Its `Debug` hides the keys.
#[derive(Clone)]
pub struct Signer {
    standard: Hmac<Sha256>,
    /// Boxed: rarely set, and as large as the standard key.
    legacy: Option<Box<Hmac<Sha256>>>,
}

/// The headers that sign one delivery, in the order they are sent.
pub type SignatureHeaders = Vec<(&'static str, String)>;

impl Signer {
    /// Keys for `secret` (`whsec_<base64>`); with `legacy`, the deprecated
    /// header's key too: the secret's text, as earlier versions used it.
    pub fn new(secret: &Secret, legacy: bool) -> Result<Signer, SigningSecretError> {
        let encoded = secret
            .expose()
            .strip_prefix(SECRET_PREFIX)
            .ok_or(SigningSecretError::NoPrefix)?;
        let key = STANDARD
            .decode(encoded)
            .map_err(|_| SigningSecretError::NotBase64)?;
        if !SECRET_BYTES.contains(&key.len()) {
            return Err(SigningSecretError::Length(key.len()));
        }
        let legacy = match legacy {
            true => Some(Box::new(keyed(secret.expose().as_bytes())?)),
            false => None,
        };
        Ok(Signer {
            standard: keyed(&key)?,
            legacy,
        })
    }

    /// The headers for `body` sent as message `id` at `timestamp` (unix
    /// seconds).
    pub fn headers(&self, id: &str, timestamp: u64, body: &[u8]) -> SignatureHeaders {
        let mut mac = self.standard.clone();
        mac.update(format!("{id}.{timestamp}.").as_bytes());
        mac.update(body);
        let signature = STANDARD.encode(mac.finalize().into_bytes());
        let mut headers = vec![
            (ID_HEADER, id.to_owned()),
            (TIMESTAMP_HEADER, timestamp.to_string()),
            (SIGNATURE_HEADER, format!("v1,{signature}")),
        ];
        if let Some(legacy) = &self.legacy {
            let mut mac = (**legacy).clone();
            mac.update(body);
            headers.push((LEGACY_TIMESTAMP_HEADER, timestamp.to_string()));
            headers.push((
                LEGACY_SIGNATURE_HEADER,
                format!("sha256={}", hex::encode(mac.finalize().into_bytes())),
            ));
        }
        headers
    }
}

fn keyed(key: &[u8]) -> Result<Hmac<Sha256>, SigningSecretError> {
    <Hmac<Sha256> as KeyInit>::new_from_slice(key)
        .map_err(|e| SigningSecretError::Key(e.to_string()))
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header<'a>(headers: &'a SignatureHeaders, name: &str) -> Option<&'a str> {
        headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn signs_like_the_specification_example() {
        // The example of the Standard Webhooks reference implementations'
        // own tests: this secret, id, timestamp and body give this signature.
        let secret = Secret::new("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
        let signer = Signer::new(&secret, false).unwrap();
        let headers = signer.headers(
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(
            header(&headers, SIGNATURE_HEADER),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
        assert_eq!(header(&headers, LEGACY_SIGNATURE_HEADER), None);
        assert_eq!(format!("{signer:?}"), "Signer(***)");
    }

    #[test]
    fn legacy_header_keeps_the_old_form() {
        // RFC 4231 test case 2 (key "Jefe") is not a Standard Webhooks
        // secret; the legacy key is the secret's text, so check the form.
        let secret = Secret::new(format!("whsec_{}", STANDARD.encode([7u8; 32])));
        let headers = Signer::new(&secret, true).unwrap().headers("a/1", 9, b"{}");
        let mut mac = keyed(secret.expose().as_bytes()).unwrap();
        mac.update(b"{}");
        let expected = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        assert_eq!(
            header(&headers, LEGACY_SIGNATURE_HEADER),
            Some(expected.as_str())
        );
        assert_eq!(header(&headers, LEGACY_TIMESTAMP_HEADER), Some("9"));
    }

    #[test]
    fn secrets_outside_the_specification_are_refused() {
        let refuse = |s: &str| Signer::new(&Secret::new(s), false).unwrap_err();
        assert_eq!(refuse("s3cr3t-hmac"), SigningSecretError::NoPrefix);
        assert_eq!(refuse("whsec_not base64!"), SigningSecretError::NotBase64);
        let short = format!("whsec_{}", STANDARD.encode([1u8; 16]));
        assert_eq!(refuse(&short), SigningSecretError::Length(16));
        let long = format!("whsec_{}", STANDARD.encode([1u8; 65]));
        assert_eq!(refuse(&long), SigningSecretError::Length(65));
    }
}
