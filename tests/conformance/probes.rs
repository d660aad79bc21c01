//! The requests of the emulator's conformance tests
//! (testkit/tests/emulator_conformance.rs), as data: each probe is a
//! sequence of raw requests, and what a client reads of each answer.
//!
//! In paths and bodies `{ns}` is the probe's namespace and `{uid}` the uid
//! of the last object an answer carried. A relative path is below the
//! fixture AssetScans, `/apis/example.com/v1/namespaces/{ns}/`.

pub struct Step {
    pub what: &'static str,
    pub method: &'static str,
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static str,
    /// JSON pointers into a successful answer that a client reads.
    pub read: &'static [&'static str],
}

pub struct Probe {
    pub name: &'static str,
    pub steps: &'static [Step],
}

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const APPLY: &str = "application/apply-patch+yaml";
const META: &[&str] = &[
    "/metadata/finalizers",
    "/metadata/labels",
    "/metadata/annotations",
];
/// What a client reads of an immediate delete's `Status`.
const DELETED: &[&str] = &[
    "/kind",
    "/status",
    "/details/name",
    "/details/group",
    "/details/kind",
];

const fn step(what: &'static str, method: &'static str, path: &'static str) -> Step {
    Step {
        what,
        method,
        path,
        content_type: JSON,
        body: "",
        read: &[],
    }
}

const fn with(mut s: Step, content_type: &'static str, body: &'static str) -> Step {
    s.content_type = content_type;
    s.body = body;
    s
}

const fn reading(mut s: Step, read: &'static [&'static str]) -> Step {
    s.read = read;
    s
}

const SCAN_A: &str = r#"{"apiVersion":"example.com/v1","kind":"AssetScan","metadata":{"name":"a"},"spec":{"target":{"host":"example.org"}}}"#;
const SCAN_A_FINALIZED: &str = r#"{"apiVersion":"example.com/v1","kind":"AssetScan","metadata":{"name":"a","finalizers":["example.com/cleanup"]},"spec":{"target":{"host":"example.org"}}}"#;
const DROP_FINALIZERS: &str = r#"{"metadata":{"finalizers":null}}"#;

const fn create_a() -> Step {
    with(step("create a", "POST", "assetscans"), JSON, SCAN_A)
}

pub const PROBES: &[Probe] = &[
    Probe {
        name: "empty_metadata_is_dropped",
        steps: &[
            reading(
                with(
                    step("create with empty metadata", "POST", "assetscans"),
                    JSON,
                    r#"{"apiVersion":"example.com/v1","kind":"AssetScan","metadata":{"name":"a","finalizers":[],"labels":{},"annotations":{}},"spec":{"target":{"host":"example.org"}}}"#,
                ),
                META,
            ),
            reading(
                with(
                    step("kube-runtime's first finalizer", "PATCH", "assetscans/a"),
                    JSON_PATCH,
                    r#"[{"op":"test","path":"/metadata/finalizers","value":null},{"op":"add","path":"/metadata/finalizers","value":["example.com/cleanup"]}]"#,
                ),
                META,
            ),
            reading(
                with(
                    step("remove the finalizers", "PATCH", "assetscans/a"),
                    MERGE,
                    r#"{"metadata":{"finalizers":[]}}"#,
                ),
                META,
            ),
        ],
    },
    Probe {
        name: "replace_without_resource_version_is_invalid",
        steps: &[
            create_a(),
            with(
                step("replace without resourceVersion", "PUT", "assetscans/a"),
                JSON,
                r#"{"apiVersion":"example.com/v1","kind":"AssetScan","metadata":{"name":"a"},"spec":{"target":{"host":"example.org","port":8443}}}"#,
            ),
            with(
                step(
                    "create a ConfigMap",
                    "POST",
                    "/api/v1/namespaces/{ns}/configmaps",
                ),
                JSON,
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"1"}}"#,
            ),
            reading(
                with(
                    step(
                        "replace a ConfigMap without resourceVersion",
                        "PUT",
                        "/api/v1/namespaces/{ns}/configmaps/c",
                    ),
                    JSON,
                    r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"2"}}"#,
                ),
                &["/data"],
            ),
        ],
    },
    Probe {
        name: "replace_of_a_deleted_object_conflicts",
        steps: &[
            create_a(),
            reading(step("delete a", "DELETE", "assetscans/a"), DELETED),
            with(
                step("replace the deleted a, with its uid", "PUT", "assetscans/a"),
                JSON,
                r#"{"apiVersion":"example.com/v1","kind":"AssetScan","metadata":{"name":"a","uid":"{uid}","resourceVersion":"1"},"spec":{"target":{"host":"example.org"}}}"#,
            ),
            with(
                step(
                    "replace the deleted a, without a uid",
                    "PUT",
                    "assetscans/a",
                ),
                JSON,
                r#"{"apiVersion":"example.com/v1","kind":"AssetScan","metadata":{"name":"a","resourceVersion":"1"},"spec":{"target":{"host":"example.org"}}}"#,
            ),
        ],
    },
    Probe {
        name: "force_on_a_merge_patch_is_invalid",
        steps: &[
            create_a(),
            with(
                step("merge patch with force", "PATCH", "assetscans/a?force=true"),
                MERGE,
                r#"{"spec":{"threatIntel":"Never"}}"#,
            ),
            reading(
                step("read a", "GET", "assetscans/a"),
                &["/spec/threatIntel"],
            ),
        ],
    },
    Probe {
        name: "apply_without_field_manager_is_invalid",
        steps: &[
            with(
                step("apply without fieldManager", "PATCH", "assetscans/a"),
                APPLY,
                SCAN_A,
            ),
            step("read a", "GET", "assetscans/a"),
        ],
    },
    Probe {
        name: "status_errors_name_the_field_below_status",
        steps: &[
            create_a(),
            with(
                step("status with a bad phase", "PATCH", "assetscans/a/status"),
                MERGE,
                r#"{"status":{"phase":"BOGUS"}}"#,
            ),
        ],
    },
    Probe {
        name: "null_fields_are_absent_for_cel",
        steps: &[
            reading(
                with(
                    step(
                        "create a note with a null text",
                        "POST",
                        "/apis/example.com/v1/namespaces/{ns}/notes",
                    ),
                    JSON,
                    r#"{"apiVersion":"example.com/v1","kind":"Note","metadata":{"name":"n"},"spec":{"text":null}}"#,
                ),
                &["/spec"],
            ),
            with(
                step(
                    "create a note with an empty text",
                    "POST",
                    "/apis/example.com/v1/namespaces/{ns}/notes",
                ),
                JSON,
                r#"{"apiVersion":"example.com/v1","kind":"Note","metadata":{"name":"m"},"spec":{"text":""}}"#,
            ),
        ],
    },
    Probe {
        name: "delete_without_finalizers_answers_a_status",
        steps: &[
            create_a(),
            reading(step("delete a", "DELETE", "assetscans/a"), DELETED),
        ],
    },
    Probe {
        name: "marking_for_deletion_bumps_the_generation",
        steps: &[
            reading(
                with(
                    step("create a with a finalizer", "POST", "assetscans"),
                    JSON,
                    SCAN_A_FINALIZED,
                ),
                &["/metadata/generation"],
            ),
            reading(
                step("delete a", "DELETE", "assetscans/a"),
                &["/metadata/generation", "/metadata/finalizers"],
            ),
            reading(
                step("delete a again", "DELETE", "assetscans/a"),
                &["/metadata/generation"],
            ),
            reading(
                with(
                    step("remove the last finalizer", "PATCH", "assetscans/a"),
                    MERGE,
                    DROP_FINALIZERS,
                ),
                &["/metadata/finalizers"],
            ),
            step("read a", "GET", "assetscans/a"),
        ],
    },
    Probe {
        name: "version_match_without_version_is_invalid",
        steps: &[
            step(
                "list with resourceVersionMatch only",
                "GET",
                "assetscans?resourceVersionMatch=NotOlderThan",
            ),
            reading(
                step(
                    "list with both",
                    "GET",
                    "assetscans?resourceVersion=0&resourceVersionMatch=NotOlderThan",
                ),
                &["/kind"],
            ),
        ],
    },
    Probe {
        name: "dry_run_takes_only_all",
        steps: &[
            with(
                step(
                    "create with dryRun=Bogus",
                    "POST",
                    "assetscans?dryRun=Bogus",
                ),
                JSON,
                SCAN_A,
            ),
            reading(
                with(
                    step("create with dryRun=All", "POST", "assetscans?dryRun=All"),
                    JSON,
                    SCAN_A,
                ),
                &["/metadata/name"],
            ),
            step("read a", "GET", "assetscans/a"),
        ],
    },
    Probe {
        name: "lists_from_the_watch_cache_ignore_limit",
        steps: &[
            create_a(),
            with(
                step("create b", "POST", "assetscans"),
                JSON,
                r#"{"apiVersion":"example.com/v1","kind":"AssetScan","metadata":{"name":"b"},"spec":{"target":{"host":"example.org"}}}"#,
            ),
            with(
                step("create c", "POST", "assetscans"),
                JSON,
                r#"{"apiVersion":"example.com/v1","kind":"AssetScan","metadata":{"name":"c"},"spec":{"target":{"host":"example.org"}}}"#,
            ),
            reading(
                step(
                    "list from the cache, limit 1",
                    "GET",
                    "assetscans?resourceVersion=0&limit=1",
                ),
                &["/items/length", "/metadata/continue?"],
            ),
            reading(
                step("list, limit 1", "GET", "assetscans?limit=1"),
                &["/items/length", "/metadata/continue?"],
            ),
        ],
    },
    Probe {
        name: "event_notes_are_immutable",
        steps: &[
            with(
                step(
                    "create an event",
                    "POST",
                    "/apis/events.k8s.io/v1/namespaces/{ns}/events",
                ),
                JSON,
                r#"{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"scan.1"},"eventTime":"2026-01-01T00:00:00.000000Z","reportingController":"example.com/assetscan","reportingInstance":"pod-1","action":"Scan","reason":"HighRiskFound","type":"Warning","note":"CVE-2026-0001","regarding":{"kind":"AssetScan","name":"web","namespace":"{ns}"}}"#,
            ),
            with(
                step(
                    "change its note",
                    "PATCH",
                    "/apis/events.k8s.io/v1/namespaces/{ns}/events/scan.1",
                ),
                MERGE,
                r#"{"note":"changed"}"#,
            ),
            reading(
                with(
                    step(
                        "change its series",
                        "PATCH",
                        "/apis/events.k8s.io/v1/namespaces/{ns}/events/scan.1",
                    ),
                    MERGE,
                    r#"{"series":{"count":2,"lastObservedTime":"2026-01-01T00:00:05.000000Z"}}"#,
                ),
                &["/note", "/series/count"],
            ),
        ],
    },
    Probe {
        name: "a_transition_rule_is_not_ratcheted_and_reports_its_field_and_reason",
        steps: &[
            with(
                step(
                    "create a counter",
                    "POST",
                    "/apis/example.com/v1/namespaces/{ns}/counters",
                ),
                JSON,
                r#"{"apiVersion":"example.com/v1","kind":"Counter","metadata":{"name":"c"},"spec":{"major":5,"minor":3}}"#,
            ),
            with(
                step(
                    "move it backwards",
                    "PATCH",
                    "/apis/example.com/v1/namespaces/{ns}/counters/c",
                ),
                MERGE,
                r#"{"spec":{"minor":2}}"#,
            ),
            reading(
                with(
                    step(
                        "move it forwards",
                        "PATCH",
                        "/apis/example.com/v1/namespaces/{ns}/counters/c",
                    ),
                    MERGE,
                    r#"{"spec":{"minor":4}}"#,
                ),
                &["/spec"],
            ),
        ],
    },
    Probe {
        name: "a_cluster_scoped_object_takes_no_namespace",
        steps: &[
            reading(
                with(
                    step(
                        "create a tag naming a namespace",
                        "POST",
                        "/apis/example.com/v1/tags",
                    ),
                    JSON,
                    r#"{"apiVersion":"example.com/v1","kind":"Tag","metadata":{"name":"{ns}-t","namespace":"{ns}"},"spec":{"text":"x"}}"#,
                ),
                &["/metadata/name", "/metadata/namespace", "/spec"],
            ),
            // `/kind`: the real server answers a text page here, not a
            // Status.
            reading(
                step(
                    "read it under a namespace",
                    "GET",
                    "/apis/example.com/v1/namespaces/{ns}/tags/{ns}-t",
                ),
                &["/kind"],
            ),
            reading(
                step("read it", "GET", "/apis/example.com/v1/tags/{ns}-t"),
                &["/metadata/name", "/metadata/namespace"],
            ),
            reading(
                step("delete it", "DELETE", "/apis/example.com/v1/tags/{ns}-t"),
                &["/metadata/name"],
            ),
        ],
    },
];
