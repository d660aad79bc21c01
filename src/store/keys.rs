//! The Redis key layout. Every key of one asset carries the asset id as a
//! hash tag, so one Lua script may touch them all, also on Redis Cluster.

use assetscan_domain::AssetId;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssetKeys {
    base: String,
}

impl AssetKeys {
    pub fn new(prefix: &str, asset: &AssetId) -> AssetKeys {
        AssetKeys {
            base: format!("{prefix}:{{{asset}}}"),
        }
    }

    /// `<prefix>:{<asset>}:lock`: holder id, PX ttl.
    pub fn lock(&self) -> String {
        format!("{}:lock", self.base)
    }

    /// `<prefix>:{<asset>}:fence`: the monotonic counter; never expires.
    pub fn fence(&self) -> String {
        format!("{}:fence", self.base)
    }

    /// `<prefix>:{<asset>}:ticket:<run>`: the ticket JSON.
    pub fn ticket(&self, run: &str) -> String {
        format!("{}:ticket:{run}", self.base)
    }

    /// `<prefix>:{<asset>}:facts:<run>`: the run's facts, one hash field per
    /// fact, expiring and removed with the ticket.
    pub fn facts(&self, run: &str) -> String {
        format!("{}:facts:{run}", self.base)
    }

    /// Pattern matching every ticket of the asset.
    pub fn ticket_pattern(&self) -> String {
        format!("{}:ticket:*", self.base)
    }

    /// `<prefix>:{<asset>}:retired:<owner>`: the tombstone of an owner whose
    /// runs were retired; `acquire.lua` refuses its runs while it exists.
    /// The empty owner's never exists: runs of no owner pass it.
    pub fn retired(&self, owner: &str) -> String {
        format!("{}:retired:{owner}", self.base)
    }

    /// `<prefix>:{<asset>}:audit`: capped stream of accepted and rejected writes.
    pub fn audit(&self) -> String {
        format!("{}:audit", self.base)
    }
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
    }
}
