//! Is the asset online? The asset's target decides how to ask: a TCP connect
//! to one of its ports, or the inventory service that already knows.

mod error;
mod inventory;
mod tcp;

pub use crate::providers::egress::{EgressConfig, EgressRule};
pub use error::OnlineError;
pub use inventory::{InventoryConfig, InventoryProbe};
pub use tcp::{TcpProbe, TcpProbeConfig};

use crate::providers::error::ProviderConfigError;
use assetscan_domain::Target;
use schemars::JsonSchema;
use serde::Deserialize;

/// `online:` in the config. Both keys are optional; without `inventory`,
/// assets that name an inventory id cannot be checked.
///
/// ```yaml
/// online:
///   tcp: {timeout: 3s}
///   inventory: {baseUrl: https://inventory.internal/api, bearerTokenFrom: {env: INVENTORY_TOKEN}}
/// ```
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct OnlineConfig {
    pub tcp: TcpProbeConfig,
    pub inventory: Option<InventoryConfig>,
}

/// The online check: TCP for `Target::Tcp`, the inventory for
/// `Target::Inventory`.
#[derive(Debug)]
pub struct OnlineProbe {
    tcp: TcpProbe,
    inventory: Option<InventoryProbe>,
}

impl OnlineProbe {
    pub fn from_config(config: &OnlineConfig) -> Result<OnlineProbe, ProviderConfigError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn config_shapes() {
        let empty: OnlineConfig = crate::yaml::from_str("{}").unwrap();
        assert_eq!(empty.tcp.timeout, Duration::from_secs(3));
        assert!(empty.inventory.is_none());
        let both: OnlineConfig = crate::yaml::from_str(
            "{tcp: {timeout: 500ms}, inventory: {baseUrl: 'http://inv', timeout: 2s}}",
        )
        .unwrap();
        assert_eq!(both.tcp.timeout, Duration::from_millis(500));
        assert_eq!(
            both.inventory.unwrap().http.timeout,
            Some(Duration::from_secs(2))
        );
        assert!(crate::yaml::from_str::<OnlineConfig>("{tcp: {timeoutMs: 5}}").is_err());
        assert!(crate::yaml::from_str::<OnlineConfig>("{ping: {}}").is_err());
        let egress = "{tcp: {maxDials: 8, egress: {allow: [10.0.0.0/8], deny: [10.96.0.0/12]}}}";
        let egress: OnlineConfig = crate::yaml::from_str(egress).unwrap();
        assert_eq!(egress.tcp.max_dials, 8);
        assert_eq!(egress.tcp.egress.deny, ["10.96.0.0/12"]);
        assert!(crate::yaml::from_str::<OnlineConfig>("{tcp: {egress: {alow: []}}}").is_err());
        let typo = "{inventory: {baseUrl: 'http://inv', timeuot: 2s}}";
        assert!(crate::yaml::from_str::<OnlineConfig>(typo).is_err());
    }

    /// `..` would make `GET <base>/assets/..` (the segment dropped by URL
    /// normalisation, another path of the inventory API): refused before
    /// any request, whatever built the target.
    #[tokio::test]
    async fn an_inventory_id_stays_one_segment() {
        let config: OnlineConfig =
            crate::yaml::from_str("{inventory: {baseUrl: 'http://127.0.0.1:9/api'}}").unwrap();
        let probe = OnlineProbe::from_config(&config).unwrap();
        for id in ["..", ".", "a/b", "%2e%2e", ""] {
            let err = probe
                .is_online(&Target::Inventory { id: id.into() })
                .await
                .unwrap_err();
            assert!(
                matches!(err, OnlineError::InvalidTarget(_)),
                "{id:?}: {err}"
            );
        }
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
        let loopback: OnlineConfig =
            crate::yaml::from_str("{tcp: {egress: {allow: [127.0.0.1/32]}}}").unwrap();
        let probe = OnlineProbe::from_config(&loopback).unwrap();
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
}
