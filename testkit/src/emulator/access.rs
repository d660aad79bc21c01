//! Authentication and authorization as the API server answers them to
//! other servers: ServiceAccount tokens issued through the TokenRequest
//! subresource (`serviceaccounts/<name>/token`), TokenReview
//! (`authentication.k8s.io/v1`) for them, and SubjectAccessReview
//! (`authorization.k8s.io/v1`) decided by the stored ClusterRoles and
//! ClusterRoleBindings (see `rbac`).
//!
//! The emulator itself still serves every request without checking its
//! caller: these reviews are answers for servers that delegate to it, as
//! the operator's metrics endpoint does.
//!
//! Tokens are random strings kept in a registry, not signed JWTs: a token
//! is valid until it expires or its ServiceAccount is deleted (or recreated
//! with another uid), as a bound token is on a real server.

use std::time::{Duration, SystemTime};

use axum::http::Method;
use axum::response::Response;
use serde_json::{Value, json};

use super::error::{ApiError, GroupResource};
use super::keys::{ObjKey, StorageId};
use super::meta;
use super::paths::Target;
use super::rbac::{self, Attributes, Subject, TokenOwner};
use super::respond::{error_response, json_response};
use super::shared::Shared;
use super::state::State;

/// Default and bounds of `spec.expirationSeconds`, as kube-apiserver's.
const DEFAULT_EXPIRATION: u64 = 3600;
const MIN_EXPIRATION: u64 = 600;

/// The answer when `target` is one of the review resources or the token
/// subresource; `None` for every other resource.
pub fn answer(shared: &Shared, method: &Method, target: &Target, body: &[u8]) -> Option<Response> {
    let kind = match (target.group.as_str(), target.resource.as_str()) {
        ("authentication.k8s.io", "tokenreviews") => Review::Token,
        ("authorization.k8s.io", "subjectaccessreviews") => Review::Access,
        ("", "serviceaccounts") if target.subresource.as_deref() == Some("token") => Review::Issue,
        _ => return None,
    };
    if *method != Method::POST || target.version != "v1" {
        return Some(error_response(&ApiError::MethodNotAllowed));
    }
    let request = match serde_json::from_slice::<Value>(body) {
        Ok(v) if v.is_object() => v,
        _ => {
            return Some(error_response(&ApiError::BadRequest(
                "the body of the request is not a JSON object".into(),
            )));
        }
    };
    let mut state = shared.lock();
    let answered = match kind {
        Review::Token => Ok(token_review(&state, request)),
        Review::Access => Ok(subject_access_review(&state, request)),
        Review::Issue => issue_token(&mut state, target, request),
    };
    Some(match answered {
        Ok(v) => json_response(201, &v, &[]),
        Err(e) => error_response(&e),
    })
}

enum Review {
    Token,
    Access,
    Issue,
}

fn service_accounts() -> StorageId {
    StorageId {
        group: String::new(),
        resource: "serviceaccounts".into(),
    }
}

/// POST `serviceaccounts/<name>/token`: a new token for the account.
fn issue_token(state: &mut State, target: &Target, mut request: Value) -> Result<Value, ApiError> {
    let namespace = target.namespace.clone().unwrap_or_default();
    let name = target.name.clone().unwrap_or_default();
    let key = ObjKey {
        storage: service_accounts(),
        namespace: namespace.clone(),
        name: name.clone(),
    };
    let account = state.store.get(&key).ok_or_else(|| ApiError::NotFound {
        resource: GroupResource {
            group: String::new(),
            resource: "serviceaccounts".into(),
        },
        name: name.clone(),
    })?;
    let seconds = request["spec"]["expirationSeconds"]
        .as_u64()
        .unwrap_or(DEFAULT_EXPIRATION);
    if seconds < MIN_EXPIRATION {
        return Err(ApiError::BadRequest(format!(
            "spec.expirationSeconds: Invalid value: {seconds}: may not specify a duration less than 10 minutes"
        )));
    }
    let expires = SystemTime::now() + Duration::from_secs(seconds);
    let token = format!("emulator.{}.{}", meta::new_uid(), meta::new_uid());
    state.tokens.insert(
        token.clone(),
        TokenOwner {
            namespace: namespace.clone(),
            name: name.clone(),
            uid: meta::meta_str(&account, "uid")
                .unwrap_or_default()
                .to_owned(),
            expires,
        },
    );
    let expiration = jiff::Timestamp::try_from(expires)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    request["metadata"] = json!({"name": name, "namespace": namespace, "creationTimestamp": null});
    request["spec"]["expirationSeconds"] = json!(seconds);
    if request["spec"]["audiences"].is_null() {
        request["spec"]["audiences"] = json!(["https://kubernetes.default.svc.cluster.local"]);
    }
    request["status"] = json!({"token": token, "expirationTimestamp": expiration});
    Ok(request)
}

/// The owner of `token` when it is still valid: not expired, and its
/// ServiceAccount still the one it was issued for.
fn owner<'a>(state: &'a State, token: &str) -> Option<&'a TokenOwner> {
    let owner = state.tokens.get(token)?;
    let key = ObjKey {
        storage: service_accounts(),
        namespace: owner.namespace.clone(),
        name: owner.name.clone(),
    };
    let account = state.store.get(&key)?;
    (owner.expires > SystemTime::now()
        && meta::meta_str(&account, "uid") == Some(owner.uid.as_str()))
    .then_some(owner)
}

fn token_review(state: &State, mut request: Value) -> Value {
    let token = request["spec"]["token"].as_str().unwrap_or_default();
    request["status"] = match owner(state, token) {
        Some(o) => json!({
            "authenticated": true,
            "user": {
                "username": format!("system:serviceaccount:{}:{}", o.namespace, o.name),
                "uid": o.uid,
                "groups": [
                    "system:serviceaccounts",
                    format!("system:serviceaccounts:{}", o.namespace),
                    "system:authenticated",
                ],
            },
            "audiences": ["https://kubernetes.default.svc.cluster.local"],
        }),
        None => json!({"user": {}, "error": "[invalid bearer token, token lookup failed]"}),
    };
    request
}

fn subject_access_review(state: &State, mut request: Value) -> Value {
    let spec = &request["spec"];
    let subject = Subject {
        user: spec["user"].as_str().unwrap_or_default().to_owned(),
        groups: spec["groups"]
            .as_array()
            .map(|g| {
                g.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
    };
    let text = |v: &Value, field: &str| v[field].as_str().unwrap_or_default().to_owned();
    let attributes = match (&spec["nonResourceAttributes"], &spec["resourceAttributes"]) {
        (n, _) if n.is_object() => Attributes::NonResource {
            path: text(n, "path"),
            verb: text(n, "verb"),
        },
        (_, r) => Attributes::Resource {
            verb: text(r, "verb"),
            group: text(r, "group"),
            resource: text(r, "resource"),
            subresource: text(r, "subresource"),
            name: text(r, "name"),
        },
    };
    let bindings = state.store.list(&rbac_storage("clusterrolebindings"), None);
    let role = |name: &str| {
        let key = ObjKey {
            storage: rbac_storage("clusterroles"),
            namespace: String::new(),
            name: name.to_owned(),
        };
        state.store.get(&key).map(|r| (*r).clone())
    };
    request["status"] = match rbac::allowed_by(&subject, &attributes, &bindings, role) {
        Some(reason) => json!({"allowed": true, "reason": reason}),
        None => json!({"allowed": false}),
    };
    request
}

fn rbac_storage(resource: &str) -> StorageId {
    StorageId {
        group: "rbac.authorization.k8s.io".into(),
        resource: resource.into(),
    }
}
