//! Runs claimed and walked in the ticket store, the one way: a test that
//! needs a ticket at some status (another executor's run, a stalled one, a
//! finished one) says which, not how the store gets there.
//!
//! ```ignore
//! let mut a = claim(&store, &web, "r1").holder("A").acquire().await;
//! a.walk(&HIGH_RISK[..2]).await;          // ASSET_ONLINE, VULN_CHECK_DONE
//! let zombie = a.stall();                   // renewals stop, the lock stays
//! ```

use assetscan_operator::cli::config::Config;
use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::ticket::{Status, Ticket};
use assetscan_operator::store::{
    Acquired, AssetKeys, Claim, LeaseGuard, Patch, RedisTarget, StoreError, TicketStore,
};
use assetscan_testkit::redis::RedisServer;
use std::ops::{Deref, DerefMut};

/// The asset id `id`, which the test knows to be valid.
pub fn asset_id(id: &str) -> AssetId {
    AssetId::new(id).unwrap_or_else(|e| panic!("asset id {id:?}: {e}"))
}

/// The Redis keys of `asset` under `config`'s prefix.
pub fn layout_of(config: &Config, asset: &str) -> AssetKeys {
    AssetKeys::new(&config.store().prefix, &asset_id(asset))
}

/// A test's own view of the ticket store `config` names on `redis` (no
/// controller uses it).
pub async fn own_store(redis: &RedisServer, config: &Config) -> TicketStore {
    let target = RedisTarget::Standalone(redis.url());
    (TicketStore::connect(&target, config.store()).await).expect("store connects")
}

/// From `INIT` to `FINISHED` through every status of a confirmed risk.
pub const HIGH_RISK: [Status; 6] = [
    Status::AssetOnline,
    Status::VulnCheckDone,
    Status::HighRiskFound,
    Status::Notifying,
    Status::Notified,
    Status::Finished,
];

/// From `INIT` to `FINISHED` for an asset found offline.
pub const OFFLINE: [Status; 2] = [Status::AssetOffline, Status::Finished];

/// The steps of [`HIGH_RISK`] up to and including `status`.
pub fn high_risk_to(status: Status) -> &'static [Status] {
    let at = HIGH_RISK
        .iter()
        .position(|s| *s == status)
        .unwrap_or_else(|| panic!("{status} is not on the high-risk path"));
    &HIGH_RISK[..=at]
}

/// `path` from `INIT` as the audit stream records it: `(from, to)` pairs.
pub fn transitions(path: &[Status]) -> Vec<(String, String)> {
    let mut from = Status::Init;
    path.iter()
        .map(|to| {
            let pair = (from.to_string(), to.to_string());
            from = *to;
            pair
        })
        .collect()
}

/// A claim of one run, to be acquired: by holder `A`, above floor 0, of no
/// owner, unless said otherwise.
#[must_use]
pub struct ClaimBuilder<'a> {
    store: &'a TicketStore,
    asset: AssetId,
    run: String,
    holder: String,
    owner: Option<String>,
    supersedes: Option<String>,
    floor: u64,
}

/// [`ClaimBuilder`] of `run` of `asset` in `store`.
pub fn claim<'a>(store: &'a TicketStore, asset: &AssetId, run: &str) -> ClaimBuilder<'a> {
    ClaimBuilder {
        store,
        asset: asset.clone(),
        run: run.to_owned(),
        holder: "A".to_owned(),
        owner: None,
        supersedes: None,
        floor: 0,
    }
}

impl<'a> ClaimBuilder<'a> {
    pub fn holder(mut self, holder: &str) -> Self {
        self.holder = holder.to_owned();
        self
    }

    /// The run belongs to `owner` (retired with it).
    pub fn owner(mut self, owner: &str) -> Self {
        self.owner = Some(owner.to_owned());
        self
    }

    /// The claim replaces `earlier`, a run of an earlier generation of the
    /// same owner.
    pub fn supersedes(mut self, earlier: &str) -> Self {
        self.supersedes = Some(earlier.to_owned());
        self
    }

    /// The newest token known outside Redis.
    pub fn floor(mut self, floor: u64) -> Self {
        self.floor = floor;
        self
    }

    /// The store's answer to the claim.
    pub async fn try_acquire(self) -> Result<Held<'a>, StoreError> {
        let claim = Claim {
            owner: self.owner.as_deref(),
            supersedes: self.supersedes.as_deref(),
            ..Claim::new(&self.run, &self.holder, self.floor)
        };
        let Acquired {
            token,
            ticket,
            lease,
        } = self.store.acquire_run(&self.asset, claim).await?;
        Ok(Held {
            writer: Writer {
                store: self.store,
                asset: self.asset,
                run: self.run,
                token,
                ticket,
            },
            lease,
        })
    }

    /// The claimed run; panics when the store refuses the claim.
    pub async fn acquire(self) -> Held<'a> {
        let what = format!("{} claims {} of {}", self.holder, self.run, self.asset);
        self.try_acquire()
            .await
            .unwrap_or_else(|e| panic!("{what}: {e:?}"))
    }

    /// The claimed run, walked along `path`, its lock released: a run some
    /// executor drove there and let go of.
    pub async fn walked(self, path: &[Status]) -> Writer<'a> {
        let mut held = self.acquire().await;
        held.walk(path).await;
        held.release().await
    }
}

/// Whoever writes a run's ticket under one token, lock or not.
pub struct Writer<'a> {
    pub store: &'a TicketStore,
    pub asset: AssetId,
    pub run: String,
    pub token: u64,
    /// The ticket as this writer last wrote (or claimed) it.
    pub ticket: Ticket,
}

impl Writer<'_> {
    /// The store's answer to a write of `to` with `patch`.
    pub async fn try_advance(&self, to: Status, patch: &Patch) -> Result<Ticket, StoreError> {
        self.store
            .advance(&self.asset, &self.run, self.token, to, patch)
            .await
    }

    /// Writes `to` with `patch`; panics when the store refuses.
    pub async fn advance(&mut self, to: Status, patch: &Patch) -> Ticket {
        let written = self
            .try_advance(to, patch)
            .await
            .unwrap_or_else(|e| panic!("{} -> {to}: {e:?}", self.ticket.status));
        self.ticket = written.clone();
        written
    }

    /// Writes `to` with `patch` over its own copy of the ticket (the
    /// executor's fast path: no read of the stored one); panics when the
    /// store refuses.
    pub async fn advance_from_copy(&mut self, to: Status, patch: &Patch) -> Ticket {
        let written = self
            .store
            .advance_from(&self.asset, &self.ticket, self.token, to, patch)
            .await
            .unwrap_or_else(|e| panic!("{} -> {to}: {e:?}", self.ticket.status));
        self.ticket = written.clone();
        written
    }

    /// Writes each status of `path` in turn, learning nothing on the way.
    pub async fn walk(&mut self, path: &[Status]) -> Ticket {
        for to in path {
            self.advance(*to, &Patch::default()).await;
        }
        self.ticket.clone()
    }

    /// The store's refusal of a write of `to`; panics when it is accepted.
    pub async fn refused(&self, to: Status) -> StoreError {
        match self.try_advance(to, &Patch::default()).await {
            Ok(ticket) => panic!("{to} under token {} was accepted: {ticket:?}", self.token),
            Err(e) => e,
        }
    }
}

/// A claimed run with its lock, renewed by the store's watchdog.
pub struct Held<'a> {
    pub writer: Writer<'a>,
    pub lease: LeaseGuard,
}

impl<'a> Held<'a> {
    /// Releases the lock (if the store still has it as this holder's).
    /// What is left is its token, for its late writes.
    pub async fn release(self) -> Writer<'a> {
        self.writer
            .store
            .release(&self.writer.asset, &self.lease)
            .await
            .unwrap_or_else(|e| panic!("release {}: {e:?}", self.writer.asset));
        self.writer
    }

    /// The executor stalls: its renewals stop and its lock stays until it
    /// expires. What is left is its token, for its late writes.
    pub fn stall(self) -> Writer<'a> {
        drop(self.lease);
        self.writer
    }
}

impl<'a> Deref for Held<'a> {
    type Target = Writer<'a>;

    fn deref(&self) -> &Writer<'a> {
        &self.writer
    }
}

impl<'a> DerefMut for Held<'a> {
    fn deref_mut(&mut self) -> &mut Writer<'a> {
        &mut self.writer
    }
}
