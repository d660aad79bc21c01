//! The table of API behaviours the emulator must get right, each checked
//! through a real `kube::Client` the way the operator talks to a cluster.
//!
//! | behaviour                                  | test                                        |
//! |--------------------------------------------|---------------------------------------------|
//! | resourceVersion conflict, AlreadyExists    | `stale_resource_version_conflicts`          |
//! | concurrent patches of one object all kept  | `concurrent_patches_of_one_object_are_all_kept` |
//! | generation bump on spec changes only       | `generation_bumps_on_spec_changes_only`     |
//! | status subresource kept apart              | `status_is_kept_apart_from_the_rest`        |
//! | watch resume, bookmarks, 410               | `watch_resumes_from_a_version_and_expires`  |
//! | finalizer-blocked delete                   | `finalizers_block_deletion`                 |
//! | CEL on create and status transition        | `cel_rules_reject_create_and_transition`    |
//! | schema rejection with field path, pruning  | `schema_violations_name_the_field`          |
//! | list pagination (consistent snapshot, 410) | `pagination_is_a_consistent_snapshot`       |
//! | label and field selectors                  | `label_and_field_selectors`                 |
//! | fault injection                            | `fault_injection`, `watch_streams_can_be_ended_or_cut` |
//! | server-side apply ownership                | `server_side_apply_tracks_ownership`        |
//! | patch media types, JSON patch `test`       | `patch_types`                               |
//! | namespaces, generateName, CRDs at runtime  | `namespaces_and_generate_name`, `crd_created_through_the_api_is_served` |
//! | events.k8s.io and core events share objects| `events_are_one_storage_two_views`          |
//! | streaming lists (`sendInitialEvents`)      | `streaming_list_watch_ends_initial_events_with_a_bookmark` |
//! | PartialObjectMetadata responses            | `metadata_only_representations`             |
//! | the operator's own `crds/` load            | `the_operators_crds_load`                   |
//! | shutdown                                   | `shutdown_stops_serving`                    |
//! | garbage collection of dependents           | `owners_take_their_dependents_with_them`, `orphan_and_foreground_propagation` |
//! | API server outage                          | `outage_refuses_requests_and_keeps_the_data`, `outage_from_the_control_path_ends_by_itself` |
//! | request counters                           | `requests_are_counted_by_resource_verb_and_outcome` |

use std::time::{Duration, Instant};

use assetscan_testkit::emulator::{
    Availability, CodeClass, Emulator, EmulatorOptions, EventType, Fault, Operation, Verb,
    parse_manifests,
};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchParams,
};
use kube::core::WatchEvent;
use serde_json::{Value, json};

#[path = "../common/mod.rs"]
mod common;
use common::{
    CRD, api_error, ar, assert_refusal, create_scan, delete_marked, merge_patch,
    merge_patch_status, scan, scan_event,
};

async fn start() -> (Emulator, Api<DynamicObject>) {
    common::start(EmulatorOptions {
        namespaces: vec!["other".into()],
        bookmark_interval: Duration::from_millis(200),
        ..Default::default()
    })
    .await
}

fn rv(obj: &DynamicObject) -> String {
    obj.metadata
        .resource_version
        .clone()
        .expect("resourceVersion")
}

fn generation(obj: &DynamicObject) -> i64 {
    obj.metadata.generation.expect("generation")
}

mod admission;
mod lifecycle;
mod reads;
mod requests;
mod watches;
mod writes;
