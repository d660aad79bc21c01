//! How an HTTP exchange with a provider failed, and which failures may
//! pass by asking again.

use std::time::Duration;

/// A failed HTTP exchange, with enough context to act on: which provider,
/// which endpoint (redacted), what status, the start of the body.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{provider}: request to {endpoint} timed out after {timeout_ms} ms")]
    Timeout {
        provider: &'static str,
        endpoint: String,
        timeout_ms: u64,
    },
    #[error("{provider}: cannot connect to {endpoint}: {reason}")]
    Connect {
        provider: &'static str,
        endpoint: String,
        reason: String,
    },
    /// The connection broke during the exchange (reset, protocol error).
    #[error("{provider}: transport error with {endpoint}: {reason}")]
    Transport {
        provider: &'static str,
        endpoint: String,
        reason: String,
    },
    #[error("{provider}: {endpoint} answered HTTP {status}: {excerpt:?}")]
    Status {
        provider: &'static str,
        endpoint: String,
        status: u16,
        excerpt: String,
        /// From a `Retry-After: <seconds>` header (429, 503), if any.
        retry_after: Option<Duration>,
    },
    #[error("{provider}: the response from {endpoint} is larger than the {limit} byte cap")]
    BodyTooLarge {
        provider: &'static str,
        endpoint: String,
        limit: u64,
    },
    /// The body is not what the API documents (not JSON, wrong shape, values
    /// out of range).
    #[error("{provider}: unexpected response from {endpoint}: {reason}; body starts {excerpt:?}")]
    Malformed {
        provider: &'static str,
        endpoint: String,
        /// What is wrong, in the operator's words only (`not JSON`): the
        /// `reason` may quote the body.
        class: &'static str,
        reason: String,
        excerpt: String,
    },
    /// The egress policy refused an address of the endpoint: no
    /// connection was attempted, and none will be while the policy and the
    /// host's addresses stay as they are.
    #[error("{provider}: {endpoint}: {refusal}")]
    EgressRefused {
        provider: &'static str,
        endpoint: String,
        refusal: crate::providers::egress::Refusal,
    },
    /// The request could not even be built (a header value from the config
    /// that is not a valid header, for instance).
    #[error("{provider}: cannot build the request: {reason}")]
    Request {
        provider: &'static str,
        reason: String,
    },
}

impl HttpError {
    /// Timeouts, connection failures, broken transfers, 408, 429 and 5xx may
    /// succeed later. Other 4xx, oversized and malformed bodies will not
    /// change by asking again.
    pub fn is_retryable(&self) -> bool {
        match self {
            HttpError::Timeout { .. } | HttpError::Connect { .. } | HttpError::Transport { .. } => {
                true
            }
            HttpError::Status { status, .. } => is_retryable_status(*status),
            HttpError::BodyTooLarge { .. }
            | HttpError::Malformed { .. }
            | HttpError::EgressRefused { .. }
            | HttpError::Request { .. } => false,
        }
    }

    /// How long the server asked us to wait, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            HttpError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The failure without a word of the provider's answer (no body excerpt,
    /// no parser message that may quote it): what a tenant reads in the
    /// status. The full error goes to the operator's log.
    pub fn summary(&self) -> String {
        match self {
            HttpError::Status {
                provider,
                endpoint,
                status,
                ..
            } => format!("{provider}: {endpoint} answered HTTP {status}"),
            HttpError::Malformed {
                provider,
                endpoint,
                class,
                ..
            } => format!("{provider}: unexpected response from {endpoint}: {class}"),
            other => other.to_string(),
        }
    }

    /// The HTTP status, when the server answered one.
    pub fn status(&self) -> Option<u16> {
        match self {
            HttpError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// 408 Request Timeout, 429 Too Many Requests and every 5xx.
pub fn is_retryable_status(status: u16) -> bool {
    status == 408 || status == 429 || (500..600).contains(&status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_statuses() {
        for s in [408, 429, 500, 502, 503, 599] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [200, 400, 401, 403, 404, 410, 422] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }
}
