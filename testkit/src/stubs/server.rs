//! What every stub shares: an axum server on a free loopback port, a call
//! counter per route, the time of every call, and fault injection that
//! tests change at runtime.

use axum::Router;
use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// A misbehaviour a stub can be told to show instead of its normal answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// This status, with a small JSON error body.
    Status(u16),
    /// Exactly this status, headers and body.
    Reply {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// HTTP 200 with a body that is not JSON.
    Malformed,
    /// HTTP 200 with JSON of the wrong shape.
    WrongShape,
    /// HTTP 200 streaming this many bytes, without a `Content-Length`.
    Oversized(usize),
    /// Never answer.
    Hang,
}

pub const MALFORMED_BODY: &str = "<html><body>502 Bad Gateway (this is not JSON)</body></html>";
pub const WRONG_SHAPE_BODY: &str = r#"{"unexpected":["wrong","shape"],"results":"not a list"}"#;

impl Fault {
    async fn respond(self) -> Response {
        match self {
            Fault::Status(status) => {
                let body = format!(r#"{{"code":{status},"message":"injected status {status}"}}"#);
                reply(
                    status,
                    &[("content-type", "application/json")],
                    body.into_bytes(),
                )
            }
            Fault::Reply {
                status,
                headers,
                body,
            } => {
                let headers: Vec<(&str, &str)> = headers
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                reply(status, &headers, body)
            }
            Fault::Malformed => reply(
                200,
                &[("content-type", "application/json")],
                MALFORMED_BODY.into(),
            ),
            Fault::WrongShape => reply(
                200,
                &[("content-type", "application/json")],
                WRONG_SHAPE_BODY.into(),
            ),
            Fault::Oversized(bytes) => {
                const CHUNK: usize = 64 * 1024;
                let chunks = (0..bytes.div_ceil(CHUNK))
                    .map(move |i| Ok::<_, Infallible>(vec![b' '; CHUNK.min(bytes - i * CHUNK)]));
                let mut response = Body::from_stream(futures::stream::iter(chunks)).into_response();
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                response
            }
            Fault::Hang => std::future::pending().await,
        }
    }
}

/// A response from parts; invalid header names or values are skipped.
pub(crate) fn reply(status: u16, headers: &[(&str, &str)], body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(*name), HeaderValue::try_from(*value))
        {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// Latency, a gate and faults, changeable while the stub runs. A call
/// waits out the latency, then waits while the gate is held; then queued
/// faults (`fail_next`) are used first, one per call; then the sticky one
/// (`always`), if any; then the stub answers normally.
#[derive(Debug)]
pub struct Faults {
    latency: Mutex<Duration>,
    /// Open (`true`) unless held.
    gate: tokio::sync::watch::Sender<bool>,
    queue: Mutex<VecDeque<Fault>>,
    sticky: Mutex<Option<Fault>>,
}

impl Default for Faults {
    fn default() -> Faults {
        Faults {
            latency: Mutex::default(),
            gate: tokio::sync::watch::Sender::new(true),
            queue: Mutex::default(),
            sticky: Mutex::default(),
        }
    }
}

impl Faults {
    /// Calls from now on wait inside the stub until [`Faults::release`]:
    /// keeps a caller in its call (a run in flight, a lock held) for exactly
    /// as long as a test needs, however fast or slow the machine is.
    pub fn hold(&self) {
        self.gate.send_replace(false);
    }

    /// Lets every held call, and every later one, through.
    pub fn release(&self) {
        self.gate.send_replace(true);
    }

    async fn pass_gate(&self) {
        // The sender lives as long as the stub: waiting cannot fail.
        let _ = self.gate.subscribe().wait_for(|open| *open).await;
    }

    /// Every answer (normal or faulty) is delayed by this much.
    pub fn set_latency(&self, latency: Duration) {
        *lock(&self.latency) = latency;
    }

    /// The next `n` calls get `fault`.
    pub fn fail_next(&self, n: usize, fault: Fault) {
        lock(&self.queue).extend(std::iter::repeat_n(fault, n));
    }

    /// Every call gets `fault` until [`Faults::clear`].
    pub fn always(&self, fault: Fault) {
        *lock(&self.sticky) = Some(fault);
    }

    /// Back to normal: no latency, no gate, no faults.
    pub fn clear(&self) {
        *lock(&self.latency) = Duration::ZERO;
        self.release();
        lock(&self.queue).clear();
        *lock(&self.sticky) = None;
    }

    fn latency(&self) -> Duration {
        *lock(&self.latency)
    }

    fn next(&self) -> Option<Fault> {
        let queued = lock(&self.queue).pop_front();
        queued.or_else(|| lock(&self.sticky).clone())
    }
}

/// A poisoned lock in a test stub only means another test thread panicked;
/// the data is still usable.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A counter per route (the route's pattern, e.g. `/v1/vulns/{id}`), faulty
/// calls included.
#[derive(Debug)]
struct Calls(HashMap<&'static str, AtomicU64>);

impl Calls {
    fn new(routes: &[&'static str]) -> Calls {
        Calls(routes.iter().map(|r| (*r, AtomicU64::new(0))).collect())
    }

    fn count(&self, route: &str) -> u64 {
        self.0.get(route).map_or(0, |c| c.load(Ordering::SeqCst))
    }

    fn add(&self, route: Option<&MatchedPath>) {
        if let Some(counter) = route.and_then(|r| self.0.get(r.as_str())) {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[derive(Debug)]
struct Shared {
    faults: Faults,
    /// Calls received.
    calls: Calls,
    /// Answers handed to the connection (held and hanging calls are not).
    answers: Calls,
    /// When each call to a counted route arrived, in arrival order.
    times: Mutex<Vec<Instant>>,
}

/// A running stub server. Dropping it stops accepting connections.
#[derive(Debug)]
pub struct StubServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl StubServer {
    /// Serves `router` on `127.0.0.1:0`, counting calls to `routes` and
    /// applying faults to them. Needs a running tokio runtime.
    pub(crate) async fn start(
        router: Router,
        routes: &[&'static str],
    ) -> std::io::Result<StubServer> {
        let shared = Arc::new(Shared {
            faults: Faults::default(),
            calls: Calls::new(routes),
            answers: Calls::new(routes),
            times: Mutex::default(),
        });
        let router = router.route_layer(middleware::from_fn_with_state(
            Arc::clone(&shared),
            intercept,
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                tracing::warn!(error = %e, "stub server stopped");
            }
        });
        Ok(StubServer { addr, shared, task })
    }

    /// `http://127.0.0.1:<port>`, no trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// Calls so far to `route` (its pattern, as the stub documents it).
    pub fn calls(&self, route: &str) -> u64 {
        self.shared.calls.count(route)
    }

    /// Answers so far on `route`: how a test knows that a reply is on its
    /// way to the caller (e.g. into the socket of a stopped process).
    pub fn answers(&self, route: &str) -> u64 {
        self.shared.answers.count(route)
    }

    /// When each call so far to any route arrived, in arrival order: what
    /// a provider sees of its callers' rate.
    pub fn call_times(&self) -> Vec<Instant> {
        lock(&self.shared.times).clone()
    }

    /// Calls so far to all routes.
    pub fn total_calls(&self) -> u64 {
        self.shared
            .calls
            .0
            .values()
            .map(|c| c.load(Ordering::SeqCst))
            .sum()
    }
}

impl Drop for StubServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn intercept(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().cloned();
    shared.calls.add(route.as_ref());
    lock(&shared.times).push(Instant::now());
    let latency = shared.faults.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    shared.faults.pass_gate().await;
    let response = match shared.faults.next() {
        Some(fault) => fault.respond().await,
        None => next.run(request).await,
    };
    shared.answers.add(route.as_ref());
    response
}
