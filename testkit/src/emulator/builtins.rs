//! The built-in kinds the emulator serves (what the operator, kube-runtime
//! and kubectl need), and what kube-apiserver's Go types do to them on a
//! write that custom resources do not get: strict decoding and defaulting.

use base64::Engine;
use serde_json::{Value, json};

use super::error::ApiError;
use super::keys::StorageId;
use super::meta;
use super::resources::{Conversion, PrinterColumn, ResourceType, age_column, column};

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

/// The printer columns of Events: both APIs print the same columns, under
/// their own field names (`involvedObject`/`message` or `regarding`/`note`).
fn event_columns(object_path: &str, message: (&str, &str)) -> Vec<PrinterColumn> {
    vec![
        column("Type", "string", ".type"),
        column("Reason", "string", ".reason"),
        column("Object", "string", object_path),
        column(message.0, "string", message.1),
        age_column(),
    ]
}

/// The built-in kinds, in discovery order.
pub fn kinds() -> Vec<ResourceType> {
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
    core_event.printer_columns = event_columns(".involvedObject.name", ("Message", ".message"));

    let mut events_v1 = ResourceType::builtin("events.k8s.io", "v1", "Event", "events", true);
    events_v1.short_names = vec!["ev".into()];
    events_v1.storage = StorageId {
        group: String::new(),
        resource: "events".into(),
    };
    events_v1.storage_api_version = "v1".into();
    events_v1.conversion = Conversion::EventsV1;
    events_v1.selectable_fields = core_event.selectable_fields.clone();
    events_v1.printer_columns = event_columns(".regarding.name", ("Note", ".note"));

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

    let mut account = ResourceType::builtin("", "v1", "ServiceAccount", "serviceaccounts", true);
    account.short_names = vec!["sa".into()];
    let rbac = "rbac.authorization.k8s.io";
    let mut role = ResourceType::builtin(rbac, "v1", "ClusterRole", "clusterroles", false);
    role.printer_columns = vec![column(
        "Created At",
        "string",
        ".metadata.creationTimestamp",
    )];
    let mut binding = ResourceType::builtin(
        rbac,
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    );
    binding.printer_columns = vec![column("Role", "string", ".roleRef.name"), age_column()];

    vec![
        ns, cm, secret, core_event, events_v1, lease, crd, account, role, binding,
    ]
}

/// Built-in kinds must decode as their Go types do: a `stringData` value
/// that is not a string is a 400, not silently stored. The k8s-openapi
/// types stand in for the Go structs.
pub fn decode_check(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    use k8s_openapi::api::{coordination::v1::Lease, core::v1, events::v1::Event as EventV1};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    fn check<T: serde::de::DeserializeOwned>(obj: &Value) -> Result<(), String> {
        T::deserialize(obj).map(|_| ()).map_err(|e| e.to_string())
    }
    let result = match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "configmaps") => check::<v1::ConfigMap>(obj),
        ("", "secrets") => check::<v1::Secret>(obj),
        ("", "namespaces") => check::<v1::Namespace>(obj),
        ("", "events") => check::<v1::Event>(obj),
        ("events.k8s.io", "events") => check::<EventV1>(obj),
        ("coordination.k8s.io", "leases") => check::<Lease>(obj),
        ("", "serviceaccounts") => check::<v1::ServiceAccount>(obj),
        ("rbac.authorization.k8s.io", "clusterroles") => check::<ClusterRole>(obj),
        ("rbac.authorization.k8s.io", "clusterrolebindings") => check::<ClusterRoleBinding>(obj),
        ("apiextensions.k8s.io", "customresourcedefinitions") => {
            check::<CustomResourceDefinition>(obj)
        }
        _ => Ok(()),
    };
    result.map_err(|e| {
        ApiError::BadRequest(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {e}",
            kind = rt.kind,
            version = rt.version
        ))
    })
}

/// Built-in defaulting the operator's kinds need.
pub fn default_builtin(rt: &ResourceType, obj: &mut Value) {
    match (rt.group.as_str(), rt.plural.as_str()) {
        ("", "secrets") => default_secret(obj),
        ("", "namespaces") => default_namespace(obj),
        _ => {}
    }
}

/// `stringData` folded into `data` (base64), `type: Opaque` by default.
fn default_secret(obj: &mut Value) {
    if let Some(map) = obj.as_object_mut() {
        if let Some(Value::Object(string_data)) = map.remove("stringData") {
            let data = map.entry("data").or_insert_with(|| json!({}));
            for (k, v) in string_data {
                let raw = v.as_str().unwrap_or_default();
                data[k] = Value::String(base64::engine::general_purpose::STANDARD.encode(raw));
            }
        }
        map.entry("type").or_insert_with(|| json!("Opaque"));
    }
}

/// The name label (set by kube-apiserver on every namespace since 1.21), the
/// `kubernetes` finalizer and the `Active` phase.
fn default_namespace(obj: &mut Value) {
    if let Some(name) = meta::name(obj).map(str::to_string) {
        let labels = meta::meta_mut(obj)
            .entry("labels")
            .or_insert_with(|| json!({}));
        if let Some(labels) = labels.as_object_mut() {
            labels.insert("kubernetes.io/metadata.name".into(), Value::String(name));
        }
    }
    if obj.pointer("/spec/finalizers").is_none() {
        obj["spec"] = json!({"finalizers": ["kubernetes"]});
    }
    if obj.pointer("/status/phase").is_none() {
        obj["status"] = json!({"phase": "Active"});
    }
}
