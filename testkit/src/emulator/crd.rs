//! CustomResourceDefinitions: how an apiextensions.k8s.io/v1 CRD becomes
//! the served resources of its versions, the structural-schema rules a CRD
//! must follow, and the `status` a real server reports once it is
//! established.

use std::sync::Arc;

use serde_json::{Value, json};

use super::error::EmulatorError;
use super::keys::StorageId;
use super::meta;
use super::resources::{Conversion, PrinterColumn, ResourceType, age_column};
use super::schema::{StructuralSchema, list_map_keys};

fn invalid(name: &str, reason: impl Into<String>) -> EmulatorError {
    EmulatorError::InvalidCrd {
        name: name.to_string(),
        reason: reason.into(),
    }
}

/// A string field of a CRD part, empty when absent.
fn text(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// What every served version of one CRD shares: names, scope, storage.
struct Definition {
    name: String,
    group: String,
    plural: String,
    kind: String,
    singular: String,
    list_kind: String,
    short_names: Vec<String>,
    categories: Vec<String>,
    namespaced: bool,
    storage_version: String,
}

impl Definition {
    /// Reads and checks `spec.group`, `spec.names`, `spec.scope` and the
    /// storage version, in the order kube-apiserver reports their errors.
    fn parse(name: &str, spec: &Value) -> Result<Self, EmulatorError> {
        let group = text(spec, "group");
        let names = spec
            .get("names")
            .ok_or_else(|| invalid(name, "spec.names is required"))?;
        let plural = text(names, "plural");
        let kind = text(names, "kind");
        if group.is_empty() || plural.is_empty() || kind.is_empty() {
            return Err(invalid(
                name,
                "spec.group, spec.names.plural and spec.names.kind are required",
            ));
        }
        if name != format!("{plural}.{group}") {
            return Err(invalid(
                name,
                format!(
                    "metadata.name must be spec.names.plural+\".\"+spec.group: {plural}.{group}"
                ),
            ));
        }
        let singular = Some(text(names, "singular"))
            .filter(|x| !x.is_empty())
            .unwrap_or_else(|| kind.to_ascii_lowercase());
        let list_kind = Some(text(names, "listKind"))
            .filter(|x| !x.is_empty())
            .unwrap_or_else(|| format!("{kind}List"));
        let namespaced = match spec.get("scope").and_then(Value::as_str) {
            Some("Namespaced") => true,
            Some("Cluster") => false,
            _ => return Err(invalid(name, "spec.scope must be Namespaced or Cluster")),
        };
        let storage_versions: Vec<String> = versions(name, spec)?
            .iter()
            .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
            .map(|v| text(v, "name"))
            .collect();
        let [storage_version] = storage_versions.as_slice() else {
            return Err(invalid(
                name,
                "exactly one version must be marked as storage version",
            ));
        };
        Ok(Self {
            name: name.to_string(),
            storage_version: storage_version.clone(),
            short_names: meta::strings(names.get("shortNames")),
            categories: meta::strings(names.get("categories")),
            group,
            plural,
            kind,
            singular,
            list_kind,
            namespaced,
        })
    }

    /// The resource one served version (`spec.versions[]` entry) defines.
    fn served(&self, v: &Value) -> Result<ResourceType, EmulatorError> {
        let version = text(v, "name");
        let schema: Value = v
            .get("schema")
            .and_then(|sc| sc.get("openAPIV3Schema"))
            .cloned()
            .ok_or_else(|| {
                invalid(
                    &self.name,
                    format!("version {version}: schema.openAPIV3Schema is required"),
                )
            })?;
        check_structural(
            &schema,
            &format!("spec.versions[{version}].schema.openAPIV3Schema"),
        )
        .map_err(|reason| invalid(&self.name, reason))?;
        Ok(ResourceType {
            group: self.group.clone(),
            version,
            kind: self.kind.clone(),
            list_kind: self.list_kind.clone(),
            plural: self.plural.clone(),
            singular: self.singular.clone(),
            short_names: self.short_names.clone(),
            categories: self.categories.clone(),
            namespaced: self.namespaced,
            status_subresource: v
                .get("subresources")
                .and_then(|sr| sr.get("status"))
                .is_some(),
            has_generation: true,
            custom: true,
            storage: StorageId {
                group: self.group.clone(),
                resource: self.plural.clone(),
            },
            storage_api_version: format!("{}/{}", self.group, self.storage_version),
            conversion: Conversion::None,
            schema: Some(Arc::new(StructuralSchema::new(schema))),
            printer_columns: printer_columns(v),
            selectable_fields: selectable_fields(v),
            crd_name: Some(self.name.clone()),
        })
    }
}

/// `spec.versions`, which must not be empty.
fn versions<'a>(name: &str, spec: &'a Value) -> Result<&'a Vec<Value>, EmulatorError> {
    spec.get("versions")
        .and_then(Value::as_array)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| invalid(name, "spec.versions must have at least one version"))
}

/// A version's `additionalPrinterColumns`; `Age` alone when it has none.
fn printer_columns(v: &Value) -> Vec<PrinterColumn> {
    let mut columns: Vec<PrinterColumn> = v
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(|cols| {
            cols.iter()
                .map(|c| PrinterColumn {
                    name: text(c, "name"),
                    type_: text(c, "type"),
                    format: text(c, "format"),
                    description: text(c, "description"),
                    priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                    json_path: text(c, "jsonPath"),
                })
                .collect()
        })
        .unwrap_or_default();
    if columns.is_empty() {
        columns.push(age_column());
    }
    columns
}

/// A version's `selectableFields`, as field-selector keys.
fn selectable_fields(v: &Value) -> Vec<String> {
    meta::each_str(v.get("selectableFields"), "jsonPath")
        .map(|p| p.trim_start_matches('.').to_string())
        .collect()
}

/// Turns an apiextensions.k8s.io/v1 CRD into one `ResourceType` per served version.
pub fn parse_crd(crd: &Value) -> Result<Vec<ResourceType>, EmulatorError> {
    let name = meta::name(crd).unwrap_or_default().to_string();
    if crd.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
        return Err(invalid(&name, "kind is not CustomResourceDefinition"));
    }
    let spec = crd
        .get("spec")
        .ok_or_else(|| invalid(&name, "spec is required"))?;
    let definition = Definition::parse(&name, spec)?;
    let out = versions(&name, spec)?
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
        .map(|v| definition.served(v))
        .collect::<Result<Vec<_>, _>>()?;
    if out.is_empty() {
        return Err(invalid(&name, "no served versions"));
    }
    Ok(out)
}

/// The structural-schema rules kube-apiserver enforces that tests are most
/// likely to trip over: `properties` and `additionalProperties` are
/// mutually exclusive, and list-map keys must be required or defaulted.
fn check_structural(schema: &Value, path: &str) -> Result<(), String> {
    if schema.get("properties").is_some() && schema.get("additionalProperties").is_some() {
        return Err(format!(
            "{path}.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        ));
    }
    if schema.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map") {
        let items = schema.get("items").cloned().unwrap_or(Value::Null);
        let required: Vec<&str> = items
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for key in list_map_keys(schema) {
            let defaulted = items
                .pointer(&format!("/properties/{key}/default"))
                .is_some();
            if !required.contains(&key.as_str()) && !defaulted {
                return Err(format!(
                    "{path}.items.properties[{key}]: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
                ));
            }
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, child) in props {
            check_structural(child, &format!("{path}.properties[{k}]"))?;
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = schema.get(key).filter(|c| c.is_object()) {
            check_structural(child, &format!("{path}.{key}"))?;
        }
    }
    Ok(())
}

/// The `status` a real server reports once a CRD is established.
pub fn established_crd_status(crd: &Value, now: &str) -> Value {
    let spec = crd.get("spec").cloned().unwrap_or(Value::Null);
    let mut accepted = spec.get("names").cloned().unwrap_or_else(|| json!({}));
    if let Some(kind) = accepted
        .get("kind")
        .and_then(Value::as_str)
        .map(str::to_string)
    {
        if accepted.get("singular").is_none() {
            accepted["singular"] = Value::String(kind.to_ascii_lowercase());
        }
        if accepted.get("listKind").is_none() {
            accepted["listKind"] = Value::String(format!("{kind}List"));
        }
    }
    let stored: Vec<Value> = spec
        .get("versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").cloned())
                .collect()
        })
        .unwrap_or_default();
    json!({
        "acceptedNames": accepted,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": stored,
    })
}
