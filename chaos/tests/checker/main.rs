//! The checker fails when it must: a history as a chaos run records it
//! (three AssetScans: a high risk taken over at `NOTIFYING` after its first
//! executor stalled, an offline asset whose run Redis lost mid-way, a
//! clean asset deleted mid-run) passes; the same history with one
//! violation injected fails with exactly that invariant, one test each.

use assetscan_chaos::check::{DuplicateCause, Invariant, Report, check, check_strict};
use assetscan_chaos::history::{
    AssetIdentity, AuditRecord, DataLoss, Delivery, Ended, History, ObjectHistory, Outage,
    OutageCause, ProcessRecord, StatusWrite, Timing,
};
use assetscan_chaos::objects::{Channel, Kind, NAMESPACE};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

const A: &str = "a.dc1.example.com";
const B: &str = "b.dc1.example.com";
const C: &str = "c.dc1.example.com";
const RUN_A: &str = "aaaa1111-g1-s0";
const RUN_B: &str = "bbbb2222-g1-s0";
const RUN_C: &str = "cccc3333-g1-s0";

fn key(asset: &str, run: &str) -> String {
    format!("{asset}/{run}")
}

struct Stream {
    /// `None`: 0.1.0's layout (`asc:{<asset>}:…`), as the bridge writes it.
    namespace: Option<&'static str>,
    asset: &'static str,
    run: &'static str,
    epoch: u32,
    records: Vec<AuditRecord>,
}

impl Stream {
    fn new(asset: &'static str, run: &'static str) -> Stream {
        Stream {
            namespace: None,
            asset,
            run,
            epoch: 0,
            records: Vec::new(),
        }
    }

    /// Appends a record of the ticket with `fields`, written `key=value`
    /// apart by spaces, as the checker's excerpts show them.
    fn push(&mut self, fields: &str) -> &mut Stream {
        let n = self.records.len();
        let mut all: BTreeMap<String, String> = fields
            .split_whitespace()
            .map(|pair| {
                let (key, value) = pair.split_once('=').expect("key=value");
                (key.to_owned(), value.to_owned())
            })
            .collect();
        let identity = match self.namespace {
            Some(namespace) => AssetIdentity::namespaced(namespace, self.asset),
            None => AssetIdentity::legacy(self.asset),
        };
        all.insert(
            "ticket".into(),
            identity.key("asc", &format!("ticket:{}", self.run)),
        );
        all.insert("at".into(), format!("{}", 1_000 + n));
        self.records.push(AuditRecord {
            epoch: self.epoch,
            identity,
            id: format!("{}-{n}", 1_000 + n),
            fields: all,
        });
        self
    }

    fn acquire(&mut self, token: u64, status: &str, revision: u64, holder: &str) -> &mut Stream {
        self.push(&format!(
            "op=acquire result=ok holder={holder}:default/x token={token} status={status} revision={revision}"
        ))
    }

    fn advance(&mut self, token: u64, from: &str, to: &str, revision: u64) -> &mut Stream {
        self.push(&format!(
            "op=advance result=ok token={token} from={from} to={to} revision={revision}"
        ))
    }
}

fn status(run: &str, asset: &str, phase: &str, token: i64, revision: i64) -> Value {
    json!({
        "phase": phase,
        "run": run,
        "ticketId": key(asset, run),
        "fencingToken": token,
        "revision": revision,
        "observedGeneration": 1,
    })
}

fn writes(statuses: Vec<Value>) -> Vec<StatusWrite> {
    statuses
        .into_iter()
        .enumerate()
        .map(|(i, status)| StatusWrite {
            resource_version: 10 + 10 * i as u64,
            status,
        })
        .collect()
}

fn stored(notify: &[&str], status: &Value) -> Value {
    json!({
        "metadata": {"generation": 1},
        "spec": {"notify": notify},
        "status": status,
    })
}

/// The recorded history every test starts from; it passes.
fn baseline() -> History {
    // A: high risk; replica-0 sends, stalls before recording NOTIFIED,
    // replica-1 takes over at NOTIFYING and re-sends; replica-0's write is
    // refused as stale.
    let mut a = Stream::new(A, RUN_A);
    a.acquire(1, "INIT", 1, "replica-0#1")
        .advance(1, "INIT", "ASSET_ONLINE", 2)
        .advance(1, "ASSET_ONLINE", "VULN_CHECK_DONE", 3)
        .advance(1, "VULN_CHECK_DONE", "HIGH_RISK_FOUND", 4)
        .advance(1, "HIGH_RISK_FOUND", "NOTIFYING", 5)
        .acquire(2, "NOTIFYING", 6, "replica-1#2")
        .advance(2, "NOTIFYING", "NOTIFIED", 7)
        .push("op=advance result=STALE_TOKEN token=1 valid=2 from=NOTIFIED to=NOTIFIED revision=7")
        .advance(2, "NOTIFIED", "FINISHED", 8)
        .push("op=release result=ok");
    let mut a_final = status(RUN_A, A, "FINISHED", 2, 8);
    a_final["highRisk"] = json!(true);
    a_final["notification"] = json!({"state": "sent", "idempotencyKey": key(A, RUN_A)});

    // B: offline; Redis loses the run after ASSET_OFFLINE; it starts again
    // from INIT under the status's token as floor.
    let mut b = Stream::new(B, RUN_B);
    b.acquire(1, "INIT", 1, "replica-1#2")
        .advance(1, "INIT", "ASSET_OFFLINE", 2);
    b.epoch = 1;
    b.acquire(2, "INIT", 1, "replica-2#3")
        .advance(2, "INIT", "ASSET_OFFLINE", 2)
        .advance(2, "ASSET_OFFLINE", "FINISHED", 3);

    // C: clean, deleted mid-run: its run is retired under a new token.
    let mut c = Stream::new(C, RUN_C);
    c.acquire(1, "INIT", 1, "replica-2#3")
        .advance(1, "INIT", "ASSET_ONLINE", 2)
        .push("op=retire result=ok token=2 from=ASSET_ONLINE status=FAILED revision=3");

    let delivery = |channel, token| Delivery {
        channel,
        key: (channel == Channel::Webhook).then(|| key(A, RUN_A)),
        ticket: Some(key(A, RUN_A)),
        token: Some(token),
    };
    let mut audit = a.records;
    audit.extend(c.records);
    audit.extend(b.records.iter().filter(|r| r.epoch == 0).cloned());
    audit.extend(b.records.iter().filter(|r| r.epoch == 1).cloned());
    History {
        objects: vec![
            ObjectHistory {
                name: "chaos-a".into(),
                namespace: NAMESPACE.into(),
                asset: A.into(),
                kind: Kind::HighRisk {
                    channels: vec![Channel::Webhook, Channel::WeCom],
                    log4j: false,
                },
                deleted: false,
                status_writes: writes(vec![
                    status(RUN_A, A, "INIT", 1, 1),
                    status(RUN_A, A, "HIGH_RISK_FOUND", 1, 4),
                    status(RUN_A, A, "NOTIFYING", 2, 6),
                    a_final.clone(),
                ]),
                last: Some(stored(&["secops-webhook", "secops-wecom"], &a_final)),
            },
            ObjectHistory {
                name: "chaos-b".into(),
                namespace: NAMESPACE.into(),
                asset: B.into(),
                kind: Kind::Offline,
                deleted: false,
                status_writes: writes(vec![
                    status(RUN_B, B, "INIT", 1, 1),
                    status(RUN_B, B, "ASSET_OFFLINE", 1, 2),
                    status(RUN_B, B, "INIT", 2, 1),
                    status(RUN_B, B, "FINISHED", 2, 3),
                ]),
                last: Some(stored(
                    &["secops-webhook"],
                    &status(RUN_B, B, "FINISHED", 2, 3),
                )),
            },
            ObjectHistory {
                name: "chaos-c".into(),
                namespace: NAMESPACE.into(),
                asset: C.into(),
                kind: Kind::Clean { findings: false },
                deleted: true,
                status_writes: writes(vec![status(RUN_C, C, "ASSET_ONLINE", 1, 2)]),
                last: None,
            },
        ],
        audit,
        data_losses: vec![DataLoss {
            epoch: 0,
            api_resource_version: 25,
        }],
        deliveries: vec![
            delivery(Channel::Webhook, 1),
            delivery(Channel::WeCom, 1),
            delivery(Channel::Webhook, 2),
            delivery(Channel::WeCom, 2),
        ],
        processes: vec![
            ProcessRecord {
                instance: "replica-0".into(),
                pid: 100,
                ended: Ended::Killed,
                panics: vec![],
            },
            ProcessRecord {
                instance: "replica-1".into(),
                pid: 101,
                ended: Ended::Terminated(Some(0)),
                panics: vec![],
            },
        ],
        leftover_keys: vec![format!("asc:{{{A}}}:ticket:{RUN_A}")],
        timing: Timing {
            lock_ttl_ms: 2_000,
            notify_max_backoff_ms: 1_000,
            cache_wait_ms: 10_000,
            notify_pass_ms: 23_000,
            outages: vec![],
        },
    }
}

/// A pass of the baseline's runs may take this long: the wait for the
/// watch's delivery (longer than the lock's ttl and the notify backoff),
/// 1 s of jitter, one notify pass.
const PASS_MS: u64 = 10_000 + 1_000 + 23_000;

/// The report names exactly `invariant`, and nothing else.
fn fails_only(history: &History, invariant: Invariant) -> Report {
    let report = check(history);
    let found = invariants(&report);
    assert_eq!(
        found,
        BTreeSet::from([invariant]),
        "violations: {:#?}",
        report.violations
    );
    report
}

fn record<'h>(h: &'h mut History, asset: &str, n: usize) -> &'h mut AuditRecord {
    h.audit
        .iter_mut()
        .filter(|r| r.identity.asset == asset)
        .nth(n)
        .expect("record")
}

/// The baseline with `field` of `asset`'s `n`th audit record set to `value`.
fn with_field(asset: &str, n: usize, field: &str, value: &str) -> History {
    let mut h = baseline();
    record(&mut h, asset, n)
        .fields
        .insert(field.into(), value.into());
    h
}

fn object<'h>(h: &'h mut History, asset: &str) -> &'h mut ObjectHistory {
    h.objects
        .iter_mut()
        .find(|o| o.asset == asset)
        .expect("object")
}

fn invariants(report: &Report) -> BTreeSet<Invariant> {
    report.violations.iter().map(|v| v.invariant).collect()
}

mod cases;
