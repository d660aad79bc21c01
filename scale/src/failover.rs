//! `--failover`: replicas of one shard (not sharded among themselves, a
//! live membership), one of them SIGKILLed halfway through a first round,
//! as a node that dies takes its pod. What a user relies on: the dead
//! replica's share is picked up by the others soon after its heartbeat
//! lapses, every run finishes, none runs or notifies twice.
//!
//! The dead replica's share is computed as the replicas computed it: the
//! membership in Redis at the kill, and each object's preferred member
//! among it (rendezvous hashing, the operator's own function). Of that
//! share, the objects not finished once the process is gone (listed
//! after its exit, so that nothing it wrote is still on its way) are the
//! ones the others must pick up; their pick-up is when the first of them
//! is seen finished, a run a survivor made from start to end.

use crate::progress::{self, FinishTimes};
use crate::replicas::Replicas;
use crate::report::mark;
use crate::run::{self, STOP_GRACE, Settings};
use crate::stack::Stack;
use crate::{footprint, stack};
use anyhow::{Context as _, Result};
use assetscan_operator::domain::share::preferred;
use assetscan_operator::domain::ticket::Status;
use assetscan_operator::kubernetes::controller::settings::ScanStartsSection;
use assetscan_operator::store::RedisSection;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::{Duration, Instant};

/// What is added to `membershipTtl` for the pick-up's target: the lock
/// of a run the dead replica held lapses (`lock.ttl`), and a start.
const PICK_UP_SLACK: Duration = Duration::from_secs(10);

/// Reconciles that took over another replica's run as overdue.
const TAKEN_OVER: &str = "assetscan_reconciles_total{result=\"taken_over_overdue\"}";

/// The pick-up's target: the default (and the chart's) `membershipTtl`
/// plus 10 s, what an install is promised. A run with another ttl is
/// judged against it too: a longer ttl leaves a dead replica's share
/// waiting longer, and the check says so.
fn target() -> Duration {
    ScanStartsSection::default().membership_ttl + PICK_UP_SLACK
}

/// What the failover run found.
pub struct Failover {
    pub count: usize,
    pub replicas: u32,
    /// The run's `membershipTtl`.
    pub ttl: Duration,
    /// Finished when the SIGKILL was sent, and how long into the round.
    pub finished_at_kill: usize,
    pub killed_after: Duration,
    pub killed: String,
    /// From the SIGKILL until the first survivor, and until every one,
    /// counted one member less (`assetscan_members`); `None` without a
    /// membership.
    pub membership_dropped: Option<(Duration, Duration)>,
    /// The dead replica's share not finished at its death, and from the
    /// SIGKILL until the first and the last of them were seen finished.
    pub orphaned: usize,
    pub first_picked_up: Option<Duration>,
    pub last_picked_up: Option<Duration>,
    /// The survivors' reconciles that took over a run overdue past
    /// `scanStarts.takeoverAfter` (the safety net, whatever the
    /// membership): such a run may be picked up before the membership
    /// drops the dead replica.
    pub taken_over_overdue: u64,
    /// From the replicas' start to all finished.
    pub elapsed: Duration,
    /// AssetScans whose phase is Finished at the end.
    pub finished: usize,
    pub notifications: Notifications,
    /// AssetScans whose finished run is not their generation's first.
    pub second_runs: usize,
    /// AssetScanReports: one per run (a report's name is its run's).
    pub reports: u64,
    /// Report creates refused as already there (409), before the SIGKILL
    /// and after: a run's end written again (by the replica that resumed
    /// the run, or one that raced for it), which the operator takes as
    /// done; the report exists once.
    pub reports_rewritten: (u64, u64),
}

/// What the webhook stub received, per AssetScan.
pub struct Notifications {
    /// AssetScans that notify (the high-risk ones).
    pub expected: usize,
    /// AssetScans with at least one delivery.
    pub notified: usize,
    pub deliveries: usize,
    /// AssetScans notified under two idempotency keys or more: doubles an
    /// idempotent receiver would act on twice.
    pub doubled: usize,
    /// Deliveries that repeated an idempotency key already received (an
    /// idempotent receiver, as the stub is, acts on them once: not counted
    /// as doubles).
    pub repeated_keys: usize,
}

/// `count` AssetScans, `settings.replicas_per_shard` replicas of one
/// shard; the last one SIGKILLed once half of them finished.
pub async fn run(settings: &Settings, count: usize) -> Result<Failover> {
    let (stack, created, mut progress) = run::prepare(settings, count).await?;
    let launch = run::launch(settings, &stack);
    let started = Instant::now();
    let mut replicas = Replicas::start(&launch, 1, 0)?;
    let all = u64::from(settings.replicas_per_shard);
    let kept = !settings.starts.membership_ttl.is_zero();
    if kept {
        replicas
            .wait_members(all, replicas.len(), settings.timeout)
            .await
            .context("before the kill")?;
    }
    progress.wait(count / 2, settings.timeout).await?;
    let members = members(&stack)?;
    let instances = replicas.instances();
    let victim = instances.len().checked_sub(1).context("no replica")?;
    let killed = instances[victim].clone();
    let killed_at = Instant::now();
    let finished_at_kill = progress.finished();
    let rewritten_before = reports_rewritten(&stack.requests());
    replicas.kill(victim, STOP_GRACE).await?;
    let dropped = async {
        if !kept {
            return Ok(None);
        }
        replicas.wait_members(all - 1, 1, settings.timeout).await?;
        let first = killed_at.elapsed();
        (replicas.wait_members(all - 1, replicas.len(), settings.timeout)).await?;
        Ok(Some((first, killed_at.elapsed())))
    };
    let (orphaned, membership_dropped) =
        tokio::try_join!(orphaned(&stack, &members, &killed), dropped)?;
    progress.wait(count, settings.timeout).await?;
    let elapsed = started.elapsed();
    let taken_over_overdue = replicas.total(TAKEN_OVER).await;
    replicas.stop(STOP_GRACE).await;
    let rewritten = reports_rewritten(&run::quiet_counts(&stack).await);
    let (first_picked_up, last_picked_up) =
        picked_up(&progress.finish_times(), &orphaned, killed_at);
    let failover = Failover {
        count,
        replicas: settings.replicas_per_shard,
        ttl: settings.starts.membership_ttl,
        finished_at_kill,
        killed_after: killed_at - started,
        killed,
        membership_dropped,
        orphaned: orphaned.len(),
        first_picked_up,
        last_picked_up,
        taken_over_overdue,
        elapsed,
        finished: finished(&stack).await?,
        notifications: notifications(&stack, count),
        second_runs: run::second_runs(&stack.api()).await?,
        reports: footprint::measure(&stack.client, &stack.namespace, &created)
            .await?
            .reports
            .count,
        reports_rewritten: (rewritten_before, rewritten - rewritten_before),
    };
    drop(progress);
    stack.finish().await?;
    Ok(failover)
}

fn reports_rewritten(requests: &BTreeMap<String, u64>) -> u64 {
    (requests.get("refused 409 create assetscanreports").copied()).unwrap_or(0)
}

/// The membership in Redis (member ids, `<instance>#<random>`): one
/// group, the one shard's.
fn members(stack: &Stack) -> Result<Vec<String>> {
    let pattern = format!("{}:members:*", RedisSection::default().prefix);
    let keys: Vec<String> = stack
        .redis
        .query(redis::cmd("KEYS").arg(&pattern))
        .context("the membership's key")?;
    let Some(key) = keys.first() else {
        return Ok(Vec::new());
    };
    stack
        .redis
        .query(redis::cmd("ZRANGE").arg(key).arg(0).arg(-1))
        .context("the membership")
}

/// The names of the AssetScans in `killed`'s share of `members` that
/// are not finished: listed now, with the process gone.
async fn orphaned(stack: &Stack, members: &[String], killed: &str) -> Result<HashSet<String>> {
    let own = format!("{killed}#");
    let Some(member) = members.iter().find(|m| m.starts_with(&own)) else {
        return Ok(HashSet::new());
    };
    let all = || members.iter().map(String::as_str);
    let mut found = HashSet::new();
    footprint::each(&stack.api(), |obj| {
        let name = obj.metadata.name.clone().unwrap_or_default();
        let key = format!("{}/{name}", stack.namespace);
        if !progress::terminal(obj) && preferred(all(), &key) == Some(member.as_str()) {
            found.insert(name);
        }
    })
    .await
    .context("listing the AssetScans after the kill")?;
    Ok(found)
}

/// From `killed_at` until the first and the last of `names` finished.
fn picked_up(
    times: &FinishTimes,
    names: &HashSet<String>,
    killed_at: Instant,
) -> (Option<Duration>, Option<Duration>) {
    let after: Vec<Duration> = (names.iter())
        .filter_map(|n| times.get(n))
        .map(|t| t.saturating_duration_since(killed_at))
        .collect();
    (after.iter().min().copied(), after.iter().max().copied())
}

async fn finished(stack: &Stack) -> Result<usize> {
    let mut found = 0;
    footprint::each(&stack.api(), |obj| {
        let phase = obj.status.as_ref().and_then(|s| s.phase);
        found += usize::from(phase == Some(Status::Finished) && progress::terminal(obj));
    })
    .await
    .context("listing the AssetScans")?;
    Ok(found)
}

/// The webhook stub's deliveries, per AssetScan (`origin.name`).
fn notifications(stack: &Stack, count: usize) -> Notifications {
    let deliveries = stack.stubs.sink.deliveries();
    let mut keys: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for delivery in &deliveries {
        let origin = delivery.json()["origin"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let key = delivery.header("idempotency-key").unwrap_or_default();
        keys.entry(origin).or_default().insert(key.to_owned());
    }
    Notifications {
        expected: stack::high_risk_among(count),
        notified: keys.len(),
        deliveries: deliveries.len(),
        doubled: keys.values().filter(|k| k.len() > 1).count(),
        repeated_keys: deliveries.iter().filter(|d| !d.new_effect).count(),
    }
}

/// A duration as the figures print it.
fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// A duration that may not have been measured.
fn opt(d: Option<Duration>) -> String {
    d.map_or("-".to_owned(), secs)
}

impl Failover {
    /// The run's figures: the kill, the membership, the pick-up, the
    /// deliveries and the reports written again.
    fn print_figures(&self) {
        println!(
            "{} replicas of one shard, membershipTtl {}; all {} finished {} after the replicas' start",
            self.replicas,
            secs(self.ttl),
            self.count,
            secs(self.elapsed)
        );
        println!(
            "SIGKILL to {} {} into the first round, {} of {} finished",
            self.killed,
            secs(self.killed_after),
            self.finished_at_kill,
            self.count
        );
        if let Some((first, every)) = self.membership_dropped {
            println!(
                "survivors' membership without it (assetscan_members, set at each heartbeat; a member is no longer preferred once its heartbeat lapses, up to a heartbeat sooner): the first survivor's {} after the SIGKILL, every survivor's {}",
                secs(first),
                secs(every)
            );
        }
        println!(
            "its share not finished at its death: {} AssetScans; the first finished by a survivor {} after the SIGKILL, the last {}",
            self.orphaned,
            opt(self.first_picked_up),
            opt(self.last_picked_up)
        );
        println!(
            "survivors' reconciles that took over a run overdue past scanStarts.takeoverAfter (the safety net, whatever the membership): {}",
            self.taken_over_overdue
        );
        let n = &self.notifications;
        println!(
            "webhook: {} deliveries, {} of {} high-risk AssetScans notified; {} redelivered under an idempotency key already received (acted on once by the idempotent receiver, not counted as doubles)",
            n.deliveries, n.notified, n.expected, n.repeated_keys
        );
        let (before, after) = self.reports_rewritten;
        println!(
            "report writes refused as written already (409, taken as done: the report exists once): {before} before the SIGKILL, {after} after"
        );
    }

    /// Prints the figures and the checks; returns the checks that failed.
    pub fn print(&self) -> Vec<String> {
        self.print_figures();
        let n = &self.notifications;
        let target = target();
        let pick_up = self.membership_dropped.map(|_| {
            (
                self.first_picked_up.is_some_and(|d| d <= target),
                format!(
                    "its share picked up (the first of it finished by a survivor) {} after the SIGKILL, target <= the chart's membershipTtl + 10 s = {}",
                    opt(self.first_picked_up),
                    secs(target)
                ),
            )
        });
        if pick_up.is_none() {
            println!(
                "no membership (membershipTtl 0): every replica reconciles every object, no share to pick up"
            );
        }
        let checks = [
            (
                self.finished == self.count,
                format!("{} of {} AssetScans Finished", self.finished, self.count),
            ),
            (
                n.doubled == 0 && n.notified == n.expected,
                format!(
                    "{} AssetScans notified twice (two idempotency keys or more), {} of {} notified",
                    n.doubled, n.notified, n.expected
                ),
            ),
            (
                self.second_runs == 0 && self.reports == self.count as u64,
                format!(
                    "runs finished twice: {} AssetScans finished a second run of their generation; {} AssetScanReports for {} AssetScans (one per run)",
                    self.second_runs, self.reports, self.count
                ),
            ),
        ];
        pick_up
            .into_iter()
            .chain(checks)
            .filter_map(|(ok, line)| {
                println!("{} {line}", mark(ok));
                (!ok).then(|| format!("failover: {line}"))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pick_up_is_timed_by_the_first_and_last_orphan_finished() {
        let killed_at = Instant::now();
        let at = |ms| killed_at + Duration::from_millis(ms);
        let times: FinishTimes = [("a", at(9000)), ("b", at(4000)), ("mine", at(100))]
            .into_iter()
            .map(|(n, t)| (n.to_owned(), t))
            .collect();
        let orphans: HashSet<String> = ["a", "b", "unfinished"].map(str::to_owned).into();
        assert_eq!(
            picked_up(&times, &orphans, killed_at),
            (Some(Duration::from_secs(4)), Some(Duration::from_secs(9)))
        );
        assert_eq!(picked_up(&times, &HashSet::new(), killed_at), (None, None));
    }
}
