//! RBAC as kube-apiserver's authorizer evaluates it, for what the emulator
//! is asked: a user and groups, and either a non-resource URL and verb or a
//! resource request, allowed when a ClusterRoleBinding binds one of them to
//! a ClusterRole with a rule that covers the request.
//!
//! Not evaluated: Roles and RoleBindings, aggregated ClusterRoles
//! (`aggregationRule`), and the `system:masters` group's implicit grant is
//! the only built-in one (no bootstrap roles are stored).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;

/// Whom an issued token names.
#[derive(Debug, Clone)]
pub struct TokenOwner {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub expires: SystemTime,
}

/// The tokens the emulator issued, by token.
pub type Tokens = HashMap<String, TokenOwner>;

/// The request a SubjectAccessReview asks about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attributes {
    NonResource {
        path: String,
        verb: String,
    },
    Resource {
        verb: String,
        group: String,
        resource: String,
        subresource: String,
        name: String,
    },
}

/// Who asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub user: String,
    pub groups: Vec<String>,
}

/// The binding and role that allow the request, worded as the real
/// server's `reason`, or `None`.
pub fn allowed_by(
    subject: &Subject,
    attributes: &Attributes,
    bindings: &[Arc<Value>],
    role: impl Fn(&str) -> Option<Value>,
) -> Option<String> {
    if subject.groups.iter().any(|g| g == "system:masters") {
        return Some("allowed by the system:masters group".into());
    }
    bindings.iter().find_map(|binding| {
        let role_ref = &binding["roleRef"];
        if role_ref["kind"] != "ClusterRole" || !binds(binding, subject) {
            return None;
        }
        let role_name = role_ref["name"].as_str()?;
        let role = role(role_name)?;
        let rules = role["rules"].as_array()?;
        rules.iter().any(|rule| covers(rule, attributes)).then(|| {
            format!(
                "RBAC: allowed by ClusterRoleBinding \"{}\" of ClusterRole \"{role_name}\" to {}",
                binding["metadata"]["name"].as_str().unwrap_or_default(),
                subject.user
            )
        })
    })
}

fn binds(binding: &Value, subject: &Subject) -> bool {
    let Some(subjects) = binding["subjects"].as_array() else {
        return false;
    };
    subjects.iter().any(|s| {
        let name = s["name"].as_str().unwrap_or_default();
        match s["kind"].as_str() {
            Some("ServiceAccount") => {
                let namespace = s["namespace"].as_str().unwrap_or_default();
                subject.user == format!("system:serviceaccount:{namespace}:{name}")
            }
            Some("User") => subject.user == name,
            Some("Group") => subject.groups.iter().any(|g| g == name),
            _ => false,
        }
    })
}

fn strings(rule: &Value, field: &str) -> Vec<String> {
    rule[field]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn any_is(values: &[String], wanted: &str) -> bool {
    values.iter().any(|v| v == "*" || v == wanted)
}

/// Whether `rule` covers the request, as rbac/v1's `RuleAllows` decides.
fn covers(rule: &Value, attributes: &Attributes) -> bool {
    let verbs = strings(rule, "verbs");
    match attributes {
        Attributes::NonResource { path, verb } => {
            any_is(&verbs, verb)
                && strings(rule, "nonResourceURLs").iter().any(|url| {
                    url == "*"
                        || url == path
                        || url
                            .strip_suffix('*')
                            .is_some_and(|prefix| path.starts_with(prefix))
                })
        }
        Attributes::Resource {
            verb,
            group,
            resource,
            subresource,
            name,
        } => {
            let full = match subresource.as_str() {
                "" => resource.clone(),
                sub => format!("{resource}/{sub}"),
            };
            let names = strings(rule, "resourceNames");
            any_is(&verbs, verb)
                && any_is(&strings(rule, "apiGroups"), group)
                && any_is(&strings(rule, "resources"), &full)
                && (names.is_empty() || names.iter().any(|n| n == name))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sa(name: &str) -> Subject {
        Subject {
            user: format!("system:serviceaccount:monitoring:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:authenticated".into(),
            ],
        }
    }

    fn metrics(path: &str, verb: &str) -> Attributes {
        Attributes::NonResource {
            path: path.into(),
            verb: verb.into(),
        }
    }

    fn decide(subject: &Subject, attributes: &Attributes, urls: Value) -> bool {
        let binding = json!({
            "metadata": {"name": "b"},
            "roleRef": {"kind": "ClusterRole", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}],
        });
        let role = json!({"rules": [{"nonResourceURLs": urls, "verbs": ["get"]}]});
        allowed_by(subject, attributes, &[Arc::new(binding)], |name| {
            (name == "reader").then(|| role.clone())
        })
        .is_some()
    }

    /// Each case: the role's URLs, the caller, the path and verb asked, and
    /// whether RBAC's rule allows it.
    #[test]
    fn a_bound_service_account_may_get_its_urls_and_nothing_else() {
        for (urls, caller, path, verb, allowed) in [
            (json!(["/metrics"]), "prometheus", "/metrics", "get", true),
            (json!(["/metrics"]), "prometheus", "/metrics", "post", false),
            (json!(["/metrics"]), "prometheus", "/metricsx", "get", false),
            (json!(["/metrics"]), "other", "/metrics", "get", false),
            // A trailing star matches by prefix.
            (
                json!(["/debug/*"]),
                "prometheus",
                "/debug/pprof",
                "get",
                true,
            ),
            (json!(["/debug/*"]), "prometheus", "/metrics", "get", false),
        ] {
            assert_eq!(
                decide(&sa(caller), &metrics(path, verb), urls.clone()),
                allowed,
                "{caller} {verb} {path} under {urls}"
            );
        }
    }
}
