//! The Redis key layout. Every key of one asset carries the asset id as a
//! hash tag, so one Lua script may touch them all, also on Redis Cluster.

use super::StoreError;
use std::fmt;

/// Longest accepted asset id, in bytes.
pub const MAX_ASSET_ID_LEN: usize = 128;

/// Most characters of a rejected id quoted in its error: the error goes to
/// logs, events and the object's status, and the input may be any size.
const QUOTED_CHARS: usize = 64;

/// A validated asset id: the scope of one lock and one fencing counter.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AssetId(String);

impl AssetId {
    /// Rejects ids that would break the hash tag (`{`, `}`), the audit record
    /// (whitespace, control characters) or the key length.
    pub fn new(id: impl Into<String>) -> Result<AssetId, StoreError> {
        let id = id.into();
        let reason = if id.is_empty() {
            Some("is empty")
        } else if id.len() > MAX_ASSET_ID_LEN {
            Some("is longer than 128 bytes")
        } else if id.contains(['{', '}']) {
            Some("contains '{' or '}'")
        } else if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
            Some("contains whitespace or control characters")
        } else {
            None
        };
        match reason {
            Some(reason) => Err(StoreError::InvalidAssetId {
                id: quote(&id),
                reason,
            }),
            None => Ok(AssetId(id)),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AssetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `id` quoted (escaped like Rust's `{:?}`), or a prefix of it with its
/// length when it is longer than [`QUOTED_CHARS`] characters.
fn quote(id: &str) -> String {
    match id.char_indices().nth(QUOTED_CHARS) {
        None => format!("{id:?}"),
        Some((cut, _)) => format!("{:?}… ({} bytes)", &id[..cut], id.len()),
    }
}

/// Validates a run id the same way as an asset id: it is part of a key.
pub(crate) fn validate_run(run: &str) -> Result<(), StoreError> {
    AssetId::new(run).map(|_| ()).map_err(|err| match err {
        StoreError::InvalidAssetId { id, reason } => StoreError::InvalidRunId { id, reason },
        other => other,
    })
}

/// The keys of one asset under a prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssetKeys {
    base: String,
}

impl AssetKeys {
    pub fn new(prefix: &str, asset: &AssetId) -> AssetKeys {
        AssetKeys {
            base: format!("{prefix}:{{{asset}}}"),
        }
    }

    /// `<prefix>:{<asset>}:lock`: holder id, PX ttl.
    pub fn lock(&self) -> String {
        format!("{}:lock", self.base)
    }

    /// `<prefix>:{<asset>}:fence`: the monotonic counter; never expires.
    pub fn fence(&self) -> String {
        format!("{}:fence", self.base)
    }

    /// `<prefix>:{<asset>}:ticket:<run>`: the ticket JSON.
    pub fn ticket(&self, run: &str) -> String {
        format!("{}:ticket:{run}", self.base)
    }

    /// `<prefix>:{<asset>}:facts:<run>`: the run's facts, one hash field per
    /// fact, expiring and removed with the ticket.
    pub fn facts(&self, run: &str) -> String {
        format!("{}:facts:{run}", self.base)
    }

    /// Pattern matching every ticket of the asset.
    pub fn ticket_pattern(&self) -> String {
        format!("{}:ticket:*", self.base)
    }

    /// `<prefix>:{<asset>}:retired:<owner>`: the tombstone of an owner whose
    /// runs were retired; `acquire.lua` refuses its runs while it exists.
    /// The empty owner's never exists: runs of no owner pass it.
    pub fn retired(&self, owner: &str) -> String {
        format!("{}:retired:{owner}", self.base)
    }

    /// `<prefix>:{<asset>}:audit`: capped stream of accepted and rejected writes.
    pub fn audit(&self) -> String {
        format!("{}:audit", self.base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_one_hash_tag() {
        let keys = AssetKeys::new("asc", &AssetId::new("web-01").unwrap());
        assert_eq!(keys.lock(), "asc:{web-01}:lock");
        assert_eq!(keys.fence(), "asc:{web-01}:fence");
        assert_eq!(keys.ticket("r1"), "asc:{web-01}:ticket:r1");
        assert_eq!(keys.facts("r1"), "asc:{web-01}:facts:r1");
        assert_eq!(keys.audit(), "asc:{web-01}:audit");
        assert_eq!(keys.retired("0a1b2c3d"), "asc:{web-01}:retired:0a1b2c3d");
    }

    #[test]
    fn rejects_ids_that_break_the_layout() {
        for bad in ["", "a{b", "a}b", "a b", "a\tb", "x\u{7}", &"a".repeat(129)] {
            assert!(AssetId::new(bad).is_err(), "{bad:?} accepted");
        }
        assert!(AssetId::new("host-01.example.com:443").is_ok());
        assert!(validate_run("g3-1700000000000").is_ok());
        assert!(matches!(
            validate_run("a b"),
            Err(StoreError::InvalidRunId { .. })
        ));
    }

    #[test]
    fn errors_quote_a_bounded_prefix_of_the_input() {
        let err = AssetId::new("a b").unwrap_err().to_string();
        assert_eq!(
            err,
            r#"invalid asset id "a b": contains whitespace or control characters"#
        );
        let huge = format!("{{{}", "é".repeat(5_000));
        let err = AssetId::new(huge).unwrap_err().to_string();
        assert!(err.len() < 300, "{} bytes: {err}", err.len());
        assert!(err.contains("… (10001 bytes)"), "{err}");
        assert!(err.ends_with("is longer than 128 bytes"), "{err}");
    }
}
