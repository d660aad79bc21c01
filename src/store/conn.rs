//! One connection type over a standalone Redis, Redis behind Sentinel, and
//! Redis Cluster, with the credentials and TLS settings of production.
//!
//! Standalone and Sentinel share one managed connection ([`managed`]): it
//! replaces a broken connection (asking the sentinels where the master is
//! now, for Sentinel) and backs off between failed attempts. Cluster uses the
//! async cluster client, which follows MOVED/ASK and refreshes its slot map;
//! a pipeline sent node by node groups its calls by [`SlotMap`].
//! All are cheap to clone (multiplexed).
//!
//! Every request sent (one command, or one pipeline) is counted: the number
//! of round trips an operation costs is part of the store's contract, and
//! the count is how tests and benchmarks check it from the client's side.

mod exposure;
mod health;
mod managed;
mod sentinel;
mod slots;
mod tls_files;

use super::{StoreConfig, StoreError};
pub use exposure::RedisExposure;
pub use health::RedisHealth;
use managed::{Endpoint, Managed};
pub use redis::TlsCertificates;
use redis::aio::ConnectionLike;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Client, Cmd, IntoConnectionInfo, Pipeline, RedisFuture, RedisResult, Value};
pub use sentinel::SentinelTarget;
pub(crate) use slots::{NodeGroup, SlotMap};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Where Redis is: one URL (`redis://`, `rediss://` for TLS), the sentinels
/// that know the master, or the seed nodes of a Cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedisTarget {
    Standalone(String),
    Cluster(Vec<String>),
    Sentinel(SentinelTarget),
}

impl RedisTarget {
    /// Parses the `--redis-url` forms: a single URL;
    /// `redis+sentinel://[user:password@]host:port,…/<master>[/<db>]` (or
    /// `rediss+sentinel://`); or `cluster:` followed by comma-separated seed
    /// URLs.
    pub fn parse(spec: &str) -> Result<RedisTarget, StoreError> {
        if let Some(seeds) = spec.strip_prefix("cluster:") {
            return Ok(RedisTarget::Cluster(
                seeds
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
            ));
        }
        let sentinel = [(sentinel::SCHEME, false), (sentinel::TLS_SCHEME, true)]
            .into_iter()
            .find_map(|(scheme, tls)| Some((tls, spec.strip_prefix(scheme)?)));
        match sentinel {
            Some((tls, rest)) => SentinelTarget::parse(tls, rest)
                .map(RedisTarget::Sentinel)
                .map_err(|reason| StoreError::InvalidTarget {
                    // Only the scheme: the rest may hold a password.
                    target: spec.split("://").next().unwrap_or_default().to_owned(),
                    reason,
                }),
            None => Ok(RedisTarget::Standalone(spec.to_owned())),
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
            RedisTarget::Sentinel(target) => target.to_string(),
        }
    }
}

/// A user name and password. The password never shows in `Debug`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    pub username: Option<String>,
    pub password: Option<String>,
}

impl Credentials {
    /// These credentials where set, `url`'s otherwise.
    fn over(&self, url: &Credentials) -> Credentials {
        Credentials {
            username: self.username.clone().or_else(|| url.username.clone()),
            password: self.password.clone().or_else(|| url.password.clone()),
        }
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .finish()
    }
}

/// Who the operator is to Redis and whom it trusts, on top of the target:
/// set from the command line so that secrets come from the environment (a
/// Kubernetes Secret), not from a URL in a config file.
#[derive(Clone, Debug, Default)]
pub struct RedisSecurity {
    /// The data nodes' ACL user and password; each one set replaces the URL's.
    pub credentials: Credentials,
    /// The sentinels' own user and password, when they require one.
    pub sentinel_credentials: Credentials,
    /// For `rediss://`: the CA to trust instead of the system's, and the
    /// client certificate when Redis asks for one (`tls-auth-clients`).
    pub tls: Option<TlsCertificates>,
}

/// A connection to any kind of deployment. Clones share the connection
/// and the round-trip count.
#[derive(Clone)]
pub struct RedisConn {
    link: Link,
    round_trips: Arc<AtomicU64>,
    health: RedisHealth,
}

/// The client of one kind of deployment.
#[derive(Clone)]
enum Link {
    /// A standalone server, or the master the sentinels name.
    Primary(Managed),
    Cluster(ClusterConnection),
}

impl RedisConn {
    /// Connects once, now; the config's `timeout` bounds each connection
    /// attempt and each response, so an unreachable Redis surfaces as an
    /// error instead of a hang. A wrong password or an untrusted certificate
    /// fails here, once, with the server's or the TLS library's reason.
    /// Behind Sentinel, a command that loses its master is retried on the
    /// new one for up to `failover_wait` (see [`managed`]).
    pub async fn connect(
        target: &RedisTarget,
        config: &StoreConfig,
    ) -> Result<RedisConn, StoreError> {
        let (security, timeout) = (&config.security, config.timeout);
        let connect_err = |source| StoreError::Connect {
            target: target.redacted(),
            source,
        };
        match target {
            RedisTarget::Standalone(url) => {
                let (client, db) = standalone_client(url, security).map_err(connect_err)?;
                let endpoint = Endpoint::Fixed(client);
                let managed = Managed::new(endpoint, timeout, target.redacted(), db);
                managed.connect_now().await.map_err(connect_err)?;
                Ok(RedisConn::new(Link::Primary(managed)))
            }
            RedisTarget::Sentinel(sentinels) => {
                let client = sentinels.client(security).map_err(connect_err)?;
                let endpoint = Endpoint::Sentinel {
                    sentinels: tokio::sync::Mutex::new(client),
                    failover_wait: config.failover_wait,
                };
                let managed = Managed::new(endpoint, timeout, target.redacted(), sentinels.db());
                managed.connect_now().await.map_err(connect_err)?;
                Ok(RedisConn::new(Link::Primary(managed)))
            }
            RedisTarget::Cluster(seeds) => {
                let mut builder = ClusterClient::builder(seeds.iter().map(String::as_str))
                    .connection_timeout(timeout)
                    .response_timeout(timeout);
                if let Some(username) = &security.credentials.username {
                    builder = builder.username(username);
                }
                if let Some(password) = &security.credentials.password {
                    builder = builder.password(password);
                }
                if let Some(certs) = &security.tls {
                    builder = builder.certs(certs.clone());
                }
                let client = builder.build().map_err(connect_err)?;
                let conn = client.get_async_connection().await.map_err(connect_err)?;
                Ok(RedisConn::new(Link::Cluster(conn)))
            }
        }
    }

    fn new(link: Link) -> RedisConn {
        RedisConn {
            link,
            round_trips: Arc::new(AtomicU64::new(0)),
            health: RedisHealth::connected(),
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

    /// What the latest command's outcome says about Redis (readiness).
    pub fn health(&self) -> &RedisHealth {
        &self.health
    }

    /// A clone whose requests count apart from this one's: for a
    /// background task's own traffic, which no operation pays for.
    pub(crate) fn counted_apart(&self) -> RedisConn {
        RedisConn::new(self.link.clone())
    }

    /// The address of the node that takes the writes (`host:port`), while
    /// a connection to it is live; never on a Cluster (one per slot range).
    pub(crate) fn node(&self) -> Option<Arc<str>> {
        match &self.link {
            Link::Primary(managed) => managed.node(),
            Link::Cluster(_) => None,
        }
    }

    /// Whether `node` is the master the sentinels name now (always, for a
    /// single URL: nobody else names one).
    pub(crate) async fn is_named_master(&self, node: &str) -> RedisResult<bool> {
        match &self.link {
            Link::Primary(managed) => managed.is_named_master(node).await,
            Link::Cluster(_) => Ok(false),
        }
    }

    /// Counts one request: a pipeline is one round trip.
    fn count_round_trip(&self) {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
    }
}

/// The client of a single URL with the security settings applied, and its
/// database number.
fn standalone_client(url: &str, security: &RedisSecurity) -> RedisResult<(Client, i64)> {
    let info = url.into_connection_info()?;
    let mut redis = info.redis_settings().clone();
    if let Some(username) = &security.credentials.username {
        redis = redis.set_username(username);
    }
    if let Some(password) = &security.credentials.password {
        redis = redis.set_password(password);
    }
    let db = redis.db();
    let info = info.set_redis_settings(redis);
    let client = match &security.tls {
        Some(certs) => Client::build_with_tls(info, certs.clone())?,
        None => Client::open(info)?,
    };
    Ok((client, db))
}

/// `reply`, its outcome recorded in `health` when it ends.
async fn recorded<T>(health: RedisHealth, reply: RedisFuture<'_, T>) -> RedisResult<T> {
    let result = reply.await;
    health.record(&result);
    result
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.count_round_trip();
        let health = self.health.clone();
        let reply = match &mut self.link {
            Link::Primary(c) => c.req_packed_command(cmd),
            Link::Cluster(c) => c.req_packed_command(cmd),
        };
        Box::pin(recorded(health, reply))
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.count_round_trip();
        let health = self.health.clone();
        let replies = match &mut self.link {
            Link::Primary(c) => c.req_packed_commands(pipeline, offset, count),
            Link::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        };
        Box::pin(recorded(health, replies))
    }

    fn get_db(&self) -> i64 {
        match &self.link {
            Link::Primary(c) => c.get_db(),
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
            RedisTarget::parse("cluster:redis://a:1, redis://b:2").unwrap(),
            RedisTarget::Cluster(vec!["redis://a:1".into(), "redis://b:2".into()])
        );
        let t = RedisTarget::parse("rediss://user:s3cret@host:6380/0").unwrap();
        assert_eq!(t.redacted(), "rediss://***@host:6380/0");
        assert!(!t.redacted().contains("s3cret"));
        let t = RedisTarget::parse("rediss+sentinel://app:s3cret@s1,s2:26380/main").unwrap();
        assert!(matches!(t, RedisTarget::Sentinel(_)));
        assert_eq!(
            t.redacted(),
            "rediss+sentinel://app:***@s1:26379,s2:26380/main"
        );
        let err = RedisTarget::parse("redis+sentinel://app:s3cret@s1:26379").unwrap_err();
        assert!(err.to_string().contains("no master name"), "{err}");
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }

    #[test]
    fn flags_override_the_urls_credentials_and_hide_the_password() {
        let flags = Credentials {
            username: None,
            password: Some("from-env".into()),
        };
        let url = Credentials {
            username: Some("app".into()),
            password: Some("in-url".into()),
        };
        let both = flags.over(&url);
        assert_eq!(both.username.as_deref(), Some("app"));
        assert_eq!(both.password.as_deref(), Some("from-env"));
        assert!(!format!("{both:?}").contains("from-env"));
    }
}
