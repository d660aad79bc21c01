//! PATCH bodies: which media types are accepted for which resource, and how
//! JSON merge patches and JSON patches (RFC 6902) apply.
//!
//! Server-side apply is in `fieldmanager`. Strategic merge patch is what
//! kube-apiserver rejects for custom resources (415); for the built-in kinds
//! served here (none of which has list merge keys that matter to the
//! operator) it is applied as a JSON merge patch.

use json_patch::{Patch as JsonPatch, PatchOperation};
use serde_json::Value;

use super::error::ApiError;

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

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &Value, patch: &Value) -> Result<Value, ApiError> {
    if !patch.is_object() {
        return Err(ApiError::BadRequest(format!(
            "error decoding patch: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            super::schema::go_type_name(patch).trim_matches('"')
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
