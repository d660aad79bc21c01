//! The keys every HTTP provider's section shares, and each provider's
//! defaults for them: one type, read one way, checked in one place.

use super::guard::EgressGuard;
use super::url::Exposure;
use crate::providers::error::{ProviderConfigError, check_timeout};
use crate::providers::secret::{Secret, SecretFrom};
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

/// `timeout`, `maxBodyBytes` and `bearerTokenFrom`: the same keys in every
/// HTTP provider's section (flattened into it). Each is optional; an absent
/// one takes the provider's default ([`HttpProfile`]).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpSettings {
    /// Per HTTP call: connect, headers and body together (`500ms`, `15s`).
    #[serde(default, deserialize_with = "crate::duration::config_optional")]
    #[schemars(schema_with = "crate::duration::config_optional_schema")]
    pub timeout: Option<Duration>,
    /// Cap for each response body; at least 1 KiB.
    #[serde(default)]
    pub max_body_bytes: Option<u64>,
    /// Sent as `Authorization: Bearer <token>` when set.
    #[serde(default)]
    pub bearer_token_from: Option<SecretFrom>,
    /// Set by the operator, never by configuration: the egress policy every
    /// address the client dials must pass, for a URL a tenant wrote.
    #[serde(skip)]
    #[schemars(skip)]
    pub egress: Option<EgressGuard>,
}

/// What an HTTP provider is to its client: its name in errors, its
/// defaults, and how much of its URLs errors may show.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HttpProfile {
    pub provider: &'static str,
    pub timeout: Duration,
    pub max_body_bytes: u64,
    pub exposure: Exposure,
    /// Redirects followed (at most 5), or refused.
    pub follow_redirects: bool,
}

impl HttpProfile {
    /// An API or a feed: its URLs hold no secret, so errors may show their
    /// path, and redirects are followed.
    pub const fn api(
        provider: &'static str,
        timeout: Duration,
        max_body_bytes: u64,
    ) -> HttpProfile {
        HttpProfile {
            provider,
            timeout,
            max_body_bytes,
            exposure: Exposure::Path,
            follow_redirects: true,
        }
    }

    /// A document source the platform team configured (an SBOM store): its
    /// URLs hold no secret, but a redirect is refused, so that what is read
    /// comes from the configured base URL and nowhere else.
    pub const fn document(
        provider: &'static str,
        timeout: Duration,
        max_body_bytes: u64,
    ) -> HttpProfile {
        HttpProfile {
            follow_redirects: false,
            ..HttpProfile::api(provider, timeout, max_body_bytes)
        }
    }

    /// A notification webhook: its URL is the credential, so errors show the
    /// host alone and redirects are refused. Receivers answer with a short
    /// acknowledgement (64 KiB is plenty) and should do so within 10 s.
    pub const fn webhook(provider: &'static str) -> HttpProfile {
        HttpProfile {
            provider,
            timeout: Duration::from_secs(10),
            max_body_bytes: 64 * 1024,
            exposure: Exposure::HostOnly,
            follow_redirects: false,
        }
    }
}

/// Settings with the defaults filled in, checked, and the token read.
pub(super) struct Resolved {
    pub timeout: Duration,
    pub max_body_bytes: u64,
    pub token: Option<Secret>,
    pub egress: Option<EgressGuard>,
}

impl HttpSettings {
    pub(super) fn resolve(&self, profile: &HttpProfile) -> Result<Resolved, ProviderConfigError> {
        let provider = profile.provider;
        let max_body_bytes = self.max_body_bytes.unwrap_or(profile.max_body_bytes);
        if max_body_bytes < 1024 {
            return Err(ProviderConfigError::invalid(
                provider,
                "maxBodyBytes",
                format!("{max_body_bytes} is below the 1024 byte minimum"),
            ));
        }
        let token = self
            .bearer_token_from
            .as_ref()
            .map(|from| {
                from.load()
                    .map_err(|e| ProviderConfigError::secret(provider, "bearerTokenFrom", e))
            })
            .transpose()?;
        Ok(Resolved {
            timeout: check_timeout(provider, self.timeout.unwrap_or(profile.timeout))?,
            max_body_bytes,
            token,
            egress: self.egress.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROFILE: HttpProfile = HttpProfile::api("p", Duration::from_secs(3), 4096);

    #[test]
    fn absent_keys_take_the_providers_defaults() {
        let resolved = HttpSettings::default().resolve(&PROFILE).unwrap();
        assert_eq!(
            (resolved.timeout, resolved.max_body_bytes, resolved.token),
            (Duration::from_secs(3), 4096, None)
        );
        let given: HttpSettings =
            crate::yaml::from_str("{timeout: 500ms, maxBodyBytes: 2048}").unwrap();
        let resolved = given.resolve(&PROFILE).unwrap();
        assert_eq!(
            (resolved.timeout, resolved.max_body_bytes),
            (Duration::from_millis(500), 2048)
        );
    }

    #[test]
    fn values_are_checked() {
        let small = HttpSettings {
            max_body_bytes: Some(10),
            ..Default::default()
        };
        assert!(small.resolve(&PROFILE).is_err());
        let slow = HttpSettings {
            timeout: Some(Duration::from_secs(3600)),
            ..Default::default()
        };
        assert!(slow.resolve(&PROFILE).is_err());
        let unset = HttpSettings {
            bearer_token_from: Some(SecretFrom::Env("ASSETSCAN_TEST_SURELY_UNSET_VAR".into())),
            ..Default::default()
        };
        let err = unset.resolve(&PROFILE).err().unwrap();
        assert!(err.to_string().contains("bearerTokenFrom"), "{err}");
    }
}
