//! `kube-emulator`: the Kubernetes API emulator as a standalone server, for
//! people and scripts (the demo, chaos runs, trying `kubectl` by hand).
//!
//! ```text
//! cargo run -p assetscan-testkit --bin kube-emulator -- --port 6443 --crds crds/ --kubeconfig target/kubeconfig
//! KUBECONFIG=target/kubeconfig kubectl get assetscans -A
//! ```
//!
//! Prints one line with the URL once it serves; stops on SIGINT or SIGTERM.
//!
//! Control surface for scripts: `GET /emulator/requests` (request counters
//! as JSON, e.g. `kubectl get --raw /emulator/requests`), `POST
//! /emulator/outage?seconds=N` (an API server outage that ends by itself),
//! and signals: SIGUSR1 takes the API server down until SIGUSR2 brings it
//! back. Each change of availability is printed as a line (`kube-emulator
//! down`, `kube-emulator serving`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use assetscan_testkit::emulator::{Availability, Emulator, EmulatorOptions, Faults};
use clap::Parser;

/// Every write clones and drops JSON trees: with glibc's allocator that was
/// about a third of the emulator's CPU at 10 000 objects (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(
    name = "kube-emulator",
    about = "A Kubernetes API server emulator for tests and demos"
)]
struct Args {
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Directory of CRD manifests to register at start.
    #[arg(long)]
    crds: Option<PathBuf>,
    /// Where to write a kubeconfig for kubectl and the operator.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Extra namespaces to create (repeatable).
    #[arg(long = "namespace")]
    namespaces: Vec<String>,
    /// Changes kept for watch resumption; older resourceVersions answer 410.
    #[arg(long, default_value_t = 10_000)]
    watch_history: usize,
    /// Keep no write history per object (what tests read in-process):
    /// for runs with very many objects.
    #[arg(long)]
    no_write_history: bool,
    /// Seconds between watch bookmarks.
    #[arg(long, default_value_t = 5)]
    bookmark_seconds: u64,
}

async fn stop_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("installing the SIGTERM handler")?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r.context("waiting for SIGINT")?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    Ok(())
}

/// SIGUSR1 begins an outage, SIGUSR2 ends it.
#[cfg(unix)]
fn outage_signals(faults: Faults) -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut down = signal(SignalKind::user_defined1()).context("installing the SIGUSR1 handler")?;
    let mut up = signal(SignalKind::user_defined2()).context("installing the SIGUSR2 handler")?;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                Some(()) = down.recv() => faults.begin_outage(None),
                Some(()) = up.recv() => faults.end_outage(),
                else => return,
            }
        }
    });
    Ok(())
}

/// Prints every change of availability, for scripts that wait on it.
fn report_availability(faults: Faults) {
    tokio::spawn(async move {
        loop {
            faults.wait_until(Availability::Down).await;
            println!("kube-emulator down");
            faults.wait_until(Availability::Serving).await;
            println!("kube-emulator serving");
        }
    });
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let emulator = Emulator::start(EmulatorOptions {
        crd_dir: args.crds.clone(),
        port: Some(args.port),
        namespaces: args.namespaces.clone(),
        watch_history: args.watch_history,
        write_history: !args.no_write_history,
        bookmark_interval: Duration::from_secs(args.bookmark_seconds.max(1)),
        ..Default::default()
    })
    .await
    .context("starting the emulator")?;
    if let Some(path) = &args.kubeconfig {
        emulator
            .write_kubeconfig(path)
            .context("writing the kubeconfig")?;
        println!(
            "kube-emulator listening on {} (kubeconfig: {})",
            emulator.url(),
            path.display()
        );
    } else {
        println!("kube-emulator listening on {}", emulator.url());
    }
    #[cfg(unix)]
    outage_signals(emulator.faults().clone())?;
    report_availability(emulator.faults().clone());
    stop_signal().await?;
    emulator.shutdown().await;
    Ok(())
}
