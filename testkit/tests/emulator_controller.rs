//! kube-runtime's `Controller`, unchanged, against the emulator: watch,
//! reconcile, status writes (merge patch and server-side apply on /status),
//! the finalizer helper (JSON patches with `test` ops), and the events
//! `Recorder` (events.k8s.io/v1 create, then merge patch of the series) —
//! and the same controller riding out injected conflicts, cut watches and a
//! compaction (410 → re-list).

use std::sync::Arc;
use std::time::Duration;

use assetscan_testkit::emulator::{Emulator, EmulatorOptions, EventType, Fault, Operation};
use futures::StreamExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType as KubeEventType, Recorder, Reporter};
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

mod common;
use common::{ar, create_scan, merge_patch, merge_patch_status};

const FINALIZER: &str = "example.com/cleanup";
const MANAGER: &str = "assetscan-test-controller";

struct Ctx {
    client: Client,
    recorder: Recorder,
}

#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    #[error(transparent)]
    Finalizer(#[from] Box<kube::runtime::finalizer::Error<kube::Error>>),
}

/// A small but complete reconciler: two status writes (merge patch, then
/// server-side apply), one event per generation, cleanup on deletion.
async fn reconcile(obj: Arc<DynamicObject>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let ns = obj.namespace().unwrap_or_else(|| "default".into());
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), &ns, &ar());
    finalizer(&api, FINALIZER, obj, |event| async {
        match event {
            FinalizerEvent::Apply(o) => apply(&o, &api, &ctx).await,
            FinalizerEvent::Cleanup(o) => {
                publish(&ctx, &o, "CleanedUp", "scan record removed", "Delete").await?;
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| ReconcileError::Finalizer(Box::new(e)))
}

async fn apply(
    o: &DynamicObject,
    api: &Api<DynamicObject>,
    ctx: &Ctx,
) -> Result<Action, kube::Error> {
    let generation = o.metadata.generation.unwrap_or(0);
    let status = o.data.get("status").cloned().unwrap_or(Value::Null);
    if status["observedGeneration"].as_i64() == Some(generation) {
        return Ok(Action::await_change());
    }
    let token = status["fencingToken"].as_i64().unwrap_or(0) + 1;
    let name = o.name_any();
    merge_patch_status(
        api,
        &name,
        json!({"status": {"phase": "ASSET_ONLINE", "fencingToken": token, "revision": 0}}),
    )
    .await?;
    let applied = json!({
        "apiVersion": "example.com/v1",
        "kind": "AssetScan",
        "metadata": {"name": name},
        "status": {
            "phase": "FINISHED",
            "fencingToken": token,
            "revision": 1,
            "observedGeneration": generation,
            "conditions": [{"type": "Ready", "status": "True", "reason": "ScanFinished",
                            "message": "scan finished", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        },
    });
    api.patch_status(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&applied),
    )
    .await?;
    publish(ctx, o, "ScanFinished", "scan finished", "Scan").await?;
    Ok(Action::await_change())
}

/// Records a Normal event about `o`.
async fn publish(
    ctx: &Ctx,
    o: &DynamicObject,
    reason: &str,
    note: &str,
    action: &str,
) -> Result<(), kube::Error> {
    let event = Event {
        type_: KubeEventType::Normal,
        reason: reason.into(),
        note: Some(note.into()),
        action: action.into(),
        secondary: None,
    };
    ctx.recorder.publish(&event, &o.object_ref(&ar())).await
}

fn error_policy(_obj: Arc<DynamicObject>, _err: &ReconcileError, _ctx: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

async fn start() -> (Emulator, Api<DynamicObject>, tokio::task::JoinHandle<()>) {
    let (emu, api) = common::start(EmulatorOptions::default()).await;
    let client = api.clone().into_client();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: MANAGER.into(),
            instance: Some("test-0".into()),
        },
    );
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        recorder,
    });
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &ar());
    let controller = Controller::new_with(all, watcher::Config::default(), ar())
        .run(reconcile, error_policy, ctx)
        .for_each(|_| futures::future::ready(()));
    let task = tokio::spawn(controller);
    (emu, api, task)
}

/// Waits until `check` holds for the object (or its absence).
async fn eventually(
    api: &Api<DynamicObject>,
    name: &str,
    check: impl Fn(Option<&DynamicObject>) -> bool,
) -> Option<DynamicObject> {
    let what = format!("{name} to reach the awaited state");
    assetscan_testkit::wait::until_some(&what, Duration::from_secs(8), async || {
        let obj = api.get_opt(name).await.expect("get");
        check(obj.as_ref()).then_some(obj)
    })
    .await
}

/// The Events selected by `fields`, read through the API of `K` (both
/// Event APIs serve the same objects).
async fn events<K>(emu: &Emulator, fields: &str) -> Vec<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(emu.client().expect("client"), "default");
    api.list(&ListParams::default().fields(fields))
        .await
        .expect("events")
        .items
}

fn observed(o: Option<&DynamicObject>, generation: i64) -> bool {
    o.is_some_and(|o| {
        o.data["status"]["observedGeneration"] == generation
            && o.data["status"]["phase"] == "FINISHED"
    })
}

#[tokio::test]
async fn controller_reconciles_with_finalizer_status_and_events() {
    let (emu, api, task) = start().await;
    create_scan(&api, "web").await;
    let done = eventually(&api, "web", |o| observed(o, 1))
        .await
        .expect("reconciled");
    assert_eq!(done.finalizers(), [FINALIZER.to_string()]);
    assert_eq!(done.data["status"]["conditions"][0]["status"], "True");
    let managers: Vec<(Option<String>, Option<String>, Option<String>)> = done
        .metadata
        .managed_fields
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|m| (m.manager, m.operation, m.subresource))
        .collect();
    assert!(
        managers.contains(&(
            Some(MANAGER.into()),
            Some("Apply".into()),
            Some("status".into())
        )),
        "{managers:?}"
    );

    merge_patch(&api, "web", json!({"spec": {"threatIntel": "Always"}}))
        .await
        .expect("spec change");
    eventually(&api, "web", |o| observed(o, 2)).await;

    // The invariant a chaos test would check: the status never went backwards.
    let history = emu.history("assetscans", Some("default"), "web");
    let statuses: Vec<(Operation, String, i64, i64)> = history
        .iter()
        .filter(|r| r.subresource.as_deref() == Some("status"))
        .map(|r| {
            let s = &r.object["status"];
            (
                r.operation,
                s["phase"].as_str().unwrap_or_default().to_string(),
                s["fencingToken"].as_i64().unwrap_or(-1),
                s["revision"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        vec![
            (Operation::MergePatch, "ASSET_ONLINE".into(), 1, 0),
            (Operation::Apply, "FINISHED".into(), 1, 1),
            (Operation::MergePatch, "ASSET_ONLINE".into(), 2, 0),
            (Operation::Apply, "FINISHED".into(), 2, 1),
        ]
    );
    assert_eq!(
        history[1].operation,
        Operation::JsonPatch,
        "finalizer added with a JSON patch"
    );

    // The recorder created one event and patched its series on the second publish.
    let listed: Vec<k8s_openapi::api::events::v1::Event> =
        events(&emu, "involvedObject.name=web,reason=ScanFinished").await;
    assert_eq!(listed.len(), 1);
    let ev = &listed[0];
    assert_eq!(ev.reporting_controller.as_deref(), Some(MANAGER));
    assert_eq!(ev.series.as_ref().map(|s| s.count), Some(2));
    let writes: Vec<Operation> = emu
        .history("events.events.k8s.io", Some("default"), &ev.name_any())
        .iter()
        .map(|r| r.operation)
        .collect();
    assert_eq!(writes, vec![Operation::Create, Operation::MergePatch]);

    api.delete("web", &DeleteParams::default())
        .await
        .expect("delete");
    eventually(&api, "web", |o| o.is_none()).await;
    let history = emu.history("assetscans", Some("default"), "web");
    let tail: Vec<(EventType, Operation)> = history
        .iter()
        .rev()
        .take(2)
        .rev()
        .map(|r| (r.event, r.operation))
        .collect();
    assert_eq!(
        tail,
        vec![
            (EventType::Modified, Operation::Delete),
            (EventType::Deleted, Operation::JsonPatch)
        ]
    );
    let cleaned: Vec<k8s_openapi::api::core::v1::Event> =
        events(&emu, "involvedObject.name=web,reason=CleanedUp").await;
    assert_eq!(
        cleaned.len(),
        1,
        "cleanup event visible through core/v1 too"
    );
    task.abort();
}

#[tokio::test]
async fn controller_rides_out_conflicts_cut_watches_and_compaction() {
    let (emu, api, task) = start().await;
    emu.faults().inject("PATCH", "/status", 2, Fault::Conflict);
    create_scan(&api, "a").await;
    eventually(&api, "a", |o| observed(o, 1)).await;
    assert_eq!(
        emu.faults().pending(),
        0,
        "both conflicts were hit and retried"
    );

    // Cut the watch and make the old resourceVersion too old: the watcher
    // gets 410 on resume, re-lists, and still sees the next object.
    assetscan_testkit::wait::until(
        "the controller watching",
        Duration::from_secs(5),
        async || emu.open_watches() > 0,
    )
    .await;
    // A write the AssetScan watcher does not see moves the revision on.
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::default_namespaced(emu.client().expect("client"));
    let cm = serde_json::from_value(json!({"metadata": {"name": "filler"}})).expect("configmap");
    configmaps
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");
    emu.compact();
    assert!(emu.faults().abort_watches() >= 1);
    create_scan(&api, "b").await;
    eventually(&api, "b", |o| observed(o, 1)).await;
    assert!(
        emu.expired_watches() >= 1,
        "the watcher resumed from a compacted version and re-listed"
    );
    task.abort();
}
