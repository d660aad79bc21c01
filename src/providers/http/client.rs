//! One provider's HTTP client: built one way, reading bodies within a cap,
//! classifying every failure into an [`HttpError`].

use super::error::HttpError;
use super::guard::EgressGuard;
use super::settings::{HttpProfile, HttpSettings, Resolved};
use super::url::{Exposure, redact, scrub};
use crate::providers::egress::Refusal;
use crate::providers::error::ProviderConfigError;
use crate::providers::secret::Secret;
use assetscan_domain::text::{excerpt, truncate_chars};
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::{RequestBuilder, StatusCode, Url};
use serde::de::DeserializeOwned;
use std::error::Error as _;
use std::time::Duration;

/// reqwest is built without a default TLS crypto provider; install ring's,
/// process-wide. Harmless when one is installed already (by an earlier call
/// or by another library).
pub fn install_crypto_provider() {
    // `Err` only says a provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// One provider's HTTP client: its name for errors, its per-call timeout
/// (connect, headers and body together), its body cap, its bearer token.
#[derive(Clone, Debug)]
pub(crate) struct HttpClient {
    provider: &'static str,
    client: reqwest::Client,
    timeout: Duration,
    max_body_bytes: u64,
    exposure: Exposure,
    token: Option<Secret>,
    /// The egress policy its connections pass, for a URL a tenant wrote.
    egress: Option<EgressGuard>,
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
    /// The one constructor: `settings` over `profile`'s defaults, checked,
    /// the bearer token read. Redirects are followed (at most 5) only where
    /// the profile says so (APIs and feeds); a webhook is never redirected,
    /// so its credential is not replayed to another host, nor a document
    /// source, so its documents come from its base URL alone.
    pub fn new(
        profile: &HttpProfile,
        settings: &HttpSettings,
    ) -> Result<HttpClient, ProviderConfigError> {
        let (provider, exposure) = (profile.provider, profile.exposure);
        let Resolved {
            timeout,
            max_body_bytes,
            token,
            egress,
        } = settings.resolve(profile)?;
        install_crypto_provider();
        let redirects = if profile.follow_redirects {
            reqwest::redirect::Policy::limited(5)
        } else {
            reqwest::redirect::Policy::none()
        };
        let builder = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(redirects)
            .user_agent(concat!("assetscan-operator/", env!("CARGO_PKG_VERSION")));
        let builder = match &egress {
            Some(guard) => builder.dns_resolver(guard.clone()).no_proxy(),
            None => builder,
        };
        let client = builder
            .build()
            .map_err(|e| ProviderConfigError::HttpClient {
                provider,
                reason: describe(e),
            })?;
        Ok(HttpClient {
            provider,
            client,
            timeout,
            max_body_bytes,
            exposure,
            token,
            egress,
        })
    }

    pub fn get(&self, url: Url) -> RequestBuilder {
        self.authorized(self.client.get(url))
    }

    pub fn post(&self, url: Url) -> RequestBuilder {
        self.authorized(self.client.post(url))
    }

    fn authorized(&self, request: RequestBuilder) -> RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token.expose()),
            None => request,
        }
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
        if let Some(guard) = &self.egress
            && let Err(refusal) = guard.check_literal(&url)
        {
            return Err(self.refused(endpoint, refusal));
        }
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

    fn refused(&self, endpoint: String, refusal: Refusal) -> HttpError {
        HttpError::EgressRefused {
            provider: self.provider,
            endpoint,
            refusal,
        }
    }

    fn transport_error(&self, url: &Url, endpoint: &str, err: reqwest::Error) -> HttpError {
        if let Some(refusal) = refusal_in(&err) {
            return self.refused(endpoint.to_owned(), refusal);
        }
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
            self.malformed(what, format!("{what}: {e}"))
        })
    }

    /// A [`HttpError::Malformed`] about this reply.
    pub fn malformed(&self, class: &'static str, reason: impl Into<String>) -> HttpError {
        HttpError::Malformed {
            provider: self.provider,
            endpoint: self.endpoint.clone(),
            class,
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
/// The egress policy's refusal, when the guard's resolver refused the host.
fn refusal_in(err: &reqwest::Error) -> Option<Refusal> {
    let mut next = err.source();
    while let Some(cause) = next {
        if let Some(refusal) = cause.downcast_ref::<Refusal>() {
            return Some(refusal.clone());
        }
        next = cause.source();
    }
    None
}

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
