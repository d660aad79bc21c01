//! The end of a run: waiting until every object has settled, then stopping
//! the replicas, taking the last audit snapshot, and recording and checking
//! the history (saved beside the logs, with the check's report).

use super::{Driver, Outcome, TICK};
use crate::ChaosError;
use crate::check::check;
use crate::figures::Figures;
use crate::history::{History, ObjectHistory, OutageCause, is_settled};
use crate::objects::NAMESPACE;
use crate::plan::Plan;
use crate::replicas::State;
use crate::world::World;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long replicas get to exit on SIGTERM at the end.
const GRACE: Duration = Duration::from_secs(20);

/// Writes `value` as pretty JSON to `dir/name`.
pub(super) fn save(
    dir: &Path,
    name: &str,
    value: &impl serde::Serialize,
) -> Result<(), ChaosError> {
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

impl Driver<'_> {
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
    pub(super) async fn converge(&mut self) -> Result<Option<Duration>, ChaosError> {
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
    pub(super) async fn finish(
        mut self,
        converged_after: Option<Duration>,
    ) -> Result<Outcome, ChaosError> {
        let stuck = self.stuck();
        let open: Vec<_> = self.outages_since.iter().map(|(c, _)| *c).collect();
        for cause in open {
            self.outage_ends(cause);
        }
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
            timing,
            ..
        } = self;
        let tally = replicas.tally.clone();
        let processes = tokio::task::block_in_place(|| replicas.terminate_all(GRACE));
        audit.extend(world.view.snapshot(epoch).await?);
        let objects = object_histories(plan, &world, &created, &deleted);
        count_phases(&objects, &mut figures.phases);
        let history = History {
            objects,
            audit,
            data_losses,
            deliveries: world.deliveries(),
            processes,
            leftover_keys: world.view.ticket_keys().await?,
            timing,
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
            api_outage_seconds: history.timing.seconds_of(OutageCause::ApiServer),
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

/// Each object created: what it is, and what the API server stored.
fn object_histories(
    plan: &Plan,
    world: &World,
    created: &BTreeSet<usize>,
    deleted: &BTreeSet<usize>,
) -> Vec<ObjectHistory> {
    created
        .iter()
        .map(|o| {
            let planned = &plan.objects[*o];
            ObjectHistory {
                name: planned.name.clone(),
                namespace: NAMESPACE.to_owned(),
                asset: planned.asset.clone(),
                kind: planned.kind.clone(),
                deleted: deleted.contains(o),
                status_writes: world.status_writes(&planned.name),
                last: world.object(&planned.name),
            }
        })
        .collect()
}

/// Counts into `phases` the last phase of every object not deleted (`none`
/// without one).
fn count_phases(objects: &[ObjectHistory], phases: &mut BTreeMap<String, usize>) {
    for object in objects.iter().filter(|o| !o.deleted) {
        let phase = object
            .last
            .as_ref()
            .and_then(|o| o["status"]["phase"].as_str())
            .unwrap_or("none")
            .to_owned();
        *phases.entry(phase).or_insert(0) += 1;
    }
}
