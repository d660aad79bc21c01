//! A set of operator replicas sharding the AssetScans between them, as the
//! chart's StatefulSet runs them: replica `i` of `n` runs with
//! `--shard-index i --shard-count n`, and serves `/metrics` on its own port,
//! where the harness reads what it watches.

use crate::latency::Latency;
use crate::procstat::{cpu_seconds, peak_rss_kib};
use crate::report::Cost;
use anyhow::{Context as _, Result, anyhow};
use assetscan_testkit::process::{OperatorCommand, OperatorProcess, free_port};
use assetscan_testkit::wait;
use nix::sys::signal::Signal;
use std::path::Path;
use std::time::{Duration, Instant};

/// How the replicas are started.
pub struct Launch<'a> {
    pub operator: &'a Path,
    pub work: &'a Path,
    pub redis: &'a str,
    /// The one namespace watched; `None`: every namespace.
    pub namespace: Option<&'a str>,
    pub concurrency: u16,
    /// Replicas per shard: more than one watch the same objects.
    pub per_shard: u32,
}

/// Running replicas; dropping them kills them.
pub struct Replicas {
    pub shards: u32,
    processes: Vec<OperatorProcess>,
}

impl Replicas {
    /// Starts `shards` replicas, one per shard. `generation` tells the
    /// replicas of a rescale from those before it, in names and logs.
    pub fn start(launch: &Launch, shards: u32, generation: u32) -> Result<Replicas> {
        let (config, kubeconfig) = (
            launch.work.join("config.yaml"),
            launch.work.join("operator.kubeconfig"),
        );
        let per_shard = launch.per_shard.max(1);
        let processes = (0..shards * per_shard)
            .map(|n| {
                let (index, copy) = (n / per_shard, n % per_shard);
                let name = match per_shard {
                    1 => format!("replica-{index}of{shards}-{generation}"),
                    _ => format!("replica-{index}of{shards}-{generation}-{copy}"),
                };
                let command = OperatorCommand::new(
                    launch.operator,
                    &config,
                    launch.redis,
                    &kubeconfig,
                    &name,
                    launch.namespace.unwrap_or_default(),
                );
                match launch.namespace {
                    Some(_) => command,
                    None => command.all_namespaces(),
                }
                .metrics_port(free_port())
                .log_filter("warn")
                .args(["--shard-index", &index.to_string()])
                .args(["--shard-count", &shards.to_string()])
                .args(["--concurrency", &launch.concurrency.to_string()])
                .spawn(&launch.work.join(format!("{name}.log")))
                .with_context(|| format!("starting replica {index} of {shards}"))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Replicas { shards, processes })
    }

    /// Peak RSS and CPU of each replica so far.
    pub fn costs(&self) -> Vec<Cost> {
        self.processes
            .iter()
            .map(|p| Cost {
                name: p.instance().to_owned(),
                peak_rss_kib: peak_rss_kib(p.pid()).unwrap_or(0),
                cpu_seconds: cpu_seconds(p.pid()).unwrap_or(0.0),
            })
            .collect()
    }

    /// Adds each replica's detection-to-notification histogram to
    /// `latency` (before they stop: a process's metrics go with it).
    pub async fn scrape_latency(&self, latency: &mut Latency) {
        for replica in &self.processes {
            if let Ok((200, metrics)) = replica.get("/metrics").await {
                latency.add_scrape(&metrics);
            }
        }
    }

    /// AssetScans in the replicas' watch caches together
    /// (`assetscan_watched_objects`), once every replica answers `/readyz`;
    /// `None` while one is not ready or not answering.
    pub async fn watched_when_ready(&self) -> Option<u64> {
        let mut total = 0;
        for replica in &self.processes {
            let (ready, _) = replica.get("/readyz").await.ok()?;
            if ready != 200 {
                return None;
            }
            let (code, metrics) = replica.get("/metrics").await.ok()?;
            if code != 200 {
                return None;
            }
            total += series(&metrics, "assetscan_watched_objects")? as u64;
        }
        Some(total)
    }

    /// Waits until every replica is ready and their watch caches hold
    /// `count` AssetScans together (each AssetScan has a live owner: the
    /// shards' selectors are disjoint): how long that took.
    pub async fn wait_covering(&self, count: u64, timeout: Duration) -> Result<Duration> {
        let started = Instant::now();
        wait::poll(timeout, async || {
            (self.watched_when_ready().await == Some(count))
                .then_some(())
                .ok_or(())
        })
        .await
        .map_err(|()| {
            anyhow!(
                "{} replicas never watched all {count} AssetScans together within {timeout:?}",
                self.shards
            )
        })?;
        Ok(started.elapsed())
    }

    /// The replicas' instance names (`--instance`), in start order.
    pub fn instances(&self) -> Vec<String> {
        (self.processes.iter())
            .map(|p| p.instance().to_owned())
            .collect()
    }

    /// SIGKILL to replica `n` (in start order), as a node that dies takes
    /// a pod: no graceful stop, no leaving the membership. Returns once it
    /// is gone (its requests in flight end with it), and no longer counts
    /// it among the replicas.
    pub async fn kill(&mut self, n: usize, timeout: Duration) -> Result<()> {
        anyhow::ensure!(n < self.processes.len(), "no replica {n} to kill");
        let mut victim = self.processes.remove(n);
        victim.signal(Signal::SIGKILL);
        wait::poll(timeout, async || victim.exited().map(drop).ok_or(()))
            .await
            .map_err(|()| anyhow!("{} still runs after SIGKILL", victim.instance()))
    }

    /// Each replica's `assetscan_members`: the live replicas it sees
    /// (itself included); `None` while it does not answer.
    pub async fn members_seen(&self) -> Vec<Option<u64>> {
        let mut seen = Vec::new();
        for replica in &self.processes {
            seen.push(match replica.get("/metrics").await {
                Ok((200, metrics)) => series(&metrics, "assetscan_members").map(|v| v as u64),
                _ => None,
            });
        }
        seen
    }

    /// Waits until `enough` replicas see `live` members.
    pub async fn wait_members(&self, live: u64, enough: usize, timeout: Duration) -> Result<()> {
        wait::poll(timeout, async || {
            let seeing = (self.members_seen().await.iter())
                .filter(|m| **m == Some(live))
                .count();
            (seeing >= enough).then_some(()).ok_or(())
        })
        .await
        .map_err(|()| anyhow!("{enough} replicas did not see {live} members within {timeout:?}"))
    }

    /// The sum over the replicas of one series (name and labels, as
    /// exposed), e.g. a counter of one reconcile outcome; a replica that
    /// does not answer counts 0.
    pub async fn total(&self, name: &str) -> u64 {
        let mut total = 0;
        for replica in &self.processes {
            if let Ok((200, metrics)) = replica.get("/metrics").await {
                total += series(&metrics, name).map_or(0, |v| v as u64);
            }
        }
        total
    }

    /// How many replicas run.
    pub fn len(&self) -> usize {
        self.processes.len()
    }

    /// SIGTERM to every replica, then waits until all exited (killed after
    /// `timeout`), as a rolling update stops pods.
    pub async fn stop(mut self, timeout: Duration) {
        self.processes.iter().for_each(OperatorProcess::terminate);
        let started = Instant::now();
        while started.elapsed() < timeout {
            if self.processes.iter_mut().all(|p| p.exited().is_some()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The value of a series (an unlabelled gauge, or a name with its labels
/// as exposed) in a Prometheus text exposition.
pub fn series(exposition: &str, name: &str) -> Option<f64> {
    exposition.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix(' ')?;
        value.trim().parse::<f64>().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_unlabelled_gauge_and_a_labelled_series() {
        let text = "# HELP assetscan_watched_objects x\n\
                    assetscan_watched_objects_total 9\n\
                    assetscan_watched_objects 1234\n\
                    assetscan_reconciles_total{result=\"finished\"} 7\n";
        assert_eq!(series(text, "assetscan_watched_objects"), Some(1234.0));
        assert_eq!(series(text, "assetscan_missing"), None);
        let finished = "assetscan_reconciles_total{result=\"finished\"}";
        assert_eq!(series(text, finished), Some(7.0));
    }
}
