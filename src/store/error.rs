//! Typed errors of the ticket store. The Lua scripts answer with error replies
//! whose first word is a stable code; [`StoreError::from_redis`] maps them.

use assetscan_domain::{IdKind, InvalidId};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("asset {asset} is locked by {holder} for another {pttl_ms} ms")]
    Locked {
        asset: String,
        holder: String,
        pttl_ms: i64,
    },
    #[error("stale fencing token {caller}: the ticket now belongs to token {valid}")]
    StaleToken { caller: u64, valid: u64 },
    #[error("illegal transition {from} -> {to}")]
    IllegalTransition { from: String, to: String },
    #[error("run of ticket {key} was retired: its owner was deleted")]
    RunRetired { key: String },
    /// The claim would supersede a run that confirmed a risk and has not
    /// recorded its notification: that run is finished first.
    #[error("run of ticket {key} is alerting: it finishes before a later run is claimed")]
    EarlierRunAlerting { key: String },
    #[error("ticket {key} not found")]
    TicketNotFound { key: String },
    #[error("ticket {key} is corrupt: {reason}")]
    TicketCorrupt { key: String, reason: String },
    /// `id` is the quoted input, cut to a bounded prefix (see
    /// [`assetscan_domain::InvalidId`]).
    #[error("invalid asset id {id}: {reason}")]
    InvalidAssetId { id: String, reason: &'static str },
    #[error("invalid run id {id}: {reason}")]
    InvalidRunId { id: String, reason: &'static str },
    /// `namespace` is cut to a bounded prefix.
    #[error("invalid namespace {namespace:?}: not a Kubernetes namespace name")]
    InvalidNamespace { namespace: String },
    #[error("script {script} rejected its arguments: {reason}")]
    BadArgs {
        script: &'static str,
        reason: String,
    },
    #[error("unexpected reply from {script}: {reason}")]
    Protocol {
        script: &'static str,
        reason: String,
    },
    #[error("redis error during {op}: {source}{}", refusal_hint(.source))]
    Redis {
        op: &'static str,
        #[source]
        source: redis::RedisError,
    },
    /// No replica acknowledged a write that must survive a failover within
    /// the wait: the write may be lost, so nothing depending on it is done.
    #[error(
        "no redis replica acknowledged the write to {key} within {timeout:?}: it may not survive a failover, so the run does not act on it"
    )]
    NotReplicated {
        key: String,
        timeout: std::time::Duration,
    },
    #[error("cannot connect to redis at {target}: {source}{}", refusal_hint(.source))]
    Connect {
        target: String,
        #[source]
        source: redis::RedisError,
    },
    #[error("invalid redis target ({target}://…): {reason}")]
    InvalidTarget {
        target: String,
        reason: &'static str,
    },
    /// A TLS file that reads but does not hold what its flag needs.
    #[error("redis TLS file {path} ({flag}) holds {expected}")]
    TlsFileContent {
        path: std::path::PathBuf,
        flag: &'static str,
        expected: &'static str,
    },
    #[error("cannot read redis TLS file {path}: {source}")]
    TlsFile {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl From<InvalidId> for StoreError {
    fn from(err: InvalidId) -> StoreError {
        let InvalidId { kind, id, reason } = err;
        match kind {
            IdKind::Asset => StoreError::InvalidAssetId { id, reason },
            IdKind::Run => StoreError::InvalidRunId { id, reason },
        }
    }
}

impl StoreError {
    /// A Redis failure of `op`, for `map_err`: `.map_err(StoreError::redis("renew"))`.
    pub(crate) fn redis(op: &'static str) -> impl Fn(redis::RedisError) -> StoreError + Copy {
        move |source| StoreError::Redis { op, source }
    }

    /// Maps a script's error reply (`CODE detail…`) to its typed error;
    /// anything else stays a Redis error of `op`.
    pub(crate) fn from_redis(op: &'static str, key: &str, err: redis::RedisError) -> StoreError {
        let Some(code) = err.code() else {
            return StoreError::Redis { op, source: err };
        };
        let detail = err.detail().unwrap_or("").trim();
        let words: Vec<&str> = detail.split_whitespace().collect();
        match (code, words.as_slice()) {
            ("LOCKED", [holder, pttl]) => StoreError::Locked {
                asset: key.to_owned(),
                holder: (*holder).to_owned(),
                pttl_ms: pttl.parse().unwrap_or(0),
            },
            ("STALE_TOKEN", [caller, valid]) => StoreError::StaleToken {
                caller: caller.parse().unwrap_or(0),
                valid: valid.parse().unwrap_or(0),
            },
            ("ILLEGAL_TRANSITION", [from, to]) => StoreError::IllegalTransition {
                from: (*from).to_owned(),
                to: (*to).to_owned(),
            },
            ("RUN_RETIRED", words) => StoreError::RunRetired {
                key: words.first().copied().unwrap_or(key).to_owned(),
            },
            ("EARLIER_ALERTING", words) => StoreError::EarlierRunAlerting {
                key: words.first().copied().unwrap_or(key).to_owned(),
            },
            ("TICKET_NOT_FOUND", _) => StoreError::TicketNotFound {
                key: key.to_owned(),
            },
            // The script names the ticket: the claimed one, or the one a
            // claim supersedes.
            ("TICKET_CORRUPT", words) => StoreError::TicketCorrupt {
                key: words.first().copied().unwrap_or(key).to_owned(),
                reason: "not a ticket object".to_owned(),
            },
            ("BAD_ARGS", _) => StoreError::BadArgs {
                script: op,
                reason: detail.to_owned(),
            },
            _ => StoreError::Redis { op, source: err },
        }
    }

    /// Whether the failure is Redis being unreachable or failing, as opposed
    /// to a verdict of the scripts or a refusal of the ACL. Callers retry the
    /// former with backoff.
    pub fn is_unavailable(&self) -> bool {
        match self {
            StoreError::Redis { source, .. } => !is_acl_refusal(source),
            StoreError::Connect { .. } | StoreError::NotReplicated { .. } => true,
            _ => false,
        }
    }

    /// Short stable name, for metrics labels and condition reasons.
    pub fn reason(&self) -> &'static str {
        match self {
            StoreError::Locked { .. } => "Locked",
            StoreError::StaleToken { .. } => "StaleToken",
            StoreError::IllegalTransition { .. } => "IllegalTransition",
            StoreError::RunRetired { .. } => "RunRetired",
            StoreError::EarlierRunAlerting { .. } => "EarlierRunAlerting",
            StoreError::TicketNotFound { .. } => "TicketNotFound",
            StoreError::TicketCorrupt { .. } => "TicketCorrupt",
            StoreError::InvalidAssetId { .. } => "InvalidAssetId",
            StoreError::InvalidRunId { .. } => "InvalidRunId",
            StoreError::InvalidNamespace { .. } => "InvalidNamespace",
            StoreError::BadArgs { .. } => "BadArgs",
            StoreError::Protocol { .. } => "Protocol",
            StoreError::Redis { source, .. } if is_acl_refusal(source) => "RedisPermissionDenied",
            StoreError::Redis { .. } => "RedisUnavailable",
            StoreError::Connect { .. } => "RedisUnavailable",
            StoreError::NotReplicated { .. } => "RedisNotReplicated",
            StoreError::InvalidTarget { .. }
            | StoreError::TlsFile { .. }
            | StoreError::TlsFileContent { .. } => "RedisConfig",
        }
    }
}

/// Whether Redis refused a command to the operator's user: `NOPERM` for a
/// command sent directly (also when the client reports it wrapped, as for
/// `SCAN`), and this message for one a Lua script called (which names the
/// script and its line, not the command).
fn is_acl_refusal(err: &redis::RedisError) -> bool {
    let text = err.to_string();
    text.contains("no permissions to run") || text.contains("can't run this command or subcommand")
}

/// What to do about an ACL refusal, appended to its message.
fn refusal_hint(err: &redis::RedisError) -> &'static str {
    if is_acl_refusal(err) {
        " (the operator's Redis user lacks a command it needs: grant the ACL rules in docs/redis.md)"
    } else {
        ""
    }
}
