//! The egress policy on a client whose URL a tenant wrote (a channel a team
//! defined): every address it connects to passes [`EgressPolicy`] first.
//!
//! The client resolves names through [`EgressGuard`], which refuses the
//! host when any of its addresses is refused and hands the connector only
//! the addresses it checked: the address judged is the address dialled,
//! and a name that changes its answer between a check and a connect (DNS
//! rebinding) is judged again at the connect. A URL naming an address
//! bypasses name resolution and is checked before the request. No proxy is
//! used (the proxy's address would be the one dialled), and the webhook
//! profile follows no redirect.

use crate::providers::egress::{EgressPolicy, Refusal};
use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// The egress policy a client's connections pass.
#[derive(Clone, Debug)]
pub struct EgressGuard(Arc<EgressPolicy>);

impl PartialEq for EgressGuard {
    fn eq(&self, other: &EgressGuard) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl EgressGuard {
    pub fn new(policy: Arc<EgressPolicy>) -> EgressGuard {
        EgressGuard(policy)
    }

    /// A URL whose host is an address: that address, judged. A URL naming
    /// a host is judged when the name is resolved.
    pub fn check_literal(&self, url: &Url) -> Result<(), Refusal> {
        match literal(url) {
            Some(address) => self.0.check(address),
            None => Ok(()),
        }
    }

    /// Every address `url`'s host has now, each judged: what a channel's
    /// condition reports before any delivery.
    pub async fn check_url(&self, url: &Url) -> Result<(), GuardError> {
        self.check_literal(url).map_err(GuardError::Refused)?;
        if let (None, Some(name)) = (literal(url), url.host_str()) {
            self.resolve_checked(name).await?;
        }
        Ok(())
    }

    async fn resolve_checked(&self, name: &str) -> Result<Vec<SocketAddr>, GuardError> {
        let addresses: Vec<SocketAddr> = tokio::net::lookup_host((name, 0))
            .await
            .map_err(|e| GuardError::Resolve(e.to_string()))?
            .collect();
        for address in &addresses {
            self.0.check(address.ip()).map_err(GuardError::Refused)?;
        }
        Ok(addresses)
    }
}

/// The address a URL's host is, when it is one (`[::1]` as written in a URL).
fn literal(url: &Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.parse().ok()
}

/// Why a guarded host may not be dialled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    #[error(transparent)]
    Refused(Refusal),
    #[error("cannot resolve the host: {0}")]
    Resolve(String),
}

impl Resolve for EgressGuard {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = self.clone();
        Box::pin(async move {
            match guard.resolve_checked(name.as_str()).await {
                Ok(addresses) => Ok(Box::new(addresses.into_iter()) as Addrs),
                Err(GuardError::Refused(refusal)) => Err(Box::new(refusal) as _),
                Err(e) => Err(Box::new(e) as _),
            }
        })
    }
}
