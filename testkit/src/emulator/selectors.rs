//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, exists, `!`exists) and
//! field selectors (`=`, `==`, `!=` on the fields a resource supports), with
//! kube-apiserver's parse errors, and the `Filter` of a list, watch or
//! deletecollection request that combines them.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::error::ApiError;
use super::meta;
use super::resources::ResourceType;

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelOp {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

/// A parsed `labelSelector`; all requirements must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    reqs: Vec<(String, LabelOp)>,
}

impl LabelSelector {
    pub fn parse(input: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for raw in split_top_level(input) {
            let req = raw.trim();
            if req.is_empty() {
                continue;
            }
            reqs.push(parse_requirement(req)?);
        }
        Ok(Self { reqs })
    }

    pub fn matches(&self, labels: &Map<String, Value>) -> bool {
        self.reqs.iter().all(|(key, op)| {
            let value = labels.get(key).and_then(Value::as_str);
            match op {
                LabelOp::Eq(v) => value == Some(v.as_str()),
                LabelOp::NotEq(v) => value != Some(v.as_str()),
                LabelOp::In(vs) => value.is_some_and(|x| vs.iter().any(|v| v == x)),
                LabelOp::NotIn(vs) => value.is_none_or(|x| vs.iter().all(|v| v != x)),
                LabelOp::Exists => value.is_some(),
                LabelOp::DoesNotExist => value.is_none(),
            }
        })
    }
}

/// Splits on commas that are not inside `( … )`.
fn split_top_level(input: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&input[start..]);
    out
}

fn bad(req: &str, why: &str) -> ApiError {
    ApiError::BadRequest(format!("unable to parse requirement: {why}: {req:?}"))
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 317
        && key
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'/'))
}

fn parse_set(req: &str, rest: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| bad(req, "expected parenthesized set of values"))?;
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
    if values.iter().all(String::is_empty) {
        return Err(bad(
            req,
            "for 'in', 'notin' operators, values set can't be empty",
        ));
    }
    Ok(values)
}

fn parse_requirement(req: &str) -> Result<(String, LabelOp), ApiError> {
    if let Some(key) = req.strip_prefix('!') {
        let key = key.trim();
        return if valid_key(key) {
            Ok((key.to_string(), LabelOp::DoesNotExist))
        } else {
            Err(bad(req, "invalid key"))
        };
    }
    for (sym, is_eq) in [("!=", false), ("==", true), ("=", true)] {
        if let Some((k, v)) = req.split_once(sym) {
            let (k, v) = (k.trim(), v.trim());
            if !valid_key(k) {
                return Err(bad(req, "invalid label key"));
            }
            let op = if is_eq {
                LabelOp::Eq(v.to_string())
            } else {
                LabelOp::NotEq(v.to_string())
            };
            return Ok((k.to_string(), op));
        }
    }
    let mut words = req.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or_default().trim();
    let rest = words.next().unwrap_or_default().trim();
    if rest.is_empty() {
        return if valid_key(key) {
            Ok((key.to_string(), LabelOp::Exists))
        } else {
            Err(bad(req, "invalid key"))
        };
    }
    if !valid_key(key) {
        return Err(bad(req, "invalid label key"));
    }
    if let Some(set) = rest.strip_prefix("notin") {
        return Ok((key.to_string(), LabelOp::NotIn(parse_set(req, set)?)));
    }
    if let Some(set) = rest.strip_prefix("in") {
        return Ok((key.to_string(), LabelOp::In(parse_set(req, set)?)));
    }
    Err(bad(
        req,
        "found unknown operator, expected one of: =, ==, !=, in, notin",
    ))
}

/// A parsed `fieldSelector`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    reqs: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses and checks every field is one the resource supports.
    pub fn parse(input: &str, supported: &[String]) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for req in input.split(',').map(str::trim).filter(|r| !r.is_empty()) {
            let (field, eq, value) = if let Some((f, v)) = req.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = req.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = req.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::BadRequest(format!(
                    "invalid selector: '{input}'; can't understand '{req}'"
                )));
            };
            let field = field.trim();
            if !supported.iter().any(|s| s == field) {
                return Err(ApiError::BadRequest(format!(
                    "field label not supported: {field}"
                )));
            }
            reqs.push((field.to_string(), eq, value.trim().to_string()));
        }
        Ok(Self { reqs })
    }

    /// Evaluated against the stored representation (field names of the storage version).
    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|(field, eq, expected)| {
            let actual = meta::dotted(obj, field)
                .map(meta::scalar_string)
                .unwrap_or_default();
            (actual == *expected) == *eq
        })
    }
}

/// Selectors of a list or watch request.
pub struct Filter {
    labels: LabelSelector,
    fields: FieldSelector,
    has_selectors: bool,
}

impl Filter {
    pub fn from_query(
        rt: &ResourceType,
        query: &HashMap<String, String>,
    ) -> Result<Self, ApiError> {
        let label_sel = query
            .get("labelSelector")
            .map(String::as_str)
            .unwrap_or_default();
        let field_sel = query
            .get("fieldSelector")
            .map(String::as_str)
            .unwrap_or_default();
        let mut supported = vec![
            "metadata.name".to_string(),
            "metadata.namespace".to_string(),
        ];
        supported.extend(rt.selectable_fields.iter().cloned());
        Ok(Self {
            labels: LabelSelector::parse(label_sel)?,
            fields: FieldSelector::parse(field_sel, &supported)?,
            has_selectors: !label_sel.is_empty() || !field_sel.is_empty(),
        })
    }

    /// Matches a stored object.
    pub fn matches(&self, stored: &Value) -> bool {
        self.labels.matches(&meta::labels(stored)) && self.fields.matches(stored)
    }

    /// Whether any selector was given (lists then count no remaining items).
    pub fn has_selectors(&self) -> bool {
        self.has_selectors
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn label_operators() {
        let l = labels(json!({"app": "scan", "tier": "db"}));
        let ok = |s: &str| LabelSelector::parse(s).expect("parses").matches(&l);
        assert!(ok("app=scan"));
        assert!(ok("app==scan,tier"));
        assert!(ok("app!=web"));
        assert!(ok("tier in (db, cache)"));
        assert!(ok("tier notin (web)"));
        assert!(ok("!missing"));
        assert!(!ok("missing"));
        assert!(!ok("tier in (web),app=scan"));
        assert!(LabelSelector::parse("app in scan").is_err());
    }

    #[test]
    fn field_selectors() {
        let supported = vec![
            "metadata.name".to_string(),
            "metadata.namespace".to_string(),
        ];
        let obj = json!({"metadata": {"name": "a", "namespace": "x"}});
        assert!(
            FieldSelector::parse("metadata.name=a", &supported)
                .expect("ok")
                .matches(&obj)
        );
        assert!(
            !FieldSelector::parse("metadata.namespace!=x", &supported)
                .expect("ok")
                .matches(&obj)
        );
        assert!(FieldSelector::parse("spec.x=1", &supported).is_err());
    }
}
