//! A Kubernetes API server emulator, faithful enough to run the real
//! controller, `kubectl` and kube-rs clients against.
//!
//! No kube-apiserver can be installed on the machines this project is built
//! and tested on, so this is the one stand-in — for the API server and the
//! garbage collector of kube-controller-manager (there is no scheduler,
//! kubelet or admission webhook). What it does emulate, it emulates the way
//! kube-apiserver v1.28 does, with the same status codes, `reason`s and
//! message wording, so that tests passing here pass against a real cluster:
//!
//! * discovery, OpenAPI v3 documents, JSON and server-side `Table` output;
//! * get / list (label and field selectors, `limit`/`continue`,
//!   `resourceVersion` + `resourceVersionMatch`) / watch (resume from a
//!   resourceVersion, bookmarks, `sendInitialEvents`, `410 Expired`);
//! * the request options (`dryRun`, `fieldManager`, `fieldValidation`,
//!   `force`, `propagationPolicy`, `resourceVersionMatch`) checked first,
//!   with `422` on the options kind as the real server answers;
//! * create (`generateName`, namespace defaulting, `409 AlreadyExists`),
//!   replace (`resourceVersion` required for custom resources and CRDs,
//!   `409 Conflict` when stale or when the body's UID is not the stored
//!   one, `404` when missing), JSON merge patch, JSON patch (RFC 6902),
//!   server-side apply with field managers and conflicts, strategic merge
//!   patch (rejected with 415 for custom resources), `dryRun=All`;
//! * delete with finalizers, `deletionTimestamp` and a `generation` bump,
//!   a `Status` answer for objects removed at once, and the garbage
//!   collector following `ownerReferences` (background, foreground and
//!   orphan propagation; see `gc`);
//! * the status subresource kept apart from the rest of the object (schema
//!   errors of status writes named relative to `status`, as the real server
//!   names them), `metadata.generation` bumped on spec changes only,
//!   `managedFields`, empty metadata fields (`finalizers: []`) dropped;
//! * CRDs from YAML files or created through the API; pruning of unknown
//!   fields, schema defaults, OpenAPI v3 validation and
//!   `x-kubernetes-validations` CEL rules (transition rules with `oldSelf`
//!   included) evaluated by `kube::core::cel`;
//! * a history of every accepted write per object, request counters by
//!   resource, verb and outcome (`counters`, also at `/emulator/requests`),
//!   and fault injection, outages included (`faults`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use assetscan_testkit::emulator::{Emulator, EmulatorOptions};
//! let emu = Emulator::start(EmulatorOptions { crd_dir: Some("crds".into()), ..Default::default() }).await?;
//! let client = emu.client()?;              // kube::Client for the emulator
//! emu.write_kubeconfig("target/emulator.kubeconfig".as_ref())?; // for kubectl
//! # let _ = client; Ok(()) }
//! ```
//!
//! # Not emulated
//!
//! * Authentication and authorization of the emulator's own callers (every
//!   request is served), admission webhooks, API priority and fairness
//!   (429s only come from fault injection), audit. What it answers other
//!   servers that delegate to it is emulated (see `access`): ServiceAccount
//!   tokens from the TokenRequest subresource, TokenReview, and
//!   SubjectAccessReview evaluated on ClusterRoles and ClusterRoleBindings
//!   (no Roles, RoleBindings or aggregated roles; the reviews are not
//!   listed in discovery).
//! * Controllers: no scheduler or kubelet. The garbage collector finds
//!   owners by uid alone and ignores `blockOwnerDeletion` (see `gc`). The
//!   namespace controller is emulated (deleting a namespace deletes its
//!   contents), and so is CRD cleanup (deleting a CRD deletes its objects at
//!   once, without waiting for their finalizers).
//! * Built-in kinds other than Namespaces, ConfigMaps, Secrets, core/v1 and
//!   events.k8s.io/v1 Events (one storage, two representations), Leases,
//!   CustomResourceDefinitions, ServiceAccounts, ClusterRoles and
//!   ClusterRoleBindings. Built-ins are not schema-validated, except
//!   for the events.k8s.io/v1 Event rules (required fields on create,
//!   immutable fields on update).
//! * Strategic merge patch on built-ins is applied as a JSON merge patch (no
//!   `$patch` directives or merge keys). A PUT never creates (core Events
//!   would allow it on a real server).
//! * Validation ratcheting (unchanged invalid values pass an update) is
//!   applied as in v1.30, where it is on by default; streaming lists
//!   (`sendInitialEvents`) are served as with the WatchList gate on.
//! * CRD conversion webhooks (versions are converted by rewriting
//!   `apiVersion`, i.e. `strategy: None`), `scale` subresource,
//!   `x-kubernetes-validations` on list items are correlated with `oldSelf`
//!   by index, not by list-map key; string `format`s other than `date-time`
//!   are not checked; CEL cost limits are not enforced.
//! * Server-side apply: ownership follows structured-merge-diff for maps,
//!   list-maps, sets and atomic lists, but clients cannot overwrite
//!   `managedFields` themselves, and apply configurations are not checked
//!   against the schema beyond pruning.
//! * Protobuf and CBOR bodies (answered with 415): kubectl's imperative
//!   generators for built-ins (`kubectl create configmap|secret …`) send
//!   protobuf and fail; `kubectl apply -f` works for every kind. Aggregated
//!   discovery (clients fall back to the legacy documents), `/openapi/v2`
//!   (kubectl uses v3; `kubectl explain` shows little), `exec`/`logs`/
//!   `port-forward`, TLS.
//! * Lists with `resourceVersion=0` or `resourceVersionMatch=NotOlderThan`
//!   are served from the latest state (the watch cache; `limit` is ignored
//!   for `resourceVersion=0`, as the cache ignores it); `Exact`, a legacy
//!   version with `limit`, and `continue` use the change log.

// The modules in layers, from the ground up: a module imports from its own
// layer and the layers above it in this list, never from a later one, and
// no two modules import each other.
//
// Foundations: errors, JSON metadata helpers, request options, faults.
mod counters;
mod error;
mod faults;
mod kubeconfig;
mod manifests;
mod meta;
mod options;
// What is served and how objects are checked: schemas, resource types,
// built-ins, CRDs, the registry, selectors, tables, field ownership.
mod builtins;
mod crd;
mod discovery;
mod fieldmanager;
mod fieldset;
mod keys;
mod rbac;
mod registry;
mod resources;
mod schema;
mod schema_checks;
mod selectors;
mod table;
mod validation;
// Storage: the ownership graph, the store, the state behind its lock, and
// deleting a stored object with what follows from it.
mod owner_graph;
mod removal;
mod state;
mod store;
// The verbs, each over one parsed request.
mod apply;
mod body;
mod create;
mod deletion;
mod patch;
mod read;
mod request;
mod update;
mod watch;
// Serving: what the tasks share, the garbage collector, HTTP, and the
// reviews the API server answers for other servers.
mod access;
mod gc;
mod paths;
mod respond;
mod routes;
mod server;
mod shared;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;

pub use counters::{CodeClass, RequestCounts, RequestKey, Verb};
pub use error::{ApiError, EmulatorError, FieldError};
pub use faults::{Availability, Fault, Faults, FiredFault};
pub use manifests::{parse_manifests, read_crd_dir};
pub use store::{EventType, Operation, WriteRecord};

use keys::ObjKey;
use resources::ResourceType;
use shared::Shared;
use state::{Locked, State};
use watch::WatchSettings;

/// How to start an emulator. `Default` gives an ephemeral port, no CRDs and
/// the namespaces a new cluster has.
#[derive(Debug, Clone)]
pub struct EmulatorOptions {
    /// A directory of CRD manifests (`*.yaml`, `*.yml`, `*.json`; multi-document).
    pub crd_dir: Option<PathBuf>,
    /// CRDs given as objects (apiextensions.k8s.io/v1).
    pub crds: Vec<Value>,
    /// Port on 127.0.0.1; `None` picks a free one.
    pub port: Option<u16>,
    /// Namespaces to create besides `default`, `kube-system`, `kube-public`, `kube-node-lease`.
    pub namespaces: Vec<String>,
    /// How many changes the watch/list change log keeps; older resourceVersions answer 410.
    pub watch_history: usize,
    /// Keep every accepted write of every object for [`Emulator::history`]
    /// (tests read it); off for runs with very many objects, whose old
    /// versions would otherwise all stay in memory.
    pub write_history: bool,
    /// Interval of watch bookmarks (for clients that allow them).
    pub bookmark_interval: Duration,
    /// Watch duration when the client sends no `timeoutSeconds`.
    pub default_watch_timeout: Duration,
}

impl Default for EmulatorOptions {
    fn default() -> Self {
        Self {
            crd_dir: None,
            crds: Vec::new(),
            port: None,
            namespaces: Vec::new(),
            watch_history: 10_000,
            write_history: true,
            bookmark_interval: Duration::from_secs(5),
            default_watch_timeout: Duration::from_secs(1800),
        }
    }
}

/// A running emulator. Dropping it stops the server.
pub struct Emulator {
    shared: Arc<Shared>,
    url: String,
    port: u16,
    stop: tokio::sync::watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Emulator {
    /// Starts serving on 127.0.0.1, with the given CRDs registered.
    pub async fn start(options: EmulatorOptions) -> Result<Self, EmulatorError> {
        let state = seeded_state(&options)?;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", options.port.unwrap_or(0)))
            .await
            .map_err(EmulatorError::Bind)?;
        let addr = listener.local_addr().map_err(EmulatorError::Bind)?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let gc_wake = state.store.graph().wake();
        let shared = Arc::new(Shared {
            state: parking_lot::Mutex::new(state),
            faults: Faults::new(),
            watch: WatchSettings {
                bookmark_interval: options.bookmark_interval,
                default_timeout: options.default_watch_timeout,
            },
            shutdown: stopped.clone(),
            open_watches: Arc::new(AtomicUsize::new(0)),
            expired_watches: AtomicUsize::new(0),
            address: addr.to_string(),
            requests: Default::default(),
        });
        tokio::spawn(gc::run(shared.clone(), gc_wake, stopped.clone()));
        let task = tokio::spawn(server::serve(shared.clone(), listener, addr, stopped));
        Ok(Self {
            shared,
            url: format!("http://{addr}"),
            port: addr.port(),
            stop,
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A kubeconfig (YAML) for this emulator, default namespace `default`.
    pub fn kubeconfig_yaml(&self) -> String {
        kubeconfig::render(&self.url, "default")
    }

    /// Writes the kubeconfig for `kubectl` or `KUBECONFIG=… assetscan-operator run`.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), EmulatorError> {
        kubeconfig::write(path, &self.url, "default")
    }

    /// A `kube::Config` pointing at this emulator (namespace `default`).
    pub fn config(&self) -> Result<kube::Config, EmulatorError> {
        let uri = self
            .url
            .parse()
            .map_err(|e: axum::http::uri::InvalidUri| EmulatorError::Client(e.to_string()))?;
        Ok(kube::Config::new(uri))
    }

    /// A `kube::Client` for this emulator. Needs a Tokio runtime.
    pub fn client(&self) -> Result<kube::Client, EmulatorError> {
        kube::Client::try_from(self.config()?).map_err(|e| EmulatorError::Client(e.to_string()))
    }

    /// Fault injection for this emulator.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// How many requests were answered, by resource, verb and outcome.
    pub fn requests(&self) -> RequestCounts {
        self.shared.requests.snapshot()
    }

    /// Every accepted write of one object, oldest first, objects in the
    /// representation of `resource` — a kubectl-style name (`assetscans`,
    /// `AssetScan`, `events.events.k8s.io`, …). Empty when unknown.
    pub fn history(&self, resource: &str, namespace: Option<&str>, name: &str) -> Vec<WriteRecord> {
        let Some((state, rt, key)) = self.lookup(resource, namespace, name) else {
            return Vec::new();
        };
        state
            .store
            .history(&key)
            .into_iter()
            .map(|mut r| {
                r.object = Arc::new(rt.to_view(&r.object));
                r
            })
            .collect()
    }

    /// The current object, read directly (no HTTP); None when absent.
    pub fn object(&self, resource: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let (state, rt, key) = self.lookup(resource, namespace, name)?;
        state.store.get(&key).map(|o| rt.to_view(&o))
    }

    /// The state, locked, with the resource a kubectl-style name resolves
    /// to and the key of one of its objects (namespace `default` unless
    /// given, none for cluster-scoped resources).
    fn lookup(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<(Locked<'_>, Arc<ResourceType>, ObjKey)> {
        let state = self.shared.lock();
        let rt = state.registry.resolve(resource)?;
        let key = ObjKey {
            storage: rt.storage.clone(),
            namespace: if rt.namespaced {
                namespace.unwrap_or("default").to_string()
            } else {
                String::new()
            },
            name: name.to_string(),
        };
        Some((state, rt, key))
    }

    /// Registers a CRD at runtime, as `kubectl apply -f crd.yaml` would.
    pub fn add_crd(&self, crd: Value) -> Result<(), ApiError> {
        let mut state = self.shared.lock();
        let rt = state
            .registry
            .find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .ok_or(ApiError::UnknownResource)?;
        create::seed(&mut state, rt, crd).map(|_| ())
    }

    /// The latest resourceVersion issued.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().store.current_rv()
    }

    /// Drops the change log, like an etcd compaction: watches and `Exact`
    /// lists from any earlier resourceVersion now get `410 Gone`.
    pub fn compact(&self) {
        self.shared.lock().store.compact();
    }

    /// Number of watch streams currently open.
    pub fn open_watches(&self) -> usize {
        self.shared.open_watches.load(Ordering::SeqCst)
    }

    /// Watches that asked for a compacted resourceVersion and got `410 Expired`.
    pub fn expired_watches(&self) -> usize {
        self.shared.expired_watches.load(Ordering::SeqCst)
    }

    /// Stops serving and waits for the server task to end.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

const INITIAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

/// The state a new emulator starts with: the namespaces a new cluster has
/// (and those asked for), then the CRDs of `options`.
fn seeded_state(options: &EmulatorOptions) -> Result<State, EmulatorError> {
    let mut state = State::new(options.watch_history, options.write_history);
    let mut namespaces: Vec<String> = INITIAL_NAMESPACES.iter().map(|s| s.to_string()).collect();
    namespaces.extend(options.namespaces.iter().cloned());
    namespaces.dedup();
    let ns_type = builtin(&state, "", "namespaces")?;
    for ns in namespaces {
        let obj =
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        create::seed(&mut state, ns_type.clone(), obj).map_err(|e| EmulatorError::InvalidCrd {
            name: format!("namespace {ns}"),
            reason: e.to_string(),
        })?;
    }
    let mut crds = match &options.crd_dir {
        Some(dir) => read_crd_dir(dir)?,
        None => Vec::new(),
    };
    crds.extend(options.crds.iter().cloned());
    let crd_type = builtin(&state, "apiextensions.k8s.io", "customresourcedefinitions")?;
    for crd in crds {
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("<unnamed>")
            .to_string();
        create::seed(&mut state, crd_type.clone(), crd).map_err(|e| EmulatorError::InvalidCrd {
            name,
            reason: e.to_string(),
        })?;
    }
    Ok(state)
}

/// A built-in `v1` resource the emulator cannot start without.
fn builtin(state: &State, group: &str, plural: &str) -> Result<Arc<ResourceType>, EmulatorError> {
    state
        .registry
        .find(group, "v1", plural)
        .ok_or_else(|| EmulatorError::InvalidCrd {
            name: plural.to_string(),
            reason: "built-in resource missing".into(),
        })
}
