//! The resource registry: every resource the emulator serves, built-in
//! kinds first, then those of CRDs (loaded from files or created through
//! the API, which registers them at once like a real server does after the
//! `Established` condition). Discovery, routing and storage all look
//! resources up here.

use std::sync::Arc;

use serde_json::Value;

use super::builtins;
use super::crd;
use super::error::EmulatorError;
use super::keys::StorageId;
use super::resources::{Conversion, ResourceType};

/// All served resources. Order is discovery order.
#[derive(Debug)]
pub struct Registry {
    types: Vec<Arc<ResourceType>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self {
            types: builtins::kinds().into_iter().map(Arc::new).collect(),
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
        let parsed = crd::parse_crd(crd)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
