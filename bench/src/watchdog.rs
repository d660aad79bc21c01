//! The watchdog's cost while a process holds many locks: round trips and
//! the process's CPU time per renewal interval.

use crate::bed::{Bed, asset};
use crate::{BenchError, cpu};
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
        let (trips, cpu_us) = (store.round_trips(), cpu::process_us()?);
        next_batches(&store, INTERVALS).await;
        let trips = (store.round_trips() - trips) as f64 / INTERVALS as f64;
        let cpu = (cpu::process_us()? - cpu_us) as f64 / 1000.0 / INTERVALS as f64;
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
