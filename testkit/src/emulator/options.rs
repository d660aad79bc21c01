//! The options of a request (`CreateOptions`, `UpdateOptions`,
//! `PatchOptions`, `DeleteOptions`, `ListOptions`), checked before anything
//! is read or written, as kube-apiserver's handlers do: a bad option is a
//! `422 Invalid` on the options kind (`PatchOptions.meta.k8s.io "" is
//! invalid: force: Forbidden: …`), never a silently ignored parameter — an
//! unknown `dryRun` value that went unnoticed would persist what the caller
//! meant to try.

use std::collections::HashMap;

use serde_json::Value;

use super::error::{ApiError, FieldError};

const META_GROUP: &str = "meta.k8s.io";
const FIELD_MANAGER_MAX_BYTES: usize = 128;

/// The options kinds, named as in their `Invalid` errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionsKind {
    Create,
    Update,
    Patch,
    Delete,
    List,
}

impl OptionsKind {
    fn name(self) -> &'static str {
        match self {
            Self::Create => "CreateOptions",
            Self::Update => "UpdateOptions",
            Self::Patch => "PatchOptions",
            Self::Delete => "DeleteOptions",
            Self::List => "ListOptions",
        }
    }
}

fn invalid(kind: OptionsKind, causes: Vec<FieldError>) -> Result<(), ApiError> {
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::Invalid {
        kind: format!("{}.{META_GROUP}", kind.name()),
        group: META_GROUP.to_string(),
        kind_name: kind.name().to_string(),
        name: String::new(),
        causes,
    })
}

fn param<'a>(query: &'a HashMap<String, String>, key: &str) -> Option<&'a str> {
    query.get(key).map(String::as_str)
}

/// `dryRun` may only say `All`. The value is a list in the API, which the
/// message shows the way Go prints a `[]string`.
pub fn dry_run_errors(values: &[&str]) -> Vec<FieldError> {
    if values.iter().all(|v| *v == "All") {
        return Vec::new();
    }
    let shown: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    vec![FieldError::not_supported(
        "dryRun",
        &format!("[]string{{{}}}", shown.join(", ")),
        &["All"],
    )]
}

fn field_manager_errors(manager: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if manager.len() > FIELD_MANAGER_MAX_BYTES {
        errs.push(FieldError::too_long(
            "fieldManager",
            FIELD_MANAGER_MAX_BYTES,
        ));
    }
    for (i, c) in manager.char_indices() {
        if c.is_control() {
            errs.push(FieldError::invalid(
                "fieldManager",
                &Value::String(manager.chars().take(FIELD_MANAGER_MAX_BYTES).collect()),
                &format!("invalid character U+{:04X} (at position {i})", c as u32),
            ));
        }
    }
    errs
}

fn field_validation_errors(value: Option<&str>) -> Vec<FieldError> {
    match value {
        None | Some("" | "Ignore" | "Warn" | "Strict") => Vec::new(),
        Some(other) => vec![FieldError::not_supported(
            "fieldValidation",
            &format!("{other:?}"),
            &["", "Ignore", "Strict", "Warn"],
        )],
    }
}

/// The options of a create, update (PUT) or patch, from the query.
pub fn check_write(
    kind: OptionsKind,
    query: &HashMap<String, String>,
    apply: bool,
) -> Result<(), ApiError> {
    let mut errs = Vec::new();
    let manager = param(query, "fieldManager").unwrap_or_default();
    if kind == OptionsKind::Patch {
        if !apply && query.contains_key("force") {
            errs.push(FieldError::forbidden(
                "force",
                "may not be specified for non-apply patch",
            ));
        }
        if apply && manager.is_empty() {
            errs.push(FieldError::required(
                "fieldManager",
                "is required for apply patch",
            ));
        }
    }
    errs.extend(field_manager_errors(manager));
    if let Some(dry_run) = param(query, "dryRun") {
        errs.extend(dry_run_errors(&[dry_run]));
    }
    errs.extend(field_validation_errors(param(query, "fieldValidation")));
    invalid(kind, errs)
}

/// `DeleteOptions`: `propagationPolicy` and the deprecated
/// `orphanDependents` exclude each other; `dryRun` as for writes.
pub fn check_delete(
    propagation_policy: Option<&str>,
    orphan_dependents: Option<bool>,
    dry_run: &[&str],
) -> Result<(), ApiError> {
    let mut errs = Vec::new();
    if let (Some(policy), Some(_)) = (propagation_policy, orphan_dependents) {
        errs.push(FieldError::invalid(
            "propagationPolicy",
            &Value::String(policy.to_string()),
            "orphanDependents and deletionPropagation cannot be both set",
        ));
    }
    if let Some(policy) = propagation_policy
        && !matches!(policy, "Foreground" | "Background" | "Orphan")
    {
        errs.push(FieldError::not_supported(
            "propagationPolicy",
            &format!("{policy:?}"),
            &["Foreground", "Background", "Orphan", "nil"],
        ));
    }
    errs.extend(dry_run_errors(dry_run));
    invalid(OptionsKind::Delete, errs)
}

/// `ListOptions` of a list or a watch. Streaming lists (`sendInitialEvents`)
/// are accepted, as with the WatchList feature gate on.
pub fn check_list(query: &HashMap<String, String>, watch: bool) -> Result<(), ApiError> {
    let rv = param(query, "resourceVersion").unwrap_or_default();
    let continued = param(query, "continue").is_some_and(|c| !c.is_empty());
    let initial_events = query.contains_key("sendInitialEvents");
    let mut errs = Vec::new();
    let forbidden = |detail: &str| FieldError::forbidden("resourceVersionMatch", detail);
    let matching = param(query, "resourceVersionMatch").filter(|m| !m.is_empty());
    if watch {
        if initial_events && matching != Some("NotOlderThan") {
            errs.push(forbidden(
                "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if let Some(m) = matching {
            if !initial_events {
                errs.push(forbidden(
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if m != "NotOlderThan" {
                errs.push(FieldError::not_supported(
                    "resourceVersionMatch",
                    &format!("{m:?}"),
                    &["NotOlderThan"],
                ));
            }
            if continued {
                errs.push(forbidden(
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
        }
        return invalid(OptionsKind::List, errs);
    }
    if let Some(m) = matching {
        if rv.is_empty() {
            errs.push(forbidden(
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if continued {
            errs.push(forbidden(
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if m != "Exact" && m != "NotOlderThan" {
            errs.push(FieldError::not_supported(
                "resourceVersionMatch",
                &format!("{m:?}"),
                &["Exact", "NotOlderThan", ""],
            ));
        }
        if m == "Exact" && rv == "0" {
            errs.push(forbidden(
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if initial_events {
        errs.push(FieldError::forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for list",
        ));
    }
    invalid(OptionsKind::List, errs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn messages_read_like_kube_apiserver() {
        let e = check_write(OptionsKind::Create, &query(&[("dryRun", "Bogus")]), false)
            .expect_err("invalid");
        assert_eq!(
            e.to_string(),
            "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"Bogus\"}: supported values: \"All\""
        );
        let e = check_write(OptionsKind::Patch, &query(&[("force", "true")]), false)
            .expect_err("invalid");
        assert_eq!(
            e.to_string(),
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch"
        );
        assert!(
            check_write(
                OptionsKind::Patch,
                &query(&[("force", "true"), ("fieldManager", "m")]),
                true
            )
            .is_ok()
        );
        let e =
            check_list(&query(&[("resourceVersionMatch", "Exact")]), false).expect_err("invalid");
        assert_eq!(e.code(), 422);
        assert!(
            check_list(
                &query(&[("resourceVersion", "5"), ("resourceVersionMatch", "Exact")]),
                false
            )
            .is_ok()
        );
    }
}
