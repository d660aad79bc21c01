//! What the server says: commands executed (`INFO commandstats`, the calls
//! scripts make inside Redis included), and `redis-benchmark`'s rate for one
//! command line against the same server.

use crate::BenchError;
use assetscan_testkit::redis::RedisServer;
use std::process::{Command, Stdio};

/// Calls of every command so far, less the `INFO` calls that read them.
pub fn commands(server: &RedisServer) -> Result<u64, BenchError> {
    commandstats_sum(server, "calls")
}

/// Microseconds the server spent executing commands so far (scripts with
/// the calls they make inside), less the `INFO` calls that read them.
pub fn busy_us(server: &RedisServer) -> Result<u64, BenchError> {
    commandstats_sum(server, "usec")
}

/// One field of `INFO commandstats` (`calls`, `usec`), summed over every
/// command but `INFO`.
fn commandstats_sum(server: &RedisServer, field: &str) -> Result<u64, BenchError> {
    let info = server.command(&["INFO", "commandstats"])?;
    let key = format!("{field}=");
    Ok(info
        .lines()
        .filter_map(|line| line.strip_prefix("cmdstat_"))
        .filter(|line| !line.starts_with("info:"))
        .filter_map(|line| {
            let (_, stats) = line.split_once(':')?;
            stats
                .split(',')
                .find_map(|kv| kv.strip_prefix(key.as_str()))?
                .parse::<u64>()
                .ok()
        })
        .sum())
}

/// Calls of one command so far (`evalsha`, `get`, …).
pub fn calls(server: &RedisServer, name: &str) -> Result<u64, BenchError> {
    Ok(server.command_calls(name)?)
}

/// Requests per second `redis-benchmark` reaches for `args`, with `clients`
/// connections and `requests` requests in all.
pub fn redis_benchmark(
    server: &RedisServer,
    clients: usize,
    requests: usize,
    args: &[String],
) -> Result<f64, BenchError> {
    let output = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
        .args(["-c", &clients.to_string(), "-n", &requests.to_string()])
        .args(["-q", "--csv"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| BenchError::Spawn {
            program: "redis-benchmark",
            source,
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    // `--csv`: a header line, then `"<command>","<rps>",…`.
    text.lines()
        .filter_map(|line| line.split(',').nth(1))
        .filter_map(|rps| rps.trim_matches('"').parse::<f64>().ok())
        .next_back()
        .ok_or_else(|| BenchError::Parse {
            what: "redis-benchmark output",
            text: format!("{text}{}", String::from_utf8_lossy(&output.stderr)),
        })
}
