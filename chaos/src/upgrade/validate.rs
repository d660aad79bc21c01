//! Whether an AssetScan (its spec and its status) is valid under a set of
//! CRDs: a Kubernetes API emulator of its own serves those CRDs, and the
//! object is created there and its status written through `/status`, so
//! the same admission answers as for any write (the structural schema,
//! defaults, pruning and the CEL rules). Fields the CRD does not know are
//! pruned, not refused: they are listed, since an object that needs them
//! loses them under that CRD.

use crate::ChaosError;
use crate::objects::{API_VERSION, NAMESPACE};
use assetscan_testkit::emulator::{Emulator, EmulatorOptions};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};

/// What a CRD set made of one object.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Why the API server refused it (its spec on create, or its status).
    pub refused: Option<String>,
    /// Paths of the fields the CRD dropped (unknown to its schema).
    pub pruned: Vec<String>,
}

/// An emulator serving one CRD set, for [`CrdValidator::check`].
pub struct CrdValidator {
    /// Which CRDs (for messages: "previous", "this tree's").
    pub name: String,
    api: Api<DynamicObject>,
    next: AtomicUsize,
    _emu: Emulator,
}

impl CrdValidator {
    pub async fn start(name: &str, crds: Vec<Value>) -> Result<CrdValidator, ChaosError> {
        let emu = Emulator::start(EmulatorOptions {
            crds,
            ..EmulatorOptions::default()
        })
        .await?;
        let resource = crate::objects::resource();
        Ok(CrdValidator {
            name: name.to_owned(),
            api: Api::namespaced_with(emu.client()?, NAMESPACE, &resource),
            next: AtomicUsize::new(0),
            _emu: emu,
        })
    }

    /// Creates `object`'s spec (and labels) under a fresh name, then
    /// writes its status, if any.
    pub async fn check(&self, object: &Value) -> Result<Verdict, ChaosError> {
        let name = format!("check-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let mut sent = json!({
            "apiVersion": API_VERSION,
            "kind": "AssetScan",
            "metadata": {"name": name, "labels": object["metadata"]["labels"].clone()},
            "spec": object["spec"].clone(),
        });
        if sent["metadata"]["labels"].is_null() {
            sent["metadata"] = json!({"name": name});
        }
        let manifest: DynamicObject = serde_json::from_value(sent.clone()).map_err(local)?;
        let created = match self.api.create(&PostParams::default(), &manifest).await {
            Ok(created) => created,
            Err(e) => return refused(format!("create: {e}")),
        };
        let mut verdict = Verdict::default();
        pruned_paths(
            "spec",
            &sent["spec"],
            &created.data["spec"],
            &mut verdict.pruned,
        );
        let Some(status) = object.get("status").filter(|s| !s.is_null()) else {
            return Ok(verdict);
        };
        let body = json!({
            "apiVersion": API_VERSION,
            "kind": "AssetScan",
            "metadata": {"name": name, "resourceVersion": created.metadata.resource_version},
            "status": status,
        });
        let body: DynamicObject = serde_json::from_value(body).map_err(local)?;
        match self
            .api
            .replace_status(&name, &PostParams::default(), &body)
            .await
        {
            Ok(stored) => {
                pruned_paths(
                    "status",
                    status,
                    &stored.data["status"],
                    &mut verdict.pruned,
                );
                Ok(verdict)
            }
            Err(e) => refused(format!("status: {e}")),
        }
    }
}

fn refused(why: String) -> Result<Verdict, ChaosError> {
    Ok(Verdict {
        refused: Some(why),
        pruned: Vec::new(),
    })
}

fn local(e: serde_json::Error) -> ChaosError {
    ChaosError::Io {
        context: "an object to validate".into(),
        source: std::io::Error::other(e),
    }
}

/// The paths under `path` present in `sent` and absent from `stored`.
fn pruned_paths(path: &str, sent: &Value, stored: &Value, out: &mut Vec<String>) {
    match (sent, stored) {
        (Value::Object(sent), Value::Object(stored)) => {
            for (key, value) in sent {
                let here = format!("{path}.{key}");
                match stored.get(key) {
                    None if !value.is_null() => out.push(here),
                    None => {}
                    Some(kept) => pruned_paths(&here, value, kept, out),
                }
            }
        }
        (Value::Array(sent), Value::Array(stored)) => {
            for (i, (a, b)) in sent.iter().zip(stored).enumerate() {
                pruned_paths(&format!("{path}[{i}]"), a, b, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pruned_paths_name_what_was_dropped() {
        let mut out = Vec::new();
        pruned_paths(
            "spec",
            &json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [{"f": 1, "g": 2}], "n": null}),
            &json!({"a": 1, "b": {"c": 2}, "e": [{"f": 1}]}),
            &mut out,
        );
        assert_eq!(out, vec!["spec.b.d", "spec.e[0].g"]);
    }
}
