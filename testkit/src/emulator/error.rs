//! Errors: what the API answers (`ApiError`, rendered as a `Status` object
//! with the same `reason`, `code` and message shape as kube-apiserver) and
//! what can go wrong starting the emulator (`EmulatorError`).
//!
//! Clients branch on `reason` and `code` (kube-rs' `ErrorResponse`,
//! client-go's `apierrors.IsConflict` …) and people read `message`, so both
//! are copied from the real server's wording.

use serde_json::{Value, json};

/// The group and plural resource name used in most messages,
/// e.g. `assetscans.example.com` or `configmaps` for the core group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl std::fmt::Display for GroupResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}", self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// One field-level problem, the `causes[]` of an `Invalid` status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, …
    pub reason: String,
    /// The field path as kube-apiserver prints it: `spec.port`, `status.conditions[0].type`.
    pub field: String,
    /// The message without the field prefix, e.g. `Invalid value: 70000: spec.port in body should be …`.
    pub message: String,
}

impl FieldError {
    pub fn new(reason: &str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason: reason.to_string(),
            field: field.into(),
            message: message.into(),
        }
    }

    /// `field.Invalid(path, value, detail)`: `Invalid value: <value>: <detail>`.
    pub fn invalid(field: &str, value: &Value, detail: &str) -> Self {
        Self::new(
            "FieldValueInvalid",
            field,
            format!("Invalid value: {}: {detail}", go_value(value)),
        )
    }

    /// `field.Required(path, detail)`.
    pub fn required(field: &str, detail: &str) -> Self {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        Self::new("FieldValueRequired", field, message)
    }

    /// `field.Forbidden(path, detail)`.
    pub fn forbidden(field: &str, detail: &str) -> Self {
        Self::new("FieldValueForbidden", field, format!("Forbidden: {detail}"))
    }

    /// `field.NotSupported(path, value, valid)`; `shown` is the value as Go
    /// prints it (`"x"` for a string, `[]string{"x"}` for a list).
    pub fn not_supported(field: &str, shown: &str, valid: &[&str]) -> Self {
        let valid: Vec<String> = valid.iter().map(|v| format!("{v:?}")).collect();
        Self::new(
            "FieldValueNotSupported",
            field,
            format!(
                "Unsupported value: {shown}: supported values: {}",
                valid.join(", ")
            ),
        )
    }

    /// `field.TooLong(path, value, max)`.
    pub fn too_long(field: &str, max_bytes: usize) -> Self {
        Self::new(
            "FieldValueTooLong",
            field,
            format!("Too long: must have at most {max_bytes} bytes"),
        )
    }

    /// `field.Invalid(path, value, "field is immutable")`.
    pub fn immutable(field: &str, value: &Value) -> Self {
        Self::invalid(field, value, "field is immutable")
    }

    /// The line as it appears inside an aggregated `Invalid` message.
    pub fn line(&self) -> String {
        if self.field.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.field, self.message)
        }
    }
}

/// Render a JSON value the way Go's `%#v`/`%v` does in field errors:
/// strings quoted, numbers bare, objects by type name.
pub fn go_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".to_string(),
        Value::Array(_) => "\"array\"".to_string(),
        Value::Object(_) => "\"object\"".to_string(),
    }
}

/// The JSON type name Go's decoder reports for a value.
pub fn go_type_name(v: &Value) -> String {
    let name = match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    format!("{name:?}")
}

/// One field-manager conflict of a server-side apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyConflict {
    pub manager: String,
    pub api_version: String,
    /// `.spec.port`, `.status.conditions[type="Ready"].status`
    pub field: String,
}

/// The detail of the standard optimistic-concurrency conflict.
const STALE: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// An error answered by the emulated API server.
///
/// Each variant maps to one `reason` and HTTP code of the real server.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        resource: GroupResource,
        name: String,
    },
    /// A path that names no known resource (404 with an empty `details`).
    #[error("the server could not find the requested resource")]
    UnknownResource,
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        resource: GroupResource,
        name: String,
    },
    /// Optimistic-concurrency failure or a failed precondition.
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {detail}")]
    Conflict {
        resource: GroupResource,
        name: String,
        detail: String,
    },
    /// Another write to the object landed while this one was validated
    /// outside the state lock: redone by the route, a 409 if it keeps
    /// happening.
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {STALE}")]
    Raced {
        resource: GroupResource,
        name: String,
    },
    /// Server-side apply found fields owned by other managers.
    #[error("{}", apply_conflict_message(.conflicts))]
    ApplyConflict {
        resource: GroupResource,
        name: String,
        conflicts: Vec<ApplyConflict>,
    },
    /// Validation failed; `kind` is `Kind.group`, e.g. `AssetScan.example.com`.
    #[error("{} \"{name}\" is invalid: {}", .kind, aggregate(.causes))]
    Invalid {
        kind: String,
        group: String,
        kind_name: String,
        name: String,
        causes: Vec<FieldError>,
    },
    /// 422 without field causes (e.g. a JSON patch `test` that failed).
    #[error("{0}")]
    Unprocessable(String),
    /// The requested resourceVersion or continue token is older than the history window.
    #[error("{message}")]
    Gone {
        message: String,
        continue_token: Option<String>,
    },
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Forbidden(String),
    #[error(
        "the body of the request was in an unknown format - accepted media types include: {accepted}"
    )]
    UnsupportedMediaType { accepted: String },
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    #[error("{message}")]
    TooManyRequests {
        message: String,
        retry_after_seconds: u64,
    },
    #[error("{0}")]
    Timeout(String),
    #[error("Internal error occurred: {0}")]
    Internal(String),
}

fn aggregate(causes: &[FieldError]) -> String {
    match causes {
        [one] => one.line(),
        many => format!(
            "[{}]",
            many.iter()
                .map(FieldError::line)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn apply_conflict_message(conflicts: &[ApplyConflict]) -> String {
    if let [c] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with \"{}\" using {}: {}",
            c.manager, c.api_version, c.field
        );
    }
    let mut out = format!("Apply failed with {} conflicts: ", conflicts.len());
    let mut lines = Vec::new();
    let mut managers: Vec<(&str, &str)> = Vec::new();
    for c in conflicts {
        if !managers.contains(&(c.manager.as_str(), c.api_version.as_str())) {
            managers.push((&c.manager, &c.api_version));
        }
    }
    for (manager, api_version) in managers {
        lines.push(format!("conflicts with \"{manager}\" using {api_version}:"));
        for c in conflicts
            .iter()
            .filter(|c| c.manager == manager && c.api_version == api_version)
        {
            lines.push(format!("- {}", c.field));
        }
    }
    out.push_str(&lines.join("\n"));
    out
}

impl ApiError {
    pub fn not_found(resource: &GroupResource, name: &str) -> Self {
        Self::NotFound {
            resource: resource.clone(),
            name: name.to_string(),
        }
    }

    /// A failed storage precondition (the UID a PUT carried is not the
    /// stored object's), worded as etcd's storage layer words it, with the
    /// object's etcd key.
    pub fn precondition(
        resource: &GroupResource,
        name: &str,
        key: &str,
        expected: &str,
        actual: &str,
    ) -> Self {
        Self::Conflict {
            resource: resource.clone(),
            name: name.to_string(),
            detail: format!(
                "StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {expected}, UID in object meta: {actual}"
            ),
        }
    }

    /// The standard optimistic-concurrency conflict.
    pub fn stale(resource: &GroupResource, name: &str) -> Self {
        Self::Conflict {
            resource: resource.clone(),
            name: name.to_string(),
            detail: STALE.to_string(),
        }
    }

    pub fn code(&self) -> u16 {
        match self {
            Self::NotFound { .. } | Self::UnknownResource => 404,
            Self::AlreadyExists { .. }
            | Self::Conflict { .. }
            | Self::Raced { .. }
            | Self::ApplyConflict { .. } => 409,
            Self::Invalid { .. } | Self::Unprocessable(_) => 422,
            Self::Gone { .. } => 410,
            Self::BadRequest(_) => 400,
            Self::Forbidden(_) => 403,
            Self::UnsupportedMediaType { .. } => 415,
            Self::MethodNotAllowed => 405,
            Self::TooManyRequests { .. } => 429,
            Self::Timeout(_) => 504,
            Self::Internal(_) => 500,
        }
    }

    pub fn reason(&self) -> &'static str {
        match self {
            Self::NotFound { .. } | Self::UnknownResource => "NotFound",
            Self::AlreadyExists { .. } => "AlreadyExists",
            Self::Conflict { .. } | Self::Raced { .. } | Self::ApplyConflict { .. } => "Conflict",
            Self::Invalid { .. } | Self::Unprocessable(_) => "Invalid",
            Self::Gone { .. } => "Expired",
            Self::BadRequest(_) => "BadRequest",
            Self::Forbidden(_) => "Forbidden",
            Self::UnsupportedMediaType { .. } => "UnsupportedMediaType",
            Self::MethodNotAllowed => "MethodNotAllowed",
            Self::TooManyRequests { .. } => "TooManyRequests",
            Self::Timeout(_) => "Timeout",
            Self::Internal(_) => "InternalError",
        }
    }

    /// `Retry-After` header value, when the server asks the client to back off.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            Self::TooManyRequests {
                retry_after_seconds,
                ..
            } => Some(*retry_after_seconds),
            _ => None,
        }
    }

    fn details(&self) -> Option<Value> {
        let named = |r: &GroupResource, name: &str| json!({"name": name, "group": r.group, "kind": r.resource});
        let details = match self {
            Self::NotFound { resource, name }
            | Self::AlreadyExists { resource, name }
            | Self::Raced { resource, name }
            | Self::Conflict { resource, name, .. } => named(resource, name),
            Self::ApplyConflict {
                resource,
                name,
                conflicts,
            } => {
                let mut d = named(resource, name);
                d["causes"] = conflicts
                    .iter()
                    .map(|c| {
                        json!({
                            "reason": "FieldManagerConflict",
                            "message": format!("conflict with \"{}\" using {}", c.manager, c.api_version),
                            "field": c.field,
                        })
                    })
                    .collect();
                d
            }
            Self::Invalid {
                group,
                kind_name,
                name,
                causes,
                ..
            } => {
                let mut d = json!({
                    "group": group,
                    "kind": kind_name,
                    "causes": causes
                        .iter()
                        .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                        .collect::<Vec<_>>(),
                });
                // Go omits empty strings: the options kinds have no name.
                if !name.is_empty() {
                    d["name"] = Value::String(name.clone());
                }
                d
            }
            Self::TooManyRequests {
                retry_after_seconds,
                ..
            } => json!({"retryAfterSeconds": retry_after_seconds}),
            Self::Internal(message) => json!({"causes": [{"message": message}]}),
            _ => return None,
        };
        Some(details)
    }

    /// The `Status` object a real server sends for this error.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": self.reason(),
            "code": self.code(),
        });
        if let Some(details) = self.details() {
            status["details"] = details;
        }
        if let Self::Gone {
            continue_token: Some(token),
            ..
        } = self
        {
            status["metadata"]["continue"] = Value::String(token.clone());
        }
        status
    }
}

/// Failures starting the emulator or loading its CRDs.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error("reading {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("parsing YAML in {path}: {source}")]
    Yaml {
        path: String,
        source: Box<serde_saphyr::Error>,
    },
    #[error("invalid CustomResourceDefinition {name}: {reason}")]
    InvalidCrd { name: String, reason: String },
    #[error("binding the listener: {0}")]
    Bind(std::io::Error),
    #[error("building a kube client: {0}")]
    Client(String),
}
