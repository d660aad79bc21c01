//! What one measured run found, and how it is printed: time to all
//! finished, cost per process, API requests and Redis commands per scan, and
//! what the restart and the idle span after it wrote.

use crate::proxy::is_write;
use std::collections::BTreeMap;
use std::time::Duration;

/// What one process cost during the scan phase.
pub struct Cost {
    pub name: String,
    pub peak_rss_kib: u64,
    pub cpu_seconds: f64,
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
        if !self.restart_idle_writes.is_empty() {
            found.push(format!(
                "API writes after the restart: {:?}",
                self.restart_idle_writes
            ));
        }
        found
    }
}
