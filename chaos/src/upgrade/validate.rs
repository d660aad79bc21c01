//! Whether an AssetScan (its spec and its status) is valid under a set of
//! CRDs, with the admission answers of a real write (the structural
//! schema, defaults, pruning and the CEL rules): either a Kubernetes API
//! emulator of its own serves those CRDs, and the object is created there
//! and its status written through `/status`; or the API server the run
//! used, which serves those CRDs at the time, is asked by server-side dry
//! run (`dryRun=All`, nothing stored): a create of its spec, and a merge of
//! its status into the stored object through `/status`. Fields the CRD does
//! not know are pruned, not refused: they are listed, since an object that
//! needs them loses them under that CRD.

use crate::ChaosError;
use crate::objects::{API_VERSION, NAMESPACE};
use assetscan_testkit::emulator::{Emulator, EmulatorOptions};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
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

/// What answers for one CRD set.
enum Server {
    /// An emulator of its own, serving only those CRDs.
    Emulator {
        client: kube::Client,
        next: AtomicUsize,
        _emu: Emulator,
    },
    /// The run's API server, serving those CRDs now: asked by dry run.
    DryRun(kube::Client),
}

/// One CRD set, for [`CrdValidator::check`].
pub struct CrdValidator {
    /// Which CRDs (for messages: "previous", "this tree's").
    pub name: String,
    server: Server,
}

impl CrdValidator {
    /// An emulator serving `crds`.
    pub async fn start(name: &str, crds: Vec<Value>) -> Result<CrdValidator, ChaosError> {
        let emu = Emulator::start(EmulatorOptions {
            crds,
            ..EmulatorOptions::default()
        })
        .await?;
        Ok(CrdValidator {
            name: name.to_owned(),
            server: Server::Emulator {
                client: emu.client()?,
                next: AtomicUsize::new(0),
                _emu: emu,
            },
        })
    }

    /// The API server of `client`, whose CRDs the caller has just applied;
    /// the objects checked must be stored there (their status is merged
    /// into the stored object).
    pub fn dry_run(name: &str, client: kube::Client) -> CrdValidator {
        CrdValidator {
            name: name.to_owned(),
            server: Server::DryRun(client),
        }
    }

    /// Creates `object`'s spec (and labels) under a fresh name (by dry run
    /// on the run's API server), then writes its status, if any.
    pub async fn check(&self, object: &Value) -> Result<Verdict, ChaosError> {
        let resource = crate::objects::resource();
        let (api, name, create) = match &self.server {
            Server::Emulator { client, next, .. } => (
                Api::namespaced_with(client.clone(), NAMESPACE, &resource),
                Some(format!("check-{}", next.fetch_add(1, Ordering::Relaxed))),
                PostParams::default(),
            ),
            Server::DryRun(client) => (
                Api::namespaced_with(
                    client.clone(),
                    object["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or(NAMESPACE),
                    &resource,
                ),
                None,
                PostParams {
                    dry_run: true,
                    field_manager: None,
                },
            ),
        };
        let mut metadata = json!({"labels": object["metadata"]["labels"].clone()});
        if metadata["labels"].is_null() {
            metadata = json!({});
        }
        match &name {
            Some(name) => metadata["name"] = json!(name),
            None => metadata["generateName"] = json!("check-"),
        }
        let sent = json!({
            "apiVersion": API_VERSION,
            "kind": "AssetScan",
            "metadata": metadata,
            "spec": object["spec"].clone(),
        });
        let manifest: DynamicObject = serde_json::from_value(sent.clone()).map_err(local)?;
        let created = match api.create(&create, &manifest).await {
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
        let stored = name.is_some().then_some(&created);
        let written = write_status(&api, stored, object, status).await;
        match written {
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

/// Writes `status` through `/status`: to `created` (on an emulator, the
/// object just created); else by dry run to the stored `object` itself (on
/// the run's API server, where a dry-run create stored nothing to write to).
async fn write_status(
    api: &Api<DynamicObject>,
    created: Option<&DynamicObject>,
    object: &Value,
    status: &Value,
) -> Result<DynamicObject, kube::Error> {
    match created {
        Some(created) => {
            let body = json!({
                "apiVersion": API_VERSION,
                "kind": "AssetScan",
                "metadata": {"name": created.metadata.name, "resourceVersion": created.metadata.resource_version},
                "status": status,
            });
            let body: DynamicObject =
                serde_json::from_value(body).map_err(kube::Error::SerdeError)?;
            api.replace_status(&created.name_any(), &PostParams::default(), &body)
                .await
        }
        None => {
            let stored = object["metadata"]["name"].as_str().unwrap_or_default();
            let patch = Patch::Merge(json!({"status": status}));
            api.patch_status(stored, &PatchParams::default().dry_run(), &patch)
                .await
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
