//! Online as a TCP connection says: the asset is online when one of its
//! ports accepts.

use super::error::OnlineError;
use crate::providers::error::{ProviderConfigError, check_timeout};
use futures::stream::{FuturesUnordered, StreamExt};
use serde::Deserialize;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

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

/// At most this many ports are tried per asset.
const MAX_PORTS: usize = 64;

/// TCP reachability probe.
#[derive(Clone, Debug)]
pub struct TcpProbe {
    timeout: Duration,
}

impl TcpProbe {
    pub fn new(config: &TcpProbeConfig) -> Result<TcpProbe, ProviderConfigError> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
