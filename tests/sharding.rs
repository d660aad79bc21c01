//! Server-side sharding: each replica asks the API server only for the
//! AssetScans of its own buckets, every object is scanned by exactly one
//! live shard, and changing the number of shards writes no object.

mod controller_kit;

use assetscan_operator::domain::shard::{self, Shard};
use assetscan_operator::kubernetes::controller::FINALIZER;
use assetscan_operator::kubernetes::crd::{AssetScan, SHARD_LABEL};
use assetscan_testkit::wait;
use controller_kit::*;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};

/// Objects per test: enough that both shards of two own some.
const SCANS: usize = 16;

fn names() -> Vec<String> {
    (0..SCANS).map(|n| format!("shard-{n:02}")).collect()
}

/// Creates the scans and waits until every one has a terminal status.
async fn scan_all(h: &Harness) -> Vec<AssetScan> {
    for name in names() {
        h.create(&kit::scans::scan(&name).build()).await;
    }
    let mut done = Vec::new();
    for name in names() {
        done.push(h.wait_terminal(&name, PATIENCE).await);
    }
    done
}

/// The bucket recorded on the object.
fn label(obj: &AssetScan) -> Option<u32> {
    obj.labels()
        .get(SHARD_LABEL)
        .and_then(|v| shard::parse_bucket(v))
}

/// Waits until each replica's watch cache holds exactly the objects of its
/// buckets, and returns how many each holds.
async fn wait_watched(replicas: &[(&Running, Shard)], objects: &[AssetScan]) -> Vec<usize> {
    let mut held = Vec::new();
    for (running, shard) in replicas {
        let mine = objects
            .iter()
            .filter(|o| label(o).is_some_and(|b| shard.owns(b)))
            .count();
        let what = format!(
            "shard {} of {} to watch its {mine} objects",
            shard.index(),
            shard.count()
        );
        wait::until(&what, PATIENCE, async || {
            running.counter("assetscan_watched_objects") == mine as f64
        })
        .await;
        held.push(mine);
    }
    held
}

/// The writes to the object that were not status writes.
fn object_writes(h: &Harness, name: &str) -> usize {
    h.emu
        .history("assetscans", Some(NAMESPACE), name)
        .iter()
        .filter(|w| w.subresource.is_none())
        .count()
}

/// The two halves of the buckets, and a controller on each.
async fn two_shards(h: &Harness) -> ([Shard; 2], [Running; 2]) {
    let shards = [Shard::new(0, 2).unwrap(), Shard::new(1, 2).unwrap()];
    let a = h.sharded("shard-a", shards[0]).await;
    let b = h.sharded("shard-b", shards[1]).await;
    (shards, [a, b])
}

/// Two shards: each sees only its own buckets' objects (without the label
/// selector each would hold all of them), every object is labelled with
/// its asset's bucket in the write that adds the finalizer, and every one
/// is scanned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_shard_watches_only_its_buckets_and_every_object_is_scanned() {
    let h = Harness::start().await;
    let (shards, [a, b]) = two_shards(&h).await;
    let done = scan_all(&h).await;
    for obj in &done {
        assert_eq!(
            label(obj),
            Some(shard::bucket(&obj.spec.asset_id)),
            "{}",
            obj.name_any()
        );
        assert!(obj.finalizers().iter().any(|f| f == FINALIZER));
        // Created, then labelled with the finalizer: no write of its own.
        assert_eq!(object_writes(&h, &obj.name_any()), 2, "{}", obj.name_any());
    }
    let held = wait_watched(&[(&a, shards[0]), (&b, shards[1])], &done).await;
    assert!(
        held.iter().all(|n| *n > 0),
        "both shards own objects: {held:?}"
    );
    assert_eq!(held.iter().sum::<usize>(), SCANS);
    a.stop().await;
    b.stop().await;
}

/// 2 shards, then 4: the new replicas ask for their buckets and hold them
/// at once, every object has a live owner, and no object is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rescale_moves_buckets_not_objects() {
    let h = Harness::start().await;
    let two = [Shard::new(0, 2).unwrap(), Shard::new(1, 2).unwrap()];
    let (a, b) = (
        h.sharded("two-0", two[0]).await,
        h.sharded("two-1", two[1]).await,
    );
    let done = scan_all(&h).await;
    wait_watched(&[(&a, two[0]), (&b, two[1])], &done).await;
    let writes: Vec<usize> = names().iter().map(|n| object_writes(&h, n)).collect();
    a.stop().await;
    b.stop().await;

    let four: Vec<Shard> = (0..4).map(|i| Shard::new(i, 4).unwrap()).collect();
    let mut running = Vec::new();
    for shard in &four {
        running.push(h.sharded(&format!("four-{}", shard.index()), *shard).await);
    }
    let pairs: Vec<(&Running, Shard)> = running.iter().zip(four.iter().copied()).collect();
    let held = wait_watched(&pairs, &done).await;
    assert_eq!(
        held.iter().sum::<usize>(),
        SCANS,
        "every object has one owner"
    );
    let after: Vec<usize> = names().iter().map(|n| object_writes(&h, n)).collect();
    assert_eq!(after, writes, "the rescale wrote no object");
    for r in running {
        r.stop().await;
    }
}

/// A user's valid bucket is honoured (the owner of that bucket scans the
/// object, whatever its asset hashes to); a label that is no bucket is
/// reported with a Warning Event and the object is still scanned, by the
/// owner of the bucket its asset id hashes into. Neither label is changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_bucket_is_honoured_and_an_invalid_one_reported_and_scanned() {
    let h = Harness::start().await;
    let (shards, [a, b]) = two_shards(&h).await;

    let pinned = kit::scans::scan("pinned");
    let hashed = shard::bucket(pinned.asset_id());
    // A bucket of the other shard than the one the asset hashes to.
    let chosen = (hashed + 1) % shard::BUCKETS;
    let mut obj = pinned.build();
    obj.metadata.labels = Some([(SHARD_LABEL.to_owned(), chosen.to_string())].into());
    h.create(&obj).await;
    let mut typo = kit::scans::scan("typo").build();
    typo.metadata.labels = Some([(SHARD_LABEL.to_owned(), "web".to_owned())].into());
    h.create(&typo).await;

    // Which replica scanned an object: the instance its lock holder names.
    let scanned_by = async |obj: &AssetScan, bucket: u32| {
        let owner = if shards[0].owns(bucket) {
            "shard-a"
        } else {
            "shard-b"
        };
        let holder = h.mirrored_ticket(obj).await.holder.unwrap_or_default();
        assert!(
            holder.starts_with(owner),
            "{holder} scanned {}, not {owner}",
            obj.name_any()
        );
    };
    let pinned = h.wait_terminal("pinned", PATIENCE).await;
    assert_eq!(label(&pinned), Some(chosen));
    scanned_by(&pinned, chosen).await;

    let typo = h.wait_terminal("typo", PATIENCE).await;
    assert_eq!(
        typo.labels().get(SHARD_LABEL).map(String::as_str),
        Some("web")
    );
    scanned_by(&typo, shard::bucket(&typo.spec.asset_id)).await;
    let warned = wait::until_some("the InvalidShardLabel Event", PATIENCE, async || {
        let events = events_about(&h.client, NAMESPACE, "typo").await;
        (events.into_iter()).find(|e| e.reason.as_deref() == Some("InvalidShardLabel"))
    })
    .await;
    assert_eq!(warned.type_.as_deref(), Some("Warning"));
    assert!(warned.note.unwrap_or_default().contains("is not a bucket"));

    // The status says so too, naming the bucket whose replica scans it, and
    // stops saying it once the label is a bucket.
    let hashed = shard::bucket(&typo.spec.asset_id);
    let flagged = |o: &AssetScan| {
        o.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "ShardLabelInvalid")
                .cloned()
        })
    };
    let condition = wait::until_some("the ShardLabelInvalid condition", PATIENCE, async || {
        flagged(&h.api().get("typo").await.ok()?)
    })
    .await;
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("True", "NotABucket")
    );
    assert!(
        condition
            .message
            .contains(&format!("owns bucket {hashed},")),
        "{}",
        condition.message
    );
    let fixed = serde_json::json!({"metadata": {"labels": {SHARD_LABEL: hashed.to_string()}}});
    h.api()
        .patch("typo", &PatchParams::default(), &Patch::Merge(&fixed))
        .await
        .expect("label fixed");
    wait::until_some("the condition removed", PATIENCE, async || {
        let obj = h.api().get("typo").await.ok()?;
        (label(&obj) == Some(hashed) && flagged(&obj).is_none()).then_some(())
    })
    .await;
    a.stop().await;
    b.stop().await;
}
