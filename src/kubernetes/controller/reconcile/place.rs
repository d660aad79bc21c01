//! The reconcile of the objects no bucket selects ([`unplaced_selector`]):
//! the owner of the asset's bucket labels an unlabelled object, in the
//! same write that adds the finalizer, and scans an object whose label is
//! not a bucket all the same, with a Warning Event that says why the label
//! is ignored (see [`crate::kubernetes::controller::fleet::shard`]).
//!
//! Labels are written at the pace of the start bound, from a gate of their
//! own with the same fair lines per namespace
//! ([`crate::kubernetes::controller::fleet::starts`]): a label leads to the
//! start of the object's first run, so labelling faster only moves the
//! queue from the start bound to the API server; and labels written in
//! order of creation would hold one team's few new AssetScans behind
//! another team's ten thousand, however fair the start bound behind them.
//!
//! [`unplaced_selector`]: crate::kubernetes::controller::fleet::shard::unplaced_selector

use super::context::{Context, Error};
use super::{FINALIZER, reconcile, share};
use crate::kubernetes::controller::fleet::object_key;
use crate::kubernetes::controller::fleet::shard::{InvalidShardLabel, Placement};
use crate::kubernetes::controller::fleet::starts::Admission;
use crate::kubernetes::controller::status::writer::FIELD_MANAGER;
use crate::kubernetes::crd::{AssetScan, SHARD_LABEL};
use crate::pipeline::Effects;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use std::sync::Arc;
use std::time::Duration;
use tracing::{debug, warn};

/// The merge patch that labels `obj` with `bucket` and adds the finalizer,
/// conditional on the copy it was computed from.
pub fn label_patch(obj: &AssetScan, bucket: u32) -> serde_json::Value {
    let mut finalizers = obj.finalizers().to_vec();
    if !finalizers.iter().any(|f| f == FINALIZER) {
        finalizers.push(FINALIZER.to_owned());
    }
    serde_json::json!({
        "metadata": {
            "resourceVersion": obj.resource_version(),
            "labels": { SHARD_LABEL: bucket.to_string() },
            "finalizers": finalizers,
        }
    })
}

/// The reconcile of the objects no bucket selects (see the module's doc).
pub async fn place<E: Effects + 'static>(
    obj: Arc<AssetScan>,
    ctx: Arc<Context<E>>,
) -> Result<Action, Error> {
    let placement = Placement::of(&obj);
    if !ctx.settings.shard.owns(placement.bucket()) {
        return Ok(Action::await_change());
    }
    match placement {
        Placement::Labelled(_) => Ok(Action::await_change()),
        Placement::Unlabelled { .. } if obj.meta().deletion_timestamp.is_some() => {
            reconcile(obj, ctx).await
        }
        Placement::Unlabelled { .. } if let Some(later) = share::defer(&obj, &ctx) => Ok(later),
        Placement::Unlabelled { bucket } => {
            match ctx.label_gate.admit(&obj.namespace().unwrap_or_default()) {
                Admission::Now => label(&obj, &ctx, bucket).await,
                Admission::After(delay) => Ok(Action::requeue(delay)),
            }
        }
        Placement::Invalid { value, bucket } => {
            report_invalid(&obj, &ctx, &value, bucket).await;
            reconcile(obj, ctx).await
        }
    }
}

async fn label<E: Effects + 'static>(
    obj: &AssetScan,
    ctx: &Context<E>,
    bucket: u32,
) -> Result<Action, Error> {
    let api: Api<AssetScan> =
        Api::namespaced(ctx.client.clone(), &obj.namespace().unwrap_or_default());
    let patch = label_patch(obj, bucket);
    let written = api
        .patch(
            &obj.name_any(),
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&patch),
        )
        .await;
    if written.is_err() {
        // No run starts from a label not written: the next object takes
        // its start.
        ctx.label_gate.give_back();
    }
    match written {
        Ok(_) => {
            ctx.metrics.sharding.labelled.inc();
            Ok(Action::await_change())
        }
        // Changed since this copy: another replica labelled it first (it
        // added the finalizer too: a race lost, not a failure), or its next
        // version comes through the watch; or it is gone.
        Err(kube::Error::Api(e)) if matches!(e.code, 404 | 409) => {
            if e.code == 409 {
                ctx.metrics.finalizer_races.inc();
            }
            debug!(object = %object_key(obj), code = e.code, "shard label not written");
            Ok(Action::requeue(Duration::from_secs(1)))
        }
        Err(err) => Err(err.into()),
    }
}

/// A Warning Event, once per object and value, that the label is ignored.
async fn report_invalid<E: Effects + 'static>(
    obj: &AssetScan,
    ctx: &Context<E>,
    value: &str,
    bucket: u32,
) {
    if !ctx.first_invalid_label(&object_key(obj), value) {
        return;
    }
    let shown = assetscan_domain::text::truncate_chars(value, 63);
    warn!(object = %object_key(obj), value = %shown, bucket, "shard label is not a bucket");
    ctx.metrics.sharding.label_invalid.inc();
    let event = Event {
        type_: EventType::Warning,
        reason: "InvalidShardLabel".into(),
        note: Some(InvalidShardLabel { value, bucket }.message()),
        action: "Shard".into(),
        secondary: None,
    };
    if let Err(err) = ctx.recorder.publish(&event, &obj.object_ref(&())).await {
        ctx.metrics.events_unpublished.inc();
        debug!(error = %err, "event not published");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(asset: &str) -> AssetScan {
        let spec = serde_json::json!({"assetId": asset, "target": {}});
        let mut obj = AssetScan::new("a", serde_json::from_value(spec).expect("spec"));
        obj.metadata.resource_version = Some("7".into());
        obj
    }

    #[test]
    fn the_label_comes_with_the_finalizer_in_one_conditional_write() {
        let mut obj = scan("web-01");
        obj.metadata.finalizers = Some(vec!["other.io/keep".into()]);
        let patch = label_patch(&obj, 42);
        assert_eq!(
            patch,
            serde_json::json!({"metadata": {
                "resourceVersion": "7",
                "labels": {"assetscan.io/shard-bucket": "42"},
                "finalizers": ["other.io/keep", FINALIZER],
            }})
        );
    }
}
