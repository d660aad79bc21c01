//! Who may read what the operator serves besides the kubelet's probes:
//! callers send a bearer token; the API server says whose it is
//! (TokenReview) and whether that user may `get` the path
//! (SubjectAccessReview on the non-resource URL), as controller-runtime's
//! metrics filter and kube-rbac-proxy do. Answers are kept briefly
//! ([`cache`]), so a scrape costs no API call each time.
//!
//! No token: 401. A token the API server does not know: 401. A known user
//! without the permission: 403. The API server unreachable: 503 (nothing
//! cached, the next scrape asks again).

mod cache;
mod review;
pub mod tls;

pub use cache::CachePolicy;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cache::{Decision, DecisionCache};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use tracing::warn;

/// The API client the reviews go through, and the recent decisions.
#[derive(Clone)]
pub struct AccessGuard {
    client: kube::Client,
    cache: Arc<Mutex<DecisionCache>>,
}

impl AccessGuard {
    pub fn new(client: kube::Client, policy: CachePolicy) -> Self {
        Self {
            client,
            cache: Arc::new(Mutex::new(DecisionCache::new(policy))),
        }
    }

    /// The cache, also after a panic elsewhere while it was held: its
    /// entries are whole at every point.
    fn decisions(&self) -> std::sync::MutexGuard<'_, DecisionCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn decide(&self, token: &str, path: &str, verb: &str) -> Result<Decision, Response> {
        let key = DecisionCache::key(token, path, verb);
        if let Some(decision) = self.decisions().get(&key, Instant::now()) {
            return Ok(decision);
        }
        match review::decide(&self.client, token, path, verb).await {
            Ok(decision) => {
                self.decisions().insert(key, decision, Instant::now());
                Ok(decision)
            }
            Err(err) => {
                warn!(error = %err, path, "cannot check a caller's access");
                Err((StatusCode::SERVICE_UNAVAILABLE, "cannot check access\n").into_response())
            }
        }
    }
}

/// Middleware: lets the request through only when the API server allows
/// its bearer token's user to use the request's verb on its path.
pub async fn require_access(
    State(guard): State<AccessGuard>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = bearer_token(&request) else {
        return unauthorized();
    };
    let verb = http_verb(request.method());
    match guard.decide(&token, request.uri().path(), &verb).await {
        Ok(Decision::Allowed) => next.run(request).await,
        Ok(Decision::Forbidden) => (StatusCode::FORBIDDEN, "forbidden\n").into_response(),
        Ok(Decision::Unauthenticated) => unauthorized(),
        Err(response) => response,
    }
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "unauthorized\n",
    )
        .into_response()
}

fn bearer_token(request: &Request) -> Option<String> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_owned())
}

/// The verb a non-resource URL request is authorized for: the HTTP method
/// in lower case, as kube-apiserver names it (`get`, `post`, ...).
fn http_verb(method: &Method) -> String {
    if method == Method::HEAD {
        return "get".into();
    }
    method.as_str().to_ascii_lowercase()
}
