//! Carries out a [`Plan`]: starts the world and the replicas, applies each
//! event at its time while supervising the replicas (fault drills, pauses,
//! unexpected exits), lets everything settle once the faults stop, records
//! the [`History`] and checks it.
//!
//! Waiting is always on the event that matters: a drilled replica is
//! resumed once the audit shows a newer claim on its asset (its write is
//! then stale for sure); the run ends when every object has settled and
//! every replica has exited on SIGTERM, so nothing more can be written.
//!
//! The `Driver` is spread by concern: `calls` makes the API calls on the
//! objects, `drills` isolates armed replicas and resumes drilled ones,
//! `outages` brings Redis and the API server down and back, `finish` waits
//! for convergence and records the outcome.
//!
//! [`History`]: crate::history::History

mod calls;
mod drills;
mod finish;
mod outages;

use crate::ChaosError;
use crate::check::Report;
use crate::figures::Figures;
use crate::history::{AuditRecord, DataLoss, History, Outage, OutageCause, Timing};
use crate::plan::{Action, ApiFault, Drill, Event, Plan};
use crate::replicas::{ArmedDrill, Noticed, ReplicaSet};
use crate::world::World;
use assetscan_testkit::stubs::Fault as StubFault;
use drills::Isolation;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// How often the run looks at the replicas and the clock.
const TICK: Duration = Duration::from_millis(50);

/// What a run produced.
pub struct Outcome {
    pub history: History,
    pub report: Report,
    pub figures: Figures,
    /// The objects (and replicas) that had not settled, with their status.
    pub stuck: Vec<String>,
}

/// The run in progress: the world, the replicas, and what happened so far.
struct Driver<'a> {
    plan: &'a Plan,
    world: World,
    replicas: ReplicaSet,
    t0: Instant,
    epoch: u32,
    audit: Vec<AuditRecord>,
    data_losses: Vec<DataLoss>,
    redis_back_at: Option<Instant>,
    /// When the API server outage under way ends.
    api_back_at: Option<Instant>,
    /// The bound's settings, and the outages so far.
    timing: Timing,
    /// Since when (unix ms) each outage under way has lasted.
    outages_since: Vec<(OutageCause, u64)>,
    isolation: Option<Isolation>,
    created: BTreeSet<usize>,
    edited: BTreeSet<usize>,
    deleted: BTreeSet<usize>,
    figures: Figures,
    last_drill_check: Instant,
    /// The API call in flight per object, if any.
    calls: HashMap<usize, JoinHandle<Result<(), ChaosError>>>,
}

/// Runs `plan` with the operator binary `operator`; logs, the plan and the
/// recorded history go to `dir`.
pub async fn run(plan: &Plan, operator: &Path, dir: &Path) -> Result<Outcome, ChaosError> {
    let world = World::start(&plan.scale, operator, dir).await?;
    finish::save(dir, "plan.json", plan)?;
    let mut replicas = ReplicaSet::new(world.launch.clone(), plan.scale.replicas);
    for (slot, drill) in plan.initial_drills.iter().enumerate() {
        replicas.start(slot, false, armed(plan, drill.as_ref()))?;
    }
    let mut driver = Driver {
        plan,
        world,
        replicas,
        t0: Instant::now(),
        epoch: 0,
        audit: Vec::new(),
        data_losses: Vec::new(),
        redis_back_at: None,
        api_back_at: None,
        timing: crate::world::timing(&plan.scale),
        outages_since: Vec::new(),
        isolation: None,
        created: BTreeSet::new(),
        edited: BTreeSet::new(),
        deleted: BTreeSet::new(),
        figures: Figures {
            seed: plan.seed,
            scale: plan.scale.name.clone(),
            replicas: plan.scale.replicas,
            ..Figures::default()
        },
        last_drill_check: Instant::now(),
        calls: HashMap::new(),
    };
    driver.say(format!(
        "{} replicas started; {} events over {:.0} s",
        plan.scale.replicas,
        plan.events.len(),
        plan.scale.window.as_secs_f64()
    ));
    for event in &plan.events {
        driver.wait_until(event.at).await?;
        driver.apply(event).await?;
    }
    driver.wait_until(plan.scale.window).await?;
    driver.collect_calls(true).await?;
    driver.calm()?;
    let converged_after = driver.converge().await?;
    driver.finish(converged_after).await
}

/// The planned drill as the replica is armed with it: the write to stop
/// before, for the asset of its object.
fn armed(plan: &Plan, drill: Option<&Drill>) -> Option<ArmedDrill> {
    let drill = drill?;
    Some(ArmedDrill {
        asset: plan.objects.get(drill.object)?.asset.clone(),
        write: drill.write.clone(),
    })
}

impl Driver<'_> {
    fn say(&self, what: String) {
        println!("{:>8.2}s  {what}", self.t0.elapsed().as_secs_f64());
    }

    /// An outage of `cause` begins now.
    fn outage_begins(&mut self, cause: OutageCause) {
        if !self.outages_since.iter().any(|(c, _)| *c == cause) {
            self.outages_since.push((cause, crate::now_ms()));
        }
    }

    /// The outage of `cause`, if under way, ends now.
    fn outage_ends(&mut self, cause: OutageCause) {
        let now = crate::now_ms();
        self.outages_since.retain(|(c, from_ms)| {
            if *c != cause {
                return true;
            }
            self.timing.outages.push(Outage {
                cause,
                from_ms: *from_ms,
                to_ms: now,
            });
            false
        });
    }

    fn instance(&self, slot: usize) -> String {
        self.replicas
            .get(slot)
            .map_or_else(|| format!("slot {slot}"), |r| r.instance.clone())
    }

    async fn wait_until(&mut self, at: Duration) -> Result<(), ChaosError> {
        loop {
            self.supervise().await?;
            if self.t0.elapsed() >= at {
                return Ok(());
            }
            tokio::time::sleep(TICK).await;
        }
    }

    async fn apply(&mut self, event: &Event) -> Result<(), ChaosError> {
        let now = Instant::now();
        match &event.action {
            Action::Create { object, isolate } => self.create(*object, *isolate),
            Action::Edit { object } => self.edit(*object),
            Action::Delete { object } => self.delete(*object),
            Action::Pause { slot, pause } => self.pause(*slot, now + *pause, *pause),
            Action::Kill { slot } => {
                if let Some(instance) = self.replicas.kill(*slot) {
                    self.say(format!("{instance} killed (SIGKILL)"));
                }
            }
            Action::Restart {
                slot,
                new_instance,
                drill,
            } => self.restart(*slot, *new_instance, drill.as_ref())?,
            Action::RedisDataLoss { down } => self.lose_redis_data(*down).await?,
            Action::ApiOutage { down } => self.begin_outage(now, *down),
            Action::Api(fault) => {
                self.world.api_fault(*fault);
                if matches!(fault, ApiFault::EndWatches | ApiFault::AbortWatches) {
                    self.figures.watch_interruptions += 1;
                }
            }
            Action::Latency { stub, latency } => {
                self.world.stub(*stub).set_latency(*latency);
                self.figures.provider_latency_changes += 1;
            }
            Action::Burst {
                stub,
                calls,
                status,
            } => {
                self.world
                    .stub(*stub)
                    .fail_next(*calls, StubFault::Status(*status));
                self.figures.provider_bursts += 1;
            }
        }
        Ok(())
    }

    /// Pauses the replica in `slot` until `until` (for `pause`), unless it
    /// is the armed one of the isolation under way.
    fn pause(&mut self, slot: usize, until: Instant, pause: Duration) {
        let armed = self.isolation.as_ref().is_some_and(|i| i.armed == slot);
        if !armed && self.replicas.pause(slot, until, false) {
            self.say(format!(
                "{} paused (SIGSTOP) for {:.2} s",
                self.instance(slot),
                pause.as_secs_f64()
            ));
        }
    }

    /// Starts the replica in `slot` again, armed with `drill` if any.
    fn restart(
        &mut self,
        slot: usize,
        new_instance: bool,
        drill: Option<&Drill>,
    ) -> Result<(), ChaosError> {
        let drill = armed(self.plan, drill);
        let replica = self.replicas.start(slot, new_instance, drill.clone())?;
        let armed = drill
            .map(|d| format!(", drill armed before {} for {}", d.write, d.asset))
            .unwrap_or_default();
        let line = format!("{} started{armed}", replica.instance);
        self.say(line);
        Ok(())
    }

    /// One look at everything between two ticks: finished API calls,
    /// replicas that exited or stopped at their drill, the isolation, due
    /// resumptions, drilled replicas superseded, and faults whose time is up.
    async fn supervise(&mut self) -> Result<(), ChaosError> {
        self.collect_calls(false).await?;
        for noticed in self.replicas.supervise()? {
            self.report(noticed);
        }
        let now = Instant::now();
        let isolation_over = self.isolation_over(now).await;
        if isolation_over {
            self.isolation = None;
        }
        for name in self.replicas.resume_due(now, isolation_over) {
            self.say(format!("{name} resumed (SIGCONT)"));
        }
        self.check_drills(now).await;
        if self.replicas.running() == 0 {
            self.outage_begins(OutageCause::NoReplicaRunning);
        } else {
            self.outage_ends(OutageCause::NoReplicaRunning);
        }
        self.end_outages_due(now)
    }

    /// Tells what the replicas did by themselves.
    fn report(&self, noticed: Noticed) {
        match noticed {
            Noticed::Exited { slot, how } => self.say(format!(
                "{} exited by itself ({how}); started again",
                self.instance(slot)
            )),
            Noticed::Drilled { slot } => {
                let what = self
                    .replicas
                    .get(slot)
                    .and_then(|r| r.drill.as_ref())
                    .map(|d| format!("before writing {} for {}", d.write, d.asset))
                    .unwrap_or_default();
                self.say(format!(
                    "{} stopped itself {what} (fault drill)",
                    self.instance(slot)
                ));
            }
        }
    }
}
