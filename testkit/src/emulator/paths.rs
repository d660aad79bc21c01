//! What a URL names: the discovery and OpenAPI documents, the emulator's
//! control paths, or a resource request (resource, namespace, name,
//! subresource), parsed the way kube-apiserver's RequestInfoFactory does;
//! and the verb and resource a request is counted under.

use std::collections::HashMap;

use axum::http::Method;

use super::counters::Verb;

/// A parsed resource URL.
pub struct Target {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Parsed path of an API request.
pub enum Route {
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

pub fn parse_route(path: &str) -> Route {
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

/// `watch=true` (or `1`): a GET of a collection that streams changes.
pub fn is_watch(query: &HashMap<String, String>) -> bool {
    matches!(query.get("watch").map(String::as_str), Some("true" | "1"))
}

/// The verb of a request, as kube-apiserver's RequestInfo names it.
pub fn verb(method: &Method, route: &Route, query: &HashMap<String, String>) -> Verb {
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
    match *method {
        Method::GET if is_watch(query) => Verb::Watch,
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
pub fn counted_resource(route: &Route) -> (String, String) {
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
