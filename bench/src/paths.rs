//! Redis commands and round trips of one scan, by path. Commands are counted
//! by the server (`INFO commandstats`, the calls scripts make included),
//! round trips by the client (every request the store sent).

use crate::bed::{Bed, request};
use crate::effects::{InstantEffects, Path};
use crate::{BenchError, server};
use assetscan_operator::domain::ScanRequest;
use assetscan_operator::pipeline::{Outcome, Pipeline};
use assetscan_operator::store::TicketStore;
use tokio_util::sync::CancellationToken;

/// Scans per path: the counts are exact, the mean only smooths nothing.
const SCANS: usize = 20;

/// What one scan cost, on average over [`SCANS`].
struct Cost {
    commands: f64,
    round_trips: f64,
    scripts: f64,
}

pub async fn report(bed: &Bed) -> Result<(), BenchError> {
    let (pipeline, own) = bed.pipeline_and_store().await?;
    let measured: Measured = (&pipeline, &own);
    // Loads the scripts, so that no SCRIPT LOAD falls in a measurement.
    for path in [Path::Offline, Path::Clean, Path::HighRisk] {
        run(
            &pipeline,
            &request("warm", &format!("{path:?}"), path, "A")?,
        )
        .await?;
    }
    println!("# commands and round trips per scan, by path ({SCANS} scans each)");
    for (name, path) in [
        ("offline", Path::Offline),
        ("clean", Path::Clean),
        ("high risk, one notification", Path::HighRisk),
    ] {
        let requests: Vec<ScanRequest> = (0..SCANS)
            .map(|i| request(&format!("path-{path:?}-{i}"), "r1", path, "A"))
            .collect::<Result<_, _>>()?;
        let cost = measure(bed, measured, &requests).await?;
        print_cost(name, &cost);
        if path == Path::HighRisk {
            // A caller that has not seen the run end reads first: a run
            // that ended costs that one read.
            let unknown: Vec<ScanRequest> = requests
                .iter()
                .map(|req| ScanRequest {
                    expect_open: false,
                    resolves_alert: false,
                    ..req.clone()
                })
                .collect();
            let again = measure(bed, measured, &unknown).await?;
            print_cost("re-reconcile of a finished run", &again);
        }
    }
    contending(bed, measured).await
}

/// A pipeline and its own store connection, whose round trips are counted.
type Measured<'a> = (&'a Pipeline<InstantEffects>, &'a TicketStore);

fn print_cost(name: &str, cost: &Cost) {
    println!(
        "path {name}: {:.1} commands, {:.1} round trips, {:.1} scripts",
        cost.commands, cost.round_trips, cost.scripts
    );
}

async fn run(
    pipeline: &Pipeline<InstantEffects>,
    req: &ScanRequest,
) -> Result<Outcome, BenchError> {
    Ok(pipeline.run(req, &(), &CancellationToken::new()).await?)
}

async fn measure(
    bed: &Bed,
    (pipeline, own): Measured<'_>,
    requests: &[ScanRequest],
) -> Result<Cost, BenchError> {
    let (commands, scripts) = (
        server::commands(&bed.server)?,
        server::calls(&bed.server, "evalsha")?,
    );
    let round_trips = own.round_trips();
    for req in requests {
        match run(pipeline, req).await? {
            Outcome::Terminal(_) => {}
            other => return Err(BenchError::Outcome(format!("{other:?}"))),
        }
    }
    let n = requests.len() as f64;
    Ok(Cost {
        commands: (server::commands(&bed.server)? - commands) as f64 / n,
        round_trips: (own.round_trips() - round_trips) as f64 / n,
        scripts: (server::calls(&bed.server, "evalsha")? - scripts) as f64 / n,
    })
}

/// A second replica finds the asset locked: what that costs, and how long
/// it waits before it asks again, against the lock's remaining ttl.
async fn contending(bed: &Bed, (pipeline, own): Measured<'_>) -> Result<(), BenchError> {
    let holder = bed.store().await?;
    let mut cost = Cost {
        commands: 0.0,
        round_trips: 0.0,
        scripts: 0.0,
    };
    let mut shortest_wait_vs_ttl = f64::INFINITY;
    for i in 0..SCANS {
        let asset = format!("contended-{i}");
        let held = holder
            .acquire(&crate::bed::asset(&asset)?, "r0", "other-replica", 0)
            .await?;
        let (commands, scripts) = (
            server::commands(&bed.server)?,
            server::calls(&bed.server, "evalsha")?,
        );
        let round_trips = own.round_trips();
        let outcome = run(
            pipeline,
            &request(&asset, "r1", Path::HighRisk, "this-replica")?,
        )
        .await?;
        cost.commands += (server::commands(&bed.server)? - commands) as f64;
        cost.scripts += (server::calls(&bed.server, "evalsha")? - scripts) as f64;
        cost.round_trips += (own.round_trips() - round_trips) as f64;
        let Outcome::Locked { retry_after, .. } = outcome else {
            return Err(BenchError::Outcome(format!("{outcome:?}")));
        };
        let ttl = holder.config().lock_ttl.as_secs_f64();
        shortest_wait_vs_ttl = shortest_wait_vs_ttl.min(retry_after.as_secs_f64() / ttl);
        holder
            .release(&crate::bed::asset(&asset)?, &held.lease)
            .await?;
    }
    let n = SCANS as f64;
    cost.commands /= n;
    cost.round_trips /= n;
    cost.scripts /= n;
    print_cost("second replica, asset locked", &cost);
    println!(
        "second replica waits before asking again: at least {:.3} of the lock's ttl (the remaining ttl Redis reported)",
        shortest_wait_vs_ttl
    );
    Ok(())
}
