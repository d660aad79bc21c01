//! What one measured run found, and how it is printed: time to all
//! finished, cost per process, API requests and Redis commands per scan, the
//! peak provider request rate against the start bound, and what the restart
//! and the idle span after it wrote.

use crate::proxy::is_write;
use assetscan_operator::config::ScanStartsSection;
use std::collections::BTreeMap;
use std::time::Duration;

/// What one process cost during the scan phase.
pub struct Cost {
    pub name: String,
    pub peak_rss_kib: u64,
    pub cpu_seconds: f64,
}

/// The provider requests of the scan phase (every stub's), and the bound
/// they stay under: each replica starts at most `burst + perSecond` runs in
/// any second, and a run makes a fixed number of provider requests here.
pub struct ProviderRate {
    pub requests: usize,
    /// The most requests in any one second.
    pub peak: usize,
    pub replicas: u32,
    pub starts: ScanStartsSection,
}

impl ProviderRate {
    fn per_scan(&self, count: usize) -> f64 {
        self.requests as f64 / count.max(1) as f64
    }

    /// replicas × (burst + perSecond) × requests per scan.
    fn bound(&self, count: usize) -> f64 {
        f64::from(self.replicas) * self.starts.peak_per_second() as f64 * self.per_scan(count)
    }
}

pub struct Report {
    pub count: usize,
    /// From the replicas' start to all finished.
    pub elapsed: Duration,
    pub costs: Vec<Cost>,
    /// API requests by verb and resource, until all finished.
    pub requests: BTreeMap<String, u64>,
    /// Redis calls by command (inside scripts included), until all finished.
    pub redis_calls: BTreeMap<String, u64>,
    /// Commands Redis processed (round trips), until all finished.
    pub redis_processed: u64,
    /// Provider requests until all finished, and their peak rate.
    pub providers: ProviderRate,
    /// API writes during the restart and the idle span after it.
    pub restart_idle_writes: BTreeMap<String, u64>,
    /// Redis calls during the restart and the idle span after it.
    pub restart_idle_redis: BTreeMap<String, u64>,
    pub idle: Duration,
}

impl Report {
    pub fn print(&self) {
        let n = self.count as f64;
        let secs = self.elapsed.as_secs_f64();
        println!("all finished in {secs:.1} s: {:.1} scans/s", n / secs);
        let total_cpu: f64 = self.costs.iter().map(|c| c.cpu_seconds).sum();
        for c in &self.costs {
            println!(
                "  {:<10} peak RSS {:>7.1} MiB  CPU {:>7.1} s ({:>4.1}% of the run's CPU)",
                c.name,
                c.peak_rss_kib as f64 / 1024.0,
                c.cpu_seconds,
                100.0 * c.cpu_seconds / total_cpu.max(f64::EPSILON)
            );
        }
        println!("API requests per scan (verb resource):");
        let mut writes = 0;
        for (key, calls) in &self.requests {
            if is_write(key) {
                writes += calls;
            }
            println!("  {key:<32} {:>8.2}  ({calls})", *calls as f64 / n);
        }
        println!("  {:<32} {:>8.2}", "= writes", writes as f64 / n);
        let commands: u64 = self.redis_calls.values().sum();
        println!(
            "Redis per scan: {:.2} commands processed (round trips incl. scripts), {:.2} calls incl. inside scripts",
            self.redis_processed as f64 / n,
            commands as f64 / n
        );
        for (cmd, calls) in &self.redis_calls {
            println!("  {cmd:<24} {:>8.2}", *calls as f64 / n);
        }
        let p = &self.providers;
        println!(
            "provider requests: {} ({:.2} per scan); peak {} per second, bound {:.0} \
             ({} replicas × (burst {} + {}/s) × {:.2} per scan)",
            p.requests,
            p.per_scan(self.count),
            p.peak,
            p.bound(self.count),
            p.replicas,
            p.starts.burst,
            p.starts.per_second,
            p.per_scan(self.count)
        );
        println!(
            "restart of both replicas + {} s idle: API writes {:?}, Redis calls {:?}",
            self.idle.as_secs(),
            self.restart_idle_writes,
            self.restart_idle_redis
        );
    }

    /// Guarantees broken by this run (not targets: those are read from the
    /// figures).
    pub fn violations(&self) -> Vec<String> {
        let mut found = Vec::new();
        let p = &self.providers;
        if p.peak as f64 > p.bound(self.count) {
            found.push(format!(
                "{} provider requests in one second, above the bound of {:.0}",
                p.peak,
                p.bound(self.count)
            ));
        }
        if !self.restart_idle_writes.is_empty() {
            found.push(format!(
                "API writes after the restart: {:?}",
                self.restart_idle_writes
            ));
        }
        found
    }
}
