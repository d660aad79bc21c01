//! What of a URL may be shown, and URLs from the configuration.
//!
//! Provider errors never show a query string or user info, and for webhooks
//! (whose path or query *is* the credential) only scheme, host and port.

use crate::providers::error::ProviderConfigError;
use crate::providers::secret::SecretFrom;
use reqwest::Url;

/// How much of a request's URL errors and logs may show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exposure {
    /// Scheme, host, port and path: the URL holds no secret (feeds, APIs).
    Path,
    /// Scheme, host and port only: the path or query is the credential.
    HostOnly,
}

/// `scheme://host:port/path` or `scheme://host:port/…`; never user info,
/// query or fragment.
pub(super) fn redact(url: &Url, exposure: Exposure) -> String {
    let host = url.host_str().unwrap_or("?");
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    let path = match exposure {
        Exposure::Path => url.path(),
        Exposure::HostOnly => "/…",
    };
    format!("{}://{host}{port}{path}", url.scheme())
}

/// Belt and braces: should a cause ever quote the URL, replace it (and its
/// query and path, where credentials live) before the text reaches an error.
pub(super) fn scrub(text: &str, url: &Url) -> String {
    let mut text = text.replace(url.as_str(), "<url>");
    if let Some(query) = url.query().filter(|q| !q.is_empty()) {
        text = text.replace(query, "***");
    }
    if url.path().len() > 1 {
        text = text.replace(url.path(), "/***");
    }
    text
}

/// An absolute `http`/`https` URL from the config. The error never repeats the
/// input, which may be a secret.
pub(crate) fn parse_http_url(
    provider: &'static str,
    field: &'static str,
    text: &str,
) -> Result<Url, ProviderConfigError> {
    let url = Url::parse(text.trim())
        .map_err(|e| ProviderConfigError::invalid(provider, field, format!("not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
        return Err(ProviderConfigError::invalid(
            provider,
            field,
            "must be an http or https URL",
        ));
    }
    Ok(url)
}

/// A URL that is itself a credential (a webhook URL): loaded from its
/// secret source and checked once; `Debug` shows scheme, host and port only.
#[derive(Clone)]
pub(crate) struct SecretUrl(Url);

impl SecretUrl {
    pub fn load(
        provider: &'static str,
        field: &'static str,
        from: &SecretFrom,
    ) -> Result<SecretUrl, ProviderConfigError> {
        let secret = from
            .load()
            .map_err(|e| ProviderConfigError::secret(provider, field, e))?;
        parse_http_url(provider, field, secret.expose()).map(SecretUrl)
    }

    pub fn url(&self) -> Url {
        self.0.clone()
    }
}

impl std::fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redact(&self.0, Exposure::HostOnly))
    }
}

/// `base` with `segments` appended as path segments (each percent-encoded,
/// so an asset id or vulnerability id cannot change the path's structure).
pub(crate) fn join_path(base: &Url, segments: &[&str]) -> Url {
    let mut url = base.clone();
    if let Ok(mut path) = url.path_segments_mut() {
        path.pop_if_empty().extend(segments);
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_hides_credentials() {
        let url = Url::parse("https://user:pw@hooks.example.com:8443/services/T1/B2/XyZ?key=abc#f")
            .unwrap();
        assert_eq!(
            redact(&url, Exposure::Path),
            "https://hooks.example.com:8443/services/T1/B2/XyZ"
        );
        assert_eq!(
            redact(&url, Exposure::HostOnly),
            "https://hooks.example.com:8443/…"
        );
        let scrubbed = scrub("failed for https://x/services/T1/B2/XyZ?key=abc", &url);
        assert!(
            !scrubbed.contains("XyZ") && !scrubbed.contains("abc"),
            "{scrubbed}"
        );
    }

    #[test]
    fn join_path_encodes_segments() {
        let base = Url::parse("http://127.0.0.1:1/api/").unwrap();
        assert_eq!(
            join_path(&base, &["assets", "a/b c"]).as_str(),
            "http://127.0.0.1:1/api/assets/a%2Fb%20c"
        );
        let bare = Url::parse("http://h").unwrap();
        assert_eq!(
            join_path(&bare, &["v1", "vulns", "GHSA-1"]).as_str(),
            "http://h/v1/vulns/GHSA-1"
        );
    }

    #[test]
    fn config_urls_are_checked_without_quoting_them() {
        let err = parse_http_url("p", "urlFrom", "ftp://secret-host/k").unwrap_err();
        assert!(!err.to_string().contains("secret-host"), "{err}");
        assert!(parse_http_url("p", "baseUrl", "mailto:a@b").is_err());
    }
}
