//! The AssetScans of a chaos run. Each has a kind that says what its
//! recorded state must end up saying (the provider stubs serve the facts
//! that make it so), and its manifest is plain JSON: the run creates,
//! edits and deletes them the way `kubectl` does, not through the
//! operator's types.

use crate::ChaosError;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::time::Duration;

/// Where the AssetScans live.
pub const NAMESPACE: &str = "default";
/// The CRD's group/version.
pub const API_VERSION: &str = "assetscan.io/v1alpha1";

/// A notification channel of the run's operator config.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Channel {
    /// The generic webhook: a receiver that deduplicates on `Idempotency-Key`.
    Webhook,
    /// A WeCom group robot: no idempotency key, the ticket id is in the text.
    WeCom,
}

impl Channel {
    /// The channel's name in the operator config and in `spec.notify`.
    pub fn name(self) -> &'static str {
        match self {
            Channel::Webhook => "secops-webhook",
            Channel::WeCom => "secops-wecom",
        }
    }
}

/// What an AssetScan is, and therefore what its status must say at the end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// Online, with a finding of CVSS 10.0: high risk by CVSS alone, alerts
    /// `channels`. With `log4j`, a Maven package whose CVE is also known
    /// exploited, with threat intel `Always` (so the intel step runs too).
    HighRisk { channels: Vec<Channel>, log4j: bool },
    /// The inventory says offline: the run ends `ASSET_OFFLINE → FINISHED`.
    Offline,
    /// Online and not high risk: low and medium findings (threat intel is
    /// consulted and finds nothing exploited), or no packages at all.
    Clean { findings: bool },
}

/// One AssetScan of the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedObject {
    pub name: String,
    pub asset: String,
    pub kind: Kind,
}

impl PlannedObject {
    pub fn new(index: usize, kind: Kind) -> PlannedObject {
        PlannedObject {
            name: format!("chaos-{index:04}"),
            asset: format!("chaos-{index:04}.dc1.example.com"),
            kind,
        }
    }

    /// Whether the inventory reports the asset online.
    pub fn online(&self) -> bool {
        !matches!(self.kind, Kind::Offline)
    }

    /// The channels `spec.notify` names.
    pub fn channels(&self) -> Vec<Channel> {
        match &self.kind {
            Kind::HighRisk { channels, .. } => channels.clone(),
            Kind::Offline | Kind::Clean { .. } => vec![Channel::Webhook],
        }
    }

    /// The AssetScan to create.
    pub fn manifest(&self) -> Value {
        let debian = |name: &str, version: &str| json!({"name": name, "ecosystem": "Debian:10", "version": version});
        let (software, policy) = match &self.kind {
            Kind::HighRisk { log4j: true, .. } => (
                json!([{"name": "org.apache.logging.log4j:log4j-core", "ecosystem": "Maven", "version": "2.14.1"}]),
                json!({"cvssThreshold": 9.0, "threatIntel": "Always"}),
            ),
            Kind::HighRisk { log4j: false, .. } => (
                json!([
                    debian("xz-utils", "5.2.4-1+deb10u1"),
                    debian("openssl", "1.1.1n-0+deb10u3")
                ]),
                json!({"cvssThreshold": 7.0, "threatIntel": "WhenNeeded"}),
            ),
            Kind::Offline => (json!([debian("openssh", "1:7.9p1-10+deb10u2")]), json!({})),
            Kind::Clean { findings: true } => (
                json!([
                    {"name": "urllib3", "ecosystem": "PyPI", "version": "2.2.1"},
                    {"name": "k8s.io/kubernetes", "ecosystem": "Go", "version": "v1.29.3"}
                ]),
                json!({"threatIntel": "WhenNeeded"}),
            ),
            Kind::Clean { findings: false } => (json!([]), json!({})),
        };
        let notify: Vec<&str> = self.channels().iter().map(|c| c.name()).collect();
        json!({
            "apiVersion": API_VERSION,
            "kind": "AssetScan",
            "metadata": {"name": self.name, "namespace": NAMESPACE},
            "spec": {
                "assetId": self.asset,
                "target": {"inventoryRef": self.asset},
                "software": software,
                "policy": policy,
                "notify": notify,
            }
        })
    }

    /// A spec edit that starts a new generation without changing what the
    /// scan must conclude: none of the run's findings has an EPSS score.
    pub fn edit(&self) -> Value {
        json!({"spec": {"policy": {"epssThreshold": 0.6}}})
    }
}

/// The AssetScan resource, for dynamic clients that do not use the
/// operator's types.
pub fn resource() -> ApiResource {
    ApiResource {
        group: "assetscan.io".into(),
        version: "v1alpha1".into(),
        api_version: API_VERSION.into(),
        kind: "AssetScan".into(),
        plural: "assetscans".into(),
    }
}

/// Attempts of one of the run's own API calls (injected faults hit them
/// too).
const API_ATTEMPTS: u32 = 60;

/// The run's own hands on the AssetScans: create, edit and delete, each
/// retried through injected faults. Cheap to clone, so that each call can
/// run as a task of its own and the schedule keeps its time.
#[derive(Clone)]
pub struct Objects {
    api: Api<DynamicObject>,
}

impl Objects {
    pub fn new(client: kube::Client) -> Objects {
        let resource = resource();
        Objects {
            api: Api::namespaced_with(client, NAMESPACE, &resource),
        }
    }

    /// Retries `call` until it succeeds or answers `done_on` (e.g. 404 for
    /// a deletion already done).
    async fn retry<T, F>(
        what: String,
        done_on: u16,
        mut call: impl FnMut() -> F,
    ) -> Result<(), ChaosError>
    where
        F: std::future::Future<Output = Result<T, kube::Error>>,
    {
        let mut last = String::new();
        for _ in 0..API_ATTEMPTS {
            match call().await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(e)) if e.code == done_on => return Ok(()),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(ChaosError::GaveUp {
            what,
            attempts: API_ATTEMPTS,
            last,
        })
    }

    pub async fn create(&self, object: &PlannedObject) -> Result<(), ChaosError> {
        let manifest: DynamicObject =
            serde_json::from_value(object.manifest()).map_err(|e| ChaosError::Io {
                context: format!("manifest of {}", object.name),
                source: std::io::Error::other(e),
            })?;
        let params = PostParams::default();
        Self::retry(format!("create {}", object.name), 409, || {
            self.api.create(&params, &manifest)
        })
        .await
    }

    pub async fn edit(&self, object: &PlannedObject) -> Result<(), ChaosError> {
        let patch = Patch::Merge(object.edit());
        let params = PatchParams::default();
        Self::retry(format!("edit {}", object.name), 404, || {
            self.api.patch(&object.name, &params, &patch)
        })
        .await
    }

    pub async fn delete(&self, object: &PlannedObject) -> Result<(), ChaosError> {
        let params = DeleteParams::default();
        Self::retry(format!("delete {}", object.name), 404, || {
            self.api.delete(&object.name, &params)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_name_their_channels_and_target() {
        let object = PlannedObject::new(
            7,
            Kind::HighRisk {
                channels: vec![Channel::Webhook, Channel::WeCom],
                log4j: false,
            },
        );
        let m = object.manifest();
        assert_eq!(m["metadata"]["name"], "chaos-0007");
        assert_eq!(m["spec"]["target"]["inventoryRef"], object.asset);
        assert_eq!(
            m["spec"]["notify"],
            json!(["secops-webhook", "secops-wecom"])
        );
        assert!(object.online());
        assert!(!PlannedObject::new(1, Kind::Offline).online());
    }
}
