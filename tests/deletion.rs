//! Deleting an AssetScan ends its runs for good, with real operator
//! processes racing the deletion: nothing re-creates a ticket for a run that
//! ended or whose object is gone, and nothing of the object stays in Redis
//! once the retention has passed.
//!
//! Each test stops one replica with the fault drill at the worst moment,
//! lets another replica delete the object, then resumes the first with its
//! stale view:
//! - two replicas cleaning up the same object, one stopped between listing
//!   the runs and ending them;
//! - a replica stopped between reading the object and acquiring its run.

#![cfg(feature = "failpoints")]

mod controller_kit;

use assetscan_operator::store::AuditEntry;
use controller_kit::*;
use kube::api::DeleteParams;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long terminal tickets, abandoned tickets and tombstones are kept in
/// these tests: long enough for the scenario, short enough to wait out.
const RETENTION: &str = "20s";
const RETENTION_MS: i64 = 20_000;

/// The harness's config with the short retention.
fn config_with_retention(h: &Harness) -> PathBuf {
    let text = std::fs::read_to_string(&h.config_path).expect("config");
    let patched = text.replace(
        "tickets: {retention: 1h,",
        &format!("tickets: {{retention: {RETENTION}, abandonAfter: {RETENTION},"),
    );
    assert_ne!(patched, text, "the test config names its retention");
    let path = h.dir.path().join("config-retention.yaml");
    std::fs::write(&path, patched).expect("write config");
    path
}

/// A harness with one clean, online AssetScan and replica B running it,
/// armed to stop itself before `write` for the asset.
async fn start_with_drilled_replica(
    name: &str,
    asset: &str,
    write: &str,
) -> (Harness, PathBuf, OperatorProcess) {
    let h = Harness::start().await;
    let config = config_with_retention(&h);
    h.create(&h.online(scan(name).asset(asset))).await;
    let drill = format!("stop-before-write=return({asset}:{write})");
    let b = h.operator("proc-b", &config, |c| c.env("FAILPOINTS", &drill));
    (h, config, b)
}

/// Replica A, with the short retention and no drill.
fn plain_replica(h: &Harness, config: &Path) -> OperatorProcess {
    h.operator("proc-a", config, |c| c)
}

async fn audit(h: &Harness, asset: &str) -> Vec<AuditEntry> {
    h.store()
        .await
        .audit(&asset_id(asset), 10_000)
        .await
        .unwrap()
}

fn asset_keys(h: &Harness, asset: &str) -> Vec<String> {
    let mut keys: Vec<String> = h
        .redis
        .query(redis::cmd("KEYS").arg(format!("asc:{{{asset}}}:*")))
        .unwrap();
    keys.sort();
    keys
}

/// What deletion must leave behind, read from the audit stream and Redis:
/// no ticket re-created after its terminal status, no `INIT` claimed after
/// the deletion's first retirement, every key of the asset expiring within
/// the retention, and then none left at all.
async fn check_deletion_left_nothing(h: &Harness, asset: &str, entries: &[AuditEntry]) {
    let retired_at = entries
        .iter()
        .position(|e| e.op() == "retire")
        .unwrap_or_else(|| panic!("no retirement recorded: {entries:#?}"));
    for (i, e) in entries.iter().enumerate() {
        let claimed = e.op() == "acquire" && e.accepted();
        assert!(
            !(claimed && i > retired_at),
            "a run was claimed after the deletion: {e:?}\n{entries:#?}"
        );
        if let Some(ticket) = e.get("ticket") {
            let ended = entries[..i].iter().any(|earlier| {
                earlier.get("ticket") == Some(ticket)
                    && matches!(
                        earlier.get("to").or(earlier.get("status")),
                        Some("FINISHED" | "FAILED")
                    )
                    && earlier.accepted()
            });
            assert!(
                !(claimed && ended),
                "{ticket} re-created after its terminal status: {e:?}\n{entries:#?}"
            );
        }
    }
    let tickets: Vec<String> = asset_keys(h, asset)
        .into_iter()
        .filter(|k| k.contains(":ticket:"))
        .collect();
    assert_eq!(
        tickets,
        Vec::<String>::new(),
        "no ticket of the asset stays"
    );

    for key in asset_keys(h, asset) {
        let pttl: i64 = h.redis.query(redis::cmd("PTTL").arg(&key)).unwrap();
        assert!(
            pttl == -2 || (0..=RETENTION_MS).contains(&pttl),
            "{key} expires in {pttl} ms, not within the retention"
        );
    }
    until(
        "every key of the asset expired",
        Duration::from_millis(RETENTION_MS as u64 + 15_000),
        async || asset_keys(h, asset).is_empty(),
    )
    .await;
}

/// Replica B finishes a run, the object is deleted, and B's cleanup stops
/// after listing the runs; replica A cleans up and the object goes; B
/// resumes and ends the runs it listed, which A already removed. B must
/// neither re-create the finished ticket nor write over its history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_cleaning_up_one_object_recreate_nothing() {
    let (name, asset) = ("twice-01", "twice-01.dc1.example.com");
    let (h, config, b) = start_with_drilled_replica(name, asset, "RETIRE").await;
    let done = h.wait_terminal(name, Duration::from_secs(30)).await;
    let run = done.status.as_ref().unwrap().run.clone().unwrap();
    let ticket_key = format!("asc:{{{asset}}}:ticket:{run}");

    h.api()
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    b.wait_stopped(PATIENCE).await;
    let a = plain_replica(&h, &config);
    h.wait_gone(name).await;
    let before_resume = audit(&h, asset).await.len();
    b.resume();
    until(
        "B went on with its cleanup",
        Duration::from_secs(30),
        async || {
            audit(&h, asset).await[before_resume..].iter().any(|e| {
                e.get("holder")
                    .is_some_and(|who| who.starts_with("proc-b#"))
            })
        },
    )
    .await;

    let entries = audit(&h, asset).await;
    // The finished run's history still ends in FINISHED.
    let last_status = entries
        .iter()
        .filter(|e| e.get("ticket") == Some(ticket_key.as_str()) && e.accepted())
        .filter_map(|e| e.get("to").or(e.get("status")))
        .next_back();
    assert_eq!(last_status, Some("FINISHED"), "{entries:#?}");
    check_deletion_left_nothing(&h, asset, &entries).await;
    drop((a, b));
}

/// Replica B reads the object and stops before acquiring its run; the
/// object is deleted and replica A cleans up (there is no ticket yet); B
/// resumes and acquires. The acquire is refused, and the refusal recorded:
/// no ticket is created for an object that no longer exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_resuming_after_the_deletion_creates_no_ticket() {
    let (name, asset) = ("late-01", "late-01.dc1.example.com");
    let (h, config, b) = start_with_drilled_replica(name, asset, "ACQUIRE").await;
    b.wait_stopped(PATIENCE).await;

    h.api()
        .delete(name, &DeleteParams::default())
        .await
        .unwrap();
    let a = plain_replica(&h, &config);
    h.wait_gone(name).await;
    b.resume();
    let late_acquire = |entries: &[AuditEntry]| {
        entries
            .iter()
            .find(|e| {
                e.op() == "acquire"
                    && e.get("holder")
                        .is_some_and(|who| who.starts_with("proc-b#"))
            })
            .cloned()
    };
    until(
        "B acquired after resuming",
        Duration::from_secs(30),
        async || late_acquire(&audit(&h, asset).await).is_some(),
    )
    .await;

    let entries = audit(&h, asset).await;
    let refused = late_acquire(&entries).unwrap();
    assert_eq!(
        refused.get("result"),
        Some("RUN_RETIRED"),
        "{entries:#?}\n{}",
        b.log()
    );
    check_deletion_left_nothing(&h, asset, &entries).await;
    drop((a, b));
}
