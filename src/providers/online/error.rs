//! How the online check failed.

use crate::providers::egress::Refusal;
use crate::providers::http::HttpError;

#[derive(Debug, thiserror::Error)]
pub enum OnlineError {
    /// The target gives nothing to probe, or needs a probe that is not
    /// configured. Not retryable.
    #[error("online check: {0}")]
    InvalidTarget(String),
    /// The host name did not resolve in time or at all. Retryable: DNS
    /// hiccups pass, and an unresolvable name is not proof of "offline".
    #[error("online check: cannot resolve {host}: {reason}")]
    Resolve { host: String, reason: String },
    /// The egress policy refuses an address the host resolved to: no
    /// connection was attempted. Not retryable.
    #[error("online check: {host}: {refusal}")]
    Refused { host: String, refusal: Refusal },
    #[error(transparent)]
    Http(#[from] HttpError),
}

impl OnlineError {
    /// Without the provider's answer (see [`HttpError::summary`]).
    pub fn summary(&self) -> String {
        match self {
            OnlineError::Http(e) => e.summary(),
            other => other.to_string(),
        }
    }

    pub fn is_retryable(&self) -> bool {
        match self {
            OnlineError::InvalidTarget(_) | OnlineError::Refused { .. } => false,
            OnlineError::Resolve { .. } => true,
            OnlineError::Http(e) => e.is_retryable(),
        }
    }
}
