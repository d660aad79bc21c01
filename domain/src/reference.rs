//! Names a tenant gives that end up in the path of a request to a service
//! the platform team configured: an inventory id (`target.inventoryRef`),
//! an SBOM's place in its source (`sbom.ref`). The service's base URL is the
//! platform team's; what the tenant adds must stay below it. So a reference
//! is made of segments of a small character set, none of which is `.` or
//! `..` (or any other run of dots), and has no `%`: nothing can be decoded
//! into a separator or a dot segment on the way, by the client or by a proxy
//! or server that decodes before it routes. The operator percent-encodes
//! each segment itself when it builds the URL.
//!
//! The CRD's patterns ([`SEGMENT_PATTERN`]) say the same, so the API server
//! refuses such a reference before the operator sees it; these checks hold
//! for objects admitted before the patterns existed, and for the CLI.

use crate::text::truncate_chars;

/// One segment in the CRD's regular-expression dialect: the allowed
/// characters, at least one of them not a dot.
pub const SEGMENT_PATTERN: &str = "[A-Za-z0-9._~@=,:+-]*[A-Za-z0-9_~@=,:+-][A-Za-z0-9._~@=,:+-]*";

/// The longest reference accepted, in bytes (all its characters are ASCII).
pub const MAX_REF_LEN: usize = 512;

/// Longest piece of input quoted in an error.
const QUOTED_CHARS: usize = 64;

/// Why a reference was refused. Quotes at most 64 characters of it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    #[error("{0:?} is empty or longer than {MAX_REF_LEN} characters")]
    Length(String),
    #[error("{0:?} has an empty segment (a leading, trailing or doubled `/`)")]
    EmptySegment(String),
    #[error("{0:?} has a segment of dots only (`.`, `..`): it would leave its place")]
    DotSegment(String),
    #[error(
        "{0:?} has a character outside A-Z a-z 0-9 . _ ~ @ = , : + - (no `%`, `\\`, `?`, `#` or spaces)"
    )]
    Character(String),
    #[error("{0:?} has a `/`: it must be one segment")]
    NotOneSegment(String),
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '~' | '@' | '=' | ',' | ':' | '+' | '-')
}

/// The segments of a `/`-separated reference, each checked.
pub fn segments(text: &str) -> Result<Vec<&str>, RefError> {
    let quoted = || truncate_chars(text, QUOTED_CHARS);
    if text.is_empty() || text.len() > MAX_REF_LEN {
        return Err(RefError::Length(quoted()));
    }
    let parts: Vec<&str> = text.split('/').collect();
    for part in &parts {
        if part.is_empty() {
            return Err(RefError::EmptySegment(quoted()));
        }
        if !part.chars().all(allowed) {
            return Err(RefError::Character(quoted()));
        }
        if part.chars().all(|c| c == '.') {
            return Err(RefError::DotSegment(quoted()));
        }
    }
    Ok(parts)
}

/// A reference that must be a single segment (an inventory id).
pub fn segment(text: &str) -> Result<&str, RefError> {
    match segments(text)?.as_slice() {
        [one] => Ok(one),
        _ => Err(RefError::NotOneSegment(truncate_chars(text, QUOTED_CHARS))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_stay_below_their_base() {
        for good in [
            "web-01",
            "images/web/1.4.2.cdx.json",
            "sha256:abc",
            "...a",
            "a..b/c",
            "team_a/app@1.0+build=2,x~y",
        ] {
            assert!(segments(good).is_ok(), "{good}");
        }
        for (bad, expected) in [
            ("", RefError::Length(String::new())),
            ("..", RefError::DotSegment("..".into())),
            (".", RefError::DotSegment(".".into())),
            ("a/../b", RefError::DotSegment("a/../b".into())),
            ("a/.../b", RefError::DotSegment("a/.../b".into())),
            ("/a", RefError::EmptySegment("/a".into())),
            ("a/", RefError::EmptySegment("a/".into())),
            ("a//b", RefError::EmptySegment("a//b".into())),
            ("%2e%2e", RefError::Character("%2e%2e".into())),
            ("a%2Fb", RefError::Character("a%2Fb".into())),
            ("a\\..\\b", RefError::Character("a\\..\\b".into())),
            ("a?x=1", RefError::Character("a?x=1".into())),
            ("a#f", RefError::Character("a#f".into())),
            ("a b", RefError::Character("a b".into())),
            ("é", RefError::Character("é".into())),
        ] {
            assert_eq!(segments(bad), Err(expected), "{bad:?}");
        }
        assert!(matches!(
            segments(&"a".repeat(MAX_REF_LEN + 1)),
            Err(RefError::Length(_))
        ));
        assert_eq!(segment("cmdb-1"), Ok("cmdb-1"));
        assert!(matches!(segment("a/b"), Err(RefError::NotOneSegment(_))));
        assert!(matches!(segment(".."), Err(RefError::DotSegment(_))));
    }
}
