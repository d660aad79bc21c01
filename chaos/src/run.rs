//! Carries out a [`Plan`]: starts the world and the replicas, applies each
//! event at its time while supervising the replicas (fault drills, pauses,
//! unexpected exits), lets everything settle once the faults stop, records
//! the [`History`] and checks it.
//!
//! Waiting is always on the event that matters: a drilled replica is
//! resumed once the audit shows a newer claim on its asset (its write is
//! then stale for sure); the run ends when every object has settled and
//! every replica has exited on SIGTERM, so nothing more can be written.

use crate::ChaosError;
use crate::check::{Report, check};
use crate::figures::Figures;
use crate::history::{AuditRecord, DataLoss, History, ObjectHistory, is_settled};
use crate::plan::{Action, ApiFault, Event, Plan};
use crate::replicas::{ArmedDrill, Noticed, ReplicaSet, State};
use crate::world::World;
use assetscan_testkit::stubs::Fault as StubFault;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// How often the run looks at the replicas and the clock.
const TICK: Duration = Duration::from_millis(50);
/// How often a drilled replica's asset is looked up in the audit.
const DRILL_CHECK: Duration = Duration::from_millis(250);
/// How long replicas get to exit on SIGTERM at the end.
const GRACE: Duration = Duration::from_secs(20);

/// What a run produced.
pub struct Outcome {
    pub history: History,
    pub report: Report,
    pub figures: Figures,
    /// The objects (and replicas) that had not settled, with their status.
    pub stuck: Vec<String>,
}

/// The drill's replica alone with its target: the others are paused until
/// it holds the target's lock (or stopped), for 0.5–2.5 × the lock ttl.
struct Isolation {
    armed: usize,
    asset: String,
    earliest_end: Instant,
    deadline: Instant,
}

struct Driver<'a> {
    plan: &'a Plan,
    world: World,
    replicas: ReplicaSet,
    t0: Instant,
    epoch: u32,
    audit: Vec<AuditRecord>,
    data_losses: Vec<DataLoss>,
    redis_back_at: Option<Instant>,
    outage: Option<(Instant, Instant)>,
    isolation: Option<Isolation>,
    created: BTreeSet<usize>,
    edited: BTreeSet<usize>,
    deleted: BTreeSet<usize>,
    figures: Figures,
    last_drill_check: Instant,
    /// The API call in flight per object, if any.
    calls: HashMap<usize, JoinHandle<Result<(), ChaosError>>>,
}

/// An API call on an AssetScan.
#[derive(Clone, Copy)]
enum Call {
    Create,
    Edit,
    Delete,
}

/// Runs `plan` with the operator binary `operator`; logs, the plan and the
/// recorded history go to `dir`.
pub async fn run(plan: &Plan, operator: &Path, dir: &Path) -> Result<Outcome, ChaosError> {
    let world = World::start(&plan.scale, operator, dir).await?;
    save(dir, "plan.json", plan)?;
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
        outage: None,
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

fn armed(plan: &Plan, drill: Option<&crate::plan::Drill>) -> Option<ArmedDrill> {
    let drill = drill?;
    Some(ArmedDrill {
        asset: plan.objects.get(drill.object)?.asset.clone(),
        write: drill.write.clone(),
    })
}

fn save(dir: &Path, name: &str, value: &impl serde::Serialize) -> Result<(), ChaosError> {
    let path = dir.join(name);
    let text = serde_json::to_string_pretty(value).map_err(|e| ChaosError::Io {
        context: format!("serialize {name}"),
        source: std::io::Error::other(e),
    })?;
    std::fs::write(&path, text).map_err(|source| ChaosError::Io {
        context: format!("write {}", path.display()),
        source,
    })
}

/// The latest claim in `records` by a process of `instance` (holder ids
/// are `<instance>#<random>:<namespace>/<name>`).
fn latest_claim<'r>(records: &'r [AuditRecord], instance: &str) -> Option<&'r AuditRecord> {
    let holder = format!("{instance}#");
    records.iter().rev().find(|r| {
        r.op() == "acquire"
            && r.accepted()
            && r.get("holder").is_some_and(|h| h.starts_with(&holder))
    })
}

impl Driver<'_> {
    fn say(&self, what: String) {
        println!("{:>8.2}s  {what}", self.t0.elapsed().as_secs_f64());
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
        let objects = &self.plan.objects;
        match &event.action {
            Action::Create { object, isolate } => {
                if let Some(slot) = isolate {
                    self.isolate(*slot, *object);
                }
                let planned = &objects[*object];
                self.world
                    .stubs
                    .inventory
                    .set_online(&planned.asset, planned.online());
                self.call(*object, Call::Create);
                self.created.insert(*object);
            }
            Action::Edit { object } => {
                self.call(*object, Call::Edit);
                self.edited.insert(*object);
                self.say(format!("edit {} (a new generation)", objects[*object].name));
            }
            Action::Delete { object } => {
                self.call(*object, Call::Delete);
                self.deleted.insert(*object);
                self.say(format!("delete {}", objects[*object].name));
            }
            Action::Pause { slot, pause } => {
                let armed = self.isolation.as_ref().is_some_and(|i| i.armed == *slot);
                if !armed && self.replicas.pause(*slot, now + *pause, false) {
                    self.say(format!(
                        "{} paused (SIGSTOP) for {:.2} s",
                        self.instance(*slot),
                        pause.as_secs_f64()
                    ));
                }
            }
            Action::Kill { slot } => {
                if let Some(instance) = self.replicas.kill(*slot) {
                    self.say(format!("{instance} killed (SIGKILL)"));
                }
            }
            Action::Restart {
                slot,
                new_instance,
                drill,
            } => {
                let drill = armed(self.plan, drill.as_ref());
                let replica = self.replicas.start(*slot, *new_instance, drill.clone())?;
                let armed = drill
                    .map(|d| format!(", drill armed before {} for {}", d.write, d.asset))
                    .unwrap_or_default();
                let line = format!("{} started{armed}", replica.instance);
                self.say(line);
            }
            Action::RedisDataLoss { down } => self.lose_redis_data(*down).await?,
            Action::ApiOutage { down } => {
                self.world.proxy.begin_outage();
                self.outage = Some((now, now + *down));
                self.figures.api_outages += 1;
                self.say(format!(
                    "API server outage for {:.1} s: connections cut and refused",
                    down.as_secs_f64()
                ));
            }
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

    /// Makes an API call on `object` as a task of its own, after the
    /// object's previous call: the schedule never waits for the API server.
    fn call(&mut self, object: usize, call: Call) {
        let previous = self.calls.remove(&object);
        let objects = self.world.api.clone();
        let planned = self.plan.objects[object].clone();
        let task = tokio::spawn(async move {
            if let Some(previous) = previous {
                previous.await.map_err(ChaosError::from)??;
            }
            match call {
                Call::Create => objects.create(&planned).await,
                Call::Edit => objects.edit(&planned).await,
                Call::Delete => objects.delete(&planned).await,
            }
        });
        self.calls.insert(object, task);
    }

    /// Reports a failed API call as soon as it is over; with `all`, waits
    /// for every call.
    async fn collect_calls(&mut self, all: bool) -> Result<(), ChaosError> {
        let done: Vec<usize> = self
            .calls
            .iter()
            .filter(|(_, task)| all || task.is_finished())
            .map(|(object, _)| *object)
            .collect();
        for object in done {
            if let Some(task) = self.calls.remove(&object) {
                task.await??;
            }
        }
        Ok(())
    }

    /// Pauses every other running replica, so that the armed one meets its
    /// drill's target first.
    fn isolate(&mut self, armed: usize, object: usize) {
        let running = self
            .replicas
            .get(armed)
            .is_some_and(|r| r.state == State::Running && r.drill.is_some());
        if !running || self.isolation.is_some() {
            return;
        }
        let ttl = self.plan.scale.lock_ttl;
        let now = Instant::now();
        let deadline = now + ttl.mul_f64(2.5);
        for slot in (0..self.plan.scale.replicas).filter(|s| *s != armed) {
            self.replicas.pause(slot, deadline, true);
        }
        self.isolation = Some(Isolation {
            armed,
            asset: self.plan.objects[object].asset.clone(),
            earliest_end: now + ttl / 2,
            deadline,
        });
        self.say(format!(
            "create {} while only {} runs (the others paused)",
            self.plan.objects[object].name,
            self.instance(armed)
        ));
    }

    /// Snapshots every audit stream with writes paused, then kills Redis:
    /// without persistence it comes back empty.
    async fn lose_redis_data(&mut self, down: Duration) -> Result<(), ChaosError> {
        self.world.view.pause_writes(30_000).await?;
        let snapshot = self.world.view.snapshot(self.epoch).await?;
        self.audit.extend(snapshot);
        self.data_losses.push(DataLoss {
            epoch: self.epoch,
            api_resource_version: self.world.emu.resource_version(),
        });
        tokio::task::block_in_place(|| self.world.redis.kill());
        self.epoch += 1;
        self.redis_back_at = Some(Instant::now() + down);
        self.figures.redis_data_losses += 1;
        self.say(format!(
            "redis-server killed: every key lost (audit snapshotted first); back in {:.1} s",
            down.as_secs_f64()
        ));
        Ok(())
    }

    async fn supervise(&mut self) -> Result<(), ChaosError> {
        self.collect_calls(false).await?;
        for noticed in self.replicas.supervise()? {
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
        let now = Instant::now();
        let isolation_over = match &self.isolation {
            None => false,
            Some(i) if now >= i.deadline => true,
            Some(i) if now < i.earliest_end => false,
            Some(i) => match self.replicas.get(i.armed) {
                Some(r) if r.state == State::Running => {
                    self.holds_claim(&r.instance, &i.asset).await
                }
                _ => true,
            },
        };
        if isolation_over {
            self.isolation = None;
        }
        for name in self.replicas.resume_due(now, isolation_over) {
            self.say(format!("{name} resumed (SIGCONT)"));
        }
        if now.duration_since(self.last_drill_check) >= DRILL_CHECK {
            self.last_drill_check = now;
            self.resume_superseded_drills().await;
        }
        if let Some((began, ends)) = self.outage
            && now >= ends
        {
            self.world.proxy.end_outage();
            self.figures.api_outage_seconds += now.duration_since(began).as_secs_f64();
            self.outage = None;
            self.say("API server answers again".into());
        }
        if let Some(at) = self.redis_back_at
            && now >= at
        {
            tokio::task::block_in_place(|| self.world.redis.restart())?;
            self.redis_back_at = None;
            self.say("redis-server restarted, empty".into());
        }
        Ok(())
    }

    /// Whether the audit shows a claim of `asset` by `instance` (Redis may
    /// be down: then not yet).
    async fn holds_claim(&self, instance: &str, asset: &str) -> bool {
        let records = self
            .world
            .view
            .audit(asset, self.epoch)
            .await
            .unwrap_or_default();
        latest_claim(&records, instance).is_some()
    }

    /// Resumes each replica stopped at its drill once the audit shows a
    /// newer executor claimed its asset (so its pending write is stale),
    /// or after a generous bound.
    async fn resume_superseded_drills(&mut self) {
        let bound = self.plan.scale.lock_ttl * 6 + Duration::from_secs(10);
        for slot in 0..self.plan.scale.replicas {
            let Some(replica) = self.replicas.get(slot) else {
                continue;
            };
            let (State::Drilled { since, token }, Some(drill)) = (replica.state, &replica.drill)
            else {
                continue;
            };
            // Redis may be down; the next check tries again.
            let records = self
                .world
                .view
                .audit(&drill.asset, self.epoch)
                .await
                .unwrap_or_default();
            let token = token.or_else(|| latest_claim(&records, &replica.instance)?.token());
            let superseded = token.is_some_and(|own| {
                records
                    .iter()
                    .any(|r| r.is_ticket_write() && r.token().is_some_and(|t| t > own))
            });
            let timed_out = since.elapsed() >= bound;
            let Some(replica) = self.replicas.get_mut(slot) else {
                continue;
            };
            if superseded || timed_out {
                replica.resume();
                let why = if superseded {
                    format!("a newer token than its {token:?} claimed the asset")
                } else {
                    "nobody took its asset over".into()
                };
                let line = format!(
                    "{} resumed (SIGCONT) with its stale context: {why}",
                    replica.instance
                );
                self.say(line);
            } else {
                replica.state = State::Drilled { since, token };
            }
        }
    }

    /// The faults stop: Redis and the API answer, the providers are quick,
    /// paused replicas go on. Drilled replicas stay stopped until their
    /// asset is taken over.
    fn calm(&mut self) -> Result<(), ChaosError> {
        if self.redis_back_at.take().is_some() {
            tokio::task::block_in_place(|| self.world.redis.restart())?;
        }
        if let Some((began, _)) = self.outage.take() {
            self.figures.api_outage_seconds += began.elapsed().as_secs_f64();
        }
        self.world.calm();
        self.isolation = None;
        for name in self.replicas.resume_paused() {
            self.say(format!("{name} resumed (SIGCONT)"));
        }
        self.say("faults stopped; waiting for every object to settle".into());
        Ok(())
    }

    fn settled(&self, object: usize) -> bool {
        let stored = self.world.object(&self.plan.objects[object].name);
        match (self.deleted.contains(&object), stored) {
            (true, stored) => stored.is_none(),
            (false, Some(stored)) => is_settled(&stored),
            (false, None) => false,
        }
    }

    /// Waits until every object settled and no replica is stopped; the
    /// time it took, or `None` when the scale's bound passed first.
    async fn converge(&mut self) -> Result<Option<Duration>, ChaosError> {
        let started = Instant::now();
        loop {
            self.supervise().await?;
            let all = self.created.iter().all(|o| self.settled(*o));
            if all && !self.replicas.any_stopped() {
                return Ok(Some(started.elapsed()));
            }
            if started.elapsed() >= self.plan.scale.settle {
                return Ok(None);
            }
            tokio::time::sleep(TICK * 4).await;
        }
    }

    /// What has not settled, and why (its status).
    fn stuck(&self) -> Vec<String> {
        let mut stuck: Vec<String> = self
            .created
            .iter()
            .filter(|o| !self.settled(**o))
            .map(|o| {
                let name = &self.plan.objects[*o].name;
                let stored = self.world.object(name);
                let status = stored.as_ref().map(|s| s["status"].clone());
                let generation = stored.as_ref().map(|s| s["metadata"]["generation"].clone());
                format!(
                    "{name}: deleted {}, generation {generation:?}, status {}",
                    self.deleted.contains(o),
                    status.unwrap_or_default()
                )
            })
            .collect();
        for slot in 0..self.plan.scale.replicas {
            if let Some(r) = self.replicas.get(slot)
                && r.state != State::Running
            {
                stuck.push(format!("{} is still stopped: {:?}", r.instance, r.state));
            }
        }
        stuck
    }

    /// Stops the replicas, takes the last snapshot, records and checks.
    async fn finish(self, converged_after: Option<Duration>) -> Result<Outcome, ChaosError> {
        let stuck = self.stuck();
        let Driver {
            plan,
            world,
            replicas,
            t0,
            epoch,
            mut audit,
            data_losses,
            created,
            edited,
            deleted,
            mut figures,
            ..
        } = self;
        let tally = replicas.tally.clone();
        let processes = tokio::task::block_in_place(|| replicas.terminate_all(GRACE));
        audit.extend(world.view.snapshot(epoch).await?);
        let objects: Vec<ObjectHistory> = created
            .iter()
            .map(|o| {
                let planned = &plan.objects[*o];
                ObjectHistory {
                    name: planned.name.clone(),
                    asset: planned.asset.clone(),
                    kind: planned.kind.clone(),
                    deleted: deleted.contains(o),
                    status_writes: world.status_writes(&planned.name),
                    last: world.object(&planned.name),
                }
            })
            .collect();
        for object in objects.iter().filter(|o| !o.deleted) {
            let phase = object
                .last
                .as_ref()
                .and_then(|o| o["status"]["phase"].as_str())
                .unwrap_or("none")
                .to_owned();
            *figures.phases.entry(phase).or_insert(0) += 1;
        }
        let history = History {
            objects,
            audit,
            data_losses,
            deliveries: world.deliveries(),
            processes,
            leftover_keys: world.view.ticket_keys().await?,
        };
        save(&world.dir, "history.json", &history)?;
        let report = check(&history);
        save(&world.dir, "report.json", &report)?;
        let figures = Figures {
            objects_created: created.len(),
            objects_edited: edited.len(),
            objects_deleted: deleted.len(),
            pauses: tally.pauses,
            drill_stops: tally.drill_stops,
            kills: tally.kills,
            restarts_same_instance: tally.restarts_same_instance,
            restarts_new_instance: tally.restarts_new_instance,
            api_connections_cut: world.proxy.connections_cut(),
            api_errors_injected: world.emu.faults().fired().len(),
            deliveries: history.deliveries.len(),
            converged_after,
            run_time: t0.elapsed(),
            ..figures
        }
        .with_report(&report);
        Ok(Outcome {
            history,
            report,
            figures,
            stuck,
        })
    }
}
