//! Ending holds and runs: renewing and releasing a lock, and retiring a
//! deleted owner's runs for good.

use super::scripts::{RELEASE, RENEW, RETIRE, ReleaseArgs, RetireArgs, argument_object};
use super::watchdog::LeaseGuard;
use super::{AssetKeys, StoreError, TicketStore, millis};
use assetscan_domain::AssetId;
use assetscan_domain::asset::validate_run;
use assetscan_domain::ticket::now_ms;

impl TicketStore {
    /// Ends `owner`'s runs for good: leaves the owner's tombstone (kept for
    /// [`StoreConfig::abandon_after`]), fails each listed run still in
    /// progress under a fresh token and removes the listed tickets, all in
    /// one atomic step that never creates a ticket. Safe to repeat and to
    /// run concurrently. Returns how many tickets it removed.
    ///
    /// A ticket created between listing the runs and this call is not in
    /// `runs`: list again afterwards (the tombstone keeps any further one
    /// from appearing) and retire what the second listing finds.
    ///
    /// With the bridge, both families are retired, the legacy one first:
    /// from then on an executor of either layout is refused the owner's
    /// runs. The count is of the tickets removed in the namespaced family.
    pub async fn retire(
        &self,
        asset: &AssetId,
        owner: &str,
        runs: &[String],
        holder: &str,
    ) -> Result<usize, StoreError> {
        validate_run(owner)?;
        let keys = self.keys(asset);
        if let Some(legacy) = keys.legacy() {
            self.retire_family(asset, &legacy, &keys.audit(), owner, runs, holder)
                .await?;
        }
        self.retire_family(asset, &keys, &keys.audit(), owner, runs, holder)
            .await
    }

    /// One `retire.lua` call over one key family, audited in `audit`.
    async fn retire_family(
        &self,
        asset: &AssetId,
        keys: &AssetKeys,
        audit: &str,
        owner: &str,
        runs: &[String],
        holder: &str,
    ) -> Result<usize, StoreError> {
        let mut invocation = RETIRE.key(keys.fence());
        invocation.key(audit).key(keys.retired(owner));
        for run in runs {
            validate_run(run)?;
            invocation.key(keys.ticket(run));
        }
        for run in runs {
            invocation.key(keys.facts(run));
        }
        let args = RetireArgs {
            holder,
            now: now_ms(),
            tombstone_ms: millis(self.config.abandon_after).max(1),
            tickets: runs.len(),
            audit_cap: self.config.audit_cap,
        };
        invocation
            .arg(argument_object("retire", &args)?)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| StoreError::from_redis("retire", asset.as_str(), e))
    }

    /// Renews one lock now (the watchdog batches this; exposed for tools).
    pub async fn renew(&self, asset: &AssetId, holder: &str) -> Result<bool, StoreError> {
        let renewed: i64 = RENEW
            .key(self.keys(asset).lock())
            .arg(holder)
            .arg(self.ttl_ms())
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(StoreError::redis("renew"))?;
        Ok(renewed == 1)
    }

    /// Stops renewal (synchronously, first) and releases the lock if still
    /// ours. Returns whether Redis released it.
    pub async fn release(&self, asset: &AssetId, lease: &LeaseGuard) -> Result<bool, StoreError> {
        lease.untrack();
        self.release_holder(asset, lease.holder()).await
    }

    /// Releases the lock for `holder`, if it holds it (never another's).
    pub async fn release_holder(&self, asset: &AssetId, holder: &str) -> Result<bool, StoreError> {
        let keys = self.keys(asset);
        let mut invocation = RELEASE.key(keys.lock());
        invocation.key(keys.audit());
        let legacy = keys.legacy();
        if let Some(legacy) = &legacy {
            invocation.key(legacy.lock());
        }
        let args = ReleaseArgs {
            holder,
            now: now_ms(),
            audit_cap: self.config.audit_cap,
            bridge: legacy.is_some(),
        };
        let released: i64 = invocation
            .arg(argument_object("release", &args)?)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(StoreError::redis("release"))?;
        Ok(released == 1)
    }
}
