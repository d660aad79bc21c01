//! How many AssetScans have finished, and when each was first seen
//! finished: a watch of the driver's own (uncounted) in the background,
//! which a run waits on.

use anyhow::{Result, bail};
use assetscan_operator::kubernetes::crd::AssetScan;
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Whether `obj` shows a terminal phase for its generation.
pub fn terminal(obj: &AssetScan) -> bool {
    obj.status.as_ref().is_some_and(|s| {
        s.phase.is_some_and(|p| p.is_terminal()) && s.observed_generation == obj.metadata.generation
    })
}

/// When each AssetScan was first seen finished, by name.
pub type FinishTimes = HashMap<String, Instant>;

/// The count of AssetScans seen with a terminal phase for their
/// generation, and when each was; the watch stops when dropped.
pub struct Progress {
    finished: watch::Receiver<usize>,
    times: Arc<Mutex<FinishTimes>>,
    task: tokio::task::JoinHandle<()>,
}

impl Progress {
    pub fn watch(api: Api<AssetScan>) -> Progress {
        let (tx, finished) = watch::channel(0);
        let times = Arc::new(Mutex::new(FinishTimes::new()));
        let done = Arc::clone(&times);
        let task = tokio::spawn(async move {
            let mut objects = watcher(api, watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .boxed();
            // An error (a watch that expired, the API away for a moment) is
            // retried by the watcher after its backoff.
            while let Some(item) = objects.next().await {
                if let Ok(obj) = item
                    && terminal(&obj)
                {
                    let mut done = done.lock().unwrap_or_else(|e| e.into_inner());
                    let name = obj.metadata.name.unwrap_or_default();
                    if let Entry::Vacant(first) = done.entry(name) {
                        first.insert(Instant::now());
                        tx.send_replace(done.len());
                    }
                }
            }
        });
        Progress {
            finished,
            times,
            task,
        }
    }

    /// When each AssetScan finished so far was first seen finished.
    pub fn finish_times(&self) -> FinishTimes {
        self.times.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn finished(&self) -> usize {
        *self.finished.borrow()
    }

    /// Waits until at least `count` finished; fails after `timeout`.
    pub async fn wait(&mut self, count: usize, timeout: Duration) -> Result<()> {
        let started = Instant::now();
        let reached = tokio::time::timeout(timeout, self.finished.wait_for(|n| *n >= count))
            .await
            .map(|r| r.map(|_| ()));
        match reached {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => bail!("the progress watch ended"),
            Err(_) => bail!(
                "{} of {count} finished after {:?}",
                self.finished(),
                started.elapsed()
            ),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.task.abort();
    }
}
