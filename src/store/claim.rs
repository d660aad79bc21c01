//! Claiming a run: the first step of the fence. `acquire.lua` takes the
//! asset's lock, draws a new token and claims the ticket with it, in one
//! atomic step (see [`assetscan_domain::fence`]). With the bridge
//! (`keys/mod.rs`), the legacy family's lock, fence and ticket copy are taken,
//! moved and written in the same step; with the bridge turned off after an
//! upgrade, the legacy lock alone is held against 0.1.0 (`keys/layout.rs`).

use super::StoreError;
use super::scripts::{ACQUIRE, AcquireArgs, argument_object};
use super::watchdog::LeaseGuard;
use super::{AssetKeys, TicketStore, assemble, millis};
use assetscan_domain::AssetId;
use assetscan_domain::asset::validate_run;
use assetscan_domain::ticket::{Ticket, now_ms};
use redis::ScriptInvocation;
use tokio::time::Instant;

/// What [`TicketStore::acquire_run`] claims, and what the caller knows.
#[derive(Clone, Copy, Debug)]
pub struct Claim<'a> {
    pub run: &'a str,
    /// What the run belongs to: once it is retired the claim is refused
    /// ([`StoreError::RunRetired`]) instead of creating a ticket.
    pub owner: Option<&'a str>,
    pub holder: &'a str,
    /// The newest token known outside Redis (the status's).
    pub floor: u64,
    /// The caller's copy of the ticket, read just before.
    pub known: Option<&'a Ticket>,
    /// A run of an earlier spec generation of the same owner that this claim
    /// replaces. Its executor may be alive (stalled past its lease) and could
    /// still confirm a risk under its token and then die with nobody to
    /// finish that run. So the claim ends it in the same atomic step:
    /// refused with [`StoreError::EarlierRunAlerting`] while that run is
    /// alerting (it must notify first), else the earlier ticket is failed
    /// under a fresh token and its executor's next write is stale.
    pub supersedes: Option<&'a str>,
}

impl<'a> Claim<'a> {
    /// A claim of `run` by `holder` above `floor`, with nothing else known.
    pub fn new(run: &'a str, holder: &'a str, floor: u64) -> Claim<'a> {
        Claim {
            run,
            owner: None,
            holder,
            floor,
            known: None,
            supersedes: None,
        }
    }
}

/// A taken lock and the claimed ticket.
pub struct Acquired {
    pub token: u64,
    pub ticket: Ticket,
    pub lease: LeaseGuard,
}

impl TicketStore {
    /// Takes the asset's lock and claims the run's ticket (created at `INIT`
    /// if missing) with a new token greater than `floor`. The lease is
    /// renewed by the watchdog until released or dropped. A terminal ticket
    /// is returned as found, with no lock taken (its lease is not held).
    /// For a run that belongs to no owner; see [`TicketStore::acquire_owned`].
    pub async fn acquire(
        &self,
        asset: &AssetId,
        run: &str,
        holder: &str,
        floor: u64,
    ) -> Result<Acquired, StoreError> {
        self.acquire_run(asset, Claim::new(run, holder, floor))
            .await
    }

    /// [`TicketStore::acquire`] for a run of `owner`: refused with
    /// [`StoreError::RunRetired`] once the owner was retired, instead of
    /// creating a ticket for a run whose object is gone.
    pub async fn acquire_owned(
        &self,
        asset: &AssetId,
        run: &str,
        owner: &str,
        holder: &str,
        floor: u64,
    ) -> Result<Acquired, StoreError> {
        let claim = Claim {
            owner: Some(owner),
            ..Claim::new(run, holder, floor)
        };
        self.acquire_run(asset, claim).await
    }

    /// The claim in full: [`TicketStore::acquire`] or
    /// [`TicketStore::acquire_owned`] with what the caller knows. If the
    /// ticket is still at the `known` copy's token and revision, its facts
    /// are not sent back and the claimed ticket carries the copy's. A run it
    /// `supersedes` is ended in the same atomic step (or the claim refused
    /// with [`StoreError::EarlierRunAlerting`]): see [`Claim::supersedes`].
    pub async fn acquire_run(
        &self,
        asset: &AssetId,
        claim: Claim<'_>,
    ) -> Result<Acquired, StoreError> {
        let Claim {
            run,
            owner,
            holder,
            floor,
            known,
            supersedes,
        } = claim;
        validate_run(run)?;
        for id in owner.iter().chain(supersedes.iter()) {
            validate_run(id)?;
        }
        let keys = self.keys(asset);
        let ticket_key = keys.ticket(run);
        let now = now_ms();
        let (mut script, locks) = claim_keys(&keys, run, owner, supersedes);
        let args = argument_object(
            "acquire",
            &AcquireArgs {
                holder,
                ttl_ms: self.ttl_ms(),
                floor,
                now,
                initial: &Ticket::new(asset.as_str(), run, now),
                audit_cap: self.config.audit_cap,
                keep_ticket_ms: millis(self.config.abandon_after),
                keep_asset_ms: self.asset_keep_ms(),
                known: known.map(Ticket::fence),
                supersedes: supersedes.is_some(),
                bridge: keys.legacy().is_some(),
                refuse_legacy_ms: self.refuse_legacy_ms(&keys),
            },
        )?;
        let sent_at = Instant::now();
        let (token, raw, facts, current): (u64, String, Vec<(String, String)>, i64) = script
            .arg(args)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| StoreError::from_redis("acquire", asset.as_str(), e))?;
        let lease = self.watchdog.track(locks, holder.to_owned(), sent_at);
        let ticket = match assemble(&ticket_key, &raw, &facts) {
            Ok(mut ticket) => {
                if let (1, Some(known)) = (current, known) {
                    ticket.facts = known.facts.clone();
                }
                ticket
            }
            Err(err) => {
                self.release(asset, &lease).await.ok();
                return Err(err);
            }
        };
        if ticket.status.is_terminal() {
            // The script took no lock for a run that already ended.
            lease.untrack();
        }
        Ok(Acquired {
            token,
            ticket,
            lease,
        })
    }

    /// How long a claim leaves the closed marker on 0.1.0's lock
    /// ([`AssetKeys::closed_lock`]; 0 with the other layouts):
    /// `tickets.abandonAfter`, renewed by every claim of the asset. That is
    /// how long this store keeps a run in flight that nobody touches, so
    /// the marker is there while this release may still go on with one of
    /// the asset's runs; and a 0.1.0 replica refused meanwhile, which
    /// retries after the holder's ttl, waits no longer than that (a run
    /// that ended is not claimed again: 0.1.0 decides from the AssetScan's
    /// status). The script keeps it at least the lock's ttl.
    fn refuse_legacy_ms(&self, keys: &AssetKeys) -> u64 {
        match keys.closed_lock() {
            Some(_) => millis(self.config.abandon_after),
            None => 0,
        }
    }
}

/// `acquire.lua`'s KEYS for a claim of `run`, and the locks it takes: with
/// the bridge, the legacy family's keys follow from KEYS[7] (KEYS[8] after
/// a superseded run's ticket); closed to 0.1.0, its lock alone, which is
/// not the claim's to renew or release (the marker stays after the run).
fn claim_keys(
    keys: &AssetKeys,
    run: &str,
    owner: Option<&str>,
    supersedes: Option<&str>,
) -> (ScriptInvocation<'static>, Vec<String>) {
    let mut script = ACQUIRE.prepare_invoke();
    script
        .key(keys.lock())
        .key(keys.fence())
        .key(keys.ticket(run))
        .key(keys.audit())
        .key(keys.retired(owner.unwrap_or_default()))
        .key(keys.facts(run));
    if let Some(earlier) = supersedes {
        script.key(keys.ticket(earlier));
    }
    let mut locks = vec![keys.lock()];
    if let Some(lock) = keys.closed_lock() {
        script.key(lock);
    }
    let Some(legacy) = keys.legacy() else {
        return (script, locks);
    };
    script
        .key(legacy.lock())
        .key(legacy.fence())
        .key(legacy.ticket(run))
        .key(legacy.facts(run))
        .key(legacy.retired(owner.unwrap_or_default()));
    if let Some(earlier) = supersedes {
        script.key(legacy.ticket(earlier));
    }
    locks.push(legacy.lock());
    (script, locks)
}
