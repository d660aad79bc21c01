//! What the operator adds to etcd per asset, counted from the objects as the
//! API server serves them (the bytes etcd holds for a custom resource: its
//! JSON; for an Event, JSON is an upper bound of the protobuf etcd holds):
//!
//! - each AssetScan as stored now, minus the same object as its creator's
//!   write left it (so the status, the operator's `managedFields` entries,
//!   its label and its finalizer; not the spec, nor the creator's own
//!   metadata);
//! - every AssetScanReport;
//! - every Event about an AssetScan (they expire after the API server's
//!   `--event-ttl`, one hour by default).

use anyhow::{Context as _, Result};
use assetscan_operator::kubernetes::crd::{AssetScan, AssetScanReport};
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use std::collections::HashMap;

/// Bytes of objects of one kind.
#[derive(Clone, Copy, Debug, Default)]
pub struct Objects {
    pub count: u64,
    pub bytes: u64,
    pub largest: u64,
}

impl Objects {
    fn add(&mut self, bytes: u64) {
        self.count += 1;
        self.bytes += bytes;
        self.largest = self.largest.max(bytes);
    }
}

/// The operator's bytes in etcd, over `assets` AssetScans.
#[derive(Clone, Copy, Debug, Default)]
pub struct Footprint {
    pub assets: u64,
    /// Bytes the AssetScans grew by since their creation.
    pub object_added: u64,
    pub reports: Objects,
    pub events: Objects,
}

impl Footprint {
    pub fn per_asset(&self) -> f64 {
        (self.object_added + self.reports.bytes + self.events.bytes) as f64
            / self.assets.max(1) as f64
    }

    /// Per asset, without the Events (which expire).
    pub fn per_asset_kept(&self) -> f64 {
        (self.object_added + self.reports.bytes) as f64 / self.assets.max(1) as f64
    }

    pub fn print(&self) {
        let n = self.assets.max(1) as f64;
        println!(
            "etcd bytes added per asset: {:.0} B ({:.0} B without Events, which expire): \
             object +{:.0} B (status, the operator's managedFields, label, finalizer); \
             reports {:.2} per asset, {:.0} B (largest {} B); Events {:.2} per asset, {:.0} B (largest {} B)",
            self.per_asset(),
            self.per_asset_kept(),
            self.object_added as f64 / n,
            self.reports.count as f64 / n,
            self.reports.bytes as f64 / n,
            self.reports.largest,
            self.events.count as f64 / n,
            self.events.bytes as f64 / n,
            self.events.largest,
        );
    }
}

/// The size of `object` as the API server serves it.
pub fn json_len(object: &impl serde::Serialize) -> u64 {
    serde_json::to_vec(object).map_or(0, |bytes| bytes.len() as u64)
}

fn dynamic<K>(client: &kube::Client, namespace: &str) -> Api<DynamicObject>
where
    K: kube::Resource<DynamicType = ()>,
{
    Api::namespaced_with(client.clone(), namespace, &ApiResource::erase::<K>(&()))
}

/// Every object of `api`, a page of 500 at a time.
pub async fn each<K>(api: &Api<K>, mut visit: impl FnMut(&K)) -> Result<()>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await.context("listing")?;
        page.items.iter().for_each(&mut visit);
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(()),
        }
    }
}

/// The sizes of the AssetScans in `namespace`, by name.
pub async fn scan_sizes(client: &kube::Client, namespace: &str) -> Result<HashMap<String, u64>> {
    let mut sizes = HashMap::new();
    each(&dynamic::<AssetScan>(client, namespace), |obj| {
        sizes.insert(obj.metadata.name.clone().unwrap_or_default(), json_len(obj));
    })
    .await
    .context("AssetScans")?;
    Ok(sizes)
}

/// Counts the footprint in `namespace` now, against the AssetScans' sizes
/// at creation.
pub async fn measure(
    client: &kube::Client,
    namespace: &str,
    created: &HashMap<String, u64>,
) -> Result<Footprint> {
    let mut footprint = Footprint {
        assets: created.len() as u64,
        ..Footprint::default()
    };
    for (name, now) in scan_sizes(client, namespace).await? {
        let before = created.get(&name).copied().unwrap_or(now);
        footprint.object_added += now.saturating_sub(before);
    }
    each(&dynamic::<AssetScanReport>(client, namespace), |report| {
        footprint.reports.add(json_len(report));
    })
    .await
    .context("AssetScanReports")?;
    let events = ApiResource::from_gvk(&GroupVersionKind::gvk("events.k8s.io", "v1", "Event"));
    let events: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &events);
    each(&events, |event| {
        let about_scan = event
            .data
            .pointer("/regarding/kind")
            .and_then(|k| k.as_str())
            == Some("AssetScan");
        if about_scan {
            footprint.events.add(json_len(event));
        }
    })
    .await
    .context("Events")?;
    Ok(footprint)
}
