//! What the server says: commands executed (`INFO commandstats`, the calls
//! scripts make inside Redis included), the CPU of its main thread (`INFO
//! cpu`), and `redis-benchmark`'s rate for one command line against the
//! same server.

use crate::BenchError;
use assetscan_testkit::redis::RedisServer;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};

/// Calls of every command so far, less the `INFO` calls that read them.
pub fn commands(server: &RedisServer) -> Result<u64, BenchError> {
    Ok(commandstats(server)?.values().map(|c| c.calls).sum())
}

/// CPU time of the server's main thread so far (user and system), in
/// microseconds: the thread that runs every command and script, with the
/// reading and writing of their requests and replies. (`INFO commandstats`
/// cannot give this: a script's time there includes its inner calls,
/// which are also counted on their own lines.)
pub fn busy_us(server: &RedisServer) -> Result<u64, BenchError> {
    let info = server.command(&["INFO", "cpu"])?;
    let seconds = |field: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .ok_or_else(|| BenchError::Parse {
                what: "INFO cpu",
                text: info.clone(),
            })
    };
    let total = seconds("used_cpu_user_main_thread")? + seconds("used_cpu_sys_main_thread")?;
    Ok((total * 1e6) as u64)
}

/// One command's line of `INFO commandstats`.
#[derive(Clone, Copy, Default)]
pub struct CommandStat {
    pub calls: u64,
    /// Time executing it; for a script, with the calls it makes inside.
    pub usec: u64,
}

/// `INFO commandstats` by command (`evalsha`, `xadd`, …), `INFO` itself
/// left out.
pub fn commandstats(server: &RedisServer) -> Result<BTreeMap<String, CommandStat>, BenchError> {
    let info = server.command(&["INFO", "commandstats"])?;
    let field = |stats: &str, key: &str| {
        stats
            .split(',')
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Ok(info
        .lines()
        .filter_map(|line| line.strip_prefix("cmdstat_"))
        .filter(|line| !line.starts_with("info:"))
        .filter_map(|line| {
            let (name, stats) = line.split_once(':')?;
            let stat = CommandStat {
                calls: field(stats, "calls"),
                usec: field(stats, "usec"),
            };
            Some((name.to_owned(), stat))
        })
        .collect())
}

/// What each command called since `before` (an earlier
/// [`commandstats`]) cost in between: its calls and its time.
pub fn commandstats_since(
    server: &RedisServer,
    before: &BTreeMap<String, CommandStat>,
) -> Result<BTreeMap<String, CommandStat>, BenchError> {
    Ok(commandstats(server)?
        .into_iter()
        .filter_map(|(name, after)| {
            let was = before.get(&name).copied().unwrap_or_default();
            let stat = CommandStat {
                calls: after.calls - was.calls,
                usec: after.usec - was.usec,
            };
            (stat.calls > 0).then_some((name, stat))
        })
        .collect())
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
    rate_of(&text).ok_or_else(|| BenchError::Parse {
        what: "redis-benchmark output",
        text: format!("{text}{}", String::from_utf8_lossy(&output.stderr)),
    })
}

/// The rate of the last test in `redis-benchmark --csv` output: a header
/// line naming the columns (`"test","rps",…`), then a line per test. The
/// test column is the command line as given, its commas and quotes left
/// unescaped (a script's JSON argument object has both), so the rate is
/// found by its place counted from the end of the line.
fn rate_of(csv: &str) -> Option<f64> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next()?.split(',').collect();
    let rps = header.iter().position(|column| *column == "\"rps\"")?;
    let from_end = header.len().checked_sub(rps + 1)?;
    lines
        .filter_map(|line| line.rsplit(',').nth(from_end))
        .filter_map(|rate| rate.trim_matches('"').parse::<f64>().ok())
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::rate_of;

    #[test]
    fn the_rate_is_read_past_a_command_with_commas_and_quotes() {
        // As redis-benchmark 7.0 prints it for `ECHO '{"v":1,"to":"INIT","patch":{}}'`.
        let csv = concat!(
            "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n",
            "\"ECHO {\"v\":1,\"to\":\"INIT\",\"patch\":{}}\",\"33333.33\",\"0.044\",\"0.008\",\"0.039\",\"0.063\",\"0.087\",\"0.087\"\n",
        );
        assert_eq!(rate_of(csv), Some(33333.33));
        assert_eq!(rate_of("\"test\",\"rps\"\n\"PING\",\"12.5\"\n"), Some(12.5));
        assert_eq!(rate_of(""), None);
        assert_eq!(
            rate_of("\"test\",\"avg_latency_ms\"\n\"PING\",\"0.1\"\n"),
            None
        );
    }
}
