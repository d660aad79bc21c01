//! The two backends the scenarios run on, and every place they differ.
//!
//! The scenarios ask a backend, never check which one it is: a difference
//! that is not a method here is not allowed.

use crate::cluster::Prepared;
use std::sync::Arc;
use std::time::Duration;

/// Where the scenarios' API server comes from.
#[derive(Clone)]
pub enum Backend {
    /// The test kit's API emulator, one per scenario, serving the
    /// repository's CRDs (`make test`).
    Emulator,
    /// A real cluster, prepared once for the whole run: the CRDs, a
    /// namespace of the run's own, the chart's RBAC and a ServiceAccount
    /// token for the operator (`make e2e`).
    Cluster(Arc<Prepared>),
}

/// Who deletes the objects whose owner is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GarbageCollector {
    /// The emulator's own collector (`testkit/src/emulator/gc.rs`): it
    /// follows `ownerReferences` as kube-controller-manager's does, at once.
    Emulated,
    /// The cluster's kube-controller-manager, on its own schedule.
    ControllerManager,
    /// None: a bare API server (envtest-like, `--no-garbage-collector`).
    /// Owned objects outlive their owner until someone deletes them.
    Absent,
}

impl Backend {
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Emulator => "emulator",
            Backend::Cluster(_) => "cluster",
        }
    }

    /// How long a scenario waits for one event before it fails: a guard
    /// against hangs. A real API server answers through etcd and its
    /// garbage collector works from its own informers, so it gets more.
    pub fn patience(&self) -> Duration {
        match self {
            Backend::Emulator => Duration::from_secs(60),
            Backend::Cluster(_) => Duration::from_secs(120),
        }
    }

    pub fn garbage_collector(&self) -> GarbageCollector {
        match self {
            Backend::Emulator => GarbageCollector::Emulated,
            Backend::Cluster(prepared) => prepared.garbage_collector,
        }
    }

    /// Whether the operator's requests are authorized by RBAC. The
    /// emulator authorizes everything (see its "Not emulated" list); a
    /// cluster holds the operator to the chart's Role.
    pub fn enforces_rbac(&self) -> bool {
        matches!(self, Backend::Cluster(_))
    }

    /// Whether the chart's metrics-reader ClusterRole is already bound to
    /// `metrics_kit::READER` in the scenario's namespace: a cluster's
    /// preparation binds it (and removes it at the end); an emulator
    /// scenario binds it itself.
    pub fn binds_metrics_reader(&self) -> bool {
        matches!(self, Backend::Cluster(_))
    }

    /// How many scenarios run at once. On a cluster they share the run's
    /// namespace, and an operator process reconciles everything in it.
    pub fn parallel(&self) -> usize {
        match self {
            Backend::Emulator => 2,
            Backend::Cluster(_) => 1,
        }
    }
}
