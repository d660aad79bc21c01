//! `--fairness`: the start bound shared between namespaces. Replicas
//! that watch every namespace, under a bound that binds (the chart's 20
//! starts per second, burst 20, unless the flags say otherwise). Namespace
//! B's few AssetScans are timed twice on one stack, each from their
//! creation to all of them Finished: alone (nothing else to run), then
//! created right after namespace A's mass creation has ended, while A's
//! first round is under way. Fair lines per namespace keep B's few from
//! queueing behind A's thousands: behind A they take at most twice as long
//! as alone.

use crate::progress::Progress;
use crate::replicas::Replicas;
use crate::report::mark;
use crate::run::{self, STOP_GRACE, Settings};
use crate::stack::{Stack, Watch};
use anyhow::Result;
use std::time::{Duration, Instant};

/// The namespace of the mass creation, and the one of the few.
const MASS: &str = "tenant-a";
const FEW: &str = "tenant-b";

/// How much longer B's few may take behind A than alone.
const TARGET_RATIO: f64 = 2.0;

/// What the fairness run found.
pub struct Fairness {
    pub mass: usize,
    pub few: usize,
    pub replicas: u32,
    /// Starts per second and burst, per replica.
    pub bound: (u32, u32),
    /// B's few alone, from their creation to all Finished.
    pub alone: Duration,
    /// A's creation, and A's finished by its end.
    pub mass_created: Duration,
    pub mass_done_at_few: usize,
    /// B's few behind A, from their creation to all Finished, and A's
    /// finished by then.
    pub behind: Duration,
    pub mass_done_with_few: usize,
    /// A's first round: from its creation to all finished.
    pub mass_round: Duration,
}

/// `mass` AssetScans in namespace A, `few` in namespace B.
pub async fn run(settings: &Settings, mass: usize, few: usize) -> Result<Fairness> {
    let objects = mass + 2 * few;
    let stack = Stack::start(
        &settings.backend,
        objects,
        &settings.starts,
        Watch::Tenants(&[MASS, FEW]),
    )
    .await?;
    let launch = run::launch(settings, &stack);
    let replicas = Replicas::start(&launch, 1, 0)?;
    replicas.wait_covering(0, settings.timeout).await?;
    if !settings.starts.membership_ttl.is_zero() {
        let all = u64::from(settings.replicas_per_shard);
        replicas
            .wait_members(all, replicas.len(), settings.timeout)
            .await?;
    }
    // Indices apart: each AssetScan its own asset, across namespaces too.
    let mut b = Progress::watch(stack.api_in(FEW));
    let alone = timed(&stack, settings, &mut b, mass..mass + few, few).await?;
    let mut a = Progress::watch(stack.api_in(MASS));
    let created = Instant::now();
    stack.create_scans_in(MASS, 0..mass, &settings.mix).await?;
    let mass_created = created.elapsed();
    let mass_done_at_few = a.finished();
    let behind = timed(&stack, settings, &mut b, mass + few..objects, 2 * few).await?;
    let mass_done_with_few = a.finished();
    a.wait(mass, settings.timeout).await?;
    let mass_round = created.elapsed();
    replicas.stop(STOP_GRACE).await;
    drop((a, b));
    stack.finish().await?;
    Ok(Fairness {
        mass,
        few,
        replicas: settings.replicas_per_shard,
        bound: (settings.starts.per_second, settings.starts.burst),
        alone,
        mass_created,
        mass_done_at_few,
        behind,
        mass_done_with_few,
        mass_round,
    })
}

/// Creates the AssetScans `indices` in B and waits until `finished` of
/// B's are: how long from their creation on.
async fn timed(
    stack: &Stack,
    settings: &Settings,
    b: &mut Progress,
    indices: std::ops::Range<usize>,
    finished: usize,
) -> Result<Duration> {
    let created = Instant::now();
    stack.create_scans_in(FEW, indices, &settings.mix).await?;
    b.wait(finished, settings.timeout).await?;
    Ok(created.elapsed())
}

impl Fairness {
    /// Prints the figures and the check; returns it when it failed.
    pub fn print(&self) -> Vec<String> {
        let secs = |d: Duration| format!("{:.2} s", d.as_secs_f64());
        let (per_second, burst) = self.bound;
        println!(
            "start bound: {per_second}/s, burst {burst}, per replica; {} replica(s) watching every namespace",
            self.replicas
        );
        println!(
            "B alone: {} AssetScans in {FEW}, nothing else to run, created to all Finished in {}",
            self.few,
            secs(self.alone)
        );
        println!(
            "A: {} AssetScans created in {MASS} in {} ({} of them finished by then); A's first round {} from its creation to all finished",
            self.mass,
            secs(self.mass_created),
            self.mass_done_at_few,
            secs(self.mass_round)
        );
        println!(
            "B behind A: {} more in {FEW}, created right after A's creation ended, created to all Finished in {} ({} of A's {} finished by then)",
            self.few,
            secs(self.behind),
            self.mass_done_with_few,
            self.mass
        );
        // Two namespaces waiting: each line gets every second start.
        let half = f64::from(self.replicas) * f64::from(per_second) / 2.0;
        let fair = self.few as f64 / half.max(f64::EPSILON);
        println!(
            "B's fair share behind A: every second start, {} starts at {half:.1}/s = {fair:.2} s; B behind A / that = {:.2}x",
            self.few,
            self.behind.as_secs_f64() / fair.max(f64::EPSILON)
        );
        let ratio = self.behind.as_secs_f64() / self.alone.as_secs_f64().max(f64::EPSILON);
        let ok = ratio <= TARGET_RATIO;
        let line = format!(
            "B behind A / B alone = {} / {} = {ratio:.2}x, target <= {TARGET_RATIO}x",
            secs(self.behind),
            secs(self.alone)
        );
        println!("{} {line}", mark(ok));
        if ok {
            Vec::new()
        } else {
            vec![format!("fairness: {line}")]
        }
    }
}
