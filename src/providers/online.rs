//! Is the asset online? Either a TCP connect to one of its ports, or the
//! answer of an inventory service that already knows.

use super::ConfigError;
use super::http::{Exposure, HttpClient, HttpError, body_cap, join_path, parse_http_url, timeout_from_ms};
use super::secret::{Secret, SecretFrom};
use futures::stream::{FuturesUnordered, StreamExt};
use reqwest::Url;
use serde::Deserialize;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

/// `online:` in the config: which probe decides, by `kind`.
///
/// ```yaml
/// online:
///   kind: tcp            # or: inventory
///   timeoutMs: 3000
/// ```
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum OnlineConfig {
    Tcp(TcpProbeConfig),
    Inventory(InventoryConfig),
}

/// `kind: tcp` — the asset is online when a TCP connection to any of its
/// ports succeeds within the timeout.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpProbeConfig {
    /// Budget for name resolution and all connection attempts together.
    #[serde(default = "default_tcp_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_tcp_timeout_ms() -> u64 {
    3_000
}

/// `kind: inventory` — `GET <baseUrl>/assets/<assetId>` answers
/// `{"online": true|false}` (other keys are ignored). A 404 means the
/// inventory does not know the asset: a permanent error, not "offline".
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InventoryConfig {
    /// e.g. `https://inventory.internal/api`.
    pub base_url: String,
    #[serde(default = "default_inventory_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default = "default_inventory_max_body")]
    pub max_body_bytes: u64,
    /// Sent as `Authorization: Bearer <token>` when set.
    #[serde(default)]
    pub bearer_token_from: Option<SecretFrom>,
}

fn default_inventory_timeout_ms() -> u64 {
    3_000
}

fn default_inventory_max_body() -> u64 {
    64 * 1024
}

/// Where a TCP probe connects: the asset's host name or IP and its ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpTarget {
    pub host: String,
    pub ports: Vec<u16>,
}

/// At most this many ports are tried per asset.
const MAX_PORTS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum OnlineError {
    /// The asset gives nothing to probe (no host, no ports). Not retryable.
    #[error("online probe: invalid target: {0}")]
    InvalidTarget(String),
    /// The host name did not resolve in time or at all. Retryable: DNS
    /// hiccups pass, and an unresolvable name is not proof of "offline".
    #[error("online probe: cannot resolve {host}: {reason}")]
    Resolve { host: String, reason: String },
    #[error(transparent)]
    Http(#[from] HttpError),
}

impl OnlineError {
    pub fn is_retryable(&self) -> bool {
        match self {
            OnlineError::InvalidTarget(_) => false,
            OnlineError::Resolve { .. } => true,
            OnlineError::Http(e) => e.is_retryable(),
        }
    }
}

/// TCP reachability probe.
#[derive(Clone, Debug)]
pub struct TcpProbe {
    timeout: Duration,
}

impl TcpProbe {
    pub fn new(config: &TcpProbeConfig) -> Result<TcpProbe, ConfigError> {
        Ok(TcpProbe {
            timeout: timeout_from_ms("tcp probe", config.timeout_ms)?,
        })
    }

    /// `Ok(true)` as soon as one port accepts a connection; `Ok(false)` when
    /// every port refuses or none answers within the timeout. The ports are
    /// tried in parallel, so a dead port does not eat the others' budget.
    pub async fn check(&self, target: &TcpTarget) -> Result<bool, OnlineError> {
        validate(target)?;
        let deadline = Instant::now() + self.timeout;
        let addrs = resolve(target, deadline).await?;
        let mut attempts: FuturesUnordered<_> = addrs.into_iter().map(TcpStream::connect).collect();
        let any_accepts = async {
            while let Some(attempt) = attempts.next().await {
                if attempt.is_ok() {
                    return true;
                }
            }
            false
        };
        Ok(timeout_at(deadline, any_accepts).await.unwrap_or(false))
    }
}

fn validate(target: &TcpTarget) -> Result<(), OnlineError> {
    let invalid = |reason: &str| Err(OnlineError::InvalidTarget(reason.to_owned()));
    if target.host.trim().is_empty() {
        return invalid("the host is empty");
    }
    if target.ports.is_empty() {
        return invalid("no ports to probe");
    }
    if target.ports.len() > MAX_PORTS {
        return invalid("more than 64 ports");
    }
    if target.ports.contains(&0) {
        return invalid("port 0 cannot be probed");
    }
    Ok(())
}

/// Every address of the host, combined with every port.
async fn resolve(target: &TcpTarget, deadline: Instant) -> Result<Vec<SocketAddr>, OnlineError> {
    let failed = |reason: String| OnlineError::Resolve {
        host: target.host.clone(),
        reason,
    };
    let ips: Vec<_> = timeout_at(deadline, tokio::net::lookup_host((target.host.as_str(), 0)))
        .await
        .map_err(|_| failed("timed out".to_owned()))?
        .map_err(|e| failed(e.to_string()))?
        .map(|addr| addr.ip())
        .collect();
    if ips.is_empty() {
        return Err(failed("no addresses".to_owned()));
    }
    Ok(ips
        .iter()
        .flat_map(|ip| target.ports.iter().map(move |port| SocketAddr::new(*ip, *port)))
        .collect())
}

/// Asks an inventory service whether the asset is online.
#[derive(Clone, Debug)]
pub struct InventoryProbe {
    http: HttpClient,
    base: Url,
    token: Option<Secret>,
}

impl InventoryProbe {
    pub fn new(config: &InventoryConfig) -> Result<InventoryProbe, ConfigError> {
        const PROVIDER: &str = "inventory";
        let token = config
            .bearer_token_from
            .as_ref()
            .map(|from| from.load().map_err(|e| ConfigError::secret(PROVIDER, "bearerTokenFrom", e)))
            .transpose()?;
        Ok(InventoryProbe {
            http: HttpClient::new(
                PROVIDER,
                timeout_from_ms(PROVIDER, config.timeout_ms)?,
                body_cap(PROVIDER, config.max_body_bytes)?,
                Exposure::Path,
            )?,
            base: parse_http_url(PROVIDER, "baseUrl", &config.base_url)?,
            token,
        })
    }

    pub async fn check(&self, asset_id: &str) -> Result<bool, OnlineError> {
        #[derive(Deserialize)]
        struct Answer {
            online: bool,
        }
        let mut request = self.http.get(join_path(&self.base, &["assets", asset_id]));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token.expose());
        }
        let answer: Answer = self.http.json(request).await?;
        Ok(answer.online)
    }
}

/// The configured online probe.
#[derive(Clone, Debug)]
pub enum OnlineProbe {
    Tcp(TcpProbe),
    Inventory(InventoryProbe),
}

impl OnlineProbe {
    pub fn from_config(config: &OnlineConfig) -> Result<OnlineProbe, ConfigError> {
        Ok(match config {
            OnlineConfig::Tcp(c) => OnlineProbe::Tcp(TcpProbe::new(c)?),
            OnlineConfig::Inventory(c) => OnlineProbe::Inventory(InventoryProbe::new(c)?),
        })
    }

    /// The TCP probe needs `target`; the inventory probe needs only the id.
    pub async fn is_online(&self, asset_id: &str, target: Option<&TcpTarget>) -> Result<bool, OnlineError> {
        match self {
            OnlineProbe::Tcp(probe) => match target {
                Some(target) => probe.check(target).await,
                None => Err(OnlineError::InvalidTarget(
                    "the tcp probe needs the asset's host and ports".to_owned(),
                )),
            },
            OnlineProbe::Inventory(probe) => probe.check(asset_id).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_by_kind() {
        let tcp: OnlineConfig = serde_yaml::from_str("kind: tcp").unwrap();
        assert!(matches!(tcp, OnlineConfig::Tcp(TcpProbeConfig { timeout_ms: 3000 })));
        let inv: OnlineConfig =
            serde_yaml::from_str("{kind: inventory, baseUrl: 'http://inv', timeoutMs: 500}").unwrap();
        assert!(matches!(inv, OnlineConfig::Inventory(InventoryConfig { timeout_ms: 500, .. })));
        assert!(serde_yaml::from_str::<OnlineConfig>("{kind: tcp, timeout: 5}").is_err());
        assert!(serde_yaml::from_str::<OnlineConfig>("{kind: ping}").is_err());
    }

    #[tokio::test]
    async fn tcp_probe_sees_a_listener_and_a_closed_port() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let open = listener.local_addr().unwrap().port();
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let probe = TcpProbe::new(&TcpProbeConfig { timeout_ms: 2000 }).unwrap();
        let target = |ports: Vec<u16>| TcpTarget {
            host: "127.0.0.1".into(),
            ports,
        };
        assert!(probe.check(&target(vec![closed, open])).await.unwrap());
        assert!(!probe.check(&target(vec![closed])).await.unwrap());
        let err = probe.check(&target(vec![])).await.unwrap_err();
        assert!(!err.is_retryable(), "{err}");
    }

    #[tokio::test]
    async fn tcp_probe_times_out_as_offline() {
        // 192.0.2.0/24 (TEST-NET-1) is never routed: connects hang or fail.
        let probe = TcpProbe::new(&TcpProbeConfig { timeout_ms: 200 }).unwrap();
        let started = std::time::Instant::now();
        let online = probe
            .check(&TcpTarget {
                host: "192.0.2.1".into(),
                ports: vec![9],
            })
            .await
            .unwrap();
        assert!(!online);
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
