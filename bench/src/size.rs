//! Write cost against ticket size: `advance` and `acquire` on tickets of
//! about 1 KB, 16 KB (50 findings) and 200 KB (2 000 findings), each rate
//! divided by the 1 KB rate measured in the same round.

use crate::BenchError;
use crate::bed::{Bed, asset};
use crate::effects::vulns;
use crate::stats::Spread;
use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::ticket::{Fact, Status, Step, Ticket};
use assetscan_operator::store::{Acquired, Claim, Patch, TicketStore};
use futures::future::try_join_all;
use std::time::{Duration, Instant};

const ROUNDS: usize = 3;
/// Tasks writing at once, each to its own ticket.
const TASKS: usize = 4;
/// How long each rate is measured in each round.
const WINDOW: Duration = Duration::from_millis(700);

/// (label, findings, summary bytes per finding)
const SIZES: [(&str, usize, usize); 3] =
    [("1 KB", 1, 200), ("16 KB", 50, 160), ("200 KB", 2000, 0)];

pub async fn report(bed: &Bed) -> Result<(), BenchError> {
    let store = bed.store().await?;
    println!("# write cost by ticket size ({ROUNDS} rounds, {TASKS} tasks)");
    let mut tickets = Vec::new();
    for (label, findings, summary) in SIZES {
        let mut set = Vec::new();
        for t in 0..TASKS {
            set.push(prepare(&store, &format!("size-{findings}-{t}"), findings, summary).await?);
        }
        let bytes = serde_json::to_string(&set[0].1)
            .map(|s| s.len())
            .unwrap_or(0);
        println!("ticket {label}: {findings} findings, {bytes} bytes of ticket JSON");
        tickets.push(set);
    }
    let mut advance: Vec<Vec<f64>> = vec![Vec::new(); SIZES.len()];
    let mut acquire: Vec<Vec<f64>> = vec![Vec::new(); SIZES.len()];
    for _ in 0..ROUNDS {
        for (i, set) in tickets.iter().enumerate() {
            advance[i].push(rate(&store, set, Op::Advance).await?);
            acquire[i].push(rate(&store, set, Op::Acquire).await?);
        }
    }
    for (name, rates) in [("advance", &advance), ("acquire", &acquire)] {
        for (i, (label, _, _)) in SIZES.iter().enumerate().skip(1) {
            let ratios = rates[i].iter().zip(&rates[0]).map(|(r, base)| r / base);
            println!(
                "{name} at {label}: {} of the 1 KB rate ({} /s against {} /s)",
                Spread::of(ratios.collect()),
                Spread::of(rates[i].clone()),
                Spread::of(rates[0].clone())
            );
        }
    }
    Ok(())
}

#[derive(Clone, Copy)]
enum Op {
    Advance,
    Acquire,
}

/// A claimed ticket at `VULN_CHECK_DONE` holding `findings` findings; the
/// lock is released, the token kept.
async fn prepare(
    store: &TicketStore,
    id: &str,
    findings: usize,
    summary: usize,
) -> Result<(String, Ticket), BenchError> {
    let a = asset(id)?;
    let got = store.acquire(&a, "r1", "bench", 0).await?;
    let online = store
        .advance_from(
            &a,
            &got.ticket,
            got.token,
            Status::AssetOnline,
            &Patch::default().fact(Fact::Online, true),
        )
        .await?;
    let ticket = store
        .advance_from(
            &a,
            &online,
            got.token,
            Status::VulnCheckDone,
            &Patch::default().fact(Fact::Vulnerabilities, vulns(findings, 9.8, summary)),
        )
        .await?;
    store.release(&a, &got.lease).await?;
    Ok((id.to_owned(), ticket))
}

/// Operations per second over [`WINDOW`], all tasks together.
async fn rate(store: &TicketStore, set: &[(String, Ticket)], op: Op) -> Result<f64, BenchError> {
    let started = Instant::now();
    let tasks = set.iter().map(|(id, ticket)| {
        let (store, id, ticket) = (store.clone(), id.clone(), ticket.clone());
        tokio::spawn(async move { ops(&store, &id, ticket, op, started + WINDOW).await })
    });
    let counts = try_join_all(tasks).await?;
    let mut total = 0u64;
    for count in counts {
        total += count?;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

async fn ops(
    store: &TicketStore,
    id: &str,
    ticket: Ticket,
    op: Op,
    until: Instant,
) -> Result<u64, BenchError> {
    let a = asset(id)?;
    let mut count = 0u64;
    // Each task claims its ticket once for the advances, as an executor
    // does, and writes from the copy it holds.
    let got = claim(store, &a, &ticket).await?;
    let mut current = got.ticket;
    if let Op::Acquire = op {
        store.release(&a, &got.lease).await?;
    }
    while Instant::now() < until {
        match op {
            Op::Advance => {
                let mut patch = Patch::default();
                patch
                    .attempts
                    .insert(Step::ThreatIntel, (count % 1000) as u32);
                current = store
                    .advance_from(&a, &current, got.token, Status::VulnCheckDone, &patch)
                    .await?;
            }
            Op::Acquire => {
                // A claim after the read the pipeline's fast path makes.
                let again = claim(store, &a, &current).await?;
                store.release(&a, &again.lease).await?;
                current = again.ticket;
            }
        }
        count += 1;
    }
    if let Op::Advance = op {
        store.release(&a, &got.lease).await?;
    }
    Ok(count)
}

/// Claims run `r1` of `asset` as the bench's executor that holds `known`,
/// the ticket as it last read or wrote it.
async fn claim(
    store: &TicketStore,
    asset: &AssetId,
    known: &Ticket,
) -> Result<Acquired, BenchError> {
    let claim = Claim {
        known: Some(known),
        ..Claim::new("r1", "bench", 0)
    };
    Ok(store.acquire_run(asset, claim).await?)
}
