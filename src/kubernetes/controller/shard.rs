//! Server-side sharding: each replica asks the API server only for the
//! objects of its own buckets ([`assetscan_domain::shard`]), by a label
//! selector on its list and watch, so that its memory follows its share of
//! the assets, not their number.
//!
//! The bucket is recorded in the label [`SHARD_LABEL`] once, by the replica
//! that owns the bucket the object's asset id hashes into, in the same write
//! that adds the finalizer (so it costs no write the object would not have
//! cost anyway). A user-set valid value is honoured. Changing the number of
//! replicas changes each replica's selector, never an object.
//!
//! A second, small watch ([`unplaced_selector`]) sees what no bucket selects:
//! objects not labelled yet, and objects whose label is not a bucket (a
//! user's mistake). The owner of the asset's bucket labels the first kind,
//! and scans the second kind all the same, with a Warning Event that says
//! why the label is ignored. Objects being deleted before they were
//! labelled (created by an earlier version) are cleaned up by that owner.

use super::context::{Context, Error, object_key};
use super::halt::InvalidShardLabel;
use super::share;
use super::{FIELD_MANAGER, FINALIZER, reconcile};
use crate::kubernetes::crd::{AssetScan, SHARD_LABEL};
use crate::pipeline::Effects;
use assetscan_domain::shard::{self, BUCKETS, Shard};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use std::sync::Arc;
use std::time::Duration;
use tracing::{debug, warn};

/// Where an object stands in the sharding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Its label names a bucket.
    Labelled(u32),
    /// No label yet; its asset hashes into `bucket`.
    Unlabelled { bucket: u32 },
    /// Its label is not a bucket; its asset hashes into `bucket`.
    Invalid { value: String, bucket: u32 },
}

impl Placement {
    pub fn of(obj: &AssetScan) -> Placement {
        let hashed = shard::bucket(&obj.spec.asset_id);
        match obj.labels().get(SHARD_LABEL) {
            None => Placement::Unlabelled { bucket: hashed },
            Some(value) => match shard::parse_bucket(value) {
                Some(bucket) => Placement::Labelled(bucket),
                None => Placement::Invalid {
                    value: value.clone(),
                    bucket: hashed,
                },
            },
        }
    }

    /// The label's value, when it is not a bucket.
    pub fn invalid(&self) -> Option<InvalidShardLabel<'_>> {
        match self {
            Placement::Invalid { value, bucket } => Some(InvalidShardLabel {
                value,
                bucket: *bucket,
            }),
            _ => None,
        }
    }

    /// The bucket that decides the object's owner.
    pub fn bucket(&self) -> u32 {
        match self {
            Placement::Labelled(bucket)
            | Placement::Unlabelled { bucket }
            | Placement::Invalid { bucket, .. } => *bucket,
        }
    }
}

/// The selector of the objects `shard` handles: its buckets' labels.
pub fn owned_selector(shard: Shard) -> String {
    in_buckets("in", shard.buckets())
}

/// The selector of the objects no bucket selects: no label, or a label
/// that is not a bucket.
pub fn unplaced_selector() -> String {
    in_buckets("notin", 0..BUCKETS)
}

fn in_buckets(operator: &str, buckets: impl Iterator<Item = u32>) -> String {
    let values: Vec<String> = buckets.map(|b| b.to_string()).collect();
    format!("{SHARD_LABEL} {operator} ({})", values.join(","))
}

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
        Placement::Unlabelled { bucket } => label(&obj, &ctx, bucket).await,
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
    match api
        .patch(
            &obj.name_any(),
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            },
            &Patch::Merge(&patch),
        )
        .await
    {
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

    fn scan(asset: &str, label: Option<&str>) -> AssetScan {
        let spec = serde_json::json!({"assetId": asset, "target": {}});
        let mut obj = AssetScan::new("a", serde_json::from_value(spec).expect("spec"));
        obj.metadata.resource_version = Some("7".into());
        obj.metadata.labels = label.map(|v| {
            [(SHARD_LABEL.to_owned(), v.to_owned())]
                .into_iter()
                .collect()
        });
        obj
    }

    #[test]
    fn an_object_is_placed_by_its_label_else_by_its_asset() {
        let hashed = shard::bucket("web-01");
        assert_eq!(
            Placement::of(&scan("web-01", None)),
            Placement::Unlabelled { bucket: hashed }
        );
        // A user's valid value is honoured, whatever the asset hashes to.
        assert_eq!(
            Placement::of(&scan("web-01", Some("17"))),
            Placement::Labelled(17)
        );
        let invalid = Placement::of(&scan("web-01", Some("999")));
        assert_eq!(invalid.bucket(), hashed);
        assert!(matches!(invalid, Placement::Invalid { .. }));
    }

    #[test]
    fn selectors_name_exactly_the_shards_buckets() {
        let shard = Shard::new(1, 4).expect("shard");
        let selector = owned_selector(shard);
        assert!(
            selector.starts_with("assetscan.io/shard-bucket in (1,5,9,"),
            "{selector}"
        );
        assert_eq!(selector.matches(',').count(), 63);
        let unplaced = unplaced_selector();
        assert!(unplaced.starts_with("assetscan.io/shard-bucket notin (0,1,2,"));
        assert!(unplaced.ends_with(",255)"));
    }

    #[test]
    fn the_label_comes_with_the_finalizer_in_one_conditional_write() {
        let mut obj = scan("web-01", None);
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
