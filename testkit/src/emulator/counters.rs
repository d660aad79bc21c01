//! Request counters: every request the emulator answers, by resource, verb
//! and class of status code — what a test reads to prove how a controller
//! talks to the API (one status patch per transition, no list storms, no
//! writes after a refusal), and what `GET /emulator/requests` serves to
//! scripts.
//!
//! Verbs are kube-apiserver's: `get`, `list`, `watch`, `create`, `update`
//! (PUT), `patch`, `delete`, `deletecollection`. A subresource is part of
//! the resource: `assetscans/status`. Discovery, OpenAPI, `/version` and
//! health checks are counted under the empty resource with verb `get`.
//! Requests refused during an outage are never answered, so never counted.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::{Value, json};

/// A Kubernetes API verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
    /// Any other HTTP method (answered 405).
    Other,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::DeleteCollection => "deletecollection",
            Self::Other => "other",
        }
    }
}

/// The class of an answer's status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CodeClass {
    /// 2xx
    Success,
    /// 4xx
    ClientError,
    /// 5xx
    ServerError,
    /// 1xx and 3xx (the emulator sends neither).
    Other,
}

impl CodeClass {
    pub fn of(code: u16) -> Self {
        match code / 100 {
            2 => Self::Success,
            4 => Self::ClientError,
            5 => Self::ServerError,
            _ => Self::Other,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "2xx",
            Self::ClientError => "4xx",
            Self::ServerError => "5xx",
            Self::Other => "other",
        }
    }
}

/// What one counter counts.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestKey {
    /// API group, empty for the core group (and for non-resource requests).
    pub group: String,
    /// Plural resource with its subresource, e.g. `assetscans/status`.
    pub resource: String,
    pub verb: Verb,
    pub class: CodeClass,
}

/// A snapshot of the counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts {
    pub counts: BTreeMap<RequestKey, u64>,
}

impl RequestCounts {
    /// Requests for `resource` (`assetscans`, `assetscans/status`; any
    /// group) with `verb`, whatever their outcome.
    pub fn count(&self, resource: &str, verb: Verb) -> u64 {
        self.counts
            .iter()
            .filter(|(k, _)| k.resource == resource && k.verb == verb)
            .map(|(_, n)| n)
            .sum()
    }

    /// Like `count`, for one class of outcome.
    pub fn count_class(&self, resource: &str, verb: Verb, class: CodeClass) -> u64 {
        self.counts
            .iter()
            .filter(|(k, _)| k.resource == resource && k.verb == verb && k.class == class)
            .map(|(_, n)| n)
            .sum()
    }

    /// Every request counted.
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// The JSON `GET /emulator/requests` answers.
    pub fn to_json(&self) -> Value {
        let rows: Vec<Value> = self
            .counts
            .iter()
            .map(|(k, n)| {
                json!({
                    "group": k.group,
                    "resource": k.resource,
                    "verb": k.verb.as_str(),
                    "code": k.class.as_str(),
                    "count": n,
                })
            })
            .collect();
        json!({"requests": rows})
    }
}

/// The live counters, shared by the request handlers.
#[derive(Debug, Default)]
pub struct Counters {
    counts: Mutex<BTreeMap<RequestKey, u64>>,
}

/// Longest resource name kept; longer (nonsense) names are cut so that no
/// client can grow the counters without bound per request.
const MAX_RESOURCE_LEN: usize = 128;

impl Counters {
    pub fn record(&self, group: &str, resource: &str, verb: Verb, code: u16) {
        let key = RequestKey {
            group: group.chars().take(MAX_RESOURCE_LEN).collect(),
            resource: resource.chars().take(MAX_RESOURCE_LEN).collect(),
            verb,
            class: CodeClass::of(code),
        };
        *self
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_default() += 1;
    }

    pub fn snapshot(&self) -> RequestCounts {
        RequestCounts {
            counts: self
                .counts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_resource_verb_and_class() {
        let c = Counters::default();
        c.record("example.com", "assetscans/status", Verb::Patch, 200);
        c.record("example.com", "assetscans/status", Verb::Patch, 409);
        c.record("example.com", "assetscans", Verb::List, 200);
        let s = c.snapshot();
        assert_eq!(s.count("assetscans/status", Verb::Patch), 2);
        assert_eq!(
            s.count_class("assetscans/status", Verb::Patch, CodeClass::ClientError),
            1
        );
        assert_eq!(s.count("assetscans", Verb::Patch), 0);
        assert_eq!(s.total(), 3);
        assert_eq!(s.to_json()["requests"].as_array().map(Vec::len), Some(3));
    }
}
