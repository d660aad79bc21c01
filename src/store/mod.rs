//! The fenced ticket store: the zombie-write defence, in one place.
//!
//! How a stale executor is stopped, top to bottom:
//! 1. [`TicketStore::acquire`] runs `acquire.lua`: it takes the asset's lock
//!    and, in the same atomic step, draws a new fencing token (strictly
//!    greater than every earlier one, and than the caller's floor) and
//!    **claims** the ticket with it. From then on, any older token is stale.
//! 2. The [`Watchdog`] renews the lock while the holder works and fires the
//!    lease's cancellation when it cannot (or when the holder's own monotonic
//!    deadline passes, e.g. after a pause). That stops work early; it proves
//!    nothing about writes.
//! 3. [`TicketStore::advance`] runs `advance.lua`, the only write to a
//!    ticket after its claim: the caller's token must equal the ticket's, and
//!    the transition must be in the table. A stale token is rejected
//!    server-side, atomically, and recorded in the audit stream; the caller
//!    gets [`StoreError::StaleToken`] and must stop at once.
//! 4. The CR status is fenced the same way by the CRD's CEL rule on
//!    (fencingToken, revision), and `acquire` takes the status token as floor
//!    so tokens never go backwards even after Redis loses data.
//! 5. When the owner of runs (the AssetScan) is deleted,
//!    [`TicketStore::retire`] runs `retire.lua`: it leaves a tombstone, fails
//!    every run still in progress under a fresh token and removes the
//!    tickets, creating nothing. An executor that read the object before the
//!    deletion and acquires afterwards ([`TicketStore::acquire_owned`]) is
//!    refused with [`StoreError::RunRetired`]; one still driving a run finds
//!    its ticket gone ([`StoreError::TicketNotFound`]) on its next write.
//!    Every ticket that is not written for [`StoreConfig::abandon_after`]
//!    expires, so no ticket outlives its object without bound.
//!
//! What a write costs does not depend on what the ticket has learned: the
//! ticket key holds the fenced header (status, token, revision, holder,
//! steps), which the scripts check and rewrite; the facts live beside it in
//! a hash, one field per fact, written as the caller's JSON only when a step
//! learns them and never decoded in Redis. Each operation is one round trip.
//! Because every accepted write proves that nobody else wrote since this
//! executor's last one (the token would have changed), the executor keeps
//! its copy of the facts and gets only the header back
//! ([`TicketStore::advance_from`]).

mod audit;
mod conn;
mod error;
mod keys;
mod scripts;
mod watchdog;

pub use audit::AuditEntry;
pub use conn::{
    Credentials, RedisConn, RedisSecurity, RedisTarget, SentinelTarget, TlsCertificates,
};
pub use error::StoreError;
pub use keys::AssetKeys;
pub use watchdog::{LeaseGuard, Watchdog, WatchdogStats};

use assetscan_domain::AssetId;
use assetscan_domain::asset::validate_run;
use assetscan_domain::ticket::{LastError, Status, Step, Ticket, now_ms};
use redis::AsyncCommands;
use scripts::{ACQUIRE, ADVANCE, RELEASE, RENEW, RETIRE};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// Store settings.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Key prefix (`asc` by default).
    pub prefix: String,
    /// Lock time to live; the watchdog renews at a third of it.
    pub lock_ttl: Duration,
    /// Approximate cap of each asset's audit stream.
    pub audit_cap: u32,
    /// How long a terminal ticket is kept; zero keeps it until deleted.
    pub terminal_retention: Duration,
    /// How long a ticket that is not terminal is kept after its last write
    /// (a run nobody drives any more), and how long a retired owner's
    /// tombstone keeps late executors out. Must be positive.
    pub abandon_after: Duration,
    /// Bound on connecting and on each Redis response.
    pub timeout: Duration,
    /// Credentials and TLS settings applied to every connection.
    pub security: RedisSecurity,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            prefix: "asc".to_owned(),
            lock_ttl: Duration::from_secs(30),
            audit_cap: 1000,
            terminal_retention: Duration::from_secs(7 * 24 * 3600),
            abandon_after: Duration::from_secs(24 * 3600),
            timeout: Duration::from_secs(5),
            security: RedisSecurity::default(),
        }
    }
}

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

/// What a step learned, merged into the ticket by `advance.lua`. Its JSON
/// is the script's patch argument; the facts travel beside it, each as its
/// own JSON, so that the script stores them without decoding them.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Patch {
    /// Facts by name (`online`, `vulnerabilities`, …), each replaced whole.
    #[serde(skip)]
    pub facts: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub complete_step: Option<Step>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub attempts: BTreeMap<Step, u32>,
    /// `Some(None)` clears the last error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<Option<LastError>>,
}

impl Patch {
    /// Sets one fact.
    pub fn fact(mut self, name: &str, value: impl Serialize) -> Patch {
        let value = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
        self.facts.insert(name.to_owned(), value);
        self
    }

    /// Marks `step` done and clears the last error.
    pub fn completes(mut self, step: Step) -> Patch {
        self.complete_step = Some(step);
        self.last_error = Some(None);
        self
    }
}

/// The ticket store over one Redis deployment.
#[derive(Clone)]
pub struct TicketStore {
    conn: RedisConn,
    config: StoreConfig,
    watchdog: Watchdog,
}

impl TicketStore {
    /// Connects and starts the process's watchdog.
    pub async fn connect(
        target: &RedisTarget,
        config: StoreConfig,
    ) -> Result<TicketStore, StoreError> {
        let conn = RedisConn::connect(target, &config.security, config.timeout).await?;
        let watchdog = Watchdog::start(conn.clone(), config.lock_ttl);
        Ok(TicketStore {
            conn,
            config,
            watchdog,
        })
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    pub fn watchdog(&self) -> &Watchdog {
        &self.watchdog
    }

    /// Requests this store and its watchdog sent to Redis so far: what an
    /// operation costs in round trips, as the client sees it.
    pub fn round_trips(&self) -> u64 {
        self.conn.round_trips()
    }

    pub fn keys(&self, asset: &AssetId) -> AssetKeys {
        AssetKeys::new(&self.config.prefix, asset)
    }

    /// Reads a ticket without the lock: the reconcile fast path. Header and
    /// facts come in one round trip (two commands, pipelined; both keys are
    /// in the asset's hash slot).
    pub async fn get_ticket(
        &self,
        asset: &AssetId,
        run: &str,
    ) -> Result<Option<Ticket>, StoreError> {
        validate_run(run)?;
        let keys = self.keys(asset);
        let key = keys.ticket(run);
        let (raw, facts): (Option<String>, Vec<(String, String)>) = redis::pipe()
            .get(&key)
            .hgetall(keys.facts(run))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(|source| StoreError::Redis {
                op: "get ticket",
                source,
            })?;
        raw.map(|raw| assemble(&key, &raw, &facts)).transpose()
    }

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
        let initial =
            serde_json::to_string(&Ticket::new(asset.as_str(), run, now)).map_err(|e| {
                StoreError::Protocol {
                    script: "acquire",
                    reason: e.to_string(),
                }
            })?;
        let sent_at = Instant::now();
        let mut script = ACQUIRE.prepare_invoke();
        script
            .key(keys.lock())
            .key(keys.fence())
            .key(&ticket_key)
            .key(keys.audit())
            .key(keys.retired(owner.unwrap_or_default()))
            .key(keys.facts(run));
        if let Some(earlier) = supersedes {
            script.key(keys.ticket(earlier));
        }
        let (token, raw, facts, current): (u64, String, Vec<(String, String)>, i64) = script
            .arg(holder)
            .arg(self.ttl_ms())
            .arg(floor)
            .arg(now)
            .arg(initial)
            .arg(self.config.audit_cap)
            .arg(millis(self.config.abandon_after))
            .arg(self.asset_keep_ms())
            .arg(known.map_or_else(String::new, |k| k.fence().script_arg()))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| StoreError::from_redis("acquire", asset.as_str(), e))?;
        let lease = self.watchdog.track(keys.lock(), holder.to_owned(), sent_at);
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

    /// Moves the ticket to `to` with `patch`, if `token` is still the
    /// ticket's and the transition is legal, and returns it with all its
    /// facts (read in the same step). For tools and tests; an executor
    /// holding the ticket uses [`TicketStore::advance_from`].
    pub async fn advance(
        &self,
        asset: &AssetId,
        run: &str,
        token: u64,
        to: Status,
        patch: &Patch,
    ) -> Result<Ticket, StoreError> {
        let key = self.keys(asset).ticket(run);
        let (raw, facts): (String, Vec<(String, String)>) = self
            .send_advance(asset, run, token, to, patch, true)
            .await?;
        assemble(&key, &raw, &facts)
    }

    /// [`TicketStore::advance`] by the executor holding `base`, the ticket
    /// as of its last accepted write or its claim: the one write path after
    /// a claim. Only the patch's facts are sent and only the header comes
    /// back; the facts are `base`'s with the patch's. That is exact because
    /// an accepted write proves that nobody wrote since `base` (any other
    /// writer would have changed the token); should the revision say
    /// otherwise, the facts are read again.
    pub async fn advance_from(
        &self,
        asset: &AssetId,
        base: &Ticket,
        token: u64,
        to: Status,
        patch: &Patch,
    ) -> Result<Ticket, StoreError> {
        let key = self.keys(asset).ticket(&base.run);
        let raw: String = self
            .send_advance(asset, &base.run, token, to, patch, false)
            .await?;
        let mut ticket = assemble(&key, &raw, &[])?;
        if ticket.revision != base.revision + 1 {
            return self
                .get_ticket(asset, &base.run)
                .await?
                .ok_or(StoreError::TicketNotFound { key });
        }
        ticket.facts = base.facts.clone();
        for (name, value) in &patch.facts {
            ticket
                .facts
                .set(name, value)
                .map_err(|e| corrupt(&key, &e))?;
        }
        Ok(ticket)
    }

    /// One `advance.lua` call; with `with_facts`, the reply also carries
    /// the facts hash.
    async fn send_advance<T: redis::FromRedisValue>(
        &self,
        asset: &AssetId,
        run: &str,
        token: u64,
        to: Status,
        patch: &Patch,
        with_facts: bool,
    ) -> Result<T, StoreError> {
        validate_run(run)?;
        let keys = self.keys(asset);
        let ticket_key = keys.ticket(run);
        let protocol = |e: serde_json::Error| StoreError::Protocol {
            script: "advance",
            reason: e.to_string(),
        };
        let mut invocation = ADVANCE.key(&ticket_key);
        invocation
            .key(keys.audit())
            .key(keys.facts(run))
            .arg(token)
            .arg(to.as_str())
            .arg(now_ms())
            .arg(serde_json::to_string(patch).map_err(protocol)?)
            .arg(millis(self.config.terminal_retention))
            .arg(self.config.audit_cap)
            .arg(millis(self.config.abandon_after))
            .arg(if with_facts { "1" } else { "0" });
        for (name, value) in &patch.facts {
            invocation
                .arg(name)
                .arg(serde_json::to_string(value).map_err(protocol)?);
        }
        invocation
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| StoreError::from_redis("advance", &ticket_key, e))
    }

    /// Ends `owner`'s runs for good: leaves the owner's tombstone (kept for
    /// [`StoreConfig::abandon_after`]), fails each listed run still in
    /// progress under a fresh token and removes the listed tickets, all in
    /// one atomic step that never creates a ticket. Safe to repeat and to
    /// run concurrently. Returns how many tickets it removed.
    ///
    /// A ticket created between listing the runs and this call is not in
    /// `runs`: list again afterwards (the tombstone keeps any further one
    /// from appearing) and retire what the second listing finds.
    pub async fn retire(
        &self,
        asset: &AssetId,
        owner: &str,
        runs: &[String],
        holder: &str,
    ) -> Result<usize, StoreError> {
        validate_run(owner)?;
        let keys = self.keys(asset);
        let mut invocation = RETIRE.key(keys.fence());
        invocation.key(keys.audit()).key(keys.retired(owner));
        for run in runs {
            validate_run(run)?;
            invocation.key(keys.ticket(run));
        }
        for run in runs {
            invocation.key(keys.facts(run));
        }
        invocation
            .arg(holder)
            .arg(now_ms())
            .arg(millis(self.config.abandon_after).max(1))
            .arg(self.config.audit_cap)
            .arg(runs.len())
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
            .map_err(|source| StoreError::Redis {
                op: "renew",
                source,
            })?;
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
        let released: i64 = RELEASE
            .key(keys.lock())
            .key(keys.audit())
            .arg(holder)
            .arg(now_ms())
            .arg(self.config.audit_cap)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|source| StoreError::Redis {
                op: "release",
                source,
            })?;
        Ok(released == 1)
    }

    /// The asset's audit stream, oldest first (at most `count` entries).
    pub async fn audit(
        &self,
        asset: &AssetId,
        count: usize,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        audit::read(&mut self.conn.clone(), &self.keys(asset).audit(), count).await
    }

    /// Run ids of the asset's tickets.
    pub async fn runs(&self, asset: &AssetId) -> Result<Vec<String>, StoreError> {
        let keys = self.keys(asset);
        let prefix = keys.ticket("");
        let mut found: Vec<String> = self
            .scan(&keys.ticket_pattern())
            .await?
            .into_iter()
            .filter_map(|k| k.strip_prefix(&prefix).map(str::to_owned))
            .collect();
        found.sort();
        Ok(found)
    }

    /// Every ticket key under the prefix (`ticket list`).
    pub async fn ticket_keys(&self) -> Result<Vec<String>, StoreError> {
        let mut found = self
            .scan(&format!("{}:{{*}}:ticket:*", self.config.prefix))
            .await?;
        found.sort();
        Ok(found)
    }

    /// Checks that Redis answers (readiness).
    pub async fn ping(&self) -> Result<(), StoreError> {
        redis::cmd("PING")
            .query_async::<String>(&mut self.conn.clone())
            .await
            .map(|_| ())
            .map_err(|source| StoreError::Redis { op: "ping", source })
    }

    /// Keys matching `pattern`: SCAN on a standalone server; on a Cluster,
    /// KEYS on every primary (the client merges the answers). Both serve
    /// troubleshooting and finalizers, never the hot path.
    async fn scan(&self, pattern: &str) -> Result<Vec<String>, StoreError> {
        let op = "scan";
        let mut conn = self.conn.clone();
        let mut found: Vec<String> = if conn.is_cluster() {
            conn.keys(pattern)
                .await
                .map_err(|source| StoreError::Redis { op, source })?
        } else {
            use futures::TryStreamExt;
            // A thousand keys a step: a deletion lists the asset's tickets,
            // and with the default of ten that is a round trip per ten keys
            // of the whole database.
            let options = redis::ScanOptions::default()
                .with_pattern(pattern)
                .with_count(1000);
            conn.scan_options::<String>(options)
                .await
                .map_err(|source| StoreError::Redis { op, source })?
                .try_collect()
                .await
                .map_err(|source| StoreError::Redis { op, source })?
        };
        found.sort();
        found.dedup();
        Ok(found)
    }

    fn ttl_ms(&self) -> u64 {
        millis(self.config.lock_ttl)
    }

    /// How long an asset's fence and audit stream are kept after a claim:
    /// as long as anything of the asset can still be read, or forever when
    /// terminal tickets are kept until deleted.
    fn asset_keep_ms(&self) -> u64 {
        if self.config.terminal_retention.is_zero() {
            0
        } else {
            millis(
                self.config
                    .terminal_retention
                    .max(self.config.abandon_after),
            )
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A stored ticket: the header at `key` with the fields of its facts hash.
/// `cjson` writes an empty array as `{}`; the ticket types accept both (see
/// `ticket::lenient_vec`).
///
/// A header of the older layout holds its facts itself. Those win over the
/// hash: only an executor of the older contract writes facts there, and it
/// can only have done so after the hash's last write (the scripts move them
/// into the hash at the ticket's next write).
fn assemble(key: &str, header: &str, facts: &[(String, String)]) -> Result<Ticket, StoreError> {
    let mut ticket: Ticket = serde_json::from_str(header).map_err(|e| corrupt(key, &e))?;
    let inline = std::mem::take(&mut ticket.facts);
    for (name, json) in facts {
        ticket
            .facts
            .set(name, json.as_str())
            .map_err(|e| corrupt(key, &e))?;
    }
    ticket.facts.overlay(inline);
    Ok(ticket)
}

fn corrupt(key: &str, err: &serde_json::Error) -> StoreError {
    StoreError::TicketCorrupt {
        key: key.to_owned(),
        reason: err.to_string(),
    }
}
