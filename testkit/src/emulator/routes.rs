//! HTTP: dispatch of every request — to discovery, the emulator's control
//! paths or a resource verb — after fault injection, with each answer
//! counted by resource, verb and outcome. Two paths outside the Kubernetes
//! API serve scripts: `GET /emulator/requests` (the request counters as
//! JSON) and `POST /emulator/outage?seconds=N` (an outage of N seconds,
//! starting once the answer is sent).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State as AxumState};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::access;
use super::create;
use super::deletion;
use super::discovery;
use super::error::{ApiError, GroupResource};
use super::faults::{Fault, Faults};
use super::options::{self, OptionsKind};
use super::patch;
use super::paths::{Route, Target, counted_resource, is_watch, parse_route, verb};
use super::read;
use super::request::{Request, parse_body};
use super::resources::ResourceType;
use super::respond::{error_response, json_response, not_found_text, reply};
use super::shared::Shared;
use super::update;
use super::watch;

pub fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
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
    if let Route::Resource(target) = &route
        && let Some(reviewed) = access::answer(shared, &method, target, body)
    {
        return reviewed;
    }
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
            GroupResource {
                group: t.group.clone(),
                resource: t.resource.clone(),
            },
            t.name.clone().unwrap_or_default(),
        ),
        _ => (
            GroupResource {
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
        Fault::Forbidden { user, verb } => {
            // kube-apiserver's RBAC denial, word for word.
            let scope = match route {
                Route::Resource(Target {
                    namespace: Some(namespace),
                    ..
                }) => format!(" in the namespace {namespace:?}"),
                _ => " at the cluster scope".to_owned(),
            };
            ApiError::Forbidden(format!(
                "{} {name:?} is forbidden: User {user:?} cannot {verb} resource {:?} in API group {:?}{scope}",
                resource.resource, resource.resource, resource.group
            ))
        }
        Fault::InternalError | Fault::Delay(_) => ApiError::Internal("injected fault".into()),
    }
}

/// Why a resource URL is not served.
enum NotServed {
    /// A Status: the resource, its scope or the subresource is not served.
    Status(ApiError),
    /// A cluster-scoped custom resource asked for under a namespace: the
    /// CRD handler passes the request on, and kube-apiserver's last
    /// handler answers `404 page not found` as text.
    Page,
}

/// The served resource a resource URL names: 404 when the resource, its
/// scope or the subresource is not served.
fn served(shared: &Shared, target: &Target) -> Result<Arc<ResourceType>, NotServed> {
    let rt = shared
        .lock()
        .registry
        .find(&target.group, &target.version, &target.resource)
        .ok_or(NotServed::Status(ApiError::UnknownResource))?;
    if !rt.namespaced && rt.custom && target.namespace.is_some() {
        return Err(NotServed::Page);
    }
    if (rt.namespaced && target.namespace.is_none() && target.name.is_some())
        || (!rt.namespaced && target.namespace.is_some())
    {
        return Err(NotServed::Status(ApiError::UnknownResource));
    }
    if let Some(sub) = &target.subresource
        && !(sub == "status" && rt.status_subresource)
    {
        return Err(NotServed::Status(ApiError::UnknownResource));
    }
    Ok(rt)
}

/// A request to a served resource, dispatched to its verb.
fn resource(
    shared: &Arc<Shared>,
    method: Method,
    target: Target,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let rt = match served(shared, &target) {
        Ok(rt) => rt,
        Err(NotServed::Status(e)) => return error_response(&e),
        Err(NotServed::Page) => return not_found_text(),
    };
    let req = Request {
        rt,
        namespace: target.namespace,
        name: target.name,
        subresource: target.subresource,
        query,
        user_agent: header_str(headers, header::USER_AGENT),
        accept: header_str(headers, header::ACCEPT),
        content_type: header_str(headers, header::CONTENT_TYPE),
    };
    let named = req.name.is_some();
    match method {
        Method::GET if is_watch(query) && !named => serve_watch(shared, &req),
        Method::GET if named => reply(req.accept, read::get(&shared.lock(), &req)),
        Method::GET => reply(req.accept, read::list(&shared.lock(), &req)),
        Method::POST if !named => reply(
            req.accept,
            options::check_write(OptionsKind::Create, query, false)
                .and_then(|()| parse_body(body, req.content_type))
                .and_then(|obj| create::create(&mut shared.lock(), &req, obj)),
        ),
        Method::PUT if named => reply(
            req.accept,
            options::check_write(OptionsKind::Update, query, false)
                .and_then(|()| parse_body(body, req.content_type))
                .and_then(|obj| shared.write(|state| update::update(state, &req, obj.clone()))),
        ),
        Method::PATCH if named => reply(
            req.accept,
            shared.write(|state| patch::patch(state, &req, body)),
        ),
        Method::DELETE => serve_delete(shared, &req, body),
        _ => error_response(&ApiError::MethodNotAllowed),
    }
}

/// A watch: planned under the state lock, then streamed.
fn serve_watch(shared: &Shared, req: &Request<'_>) -> Response {
    let planned = watch::plan(&shared.lock(), req, &shared.watch);
    let plan = match planned {
        Ok(plan) => plan,
        Err(e) => return error_response(&e),
    };
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
    let body: Body = watch::stream(
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

/// DELETE of one object or of a collection, with `DeleteOptions` from the
/// body when there is one.
fn serve_delete(shared: &Shared, req: &Request<'_>, body: &Bytes) -> Response {
    let delete_options = if body.is_empty() {
        Value::Null
    } else {
        match parse_body(body, "application/json") {
            Ok(v) => v,
            Err(e) => return error_response(&e),
        }
    };
    let result = if req.name.is_some() {
        deletion::delete(&mut shared.lock(), req, &delete_options)
    } else {
        deletion::delete_collection(&mut shared.lock(), req, &delete_options)
    };
    reply(req.accept, result)
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> &str {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}
