//! `make upgrade-test`: a rolling upgrade from the previous release to this
//! tree and a rollback, with runs in flight (`assetscan_chaos::upgrade`).
//! scripts/upgrade-test.sh builds the previous release and passes it here.

use assetscan_chaos::replicas::sibling_operator;
use assetscan_chaos::upgrade::{Build, Inject, Options, Receiver};
use clap::{Parser, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Injected {
    /// This tree's replicas take another lock for the same AssetScan.
    DifferentLock,
    /// This tree's replicas skip the legacy lock (the bridge off).
    NoBridge,
    /// This tree's AssetScan CRD requires a new field.
    RequiredField,
}

/// `--receiver`: see [`Receiver`].
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Receives {
    /// It holds 0.1.0's secret only; this tree sends both signatures.
    Legacy,
    /// It holds the `whsec_` secret and 0.1.0's; this tree sends Standard Webhooks only.
    Both,
    /// It holds the `whsec_` secret only: 0.1.0's alerts are refused, the run must fail.
    Standard,
}

#[derive(Parser, Debug)]
#[command(
    name = "upgrade-test",
    about = "A rolling upgrade and a rollback between the previous release and this tree, checked"
)]
struct Args {
    /// The previous release's commit (CHANGELOG.md names it).
    #[arg(long)]
    previous_commit: String,
    /// Its number (its CHANGELOG.md section, `X.Y.Z`): what its operator
    /// understands of the configuration and how it signs.
    #[arg(long)]
    previous_version: String,
    /// Which signatures the webhook receiver verifies.
    #[arg(long, value_enum, default_value = "both")]
    receiver: Receives,
    /// Its source tree (a git worktree of that commit).
    #[arg(long)]
    previous_tree: PathBuf,
    /// Its operator binary.
    #[arg(long)]
    previous_operator: PathBuf,
    /// This tree's operator binary; default: `chaos-operator` beside this program.
    #[arg(long)]
    operator: Option<PathBuf>,
    /// A real cluster (its CRDs are replaced by both releases'); default: the API emulator.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Break the upgrade on purpose: the run must then fail.
    #[arg(long, value_enum)]
    inject: Option<Injected>,
    /// AssetScans of the first batch (as many more during the rollout).
    #[arg(long, default_value_t = 12)]
    objects: usize,
    /// Write the objects the previous release's operator wrote to this file.
    #[arg(long)]
    capture: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let previous_version = match args.previous_version.parse() {
        Ok(version) => version,
        Err(e) => {
            eprintln!("--previous-version: {e}");
            return ExitCode::FAILURE;
        }
    };
    let operator = args.operator.clone().or_else(sibling_operator);
    let Some(operator) = operator.filter(|p| p.exists()) else {
        eprintln!(
            "this tree's operator binary is missing: build it with `cargo build -p assetscan-chaos --bins` (make upgrade-test does)"
        );
        return ExitCode::FAILURE;
    };
    let dir = match tempfile::Builder::new()
        .prefix("assetscan-upgrade-")
        .tempdir()
    {
        Ok(dir) => dir.keep(),
        Err(e) => {
            eprintln!("cannot create a work directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "upgrade test: logs, configs and the recorded history in {}",
        dir.display()
    );
    let options = Options {
        previous_commit: args.previous_commit,
        previous_version,
        receiver: match args.receiver {
            Receives::Legacy => Receiver::Legacy,
            Receives::Both => Receiver::Both,
            Receives::Standard => Receiver::Standard,
        },
        previous: Build {
            tree: args.previous_tree,
            operator: args.previous_operator,
        },
        current: Build {
            tree: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."),
            operator,
        },
        kubeconfig: args.kubeconfig,
        inject: args.inject.map(|i| match i {
            Injected::DifferentLock => Inject::DifferentLock,
            Injected::NoBridge => Inject::NoBridge,
            Injected::RequiredField => Inject::RequiredField,
        }),
        objects: args.objects,
        capture: args.capture,
        dir,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(assetscan_chaos::upgrade::run(options)) {
        Ok(verdict) if verdict.passed() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("upgrade test aborted: {e}");
            ExitCode::FAILURE
        }
    }
}
