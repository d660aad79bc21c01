//! The HTTP plumbing every provider shares: one way to build a client, one
//! capped body reader, one classifier from failures to [`HttpError`], and one
//! rule for what of a URL may be shown.
//!
//! Provider errors never show a query string or user info, and for webhooks
//! (whose path or query *is* the credential) only scheme, host and port.

use super::ConfigError;
use super::secret::SecretFrom;
use crate::text::{excerpt, truncate_chars};
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{RequestBuilder, StatusCode, Url};
use serde::de::DeserializeOwned;
use std::error::Error as _;
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
        reason: String,
        excerpt: String,
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
pub(crate) fn redact(url: &Url, exposure: Exposure) -> String {
    let host = url.host_str().unwrap_or("?");
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    let path = match exposure {
        Exposure::Path => url.path(),
        Exposure::HostOnly => "/…",
    };
    format!("{}://{host}{port}{path}", url.scheme())
}

/// One provider's HTTP client: its name for errors, its per-call timeout
/// (connect, headers and body together), its body cap.
#[derive(Clone, Debug)]
pub(crate) struct HttpClient {
    provider: &'static str,
    client: reqwest::Client,
    timeout: Duration,
    max_body_bytes: u64,
    exposure: Exposure,
}

/// A response read in full, within the cap, not yet judged.
pub(crate) struct Reply {
    pub provider: &'static str,
    pub endpoint: String,
    pub status: StatusCode,
    pub retry_after: Option<Duration>,
    pub body: Vec<u8>,
}

impl HttpClient {
    /// Checks the configured timeout and body cap. Redirects are followed
    /// (at most 5) only for [`Exposure::Path`] endpoints; a webhook is never
    /// redirected, so its credential is not replayed to another host.
    pub fn new(
        provider: &'static str,
        timeout: Duration,
        max_body_bytes: u64,
        exposure: Exposure,
    ) -> Result<HttpClient, ConfigError> {
        let timeout = check_timeout(provider, timeout)?;
        let max_body_bytes = body_cap(provider, max_body_bytes)?;
        super::install_crypto_provider();
        let redirects = match exposure {
            Exposure::Path => reqwest::redirect::Policy::limited(5),
            Exposure::HostOnly => reqwest::redirect::Policy::none(),
        };
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(redirects)
            .user_agent(concat!("assetscan-operator/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ConfigError::HttpClient {
                provider,
                reason: describe(e),
            })?;
        Ok(HttpClient {
            provider,
            client,
            timeout,
            max_body_bytes,
            exposure,
        })
    }

    pub fn get(&self, url: Url) -> RequestBuilder {
        self.client.get(url)
    }

    pub fn post(&self, url: Url) -> RequestBuilder {
        self.client.post(url)
    }

    /// Sends the request and reads the body within the cap. Any status is a
    /// [`Reply`]; only transport failures and oversized bodies are errors.
    pub async fn send(&self, request: RequestBuilder) -> Result<Reply, HttpError> {
        let request = request.build().map_err(|e| HttpError::Request {
            provider: self.provider,
            reason: describe(e),
        })?;
        let url = request.url().clone();
        let endpoint = redact(&url, self.exposure);
        let mut response = self
            .client
            .execute(request)
            .await
            .map_err(|e| self.transport_error(&url, &endpoint, e))?;
        let status = response.status();
        let retry_after = retry_after(response.headers());
        let body = match read_capped(&mut response, self.max_body_bytes).await {
            Ok(body) => body,
            Err(BodyError::TooLarge) => {
                return Err(HttpError::BodyTooLarge {
                    provider: self.provider,
                    endpoint,
                    limit: self.max_body_bytes,
                });
            }
            Err(BodyError::Transport(e)) => return Err(self.transport_error(&url, &endpoint, e)),
        };
        Ok(Reply {
            provider: self.provider,
            endpoint,
            status,
            retry_after,
            body,
        })
    }

    /// `send`, then demand a 2xx and decode the body as JSON.
    pub async fn json<T: DeserializeOwned>(&self, request: RequestBuilder) -> Result<T, HttpError> {
        self.send(request).await?.success()?.json()
    }

    fn transport_error(&self, url: &Url, endpoint: &str, err: reqwest::Error) -> HttpError {
        let (timed_out, connect) = (err.is_timeout(), err.is_connect());
        let reason = scrub(&describe(err), url);
        let (provider, endpoint) = (self.provider, endpoint.to_owned());
        if timed_out {
            HttpError::Timeout {
                provider,
                endpoint,
                timeout_ms: self.timeout.as_millis() as u64,
            }
        } else if connect {
            HttpError::Connect {
                provider,
                endpoint,
                reason,
            }
        } else {
            HttpError::Transport {
                provider,
                endpoint,
                reason,
            }
        }
    }
}

impl Reply {
    /// The reply if its status is 2xx, else [`HttpError::Status`].
    pub fn success(self) -> Result<Reply, HttpError> {
        if self.status.is_success() {
            Ok(self)
        } else {
            Err(self.status_error())
        }
    }

    pub fn status_error(&self) -> HttpError {
        HttpError::Status {
            provider: self.provider,
            endpoint: self.endpoint.clone(),
            status: self.status.as_u16(),
            excerpt: self.excerpt(),
            retry_after: self.retry_after,
        }
    }

    pub fn json<T: DeserializeOwned>(&self) -> Result<T, HttpError> {
        serde_json::from_slice(&self.body).map_err(|e| {
            let what = match e.classify() {
                serde_json::error::Category::Data => "JSON of the wrong shape",
                _ => "not JSON",
            };
            self.malformed(format!("{what}: {e}"))
        })
    }

    /// A [`HttpError::Malformed`] about this reply.
    pub fn malformed(&self, reason: impl Into<String>) -> HttpError {
        HttpError::Malformed {
            provider: self.provider,
            endpoint: self.endpoint.clone(),
            reason: reason.into(),
            excerpt: self.excerpt(),
        }
    }

    pub fn excerpt(&self) -> String {
        excerpt(&self.body)
    }
}

enum BodyError {
    TooLarge,
    Transport(reqwest::Error),
}

/// Reads the whole body but never more than `limit` bytes: a declared
/// `Content-Length` over the cap fails before reading anything, a chunked
/// body fails at the chunk that crosses it. Memory stays bounded by the cap.
async fn read_capped(response: &mut reqwest::Response, limit: u64) -> Result<Vec<u8>, BodyError> {
    let declared = response.content_length();
    if declared.is_some_and(|n| n > limit) {
        return Err(BodyError::TooLarge);
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(0) as usize);
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Transport)? {
        if (body.len() + chunk.len()) as u64 > limit {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `Retry-After` in its delta-seconds form. The HTTP-date form is rare for
/// APIs (Slack sends seconds) and is ignored.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?;
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// The error and its causes on one line, without the URL reqwest attaches.
fn describe(err: reqwest::Error) -> String {
    let err = err.without_url();
    let mut text = err.to_string();
    let mut next = err.source();
    while let Some(cause) = next {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        next = cause.source();
    }
    truncate_chars(&text, 300)
}

/// Belt and braces: should a cause ever quote the URL, replace it (and its
/// query and path, where credentials live) before the text reaches an error.
fn scrub(text: &str, url: &Url) -> String {
    let mut text = text.replace(url.as_str(), "<url>");
    if let Some(query) = url.query().filter(|q| !q.is_empty()) {
        text = text.replace(query, "***");
    }
    if url.path().len() > 1 {
        text = text.replace(url.path(), "/***");
    }
    text
}

/// A per-call `timeout` from the config: 1 ms to 10 minutes.
pub(crate) fn check_timeout(
    provider: &'static str,
    timeout: Duration,
) -> Result<Duration, ConfigError> {
    if timeout.is_zero() || timeout > Duration::from_secs(600) {
        return Err(ConfigError::invalid(
            provider,
            "timeout",
            format!("{timeout:?} is outside 1ms..=10m"),
        ));
    }
    Ok(timeout)
}

/// A body cap from a `maxBodyBytes` config value: at least 1 KiB.
fn body_cap(provider: &'static str, bytes: u64) -> Result<u64, ConfigError> {
    if bytes < 1024 {
        return Err(ConfigError::invalid(
            provider,
            "maxBodyBytes",
            format!("{bytes} is below the 1024 byte minimum"),
        ));
    }
    Ok(bytes)
}

/// An absolute `http`/`https` URL from the config. The error never repeats the
/// input, which may be a secret.
pub(crate) fn parse_http_url(
    provider: &'static str,
    field: &'static str,
    text: &str,
) -> Result<Url, ConfigError> {
    let url = Url::parse(text.trim())
        .map_err(|e| ConfigError::invalid(provider, field, format!("not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
        return Err(ConfigError::invalid(
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
    ) -> Result<SecretUrl, ConfigError> {
        let secret = from
            .load()
            .map_err(|e| ConfigError::secret(provider, field, e))?;
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
    fn retryable_statuses() {
        for s in [408, 429, 500, 502, 503, 599] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [200, 400, 401, 403, 404, 410, 422] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }

    #[test]
    fn config_values_are_checked() {
        assert!(check_timeout("p", Duration::ZERO).is_err());
        assert!(check_timeout("p", Duration::from_secs(5)).is_ok());
        assert!(check_timeout("p", Duration::from_secs(3600)).is_err());
        assert!(body_cap("p", 10).is_err());
        let err = parse_http_url("p", "urlFrom", "ftp://secret-host/k").unwrap_err();
        assert!(!err.to_string().contains("secret-host"), "{err}");
        assert!(parse_http_url("p", "baseUrl", "mailto:a@b").is_err());
    }
}
