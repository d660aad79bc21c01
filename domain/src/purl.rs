//! A package URL taken apart as the purl specification writes it
//! (`pkg:type/namespace/name@version?qualifiers#subpath`), each part
//! percent-decoded and nothing else: no part's case is changed but the
//! type's and the qualifier keys' (which the specification makes
//! case-insensitive). The specification also lowercases the names of some
//! types, which their ecosystems do not (Go module paths are
//! case-sensitive: `github.com/BurntSushi/toml`); a purl crate that applies
//! those rules would ask about names no advisory uses, so what an ecosystem
//! does to a name is the business of the mapping to advisory coordinates.

use percent_encoding::percent_decode_str;
use std::collections::BTreeMap;

/// The parts of a package URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PurlParts {
    /// Lowercase.
    pub ty: String,
    /// `/`-separated segments, each decoded; empty when there is none.
    pub namespace: String,
    pub name: String,
    pub version: Option<String>,
    /// By lowercase key; values decoded.
    pub qualifiers: BTreeMap<String, String>,
}

/// Why a text is not a package URL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PurlError {
    #[error("does not start with `pkg:`")]
    Scheme,
    #[error("has no type")]
    Type,
    #[error("has no name")]
    Name,
    #[error("has a part that is not percent-encoded UTF-8")]
    Encoding,
}

impl PurlParts {
    pub fn parse(text: &str) -> Result<PurlParts, PurlError> {
        let scheme_len = "pkg:".len();
        let body = match text.get(..scheme_len) {
            Some(scheme) if scheme.eq_ignore_ascii_case("pkg:") => &text[scheme_len..],
            _ => return Err(PurlError::Scheme),
        };
        // The subpath, then the qualifiers, are cut from the right.
        let body = body.rsplit_once('#').map_or(body, |(before, _)| before);
        let (body, qualifiers) = match body.rsplit_once('?') {
            Some((before, query)) => (before, qualifiers(query)?),
            None => (body, BTreeMap::new()),
        };
        let body = body.trim_matches('/');
        let (ty, rest) = body.split_once('/').ok_or(PurlError::Type)?;
        let ty_ok = ty.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && ty
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-'));
        if !ty_ok {
            return Err(PurlError::Type);
        }
        // The version follows the last `@` of the last segment: an `@` in
        // a namespace (an npm scope some tools leave unencoded) is not one.
        let rest = rest.trim_matches('/');
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (path, version) = match rest[last_slash..].rfind('@') {
            Some(at) => (
                &rest[..last_slash + at],
                Some(decode(&rest[last_slash + at + 1..])?),
            ),
            None => (rest, None),
        };
        let mut segments = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(decode)
            .collect::<Result<Vec<_>, _>>()?;
        let name = segments
            .pop()
            .filter(|n| !n.is_empty())
            .ok_or(PurlError::Name)?;
        Ok(PurlParts {
            ty: ty.to_ascii_lowercase(),
            namespace: segments.join("/"),
            name,
            version: version.filter(|v| !v.is_empty()),
            qualifiers,
        })
    }

    pub fn qualifier(&self, key: &str) -> Option<&str> {
        self.qualifiers
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

fn qualifiers(query: &str) -> Result<BTreeMap<String, String>, PurlError> {
    let mut map = BTreeMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        if let Some((key, value)) = pair.split_once('=') {
            map.insert(key.to_ascii_lowercase(), decode(value)?);
        }
    }
    Ok(map)
}

fn decode(text: &str) -> Result<String, PurlError> {
    percent_decode_str(text)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| PurlError::Encoding)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(text: &str) -> PurlParts {
        PurlParts::parse(text).unwrap()
    }

    #[test]
    fn the_parts_keep_their_case_and_are_decoded() {
        let go = parts("pkg:golang/github.com/CycloneDX/cyclonedx-go@v0.7.0");
        assert_eq!(
            (go.ty.as_str(), go.namespace.as_str(), go.name.as_str()),
            ("golang", "github.com/CycloneDX", "cyclonedx-go")
        );
        assert_eq!(go.version.as_deref(), Some("v0.7.0"));

        let deb = parts(
            "pkg:deb/debian/bsdutils@1:2.29.2-1+deb9u1?arch=amd64&upstream=util-linux%402.29.2-1%2Bdeb9u1&distro=debian-9",
        );
        assert_eq!(deb.name, "bsdutils");
        assert_eq!(deb.version.as_deref(), Some("1:2.29.2-1+deb9u1"));
        assert_eq!(
            deb.qualifier("upstream"),
            Some("util-linux@2.29.2-1+deb9u1")
        );
        assert_eq!(deb.qualifier("distro"), Some("debian-9"));

        let npm = parts("pkg:NPM/%40babel/core@7.0.0#lib");
        assert_eq!((npm.ty.as_str(), npm.namespace.as_str()), ("npm", "@babel"));
        let unencoded = parts("pkg:npm/@babel/core");
        assert_eq!(
            (unencoded.namespace.as_str(), unencoded.version),
            ("@babel", None)
        );
    }

    #[test]
    fn what_is_not_a_purl_says_why() {
        for (text, why) in [
            ("npm/lodash@1", PurlError::Scheme),
            ("pkg:", PurlError::Type),
            ("pkg:1x/y@1", PurlError::Type),
            ("pkg:npm/@1.0.0", PurlError::Name),
            ("pkg:npm/a%ff@1", PurlError::Encoding),
        ] {
            assert_eq!(PurlParts::parse(text), Err(why), "{text}");
        }
    }
}
