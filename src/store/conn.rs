//! One connection type over standalone Redis and Redis Cluster.
//!
//! Standalone uses `ConnectionManager`, which reconnects on its own after a
//! Redis restart; Cluster uses the async cluster client, which follows
//! MOVED/ASK and refreshes its slot map. Both are cheap to clone (multiplexed).
//!
//! Every request sent (one command, or one pipeline) is counted: the number
//! of round trips an operation costs is part of the store's contract, and
//! the count is how tests and benchmarks check it from the client's side.

use super::StoreError;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Where Redis is: one URL (`redis://`, `rediss://` for TLS) or the seed
/// nodes of a Cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedisTarget {
    Standalone(String),
    Cluster(Vec<String>),
}

impl RedisTarget {
    /// Parses the `--redis-url` form: a single URL, or `cluster:` followed by
    /// comma-separated seed URLs.
    pub fn parse(spec: &str) -> RedisTarget {
        match spec.strip_prefix("cluster:") {
            Some(seeds) => RedisTarget::Cluster(
                seeds
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
            ),
            None => RedisTarget::Standalone(spec.to_owned()),
        }
    }

    /// The target with any password removed, for logs.
    pub fn redacted(&self) -> String {
        fn redact(url: &str) -> String {
            match (url.find("://"), url.rfind('@')) {
                (Some(scheme), Some(at)) if at > scheme => {
                    format!("{}***{}", &url[..scheme + 3], &url[at..])
                }
                _ => url.to_owned(),
            }
        }
        match self {
            RedisTarget::Standalone(url) => redact(url),
            RedisTarget::Cluster(seeds) => {
                let seeds: Vec<String> = seeds.iter().map(|s| redact(s)).collect();
                format!("cluster:{}", seeds.join(","))
            }
        }
    }
}

/// A connection to either kind of deployment. Clones share the connection
/// and the round-trip count.
#[derive(Clone)]
pub struct RedisConn {
    pub(crate) link: Link,
    round_trips: Arc<AtomicU64>,
}

/// The client of one kind of deployment.
#[derive(Clone)]
pub(crate) enum Link {
    Standalone(ConnectionManager),
    Cluster(ClusterConnection),
}

impl RedisConn {
    /// Connects; `timeout` bounds each connection attempt and each response,
    /// so an unreachable Redis surfaces as an error instead of a hang.
    pub async fn connect(target: &RedisTarget, timeout: Duration) -> Result<RedisConn, StoreError> {
        let connect_err = |source| StoreError::Connect {
            target: target.redacted(),
            source,
        };
        match target {
            RedisTarget::Standalone(url) => {
                let client = redis::Client::open(url.as_str()).map_err(connect_err)?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout))
                    .set_number_of_retries(2)
                    .set_max_delay(Duration::from_secs(2));
                let manager = client
                    .get_connection_manager_with_config(config)
                    .await
                    .map_err(connect_err)?;
                Ok(RedisConn::new(Link::Standalone(manager)))
            }
            RedisTarget::Cluster(seeds) => {
                let client = ClusterClient::builder(seeds.iter().map(String::as_str))
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .build()
                    .map_err(connect_err)?;
                let conn = client.get_async_connection().await.map_err(connect_err)?;
                Ok(RedisConn::new(Link::Cluster(conn)))
            }
        }
    }

    fn new(link: Link) -> RedisConn {
        RedisConn {
            link,
            round_trips: Arc::new(AtomicU64::new(0)),
        }
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self.link, Link::Cluster(_))
    }

    /// Requests sent so far over this connection and its clones (a
    /// pipeline counts once: it is one round trip).
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }

    /// Counts a request sent outside [`ConnectionLike`] (a routed pipeline).
    pub(crate) fn count_round_trip(&self) {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
    }
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.count_round_trip();
        match &mut self.link {
            Link::Standalone(c) => c.req_packed_command(cmd),
            Link::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.count_round_trip();
        match &mut self.link {
            Link::Standalone(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.link {
            Link::Standalone(c) => c.get_db(),
            Link::Cluster(c) => c.get_db(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_redacts_targets() {
        assert_eq!(
            RedisTarget::parse("cluster:redis://a:1, redis://b:2"),
            RedisTarget::Cluster(vec!["redis://a:1".into(), "redis://b:2".into()])
        );
        let t = RedisTarget::parse("rediss://user:s3cret@host:6380/0");
        assert_eq!(t.redacted(), "rediss://***@host:6380/0");
        assert!(!t.redacted().contains("s3cret"));
    }
}
