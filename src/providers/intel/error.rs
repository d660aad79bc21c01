//! How a threat-intel lookup failed.

use crate::providers::http::HttpError;

#[derive(Debug, thiserror::Error)]
pub enum IntelError {
    /// No known-exploited catalog has ever been loaded. Always retryable,
    /// whatever the cause: the feed may come back.
    #[error("known-exploited catalog unavailable (none loaded yet): {0}")]
    NoCatalog(#[source] HttpError),
    #[error(transparent)]
    Epss(HttpError),
}

impl IntelError {
    /// Without the provider's answer (see [`HttpError::summary`]).
    pub fn summary(&self) -> String {
        match self {
            IntelError::NoCatalog(e) => format!(
                "known-exploited catalog unavailable (none loaded yet): {}",
                e.summary()
            ),
            IntelError::Epss(e) => e.summary(),
        }
    }

    pub fn is_retryable(&self) -> bool {
        match self {
            IntelError::NoCatalog(_) => true,
            IntelError::Epss(e) => e.is_retryable(),
        }
    }
}
