//! Small helpers over objects held as `serde_json::Value`: metadata access,
//! timestamps, UIDs, `generateName` suffixes and name validation.
//!
//! The emulator keeps every object as untyped JSON, like the real server
//! keeps custom resources as unstructured data, so that it never loses or
//! invents fields a typed round trip would.

use serde_json::{Map, Value};

use super::error::FieldError;

/// `metadata.<field>` as a string, if present.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

pub fn name(obj: &Value) -> Option<&str> {
    meta_str(obj, "name").filter(|s| !s.is_empty())
}

pub fn namespace(obj: &Value) -> Option<&str> {
    meta_str(obj, "namespace").filter(|s| !s.is_empty())
}

/// The `metadata` map, created if missing or not an object.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let root = obj.as_object_mut().expect("just made an object");
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("just made an object")
}

pub fn set_meta(obj: &mut Value, field: &str, value: Value) {
    meta_mut(obj).insert(field.to_string(), value);
}

pub fn remove_meta(obj: &mut Value, field: &str) {
    meta_mut(obj).remove(field);
}

/// Drops empty metadata fields (`finalizers: []`, `labels: {}`,
/// `generateName: ""`, nulls), as the round trip through Go's `ObjectMeta`
/// (every field `omitempty`) does in kube-apiserver. Clients depend on it:
/// kube-runtime adds the first finalizer with a JSON patch that tests
/// `/metadata/finalizers` for null, which an empty list would fail.
pub fn drop_empty_metadata(obj: &mut Value) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    meta.retain(|_, v| match v {
        Value::Null => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        Value::Bool(_) | Value::Number(_) => true,
    });
}

/// The metadata a write never changes: the object's identity and what the
/// server sets, in the order an update copies them from the stored object.
pub const SERVER_OWNED: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "resourceVersion",
    "generation",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// The strings of a JSON array, other items skipped; empty when `v` is not
/// an array (finalizers, list-map keys, `dryRun` values, CRD names).
pub fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The string `field` of each object in a JSON array (`uid` of owner
/// references, `jsonPath` of selectable fields); none when `v` is not an
/// array.
pub fn each_str<'a>(v: Option<&'a Value>, field: &'a str) -> impl Iterator<Item = &'a str> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(move |item| item.get(field).and_then(Value::as_str))
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    strings(obj.get("metadata").and_then(|m| m.get("finalizers")))
}

pub fn is_deleting(obj: &Value) -> bool {
    meta_str(obj, "deletionTimestamp").is_some()
}

pub fn labels(obj: &Value) -> Map<String, Value> {
    obj.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

pub fn resource_version(obj: &Value) -> Option<&str> {
    meta_str(obj, "resourceVersion").filter(|s| !s.is_empty())
}

pub fn generation(obj: &Value) -> Option<i64> {
    obj.get("metadata")?.get("generation")?.as_i64()
}

/// RFC 3339 UTC with second precision, as `metav1.Time` serializes.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A random RFC 4122 version 4 UUID.
pub fn new_uid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The 5-character suffix kube-apiserver appends to `generateName`
/// (consonants and digits that cannot spell words).
pub fn generate_name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Validates `metadata.name` as a DNS-1123 subdomain (or label, for namespaces).
pub fn validate_name(name: &str, label_only: bool) -> Vec<FieldError> {
    let value = Value::String(name.to_string());
    let mut errs = Vec::new();
    if label_only {
        if name.len() > 63 {
            errs.push(FieldError::invalid(
                "metadata.name",
                &value,
                "must be no more than 63 characters",
            ));
        }
        if !is_dns1123_label(name) {
            errs.push(FieldError::invalid(
                "metadata.name",
                &value,
                DNS1123_LABEL_MSG,
            ));
        }
    } else {
        if name.len() > 253 {
            errs.push(FieldError::invalid(
                "metadata.name",
                &value,
                "must be no more than 253 characters",
            ));
        }
        if !name.split('.').all(is_dns1123_label) {
            errs.push(FieldError::invalid(
                "metadata.name",
                &value,
                DNS1123_SUBDOMAIN_MSG,
            ));
        }
    }
    errs
}

/// Validates label keys and values (the common mistakes: length and charset).
pub fn validate_labels(obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let is_name_part = |s: &str| {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
            && s.as_bytes()[0].is_ascii_alphanumeric()
            && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
    };
    for (key, value) in labels(obj) {
        let field = "metadata.labels";
        let name_part = key.rsplit('/').next().unwrap_or_default();
        if !is_name_part(name_part) {
            errs.push(FieldError::invalid(
                field,
                &Value::String(key.clone()),
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ));
        }
        match value.as_str() {
            Some("") => {}
            Some(v) if is_name_part(v) => {}
            _ => errs.push(FieldError::invalid(
                field,
                &value,
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            )),
        }
    }
    errs
}

/// Walks a dotted path (`spec.target.host`) into an object.
pub fn dotted<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .filter(|p| !p.is_empty())
        .try_fold(obj, |v, part| v.get(part))
}

/// Canonical string form of a scalar for selectors and printing.
pub fn scalar_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_is_v4_shaped() {
        let uid = new_uid();
        assert_eq!(uid.len(), 36);
        assert_eq!(&uid[14..15], "4");
    }

    #[test]
    fn names() {
        assert!(validate_name("my-scan.v1", false).is_empty());
        assert!(!validate_name("My_Scan", false).is_empty());
        assert!(!validate_name("a.b", true).is_empty());
    }
}
