//! A real cluster made ready for the scenarios, and left as it was found.
//!
//! The run creates, and records in its [`Ledger`]: the CRDs when they are
//! absent, a namespace of its own (`assetscan-e2e-<random>`), and in it the
//! chart's ServiceAccount, Role and RoleBinding, rendered by `helm
//! template` with that namespace as `watchNamespace` (so nothing
//! cluster-scoped but the metrics ClusterRoles). The operator runs with a
//! token of that ServiceAccount, never with the caller's credentials. A
//! scenario that needs one operator for several namespaces adds, through
//! [`install_cluster_wide`], a second namespace and the chart's
//! cluster-wide install (a ClusterRole and ClusterRoleBinding named after
//! the run), recorded in the same ledger. At the end the namespaces go
//! (and with them what the scenarios made), then the cluster-scoped RBAC
//! and the CRDs the run installed; the run never deletes what it did not
//! create.

use crate::backend::GarbageCollector;
use crate::metrics_kit::{self, cluster_api};
use assetscan_operator::kubernetes::crd::{AssetScan, AssetScanReport, ClusterNotificationChannel};
use assetscan_operator::kubernetes::rbac::{ApiAccess, METRICS_ACCESS, OPERATOR_ACCESS};
use assetscan_testkit::emulator::read_crd_dir;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Why the run could not start, or stopped: each is one line for the user.
#[derive(Debug, thiserror::Error)]
pub enum E2eError {
    #[error(
        "no cluster given: set KUBECONFIG or pass --kubeconfig (`make test` runs these scenarios on the API emulator)"
    )]
    NoCluster,
    #[error("cannot read the kubeconfig {path}: {reason}")]
    Kubeconfig { path: PathBuf, reason: String },
    #[error("no cluster reachable at {server}: {reason}")]
    Unreachable { server: String, reason: String },
    #[error("the cluster runs Kubernetes {version}; the operator needs 1.28 or later")]
    TooOld { version: String },
    #[error("cannot {what}: {reason}")]
    Install { what: String, reason: String },
    #[error("helm template of the chart's RBAC failed: {0}")]
    Helm(String),
    #[error("{what}: {reason}")]
    Local { what: &'static str, reason: String },
    #[error(
        "the chart renders {kind} {name}, which the run does not install (for a namespaced release: namespaced RBAC and the metrics ClusterRoles; for a cluster-wide one: its ServiceAccount, ClusterRole and ClusterRoleBinding)"
    )]
    ClusterScoped { kind: String, name: String },
    #[error(
        "the chart's RBAC is insufficient: its ServiceAccount may not {missing} in namespace {namespace} (src/kubernetes/rbac.rs lists what the operator calls)"
    )]
    Rbac { namespace: String, missing: String },
}

fn install(what: impl Into<String>) -> impl FnOnce(kube::Error) -> E2eError {
    let what = what.into();
    move |e| E2eError::Install {
        what,
        reason: e.to_string(),
    }
}

fn local<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> E2eError {
    move |e| E2eError::Local {
        what,
        reason: e.to_string(),
    }
}

/// What the run created, removed at its end in reverse order, and nothing
/// else. Shared with the scenarios (through [`Prepared`]), which add to it
/// as they create; on the emulator a scenario's ledger goes with it.
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    crds: Vec<String>,
    crds_found: Vec<String>,
    namespaces: Vec<String>,
    /// `(kind, name)` of the chart's objects, inside the first namespace.
    rbac: Vec<(String, String)>,
    /// `(kind, name)` of the chart's ClusterRoles and bindings.
    cluster_rbac: Vec<(String, String)>,
}

/// Adds to `ledger` what was just created.
fn record(ledger: &Mutex<Ledger>, entry: impl FnOnce(&mut Ledger)) {
    entry(&mut ledger.lock().unwrap());
}

/// The cluster the run was given, through the caller's (admin) kubeconfig.
pub struct Cluster {
    pub admin: Client,
    kubeconfig: Kubeconfig,
    pub server: String,
    pub version: String,
    pub ledger: Arc<Mutex<Ledger>>,
}

/// What the scenarios get of a prepared cluster.
pub struct Prepared {
    pub namespace: String,
    /// The caller's client: the scenarios act as a user with it.
    pub admin: Client,
    /// The caller's kubeconfig, for more ServiceAccounts' tokens.
    pub kubeconfig: Kubeconfig,
    /// The run's ledger: what a scenario creates beyond the namespace is
    /// recorded there, and removed at the end.
    pub ledger: Arc<Mutex<Ledger>>,
    /// The operator's ServiceAccount: exactly the chart's Role.
    pub operator: Client,
    pub operator_kubeconfig: PathBuf,
    pub garbage_collector: GarbageCollector,
    _dir: tempfile::TempDir,
}

/// How long the cluster gets to finish a deletion (a namespace waits for
/// its namespace controller, a CRD for its instances to go).
const REMOVAL: Duration = Duration::from_secs(180);

impl Cluster {
    /// Reads the kubeconfig and asks the API server its version.
    pub async fn connect(path: &Path) -> Result<Cluster, E2eError> {
        let unreadable = |reason: String| E2eError::Kubeconfig {
            path: path.to_path_buf(),
            reason,
        };
        let kubeconfig = Kubeconfig::read_from(path).map_err(|e| unreadable(e.to_string()))?;
        let mut config =
            Config::from_custom_kubeconfig(kubeconfig.clone(), &KubeConfigOptions::default())
                .await
                .map_err(|e| unreadable(e.to_string()))?;
        let server = config.cluster_url.to_string();
        config.connect_timeout = Some(Duration::from_secs(5));
        config.read_timeout = Some(Duration::from_secs(30));
        let admin = Client::try_from(config).map_err(|e| unreadable(e.to_string()))?;
        let info = tokio::time::timeout(Duration::from_secs(15), admin.apiserver_version())
            .await
            .map_err(|_| "no answer within 15 s".to_owned())
            .and_then(|r| r.map_err(|e| e.to_string()))
            .map_err(|reason| E2eError::Unreachable {
                server: server.clone(),
                reason,
            })?;
        let minor: u32 = info
            .minor
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap_or(0);
        if info.major != "1" || minor < 28 {
            return Err(E2eError::TooOld {
                version: info.git_version,
            });
        }
        Ok(Cluster {
            admin,
            kubeconfig,
            server,
            version: info.git_version,
            ledger: Arc::default(),
        })
    }

    /// CRDs, namespace, the chart's RBAC and the operator's token; then a
    /// check that the token may make every call the operator makes.
    pub async fn prepare(&mut self, gc: GarbageCollector) -> Result<Prepared, E2eError> {
        let dir = assetscan_testkit::tools::repo().join("crds");
        self.install_crds(read_crd_dir(&dir).map_err(local("read crds/"))?)
            .await?;
        let namespace = create_namespace(&self.admin, &self.ledger).await?;
        let account = self.install_chart_rbac(&namespace).await?;
        let dir = tempfile::Builder::new()
            .prefix("asc-e2e-")
            .tempdir()
            .map_err(local("a temporary directory"))?;
        let operator_kubeconfig = dir.path().join("operator.kubeconfig");
        let operator = token_client(
            &self.admin,
            &self.kubeconfig,
            &namespace,
            &account,
            &operator_kubeconfig,
        )
        .await?;
        check_access(&Asker::Itself(&operator), &[&namespace], METRICS_ACCESS).await?;
        Ok(Prepared {
            namespace,
            admin: self.admin.clone(),
            kubeconfig: self.kubeconfig.clone(),
            ledger: self.ledger.clone(),
            operator,
            operator_kubeconfig,
            garbage_collector: gc,
            _dir: dir,
        })
    }

    /// Creates those of `crds` the cluster does not have, and waits until
    /// they are served; the others are left as found.
    pub async fn install_crds(&mut self, crds: Vec<Value>) -> Result<(), E2eError> {
        let api = Api::<CustomResourceDefinition>::all(self.admin.clone());
        for crd in crds {
            let crd: CustomResourceDefinition =
                serde_json::from_value(crd).map_err(local("read a CRD"))?;
            let name = crd.name_any();
            if api
                .get_opt(&name)
                .await
                .map_err(install(format!("read CRD {name}")))?
                .is_some()
            {
                record(&self.ledger, |l| l.crds_found.push(name));
                continue;
            }
            api.create(&PostParams::default(), &crd)
                .await
                .map_err(install(format!("create CRD {name}")))?;
            record(&self.ledger, |l| l.crds.push(name.clone()));
            wait_established(&api, &name).await?;
        }
        Ok(())
    }

    /// The chart's ServiceAccount, Role and RoleBinding for a release
    /// watching `namespace`: its ServiceAccount's name.
    async fn install_chart_rbac(&mut self, namespace: &str) -> Result<String, E2eError> {
        let docs = chart_rbac(namespace)?;
        create_rendered(&self.admin, &self.ledger, namespace, docs, |kind, name| {
            let namespaced = matches!(kind, "ServiceAccount" | "Role" | "RoleBinding");
            namespaced || name.contains("-metrics-")
        })
        .await
    }

    /// Between scenarios: every AssetScan and report of the namespace
    /// removed (the operator processes of the last scenario are gone, so
    /// finalizers are dropped here), and the cluster channels a scenario
    /// of the namespace left (named `<namespace>-…`).
    pub async fn sweep(&self, namespace: &str) -> Result<(), E2eError> {
        let scans = Api::<AssetScan>::namespaced(self.admin.clone(), namespace);
        for obj in scans
            .list(&ListParams::default())
            .await
            .map_err(install("list AssetScans"))?
        {
            if !obj.finalizers().is_empty() {
                let patch = json!({"metadata": {"finalizers": null}});
                let _ = scans
                    .patch(
                        &obj.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await;
            }
        }
        let all = ListParams::default();
        let delete = DeleteParams::background();
        let reports = Api::<AssetScanReport>::namespaced(self.admin.clone(), namespace);
        scans
            .delete_collection(&delete, &all)
            .await
            .map_err(install("delete AssetScans"))?;
        reports
            .delete_collection(&delete, &all)
            .await
            .map_err(install("delete reports"))?;
        let channels = Api::<ClusterNotificationChannel>::all(self.admin.clone());
        let left = (channels.list(&all).await).map_err(install("list the cluster channels"))?;
        let ours = format!("{namespace}-");
        for channel in left
            .items
            .iter()
            .filter(|c| c.name_any().starts_with(&ours))
        {
            channels
                .delete(&channel.name_any(), &delete)
                .await
                .map_err(install("delete a scenario's cluster channel"))?;
        }
        Ok(())
    }

    /// Removes what the run created, and lists, read back from the
    /// cluster, what is left of it and what it found there.
    pub async fn clean_up(&self) -> Vec<String> {
        let ledger = self.ledger.lock().unwrap().clone();
        let mut lines = Vec::new();
        let namespaces = Api::<Namespace>::all(self.admin.clone());
        for ns in &ledger.namespaces {
            // The scenarios' objects; a run without the operator's CRDs has none.
            let _ = self.sweep(ns).await;
            let _ = namespaces.delete(ns, &DeleteParams::default()).await;
        }
        for (i, ns) in ledger.namespaces.iter().enumerate() {
            let left = gone_within(&namespaces, ns).await;
            lines.push(format!("namespace {ns}: {}", said(left)));
            let rbac = if i == 0 { &ledger.rbac[..] } else { &[] };
            for (kind, name) in rbac {
                let doc = json!({"apiVersion": rbac_api_version(kind), "kind": kind});
                let left = dynamic(&self.admin, ns, &doc).get_opt(name).await;
                let state = match left {
                    Ok(None) => "gone".to_owned(),
                    other => format!("LEFT BEHIND ({other:?})"),
                };
                lines.push(format!("{kind} {ns}/{name}: {state}"));
            }
        }
        for (kind, name) in ledger.cluster_rbac.iter().rev() {
            let doc = json!({"apiVersion": rbac_api_version(kind), "kind": kind});
            let api = cluster_api(&self.admin, &doc);
            let _ = api.delete(name, &DeleteParams::default()).await;
            let state = match api.get_opt(name).await {
                Ok(None) => "gone".to_owned(),
                other => format!("LEFT BEHIND ({other:?})"),
            };
            lines.push(format!("{kind} {name}: {state}"));
        }
        let crds = Api::<CustomResourceDefinition>::all(self.admin.clone());
        for name in ledger.crds.iter().rev() {
            let _ = crds.delete(name, &DeleteParams::default()).await;
            let left = gone_within(&crds, name).await;
            lines.push(format!(
                "customresourcedefinition {name} (installed by the run): {}",
                said(left)
            ));
        }
        for name in &ledger.crds_found {
            lines.push(format!(
                "customresourcedefinition {name}: there before the run, left as found"
            ));
        }
        lines
    }
}

/// The chart's RBAC for a release in `namespace` that watches only it
/// ([`render_rbac`]), with the metrics ClusterRoles, the reader bound to
/// `metrics_kit::READER` there.
fn chart_rbac(namespace: &str) -> Result<Vec<Value>, E2eError> {
    let watch = format!("watchNamespace={namespace}");
    let (reader, reader_namespace) = (
        format!(
            "metrics.reader.serviceAccounts[0].name={}",
            metrics_kit::READER
        ),
        format!("metrics.reader.serviceAccounts[0].namespace={namespace}"),
    );
    let flags = [
        "--set",
        &watch,
        "--set",
        &reader,
        "--set",
        &reader_namespace,
        "--show-only",
        "templates/metrics-rbac.yaml",
    ];
    render_rbac(namespace, namespace, &flags)
}

/// `helm template` of the chart's ServiceAccount and RBAC templates for
/// `release` in `namespace`, with `more` flags, without the aggregated
/// ClusterRoles (which only extend the built-in user roles).
fn render_rbac(release: &str, namespace: &str, more: &[&str]) -> Result<Vec<Value>, E2eError> {
    let chart = assetscan_testkit::tools::repo().join("charts/assetscan-operator");
    let mut flags = vec![
        "--set",
        "rbac.aggregateToDefaultRoles=false",
        // Only the RBAC is used: the operator runs out of the cluster.
        "--set",
        "redis.allowUnauthenticated=true",
        "--show-only",
        "templates/serviceaccount.yaml",
        "--show-only",
        "templates/rbac.yaml",
    ];
    flags.extend_from_slice(more);
    assetscan_testkit::tools::template(release, &chart, namespace, &flags).map_err(E2eError::Helm)
}

fn rbac_api_version(kind: &str) -> &'static str {
    if kind == "ServiceAccount" {
        "v1"
    } else {
        "rbac.authorization.k8s.io/v1"
    }
}

/// The namespaced API of a rendered document's kind.
fn dynamic(client: &Client, namespace: &str, doc: &Value) -> Api<DynamicObject> {
    let api_version = doc["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = doc["kind"].as_str().unwrap_or_default();
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

/// Whom the API server's authorizer is asked about.
enum Asker<'a> {
    /// The client's own credentials (SelfSubjectAccessReview).
    Itself(&'a Client),
    /// A ServiceAccount, asked about by an admin (SubjectAccessReview, which
    /// the emulator answers too).
    Account {
        admin: &'a Client,
        namespace: &'a str,
        name: &'a str,
    },
}

impl Asker<'_> {
    async fn allows(&self, attributes: ResourceAttributes) -> kube::Result<bool> {
        let post = PostParams::default();
        match self {
            Asker::Itself(client) => {
                let review = SelfSubjectAccessReview {
                    spec: SelfSubjectAccessReviewSpec {
                        resource_attributes: Some(attributes),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                let api = Api::<SelfSubjectAccessReview>::all((*client).clone());
                let answer = api.create(&post, &review).await?;
                Ok(answer.status.is_some_and(|s| s.allowed))
            }
            Asker::Account {
                admin,
                namespace,
                name,
            } => {
                let review = SubjectAccessReview {
                    spec: SubjectAccessReviewSpec {
                        resource_attributes: Some(attributes),
                        user: Some(format!("system:serviceaccount:{namespace}:{name}")),
                        groups: Some(vec![
                            "system:serviceaccounts".into(),
                            format!("system:serviceaccounts:{namespace}"),
                            "system:authenticated".into(),
                        ]),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                let api = Api::<SubjectAccessReview>::all((*admin).clone());
                let answer = api.create(&post, &review).await?;
                Ok(answer.status.is_some_and(|s| s.allowed))
            }
        }
    }
}

/// Asks the authorizer whether `asker` has every access
/// src/kubernetes/rbac.rs lists for the operator in each of `namespaces`,
/// and `cluster_wide` (the metrics reviews) for the cluster. A new Role
/// takes a moment to reach the authorizer: a denial counts once it persists
/// for 10 s.
async fn check_access(
    asker: &Asker<'_>,
    namespaces: &[&str],
    cluster_wide: &[ApiAccess],
) -> Result<(), E2eError> {
    let scoped = namespaces
        .iter()
        .flat_map(|ns| OPERATOR_ACCESS.iter().map(|a| (a, Some(ns.to_string()))));
    let cluster_wide = cluster_wide.iter().map(|a| (a, None));
    for (access, scope) in scoped.chain(cluster_wide) {
        let (resource, subresource) = match access.resource.split_once('/') {
            Some((r, s)) => (r, Some(s.to_owned())),
            None => (access.resource, None),
        };
        for verb in access.verbs {
            let attributes = ResourceAttributes {
                namespace: scope.clone(),
                group: Some(access.group.to_owned()),
                resource: Some(resource.to_owned()),
                subresource: subresource.clone(),
                verb: Some((*verb).to_owned()),
                ..Default::default()
            };
            let allowed = assetscan_testkit::wait::poll(Duration::from_secs(10), async || {
                match asker.allows(attributes.clone()).await {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(None),
                    Err(e) => Err(Some(e.to_string())),
                }
            })
            .await;
            match allowed {
                Ok(()) => {}
                Err(Some(reason)) => {
                    let what = "ask the API server for the operator's access".to_owned();
                    return Err(E2eError::Install { what, reason });
                }
                Err(None) => {
                    let group = if access.group.is_empty() {
                        "core"
                    } else {
                        access.group
                    };
                    return Err(E2eError::Rbac {
                        namespace: scope.unwrap_or_else(|| "(cluster-wide)".into()),
                        missing: format!("{verb} {} ({group})", access.resource),
                    });
                }
            }
        }
    }
    Ok(())
}

async fn wait_established(api: &Api<CustomResourceDefinition>, name: &str) -> Result<(), E2eError> {
    let established = assetscan_testkit::wait::poll(Duration::from_secs(30), async || {
        let crd = api.get(name).await.map_err(|_| ())?;
        let conditions = crd.status.and_then(|s| s.conditions).unwrap_or_default();
        conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(())
            .ok_or(())
    })
    .await;
    established.map_err(|()| E2eError::Install {
        what: format!("use CRD {name}"),
        reason: "not Established within 30 s".into(),
    })
}

/// Waits until the cluster no longer has `name`: `None` when gone, else
/// what is still there.
async fn gone_within<K>(api: &Api<K>, name: &str) -> Option<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let result = assetscan_testkit::wait::poll(REMOVAL, async || match api.get_opt(name).await {
        Ok(None) => Ok(()),
        Ok(Some(obj)) => Err(format!(
            "still there, deleting since {:?}",
            obj.meta().deletion_timestamp
        )),
        Err(e) => Err(e.to_string()),
    })
    .await;
    result.err()
}

fn said(left: Option<String>) -> String {
    match left {
        None => "deleted, gone".to_owned(),
        Some(what) => format!("LEFT BEHIND: {what}"),
    }
}

/// A namespace of the run's own, `assetscan-e2e-<random>`, recorded in `ledger`.
pub async fn create_namespace(admin: &Client, ledger: &Mutex<Ledger>) -> Result<String, E2eError> {
    let namespace = format!("assetscan-e2e-{:08x}", rand::random::<u32>());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {
        "name": namespace,
        "labels": {"app.kubernetes.io/managed-by": "assetscan-e2e"},
    }}))
    .map_err(local("the namespace object"))?;
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .map_err(install(format!("create namespace {namespace}")))?;
    record(ledger, |l| l.namespaces.push(namespace.clone()));
    Ok(namespace)
}

/// Creates the rendered `docs` (the namespaced ones in `namespace`), each
/// recorded in `ledger` once created; a kind and name `allowed` refuses
/// stops the install before it. The ServiceAccount's name.
async fn create_rendered(
    admin: &Client,
    ledger: &Mutex<Ledger>,
    namespace: &str,
    docs: Vec<Value>,
    allowed: impl Fn(&str, &str) -> bool,
) -> Result<String, E2eError> {
    let mut account = None;
    for doc in docs {
        let kind = doc["kind"].as_str().unwrap_or_default().to_owned();
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let cluster_scoped = matches!(kind.as_str(), "ClusterRole" | "ClusterRoleBinding");
        if !allowed(&kind, &name) {
            return Err(E2eError::ClusterScoped { kind, name });
        }
        let obj: DynamicObject =
            serde_json::from_value(doc.clone()).map_err(local("read the rendered chart"))?;
        let api = match cluster_scoped {
            true => cluster_api(admin, &doc),
            false => dynamic(admin, namespace, &doc),
        };
        api.create(&PostParams::default(), &obj)
            .await
            .map_err(install(format!("create {kind} {name}")))?;
        if kind == "ServiceAccount" {
            account = Some(name.clone());
        }
        record(ledger, |l| match cluster_scoped {
            true => l.cluster_rbac.push((kind, name)),
            false => l.rbac.push((kind, name)),
        });
    }
    account.ok_or_else(|| E2eError::Helm("it renders no ServiceAccount".into()))
}

/// The chart installed for every namespace, as one operator serving many
/// teams runs it: release `<last watched namespace>-tenants` in `namespace`
/// (one per call: two scenarios on one cluster install their own)
/// (`watchNamespace` empty, and `chart`'s flags), its ServiceAccount there
/// and its ClusterRole and ClusterRoleBinding (and the Roles `chart` asks
/// for there), named after the release, recorded in `ledger`;
/// then the API server's authorizer is asked whether the ServiceAccount may
/// make every call of the operator in each of `watched`. Writes a
/// kubeconfig with a token of it, for the server `kubeconfig` names, to
/// `path`.
pub async fn install_cluster_wide(
    admin: &Client,
    kubeconfig: &Kubeconfig,
    ledger: &Mutex<Ledger>,
    namespace: &str,
    watched: &[&str],
    chart: &[&str],
    path: &Path,
) -> Result<(), E2eError> {
    let release = format!("{}-tenants", watched.last().unwrap_or(&namespace));
    let flags = [&["--set", "watchNamespace="], chart].concat();
    let docs = render_rbac(&release, namespace, &flags)?;
    // Roles only in the release's namespace (rbac.secretNamespaces naming it).
    let account = create_rendered(admin, ledger, namespace, docs, |kind, _| {
        matches!(
            kind,
            "ServiceAccount" | "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding"
        )
    })
    .await?;
    token_client(admin, kubeconfig, namespace, &account, path).await?;
    let asker = Asker::Account {
        admin,
        namespace,
        name: &account,
    };
    check_access(&asker, watched, &[]).await
}

/// A token of the ServiceAccount, written into a kubeconfig for the same
/// server (and CA) as `kubeconfig`'s current context; and a client from it.
async fn token_client(
    admin: &Client,
    kubeconfig: &Kubeconfig,
    namespace: &str,
    account: &str,
    path: &Path,
) -> Result<Client, E2eError> {
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            audiences: None,
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let answered = Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .map_err(install(format!("create a token of {account}")))?;
    let token = answered.status.and_then(|s| s.token).unwrap_or_default();
    let text = serde_json::to_string_pretty(&token_kubeconfig(kubeconfig, namespace, &token)?)
        .unwrap_or_default();
    let what = "the operator's kubeconfig";
    std::fs::write(path, text).map_err(local(what))?;
    let parsed = Kubeconfig::read_from(path).map_err(local(what))?;
    let config = Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
        .await
        .map_err(local(what))?;
    Client::try_from(config).map_err(local(what))
}

/// `kc`'s current cluster entry with a user holding only `token`.
fn token_kubeconfig(kc: &Kubeconfig, namespace: &str, token: &str) -> Result<Value, E2eError> {
    let current = kc.current_context.clone().unwrap_or_default();
    let cluster_name = kc
        .contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .unwrap_or_default();
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .ok_or_else(|| E2eError::Kubeconfig {
            path: PathBuf::from("(current context)"),
            reason: format!("no cluster {cluster_name:?}"),
        })?;
    Ok(json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": cluster.cluster}],
        "users": [{"name": "operator", "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "operator", "namespace": namespace}}],
        "current-context": "e2e",
    }))
}
