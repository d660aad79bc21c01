//! Where a lock cycle's time goes: the server's CPU per cycle (at one task,
//! and at 32 with the calls it makes), what Redis charges a script besides
//! its commands, the same rounds with the other core kept busy, and each
//! call and one bare round trip. Each measurement runs in a spawned task, as
//! the measured rounds do (on the runtime's own thread every reply would add
//! a cross-thread wake-up).

use super::{ours, theirs};
use crate::bed::{Bed, asset};
use crate::stats::percentile_us;
use crate::{BenchError, cpu, server};
use assetscan_operator::store::TicketStore;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Cycles of each side at one task.
const CYCLES: usize = 1500;
/// Cycles of each of the 32 tasks that keep the server never idle.
const BUSY_CYCLES: usize = 150;

/// Prints each part of the profile, in this order.
pub(super) async fn profile(
    bed: &Bed,
    store: &TicketStore,
    rslock: &rslock::LockManager,
) -> Result<(), BenchError> {
    let ours_commands = one_task(bed, store, rslock).await?;
    let scripts = server_never_idle(bed, store, rslock).await?;
    script_work(bed, ours_commands, &scripts)?;
    other_core_busy(store, rslock).await?;
    calls_and_round_trips(bed, store).await
}

/// The server's CPU time and the commands it processed, so far.
struct Reading {
    busy_us: u64,
    commands: u64,
}

impl Reading {
    fn take(bed: &Bed) -> Result<Reading, BenchError> {
        Ok(Reading {
            busy_us: server::busy_us(&bed.server)?,
            commands: server::commands(&bed.server)?,
        })
    }

    /// The server's CPU time since `before`, in µs per cycle of `cycles`.
    fn busy_us_since(&self, before: &Reading, cycles: usize) -> f64 {
        (self.busy_us - before.busy_us) as f64 / cycles as f64
    }
}

/// One task each: p50, commands and the server's CPU per cycle. Returns
/// the store's commands per cycle.
async fn one_task(
    bed: &Bed,
    store: &TicketStore,
    rslock: &rslock::LockManager,
) -> Result<f64, BenchError> {
    let per_cycle = |before: Reading, after: Reading| {
        (
            after.busy_us_since(&before, CYCLES),
            (after.commands - before.commands) as f64 / CYCLES as f64,
        )
    };
    let before = Reading::take(bed)?;
    let a = ours(store, 1, CYCLES).await?;
    let (ours_us, ours_commands) = per_cycle(before, Reading::take(bed)?);
    let before = Reading::take(bed)?;
    let b = theirs(rslock, 1, CYCLES).await?;
    let (theirs_us, theirs_commands) = per_cycle(before, Reading::take(bed)?);
    println!(
        "lock cycle profile, 1 task: store p50 {:.0} µs, {ours_commands:.1} commands, {ours_us:.0} µs of the server's CPU; rslock p50 {:.0} µs, {theirs_commands:.1} commands, {theirs_us:.0} µs of the server's CPU",
        a.p50_us, b.p50_us
    );
    Ok(ours_commands)
}

/// The server's time per store cycle in scripts (`evalsha`, the calls
/// inside included) and in other commands.
struct ScriptTime {
    scripts_us: f64,
    commands_us: f64,
}

/// The same with the server never idle (32 tasks): what the scripts cost a
/// warm server, which bounds the rate at 32 tasks; the client's CPU; the
/// store's cycle by command.
async fn server_never_idle(
    bed: &Bed,
    store: &TicketStore,
    rslock: &rslock::LockManager,
) -> Result<ScriptTime, BenchError> {
    let busy_cycles = 32 * BUSY_CYCLES;
    let client = |before: u64| -> Result<f64, BenchError> {
        Ok((cpu::process_us()? - before) as f64 / busy_cycles as f64)
    };
    let before = Reading::take(bed)?;
    let by_command = server::commandstats(&bed.server)?;
    let client_before = cpu::process_us()?;
    ours(store, 32, BUSY_CYCLES).await?;
    let ours_client = client(client_before)?;
    let ours_warm = Reading::take(bed)?.busy_us_since(&before, busy_cycles);
    // µs per cycle by command, of the commands the cycle ran.
    let inside: Vec<(String, f64)> = server::commandstats_since(&bed.server, &by_command)?
        .into_iter()
        .map(|(name, stat)| (name, stat.usec as f64 / busy_cycles as f64))
        .collect();
    let (scripts_us, commands_us) = inside.iter().fold((0.0, 0.0), |(s, c), (name, us)| {
        if name == "evalsha" {
            (s + us, c)
        } else {
            (s, c + us)
        }
    });
    let before = Reading::take(bed)?;
    let client_before = cpu::process_us()?;
    theirs(rslock, 32, BUSY_CYCLES).await?;
    let theirs_client = client(client_before)?;
    let theirs_warm = Reading::take(bed)?.busy_us_since(&before, busy_cycles);
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
    Ok(ScriptTime {
        scripts_us,
        commands_us,
    })
}

/// The scripts' time less what Redis charges for running them and for the
/// calls they make, less those calls' own time: what is left is the
/// scripts' own Lua work (checks, JSON, number conversions).
fn script_work(bed: &Bed, ours_commands: f64, time: &ScriptTime) -> Result<(), BenchError> {
    let costs = ScriptCosts::measure(bed)?;
    let calls = ours_commands - 2.0;
    let scripts_us = time.scripts_us;
    let lua_us = scripts_us - time.commands_us - 2.0 * costs.invocation_us - calls * costs.call_us;
    println!(
        "lock cycle profile, what Redis charges a script besides its commands: {:.1} µs to run one, {:.2} µs per call made inside it (and the command's own {:.2} µs); the store's cycle is 2 scripts making {calls:.0} calls, which leaves {lua_us:.1} µs of its {scripts_us:.1} µs in scripts to the scripts' own Lua work",
        costs.invocation_us, costs.call_us, costs.command_us
    );
    Ok(())
}

/// One task again, with the other core kept busy by a spinning thread:
/// client and server then share the remaining core, and no reply waits for
/// an idle core to wake up. What changes against the idle rounds is the
/// cost of that wake-up, not the work.
async fn other_core_busy(
    store: &TicketStore,
    rslock: &rslock::LockManager,
) -> Result<(), BenchError> {
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

/// The cycle's two calls apart, and one round trip (PING) through the
/// store's connection and through a bare multiplexed connection of the same
/// client library: p50 of each.
async fn calls_and_round_trips(bed: &Bed, store: &TicketStore) -> Result<(), BenchError> {
    let store = store.clone();
    let url = bed.server.url();
    let (acquire, release, through_store, bare) = tokio::spawn(async move {
        let (mut acquires, mut releases) = acquires_and_releases(&store).await?;
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

/// How long each acquire and each release of [`CYCLES`] cycles took.
async fn acquires_and_releases(
    store: &TicketStore,
) -> Result<(Vec<Duration>, Vec<Duration>), BenchError> {
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
    Ok((acquires, releases))
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
