//! The API server of an upgrade run, through its kubeconfig alone, so that
//! the API emulator and a real cluster are driven the same way: CRDs
//! applied (created, or replaced as `kubectl replace` does), AssetScans
//! created, and every change of their status recorded from a watch, in
//! the order the API server stored them.

use crate::ChaosError;
use crate::history::StatusWrite;
use crate::objects::{NAMESPACE, PlannedObject};
use futures::StreamExt;
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

/// Status writes per object name, oldest first, as the watch saw them.
type Recorded = Arc<Mutex<BTreeMap<String, Vec<StatusWrite>>>>;

pub struct Cluster {
    client: Client,
    scans: Api<DynamicObject>,
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
        let resource = crate::objects::resource();
        let scans = Api::namespaced_with(client.clone(), NAMESPACE, &resource);
        Ok(Cluster {
            client,
            scans,
            recorded: Arc::default(),
            watch: tokio::spawn(async {}),
        })
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
        let stream = watcher(self.scans.clone(), watcher::Config::default()).default_backoff();
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

    /// Creates `object`; `Err` with the API server's answer when it refuses
    /// it (a manifest of the previous release this CRD does not admit).
    pub async fn create(&self, object: &PlannedObject) -> Result<Result<(), String>, ChaosError> {
        let manifest: DynamicObject = serde_json::from_value(object.manifest())
            .map_err(|e| local("an AssetScan manifest", e))?;
        let mut last = String::new();
        for _ in 0..30 {
            match self.scans.create(&PostParams::default(), &manifest).await {
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
            what: format!("create {}", object.name),
            attempts: 30,
            last,
        })
    }

    /// The names of the AssetScans already in the namespace.
    pub async fn existing(&self) -> Result<Vec<String>, ChaosError> {
        let list = self
            .scans
            .list(&Default::default())
            .await
            .map_err(kube("list AssetScans"))?;
        Ok(list.items.iter().map(|o| o.name_any()).collect())
    }

    /// The object as stored now.
    pub async fn get(&self, name: &str) -> Result<Option<Value>, ChaosError> {
        let found = self
            .scans
            .get_opt(name)
            .await
            .map_err(kube(format!("read {name}")))?;
        found
            .map(|o| serde_json::to_value(o).map_err(|e| local("an AssetScan", e)))
            .transpose()
    }

    /// The status writes recorded for `name`, oldest first.
    pub fn status_writes(&self, name: &str) -> Vec<StatusWrite> {
        self.recorded
            .lock()
            .map(|r| r.get(name).cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    /// Deletes the run's AssetScans (their finalizers need a replica) and
    /// waits until they are gone.
    pub async fn delete_all(&self, names: &[String]) -> Result<(), ChaosError> {
        for name in names {
            match self.scans.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(kube(format!("delete {name}"))(e)),
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        for name in names {
            while self.get(name).await?.is_some() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        Ok(())
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
    let writes = recorded.entry(object.name_any()).or_default();
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
