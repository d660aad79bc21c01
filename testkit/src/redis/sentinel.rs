//! A Sentinel group as production runs it, on loopback: one master, one
//! replica, and three sentinels (quorum 2), all real processes. Tests force
//! a failover (`SENTINEL FAILOVER`) or kill the master and wait for the
//! sentinels to agree on the new one.

use super::error::FixtureError;
use super::server::{RedisOptions, RedisServer};
use super::wire::query;
use std::time::{Duration, Instant};

/// The name the sentinels monitor the master under.
pub const MASTER_NAME: &str = "assetscan";
/// How long the sentinels wait before they call a silent master down.
const DOWN_AFTER: Duration = Duration::from_millis(1000);
/// Bound on the group settling, and on a failover completing.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long [`SentinelGroup::wait_demoted`] waits for a sync to start
/// before it tells the node again whom to follow.
const TELL_AGAIN: Duration = Duration::from_secs(5);

pub struct SentinelGroup {
    /// The two data nodes; which one is master changes with failovers.
    nodes: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
}

impl SentinelGroup {
    /// Starts the master, its replica, and three sentinels, and returns once
    /// every sentinel sees the replica and the two other sentinels (so a
    /// failover can be agreed and has a replica to promote).
    pub fn start() -> Result<SentinelGroup, FixtureError> {
        Self::start_with_replicas(1)
    }

    /// [`SentinelGroup::start`] with `replicas` replicas; none is a
    /// Sentinel in front of one data node (discovery only).
    pub fn start_with_replicas(replicas: usize) -> Result<SentinelGroup, FixtureError> {
        let master = RedisServer::start()?;
        let mut nodes = vec![master];
        for _ in 0..replicas {
            let replica = RedisServer::start()?;
            replica.command(&["REPLICAOF", "127.0.0.1", &nodes[0].port().to_string()])?;
            nodes.push(replica);
        }
        let master = &nodes[0];
        let config = format!(
            "sentinel monitor {MASTER_NAME} 127.0.0.1 {port} 2\n\
             sentinel down-after-milliseconds {MASTER_NAME} {down}\n\
             sentinel failover-timeout {MASTER_NAME} 10000\n\
             sentinel parallel-syncs {MASTER_NAME} 1\n",
            port = master.port(),
            down = DOWN_AFTER.as_millis(),
        );
        let sentinels = (0..3)
            .map(|_| {
                RedisServer::start_with(RedisOptions {
                    sentinel: Some(config.clone()),
                    ..RedisOptions::default()
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let group = SentinelGroup { nodes, sentinels };
        let replicas = replicas.to_string();
        group.wait_until("the sentinels to see the replicas and each other", || {
            Ok(group.sentinels.iter().all(|s| {
                let info: Result<std::collections::HashMap<String, String>, _> =
                    s.query(redis::cmd("SENTINEL").arg("MASTER").arg(MASTER_NAME));
                info.is_ok_and(|m| {
                    m.get("num-slaves") == Some(&replicas)
                        && m.get("num-other-sentinels").map(String::as_str) == Some("2")
                })
            }))
        })?;
        Ok(group)
    }

    /// The operator's `--redis-url` for this group:
    /// `redis+sentinel://127.0.0.1:<p1>,…/<master name>`.
    pub fn target_spec(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port()))
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(","))
    }

    /// The data nodes (master and replica, in start order).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The data node on `port`.
    pub fn node(&self, port: u16) -> Option<&RedisServer> {
        self.nodes.iter().find(|n| n.port() == port)
    }

    /// The port of the master, as the first sentinel that answers names it.
    pub fn master_port(&self) -> Result<u16, FixtureError> {
        let mut last = None;
        for sentinel in &self.sentinels {
            match master_of(sentinel.port()) {
                Ok(port) => return Ok(port),
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| FixtureError::Command {
            what: "ask the sentinels for the master".into(),
            detail: "no sentinel".into(),
        }))
    }

    /// The master's server.
    pub fn master(&self) -> Result<&RedisServer, FixtureError> {
        let port = self.master_port()?;
        self.node(port).ok_or_else(|| FixtureError::Command {
            what: "find the master".into(),
            detail: format!("the sentinels name port {port}, not a node of this group"),
        })
    }

    /// `role:` of `INFO replication` of the node on `port`: `master` or
    /// `slave`.
    pub fn role(&self, port: u16) -> Result<String, FixtureError> {
        Ok(self
            .replication(port)?
            .lines()
            .find_map(|l| l.strip_prefix("role:"))
            .unwrap_or_default()
            .trim()
            .to_owned())
    }

    fn replication(&self, port: u16) -> Result<String, FixtureError> {
        let node = self.node(port).ok_or_else(|| FixtureError::Command {
            what: format!("replication info of port {port}"),
            detail: "not a node of this group".into(),
        })?;
        node.command(&["INFO", "replication"])
    }

    /// `SENTINEL FAILOVER`: promotes the replica without waiting for the
    /// master to fail. Returns the new master's port once every sentinel
    /// names it and it says it is master. The old master keeps taking writes
    /// until a sentinel turns it into a replica (some seconds later), and
    /// what it takes meanwhile is lost then, as with any Redis failover.
    pub fn failover(&self) -> Result<u16, FixtureError> {
        let old = self.master_port()?;
        self.wait_until("a sentinel to start the failover", || {
            match query::<String>(
                self.sentinels[0].port(),
                redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER_NAME),
            ) {
                Ok(_) => Ok(true),
                // No replica fit to promote yet, or a failover in progress.
                Err(FixtureError::Command { detail, .. })
                    if detail.contains("NOGOODSLAVE") || detail.contains("INPROG") =>
                {
                    Ok(false)
                }
                Err(err) => Err(err),
            }
        })?;
        self.wait_for_new_master(old)
    }

    /// SIGKILL to the master: the sentinels notice it after
    /// `down-after-milliseconds`, agree, and promote the replica. Returns the
    /// new master's port as [`SentinelGroup::failover`] does.
    pub fn kill_master(&mut self) -> Result<u16, FixtureError> {
        let old = self.master_port()?;
        if let Some(node) = self.nodes.iter_mut().find(|n| n.port() == old) {
            node.kill();
        }
        self.wait_for_new_master(old)
    }

    /// Starts the node on `port` again after [`SentinelGroup::kill_master`]
    /// (empty: no persistence) and makes it a replica of the current master
    /// at once, as the sentinels would at their next look; returns once it
    /// finished its sync.
    pub fn revive(&mut self, port: u16) -> Result<(), FixtureError> {
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port() == port)
            .ok_or_else(|| FixtureError::Command {
                what: format!("restart port {port}"),
                detail: "not a node of this group".into(),
            })?;
        node.restart()?;
        self.reconfigure_now(port)?;
        self.wait_demoted(port)
    }

    /// Makes the node on `port` deaf to the sentinels' reconfiguration, as
    /// if they could not reach it: its `default` user (the sentinels') may
    /// no longer run `REPLICAOF`/`SLAVEOF`, so a demoted master stays master
    /// and keeps taking writes from the clients still connected to it.
    pub fn refuse_reconfiguration(&self, port: u16) -> Result<(), FixtureError> {
        self.set_default_user(port, &["-replicaof", "-slaveof"])
    }

    /// Undoes [`SentinelGroup::refuse_reconfiguration`]: the sentinels'
    /// next attempt turns the node into a replica of the current master.
    pub fn allow_reconfiguration(&self, port: u16) -> Result<(), FixtureError> {
        self.set_default_user(port, &["+@all"])
    }

    /// What the sentinels' next reconfiguration of the node on `port` does,
    /// done now instead of at their next look (up to ten seconds away):
    /// `REPLICAOF` the current master, which drops whatever only it had,
    /// then `CLIENT KILL TYPE normal`, which closes its clients'
    /// connections (never the caller's), so that they ask the sentinels
    /// again.
    pub fn reconfigure_now(&self, port: u16) -> Result<(), FixtureError> {
        let master = self.master_port()?.to_string();
        let node = self.node(port).ok_or_else(|| FixtureError::Command {
            what: format!("REPLICAOF on port {port}"),
            detail: "not a node of this group".into(),
        })?;
        node.command(&["REPLICAOF", "127.0.0.1", &master])?;
        node.command(&["CLIENT", "KILL", "TYPE", "normal"])
            .map(|_| ())
    }

    fn set_default_user(&self, port: u16, rules: &[&str]) -> Result<(), FixtureError> {
        let node = self.node(port).ok_or_else(|| FixtureError::Command {
            what: format!("ACL of port {port}"),
            detail: "not a node of this group".into(),
        })?;
        let mut args = vec!["ACL", "SETUSER", "default"];
        args.extend_from_slice(rules);
        node.command(&args).map(|_| ())
    }

    /// Waits until the node on `port` is a replica that finished its sync
    /// with the master (`master_link_status:up`): from then on it holds the
    /// master's data and nothing of its own.
    ///
    /// Every few seconds without it, the node is told again whom to follow:
    /// a `REPLICAOF` can be undone by a sentinel that has not yet taken in
    /// the failover (one under load looks every ten seconds), and the sync
    /// then never starts.
    pub fn wait_demoted(&self, port: u16) -> Result<(), FixtureError> {
        let mut told = Instant::now();
        self.wait_until(&format!("port {port} to be a synced replica"), || {
            let info = self.replication(port)?;
            let synced = info.contains("role:slave") && info.contains("master_link_status:up");
            if !synced && told.elapsed() >= TELL_AGAIN && self.master_port()? != port {
                self.reconfigure_now(port)?;
                told = Instant::now();
            }
            Ok(synced)
        })
    }

    fn wait_for_new_master(&self, old: u16) -> Result<u16, FixtureError> {
        let mut new = None;
        self.wait_until("every sentinel to name the new master", || {
            let named: Vec<Option<u16>> = self
                .sentinels
                .iter()
                .filter(|s| s.pid().is_some())
                .map(|s| master_of(s.port()).ok())
                .collect();
            let agreed = named
                .first()
                .copied()
                .flatten()
                .filter(|p| *p != old && named.iter().all(|n| *n == Some(*p)));
            new = agreed;
            Ok(agreed.is_some_and(|p| self.role(p).is_ok_and(|r| r == "master")))
        })?;
        new.ok_or_else(|| FixtureError::Command {
            what: "failover".into(),
            detail: "no new master".into(),
        })
    }

    fn wait_until(
        &self,
        what: &str,
        mut done: impl FnMut() -> Result<bool, FixtureError>,
    ) -> Result<(), FixtureError> {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        while !done()? {
            if Instant::now() > deadline {
                return Err(FixtureError::Command {
                    what: format!("wait for {what}"),
                    detail: format!("not within {SETTLE_TIMEOUT:?}"),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

/// The master's port as the sentinel on `port` names it.
fn master_of(port: u16) -> Result<u16, FixtureError> {
    let addr: Vec<String> = query(
        port,
        redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER_NAME),
    )?;
    addr.get(1)
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| FixtureError::Command {
            what: format!("sentinel {port}: master address"),
            detail: format!("unexpected reply {addr:?}"),
        })
}
