//! The resource registry: which kinds the emulator serves, under which
//! group/version/plural, with which scope, subresources, schema and printer
//! columns. Built-in kinds are the ones the operator and its tooling touch;
//! custom resources come from CRDs (loaded from files or created through
//! the API, which registers them at once like a real server does after the
//! `Established` condition).

use std::sync::Arc;

use serde_json::{Value, json};

use super::error::{EmulatorError, GroupResource};
use super::meta;
use super::schema::StructuralSchema;

/// Where objects of a resource are stored. Two API resources can share one
/// storage: `events.k8s.io/v1` events and core `v1` events are the same
/// objects seen through two representations, as in kube-apiserver.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StorageId {
    pub group: String,
    pub resource: String,
}

/// How the API representation differs from the stored one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conversion {
    /// Same fields; only `apiVersion` is rewritten (CRDs with `strategy: None`).
    None,
    /// `events.k8s.io/v1` Event over core/v1 Event storage (renamed fields).
    EventsV1,
}

/// A CRD `additionalPrinterColumns` entry (built-ins use the same shape).
#[derive(Debug, Clone)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// One served group/version/resource.
#[derive(Debug)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    pub status_subresource: bool,
    /// Whether `metadata.generation` is maintained (CRs, CRDs).
    pub has_generation: bool,
    /// A custom resource: JSON-only patches, schema validation, CEL.
    pub custom: bool,
    pub storage: StorageId,
    /// apiVersion objects are stored with (the CRD storage version).
    pub storage_api_version: String,
    pub conversion: Conversion,
    pub schema: Option<Arc<StructuralSchema>>,
    pub printer_columns: Vec<PrinterColumn>,
    /// Field-selector keys beyond `metadata.name` / `metadata.namespace`.
    pub selectable_fields: Vec<String>,
    /// `<plural>.<group>` of the CRD that defined it.
    pub crd_name: Option<String>,
}

impl ResourceType {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn group_resource(&self) -> GroupResource {
        GroupResource {
            group: self.group.clone(),
            resource: self.plural.clone(),
        }
    }

    /// The stored object as this resource's API representation.
    pub fn to_view(&self, stored: &Value) -> Value {
        let mut obj = match self.conversion {
            Conversion::None => stored.clone(),
            Conversion::EventsV1 => rename_fields(stored, EVENT_RENAMES, false),
        };
        if let Some(map) = obj.as_object_mut() {
            map.insert("apiVersion".into(), Value::String(self.api_version()));
            map.insert("kind".into(), Value::String(self.kind.clone()));
        }
        obj
    }

    /// An API representation converted to what is stored.
    pub fn to_storage(&self, view: &Value) -> Value {
        let mut obj = match self.conversion {
            Conversion::None => view.clone(),
            Conversion::EventsV1 => rename_fields(view, EVENT_RENAMES, true),
        };
        if let Some(map) = obj.as_object_mut() {
            map.insert(
                "apiVersion".into(),
                Value::String(self.storage_api_version.clone()),
            );
            if self.conversion == Conversion::EventsV1 {
                map.insert("kind".into(), Value::String("Event".into()));
            }
        }
        obj
    }

    /// Names kubectl would accept for this resource: plural, singular, kind, short names.
    pub fn matches_name(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        self.plural == lower
            || self.singular == lower
            || self.kind.to_ascii_lowercase() == lower
            || self.short_names.contains(&lower)
    }

    fn builtin(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        let api_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            list_kind: format!("{kind}List"),
            plural: plural.into(),
            singular: kind.to_ascii_lowercase(),
            short_names: Vec::new(),
            categories: Vec::new(),
            namespaced,
            status_subresource: false,
            has_generation: false,
            custom: false,
            storage: StorageId {
                group: group.into(),
                resource: plural.into(),
            },
            storage_api_version: api_version,
            conversion: Conversion::None,
            schema: None,
            printer_columns: vec![age_column()],
            selectable_fields: Vec::new(),
            crd_name: None,
        }
    }
}

/// events.k8s.io/v1 field ↔ core/v1 field.
const EVENT_RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

fn rename_fields(obj: &Value, renames: &[(&str, &str)], view_to_storage: bool) -> Value {
    let Some(map) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = serde_json::Map::new();
    for (k, v) in map {
        let renamed = renames.iter().find_map(|(view, stored)| {
            if view_to_storage {
                (k == view).then_some(*stored)
            } else {
                (k == stored).then_some(*view)
            }
        });
        out.insert(renamed.map_or_else(|| k.clone(), str::to_string), v.clone());
    }
    Value::Object(out)
}

fn column(name: &str, type_: &str, json_path: &str) -> PrinterColumn {
    PrinterColumn {
        name: name.into(),
        type_: type_.into(),
        format: String::new(),
        description: String::new(),
        priority: 0,
        json_path: json_path.into(),
    }
}

fn age_column() -> PrinterColumn {
    let mut c = column("Age", "date", ".metadata.creationTimestamp");
    c.description = "CreationTimestamp is a timestamp representing the server time when this object was created."
        .into();
    c
}

const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

/// The built-in kinds: what the operator, kube-runtime and kubectl need.
fn builtins() -> Vec<ResourceType> {
    let mut ns = ResourceType::builtin("", "v1", "Namespace", "namespaces", false);
    ns.short_names = vec!["ns".into()];
    ns.status_subresource = true;
    ns.printer_columns = vec![column("Status", "string", ".status.phase"), age_column()];
    ns.selectable_fields = vec!["status.phase".into()];

    let mut cm = ResourceType::builtin("", "v1", "ConfigMap", "configmaps", true);
    cm.short_names = vec!["cm".into()];

    let mut secret = ResourceType::builtin("", "v1", "Secret", "secrets", true);
    secret.printer_columns = vec![column("Type", "string", ".type"), age_column()];
    secret.selectable_fields = vec!["type".into()];

    let mut core_event = ResourceType::builtin("", "v1", "Event", "events", true);
    core_event.short_names = vec!["ev".into()];
    core_event.selectable_fields = EVENT_FIELDS.iter().map(|s| s.to_string()).collect();
    core_event.printer_columns = vec![
        column("Type", "string", ".type"),
        column("Reason", "string", ".reason"),
        column("Object", "string", ".involvedObject.name"),
        column("Message", "string", ".message"),
        age_column(),
    ];

    let mut events_v1 = ResourceType::builtin("events.k8s.io", "v1", "Event", "events", true);
    events_v1.short_names = vec!["ev".into()];
    events_v1.storage = StorageId {
        group: String::new(),
        resource: "events".into(),
    };
    events_v1.storage_api_version = "v1".into();
    events_v1.conversion = Conversion::EventsV1;
    events_v1.selectable_fields = core_event.selectable_fields.clone();
    events_v1.printer_columns = vec![
        column("Type", "string", ".type"),
        column("Reason", "string", ".reason"),
        column("Object", "string", ".regarding.name"),
        column("Note", "string", ".note"),
        age_column(),
    ];

    let mut lease = ResourceType::builtin("coordination.k8s.io", "v1", "Lease", "leases", true);
    lease.printer_columns = vec![
        column("Holder", "string", ".spec.holderIdentity"),
        age_column(),
    ];

    let mut crd = ResourceType::builtin(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    );
    crd.short_names = vec!["crd".into(), "crds".into()];
    crd.categories = vec!["api-extensions".into()];
    crd.status_subresource = true;
    crd.has_generation = true;
    crd.printer_columns = vec![column(
        "Created At",
        "string",
        ".metadata.creationTimestamp",
    )];

    vec![ns, cm, secret, core_event, events_v1, lease, crd]
}

/// All served resources. Order is discovery order.
#[derive(Debug)]
pub struct Registry {
    types: Vec<Arc<ResourceType>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            types: builtins().into_iter().map(Arc::new).collect(),
        }
    }
}

impl Registry {
    pub fn all(&self) -> &[Arc<ResourceType>] {
        &self.types
    }

    /// The resource that stores objects in `storage` (for the two Event
    /// APIs, the core one, whose representation is the stored one).
    pub fn by_storage(&self, storage: &StorageId) -> Option<Arc<ResourceType>> {
        self.types
            .iter()
            .find(|t| t.storage == *storage && t.conversion == Conversion::None)
            .cloned()
    }

    /// Whether objects of `kind` in `api_version` are served.
    pub fn serves_kind(&self, api_version: &str, kind: &str) -> bool {
        self.types
            .iter()
            .any(|t| t.kind == kind && t.api_version() == api_version)
    }

    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
            .cloned()
    }

    /// Whether the group/version is served at all (for 404 vs. empty lists).
    pub fn serves_group_version(&self, group: &str, version: &str) -> bool {
        self.types
            .iter()
            .any(|t| t.group == group && t.version == version)
    }

    /// Resolves a kubectl-style name: `assetscans`, `assetscan`, `AssetScan`,
    /// `as` (short name) or `assetscans.example.com`. The first served
    /// version wins, as the preferred version does in kubectl.
    pub fn resolve(&self, name: &str) -> Option<Arc<ResourceType>> {
        let (res, group) = match name.split_once('.') {
            Some((r, g)) => (r, Some(g)),
            None => (name, None),
        };
        self.types
            .iter()
            .find(|t| t.matches_name(res) && group.is_none_or(|g| g == t.group))
            .cloned()
    }

    /// Groups in discovery order, each with its versions (preferred first).
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for t in &self.types {
            match out.iter_mut().find(|(g, _)| *g == t.group) {
                Some((_, versions)) if !versions.contains(&t.version) => {
                    versions.push(t.version.clone())
                }
                Some(_) => {}
                None => out.push((t.group.clone(), vec![t.version.clone()])),
            }
        }
        out
    }

    /// Registers (or re-registers) every served version of a CRD.
    pub fn add_crd(&mut self, crd: &Value) -> Result<Vec<Arc<ResourceType>>, EmulatorError> {
        let parsed = parse_crd(crd)?;
        let name = parsed
            .first()
            .and_then(|t| t.crd_name.clone())
            .unwrap_or_default();
        self.remove_crd(&name);
        let arcs: Vec<Arc<ResourceType>> = parsed.into_iter().map(Arc::new).collect();
        self.types.extend(arcs.iter().cloned());
        Ok(arcs)
    }

    /// Unregisters a CRD's resources; returns their storage id if any were registered.
    pub fn remove_crd(&mut self, crd_name: &str) -> Option<StorageId> {
        let storage = self
            .types
            .iter()
            .find(|t| t.crd_name.as_deref() == Some(crd_name))
            .map(|t| t.storage.clone());
        self.types
            .retain(|t| t.crd_name.as_deref() != Some(crd_name));
        storage
    }
}

fn invalid(name: &str, reason: impl Into<String>) -> EmulatorError {
    EmulatorError::InvalidCrd {
        name: name.to_string(),
        reason: reason.into(),
    }
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
    let s = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let group = s(spec, "group");
    let names = spec
        .get("names")
        .ok_or_else(|| invalid(&name, "spec.names is required"))?;
    let plural = s(names, "plural");
    let kind = s(names, "kind");
    if group.is_empty() || plural.is_empty() || kind.is_empty() {
        return Err(invalid(
            &name,
            "spec.group, spec.names.plural and spec.names.kind are required",
        ));
    }
    if name != format!("{plural}.{group}") {
        return Err(invalid(
            &name,
            format!("metadata.name must be spec.names.plural+\".\"+spec.group: {plural}.{group}"),
        ));
    }
    let singular = Some(s(names, "singular"))
        .filter(|x| !x.is_empty())
        .unwrap_or_else(|| kind.to_ascii_lowercase());
    let list_kind = Some(s(names, "listKind"))
        .filter(|x| !x.is_empty())
        .unwrap_or_else(|| format!("{kind}List"));
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let namespaced = match spec.get("scope").and_then(Value::as_str) {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        _ => return Err(invalid(&name, "spec.scope must be Namespaced or Cluster")),
    };
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| invalid(&name, "spec.versions must have at least one version"))?;
    let storage_versions: Vec<String> = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .map(|v| s(v, "name"))
        .collect();
    let [storage_version] = storage_versions.as_slice() else {
        return Err(invalid(
            &name,
            "exactly one version must be marked as storage version",
        ));
    };
    let mut out = Vec::new();
    for v in versions {
        if v.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let version = s(v, "name");
        let schema: Value = v
            .get("schema")
            .and_then(|sc| sc.get("openAPIV3Schema"))
            .cloned()
            .ok_or_else(|| {
                invalid(
                    &name,
                    format!("version {version}: schema.openAPIV3Schema is required"),
                )
            })?;
        check_structural(
            &schema,
            &format!("spec.versions[{version}].schema.openAPIV3Schema"),
        )
        .map_err(|reason| invalid(&name, reason))?;
        let mut columns: Vec<PrinterColumn> = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .map(|c| PrinterColumn {
                        name: s(c, "name"),
                        type_: s(c, "type"),
                        format: s(c, "format"),
                        description: s(c, "description"),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        json_path: s(c, "jsonPath"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        if columns.is_empty() {
            columns.push(age_column());
        }
        let selectable = v
            .get("selectableFields")
            .and_then(Value::as_array)
            .map(|f| {
                f.iter()
                    .filter_map(|x| x.get("jsonPath").and_then(Value::as_str))
                    .map(|p| p.trim_start_matches('.').to_string())
                    .collect()
            })
            .unwrap_or_default();
        out.push(ResourceType {
            group: group.clone(),
            version: version.clone(),
            kind: kind.clone(),
            list_kind: list_kind.clone(),
            plural: plural.clone(),
            singular: singular.clone(),
            short_names: strings(names.get("shortNames")),
            categories: strings(names.get("categories")),
            namespaced,
            status_subresource: v
                .get("subresources")
                .and_then(|sr| sr.get("status"))
                .is_some(),
            has_generation: true,
            custom: true,
            storage: StorageId {
                group: group.clone(),
                resource: plural.clone(),
            },
            storage_api_version: format!("{group}/{storage_version}"),
            conversion: Conversion::None,
            schema: Some(Arc::new(StructuralSchema::new(schema))),
            printer_columns: columns,
            selectable_fields: selectable,
            crd_name: Some(name.clone()),
        });
    }
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
        for key in super::schema::list_map_keys(schema) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_between_representations() {
        let reg = Registry::default();
        let ev = reg.find("events.k8s.io", "v1", "events").expect("builtin");
        let view = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"name": "x"}, "note": "hello", "reportingController": "c"});
        let stored = ev.to_storage(&view);
        assert_eq!(stored["involvedObject"]["name"], "x");
        assert_eq!(stored["message"], "hello");
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(ev.to_view(&stored), view);
    }

    #[test]
    fn resolves_kubectl_names() {
        let reg = Registry::default();
        assert_eq!(
            reg.resolve("cm").map(|t| t.plural.clone()),
            Some("configmaps".into())
        );
        assert_eq!(
            reg.resolve("leases.coordination.k8s.io")
                .map(|t| t.kind.clone()),
            Some("Lease".into())
        );
        assert!(reg.resolve("pods").is_none());
    }
}
