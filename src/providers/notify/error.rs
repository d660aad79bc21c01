//! How a delivery failed, and which failures may pass by sending again.

use crate::providers::http::{HttpError, is_retryable_status};
use assetscan_domain::text::excerpt;
use std::fmt;
use std::time::Duration;

/// A failed delivery.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    #[error(transparent)]
    Http(#[from] HttpError),
    /// The robot answered HTTP 200 with a non-zero `errcode`.
    #[error("wecom: the robot answered errcode {errcode}: {errmsg:?}")]
    WeCom { errcode: i64, errmsg: String },
    /// Slack answered something other than `200 ok`.
    #[error("slack: the webhook answered HTTP {status}: {code}")]
    Slack {
        status: u16,
        code: SlackError,
        retry_after: Option<Duration>,
    },
}

impl NotifyError {
    /// Transport failures, 429 and 5xx; WeCom errcodes 45009 (rate limit)
    /// and -1 (busy). Everything else is permanent.
    pub fn is_retryable(&self) -> bool {
        match self {
            NotifyError::Http(e) => e.is_retryable(),
            NotifyError::WeCom { errcode, .. } => is_retryable_errcode(*errcode),
            NotifyError::Slack { status, .. } => is_retryable_status(*status),
        }
    }

    /// Without the receiver's answer (see [`HttpError::summary`]): WeCom's
    /// `errmsg` and a Slack body that is not one of its codes are left out.
    pub fn summary(&self) -> String {
        match self {
            NotifyError::Http(e) => e.summary(),
            NotifyError::WeCom { errcode, .. } => {
                format!("wecom: the robot answered errcode {errcode}")
            }
            NotifyError::Slack {
                status,
                code: SlackError::Other(_),
                ..
            } => format!("slack: the webhook answered HTTP {status} (unknown code)"),
            other => other.to_string(),
        }
    }

    /// How long the receiver asked us to wait (Slack's 429 `Retry-After`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            NotifyError::Http(e) => e.retry_after(),
            NotifyError::WeCom { .. } => None,
            NotifyError::Slack { retry_after, .. } => *retry_after,
        }
    }
}

/// 45009 (frequency limit) and -1 (system busy).
fn is_retryable_errcode(errcode: i64) -> bool {
    matches!(errcode, 45009 | -1)
}

/// Slack's plain-text error codes for incoming webhooks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlackError {
    InvalidPayload,
    UserNotFound,
    ActionProhibited,
    ChannelNotFound,
    ChannelIsArchived,
    NoText,
    MissingTextOrFallbackOrAttachments,
    InvalidToken,
    NoService,
    NoTeam,
    RollupError,
    /// Any other body (an excerpt of it), e.g. the JSON of a 429.
    Other(String),
}

impl SlackError {
    pub(super) fn parse(body: &[u8]) -> SlackError {
        let text = excerpt(body);
        match text.as_str() {
            "invalid_payload" => SlackError::InvalidPayload,
            "user_not_found" => SlackError::UserNotFound,
            "action_prohibited" => SlackError::ActionProhibited,
            "channel_not_found" => SlackError::ChannelNotFound,
            "channel_is_archived" => SlackError::ChannelIsArchived,
            "no_text" => SlackError::NoText,
            "missing_text_or_fallback_or_attachments" => {
                SlackError::MissingTextOrFallbackOrAttachments
            }
            "invalid_token" => SlackError::InvalidToken,
            "no_service" => SlackError::NoService,
            "no_team" => SlackError::NoTeam,
            "rollup_error" => SlackError::RollupError,
            _ => SlackError::Other(text),
        }
    }
}

impl fmt::Display for SlackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let code = match self {
            SlackError::InvalidPayload => "invalid_payload",
            SlackError::UserNotFound => "user_not_found",
            SlackError::ActionProhibited => "action_prohibited",
            SlackError::ChannelNotFound => "channel_not_found",
            SlackError::ChannelIsArchived => "channel_is_archived",
            SlackError::NoText => "no_text",
            SlackError::MissingTextOrFallbackOrAttachments => {
                "missing_text_or_fallback_or_attachments"
            }
            SlackError::InvalidToken => "invalid_token",
            SlackError::NoService => "no_service",
            SlackError::NoTeam => "no_team",
            SlackError::RollupError => "rollup_error",
            SlackError::Other(body) => return write!(f, "{body:?}"),
        };
        f.write_str(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_round_trip() {
        for code in [
            "invalid_payload",
            "channel_not_found",
            "channel_is_archived",
            "no_text",
            "invalid_token",
        ] {
            assert_eq!(SlackError::parse(code.as_bytes()).to_string(), code);
        }
        assert_eq!(
            SlackError::parse(b"invalid_payload\n"),
            SlackError::InvalidPayload
        );
        assert_eq!(
            SlackError::parse(b"{\"rate\":1}"),
            SlackError::Other("{\"rate\":1}".into())
        );
    }
}
