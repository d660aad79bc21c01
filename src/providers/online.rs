//! Is the asset online? The asset's target decides how to ask: a TCP connect
//! to one of its ports, or the inventory service that already knows.

use super::ConfigError;
use super::http::{Exposure, HttpClient, HttpError, check_timeout, join_path, parse_http_url};
use super::secret::{Secret, SecretFrom};
use crate::domain::Target;
use futures::stream::{FuturesUnordered, StreamExt};
use reqwest::Url;
use serde::Deserialize;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

/// `online:` in the config. Both keys are optional; without `inventory`,
/// assets that name an inventory id cannot be checked.
///
/// ```yaml
/// online:
///   tcp: {timeout: 3s}
///   inventory: {baseUrl: https://inventory.internal/api, bearerTokenFrom: {env: INVENTORY_TOKEN}}
/// ```
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct OnlineConfig {
    pub tcp: TcpProbeConfig,
    pub inventory: Option<InventoryConfig>,
}

/// The asset is online when a TCP connection to any of its ports succeeds
/// within the timeout.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpProbeConfig {
    /// Budget for name resolution and all connection attempts together.
    /// Default `3s`.
    #[serde(deserialize_with = "crate::duration::config")]
    pub timeout: Duration,
}

impl Default for TcpProbeConfig {
    fn default() -> TcpProbeConfig {
        TcpProbeConfig {
            timeout: Duration::from_secs(3),
        }
    }
}

/// `GET <baseUrl>/assets/<id>` answers `{"online": true|false}` (other keys
/// are ignored). A 404 means the inventory does not know the asset: a
/// permanent error, not "offline".
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InventoryConfig {
    /// e.g. `https://inventory.internal/api`.
    pub base_url: String,
    /// Per call. Default `3s`.
    #[serde(
        default = "default_inventory_timeout",
        deserialize_with = "crate::duration::config"
    )]
    pub timeout: Duration,
    /// Default 64 KiB.
    #[serde(default = "default_inventory_max_body")]
    pub max_body_bytes: u64,
    /// Sent as `Authorization: Bearer <token>` when set.
    #[serde(default)]
    pub bearer_token_from: Option<SecretFrom>,
}

fn default_inventory_timeout() -> Duration {
    Duration::from_secs(3)
}

fn default_inventory_max_body() -> u64 {
    64 * 1024
}

/// At most this many ports are tried per asset.
const MAX_PORTS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum OnlineError {
    /// The target gives nothing to probe, or needs a probe that is not
    /// configured. Not retryable.
    #[error("online check: {0}")]
    InvalidTarget(String),
    /// The host name did not resolve in time or at all. Retryable: DNS
    /// hiccups pass, and an unresolvable name is not proof of "offline".
    #[error("online check: cannot resolve {host}: {reason}")]
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

/// The online check: TCP for `Target::Tcp`, the inventory for
/// `Target::Inventory`.
#[derive(Debug)]
pub struct OnlineProbe {
    tcp: TcpProbe,
    inventory: Option<InventoryProbe>,
}

impl OnlineProbe {
    pub fn from_config(config: &OnlineConfig) -> Result<OnlineProbe, ConfigError> {
        Ok(OnlineProbe {
            tcp: TcpProbe::new(&config.tcp)?,
            inventory: config
                .inventory
                .as_ref()
                .map(InventoryProbe::new)
                .transpose()?,
        })
    }

    pub async fn is_online(&self, target: &Target) -> Result<bool, OnlineError> {
        match target {
            Target::Tcp { host, ports } => self.tcp.check(host, ports).await,
            Target::Inventory { id } => match &self.inventory {
                Some(inventory) => inventory.check(id).await,
                None => Err(OnlineError::InvalidTarget(
                    "the asset names an inventory id, but no inventory is configured".to_owned(),
                )),
            },
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
            timeout: check_timeout("tcp probe", config.timeout)?,
        })
    }

    /// `Ok(true)` as soon as one port accepts a connection; `Ok(false)` when
    /// every port refuses or none answers within the timeout. The ports are
    /// tried in parallel, so a dead port does not eat the others' budget.
    pub async fn check(&self, host: &str, ports: &[u16]) -> Result<bool, OnlineError> {
        validate(host, ports)?;
        let deadline = Instant::now() + self.timeout;
        let addrs = resolve(host, ports, deadline).await?;
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

fn validate(host: &str, ports: &[u16]) -> Result<(), OnlineError> {
    let reason = if host.trim().is_empty() {
        "the host is empty"
    } else if ports.is_empty() {
        "no ports to probe"
    } else if ports.len() > MAX_PORTS {
        "more than 64 ports"
    } else if ports.contains(&0) {
        "port 0 cannot be probed"
    } else {
        return Ok(());
    };
    Err(OnlineError::InvalidTarget(reason.to_owned()))
}

/// Every address of the host, combined with every port.
async fn resolve(
    host: &str,
    ports: &[u16],
    deadline: Instant,
) -> Result<Vec<SocketAddr>, OnlineError> {
    let failed = |reason: String| OnlineError::Resolve {
        host: host.to_owned(),
        reason,
    };
    let ips: Vec<_> = timeout_at(deadline, tokio::net::lookup_host((host, 0)))
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
        .flat_map(|ip| ports.iter().map(move |port| SocketAddr::new(*ip, *port)))
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
        let token = SecretFrom::load_optional(
            config.bearer_token_from.as_ref(),
            PROVIDER,
            "bearerTokenFrom",
        )?;
        Ok(InventoryProbe {
            http: HttpClient::new(
                PROVIDER,
                config.timeout,
                config.max_body_bytes,
                Exposure::Path,
            )?,
            base: parse_http_url(PROVIDER, "baseUrl", &config.base_url)?,
            token,
        })
    }

    /// `id` is the asset's id in the inventory.
    pub async fn check(&self, id: &str) -> Result<bool, OnlineError> {
        #[derive(Deserialize)]
        struct Answer {
            online: bool,
        }
        let mut request = self.http.get(join_path(&self.base, &["assets", id]));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token.expose());
        }
        let answer: Answer = self.http.json(request).await?;
        Ok(answer.online)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_shapes() {
        let empty: OnlineConfig = serde_yaml::from_str("{}").unwrap();
        assert_eq!(empty.tcp.timeout, Duration::from_secs(3));
        assert!(empty.inventory.is_none());
        let both: OnlineConfig = serde_yaml::from_str(
            "{tcp: {timeout: 500ms}, inventory: {baseUrl: 'http://inv', timeout: 2s}}",
        )
        .unwrap();
        assert_eq!(both.tcp.timeout, Duration::from_millis(500));
        assert_eq!(both.inventory.unwrap().timeout, Duration::from_secs(2));
        assert!(serde_yaml::from_str::<OnlineConfig>("{tcp: {timeoutMs: 5}}").is_err());
        assert!(serde_yaml::from_str::<OnlineConfig>("{ping: {}}").is_err());
    }

    fn tcp(host: &str, ports: Vec<u16>) -> Target {
        Target::Tcp {
            host: host.into(),
            ports,
        }
    }

    #[tokio::test]
    async fn tcp_sees_a_listener_and_a_closed_port() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let open = listener.local_addr().unwrap().port();
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let probe = OnlineProbe::from_config(&OnlineConfig::default()).unwrap();
        assert!(
            probe
                .is_online(&tcp("127.0.0.1", vec![closed, open]))
                .await
                .unwrap()
        );
        assert!(
            !probe
                .is_online(&tcp("127.0.0.1", vec![closed]))
                .await
                .unwrap()
        );
        for bad in [
            tcp("127.0.0.1", vec![]),
            tcp(" ", vec![22]),
            tcp("h", vec![0]),
        ] {
            assert!(!probe.is_online(&bad).await.unwrap_err().is_retryable());
        }
        let unconfigured = probe.is_online(&Target::Inventory { id: "a".into() }).await;
        assert!(matches!(unconfigured, Err(OnlineError::InvalidTarget(_))));
    }

    #[tokio::test]
    async fn tcp_times_out_as_offline() {
        // 192.0.2.0/24 (TEST-NET-1) is never routed: connects hang or fail.
        let config = TcpProbeConfig {
            timeout: Duration::from_millis(200),
        };
        let probe = TcpProbe::new(&config).unwrap();
        let started = std::time::Instant::now();
        assert!(!probe.check("192.0.2.1", &[9]).await.unwrap());
        assert!(started.elapsed() < Duration::from_secs(2));
    }
}
