//! PATCH: which media types are accepted for which resource, how JSON
//! merge patches and JSON patches (RFC 6902) apply, and the verb, which
//! hands server-side apply to `apply` and finishes the others as every
//! update does (`update`).
//!
//! Strategic merge patch is what kube-apiserver rejects for custom
//! resources (415); for the built-in kinds served here (none of which has
//! list merge keys that matter to the operator) it is applied as a JSON
//! merge patch.

use json_patch::{Patch as JsonPatch, PatchOperation};
use serde_json::Value;

use super::apply::apply;
use super::body;
use super::error::{ApiError, go_type_name};
use super::options::{self, OptionsKind};
use super::request::{Reply, Request, parse_body};
use super::state::Locked;
use super::store::Operation;
use super::update::{Proposed, finish_update};

/// The PATCH flavours, by `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    StrategicMerge,
    Apply,
}

const CR_TYPES: &str =
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";
const BUILTIN_TYPES: &str = "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml";

impl PatchType {
    /// Picks the patch type from the request's content type; CRs do not take strategic merge.
    pub fn from_content_type(content_type: &str, custom: bool) -> Result<Self, ApiError> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        let accepted = if custom { CR_TYPES } else { BUILTIN_TYPES };
        let unsupported = || ApiError::UnsupportedMediaType {
            accepted: accepted.to_string(),
        };
        match media {
            "application/json-patch+json" => Ok(Self::Json),
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/strategic-merge-patch+json" if !custom => Ok(Self::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(Self::Apply),
            _ => Err(unsupported()),
        }
    }
}

pub fn patch(state: &mut Locked<'_>, req: &Request<'_>, raw: &[u8]) -> Result<Reply, ApiError> {
    let patch_type = PatchType::from_content_type(req.content_type, req.rt.custom)?;
    options::check_write(
        OptionsKind::Patch,
        req.query,
        patch_type == PatchType::Apply,
    )?;
    let name = req.item_name()?.to_string();
    let patch_body = parse_body(raw, req.content_type)?;
    let operation = match patch_type {
        PatchType::Apply => return apply(state, req, &name, patch_body),
        PatchType::Json => Operation::JsonPatch,
        PatchType::Merge => Operation::MergePatch,
        // Applied as a JSON merge patch; only offered for built-ins.
        PatchType::StrategicMerge => Operation::StrategicMergePatch,
    };
    let (key, stored) = req.current(state)?;
    let old = req.rt.to_view(&stored);
    let candidate = match operation {
        Operation::JsonPatch => json_patch(&old, &patch_body)?,
        _ => merge_patch(&old, &patch_body)?,
    };
    // A resourceVersion in the patch is a precondition, as with PUT.
    body::check_resource_version(req, &name, &candidate, &old)?;
    let proposed = Proposed {
        key,
        old: &old,
        candidate,
        operation,
        manager: req.update_manager(),
        managed_fields_done: false,
    };
    finish_update(state, req, proposed)
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &Value, patch: &Value) -> Result<Value, ApiError> {
    if !patch.is_object() {
        return Err(ApiError::BadRequest(format!(
            "error decoding patch: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            go_type_name(patch).trim_matches('"')
        )));
    }
    let mut out = target.clone();
    json_patch::merge(&mut out, patch);
    Ok(out)
}

/// RFC 6902 JSON patch, with one quirk of the Go implementation kube-apiserver
/// uses (and kube-runtime's finalizer helper relies on): a `test` for `null`
/// on a missing member succeeds.
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, ApiError> {
    let ops: JsonPatch = serde_json::from_value(patch.clone()).map_err(|e| {
        ApiError::BadRequest(format!(
            "the server rejected our request due to an error in our request: {e}"
        ))
    })?;
    let mut doc = target.clone();
    for op in &ops.0 {
        if let PatchOperation::Test(t) = op
            && t.value.is_null()
            && doc.pointer(t.path.as_str()).is_none()
            && parent_exists(&doc, t.path.as_str())
        {
            continue;
        }
        json_patch::patch(&mut doc, std::slice::from_ref(op))
            .map_err(|e| ApiError::Unprocessable(e.to_string()))?;
    }
    Ok(doc)
}

fn parent_exists(doc: &Value, pointer: &str) -> bool {
    match pointer.rfind('/') {
        Some(0) | None => true,
        Some(i) => doc.pointer(&pointer[..i]).is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn test_null_on_missing_member_passes_like_go() {
        let obj = json!({"metadata": {"name": "a"}});
        let patch = json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}
        ]);
        let out = json_patch(&obj, &patch).expect("applies");
        assert_eq!(out["metadata"]["finalizers"], json!(["f"]));
        let failing = json!([{"op": "test", "path": "/metadata/name", "value": "b"}]);
        assert_eq!(
            json_patch(&obj, &failing).expect_err("test fails").code(),
            422
        );
    }

    #[test]
    fn custom_resources_reject_strategic_merge() {
        let err = PatchType::from_content_type("application/strategic-merge-patch+json", true)
            .expect_err("415");
        assert_eq!(err.code(), 415);
        assert_eq!(
            PatchType::from_content_type("application/strategic-merge-patch+json", false).ok(),
            Some(PatchType::StrategicMerge)
        );
    }
}
