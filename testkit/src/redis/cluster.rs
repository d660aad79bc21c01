//! A Redis Cluster of three masters, no replicas, made of fixture servers
//! and joined with `redis-cli --cluster create`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::error::FixtureError;
use super::server::{RedisOptions, RedisServer, START_TIMEOUT};

/// A Redis Cluster of three masters, no replicas.
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start() -> Result<RedisCluster, FixtureError> {
        let mut nodes = Vec::new();
        for _ in 0..3 {
            nodes.push(RedisServer::start_with(RedisOptions {
                appendonly: false,
                extra: vec![
                    ("cluster-enabled".into(), "yes".into()),
                    ("cluster-config-file".into(), "nodes.conf".into()),
                    ("cluster-node-timeout".into(), "2000".into()),
                ],
                ..RedisOptions::default()
            })?);
        }
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let output = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .map_err(|source| FixtureError::Spawn {
                program: "redis-cli",
                source,
            })?;
        if !output.status.success() {
            return Err(FixtureError::Command {
                what: "redis-cli --cluster create".into(),
                detail: String::from_utf8_lossy(&output.stdout).into_owned(),
            });
        }
        let cluster = RedisCluster { nodes };
        cluster.wait_ok()?;
        Ok(cluster)
    }

    fn wait_ok(&self) -> Result<(), FixtureError> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let all_ok = self.nodes.iter().all(|n| {
                n.command(&["CLUSTER", "INFO"])
                    .is_ok_and(|info| info.contains("cluster_state:ok"))
            });
            if all_ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(FixtureError::Command {
                    what: "cluster state".into(),
                    detail: "cluster_state never became ok".into(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Seed URLs of every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The `--redis-url` form: `cluster:url1,url2,url3`.
    pub fn target_spec(&self) -> String {
        format!("cluster:{}", self.urls().join(","))
    }
}
