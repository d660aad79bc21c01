//! The operator's config sections the tests write, and the test's own
//! access to Redis, past the operator's store.

use assetscan_testkit::redis::RedisServer;
use std::collections::BTreeMap;
use std::path::Path;

/// `assetscan-operator <args> --config <config>`, as a user runs the CLI:
/// nothing inherited from the test's environment that would configure the
/// operator (Redis, its credentials, a fault drill), text logs, no stdin,
/// killed with the test.
pub fn cli(config: &Path, args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_assetscan-operator"));
    command.args(args).arg("--config").arg(config);
    for inherited in [
        "REDIS_URL",
        "REDIS_USERNAME",
        "REDIS_PASSWORD",
        "REDIS_CA_FILE",
        "REDIS_CERT_FILE",
        "REDIS_KEY_FILE",
        "REDIS_SENTINEL_USERNAME",
        "REDIS_SENTINEL_PASSWORD",
        "ASSETSCAN_CONFIG",
        "FAILPOINTS",
    ] {
        command.env_remove(inherited);
    }
    command
        .env("LOG_FORMAT", "text")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    command
}

/// What a CLI run printed on stderr, when it failed with exit code `code`
/// and said so in exactly one `error: ` line: that line.
pub fn the_one_error(out: &std::process::Output, code: i32) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    errors[0].to_owned()
}

/// The `steps:` section of a config: for onlineCheck, vulnQuery,
/// threatIntel and notify in that order, the timeout and the number of
/// attempts; backoffs from 100 ms up to `max_backoff`.
pub fn steps_yaml(steps: [(&str, u32); 4], max_backoff: &str) -> String {
    let names = ["onlineCheck", "vulnQuery", "threatIntel", "notify"];
    let mut yaml = "steps:\n".to_owned();
    for (name, (timeout, attempts)) in names.iter().zip(steps) {
        yaml.push_str(&format!(
            "  {name}: {{timeout: {timeout}, maxAttempts: {attempts}, \
             initialBackoff: 100ms, maxBackoff: {max_backoff}}}\n"
        ));
    }
    yaml
}

/// A connection of the test's own to `server`, bypassing the operator.
pub async fn connect(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url())
        .expect("a redis:// url")
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}", server.url()))
}

/// Makes a held lock expire now, as Redis does once a dead holder's ttl
/// ran out: for the tests about what a successor does, not about when.
pub fn expire_lock(server: &RedisServer, lock: &str) {
    assert!(remove_lock(server, lock), "{lock} was held");
}

/// Removes a lock that may have expired already (its holder is dead or
/// stalled, and its ttl short): whether it was still there.
pub fn remove_lock(server: &RedisServer, lock: &str) -> bool {
    let removed: i64 = server
        .query(redis::cmd("DEL").arg(lock))
        .unwrap_or_else(|e| panic!("DEL {lock}: {e}"));
    removed == 1
}

/// Sets a lock as `holder`'s for a minute: a holder (alive or dead) that
/// outlasts whatever the test does meanwhile.
pub fn hold_lock(server: &RedisServer, lock: &str, holder: &str) {
    let _: () = server
        .query(
            redis::cmd("SET")
                .arg(lock)
                .arg(holder)
                .arg("PX")
                .arg(60_000),
        )
        .unwrap_or_else(|e| panic!("SET {lock}: {e}"));
}

/// `GET key`, bypassing the operator.
pub fn get(server: &RedisServer, key: &str) -> Option<String> {
    server
        .query(redis::cmd("GET").arg(key))
        .unwrap_or_else(|e| panic!("GET {key}: {e}"))
}

/// Every key matching `pattern` with what it holds (a stream by its last
/// entry), to compare before and after.
pub async fn keys_of(redis: &RedisServer, pattern: &str) -> BTreeMap<String, String> {
    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(pattern)
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut found = BTreeMap::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let mut read = match kind.as_str() {
            "stream" => redis::cmd("XREVRANGE"),
            "hash" => redis::cmd("HGETALL"),
            _ => redis::cmd("GET"),
        };
        read.arg(&key);
        if kind == "stream" {
            read.arg("+").arg("-").arg("COUNT").arg(1);
        }
        let value: redis::Value = read.query_async(&mut conn).await.unwrap();
        found.insert(key, format!("{kind} {value:?}"));
    }
    found
}
