//! The Kubernetes API access the operator's code needs: one list, which the
//! chart's Role/ClusterRole must grant exactly (`tests/chart/` renders the
//! chart and compares). A new API call adds its line here and to
//! `charts/assetscan-operator/templates/rbac.yaml`.

/// Verbs on one resource of one API group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiAccess {
    /// `""` is the core group.
    pub group: &'static str,
    pub resource: &'static str,
    pub verbs: &'static [&'static str],
}

/// What a channel's `namespaceSelector` (`channelAccess`) adds, cluster-wide
/// only: the labels of an AssetScan's namespace, read at most once per
/// namespace per 30 seconds.
pub const NAMESPACE_LABELS_ACCESS: ApiAccess = ApiAccess {
    group: "",
    resource: "namespaces",
    verbs: &["get"],
};

/// What the team channels add (`teamChannels.enabled`, on by default): the
/// watch on NotificationChannels, their conditions, and the Secret each
/// names, read by name (`get` only: Secrets are never listed or watched).
pub const TEAM_CHANNELS_ACCESS: &[ApiAccess] = &[
    ApiAccess {
        group: "assetscan.io",
        resource: "notificationchannels",
        verbs: &["get", "list", "watch"],
    },
    ApiAccess {
        group: "assetscan.io",
        resource: "notificationchannels/status",
        verbs: &["patch"],
    },
    ApiAccess {
        group: "",
        resource: "secrets",
        verbs: &["get"],
    },
];

/// What the cluster's channels add, when the team channels are on and the
/// operator watches every namespace: the watch on
/// ClusterNotificationChannels and their conditions (their Secrets are
/// read with [`TEAM_CHANNELS_ACCESS`]'s `get`), and the namespaces' labels,
/// which a cluster channel's `access.namespaceSelector` may read at any
/// time ([`NAMESPACE_LABELS_ACCESS`]).
pub const CLUSTER_CHANNELS_ACCESS: &[ApiAccess] = &[
    NAMESPACE_LABELS_ACCESS,
    ApiAccess {
        group: "assetscan.io",
        resource: "clusternotificationchannels",
        verbs: &["get", "list", "watch"],
    },
    ApiAccess {
        group: "assetscan.io",
        resource: "clusternotificationchannels/status",
        verbs: &["patch"],
    },
];

/// What the metrics port asks the API server about each new caller
/// ([`crate::http_access`]): cluster-scoped reviews, granted by a
/// ClusterRole of their own (`templates/metrics-rbac.yaml`) also when the
/// operator watches one namespace; not granted with `metrics.secure=false`.
pub const METRICS_ACCESS: &[ApiAccess] = &[
    ApiAccess {
        group: "authentication.k8s.io",
        resource: "tokenreviews",
        verbs: &["create"],
    },
    ApiAccess {
        group: "authorization.k8s.io",
        resource: "subjectaccessreviews",
        verbs: &["create"],
    },
];

/// Everything the controller calls.
pub const OPERATOR_ACCESS: &[ApiAccess] = &[
    // The watch (list, watch), the fresh read before a run (get), and the
    // finalizer's JSON patch (patch; kube-runtime may also update).
    ApiAccess {
        group: "assetscan.io",
        resource: "assetscans",
        verbs: &["get", "list", "watch", "patch", "update"],
    },
    // The status mirror: merge patches, and the re-read after a failed one.
    ApiAccess {
        group: "assetscan.io",
        resource: "assetscans/status",
        verbs: &["get", "patch", "update"],
    },
    // Setting finalizers needs update on the subresource where the
    // OwnerReferencesPermissionEnforcement admission plugin is on.
    ApiAccess {
        group: "assetscan.io",
        resource: "assetscans/finalizers",
        verbs: &["update"],
    },
    // The FindingExceptions of an AssetScan's namespace, listed at most
    // once per namespace per 30 seconds for its runs' triage.
    ApiAccess {
        group: "assetscan.io",
        resource: "findingexceptions",
        verbs: &["list"],
    },
    // The report of each run that ended: created once, deleted once it
    // falls off the object's reportHistoryLimit (named in its status: no
    // list is needed).
    ApiAccess {
        group: "assetscan.io",
        resource: "assetscanreports",
        verbs: &["create", "delete"],
    },
    // kube-runtime's Recorder: events.k8s.io, and the core group for
    // clusters that only serve that.
    ApiAccess {
        group: "events.k8s.io",
        resource: "events",
        verbs: &["create", "patch"],
    },
    ApiAccess {
        group: "",
        resource: "events",
        verbs: &["create", "patch"],
    },
];
