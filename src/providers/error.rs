//! What can be wrong with a provider's configuration, and the checks its
//! timeout and its limits pass. A leaf: the providers build these
//! errors; nothing here knows a provider.

use super::secret::SecretError;
use std::fmt::Display;
use std::time::Duration;

/// A provider's configuration is unusable. Names the provider and the
/// config key; never contains a secret.
#[derive(Debug, thiserror::Error)]
pub enum ProviderConfigError {
    #[error("{provider}: {field}: {reason}")]
    Invalid {
        provider: &'static str,
        field: &'static str,
        reason: String,
    },
    #[error("{provider}: {field}: {source}")]
    Secret {
        provider: &'static str,
        field: &'static str,
        source: SecretError,
    },
    #[error("{provider}: cannot build the HTTP client: {reason}")]
    HttpClient {
        provider: &'static str,
        reason: String,
    },
    /// One entry of a map of them (a channel of `notifications`, a source
    /// of `sbomSources`): the error names which.
    #[error("{section}.{name}: {source}")]
    Named {
        section: &'static str,
        name: String,
        source: Box<ProviderConfigError>,
    },
}

impl ProviderConfigError {
    /// This error, as that of the entry `name` of `section`.
    pub(crate) fn of(self, section: &'static str, name: &str) -> ProviderConfigError {
        ProviderConfigError::Named {
            section,
            name: assetscan_domain::text::truncate_chars(name, 63),
            source: Box::new(self),
        }
    }

    pub(crate) fn invalid(
        provider: &'static str,
        field: &'static str,
        reason: impl Into<String>,
    ) -> ProviderConfigError {
        ProviderConfigError::Invalid {
            provider,
            field,
            reason: reason.into(),
        }
    }

    pub(crate) fn secret(
        provider: &'static str,
        field: &'static str,
        source: SecretError,
    ) -> ProviderConfigError {
        ProviderConfigError::Secret {
            provider,
            field,
            source,
        }
    }
}

/// A per-call `timeout` from the config: 1 ms to 10 minutes.
pub(crate) fn check_timeout(
    provider: &'static str,
    timeout: Duration,
) -> Result<Duration, ProviderConfigError> {
    if timeout.is_zero() || timeout > Duration::from_secs(600) {
        return Err(ProviderConfigError::invalid(
            provider,
            "timeout",
            format!("{timeout:?} is outside 1ms..=10m"),
        ));
    }
    Ok(timeout)
}

/// A limit from the config (pages, ids per request, characters per query
/// parameter) that must be at least `min`: below it the provider could not
/// make progress.
pub(crate) fn check_at_least<T: PartialOrd + Display>(
    provider: &'static str,
    field: &'static str,
    value: T,
    min: T,
) -> Result<T, ProviderConfigError> {
    if value < min {
        return Err(ProviderConfigError::invalid(
            provider,
            field,
            format!("must be at least {min}"),
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_checked() {
        assert!(check_timeout("p", Duration::ZERO).is_err());
        assert!(check_timeout("p", Duration::from_secs(5)).is_ok());
        assert!(check_timeout("p", Duration::from_secs(3600)).is_err());
    }

    #[test]
    fn limits_below_their_minimum_are_refused() {
        assert_eq!(check_at_least("p", "maxPages", 1u32, 1).unwrap(), 1);
        let err = check_at_least("p", "maxChars", 19, 20).unwrap_err();
        assert_eq!(err.to_string(), "p: maxChars: must be at least 20");
    }
}
