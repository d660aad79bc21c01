//! Asset and run ids: the scope of one lock and one fencing counter, and
//! the name of one run. Both become parts of Redis keys and audit records,
//! so both are checked once, here, before anything uses them.

use std::fmt;

/// Longest accepted asset (or run) id, in bytes.
pub const MAX_ASSET_ID_LEN: usize = 128;

/// Most characters of a rejected id quoted in its error: the error goes to
/// logs, events and the object's status, and the input may be any size.
const QUOTED_CHARS: usize = 64;

/// Which kind of id was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdKind {
    Asset,
    Run,
}

impl fmt::Display for IdKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IdKind::Asset => "asset",
            IdKind::Run => "run",
        })
    }
}

/// An id that would break the key layout.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} id {id}: {reason}")]
pub struct InvalidId {
    pub kind: IdKind,
    /// The input, quoted and cut to a bounded prefix.
    pub id: String,
    pub reason: &'static str,
}

/// A validated asset id: the scope of one lock and one fencing counter.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AssetId(String);

impl AssetId {
    /// Rejects ids that would break the hash tag (`{`, `}`), the audit record
    /// (whitespace, control characters) or the key length.
    pub fn new(id: impl Into<String>) -> Result<AssetId, InvalidId> {
        let id = id.into();
        check(IdKind::Asset, &id)?;
        Ok(AssetId(id))
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

/// Validates a run id the same way as an asset id: it is part of a key.
pub fn validate_run(run: &str) -> Result<(), InvalidId> {
    check(IdKind::Run, run)
}

fn check(kind: IdKind, id: &str) -> Result<(), InvalidId> {
    let reason = if id.is_empty() {
        "is empty"
    } else if id.len() > MAX_ASSET_ID_LEN {
        "is longer than 128 bytes"
    } else if id.contains(['{', '}']) {
        "contains '{' or '}'"
    } else if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        "contains whitespace or control characters"
    } else {
        return Ok(());
    };
    Err(InvalidId {
        kind,
        id: quote(id),
        reason,
    })
}

/// `id` quoted (escaped like Rust's `{:?}`), or a prefix of it with its
/// length when it is longer than [`QUOTED_CHARS`] characters.
fn quote(id: &str) -> String {
    match id.char_indices().nth(QUOTED_CHARS) {
        None => format!("{id:?}"),
        Some((cut, _)) => format!("{:?}… ({} bytes)", &id[..cut], id.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_ids_that_break_the_layout() {
        for bad in ["", "a{b", "a}b", "a b", "a\tb", "x\u{7}", &"a".repeat(129)] {
            assert!(AssetId::new(bad).is_err(), "{bad:?} accepted");
        }
        assert!(AssetId::new("host-01.example.com:443").is_ok());
        assert!(validate_run("g3-1700000000000").is_ok());
        assert_eq!(validate_run("a b").map_err(|e| e.kind), Err(IdKind::Run));
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
