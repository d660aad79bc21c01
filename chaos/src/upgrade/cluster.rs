//! The API server of an upgrade run, through its kubeconfig alone, so that
//! the API emulator and a real cluster are driven the same way: CRDs
//! applied (created, or replaced as `kubectl replace` does), the run's
//! namespaces and AssetScans created and deleted, and every change of
//! their status recorded from a watch over all namespaces, in the order
//! the API server stored them, per `<namespace>/<name>` (one name is used
//! in both namespaces).

use super::scans::Scan;
use crate::ChaosError;
use crate::history::StatusWrite;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn kube(context: impl Into<String>) -> impl FnOnce(kube::Error) -> ChaosError {
    let context = context.into();
    move |source| ChaosError::Kube { context, source }
}

fn local(context: &str, e: impl std::error::Error + Send + Sync + 'static) -> ChaosError {
    ChaosError::Io {
        context: context.to_owned(),
        source: std::io::Error::other(e),
    }
}

/// How long a namespace an earlier run left terminating may take to go.
const TERMINATING: Duration = Duration::from_secs(180);

/// Waits until the namespace `name` of `uid` is gone, for [`TERMINATING`]
/// at most.
async fn gone(api: &Api<Namespace>, name: &str, uid: &str) -> Result<(), ChaosError> {
    let deleted = kube::runtime::wait::await_condition(
        api.clone(),
        name,
        kube::runtime::wait::conditions::is_deleted(uid),
    );
    match tokio::time::timeout(TERMINATING, deleted).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(local(&format!("wait for namespace {name} to go"), e)),
        Err(_) => Err(local(
            &format!("namespace {name}"),
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("still terminating after {} s", TERMINATING.as_secs()),
            ),
        )),
    }
}

/// Status writes per `<namespace>/<name>`, oldest first, as the watch saw
/// them.
type Recorded = Arc<Mutex<BTreeMap<String, Vec<StatusWrite>>>>;

pub struct Cluster {
    client: Client,
    /// The AssetScans of every namespace, for the watch.
    all: Api<DynamicObject>,
    recorded: Recorded,
    watch: tokio::task::JoinHandle<()>,
}

impl Cluster {
    /// Connects with the kubeconfig at `path` and starts recording.
    pub async fn connect(path: &Path) -> Result<Cluster, ChaosError> {
        let kubeconfig = kube::config::Kubeconfig::read_from(path)
            .map_err(|e| local("read the kubeconfig", e))?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(|e| local("the kubeconfig", e))?;
        let client = Client::try_from(config).map_err(kube("a client"))?;
        let all = Api::all_with(client.clone(), &crate::objects::resource());
        Ok(Cluster {
            client,
            all,
            recorded: Arc::default(),
            watch: tokio::spawn(async {}),
        })
    }

    /// The client, for the server-side validation of the objects.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    fn scans(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &crate::objects::resource())
    }

    /// Creates those of `names` that do not exist; returns those it
    /// created (the run deletes them at its end, and no other). One still
    /// terminating (an earlier run's, deleted at its end: the namespace
    /// controller empties it in the background) is waited for first, or
    /// the AssetScans created in it would vanish with it.
    pub async fn ensure_namespaces(&self, names: &[&str]) -> Result<Vec<String>, ChaosError> {
        let api = Api::<Namespace>::all(self.client.clone());
        let mut created = Vec::new();
        for name in names {
            let found = api
                .get_opt(name)
                .await
                .map_err(kube(format!("read namespace {name}")))?;
            match found {
                Some(ns) if ns.metadata.deletion_timestamp.is_some() => {
                    gone(&api, name, &ns.uid().unwrap_or_default()).await?;
                }
                Some(_) => continue,
                None => {}
            }
            let namespace: Namespace = serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}
            }))
            .map_err(|e| local("a namespace", e))?;
            api.create(&PostParams::default(), &namespace)
                .await
                .map_err(kube(format!("create namespace {name}")))?;
            created.push((*name).to_owned());
        }
        Ok(created)
    }

    /// Asks for the deletion of each namespace (the API server finishes it
    /// in the background).
    pub async fn delete_namespaces(&self, names: &[String]) -> Result<(), ChaosError> {
        let api = Api::<Namespace>::all(self.client.clone());
        for name in names {
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(kube(format!("delete namespace {name}"))(e)),
            }
        }
        Ok(())
    }

    /// Creates or replaces each CRD, then waits until each is established.
    pub async fn apply_crds(&self, crds: &[Value]) -> Result<(), ChaosError> {
        let api = Api::<CustomResourceDefinition>::all(self.client.clone());
        for crd in crds {
            let mut crd: CustomResourceDefinition =
                serde_json::from_value(crd.clone()).map_err(|e| local("read a CRD", e))?;
            let name = crd.name_any();
            match api
                .get_opt(&name)
                .await
                .map_err(kube(format!("read CRD {name}")))?
            {
                Some(found) => {
                    crd.metadata.resource_version = found.metadata.resource_version;
                    api.replace(&name, &PostParams::default(), &crd)
                        .await
                        .map_err(kube(format!("replace CRD {name}")))?;
                }
                None => {
                    api.create(&PostParams::default(), &crd)
                        .await
                        .map_err(kube(format!("create CRD {name}")))?;
                }
            }
            self.wait_established(&api, &name).await?;
        }
        Ok(())
    }

    async fn wait_established(
        &self,
        api: &Api<CustomResourceDefinition>,
        name: &str,
    ) -> Result<(), ChaosError> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let crd = api
                .get(name)
                .await
                .map_err(kube(format!("read CRD {name}")))?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(ChaosError::GaveUp {
                    what: format!("CRD {name} established"),
                    attempts: 60,
                    last: "not Established".into(),
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Starts recording every change of an AssetScan's status (once the
    /// CRD is served).
    pub fn record(&mut self) {
        let recorded = self.recorded.clone();
        // Errors are retried with the watcher's backoff; they end no recording.
        let stream = watcher(self.all.clone(), watcher::Config::default()).default_backoff();
        self.watch.abort();
        self.watch = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                let (watcher::Event::Apply(object) | watcher::Event::InitApply(object)) =
                    (match event {
                        Ok(event) => event,
                        Err(_) => continue,
                    })
                else {
                    continue;
                };
                note(&recorded, &object);
            }
        });
    }

    /// Creates `scan`; `Err` with the API server's answer when it refuses
    /// it (a manifest of the previous release this CRD does not admit).
    pub async fn create(&self, scan: &Scan) -> Result<Result<(), String>, ChaosError> {
        let manifest: DynamicObject = serde_json::from_value(scan.manifest())
            .map_err(|e| local("an AssetScan manifest", e))?;
        let api = self.scans(scan.namespace);
        let mut last = String::new();
        for _ in 0..30 {
            match api.create(&PostParams::default(), &manifest).await {
                Ok(_) => return Ok(Ok(())),
                Err(kube::Error::Api(e)) if e.code == 409 => return Ok(Ok(())),
                Err(kube::Error::Api(e)) if e.code == 422 || e.code == 400 => {
                    return Ok(Err(e.message));
                }
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Err(ChaosError::GaveUp {
            what: format!("create {}", scan.id()),
            attempts: 30,
            last,
        })
    }

    /// `<namespace>/<name>` of the AssetScans already in `namespaces`.
    pub async fn existing(&self, namespaces: &[&str]) -> Result<Vec<String>, ChaosError> {
        let mut ids = Vec::new();
        for namespace in namespaces {
            let list = self
                .scans(namespace)
                .list(&Default::default())
                .await
                .map_err(kube(format!("list the AssetScans of {namespace}")))?;
            ids.extend(
                list.items
                    .iter()
                    .map(|o| format!("{namespace}/{}", o.name_any())),
            );
        }
        Ok(ids)
    }

    /// The object as stored now.
    pub async fn get(&self, scan: &Scan) -> Result<Option<Value>, ChaosError> {
        let found = self
            .scans(scan.namespace)
            .get_opt(&scan.object.name)
            .await
            .map_err(kube(format!("read {}", scan.id())))?;
        found
            .map(|o| serde_json::to_value(o).map_err(|e| local("an AssetScan", e)))
            .transpose()
    }

    /// The status writes recorded for `scan`, oldest first.
    pub fn status_writes(&self, scan: &Scan) -> Vec<StatusWrite> {
        self.recorded
            .lock()
            .map(|r| r.get(&scan.id()).cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    /// Deletes `scans` (their finalizers need a replica) and waits up to a
    /// minute until they are gone; returns the ids of those still stored.
    pub async fn delete_all(&self, scans: &[Scan]) -> Result<Vec<String>, ChaosError> {
        for scan in scans {
            match self
                .scans(scan.namespace)
                .delete(&scan.object.name, &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(kube(format!("delete {}", scan.id()))(e)),
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut left = Vec::new();
        for scan in scans {
            while self.get(scan).await?.is_some() {
                if Instant::now() > deadline {
                    left.push(scan.id());
                    break;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        Ok(left)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.watch.abort();
    }
}

/// Records `object`'s status when it differs from the last one recorded.
fn note(recorded: &Recorded, object: &DynamicObject) {
    let Some(status) = object.data.get("status").filter(|s| !s.is_null()) else {
        return;
    };
    let Some(resource_version) = object
        .metadata
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
    else {
        return;
    };
    let Ok(mut recorded) = recorded.lock() else {
        return;
    };
    let id = format!(
        "{}/{}",
        object.metadata.namespace.as_deref().unwrap_or_default(),
        object.name_any()
    );
    let writes = recorded.entry(id).or_default();
    let newer = writes
        .last()
        .is_none_or(|w| w.resource_version < resource_version && &w.status != status);
    if newer {
        writes.push(StatusWrite {
            resource_version,
            status: status.clone(),
        });
    }
}
