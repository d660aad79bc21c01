//! What one served resource is: group/version/plural, scope, subresources,
//! schema and printer columns, and how its API representation maps onto
//! what is stored. The set of them is the `registry`; built-in kinds are
//! described in `builtins`, custom resources come from CRDs (`crd`).

use std::sync::Arc;

use serde_json::Value;

use super::error::GroupResource;
use super::keys::StorageId;
use super::schema::StructuralSchema;

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

    /// The CustomResourceDefinitions resource itself, whose writes
    /// (un)register resources.
    pub fn is_crd(&self) -> bool {
        self.group == "apiextensions.k8s.io" && self.plural == "customresourcedefinitions"
    }

    /// Names kubectl would accept for this resource: plural, singular, kind, short names.
    pub fn matches_name(&self, name: &str) -> bool {
        let lower = name.to_ascii_lowercase();
        self.plural == lower
            || self.singular == lower
            || self.kind.to_ascii_lowercase() == lower
            || self.short_names.contains(&lower)
    }

    pub fn builtin(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
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

pub fn column(name: &str, type_: &str, json_path: &str) -> PrinterColumn {
    PrinterColumn {
        name: name.into(),
        type_: type_.into(),
        format: String::new(),
        description: String::new(),
        priority: 0,
        json_path: json_path.into(),
    }
}

pub fn age_column() -> PrinterColumn {
    let mut c = column("Age", "date", ".metadata.creationTimestamp");
    c.description = "CreationTimestamp is a timestamp representing the server time when this object was created."
        .into();
    c
}
