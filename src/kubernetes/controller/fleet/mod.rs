//! The replicas side by side: which objects each one watches (`shard`),
//! which live replica each object prefers (`members`), how many runs each
//! one starts per second (`starts`), when each object's next scan is due
//! (`spread`), and which due runs it could not start (`waiting`). Nothing
//! here reconciles or writes a status: the reconcile asks.

pub(super) mod members;
pub(super) mod shard;
pub(super) mod spread;
pub(super) mod starts;
pub(super) mod waiting;

use crate::kubernetes::crd::AssetScan;
use kube::ResourceExt;

/// `<namespace>/<name>`: an object's key among the replicas: what each one
/// keeps per object is kept under it, and the membership's preference and
/// the rescan spread hash it.
pub fn object_key(obj: &AssetScan) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}
