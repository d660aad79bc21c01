//! The watchdog's cost while a process holds many locks: round trips and
//! the process's CPU time per renewal interval.

use crate::BenchError;
use crate::bed::{Bed, asset};
use assetscan_operator::store::{Acquired, TicketStore};
use futures::stream::{self, StreamExt, TryStreamExt};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Lock ttl of these stores: renewals every second.
const TTL: Duration = Duration::from_secs(3);
/// Renewal intervals measured per size.
const INTERVALS: u64 = 3;

pub async fn report(bed: &Bed) -> Result<(), BenchError> {
    println!(
        "# watchdog: per renewal interval ({} ms), {INTERVALS} intervals",
        TTL.as_millis() / 3
    );
    for held in [1_000usize, 10_000] {
        let store = bed.store_with_ttl(TTL).await?;
        let leases: Vec<Acquired> = stream::iter(0..held)
            .map(|i| {
                let store = store.clone();
                async move {
                    Ok::<_, BenchError>(
                        store
                            .acquire(&asset(&format!("wd-{held}-{i}"))?, "r1", "A", 0)
                            .await?,
                    )
                }
            })
            .buffer_unordered(64)
            .try_collect()
            .await?;
        // Start at an interval's end, then count the next ones.
        next_batches(&store, 1).await;
        let (trips, cpu) = (store.round_trips(), cpu_ms()?);
        next_batches(&store, INTERVALS).await;
        let trips = (store.round_trips() - trips) as f64 / INTERVALS as f64;
        let cpu = (cpu_ms()? - cpu) / INTERVALS as f64;
        let lost = store.watchdog().stats().losses.load(Ordering::Relaxed);
        println!(
            "watchdog holding {held} locks: {trips:.1} round trips per interval, {cpu:.0} ms CPU per interval ({:.1} ms per 1000 locks), {lost} lost",
            cpu * 1000.0 / held as f64
        );
        drop(leases);
    }
    Ok(())
}

/// Returns once the watchdog has sent `n` more renewal batches.
async fn next_batches(store: &TicketStore, n: u64) {
    let batches = || store.watchdog().stats().batches.load(Ordering::Relaxed);
    let target = batches() + n;
    while batches() < target {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// This process's user + system CPU time in ms, from `/proc/self/stat`
/// (fields 14 and 15, in clock ticks of 1/100 s on Linux).
fn cpu_ms() -> Result<f64, BenchError> {
    let stat = std::fs::read_to_string("/proc/self/stat").map_err(|source| BenchError::Spawn {
        program: "/proc/self/stat",
        source,
    })?;
    // The command name (field 2) may hold spaces: count from after its ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(utime), Some(stime)) => Ok((utime + stime) * 10.0),
        _ => Err(BenchError::Parse {
            what: "/proc/self/stat",
            text: stat,
        }),
    }
}
