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
//! labelled (created by an earlier version) are cleaned up by that owner
//! (that reconcile is the controller's: `reconcile::place`).

use crate::kubernetes::crd::{AssetScan, SHARD_LABEL};
use assetscan_domain::shard::{self, BUCKETS, Shard};
use assetscan_domain::text::truncate_chars;
use kube::ResourceExt;

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

/// A shard label that is not a bucket: its value, and the bucket the
/// object's asset id hashes into, whose replica scans it.
#[derive(Clone, Copy, Debug)]
pub struct InvalidShardLabel<'a> {
    pub value: &'a str,
    pub bucket: u32,
}

impl InvalidShardLabel<'_> {
    /// What the condition and the Event say (the value bounded).
    pub fn message(&self) -> String {
        format!(
            "label {SHARD_LABEL}={:?} is not a bucket (0 to {}): ignored; the replica that owns bucket {}, which the asset id hashes into, scans this object. Remove the label or set a bucket.",
            truncate_chars(self.value, 63),
            BUCKETS - 1,
            self.bucket
        )
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
}
