//! HTTP: URL parsing into (resource, namespace, name, subresource) the way
//! kube-apiserver's RequestInfoFactory does it, verb dispatch, fault
//! injection, request counting, and rendering of answers and `Status`
//! errors. Two paths outside the Kubernetes API serve scripts:
//! `GET /emulator/requests` (the request counters as JSON) and
//! `POST /emulator/outage?seconds=N` (an outage of N seconds, starting once
//! the answer is sent).

use parking_lot::{Mutex, MutexGuard};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State as AxumState};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::deletion;
use super::discovery;
use super::error::ApiError;
use super::faults::{Fault, Faults};
use super::handlers::{self, Reply, Request, State};
use super::options::{self, OptionsKind};
use super::requests::{Counters, Verb};
use super::table;
use super::watch::{self, WatchSettings};

/// What the server tasks share.
pub struct Shared {
    pub state: Mutex<State>,
    pub faults: Faults,
    pub watch: WatchSettings,
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    pub open_watches: Arc<AtomicUsize>,
    /// Watches answered with `410 Expired`.
    pub expired_watches: AtomicUsize,
    /// `host:port`, for `/api`'s serverAddressByClientCIDRs.
    pub address: String,
    pub requests: Counters,
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock()
    }

    /// An update or patch, redone from the stored object when another write
    /// to the same object landed while this one was validated (see
    /// `handlers::finish_update`), as the API server's storage layer does;
    /// after [`WRITE_ATTEMPTS`] such races the client gets the 409.
    fn write(
        &self,
        write: impl Fn(&mut MutexGuard<'_, State>) -> Result<Reply, ApiError>,
    ) -> Result<Reply, ApiError> {
        let mut attempt = 1;
        loop {
            match write(&mut self.lock()) {
                Err(ApiError::Raced { .. }) if attempt < WRITE_ATTEMPTS => attempt += 1,
                result => return result,
            }
        }
    }
}

/// Attempts of one update or patch that keeps meeting concurrent writes.
/// Each redo means another write to the object landed, so the writers as a
/// whole always progress; the bound only keeps one writer from starving
/// for ever (the API server's storage layer redoes without a bound).
const WRITE_ATTEMPTS: u32 = 100;

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

fn json_response(code: u16, body: &Value, warnings: &[String]) -> Response {
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for w in warnings {
        let value = format!("299 - {w:?}");
        if let Ok(v) = HeaderValue::from_str(&value) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

fn error_response(err: &ApiError) -> Response {
    let mut resp = json_response(err.code(), &err.to_status(), &[]);
    if let Some(secs) = err.retry_after()
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

fn reply(accept: &str, result: Result<Reply, ApiError>) -> Response {
    match result {
        Ok(r) if table::wants_metadata(accept) => {
            json_response(r.code, &table::as_metadata(&r.body), &r.warnings)
        }
        Ok(r) => json_response(r.code, &r.body, &r.warnings),
        Err(e) => error_response(&e),
    }
}

/// A parsed resource URL.
struct Target {
    group: String,
    version: String,
    namespace: Option<String>,
    resource: String,
    name: Option<String>,
    subresource: Option<String>,
}

/// Parsed path of an API request.
enum Route {
    Version,
    Health,
    CoreVersions,
    Groups,
    Group(String),
    ResourceList(String, String),
    OpenApiIndex,
    OpenApiDocument(String, String),
    Resource(Target),
    /// `/emulator/requests`: the request counters.
    Requests,
    /// `/emulator/outage`: start an outage.
    Outage,
    NotFound,
}

fn parse_route(path: &str) -> Route {
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    let (group, version, rest) = match parts.as_slice() {
        ["version"] => return Route::Version,
        ["healthz" | "livez" | "readyz", ..] => return Route::Health,
        ["api"] => return Route::CoreVersions,
        ["apis"] => return Route::Groups,
        ["apis", g] => return Route::Group(g.to_string()),
        ["emulator", "requests"] => return Route::Requests,
        ["emulator", "outage"] => return Route::Outage,
        ["openapi", "v3"] => return Route::OpenApiIndex,
        ["openapi", "v3", "api", v] => return Route::OpenApiDocument(String::new(), v.to_string()),
        ["openapi", "v3", "apis", g, v] => {
            return Route::OpenApiDocument(g.to_string(), v.to_string());
        }
        ["api", v, rest @ ..] => (String::new(), v.to_string(), rest),
        ["apis", g, v, rest @ ..] => (g.to_string(), v.to_string(), rest),
        _ => return Route::NotFound,
    };
    if rest.is_empty() {
        return Route::ResourceList(group, version);
    }
    let s = |x: &&str| x.to_string();
    // namespaces/<ns>/<resource>/… unless <resource> is a namespace subresource.
    let (namespace, rest): (Option<String>, &[&str]) = match rest {
        ["namespaces", ns, res, tail @ ..] if !matches!(*res, "status" | "finalize") => {
            let mut v = vec![*res];
            v.extend_from_slice(tail);
            return Route::Resource(Target {
                group,
                version,
                namespace: Some(ns.to_string()),
                resource: res.to_string(),
                name: v.get(1).map(s),
                subresource: v.get(2).map(s),
            });
        }
        other => (None, other),
    };
    if rest.len() > 3 {
        return Route::NotFound;
    }
    Route::Resource(Target {
        group,
        version,
        namespace,
        resource: rest[0].to_string(),
        name: rest.get(1).map(s),
        subresource: rest.get(2).map(s),
    })
}

fn not_found_text() -> Response {
    let mut resp = (StatusCode::NOT_FOUND, "404 page not found\n").into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

/// The verb of a request, as kube-apiserver's RequestInfo names it.
fn verb(method: &Method, route: &Route, query: &HashMap<String, String>) -> Verb {
    let named = match route {
        Route::Resource(t) => t.name.is_some(),
        _ => {
            return if *method == Method::GET {
                Verb::Get
            } else {
                Verb::Other
            };
        }
    };
    let watching = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
    match *method {
        Method::GET if watching => Verb::Watch,
        Method::GET if named => Verb::Get,
        Method::GET => Verb::List,
        Method::POST => Verb::Create,
        Method::PUT => Verb::Update,
        Method::PATCH => Verb::Patch,
        Method::DELETE if named => Verb::Delete,
        Method::DELETE => Verb::DeleteCollection,
        _ => Verb::Other,
    }
}

/// Group and resource (with subresource) a request is counted under.
fn counted_resource(route: &Route) -> (String, String) {
    match route {
        Route::Resource(t) => {
            let resource = match &t.subresource {
                Some(sub) => format!("{}/{sub}", t.resource),
                None => t.resource.clone(),
            };
            (t.group.clone(), resource)
        }
        _ => (String::new(), String::new()),
    }
}

async fn handle(
    AxumState(shared): AxumState<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query: HashMap<String, String> = Query::<HashMap<String, String>>::try_from_uri(&uri)
        .map(|q| q.0)
        .unwrap_or_default();
    let route = parse_route(uri.path());
    match route {
        Route::Requests => return control_get(&method, || shared.requests.snapshot().to_json()),
        Route::Outage => return start_outage(&shared.faults, &method, &query),
        _ => {}
    }
    let (group, resource) = counted_resource(&route);
    let verb = verb(&method, &route, &query);
    let response = answer(&shared, method, &uri, route, &query, &headers, &body).await;
    shared
        .requests
        .record(&group, &resource, verb, response.status().as_u16());
    response
}

fn control_get(method: &Method, body: impl FnOnce() -> Value) -> Response {
    if *method != Method::GET {
        return error_response(&ApiError::MethodNotAllowed);
    }
    json_response(200, &body(), &[])
}

/// Longest outage the control path accepts.
const MAX_OUTAGE_SECONDS: u64 = 3600;

fn start_outage(faults: &Faults, method: &Method, query: &HashMap<String, String>) -> Response {
    if *method != Method::POST {
        return error_response(&ApiError::MethodNotAllowed);
    }
    let seconds = query
        .get("seconds")
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|s| (1..=MAX_OUTAGE_SECONDS).contains(s));
    let Some(seconds) = seconds else {
        return error_response(&ApiError::BadRequest(format!(
            "seconds must be a whole number from 1 to {MAX_OUTAGE_SECONDS}"
        )));
    };
    // This answer is in flight: the server finishes it before going down.
    faults.begin_outage(Some(Duration::from_secs(seconds)));
    json_response(
        202,
        &serde_json::json!({"outage": {"seconds": seconds}}),
        &[],
    )
}

async fn answer(
    shared: &Arc<Shared>,
    method: Method,
    uri: &Uri,
    route: Route,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let path_and_query = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let decision = shared.faults.decide(method.as_str(), path_and_query);
    if !decision.delay.is_zero() {
        tokio::time::sleep(decision.delay).await;
    }
    if let Some(fault) = decision.fail {
        return error_response(&injected(&fault, &route));
    }
    let get_only = |f: &dyn Fn() -> Option<Value>| -> Response {
        if method != Method::GET {
            return error_response(&ApiError::MethodNotAllowed);
        }
        match f() {
            Some(v) => json_response(200, &v, &[]),
            None => error_response(&ApiError::UnknownResource),
        }
    };
    match route {
        Route::Version => get_only(&|| Some(discovery::version())),
        Route::Health => (StatusCode::OK, "ok").into_response(),
        Route::CoreVersions => get_only(&|| Some(discovery::core_versions(&shared.address))),
        Route::Groups => get_only(&|| Some(discovery::api_groups(&shared.lock().registry))),
        Route::Group(g) => get_only(&|| discovery::api_group(&shared.lock().registry, &g)),
        Route::ResourceList(g, v) => {
            get_only(&|| discovery::resource_list(&shared.lock().registry, &g, &v))
        }
        Route::OpenApiIndex => get_only(&|| {
            let state = shared.lock();
            Some(discovery::openapi_v3_index(
                &state.registry,
                state.generation,
            ))
        }),
        Route::OpenApiDocument(g, v) => {
            get_only(&|| discovery::openapi_v3_document(&shared.lock().registry, &g, &v))
        }
        Route::NotFound | Route::Requests | Route::Outage => not_found_text(),
        Route::Resource(target) => resource(shared, method, target, query, headers, body),
    }
}

/// The answer of an injected failure, worded for the targeted resource.
fn injected(fault: &Fault, route: &Route) -> ApiError {
    let (resource, name) = match route {
        Route::Resource(t) => (
            super::error::GroupResource {
                group: t.group.clone(),
                resource: t.resource.clone(),
            },
            t.name.clone().unwrap_or_default(),
        ),
        _ => (
            super::error::GroupResource {
                group: String::new(),
                resource: String::new(),
            },
            String::new(),
        ),
    };
    match fault {
        Fault::Conflict => ApiError::stale(&resource, &name),
        Fault::TooManyRequests {
            retry_after_seconds,
        } => ApiError::TooManyRequests {
            message: "Too many requests, please try again later.".into(),
            retry_after_seconds: *retry_after_seconds,
        },
        Fault::InternalError | Fault::Delay(_) => ApiError::Internal("injected fault".into()),
    }
}

fn resource(
    shared: &Arc<Shared>,
    method: Method,
    target: Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let rt = {
        let state = shared.lock();
        state
            .registry
            .find(&target.group, &target.version, &target.resource)
    };
    let Some(rt) = rt else {
        return error_response(&ApiError::UnknownResource);
    };
    if (rt.namespaced && target.namespace.is_none() && target.name.is_some())
        || (!rt.namespaced && target.namespace.is_some())
    {
        return error_response(&ApiError::UnknownResource);
    }
    if let Some(sub) = &target.subresource
        && !(sub == "status" && rt.status_subresource)
    {
        return error_response(&ApiError::UnknownResource);
    }
    let req = Request {
        rt: rt.clone(),
        namespace: target.namespace.clone(),
        name: target.name.clone(),
        subresource: target.subresource.clone(),
        query,
        user_agent: header_str(headers, header::USER_AGENT),
        accept: header_str(headers, header::ACCEPT),
        content_type: header_str(headers, header::CONTENT_TYPE),
    };
    let watching = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
    match method {
        Method::GET if watching && target.name.is_none() => {
            let planned = {
                let state = shared.lock();
                watch::plan(
                    &state,
                    rt,
                    target.namespace,
                    query,
                    req.accept,
                    &shared.watch,
                )
            };
            match planned {
                Ok(plan) => {
                    if plan.expired {
                        shared
                            .expired_watches
                            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    let enders = watch::Enders {
                        signals: shared.faults.watch_signals(),
                        shutdown: shared.shutdown.clone(),
                        outage: shared.faults.outage_requests(),
                    };
                    let body = watch::stream(
                        plan,
                        shared.watch.clone(),
                        enders,
                        shared.open_watches.clone(),
                    );
                    let mut resp = Response::new(body);
                    resp.headers_mut().insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    );
                    resp
                }
                Err(e) => error_response(&e),
            }
        }
        Method::GET if target.name.is_some() => {
            reply(req.accept, handlers::get(&shared.lock(), &req))
        }
        Method::GET => reply(req.accept, handlers::list(&shared.lock(), &req)),
        Method::POST if target.name.is_none() => reply(
            req.accept,
            options::check_write(OptionsKind::Create, query, false)
                .and_then(|()| handlers::parse_body(body, req.content_type))
                .and_then(|obj| handlers::create(&mut shared.lock(), &req, obj)),
        ),
        Method::PUT if target.name.is_some() => reply(
            req.accept,
            options::check_write(OptionsKind::Update, query, false)
                .and_then(|()| handlers::parse_body(body, req.content_type))
                .and_then(|obj| shared.write(|state| handlers::update(state, &req, obj.clone()))),
        ),
        Method::PATCH if target.name.is_some() => reply(
            req.accept,
            shared.write(|state| handlers::patch(state, &req, body)),
        ),
        Method::DELETE => {
            let delete_options = if body.is_empty() {
                Value::Null
            } else {
                match handlers::parse_body(body, "application/json") {
                    Ok(v) => v,
                    Err(e) => return error_response(&e),
                }
            };
            if target.name.is_some() {
                reply(
                    req.accept,
                    deletion::delete(&mut shared.lock(), &req, &delete_options),
                )
            } else {
                reply(
                    req.accept,
                    deletion::delete_collection(&mut shared.lock(), &req, &delete_options),
                )
            }
        }
        _ => error_response(&ApiError::MethodNotAllowed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Parsed = (Option<String>, String, Option<String>, Option<String>);

    fn target(path: &str) -> Option<Parsed> {
        match parse_route(path) {
            Route::Resource(t) => Some((t.namespace, t.resource, t.name, t.subresource)),
            _ => None,
        }
    }

    #[test]
    fn request_info_like_kube_apiserver() {
        assert_eq!(
            target("/apis/example.com/v1/namespaces/ns/assetscans/a/status"),
            Some((
                Some("ns".into()),
                "assetscans".into(),
                Some("a".into()),
                Some("status".into())
            ))
        );
        assert_eq!(
            target("/api/v1/namespaces/ns"),
            Some((None, "namespaces".into(), Some("ns".into()), None))
        );
        assert_eq!(
            target("/api/v1/namespaces/ns/status"),
            Some((
                None,
                "namespaces".into(),
                Some("ns".into()),
                Some("status".into())
            ))
        );
        assert_eq!(
            target("/apis/example.com/v1/assetscans"),
            Some((None, "assetscans".into(), None, None))
        );
        assert!(matches!(
            parse_route("/apis/example.com/v1"),
            Route::ResourceList(..)
        ));
        assert!(matches!(parse_route("/nope"), Route::NotFound));
    }
}
