//! Two namespaces with one `assetId`, the bridge to the previous release's
//! layout off: the scenario `tests/tenancy.rs` runs with a controller in
//! its process and the e2e suite with operator processes, on the emulator
//! or a cluster. The caller starts what reconciles both namespaces; this
//! creates the AssetScans, holds a lock through the store and asserts.

use super::kit::scans::{is_terminal, scan, status};
use super::kit::setup::keys_of;
use super::{create_in, online_in};
use assetscan_operator::domain::AssetId;
use assetscan_operator::kubernetes::crd::AssetScan;
use assetscan_operator::store::TicketStore;
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::stubs::ProviderStubs;
use assetscan_testkit::wait;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams};
use std::time::Duration;

/// The `assetId` both namespaces use.
pub const ASSET: &str = "payments-db";

/// One namespace's AssetScans.
pub struct Tenant {
    pub namespace: String,
    pub api: Api<AssetScan>,
}

impl Tenant {
    pub fn new(client: &Client, namespace: &str) -> Tenant {
        Tenant {
            namespace: namespace.to_owned(),
            api: Api::namespaced(client.clone(), namespace),
        }
    }

    /// The pattern of this namespace's Redis keys.
    fn keys(&self) -> String {
        format!("asc:n:{}:*", self.namespace)
    }
}

/// What the scenario runs against: the namespaces, the Redis and stubs the
/// operator uses, and a store with the operator's settings (the bridge
/// off) for the lock the scenario holds itself.
pub struct TwoTenants<'a> {
    pub a: Tenant,
    pub b: Tenant,
    pub redis: &'a RedisServer,
    pub stubs: &'a ProviderStubs,
    pub store: TicketStore,
    /// How long to wait for one event.
    pub patience: Duration,
}

/// Each namespace has its own lock, token sequence and audit stream. b
/// scans first (token 1); a's two AssetScans take 1 and 2 from a's own
/// counter; a run of a holding its lock does not delay b's next run, which
/// takes 2; each stream holds only its namespace's runs; deleting a's
/// objects leaves every key and status of b as it was; no key of the legacy
/// layout exists. With the legacy layout (one lock and fence per
/// `assetId`), a's tokens continue b's and b's run waits.
pub async fn share_no_lock_token_or_history(t: &TwoTenants<'_>) {
    let (a, b) = (&t.a, &t.b);
    let asset = AssetId::new(ASSET).unwrap();
    let on = |name: &str| online_in(t.stubs, scan(name).asset(ASSET).notify(&[]));
    let ended = async |tenant: &Tenant, name: &str| {
        wait::object(&tenant.api, name, "terminal", t.patience, is_terminal).await
    };
    // A run releases its lock after its end is recorded.
    let released = async |tenant: &Tenant| {
        let lock = t
            .store
            .scoped(&tenant.namespace)
            .unwrap()
            .keys(&asset)
            .lock();
        let what = format!("the runs of {} released its lock", tenant.namespace);
        wait::until(&what, t.patience, async || {
            keys_of(t.redis, &lock).await.is_empty()
        })
        .await;
    };

    create_in(&b.api, &on("b-1")).await;
    assert_eq!(token(&ended(b, "b-1").await), 1);
    create_in(&a.api, &on("a-1")).await;
    create_in(&a.api, &on("a-2")).await;
    let mut tokens_a = vec![token(&ended(a, "a-1").await), token(&ended(a, "a-2").await)];
    tokens_a.sort();
    assert_eq!(
        tokens_a,
        [1, 2],
        "{} draws from its own counter",
        a.namespace
    );

    // A run of a holds a's lock (renewed) all along.
    released(a).await;
    let store_a = t.store.scoped(&a.namespace).unwrap();
    let held = store_a
        .acquire(&asset, "held-run", "a-stalled#1", 0)
        .await
        .expect("a's lock is free");
    create_in(&b.api, &on("b-2")).await;
    let b2 = ended(b, "b-2").await;
    assert_eq!(token(&b2), 2, "b's sequence goes on from its own 1");
    assert!(held.lease.is_held(), "a's run still held its lock");

    let history = async |tenant: &Tenant| {
        let store = t.store.scoped(&tenant.namespace).unwrap();
        let entries = store.audit(&asset, 10_000).await.expect("audit");
        let tickets: Vec<String> = (entries.iter())
            .filter_map(|e| e.get("ticket").map(str::to_owned))
            .collect();
        let own = format!("asc:n:{}:", tenant.namespace);
        assert!(tickets.iter().all(|t| t.starts_with(&own)), "{tickets:?}");
        assert!(!tickets.is_empty(), "{}: no history", tenant.namespace);
    };
    history(a).await;
    history(b).await;
    released(b).await;

    let before = (keys_of(t.redis, &b.keys()).await, statuses(&b.api).await);
    store_a.release(&asset, &held.lease).await.expect("release");
    for name in ["a-1", "a-2"] {
        a.api
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete");
    }
    for name in ["a-1", "a-2"] {
        wait::gone(&a.api, name, t.patience).await;
    }
    let after = (keys_of(t.redis, &b.keys()).await, statuses(&b.api).await);
    assert!(!before.0.is_empty());
    assert_eq!(before, after, "deleting a's objects changed b's");
    let legacy = format!("asc:{{{ASSET}}}:*");
    assert!(keys_of(t.redis, &legacy).await.is_empty(), "no legacy key");
}

fn token(obj: &AssetScan) -> i64 {
    status(obj).fencing_token.expect("a recorded token")
}

/// Each AssetScan of `api`: its phase, run, token and revision.
async fn statuses(api: &Api<AssetScan>) -> Vec<String> {
    let list = api.list(&ListParams::default()).await.expect("list");
    (list.items.iter())
        .map(|o| {
            let s = status(o);
            format!(
                "{:?} {:?} {:?} {:?}",
                s.phase, s.run, s.fencing_token, s.revision
            )
        })
        .collect()
}
