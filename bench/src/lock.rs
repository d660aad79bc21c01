//! The lock cycle (take, give back) through the ticket store, which fences,
//! claims the ticket and audits, against `rslock` (Redlock on one server: no
//! fencing, no claim, no audit), on the same server, in alternating rounds.

use crate::bed::{Bed, asset};
use crate::stats::{Spread, percentile_us};
use crate::{BenchError, cpu, server};
use assetscan_operator::store::TicketStore;
use futures::future::try_join_all;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;

/// Cycles/s and latencies of one side in one round.
struct Side {
    rate: f64,
    p50_us: f64,
    p99_us: f64,
}

pub async fn report(bed: &Bed) -> Result<(), BenchError> {
    let store = bed.store().await?;
    let rslock = rslock::LockManager::new(vec![bed.server.url()]);
    println!("# lock cycle (acquire + release) against rslock, {ROUNDS} rounds");
    for (tasks, cycles) in [(1usize, 1500usize), (32, 150)] {
        // Warm-up: connections open, scripts loaded.
        ours(&store, tasks, 10).await?;
        theirs(&rslock, tasks, 10).await?;
        let mut ratios = Vec::new();
        let mut sides = Vec::new();
        for _ in 0..ROUNDS {
            let a = ours(&store, tasks, cycles).await?;
            let b = theirs(&rslock, tasks, cycles).await?;
            ratios.push(a.rate / b.rate);
            sides.push((a, b));
        }
        sides.sort_by(|x, y| (x.0.rate / x.1.rate).total_cmp(&(y.0.rate / y.1.rate)));
        let (a, b) = &sides[sides.len() / 2];
        println!(
            "lock cycle, {tasks} task(s): store {:.0} cycles/s (p50 {:.0} µs, p99 {:.0} µs), rslock {:.0} cycles/s (p50 {:.0} µs, p99 {:.0} µs) [median round]",
            a.rate, a.p50_us, a.p99_us, b.rate, b.p50_us, b.p99_us
        );
        println!(
            "lock cycle ratio to rslock, {tasks} task(s): {}",
            Spread::of(ratios)
        );
    }
    profile(bed, &store, &rslock).await?;
    let commands = server::commands(&bed.server)?;
    let cycle = store
        .acquire(&asset("cost-of-a-cycle")?, "r1", "A", 0)
        .await?;
    store
        .release(&asset("cost-of-a-cycle")?, &cycle.lease)
        .await?;
    println!(
        "lock cycle through the store: {} commands (rslock: 4)",
        server::commands(&bed.server)? - commands
    );
    Ok(())
}

/// Runs `cycles` cycles in each of `tasks` tasks, each on its own asset.
async fn ours(store: &TicketStore, tasks: usize, cycles: usize) -> Result<Side, BenchError> {
    let started = Instant::now();
    let runs = (0..tasks).map(|t| {
        let store = store.clone();
        tokio::spawn(async move {
            let asset = asset(&format!("lock-{t}"))?;
            let holder = format!("bench-{t}");
            let mut latencies = Vec::with_capacity(cycles);
            for _ in 0..cycles {
                let at = Instant::now();
                let got = store.acquire(&asset, "r1", &holder, 0).await?;
                store.release(&asset, &got.lease).await?;
                latencies.push(at.elapsed());
            }
            Ok::<_, BenchError>(latencies)
        })
    });
    side(started, try_join_all(runs).await?)
}

async fn theirs(
    locks: &rslock::LockManager,
    tasks: usize,
    cycles: usize,
) -> Result<Side, BenchError> {
    let started = Instant::now();
    let runs = (0..tasks).map(|t| {
        let locks = locks.clone();
        tokio::spawn(async move {
            let resource = format!("rslock-{t}").into_bytes();
            let mut latencies = Vec::with_capacity(cycles);
            for _ in 0..cycles {
                let at = Instant::now();
                let lock = locks
                    .lock(&resource, Duration::from_secs(30))
                    .await
                    .map_err(|e| BenchError::Rslock(e.to_string()))?;
                locks.unlock(&lock).await;
                latencies.push(at.elapsed());
            }
            Ok::<_, BenchError>(latencies)
        })
    });
    side(started, try_join_all(runs).await?)
}

fn side(
    started: Instant,
    per_task: Vec<Result<Vec<Duration>, BenchError>>,
) -> Result<Side, BenchError> {
    let elapsed = started.elapsed().as_secs_f64();
    let mut all = Vec::new();
    for latencies in per_task {
        all.extend(latencies?);
    }
    Ok(Side {
        rate: all.len() as f64 / elapsed,
        p50_us: percentile_us(&mut all, 50.0),
        p99_us: percentile_us(&mut all, 99.0),
    })
}

/// Where a cycle's time goes: the server's CPU per cycle (at one task, and
/// at 32 with the calls it makes), each call, one bare round trip, and the
/// same with the other core kept busy. Each
/// measurement runs in a spawned task, as the measured rounds do (on the
/// runtime's own thread every reply would add a cross-thread wake-up).
async fn profile(
    bed: &Bed,
    store: &TicketStore,
    rslock: &rslock::LockManager,
) -> Result<(), BenchError> {
    const CYCLES: usize = 1500;
    let per_cycle = |before: (u64, u64), after: (u64, u64)| {
        (
            (after.0 - before.0) as f64 / CYCLES as f64,
            (after.1 - before.1) as f64 / CYCLES as f64,
        )
    };
    let server_now = || -> Result<(u64, u64), BenchError> {
        Ok((
            server::busy_us(&bed.server)?,
            server::commands(&bed.server)?,
        ))
    };
    let before = server_now()?;
    let a = ours(store, 1, CYCLES).await?;
    let (ours_us, ours_commands) = per_cycle(before, server_now()?);
    let before = server_now()?;
    let b = theirs(rslock, 1, CYCLES).await?;
    let (theirs_us, theirs_commands) = per_cycle(before, server_now()?);
    println!(
        "lock cycle profile, 1 task: store p50 {:.0} µs, {ours_commands:.1} commands, {ours_us:.0} µs of the server's CPU; rslock p50 {:.0} µs, {theirs_commands:.1} commands, {theirs_us:.0} µs of the server's CPU",
        a.p50_us, b.p50_us
    );
    // The same with the server never idle (32 tasks): what the scripts cost
    // a warm server, which bounds the rate at 32 tasks.
    const BUSY_CYCLES: usize = 150;
    let busy_cycles = (32 * BUSY_CYCLES) as f64;
    let warm = |before: (u64, u64), after: (u64, u64)| (after.0 - before.0) as f64 / busy_cycles;
    let client = |before: u64| -> Result<f64, BenchError> {
        Ok((cpu::process_us()? - before) as f64 / busy_cycles)
    };
    let before = server_now()?;
    let by_command = server::commandstats(&bed.server)?;
    let client_before = cpu::process_us()?;
    ours(store, 32, BUSY_CYCLES).await?;
    let ours_client = client(client_before)?;
    let ours_warm = warm(before, server_now()?);
    // µs per cycle by command, of the commands the cycle ran.
    let inside: Vec<(String, f64)> = server::commandstats_since(&bed.server, &by_command)?
        .into_iter()
        .map(|(name, stat)| (name, stat.usec as f64 / busy_cycles))
        .collect();
    let (scripts_us, commands_us) = inside.iter().fold((0.0, 0.0), |(s, c), (name, us)| {
        if name == "evalsha" {
            (s + us, c)
        } else {
            (s, c + us)
        }
    });
    let before = server_now()?;
    let client_before = cpu::process_us()?;
    theirs(rslock, 32, BUSY_CYCLES).await?;
    let theirs_client = client(client_before)?;
    let theirs_warm = warm(before, server_now()?);
    println!(
        "lock cycle profile, 32 tasks: {ours_warm:.1} µs of the server's CPU per store cycle, {theirs_warm:.1} µs per rslock cycle; the client's (this process, every thread): {ours_client:.1} µs per store cycle, {theirs_client:.1} µs per rslock cycle"
    );
    println!(
        "lock cycle profile, 32 tasks, store cycle by command (INFO commandstats, µs per cycle; evalsha includes the calls inside): {}",
        inside
            .iter()
            .map(|(name, us)| format!("{name} {us:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // The scripts' time less what Redis charges for running them and for
    // the calls they make, less those calls' own time: what is left is the
    // scripts' own Lua work (checks, JSON, number conversions).
    let costs = ScriptCosts::measure(bed)?;
    let calls = ours_commands - 2.0;
    let lua_us = scripts_us - commands_us - 2.0 * costs.invocation_us - calls * costs.call_us;
    println!(
        "lock cycle profile, what Redis charges a script besides its commands: {:.1} µs to run one, {:.2} µs per call made inside it (and the command's own {:.2} µs); the store's cycle is 2 scripts making {calls:.0} calls, which leaves {lua_us:.1} µs of its {scripts_us:.1} µs in scripts to the scripts' own Lua work",
        costs.invocation_us, costs.call_us, costs.command_us
    );
    // One task again, with the other core kept busy by a spinning thread:
    // client and server then share the remaining core, and no reply waits
    // for an idle core to wake up. What changes against the idle rounds is
    // the cost of that wake-up, not the work.
    let spinning = Arc::new(AtomicBool::new(true));
    let spinner = {
        let spinning = spinning.clone();
        std::thread::spawn(move || {
            while spinning.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    let spun = async {
        let a = ours(store, 1, CYCLES).await?;
        let b = theirs(rslock, 1, CYCLES).await?;
        let ping = ping_p50(store, CYCLES).await?;
        Ok::<_, BenchError>((a, b, ping))
    }
    .await;
    spinning.store(false, Ordering::Relaxed);
    spinner
        .join()
        .map_err(|_| BenchError::Outcome("the spinning thread panicked".into()))?;
    let (a, b, ping) = spun?;
    println!(
        "lock cycle profile, 1 task, other core busy: store p50 {:.0} µs, rslock p50 {:.0} µs (ratio of rates {:.2}); PING p50 {ping:.0} µs",
        a.p50_us,
        b.p50_us,
        a.rate / b.rate
    );
    let store = store.clone();
    let url = bed.server.url();
    let (acquire, release, through_store, bare) = tokio::spawn(async move {
        let lone = asset("lock-profile")?;
        let (mut acquires, mut releases) = (Vec::new(), Vec::new());
        for _ in 0..CYCLES {
            let at = Instant::now();
            let got = store.acquire(&lone, "r1", "profile", 0).await?;
            let between = Instant::now();
            store.release(&lone, &got.lease).await?;
            acquires.push(between - at);
            releases.push(between.elapsed());
        }
        // One round trip, PING: through the store's connection, and through
        // a bare multiplexed connection of the same client library.
        let mut plain = redis::Client::open(url)
            .map_err(|e| BenchError::Rslock(e.to_string()))?
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| BenchError::Rslock(e.to_string()))?;
        let (mut through_store, mut bare) = (Vec::new(), Vec::new());
        for _ in 0..CYCLES {
            let at = Instant::now();
            store.ping().await?;
            through_store.push(at.elapsed());
            let at = Instant::now();
            redis::cmd("PING")
                .query_async::<String>(&mut plain)
                .await
                .map_err(|e| BenchError::Rslock(e.to_string()))?;
            bare.push(at.elapsed());
        }
        Ok::<_, BenchError>((
            percentile_us(&mut acquires, 50.0),
            percentile_us(&mut releases, 50.0),
            percentile_us(&mut through_store, 50.0),
            percentile_us(&mut bare, 50.0),
        ))
    })
    .await??;
    println!(
        "lock cycle profile, 1 task: acquire p50 {acquire:.0} µs, release p50 {release:.0} µs; PING p50 {through_store:.0} µs through the store's connection, {bare:.0} µs through a bare one"
    );
    Ok(())
}

/// p50 of `cycles` PINGs through the store's connection, from a spawned
/// task as the measured rounds run.
async fn ping_p50(store: &TicketStore, cycles: usize) -> Result<f64, BenchError> {
    let store = store.clone();
    tokio::spawn(async move {
        let mut pings = Vec::with_capacity(cycles);
        for _ in 0..cycles {
            let at = Instant::now();
            store.ping().await?;
            pings.push(at.elapsed());
        }
        Ok::<_, BenchError>(percentile_us(&mut pings, 50.0))
    })
    .await?
}

/// What Redis charges a script apart from the commands it runs, as the
/// server's own time per request (`INFO commandstats`, the same measure as
/// the cycle's by-command line): running an empty script, and each call a
/// script makes (a script of `CALLS` GETs of a missing key, less the empty
/// one and less the GETs' own time).
struct ScriptCosts {
    invocation_us: f64,
    call_us: f64,
    command_us: f64,
}

impl ScriptCosts {
    fn measure(bed: &Bed) -> Result<ScriptCosts, BenchError> {
        const CALLS: usize = 8;
        const REQUESTS: usize = 40_000;
        let per_request = |body: &str| -> Result<(f64, f64), BenchError> {
            bed.server.command(&["SCRIPT", "LOAD", body])?;
            let sha = redis::Script::new(body).get_hash().to_owned();
            let args: Vec<String> = ["EVALSHA", &sha, "1", "asc:{script-cost}:missing"]
                .map(str::to_owned)
                .into();
            let before = server::commandstats(&bed.server)?;
            server::redis_benchmark(&bed.server, 4, REQUESTS, &args)?;
            let spent = server::commandstats_since(&bed.server, &before)?;
            let each = |name: &str| spent.get(name).map_or(0, |c| c.usec) as f64 / REQUESTS as f64;
            Ok((each("evalsha"), each("get")))
        };
        let (empty, _) = per_request("return 1")?;
        let (calling, gets) = per_request(&format!(
            "for _ = 1, {CALLS} do redis.call('GET', KEYS[1]) end return 1"
        ))?;
        Ok(ScriptCosts {
            invocation_us: empty,
            call_us: (calling - empty - gets) / CALLS as f64,
            command_us: gets / CALLS as f64,
        })
    }
}
