//! Online as a TCP connection says: the asset is online when one of its
//! ports accepts. The host is resolved once; every address it resolves to
//! passes the egress policy ([`super::egress`]) before any is dialled, and
//! the addresses dialled are those checked (a second resolution could
//! answer differently).

use super::error::OnlineError;
use crate::providers::egress::{EgressConfig, EgressPolicy};
use crate::providers::error::{ProviderConfigError, check_timeout};
use futures::stream::{FuturesUnordered, StreamExt};
use schemars::JsonSchema;
use serde::Deserialize;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

/// The asset is online when a TCP connection to any of its ports succeeds
/// within the timeout.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpProbeConfig {
    /// Budget for name resolution and all connection attempts together.
    /// Default `3s`.
    #[serde(deserialize_with = "crate::duration::config")]
    #[schemars(schema_with = "crate::duration::config_schema")]
    pub timeout: Duration,
    /// Which addresses may be dialled: loopback, link-local (with the
    /// cloud metadata addresses), unspecified, multicast and broadcast
    /// never, unless a more specific `allow` CIDR opens them.
    pub egress: EgressConfig,
    /// At most this many connections (addresses × ports) per target; past
    /// it, the host's later addresses are not tried. Default 64.
    pub max_dials: usize,
}

impl Default for TcpProbeConfig {
    fn default() -> TcpProbeConfig {
        TcpProbeConfig {
            timeout: Duration::from_secs(3),
            egress: EgressConfig::default(),
            max_dials: 64,
        }
    }
}

/// At most this many ports are tried per asset.
const MAX_PORTS: usize = 64;

/// The most `maxDials` may be: every port of [`MAX_PORTS`] on 16 addresses.
const MAX_DIALS: usize = 1024;

/// TCP reachability probe.
#[derive(Clone, Debug)]
pub struct TcpProbe {
    timeout: Duration,
    egress: EgressPolicy,
    max_dials: usize,
}

impl TcpProbe {
    pub fn new(config: &TcpProbeConfig) -> Result<TcpProbe, ProviderConfigError> {
        if !(1..=MAX_DIALS).contains(&config.max_dials) {
            return Err(ProviderConfigError::invalid(
                "tcp probe",
                "maxDials",
                format!("must be between 1 and {MAX_DIALS}"),
            ));
        }
        Ok(TcpProbe {
            timeout: check_timeout("tcp probe", config.timeout)?,
            egress: EgressPolicy::new(&config.egress)?,
            max_dials: config.max_dials,
        })
    }

    /// `Ok(true)` as soon as one port accepts a connection; `Ok(false)` when
    /// every port refuses or none answers within the timeout. The ports are
    /// tried in parallel, so a dead port does not eat the others' budget.
    /// A host with any address the egress policy refuses is refused whole
    /// (a permanent error), before any connection.
    pub async fn check(&self, host: &str, ports: &[u16]) -> Result<bool, OnlineError> {
        validate(host, ports)?;
        let deadline = Instant::now() + self.timeout;
        let ips = resolve(host, deadline).await?;
        for ip in &ips {
            self.egress
                .check(*ip)
                .map_err(|refusal| OnlineError::Refused {
                    host: host.to_owned(),
                    refusal,
                })?;
        }
        let dials = ips
            .iter()
            .flat_map(|ip| ports.iter().map(move |port| SocketAddr::new(*ip, *port)))
            .take(self.max_dials);
        let mut attempts: FuturesUnordered<_> = dials.map(TcpStream::connect).collect();
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

/// Every address of the host, in the resolver's order. An address literal,
/// IPv6 in brackets too (`[::1]`), is its own one address.
async fn resolve(host: &str, deadline: Instant) -> Result<Vec<IpAddr>, OnlineError> {
    let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    if let Ok(ip) = literal.unwrap_or(host).parse::<IpAddr>() {
        return Ok(vec![ip]);
    }
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
    Ok(ips)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::online::EgressRule;
    use assetscan_testkit::listener;
    use tokio::net::TcpListener;

    fn probe(allow: &[&str], max_dials: usize) -> TcpProbe {
        TcpProbe::new(&TcpProbeConfig {
            timeout: Duration::from_secs(2),
            egress: EgressConfig {
                allow: allow.iter().map(|s| s.to_string()).collect(),
                deny: vec![],
            },
            max_dials,
        })
        .unwrap()
    }

    async fn dialled_before(listener: &TcpListener) -> bool {
        listener::dialled_before(listener).await.unwrap()
    }

    #[tokio::test]
    async fn tcp_times_out_as_offline() {
        // 192.0.2.0/24 (TEST-NET-1) is never routed: connects hang or fail.
        let config = TcpProbeConfig {
            timeout: Duration::from_millis(200),
            ..TcpProbeConfig::default()
        };
        let probe = TcpProbe::new(&config).unwrap();
        let started = std::time::Instant::now();
        assert!(!probe.check("192.0.2.1", &[9]).await.unwrap());
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn refused_targets_are_never_dialled() {
        let v4 = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let v6 = TcpListener::bind("[::1]:0").await.unwrap();
        let (p4, p6) = (
            v4.local_addr().unwrap().port(),
            v6.local_addr().unwrap().port(),
        );
        let default = probe(&[], 64);
        for (host, port, rule) in [
            ("127.0.0.1", p4, EgressRule::Loopback),
            ("localhost", p4, EgressRule::Loopback),
            ("[::1]", p6, EgressRule::Loopback),
            ("::1", p6, EgressRule::Loopback),
            ("::ffff:127.0.0.1", p4, EgressRule::Loopback),
            ("0.0.0.0", p4, EgressRule::Unspecified),
            ("169.254.169.254", 80, EgressRule::CloudMetadata),
            ("fd00:ec2::254", 80, EgressRule::CloudMetadata),
        ] {
            let err = default.check(host, &[port]).await.unwrap_err();
            assert!(!err.is_retryable(), "{host}: {err}");
            assert_eq!(EgressRule::named_in(&err.to_string()), Some(rule), "{err}");
        }
        assert!(!dialled_before(&v4).await, "a refused target was dialled");
        assert!(!dialled_before(&v6).await, "a refused target was dialled");
    }

    #[tokio::test]
    async fn an_allowed_cidr_is_dialled_and_the_dials_are_bounded() {
        let open = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = open.local_addr().unwrap().port();
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let allowed = probe(&["127.0.0.1/32"], 64);
        assert!(allowed.check("127.0.0.1", &[closed, port]).await.unwrap());
        assert!(dialled_before(&open).await);
        // `::1` stays refused: only 127.0.0.1 was opened.
        let err = allowed.check("::1", &[port]).await.unwrap_err();
        assert_eq!(
            EgressRule::named_in(&err.to_string()),
            Some(EgressRule::Loopback)
        );
        // One dial: the closed port, never the open one after it.
        let bounded = probe(&["127.0.0.1/32"], 1);
        assert!(!bounded.check("127.0.0.1", &[closed, port]).await.unwrap());
        assert!(!dialled_before(&open).await, "dialled past maxDials");
        for max_dials in [0, MAX_DIALS + 1] {
            let config = TcpProbeConfig {
                max_dials,
                ..TcpProbeConfig::default()
            };
            let err = TcpProbe::new(&config).unwrap_err().to_string();
            assert!(err.contains("maxDials"), "{err}");
        }
    }
}
