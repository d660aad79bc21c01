//! HTTP: URL parsing into (resource, namespace, name, subresource) the way
//! kube-apiserver's RequestInfoFactory does it, verb dispatch, fault
//! injection, and rendering of answers and `Status` errors.

use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State as AxumState};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::discovery;
use super::error::ApiError;
use super::faults::{Fault, Faults};
use super::handlers::{self, Reply, Request, State};
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
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock would be a bug in the emulator; keep serving.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

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

async fn handle(
    AxumState(shared): AxumState<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path_and_query = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let decision = shared.faults.decide(method.as_str(), path_and_query);
    if !decision.delay.is_zero() {
        tokio::time::sleep(decision.delay).await;
    }
    let query: HashMap<String, String> = Query::<HashMap<String, String>>::try_from_uri(&uri)
        .map(|q| q.0)
        .unwrap_or_default();
    let route = parse_route(uri.path());
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
        Route::NotFound => not_found_text(),
        Route::Resource(target) => resource(&shared, method, target, &query, &headers, &body),
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
                    let body = watch::stream(
                        plan,
                        shared.watch.clone(),
                        shared.faults.watch_signals(),
                        shared.shutdown.clone(),
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
            handlers::parse_body(body, req.content_type)
                .and_then(|obj| handlers::create(&mut shared.lock(), &req, obj)),
        ),
        Method::PUT if target.name.is_some() => reply(
            req.accept,
            handlers::parse_body(body, req.content_type)
                .and_then(|obj| handlers::update(&mut shared.lock(), &req, obj)),
        ),
        Method::PATCH if target.name.is_some() => {
            reply(req.accept, handlers::patch(&mut shared.lock(), &req, body))
        }
        Method::DELETE => {
            let options = if body.is_empty() {
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
                    handlers::delete(&mut shared.lock(), &req, &options),
                )
            } else {
                reply(
                    req.accept,
                    handlers::delete_collection(&mut shared.lock(), &req, &options),
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
