//! `scan`: one run of one asset, standalone (no Kubernetes). The same
//! pipeline, lock and fencing as the controller: a killed `scan` is resumed
//! by running it again with the same `--run`.

use super::{Common, shutdown_on_signal};
use crate::pipeline::{Outcome, Pipeline};
use crate::ports::StoreFailure;
use crate::providers::Providers;
use crate::providers::sbom::SbomSources;
use assetscan_domain::AssetId;
use assetscan_domain::ticket::{Status, Ticket, now_ms};
use assetscan_domain::{
    DEFAULT_CVSS_THRESHOLD, DEFAULT_EPSS_THRESHOLD, Package, Policy, Target, ThreatIntelPolicy,
    TriageRequest,
};
use assetscan_domain::{SbomRef, ScanRequest};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit codes, one per outcome, so that scripts can branch on them.
pub mod exit {
    /// Finished; no high risk (or the asset was offline).
    pub const CLEAN: u8 = 0;
    /// Finished; a high risk was confirmed and notified.
    pub const HIGH_RISK: u8 = 3;
    /// The run failed (retries exhausted or a permanent error).
    pub const FAILED: u8 = 4;
    /// Another executor holds the asset's lock.
    pub const LOCKED: u8 = 5;
    /// This executor lost the run (lock lost, superseded, or interrupted).
    pub const INTERRUPTED: u8 = 6;
    /// High risk confirmed, but the notification could not be delivered yet
    /// (retryable errors); run again with the same `--run`.
    pub const NOTIFY_PENDING: u8 = 7;
    /// Finished without a high risk among the packages asked about, but it
    /// asked about none of them, or fewer than `--min-coverage`: not clean.
    pub const COVERAGE_LOW: u8 = 8;
}

#[derive(Args, Debug)]
pub struct ScanArgs {
    #[command(flatten)]
    common: Common,
    /// The asset's id (the lock scope).
    #[arg(long)]
    asset: String,
    /// The run's id; run again with the same id to resume a killed scan.
    #[arg(long)]
    run: Option<String>,
    /// Host for the TCP online check.
    #[arg(long, conflicts_with = "inventory", requires = "port")]
    host: Option<String>,
    /// Port for the TCP online check (repeatable).
    #[arg(long = "port")]
    port: Vec<u16>,
    /// Id in the inventory for the online check.
    #[arg(long)]
    inventory: Option<String>,
    /// A package as `ECOSYSTEM/NAME@VERSION` (e.g. `Debian:12/openssl@3.0.11-1`,
    /// `npm/@babel/core@7.0.0`); repeatable.
    #[arg(long = "package")]
    packages: Vec<String>,
    /// A package URL (repeatable).
    #[arg(long = "purl")]
    purls: Vec<String>,
    /// A YAML or JSON file with a list of packages, as in `spec.software`.
    #[arg(long)]
    software: Option<PathBuf>,
    /// An SBOM file (CycloneDX 1.2-1.7 JSON or XML, SPDX 2.2/2.3 JSON or
    /// tag-value, SPDX 3.0 JSON-LD), read by the same code as an
    /// AssetScan's `spec.sbom`; instead of the packages listed.
    #[arg(long, conflicts_with_all = ["packages", "purls", "software"])]
    sbom: Option<PathBuf>,
    /// A VEX document file (OpenVEX, CycloneDX VEX), as an AssetScan's
    /// `spec.vex` (repeatable).
    #[arg(long = "vex")]
    vex: Vec<PathBuf>,
    /// Notification channel from the config (repeatable).
    #[arg(long = "notify")]
    notify: Vec<String>,
    #[arg(long, default_value_t = DEFAULT_CVSS_THRESHOLD)]
    cvss_threshold: f64,
    #[arg(long, default_value_t = DEFAULT_EPSS_THRESHOLD)]
    epss_threshold: f64,
    #[arg(long, default_value = "WhenNeeded")]
    threat_intel: ThreatIntelPolicy,
    /// The share of the listed packages, in percent, the run must ask about;
    /// below it (or when it asks about none) a clean run exits with
    /// `COVERAGE_LOW`, as an AssetScan ends `CoverageLow`.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=100))]
    min_coverage: Option<u8>,
    /// Lowest token minus one (e.g. the last token recorded elsewhere).
    #[arg(long, default_value_t = 0)]
    token_floor: u64,
    /// Lock holder id (default: `scan-<host>-<pid>`).
    #[arg(long)]
    holder: Option<String>,
}

/// Parses `ECOSYSTEM/NAME@VERSION`: the ecosystem ends at the first `/`, the
/// version starts after the last `@`.
pub fn parse_package(text: &str) -> Result<Package, String> {
    let bad = || format!("package {text:?}: expected ECOSYSTEM/NAME@VERSION");
    let (ecosystem, rest) = text.split_once('/').ok_or_else(bad)?;
    let (name, version) = rest.rsplit_once('@').ok_or_else(bad)?;
    Package::coordinates(ecosystem, name, version).map_err(|e| format!("{}: {e}", bad()))
}

impl ScanArgs {
    /// `--sbom` and `--vex`: each file a source of its own (`file`,
    /// `vex-1`, …) that the request names, so that the run reads, records
    /// and judges them as it does an AssetScan's documents.
    fn local_documents(
        &self,
        request: &mut ScanRequest,
        sources: &mut SbomSources,
    ) -> Result<(), String> {
        let mut local = |source: String, path: &PathBuf| -> Result<SbomRef, String> {
            sources.add_file(&source, path.clone());
            let named = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            SbomRef::new(&source, named, None)
                .or_else(|_| SbomRef::new(&source, "document", None))
                .map_err(|e| format!("{}: {e}", path.display()))
        };
        if let Some(path) = &self.sbom {
            request.sbom = Some(local("file".to_owned(), path)?);
        }
        for (n, path) in self.vex.iter().enumerate() {
            let vex = local(format!("vex-{}", n + 1), path)?;
            request.triage.vex.push(vex);
        }
        Ok(())
    }

    fn request(&self) -> Result<ScanRequest, String> {
        let asset = AssetId::new(self.asset.clone()).map_err(|e| e.to_string())?;
        let target = match (&self.host, &self.inventory) {
            (Some(host), None) => Target::Tcp {
                host: host.clone(),
                ports: self.port.clone(),
            },
            (None, Some(id)) => Target::inventory(id).map_err(|e| format!("--inventory: {e}"))?,
            _ => return Err("give --host with --port, or --inventory".into()),
        };
        let mut software = Vec::new();
        if let Some(path) = &self.software {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let listed: Vec<Package> = crate::yaml::from_str(&text)
                .map_err(|e| format!("{}: not a list of packages: {e}", path.display()))?;
            software.extend(listed);
        }
        for text in &self.packages {
            software.push(parse_package(text)?);
        }
        for purl in &self.purls {
            software.push(Package::purl(purl).map_err(|e| format!("--purl: {e}"))?);
        }
        let holder = self
            .holder
            .clone()
            .unwrap_or_else(|| format!("scan-{}", super::instance_id(None)));
        Ok(ScanRequest {
            owner: None,
            supersedes: None,
            expect_open: false,
            resolves_alert: false,
            origin: None,
            asset,
            run: self
                .run
                .clone()
                .unwrap_or_else(|| format!("cli-{}", now_ms())),
            target,
            software,
            sbom: None,
            policy: Policy {
                cvss_threshold: self.cvss_threshold,
                threat_intel: self.threat_intel,
                epss_threshold: self.epss_threshold,
                min_coverage: self.min_coverage,
            },
            channels: self.notify.clone(),
            token_floor: self.token_floor,
            holder,
            triage: TriageRequest::default(),
        })
    }
}

pub async fn run(args: ScanArgs) -> Result<ExitCode, String> {
    let mut request = args.request()?;
    let (config, store) = args.common.store().await?;
    let mut providers = Providers::from_config(&config.providers).map_err(|e| e.to_string())?;
    args.local_documents(&mut request, &mut providers.sbom_sources)?;
    for channel in &request.channels {
        if !providers.notifiers.contains_key(channel) {
            return Err(format!("--notify {channel}: no such channel in the config"));
        }
    }
    eprintln!("scanning asset {} as run {}", request.asset, request.run);
    let pipeline = Pipeline::new(store, providers, config.steps.clone());
    let shutdown = shutdown_on_signal();
    let outcome = pipeline
        .run(&request, &(), &shutdown)
        .await
        .map_err(|e| resumable(&e, &request.run))?;
    let (code, ticket): (u8, Option<Ticket>) = match outcome {
        Outcome::Terminal(ticket) => (terminal_code(&ticket), Some(ticket)),
        Outcome::Locked {
            holder,
            retry_after,
        } => {
            eprintln!(
                "asset {} is locked by {holder} for another {retry_after:?}",
                request.asset
            );
            (exit::LOCKED, None)
        }
        Outcome::Superseded { caller, valid } => {
            eprintln!("superseded: token {caller} is stale, token {valid} owns the run");
            (exit::INTERRUPTED, None)
        }
        Outcome::Deferred {
            ticket,
            retry_after,
        } => {
            eprintln!(
                "notification not delivered yet; run again with --run {} (suggested wait {retry_after:?})",
                request.run
            );
            (exit::NOTIFY_PENDING, Some(ticket))
        }
        Outcome::Retired => {
            eprintln!("run {} was retired: nothing to do", request.run);
            (exit::INTERRUPTED, None)
        }
        Outcome::EarlierRunAlerting => {
            eprintln!(
                "run {} was not started: the run it replaces is alerting and finishes first",
                request.run
            );
            (exit::INTERRUPTED, None)
        }
        Outcome::LockLost(ticket) | Outcome::Stopped(ticket) | Outcome::ClaimUnrecorded(ticket) => {
            eprintln!(
                "stopped before the run ended; resume with --run {}",
                request.run
            );
            (exit::INTERRUPTED, Some(ticket))
        }
    };
    if let Some(ticket) = ticket {
        println!("{}", super::ticket::show(&ticket));
    }
    Ok(ExitCode::from(code))
}

/// The message of a run that Redis interrupted (unreachable, its master
/// gone past the failover wait, a write no replica acknowledged): the
/// ticket keeps what was confirmed, so it says how to go on.
fn resumable(err: &StoreFailure, run: &str) -> String {
    if err.is_unavailable() {
        format!("{err}; the run is kept: resume it by running the same scan with --run {run}")
    } else {
        err.to_string()
    }
}

fn terminal_code(ticket: &Ticket) -> u8 {
    match ticket.status {
        Status::Failed => exit::FAILED,
        _ if ticket.facts.risk.as_ref().is_some_and(|r| r.high_risk) => exit::HIGH_RISK,
        _ if ticket.facts.coverage().is_some_and(|c| c.is_low()) => exit::COVERAGE_LOW,
        _ => exit::CLEAN,
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_package, resumable};
    use crate::store::StoreError;
    use assetscan_domain::Package;

    #[test]
    fn a_run_redis_interrupted_names_its_resume_command() {
        let lost = StoreError::Redis {
            op: "advance",
            source: std::io::Error::from(std::io::ErrorKind::BrokenPipe).into(),
        };
        let text = resumable(&lost.into(), "cli-7");
        assert!(text.starts_with("redis error during advance"), "{text}");
        assert!(
            text.ends_with("running the same scan with --run cli-7"),
            "{text}"
        );
        let verdict = StoreError::IllegalTransition {
            from: "FINISHED".into(),
            to: "INIT".into(),
        };
        assert!(!resumable(&verdict.into(), "cli-7").contains("--run"));
    }

    #[test]
    fn parses_package_specs() {
        for (text, ecosystem, name, version) in [
            (
                "Debian:12/openssl@3.0.11-1",
                "Debian:12",
                "openssl",
                "3.0.11-1",
            ),
            ("npm/@babel/core@7.0.0", "npm", "@babel/core", "7.0.0"),
            (
                "Go/golang.org/x/net@v0.1.0",
                "Go",
                "golang.org/x/net",
                "v0.1.0",
            ),
        ] {
            assert_eq!(
                parse_package(text),
                Package::coordinates(ecosystem, name, version).map_err(|e| e.to_string()),
                "{text}"
            );
        }
        for bad in [
            "openssl",
            "Debian/openssl",
            "/x@1",
            "Debian/@1",
            "Debian/x@",
        ] {
            assert!(parse_package(bad).is_err(), "{bad}");
        }
    }
}
