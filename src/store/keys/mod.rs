//! The Redis key layout. Every key of one asset carries the asset id as a
//! hash tag, so one Lua script may touch them all, also on Redis Cluster.
//!
//! An asset's identity is `(namespace, assetId)`: an AssetScan's keys are
//! `<prefix>:n:<namespace>:{<asset>}:…`. They keep the legacy hash tag, so
//! one script touches both families in one slot, and never collide with a
//! legacy key (`<prefix>:{<asset>}:…`, the layout of runs of no namespace
//! and of the previous release): after the prefix a legacy key goes on
//! with the braced tag, a namespaced one with `n`, and a namespace name
//! holds neither `:` nor braces. While the bridge is on
//! ([`StoreConfig::identity_bridge`](crate::store::StoreConfig)), the legacy
//! family of the same asset is taken along ([`AssetKeys::legacy`]) and the
//! audit stream stays the legacy one; once it is turned off after an
//! upgrade ([`Layout::Closed`]), only the legacy lock is named, which a
//! claim holds against 0.1.0 ([`AssetKeys::closed_lock`]).

pub(super) mod layout;

use assetscan_domain::AssetId;
use layout::Layout;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssetKeys {
    base: String,
    /// The legacy family's base, while the bridge takes it along.
    legacy: Option<String>,
    /// The legacy lock, in a [`Layout::Closed`] deployment.
    closed_lock: Option<String>,
    /// Where the audit stream lives: the legacy family's base while the
    /// bridge is on (one history of the asset across both releases).
    audit_base: String,
}

impl AssetKeys {
    /// The legacy layout, `<prefix>:{<asset>}:…`: runs of no namespace.
    pub fn new(prefix: &str, asset: &AssetId) -> AssetKeys {
        let base = format!("{prefix}:{{{asset}}}");
        AssetKeys {
            audit_base: base.clone(),
            base,
            legacy: None,
            closed_lock: None,
        }
    }

    /// The layout of `(namespace, asset)`, `<prefix>:n:<namespace>:{<asset>}:…`,
    /// with what `layout` names of the legacy family: all of it with the
    /// bridge, its lock once closed, nothing in a new install.
    pub fn namespaced(prefix: &str, namespace: &str, asset: &AssetId, layout: Layout) -> AssetKeys {
        let base = format!("{prefix}:n:{namespace}:{{{asset}}}");
        let legacy = format!("{prefix}:{{{asset}}}");
        let bridge = layout == Layout::Bridged;
        AssetKeys {
            audit_base: if bridge { legacy.clone() } else { base.clone() },
            base,
            closed_lock: (layout == Layout::Closed).then(|| format!("{legacy}:lock")),
            legacy: bridge.then_some(legacy),
        }
    }

    /// The legacy family's keys the bridge also takes, writes and retires.
    pub fn legacy(&self) -> Option<AssetKeys> {
        self.legacy.as_ref().map(|base| AssetKeys {
            base: base.clone(),
            legacy: None,
            closed_lock: None,
            audit_base: base.clone(),
        })
    }

    /// 0.1.0's lock of the asset, with the bridge off after an upgrade
    /// ([`Layout::Closed`]): a claim waits while a 0.1.0 executor holds it
    /// and otherwise holds it by [`layout::CLOSED_HOLDER`], so that
    /// a replica of 0.1.0 started since is refused the asset.
    pub fn closed_lock(&self) -> Option<&str> {
        self.closed_lock.as_deref()
    }

    /// `…:lock`: holder id, PX ttl.
    pub fn lock(&self) -> String {
        format!("{}:lock", self.base)
    }

    /// `…:fence`: the monotonic counter.
    pub fn fence(&self) -> String {
        format!("{}:fence", self.base)
    }

    /// `…:ticket:<run>`: the ticket JSON.
    pub fn ticket(&self, run: &str) -> String {
        format!("{}:ticket:{run}", self.base)
    }

    /// `…:facts:<run>`: the run's facts, one hash field per fact, expiring
    /// and removed with the ticket.
    pub fn facts(&self, run: &str) -> String {
        format!("{}:facts:{run}", self.base)
    }

    /// Pattern matching every ticket of the asset (of this family).
    pub fn ticket_pattern(&self) -> String {
        format!("{}:ticket:*", self.base)
    }

    /// `…:retired:<owner>`: the tombstone of an owner whose runs were
    /// retired; `acquire.lua` refuses its runs while it exists. The empty
    /// owner's never exists: runs of no owner pass it.
    pub fn retired(&self, owner: &str) -> String {
        format!("{}:retired:{owner}", self.base)
    }

    /// `…:audit`: capped stream of accepted and rejected writes.
    pub fn audit(&self) -> String {
        format!("{}:audit", self.audit_base)
    }
}

/// Whether `namespace` can name a key family: a Kubernetes namespace name
/// (a DNS label) always can; anything holding `:`, braces, whitespace or
/// control characters, or empty, or longer than 63 bytes, cannot.
pub fn valid_namespace(namespace: &str) -> bool {
    !namespace.is_empty()
        && namespace.len() <= 63
        && !namespace
            .chars()
            .any(|c| matches!(c, ':' | '{' | '}') || c.is_whitespace() || c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_one_hash_tag() {
        let keys = AssetKeys::new("asc", &AssetId::new("web-01").unwrap());
        assert_eq!(keys.lock(), "asc:{web-01}:lock");
        assert_eq!(keys.fence(), "asc:{web-01}:fence");
        assert_eq!(keys.ticket("r1"), "asc:{web-01}:ticket:r1");
        assert_eq!(keys.facts("r1"), "asc:{web-01}:facts:r1");
        assert_eq!(keys.audit(), "asc:{web-01}:audit");
        assert_eq!(keys.retired("0a1b2c3d"), "asc:{web-01}:retired:0a1b2c3d");
        assert_eq!(keys.legacy(), None);
    }

    #[test]
    fn namespaced_keys_keep_the_legacy_tag() {
        let asset = AssetId::new("web-01").unwrap();
        let keys = AssetKeys::namespaced("asc", "team-a", &asset, Layout::Namespaced);
        assert_eq!(keys.lock(), "asc:n:team-a:{web-01}:lock");
        assert_eq!(keys.ticket("r1"), "asc:n:team-a:{web-01}:ticket:r1");
        assert_eq!(keys.audit(), "asc:n:team-a:{web-01}:audit");
        assert_eq!((keys.legacy(), keys.closed_lock()), (None, None));
        let bridged = AssetKeys::namespaced("asc", "team-a", &asset, Layout::Bridged);
        assert_eq!(bridged.fence(), "asc:n:team-a:{web-01}:fence");
        assert_eq!(bridged.audit(), "asc:{web-01}:audit");
        assert_eq!(bridged.legacy(), Some(AssetKeys::new("asc", &asset)));
        assert_eq!(bridged.closed_lock(), None);
        let closed = AssetKeys::namespaced("asc", "team-a", &asset, Layout::Closed);
        assert_eq!(closed.audit(), "asc:n:team-a:{web-01}:audit");
        assert_eq!(closed.legacy(), None);
        assert_eq!(closed.closed_lock(), Some("asc:{web-01}:lock"));
    }

    #[test]
    fn namespaces_that_could_collide_are_refused() {
        assert!(valid_namespace("team-a"));
        for bad in ["", "a:b", "{x}", "a b", &"n".repeat(64)] {
            assert!(!valid_namespace(bad), "{bad}");
        }
    }
}
