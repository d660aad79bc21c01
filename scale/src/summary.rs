//! The runs side by side, and the ratios the targets are stated in
//! (docs/scaling.md): peak RSS per replica with the most shards against
//! one shard at the largest count, and scans/s at the largest count
//! against the smallest, for each number of shards.

use crate::report::Report;

pub fn print(reports: &[Report]) {
    println!("\n== summary ==");
    println!(
        "{:>8} {:>7} {:>9} {:>12} {:>15} {:>6} {:>13} {:>14}",
        "objects",
        "shards",
        "scans/s",
        "replica RSS",
        "writes/scan",
        "GETs",
        "etcd B/asset",
        "provider peak"
    );
    for r in reports {
        let (writes, reports_writes) = r.writes_per_scan();
        let provider_peak = r.providers.iter().map(|p| p.peak).max().unwrap_or(0);
        println!(
            "{:>8} {:>7} {:>9.1} {:>8.1} MiB {:>8.2} + {:.2} {:>6.2} {:>13.0} {:>6}/s (<= {})",
            r.count,
            if r.rescale.is_some() {
                "rescale".to_owned()
            } else {
                r.shards.to_string()
            },
            r.scans_per_second(),
            r.replica_peak_rss_kib as f64 / 1024.0,
            writes,
            reports_writes,
            r.gets_per_scan(),
            r.footprint.per_asset(),
            provider_peak,
            r.bound.per_second(),
        );
    }
    let steady: Vec<&Report> = reports.iter().filter(|r| r.rescale.is_none()).collect();
    let (Some(small), Some(large)) = (
        steady.iter().map(|r| r.count).min(),
        steady.iter().map(|r| r.count).max(),
    ) else {
        return;
    };
    let find = |count: usize, shards: u32| {
        steady
            .iter()
            .find(|r| r.count == count && r.shards == shards)
    };
    let most = steady.iter().map(|r| r.shards).max().unwrap_or(1);
    if let (Some(one), Some(many)) = (find(large, 1), find(large, most))
        && most > 1
    {
        println!(
            "peak RSS per replica at {large}: {most} shards / 1 shard = {:.2}",
            many.replica_peak_rss_kib as f64 / one.replica_peak_rss_kib.max(1) as f64
        );
    }
    if large > small {
        let mut shard_counts: Vec<u32> = steady.iter().map(|r| r.shards).collect();
        shard_counts.sort_unstable();
        shard_counts.dedup();
        for shards in shard_counts {
            if let (Some(a), Some(b)) = (find(small, shards), find(large, shards)) {
                println!(
                    "scans/s with {shards} shard(s): {large} / {small} = {:.2}",
                    b.scans_per_second() / a.scans_per_second().max(f64::EPSILON)
                );
            }
        }
    }
}
