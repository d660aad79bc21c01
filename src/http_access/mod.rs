//! Who may read what the operator serves besides the kubelet's probes:
//! callers send a bearer token; the API server says whose it is
//! (TokenReview) and whether that user may `get` the path
//! (SubjectAccessReview on the non-resource URL), as controller-runtime's
//! metrics filter and kube-rbac-proxy do. Answers are kept briefly
//! ([`cache`]), so a scrape costs no API call each time; the reviews a
//! caller address may cost are bounded ([`budget`]), so an outsider's new
//! token on every request does not become an API call each time.
//!
//! No token: 401. A token the API server does not know: 401. A known user
//! without the permission: 403. A token not cached from an address whose
//! budget is spent: 429 with `Retry-After`, no API call. The API server
//! unreachable: 503 (nothing cached, the next scrape asks again).

mod budget;
mod cache;
mod review;
pub mod tls;

pub use budget::ReviewBudget;
pub use cache::CachePolicy;

use crate::telemetry::{OutcomeLabels, Throttle};
use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;
use budget::{Budgets, Exhausted};
use cache::{Decision, DecisionCache};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tracing::warn;

/// Reviews by outcome, as `assetscan_access_reviews_total` counts them.
type ReviewCounts = Family<OutcomeLabels, Counter>;

/// The API client the reviews go through, the recent decisions, and the
/// reviews each caller address has left.
#[derive(Clone)]
pub struct AccessGuard {
    client: kube::Client,
    cache: Arc<Mutex<DecisionCache>>,
    budgets: Arc<Mutex<Budgets>>,
    counts: ReviewCounts,
}

/// Refusals for a spent budget are logged once a minute, with how many
/// were held back: a flood is said, not echoed.
static LIMITED: Throttle = Throttle::new(Duration::from_secs(60));

impl AccessGuard {
    pub fn new(client: kube::Client, policy: CachePolicy, budget: ReviewBudget) -> Self {
        Self {
            client,
            cache: Arc::new(Mutex::new(DecisionCache::new(policy))),
            budgets: Arc::new(Mutex::new(Budgets::new(budget, Instant::now()))),
            counts: ReviewCounts::default(),
        }
    }

    /// Counts the reviews into `counts` (the operator's registered
    /// family), which the guard is made before.
    pub fn counted_in(mut self, counts: &ReviewCounts) -> Self {
        self.counts = counts.clone();
        self
    }

    fn count(&self, outcome: &str) {
        let labels = OutcomeLabels {
            outcome: outcome.to_owned(),
        };
        self.counts.get_or_create(&labels).inc();
    }

    /// The cache, also after a panic elsewhere while it was held: its
    /// entries are whole at every point.
    fn decisions(&self) -> std::sync::MutexGuard<'_, DecisionCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The budgets, also after a panic elsewhere while they were held.
    fn budgets(&self) -> std::sync::MutexGuard<'_, Budgets> {
        self.budgets.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached decision, or a review when `caller` has one left.
    async fn decide(
        &self,
        caller: IpAddr,
        token: &str,
        path: &str,
        verb: &str,
    ) -> Result<Decision, Response> {
        let key = DecisionCache::key(token, path, verb);
        if let Some(decision) = self.decisions().get(&key, Instant::now()) {
            return Ok(decision);
        }
        let spent = self.budgets().take(caller, Instant::now());
        if let Err(exhausted) = spent {
            self.count("limited");
            if let Some(held_back) = LIMITED.admit(Instant::now()) {
                warn!(%caller, held_back, "a caller address spent its budget of access reviews");
            }
            return Err(too_many_requests(exhausted));
        }
        match review::decide(&self.client, token, path, verb).await {
            Ok(decision) => {
                self.count(match decision {
                    Decision::Allowed => "allowed",
                    Decision::Forbidden => "forbidden",
                    Decision::Unauthenticated => "unauthenticated",
                });
                self.decisions().insert(key, decision, Instant::now());
                Ok(decision)
            }
            Err(err) => {
                self.count("error");
                warn!(error = %err, path, "cannot check a caller's access");
                Err((StatusCode::SERVICE_UNAVAILABLE, "cannot check access\n").into_response())
            }
        }
    }
}

/// Where a request comes from: the TCP peer the listener accepted (plain
/// or TLS), never a header, which a caller writes as it likes. Served with
/// `into_make_service_with_connect_info::<Peer>()`.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

impl Connected<IncomingStream<'_, tokio::net::TcpListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, tokio::net::TcpListener>) -> Self {
        Peer(*stream.remote_addr())
    }
}

impl Connected<IncomingStream<'_, tls::TlsListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, tls::TlsListener>) -> Self {
        Peer(*stream.remote_addr())
    }
}

/// Middleware: lets the request through only when the API server allows
/// its bearer token's user to use the request's verb on its path.
pub async fn require_access(
    State(guard): State<AccessGuard>,
    ConnectInfo(Peer(peer)): ConnectInfo<Peer>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = bearer_token(&request) else {
        return unauthorized();
    };
    let verb = http_verb(request.method());
    let path = request.uri().path();
    match guard.decide(peer.ip(), &token, path, &verb).await {
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

/// 429, with the whole seconds until the caller's next review.
fn too_many_requests(exhausted: Exhausted) -> Response {
    let wait = exhausted.retry_after;
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::RETRY_AFTER, seconds.max(1).to_string())],
        "too many new tokens from this address\n",
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A guard whose API server never answers: a review, if asked, is 503.
    fn guard(burst: u32) -> AccessGuard {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let budget = ReviewBudget {
            burst,
            ..ReviewBudget::default()
        };
        AccessGuard::new(client, CachePolicy::default(), budget)
    }

    fn count(guard: &AccessGuard, outcome: &str) -> u64 {
        let labels = OutcomeLabels {
            outcome: outcome.to_owned(),
        };
        guard.counts.get_or_create(&labels).get()
    }

    #[tokio::test]
    async fn a_spent_address_is_answered_429_and_a_cached_token_still_passes() {
        let guard = guard(1);
        let (caller, other) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let cached = DecisionCache::key("reader", "/metrics", "get");
        guard
            .decisions()
            .insert(cached, Decision::Allowed, Instant::now());

        let first = guard.decide(caller, "new-1", "/metrics", "get").await;
        assert_eq!(
            first.err().map(|r| r.status()),
            Some(StatusCode::SERVICE_UNAVAILABLE)
        );
        let Err(limited) = guard.decide(caller, "new-2", "/metrics", "get").await else {
            panic!("the second new token was reviewed");
        };
        assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(limited.headers()[header::RETRY_AFTER], "1");

        let reader = guard.decide(caller, "reader", "/metrics", "get").await;
        assert_eq!(
            reader.ok(),
            Some(Decision::Allowed),
            "cached: never limited"
        );
        let elsewhere = guard.decide(other, "new-3", "/metrics", "get").await;
        assert_eq!(
            elsewhere.err().map(|r| r.status()),
            Some(StatusCode::SERVICE_UNAVAILABLE),
            "another address has its own budget"
        );
        assert_eq!((count(&guard, "error"), count(&guard, "limited")), (2, 1));
    }
}
