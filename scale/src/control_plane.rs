//! What a real cluster's API server spent on a run, from its own
//! `/metrics` (`process_cpu_seconds_total`, `process_resident_memory_bytes`),
//! read with the driver's credentials. The API server is not a process of
//! this machine's that `/proc` could measure (and on a cluster it is not on
//! this machine at all); its metrics are what an administrator reads.
//! With several API server instances behind one address, the sample is of
//! whichever instance answered: the figure is then a lower bound.

use crate::replicas::series;
use crate::report::Cost;
use crate::stack::Stack;
use anyhow::{Context as _, Result};

/// The name the API server's cost is printed under.
pub const NAME: &str = "kube-apiserver";

/// The API server's counters at one moment.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    cpu_seconds: f64,
    rss_bytes: f64,
}

/// The real API server's counters, to measure what a run cost it;
/// `None` on the emulator (its process is measured from `/proc`) or when
/// the API server's `/metrics` cannot be read (said here).
pub async fn of(stack: &Stack) -> Option<Sample> {
    if stack.backend_is_emulator {
        return None;
    }
    sample(&stack.client)
        .await
        .inspect_err(|err| eprintln!("no API server CPU figure: {err:#}"))
        .ok()
}

/// Reads the API server's `/metrics`.
async fn sample(client: &kube::Client) -> Result<Sample> {
    let request = axum::http::Request::get("/metrics")
        .body(Vec::new())
        .context("building the /metrics request")?;
    let text = client.request_text(request).await.context(
        "reading the API server's /metrics (the driver's credentials must allow GET /metrics)",
    )?;
    parse(&text)
}

fn parse(exposition: &str) -> Result<Sample> {
    Ok(Sample {
        cpu_seconds: series(exposition, "process_cpu_seconds_total")
            .context("the API server's /metrics has no process_cpu_seconds_total")?,
        rss_bytes: series(exposition, "process_resident_memory_bytes")
            .context("the API server's /metrics has no process_resident_memory_bytes")?,
    })
}

/// The API server's CPU between `before` and `after`, and its resident
/// memory at `after` (printed as its peak: the API server keeps no peak).
pub fn cost(before: Sample, after: Sample) -> Cost {
    Cost {
        name: NAME.into(),
        peak_rss_kib: (after.rss_bytes / 1024.0) as u64,
        cpu_seconds: (after.cpu_seconds - before.cpu_seconds).max(0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_process_counters_and_subtracts_cpu() {
        let text = |cpu: &str| {
            format!(
                "# TYPE process_cpu_seconds_total counter\n\
                 process_cpu_seconds_total {cpu}\n\
                 process_resident_memory_bytes 2.097152e+08\n\
                 apiserver_request_total{{code=\"200\"}} 5\n"
            )
        };
        let before = parse(&text("10.5")).expect("before");
        let after = parse(&text("25")).expect("after");
        let cost = cost(before, after);
        assert_eq!(cost.cpu_seconds, 14.5);
        assert_eq!(cost.peak_rss_kib, 204_800);
        assert!(parse("process_cpu_seconds_total 1\n").is_err());
    }
}
