//! The controller's watch cache: trimmed of what the operator never reads,
//! and aware of the operator's own status writes it has not delivered yet.
//!
//! Every cached AssetScan would otherwise carry its `metadata.managedFields`
//! (about 22 KB each once a few managers have written it) and, when applied
//! with `kubectl apply`, a copy of itself in the last-applied annotation: at
//! 10 000 objects that is most of a replica's memory; and its inline
//! software list (up to 500 packages). All three are dropped as each object
//! arrives from the watch, before it enters the store. Nothing the operator
//! writes depends on them: status and finalizer patches carry only their own
//! fields, conditional writes use the resourceVersion, and a run reads its
//! software from the object as stored (see [`trim`]).
//!
//! A reconcile decides from the cached object, not from a fresh GET. The
//! watch delivers the operator's own status writes a few milliseconds after
//! they were made, and a reconcile started in between (the watch event of
//! the run's claim, handled after the run ended) would decide from a copy
//! older than what it wrote itself. Every status write the operator makes
//! is remembered here by its resourceVersion until the watch delivers that
//! version; until then the cache is behind for that object, and the
//! reconcile waits for the delivery (which triggers the next one) instead
//! of acting. Writes of other replicas are not known here: a decision to
//! wait taken from a copy that misses one costs a write refused by its
//! resourceVersion precondition, never a wrong status. A decision to start
//! or resume a run is not taken from the cache alone (`apply` reads the
//! object first: see `docs/design/reconcile.md`, "Reconcile").

use crate::kubernetes::crd::AssetScan;
use assetscan_domain::shard::{Shard, bucket};
use futures::{Stream, StreamExt, TryStreamExt};
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use prometheus_client::metrics::gauge::Gauge;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Set by `kubectl apply`: a full copy of the object the operator never reads.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// How long an own write may stay undelivered before the cache is no longer
/// trusted for its object: a reconcile then reads the object fresh.
pub const DELIVERY_WAIT: Duration = Duration::from_secs(10);

/// Undelivered writes kept before the ones older than [`DELIVERY_WAIT`]
/// are first swept (they are also dropped when their object is next
/// reconciled); the next sweep waits until twice as many are kept as after
/// this one, so that a long watch outage costs no scan on every write.
const SWEEP_ABOVE: usize = 1024;

/// Drops the fields of `obj` the operator never reads from the cache. The
/// software list is one of them: a run reads what it scans from the object
/// as stored when it starts (`apply` reads it before every run), so the
/// cache costs the same per object whether it lists 5 packages or 500.
pub fn trim(obj: &mut AssetScan) {
    obj.metadata.managed_fields = None;
    obj.spec.software = Vec::new();
    if let Some(annotations) = obj.metadata.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
        if annotations.is_empty() {
            obj.metadata.annotations = None;
        }
    }
}

/// The watch of the objects no bucket selects (see `shard.rs`), in a store
/// of its own, holding only those whose asset hashes into `shard`'s buckets
/// (the others are another replica's to label or scan; an asset id never
/// changes), each trimmed as the main cache trims them and without its
/// status. When many AssetScans are created at once, every replica sees
/// all of them here until their owners label them (a moment later): it
/// keeps its share, small. Nothing reads their status from this store: the
/// placement reads the labels and the asset id, and a mislabelled object's
/// run is decided from the object as stored (it is in no main cache).
pub fn unplaced_watch(
    api: Api<AssetScan>,
    config: watcher::Config,
    shard: Shard,
) -> (
    Store<AssetScan>,
    impl Stream<Item = Result<AssetScan, watcher::Error>> + Send + 'static,
) {
    let (store, writer) = kube::runtime::reflector::store();
    let owned = move |event: &Result<watcher::Event<AssetScan>, watcher::Error>| {
        let keep = match event {
            Ok(
                watcher::Event::Apply(obj)
                | watcher::Event::InitApply(obj)
                | watcher::Event::Delete(obj),
            ) => shard.owns(bucket(&obj.spec.asset_id)),
            _ => true,
        };
        futures::future::ready(keep)
    };
    let objects = watcher(api, config)
        .default_backoff()
        .filter(owned)
        .modify(|obj| {
            trim(obj);
            obj.status = None;
        })
        .reflect(writer)
        .applied_objects();
    (store, objects)
}

/// What the cache knows of an object a reconcile is about to act on.
pub enum Latest {
    /// The newest copy, including every status write of this process.
    Cached(Arc<AssetScan>),
    /// A status write of this process has not been delivered yet: its
    /// delivery triggers the next reconcile.
    OwnWriteUndelivered,
    /// Not in the cache, or an own write was not delivered within
    /// [`DELIVERY_WAIT`]: read the object from the API server.
    Unknown,
}

/// The store the controller reads, and the own writes it has not seen.
pub struct WatchCache {
    store: Store<AssetScan>,
    /// Taken by the one watch that fills the store.
    writer: Mutex<Option<Writer<AssetScan>>>,
    own: Arc<Mutex<OwnWrites>>,
}

#[derive(Default)]
struct OwnWrites {
    /// Per object, the resourceVersion of this process's last status write
    /// that the watch has not delivered, and when it was made.
    unseen: HashMap<ObjectRef<AssetScan>, (String, Instant)>,
    /// Delivered while the watch relists: seen once the relist is stored.
    relisted: Vec<ObjectRef<AssetScan>>,
    /// Size of `unseen` at which it is swept next (see [`SWEEP_ABOVE`]).
    sweep_at: usize,
}

impl OwnWrites {
    fn delivers(&self, key: &ObjectRef<AssetScan>, obj: &AssetScan) -> bool {
        self.unseen.get(key).map(|(version, _)| Some(version))
            == Some(obj.metadata.resource_version.as_ref())
    }

    /// Takes in a watch event, after the store applied it.
    fn observe(&mut self, event: &watcher::Event<AssetScan>) {
        match event {
            watcher::Event::Apply(obj) => {
                let key = ObjectRef::from_obj(obj);
                if self.delivers(&key, obj) {
                    self.unseen.remove(&key);
                }
            }
            watcher::Event::Delete(obj) => {
                self.unseen.remove(&ObjectRef::from_obj(obj));
            }
            watcher::Event::Init => self.relisted.clear(),
            // The store swaps in a relist's objects only when it is done.
            watcher::Event::InitApply(obj) => {
                let key = ObjectRef::from_obj(obj);
                if self.delivers(&key, obj) {
                    self.relisted.push(key);
                }
            }
            watcher::Event::InitDone => {
                for key in std::mem::take(&mut self.relisted) {
                    self.unseen.remove(&key);
                }
            }
        }
    }
}

impl Default for WatchCache {
    fn default() -> Self {
        let writer = Writer::default();
        WatchCache {
            store: writer.as_reader(),
            writer: Mutex::new(Some(writer)),
            own: Arc::default(),
        }
    }
}

impl WatchCache {
    pub fn store(&self) -> Store<AssetScan> {
        self.store.clone()
    }

    fn own(&self) -> MutexGuard<'_, OwnWrites> {
        lock(&self.own)
    }

    /// The watch filling the store, as the stream of changed (trimmed)
    /// objects that triggers reconciles; `None` if it was taken already.
    /// `held` follows the number of objects in the store.
    pub fn watch(
        &self,
        api: Api<AssetScan>,
        config: watcher::Config,
        held: Gauge,
    ) -> Option<impl Stream<Item = Result<AssetScan, watcher::Error>> + Send + 'static> {
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        let own = self.own.clone();
        let store = self.store.clone();
        Some(
            watcher(api, config)
                .default_backoff()
                .modify(trim)
                .reflect(writer)
                // After the store took the event in: an own write counts as
                // delivered only once a reconcile can read it.
                .inspect_ok(move |event| {
                    lock(&own).observe(event);
                    held.set(i64::try_from(store.len()).unwrap_or(i64::MAX));
                })
                .applied_objects(),
        )
    }

    /// Remembers a status write of this process, as the API server
    /// returned the object.
    pub fn wrote(&self, obj: &AssetScan) {
        let Some(version) = obj.metadata.resource_version.clone() else {
            return;
        };
        let key = ObjectRef::from_obj(obj);
        // Under the lock that delivery takes after the store: either the
        // store holds this version already (delivered, or a patch that
        // changed nothing and so makes no watch event), or its delivery
        // finds it remembered.
        let mut own = self.own();
        let stored = self.store.get(&key);
        if stored.is_some_and(|s| s.metadata.resource_version.as_ref() == Some(&version)) {
            return;
        }
        if own.unseen.len() >= own.sweep_at.max(SWEEP_ABOVE) {
            own.unseen.retain(|_, (_, at)| at.elapsed() < DELIVERY_WAIT);
            own.sweep_at = 2 * own.unseen.len();
        }
        own.unseen.insert(key, (version, Instant::now()));
    }

    /// The copy of `obj` to decide from.
    pub fn latest(&self, obj: &AssetScan) -> Latest {
        let key = ObjectRef::from_obj(obj);
        {
            let mut own = self.own();
            if let Some((_, at)) = own.unseen.get(&key) {
                if at.elapsed() < DELIVERY_WAIT {
                    return Latest::OwnWriteUndelivered;
                }
                own.unseen.remove(&key);
                return Latest::Unknown;
            }
        }
        self.store.get(&key).map_or(Latest::Unknown, Latest::Cached)
    }
}

fn lock(own: &Mutex<OwnWrites>) -> MutexGuard<'_, OwnWrites> {
    own.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use std::collections::BTreeMap;

    fn object(name: &str, version: &str) -> AssetScan {
        let spec = serde_json::json!({"assetId": "asset-1", "target": {}});
        let mut obj = AssetScan::new(name, serde_json::from_value(spec).expect("spec"));
        obj.metadata.namespace = Some("ns".into());
        obj.metadata.resource_version = Some(version.into());
        obj
    }

    /// A cache and a stand-in for its watch: each event goes to the store,
    /// then to the own writes, as in [`WatchCache::watch`].
    fn cache() -> (WatchCache, impl FnMut(watcher::Event<AssetScan>)) {
        let cache = WatchCache::default();
        let mut writer = cache.writer.lock().expect("lock").take().expect("writer");
        let own = cache.own.clone();
        let deliver = move |event: watcher::Event<AssetScan>| {
            writer.apply_watcher_event(&event);
            lock(&own).observe(&event);
        };
        (cache, deliver)
    }

    /// A cache whose watch delivered object `a` at version 10.
    fn cache_with_a() -> (WatchCache, impl FnMut(watcher::Event<AssetScan>)) {
        let (cache, mut deliver) = cache();
        deliver(watcher::Event::Apply(object("a", "10")));
        (cache, deliver)
    }

    /// Ages every undelivered write past [`DELIVERY_WAIT`].
    fn age_past_the_wait(cache: &WatchCache) {
        for (_, at) in lock(&cache.own).unseen.values_mut() {
            *at -= DELIVERY_WAIT;
        }
    }

    /// The resourceVersion a reconcile of `name` decides from: `behind`, or
    /// `None` for a read from the API server.
    fn decides_from(cache: &WatchCache, name: &str) -> Option<String> {
        match cache.latest(&object(name, "any")) {
            Latest::Cached(obj) => obj.metadata.resource_version.clone(),
            Latest::OwnWriteUndelivered => Some("behind".into()),
            Latest::Unknown => None,
        }
    }

    #[test]
    fn an_own_write_holds_the_object_behind_until_the_watch_delivers_it() {
        let (cache, mut deliver) = cache_with_a();
        deliver(watcher::Event::Apply(object("b", "11")));
        assert_eq!(decides_from(&cache, "a").as_deref(), Some("10"));
        // Two writes (the claim, the end): only the last one clears it.
        cache.wrote(&object("a", "12"));
        cache.wrote(&object("a", "13"));
        assert_eq!(decides_from(&cache, "a").as_deref(), Some("behind"));
        assert_eq!(decides_from(&cache, "b").as_deref(), Some("11"));
        deliver(watcher::Event::Apply(object("a", "12")));
        assert_eq!(decides_from(&cache, "a").as_deref(), Some("behind"));
        deliver(watcher::Event::Apply(object("a", "13")));
        assert_eq!(decides_from(&cache, "a").as_deref(), Some("13"));
    }

    #[test]
    fn a_write_the_store_holds_already_or_a_deletion_holds_nothing_back() {
        let (cache, mut deliver) = cache_with_a();
        // Delivered before the patch's answer was handled, or a patch that
        // changed nothing (no watch event will come).
        cache.wrote(&object("a", "10"));
        assert_eq!(decides_from(&cache, "a").as_deref(), Some("10"));
        cache.wrote(&object("a", "14"));
        deliver(watcher::Event::Delete(object("a", "15")));
        assert_eq!(decides_from(&cache, "a"), None, "gone: read it");
        assert!(lock(&cache.own).unseen.is_empty());
    }

    #[test]
    fn a_relist_delivers_an_own_write_once_the_store_holds_the_list() {
        let (cache, mut deliver) = cache_with_a();
        cache.wrote(&object("a", "12"));
        deliver(watcher::Event::Init);
        deliver(watcher::Event::InitApply(object("a", "12")));
        assert_eq!(
            decides_from(&cache, "a").as_deref(),
            Some("behind"),
            "the store still holds version 10 until the list is done"
        );
        deliver(watcher::Event::InitDone);
        assert_eq!(decides_from(&cache, "a").as_deref(), Some("12"));
    }

    #[test]
    fn an_own_write_never_delivered_sends_the_reconcile_to_the_api_server() {
        let (cache, _deliver) = cache_with_a();
        cache.wrote(&object("a", "12"));
        // Skipped by the watch (a later version came first, or the event
        // was lost): after DELIVERY_WAIT the object is read, once.
        age_past_the_wait(&cache);
        assert_eq!(decides_from(&cache, "a"), None);
        assert_eq!(decides_from(&cache, "a").as_deref(), Some("10"));
    }

    #[test]
    fn undelivered_writes_past_the_wait_are_swept_once_many_are_kept() {
        let (cache, _deliver) = cache();
        for n in 0..SWEEP_ABOVE {
            cache.wrote(&object(&format!("o-{n}"), "2"));
        }
        age_past_the_wait(&cache);
        cache.wrote(&object("last", "2"));
        assert_eq!(
            lock(&cache.own).unseen.len(),
            1,
            "only the young write kept"
        );
    }

    #[test]
    fn trim_drops_managed_fields_last_applied_and_software_only() {
        let spec = serde_json::json!({"assetId": "asset-1", "target": {},
            "software": [{"purl": "pkg:npm/a@1"}], "sbom": {"source": "s", "ref": "r"}});
        let mut obj = AssetScan::new("a", serde_json::from_value(spec).expect("spec"));
        obj.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        obj.metadata.annotations = Some(BTreeMap::from([
            (LAST_APPLIED.to_owned(), "{}".to_owned()),
            ("keep".to_owned(), "yes".to_owned()),
        ]));
        trim(&mut obj);
        assert!(obj.spec.software.is_empty());
        assert!(obj.spec.sbom.is_some(), "a reference is small: kept");
        assert_eq!(obj.metadata.managed_fields, None);
        assert_eq!(
            obj.metadata.annotations,
            Some(BTreeMap::from([("keep".to_owned(), "yes".to_owned())]))
        );
    }
}
