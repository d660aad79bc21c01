//! How a vulnerability query failed.

use crate::providers::http::HttpError;

/// A failed vulnerability query.
#[derive(Debug, thiserror::Error)]
pub enum VulnError {
    /// The server kept handing out page tokens; a bug or a loop somewhere.
    #[error("{provider}: still paging after {pages} pages; giving up")]
    TooManyPages { provider: &'static str, pages: u32 },
    #[error(transparent)]
    Http(#[from] HttpError),
}

impl VulnError {
    /// Without the provider's answer (see [`HttpError::summary`]).
    pub fn summary(&self) -> String {
        match self {
            VulnError::Http(e) => e.summary(),
            other => other.to_string(),
        }
    }

    pub fn is_retryable(&self) -> bool {
        match self {
            VulnError::TooManyPages { .. } => false,
            VulnError::Http(e) => e.is_retryable(),
        }
    }
}
