//! One resource request as the verbs see it — resource, namespace, name,
//! subresource, query and the headers that matter — and the successful
//! `Reply` they give; how a request body is decoded.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::error::ApiError;
use super::fieldmanager::Writer;
use super::keys::ObjKey;
use super::resources::ResourceType;
use super::state::State;
use super::store::{Operation, WriteMeta};

/// A successful answer: status code, body, `Warning` headers.
#[derive(Debug)]
pub struct Reply {
    pub code: u16,
    pub body: Value,
    pub warnings: Vec<String>,
}

impl Reply {
    pub fn ok(body: Value) -> Self {
        Self::with_warnings(200, body, Vec::new())
    }

    pub fn with_warnings(code: u16, body: Value, warnings: Vec<String>) -> Self {
        Self {
            code,
            body,
            warnings,
        }
    }
}

/// One resource request, parsed.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub rt: Arc<ResourceType>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    pub query: &'a HashMap<String, String>,
    pub user_agent: &'a str,
    pub accept: &'a str,
    pub content_type: &'a str,
}

/// What to do with unknown fields in a body (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl Request<'_> {
    /// A query parameter, None when absent or empty.
    pub fn q(&self, k: &str) -> Option<&str> {
        self.query
            .get(k)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// `dryRun=All` (any other value was refused by the options check).
    pub fn dry_run(&self) -> bool {
        self.q("dryRun") == Some("All")
    }

    pub fn field_validation(&self) -> FieldValidation {
        match self.q("fieldValidation") {
            Some("Ignore") => FieldValidation::Ignore,
            Some("Strict") => FieldValidation::Strict,
            _ => FieldValidation::Warn,
        }
    }

    /// The manager of a non-apply write: `fieldManager`, else the user agent's
    /// program name, as kube-apiserver derives it.
    pub fn update_manager(&self) -> String {
        if let Some(m) = self.q("fieldManager") {
            return m.to_string();
        }
        let ua = self.user_agent.split('/').next().unwrap_or_default();
        ua.chars().take(128).collect()
    }

    pub fn key(&self, name: &str) -> ObjKey {
        ObjKey {
            storage: self.rt.storage.clone(),
            namespace: self.namespace.clone().unwrap_or_default(),
            name: name.to_string(),
        }
    }

    /// The object's name; requests to a collection cannot use this verb.
    pub fn item_name(&self) -> Result<&str, ApiError> {
        self.name.as_deref().ok_or(ApiError::MethodNotAllowed)
    }

    /// The subresource, empty for the main resource.
    pub fn subresource(&self) -> &str {
        self.subresource.as_deref().unwrap_or_default()
    }

    pub fn meta(&self, operation: Operation, manager: Option<String>) -> WriteMeta {
        WriteMeta {
            operation,
            subresource: self.subresource.clone(),
            field_manager: manager,
        }
    }

    /// The field manager of a write by `manager` through this endpoint,
    /// at `now`.
    pub fn writer<'w>(
        &'w self,
        manager: &'w str,
        api_version: &'w str,
        now: &'w str,
    ) -> Writer<'w> {
        Writer {
            manager,
            api_version,
            subresource: self.subresource(),
            now,
            schema: self.rt.schema.as_ref().map(|s| &s.root),
            status_subresource: self.rt.status_subresource,
        }
    }

    /// The stored object the request names, 404 when there is none.
    pub fn current(&self, state: &State) -> Result<(ObjKey, Arc<Value>), ApiError> {
        let name = self.item_name()?;
        let key = self.key(name);
        let stored = state
            .store
            .get(&key)
            .ok_or_else(|| ApiError::not_found(&self.rt.group_resource(), name))?;
        Ok((key, stored))
    }
}

/// Parses a request body (JSON, or YAML for apply and `application/yaml`).
pub fn parse_body(body: &[u8], content_type: &str) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Err(ApiError::BadRequest(
            "the body of the request was empty".into(),
        ));
    }
    let media = content_type.split(';').next().unwrap_or_default().trim();
    if !media.is_empty() && !media.ends_with("json") && !media.ends_with("yaml") {
        // Protobuf and CBOR are not spoken; clients fall back to JSON on 415.
        return Err(ApiError::UnsupportedMediaType {
            accepted: "application/json, application/yaml".into(),
        });
    }
    let yaml = media.contains("yaml");
    let parsed = if yaml {
        crate::yaml::from_slice::<Value>(body).map_err(|e| e.to_string())
    } else {
        serde_json::from_slice::<Value>(body).map_err(|e| e.to_string())
    };
    parsed.map_err(|e| {
        ApiError::BadRequest(format!("the body of the request could not be decoded: {e}"))
    })
}
