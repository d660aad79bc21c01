//! Webhook signatures as the Standard Webhooks specification defines them,
//! so that receivers verify with any of its libraries:
//!
//! | header | value |
//! |---|---|
//! | `webhook-id` | the message id: the ticket id, the same on every re-send |
//! | `webhook-timestamp` | unix seconds at sending |
//! | `webhook-signature` | `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, one per secret, separated by spaces |
//!
//! The id and the timestamp are signed with the body, so a receiver that
//! rejects stale timestamps (the libraries' tolerance is five minutes)
//! rejects a captured delivery replayed later, and one that deduplicates on
//! the id turns a replay within the tolerance into no effect.
//!
//! The secret has the specification's form: `whsec_` then the base64 of
//! 24 to 64 random bytes; the key is the decoded bytes. A channel may sign
//! with more than one (`additionalSecretsFrom`): the header then carries a
//! signature for each, as the specification provides for a rotation, and a
//! receiver holding any one of them accepts the delivery.
//!
//! The signature of 0.1.0 (`X-AssetScan-Signature: sha256=<hex
//! HMAC-SHA256 of the body>`, keyed with the secret's text, and
//! `X-AssetScan-Timestamp`) is sent as well while `legacySignature` is set,
//! keyed with `legacySecretFrom` (0.1.0's secret as it was) or else with
//! `secretFrom`'s text. With `legacySignature` and a `secretFrom` that is
//! not a Standard Webhooks secret (0.1.0's configuration unchanged), a
//! channel signs the 0.1.0 way only, as 0.1.0 did. Deprecated, removed in
//! 0.3.0.

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
        "a Standard Webhooks secret starts with `whsec_` (then the base64 of 24 to 64 random bytes); \
         to keep signing with a 0.1.0 secret for now, set `legacySignature: true` (docs/upgrading.md)"
    )]
    NoPrefix,
    #[error("the part after `whsec_` is not standard base64")]
    NotBase64,
    #[error("the secret decodes to {0} bytes; the specification asks for 24 to 64")]
    Length(usize),
    #[error("HMAC-SHA256 refused the key: {0}")]
    Key(String),
    #[error("additionalSecretsFrom[{index}]: {source}")]
    Additional {
        index: usize,
        source: Box<SigningSecretError>,
    },
    #[error(
        "additionalSecretsFrom needs a Standard Webhooks secret in secretFrom; \
         0.1.0's secret goes in legacySecretFrom"
    )]
    AdditionalWithoutStandard,
}

/// Which key signs the 0.1.0 headers, if any.
#[derive(Clone, Copy, Debug)]
pub enum Legacy<'a> {
    /// Not sent.
    Off,
    /// Keyed with the text of the primary secret.
    PrimaryText,
    /// Keyed with this secret's text (0.1.0's secret, kept as it was).
    Own(&'a Secret),
}

/// The secrets of one channel, as configured.
#[derive(Clone, Copy, Debug)]
pub struct Secrets<'a> {
    /// `secretFrom`.
    pub primary: &'a Secret,
    /// `additionalSecretsFrom`, in order.
    pub additional: &'a [Secret],
    pub legacy: Legacy<'a>,
}

/// How a channel signs, for the start-up log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schemes {
    Standard { signatures: usize },
    StandardAndLegacy { signatures: usize },
    LegacyOnly,
}

/// The signing keys of one channel. Its `Debug` hides the keys.
#[derive(Clone)]
pub struct Signer {
    /// The Standard Webhooks keys, `secretFrom`'s first; empty only for a
    /// channel that signs the 0.1.0 way alone.
    standard: Vec<Hmac<Sha256>>,
    /// Boxed: rarely set, and as large as a standard key.
    legacy: Option<Box<Hmac<Sha256>>>,
}

/// The headers that sign one delivery, in the order they are sent.
pub type SignatureHeaders = Vec<(&'static str, String)>;

impl Signer {
    /// Keys for `secrets`: every Standard Webhooks secret decoded, the 0.1.0
    /// key taken as text. A primary secret that is not `whsec_`-formed is
    /// accepted only as 0.1.0's, with [`Legacy::PrimaryText`] and no
    /// additional secret.
    pub fn new(secrets: Secrets<'_>) -> Result<Signer, SigningSecretError> {
        let legacy = match secrets.legacy {
            Legacy::Off => None,
            Legacy::PrimaryText => Some(Box::new(keyed(secrets.primary.expose().as_bytes())?)),
            Legacy::Own(secret) => Some(Box::new(keyed(secret.expose().as_bytes())?)),
        };
        let primary = match standard_key(secrets.primary) {
            Ok(key) => key,
            Err(SigningSecretError::NoPrefix) if matches!(secrets.legacy, Legacy::PrimaryText) => {
                if !secrets.additional.is_empty() {
                    return Err(SigningSecretError::AdditionalWithoutStandard);
                }
                return Ok(Signer {
                    standard: Vec::new(),
                    legacy,
                });
            }
            Err(e) => return Err(e),
        };
        let mut standard = vec![primary];
        for (index, secret) in secrets.additional.iter().enumerate() {
            standard.push(
                standard_key(secret).map_err(|e| SigningSecretError::Additional {
                    index,
                    source: Box::new(e),
                })?,
            );
        }
        Ok(Signer { standard, legacy })
    }

    /// What the channel sends.
    pub fn schemes(&self) -> Schemes {
        let signatures = self.standard.len();
        match (signatures, self.legacy.is_some()) {
            (0, _) => Schemes::LegacyOnly,
            (_, false) => Schemes::Standard { signatures },
            (_, true) => Schemes::StandardAndLegacy { signatures },
        }
    }

    /// The headers for `body` sent as message `id` at `timestamp` (unix
    /// seconds).
    pub fn headers(&self, id: &str, timestamp: u64, body: &[u8]) -> SignatureHeaders {
        let mut headers = vec![
            (ID_HEADER, id.to_owned()),
            (TIMESTAMP_HEADER, timestamp.to_string()),
        ];
        let signed = format!("{id}.{timestamp}.");
        let signatures: Vec<String> = self
            .standard
            .iter()
            .map(|key| {
                let mut mac = key.clone();
                mac.update(signed.as_bytes());
                mac.update(body);
                format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
            })
            .collect();
        if !signatures.is_empty() {
            headers.push((SIGNATURE_HEADER, signatures.join(" ")));
        }
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

/// The key of a `whsec_` secret: its decoded bytes.
fn standard_key(secret: &Secret) -> Result<Hmac<Sha256>, SigningSecretError> {
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
    keyed(&key)
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

    fn only(primary: &Secret) -> Secrets<'_> {
        Secrets {
            primary,
            additional: &[],
            legacy: Legacy::Off,
        }
    }

    /// The Standard Webhooks reference implementations' own test example:
    /// this secret, id, timestamp and body give this signature.
    const EXAMPLE_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const EXAMPLE_ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const EXAMPLE_TIMESTAMP: u64 = 1614265330;
    const EXAMPLE_BODY: &[u8] = br#"{"test": 2432232314}"#;
    const EXAMPLE_SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    /// RFC 4231, test case 2: HMAC-SHA256 with key "Jefe".
    const RFC4231_KEY: &str = "Jefe";
    const RFC4231_DATA: &[u8] = b"what do ya want for nothing?";
    const RFC4231_MAC: &str = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";

    #[test]
    fn signs_like_the_specification_example() {
        let secret = Secret::new(EXAMPLE_SECRET);
        let signer = Signer::new(only(&secret)).unwrap();
        let headers = signer.headers(EXAMPLE_ID, EXAMPLE_TIMESTAMP, EXAMPLE_BODY);
        assert_eq!(header(&headers, SIGNATURE_HEADER), Some(EXAMPLE_SIGNATURE));
        assert_eq!(header(&headers, LEGACY_SIGNATURE_HEADER), None);
        assert_eq!(signer.schemes(), Schemes::Standard { signatures: 1 });
        assert_eq!(format!("{signer:?}"), "Signer(***)");
    }

    #[test]
    fn a_rotation_sends_one_signature_per_secret_in_one_header() {
        // The specification: several `v1,<sig>` separated by spaces; each is
        // the one the secret alone gives.
        let next = Secret::new(format!("whsec_{}", STANDARD.encode([9u8; 32])));
        let primary = Secret::new(EXAMPLE_SECRET);
        let additional = [next.clone()];
        let signer = Signer::new(Secrets {
            primary: &primary,
            additional: &additional,
            legacy: Legacy::Off,
        })
        .unwrap();
        let headers = signer.headers(EXAMPLE_ID, EXAMPLE_TIMESTAMP, EXAMPLE_BODY);
        let alone =
            Signer::new(only(&next))
                .unwrap()
                .headers(EXAMPLE_ID, EXAMPLE_TIMESTAMP, EXAMPLE_BODY);
        let expected = format!(
            "{EXAMPLE_SIGNATURE} {}",
            header(&alone, SIGNATURE_HEADER).unwrap()
        );
        assert_eq!(header(&headers, SIGNATURE_HEADER), Some(expected.as_str()));
        assert_ne!(header(&alone, SIGNATURE_HEADER), Some(EXAMPLE_SIGNATURE));
        assert_eq!(signer.schemes(), Schemes::Standard { signatures: 2 });
    }

    #[test]
    fn a_0_1_0_secret_with_legacy_signature_signs_the_0_1_0_way_only() {
        // 0.1.0: `sha256=<hex HMAC-SHA256 of the body>` keyed with the
        // secret's text; RFC 4231's test case gives the value.
        let secret = Secret::new(RFC4231_KEY);
        let signer = Signer::new(Secrets {
            primary: &secret,
            additional: &[],
            legacy: Legacy::PrimaryText,
        })
        .unwrap();
        let headers = signer.headers("a/1", 9, RFC4231_DATA);
        let expected = format!("sha256={RFC4231_MAC}");
        assert_eq!(
            header(&headers, LEGACY_SIGNATURE_HEADER),
            Some(expected.as_str())
        );
        assert_eq!(header(&headers, LEGACY_TIMESTAMP_HEADER), Some("9"));
        assert_eq!(header(&headers, SIGNATURE_HEADER), None);
        assert_eq!(signer.schemes(), Schemes::LegacyOnly);
        // Without legacySignature, the same secret is refused.
        assert_eq!(
            Signer::new(only(&secret)).unwrap_err(),
            SigningSecretError::NoPrefix
        );
    }

    #[test]
    fn both_schemes_at_once_with_0_1_0_secret_kept_apart() {
        let primary = Secret::new(EXAMPLE_SECRET);
        let old = Secret::new(RFC4231_KEY);
        let signer = Signer::new(Secrets {
            primary: &primary,
            additional: &[],
            legacy: Legacy::Own(&old),
        })
        .unwrap();
        let headers = signer.headers(EXAMPLE_ID, EXAMPLE_TIMESTAMP, RFC4231_DATA);
        let expected = format!("sha256={RFC4231_MAC}");
        assert_eq!(
            header(&headers, LEGACY_SIGNATURE_HEADER),
            Some(expected.as_str())
        );
        let standard = Signer::new(only(&primary)).unwrap().headers(
            EXAMPLE_ID,
            EXAMPLE_TIMESTAMP,
            RFC4231_DATA,
        );
        assert_eq!(
            header(&headers, SIGNATURE_HEADER),
            header(&standard, SIGNATURE_HEADER)
        );
        assert_eq!(
            signer.schemes(),
            Schemes::StandardAndLegacy { signatures: 1 }
        );
    }

    #[test]
    fn legacy_header_keyed_with_the_standard_secrets_text() {
        let secret = Secret::new(format!("whsec_{}", STANDARD.encode([7u8; 32])));
        let headers = Signer::new(Secrets {
            primary: &secret,
            additional: &[],
            legacy: Legacy::PrimaryText,
        })
        .unwrap()
        .headers("a/1", 9, b"{}");
        let mut mac = keyed(secret.expose().as_bytes()).unwrap();
        mac.update(b"{}");
        let expected = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        assert_eq!(
            header(&headers, LEGACY_SIGNATURE_HEADER),
            Some(expected.as_str())
        );
        assert!(header(&headers, SIGNATURE_HEADER).is_some());
    }

    #[test]
    fn secrets_outside_the_specification_are_refused() {
        let refuse = |s: &str| Signer::new(only(&Secret::new(s))).unwrap_err();
        assert_eq!(refuse("s3cr3t-hmac"), SigningSecretError::NoPrefix);
        assert_eq!(refuse("whsec_not base64!"), SigningSecretError::NotBase64);
        let short = format!("whsec_{}", STANDARD.encode([1u8; 16]));
        assert_eq!(refuse(&short), SigningSecretError::Length(16));
        let long = format!("whsec_{}", STANDARD.encode([1u8; 65]));
        assert_eq!(refuse(&long), SigningSecretError::Length(65));
        // An additional secret is checked as strictly, and named by index.
        let primary = Secret::new(EXAMPLE_SECRET);
        let additional = [Secret::new(EXAMPLE_SECRET), Secret::new("old")];
        let err = Signer::new(Secrets {
            primary: &primary,
            additional: &additional,
            legacy: Legacy::Off,
        })
        .unwrap_err();
        assert_eq!(
            err,
            SigningSecretError::Additional {
                index: 1,
                source: Box::new(SigningSecretError::NoPrefix)
            }
        );
        // 0.1.0's secret as the primary one signs nothing of the standard's,
        // so a rotation of standard secrets beside it makes no sense.
        let old = Secret::new("old");
        let additional = [Secret::new(EXAMPLE_SECRET)];
        let err = Signer::new(Secrets {
            primary: &old,
            additional: &additional,
            legacy: Legacy::PrimaryText,
        })
        .unwrap_err();
        assert_eq!(err, SigningSecretError::AdditionalWithoutStandard);
    }
}
