//! What one measured run found, and how it is printed: time to all
//! finished, cost per process, API requests and Redis commands per scan,
//! the etcd bytes the operator added, the peak provider request rates
//! against the start bound, a rescale's figures, and what the restart and
//! the idle span after it wrote.

use crate::footprint::Footprint;
use crate::latency::Latency;
use crate::proxy::is_write;
use assetscan_operator::kubernetes::controller::settings::ScanStartsSection;
use std::collections::BTreeMap;
use std::time::Duration;

/// What one process cost during the scan phase.
pub struct Cost {
    pub name: String,
    pub peak_rss_kib: u64,
    pub cpu_seconds: f64,
}

/// One provider's requests in the scan phase and their peak rate. A run
/// that needs a provider makes one request to it when its steps succeed at
/// once (docs/scaling.md, "No storms"): no provider sees more than
/// `replicas × (burst + perSecond)` in any second.
pub struct ProviderPeak {
    pub name: &'static str,
    pub requests: usize,
    /// The most requests in any one second.
    pub peak: usize,
}

/// The start bound the replicas ran with.
pub struct StartBound {
    pub replicas: u32,
    pub starts: ScanStartsSection,
}

impl StartBound {
    /// The most starts (so provider requests per provider) in any second.
    pub fn per_second(&self) -> u64 {
        u64::from(self.replicas) * self.starts.peak_per_second()
    }
}

/// A rescale's figures: for each step, how long until every AssetScan had
/// a live owner again, counted from the old replicas' SIGTERM.
pub struct Rescale {
    pub steps: Vec<(u32, u32, Duration)>,
    /// Writes to AssetScans themselves (not their status) from the first
    /// rescale on: any is a write the rescale caused.
    pub object_writes: u64,
}

/// A restart of every replica with every AssetScan finished, and an idle
/// span: what it wrote (nothing, if all is well), and the memory a replica
/// needs to hold its shard when no run is in flight.
pub struct RestartIdle {
    pub writes: BTreeMap<String, u64>,
    pub redis: BTreeMap<String, u64>,
    pub peak_rss_kib: u64,
}

/// What the assets' software cost: the stored objects, the API traffic,
/// the SBOM source, and how many OSV lookups the assets shared.
pub struct SoftwareCost {
    /// The mix, in words.
    pub mix: String,
    /// Mean bytes of a stored AssetScan as created, and after its run.
    pub stored_created: f64,
    pub stored_after: f64,
    /// Body bytes the replicas sent to the API server and received from it
    /// (watches included), until all finished.
    pub api_sent: u64,
    pub api_received: u64,
    pub sbom_calls: u64,
    pub sbom_bytes: u64,
    /// Packages the runs asked about, and the queries OSV received.
    pub packages_asked: u64,
    pub osv_queries: u64,
}

impl SoftwareCost {
    fn print(&self, scans: usize) {
        let n = scans.max(1) as f64;
        let kib = |bytes: u64| bytes as f64 / 1024.0 / n;
        println!("software: {}", self.mix);
        println!(
            "  stored AssetScan: {:.0} B as created, {:.0} B after its run (mean)",
            self.stored_created, self.stored_after
        );
        println!(
            "  API bytes per scan: {:.1} KiB sent, {:.1} KiB received (watches included)",
            kib(self.api_sent),
            kib(self.api_received)
        );
        println!(
            "  SBOM source per scan: {:.2} calls, {:.1} KiB",
            self.sbom_calls as f64 / n,
            kib(self.sbom_bytes)
        );
        let shared = 1.0 - self.osv_queries as f64 / self.packages_asked.max(1) as f64;
        println!(
            "  OSV: {:.1} packages asked per scan, {:.2} queries sent per scan: {:.2}% of lookups shared across assets",
            self.packages_asked as f64 / n,
            self.osv_queries as f64 / n,
            100.0 * shared.max(0.0)
        );
    }
}

pub struct Report {
    pub count: usize,
    pub shards: u32,
    /// From the replicas' start to all finished.
    pub elapsed: Duration,
    /// The replicas (the last set, for a rescale), then the API server and
    /// Redis.
    pub costs: Vec<Cost>,
    /// The most any replica used (of every set, for a rescale).
    pub replica_peak_rss_kib: u64,
    /// API requests by verb and resource, until all finished.
    pub requests: BTreeMap<String, u64>,
    /// Redis calls by command (inside scripts included), until all finished.
    pub redis_calls: BTreeMap<String, u64>,
    /// Commands Redis processed (round trips), until all finished.
    pub redis_processed: u64,
    pub providers: Vec<ProviderPeak>,
    pub bound: StartBound,
    pub footprint: Footprint,
    /// AssetScans whose finished run is not the first of their generation.
    pub second_runs: usize,
    /// Assets whose online check was made twice.
    pub checked_twice: usize,
    pub rescale: Option<Rescale>,
    /// Detection to notification, every replica's.
    pub latency: Latency,
    /// What the restart and the idle span after it cost (none when the
    /// idle span is 0).
    pub restart_idle: Option<RestartIdle>,
    pub idle: Duration,
    pub software: SoftwareCost,
}

impl Report {
    pub fn scans_per_second(&self) -> f64 {
        self.count as f64 / self.elapsed.as_secs_f64().max(f64::EPSILON)
    }

    fn per_scan(&self, pick: impl Fn(&str) -> bool) -> f64 {
        let n: u64 = self
            .requests
            .iter()
            .filter(|(k, _)| pick(k))
            .map(|(_, v)| v)
            .sum();
        n as f64 / self.count.max(1) as f64
    }

    /// API writes per scan, the reports' own (create and prune) apart.
    pub fn writes_per_scan(&self) -> (f64, f64) {
        let report = |k: &str| k.ends_with(" assetscanreports");
        (
            self.per_scan(|k| is_write(k) && !report(k)),
            self.per_scan(|k| is_write(k) && report(k)),
        )
    }

    pub fn gets_per_scan(&self) -> f64 {
        self.per_scan(|k| k.starts_with("get "))
    }

    pub fn print(&self) {
        let n = self.count as f64;
        println!(
            "all finished in {:.1} s: {:.1} scans/s",
            self.elapsed.as_secs_f64(),
            self.scans_per_second()
        );
        let paced = n / (f64::from(self.bound.replicas) * f64::from(self.bound.starts.per_second));
        println!(
            "first round against objects / (replicas × perSecond) = {paced:.1} s: {:.2}×",
            self.elapsed.as_secs_f64() / paced.max(f64::EPSILON)
        );
        let total_cpu: f64 = self.costs.iter().map(|c| c.cpu_seconds).sum();
        for c in &self.costs {
            println!(
                "  {:<18} peak RSS {:>7.1} MiB  CPU {:>7.1} s, {:>6.2} ms per scan ({:>4.1}% of the run's CPU)",
                c.name,
                c.peak_rss_kib as f64 / 1024.0,
                c.cpu_seconds,
                1000.0 * c.cpu_seconds / n.max(1.0),
                100.0 * c.cpu_seconds / total_cpu.max(f64::EPSILON)
            );
        }
        println!(
            "peak RSS of any replica: {:.1} MiB",
            self.replica_peak_rss_kib as f64 / 1024.0
        );
        println!("API requests per scan (verb resource):");
        for (key, calls) in &self.requests {
            println!("  {key:<32} {:>8.2}  ({calls})", *calls as f64 / n);
        }
        let (writes, report_writes) = self.writes_per_scan();
        println!(
            "  = writes {writes:.2} + {report_writes:.2} for the reports; GETs {:.2}",
            self.gets_per_scan()
        );
        self.print_redis();
        self.footprint.print();
        self.software.print(self.count);
        self.print_providers();
        self.print_latency();
        println!(
            "runs per generation: {} AssetScans ran twice; {} assets had their online check made twice",
            self.second_runs, self.checked_twice
        );
        if let Some(rescale) = &self.rescale {
            for (from, to, took) in &rescale.steps {
                println!(
                    "rescale {from} -> {to} shards: every AssetScan watched by a ready replica {:.2} s after the old replicas' SIGTERM",
                    took.as_secs_f64()
                );
            }
            println!(
                "writes to AssetScans (not status) caused by the rescales: {}",
                rescale.object_writes
            );
        }
        if let Some(restart) = &self.restart_idle {
            println!(
                "restart of every replica + {} s idle: API writes {:?}, Redis calls {:?}; peak RSS of any replica {:.1} MiB",
                self.idle.as_secs(),
                restart.writes,
                restart.redis,
                restart.peak_rss_kib as f64 / 1024.0
            );
        }
    }

    fn print_latency(&self) {
        let ms = |q: f64| {
            self.latency
                .quantile(q)
                .map_or("-".to_owned(), |s| format!("{:.0} ms", s * 1000.0))
        };
        println!(
            "detection to notification: {} notifications, p50 {}, p99 {}",
            self.latency.count(),
            ms(0.5),
            ms(0.99)
        );
    }

    fn print_redis(&self) {
        let n = self.count as f64;
        let commands: u64 = self.redis_calls.values().sum();
        println!(
            "Redis per scan: {:.2} commands processed (round trips incl. scripts), {:.2} calls incl. inside scripts",
            self.redis_processed as f64 / n,
            commands as f64 / n
        );
        for (cmd, calls) in &self.redis_calls {
            println!("  {cmd:<24} {:>8.2}", *calls as f64 / n);
        }
    }

    fn print_providers(&self) {
        let b = &self.bound;
        println!(
            "provider requests, peak per second against the bound {} ({} replicas × (burst {} + {}/s)):",
            b.per_second(),
            b.replicas,
            b.starts.burst,
            b.starts.per_second
        );
        for p in &self.providers {
            println!(
                "  {:<12} {:>8} requests, peak {:>5}/s",
                p.name, p.requests, p.peak
            );
        }
    }

    /// Guarantees broken by this run (not targets: those are read from the
    /// figures).
    pub fn violations(&self) -> Vec<String> {
        let mut found = Vec::new();
        for p in &self.providers {
            if p.peak as u64 > self.bound.per_second() {
                found.push(format!(
                    "{}: {} requests in one second, above the bound of {}",
                    p.name,
                    p.peak,
                    self.bound.per_second()
                ));
            }
        }
        if self.second_runs > 0 {
            found.push(format!("{} AssetScans ran twice", self.second_runs));
        }
        if let Some(restart) = &self.restart_idle
            && !restart.writes.is_empty()
        {
            found.push(format!(
                "API writes after the restart: {:?}",
                restart.writes
            ));
        }
        if let Some(rescale) = &self.rescale
            && rescale.object_writes > 0
        {
            found.push(format!(
                "{} writes to AssetScans caused by the rescales",
                rescale.object_writes
            ));
        }
        found
    }
}

/// A check's mark in the printed figures.
pub fn mark(ok: bool) -> &'static str {
    if ok { "✓" } else { "✗" }
}
