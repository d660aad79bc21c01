//! `make upgrade-test`: a rolling upgrade from the previous release to
//! this tree, and a rollback, with scans and alerts in flight, checked by
//! the chaos checker ([`crate::check`]) over the history the run records.
//!
//! The replicas watch every namespace, as a cluster-wide install does; the
//! AssetScans are spread over two namespaces ([`scans::NAMESPACES`]), with
//! the same names in both and some assetIds in both, and this tree's
//! configuration opens each channel to both (`channelAccess`).
//!
//! The phases, on the API emulator or on the cluster a kubeconfig names:
//! 1. the previous release's CRDs; three replicas of its operator; a
//!    first batch of AssetScans created, scanned and notified (high risks
//!    through the webhook receiver, which verifies each release's
//!    signature as [`Receiver`] says and records every delivery and every
//!    refusal);
//! 2. this tree's CRDs;
//! 3. the replicas replaced one by one with this tree's, as a rollout
//!    does (SIGTERM, then the new pod), new AssetScans created all along;
//!    each step waits until the new replica has claimed a run in the
//!    shared Redis, so both versions run side by side;
//! 4. one replica rolled back to the previous release, then forward again;
//! 5. every run settles; the history is recorded, then checked with the
//!    strict checker ([`crate::check::check_strict`]: every high-risk run
//!    FINISHED with its alert accepted), every object is validated under
//!    both releases' CRDs (on the cluster itself, by dry-run, when one is
//!    given), and only then are the AssetScans and the namespaces the run
//!    created deleted: what the clean-up causes is no part of the history.
//!
//! `--inject` makes it fail on purpose: this tree's replicas taking
//! another lock for the same object (another Redis key prefix), or
//! skipping the legacy lock (`redis.identityBridge: false`, so only the
//! namespaced lock), or this tree's CRD requiring a new field.

mod cluster;
mod phases;
pub mod release;
mod report;
mod scans;
mod setup;
pub mod validate;

pub use report::Verdict;

use assetscan_testkit::stubs::ProviderStubs;
use assetscan_testkit::stubs::sink::SinkKeys;
use release::Version;
use std::path::PathBuf;

/// 0.1.0's webhook secret: any text, the HMAC key of its
/// `X-AssetScan-Signature` (it knows no `whsec_` secret).
const LEGACY_SECRET: &str = "assetscan-0.1.0-webhook-secret";

/// Which signatures the webhook receiver verifies, as a receiver does at
/// some point of an upgrade from 0.1.0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Receiver {
    /// Not moved yet: it holds 0.1.0's secret only. This tree's replicas
    /// send both signatures (`legacySignature: true`, `legacySecretFrom`),
    /// so that the receiver may move whenever it likes.
    Legacy,
    /// Moving: it holds the `whsec_` secret and 0.1.0's. This tree's
    /// replicas send the Standard Webhooks signature alone.
    Both,
    /// Moved too early: the `whsec_` secret only, so it refuses 0.1.0's
    /// deliveries. The run must fail: the demonstration that a refused
    /// alert is caught.
    Standard,
}

impl Receiver {
    fn keys(self) -> SinkKeys<'static> {
        let (standard, legacy) = match self {
            Receiver::Legacy => (None, Some(LEGACY_SECRET)),
            Receiver::Both => (Some(ProviderStubs::WEBHOOK_SECRET), Some(LEGACY_SECRET)),
            Receiver::Standard => (Some(ProviderStubs::WEBHOOK_SECRET), None),
        };
        SinkKeys { standard, legacy }
    }
}

/// A violation made on purpose, to show the run fails on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inject {
    /// This tree's replicas use another Redis key prefix: another lock,
    /// fence and ticket for the same AssetScan.
    DifferentLock,
    /// This tree's replicas run with the bridge off: they take only the
    /// namespaced lock, not the legacy one the previous release takes.
    NoBridge,
    /// This tree's AssetScan CRD requires a new spec field.
    RequiredField,
}

/// The Redis key prefix of the replicas under [`Inject::DifferentLock`].
pub const OTHER_PREFIX: &str = "ascx";

/// What an upgrade run is given.
#[derive(Clone, Debug)]
pub struct Options {
    pub previous_commit: String,
    /// The previous release's number: what its operator understands
    /// ([`release::Understands`]).
    pub previous_version: Version,
    pub receiver: Receiver,
    /// The previous release.
    pub previous: Build,
    /// This tree.
    pub current: Build,
    /// A real cluster; the API emulator when absent.
    pub kubeconfig: Option<PathBuf>,
    pub inject: Option<Inject>,
    /// AssetScans of the first batch; as many more are created during the
    /// rollout.
    pub objects: usize,
    /// Where to write the objects the previous release's operator wrote
    /// (the fixtures of the CRD compatibility test).
    pub capture: Option<PathBuf>,
    /// Logs, configs and the recorded history.
    pub dir: PathBuf,
}

/// One release as built: its source tree and its operator binary.
#[derive(Clone, Debug)]
pub struct Build {
    /// The source tree's root (its `crds/` and `lua/`).
    pub tree: PathBuf,
    pub operator: PathBuf,
}

/// Runs the phases, then checks and prints what was found.
pub async fn run(options: Options) -> Result<Verdict, crate::ChaosError> {
    phases::run(options).await
}
