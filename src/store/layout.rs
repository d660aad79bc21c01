//! Which key layout a deployment's Redis is in, and so whether the bridge
//! to 0.1.0's layout is on ([`super::keys`]). A new install never takes
//! 0.1.0's keys; an upgrade from 0.1.0 keeps the bridge until the platform
//! team turns it off.
//!
//! Decided in Redis, not by the chart: a chart knows an install from an
//! upgrade only when Helm itself applies it (`helm template`, which Argo CD
//! runs, renders every time as an install), while Redis holds what 0.1.0
//! left there. `auto` (the default) follows the decision recorded at
//! `<prefix>:layout`; without one it looks for 0.1.0's fences
//! (`<prefix>:{<asset>}:fence`, which 0.1.0 keeps for as long as anything
//! of the asset can be read): found, the bridge is on; none, this is a new
//! install and it is off. The decision is recorded (`SET NX`: replicas
//! starting together take the first one), and an explicit `true` or
//! `false` records itself, so that `auto` keeps to the last one.

use super::StoreError;
use super::conn::RedisConn;
use redis::AsyncCommands;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};

/// `redis.identityBridge`: `auto`, `true` or `false`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IdentityBridge {
    /// Decided from Redis ([`resolve`]).
    #[default]
    Auto,
    On,
    Off,
}

impl From<bool> for IdentityBridge {
    fn from(on: bool) -> IdentityBridge {
        if on {
            IdentityBridge::On
        } else {
            IdentityBridge::Off
        }
    }
}

/// `true`, `false` or `"auto"`, as 0.1.0's configurations and the chart
/// write it.
impl<'de> Deserialize<'de> for IdentityBridge {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Flag(bool),
            Word(String),
        }
        match Wire::deserialize(deserializer)? {
            Wire::Flag(on) => Ok(on.into()),
            Wire::Word(word) if word == "auto" => Ok(IdentityBridge::Auto),
            Wire::Word(word) => Err(serde::de::Error::custom(format!(
                "{:?}: expected true, false or \"auto\"",
                assetscan_domain::text::truncate_chars(&word, 32)
            ))),
        }
    }
}

impl JsonSchema for IdentityBridge {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "IdentityBridge".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"oneOf": [{"type": "boolean"}, {"enum": ["auto"]}]})
    }
}

/// What the store decided, and why, for the start-up log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeDecision {
    pub on: bool,
    pub why: String,
}

const BRIDGED: &str = "bridged";
const NAMESPACED: &str = "namespaced";

/// The bridge for `setting`, recorded at `<prefix>:layout`.
pub(super) async fn resolve(
    conn: &RedisConn,
    prefix: &str,
    setting: IdentityBridge,
) -> Result<BridgeDecision, StoreError> {
    let marker = format!("{prefix}:layout");
    let recorded = |value: &str| value == BRIDGED;
    match setting {
        IdentityBridge::On | IdentityBridge::Off => {
            let on = setting == IdentityBridge::On;
            set(conn, &marker, if on { BRIDGED } else { NAMESPACED }, false).await?;
            let why = format!("configured (redis.identityBridge: {on}; recorded at {marker})");
            Ok(BridgeDecision { on, why })
        }
        IdentityBridge::Auto => {
            if let Some(value) = get(conn, &marker).await? {
                let why = format!("auto: {marker} records a {value} deployment");
                return Ok(BridgeDecision {
                    on: recorded(&value),
                    why,
                });
            }
            let pattern = format!("{prefix}:{{*}}:fence");
            let found = first_key(conn, &pattern).await?;
            let value = if found.is_some() { BRIDGED } else { NAMESPACED };
            let stored = match set(conn, &marker, value, true).await? {
                true => value.to_owned(),
                false => get(conn, &marker)
                    .await?
                    .unwrap_or_else(|| value.to_owned()),
            };
            let why = match &found {
                Some(key) => format!(
                    "auto: 0.1.0's keys are in Redis ({key}): an upgrade, the bridge stays on \
                     until redis.identityBridge is set to false (docs/upgrading.md)"
                ),
                None => format!(
                    "auto: no key of 0.1.0's layout in Redis: a new install, namespaces isolated \
                     (recorded at {marker})"
                ),
            };
            Ok(BridgeDecision {
                on: recorded(&stored),
                why,
            })
        }
    }
}

fn failed(source: redis::RedisError) -> StoreError {
    StoreError::Redis {
        op: "layout",
        source,
    }
}

async fn get(conn: &RedisConn, key: &str) -> Result<Option<String>, StoreError> {
    conn.clone().get(key).await.map_err(failed)
}

/// `SET` (or `SET NX` with `only_new`): whether it was written.
async fn set(conn: &RedisConn, key: &str, value: &str, only_new: bool) -> Result<bool, StoreError> {
    let mut cmd = redis::cmd("SET");
    cmd.arg(key).arg(value);
    if only_new {
        cmd.arg("NX");
    }
    let reply: Option<String> = cmd.query_async(&mut conn.clone()).await.map_err(failed)?;
    Ok(reply.is_some())
}

/// One key matching `pattern`, if any: SCAN, stopping at the first, on a
/// standalone server; KEYS on every primary of a Cluster.
async fn first_key(conn: &RedisConn, pattern: &str) -> Result<Option<String>, StoreError> {
    let mut conn = conn.clone();
    if conn.is_cluster() {
        let keys: Vec<String> = conn.keys(pattern).await.map_err(failed)?;
        return Ok(keys.into_iter().min());
    }
    use futures::StreamExt;
    let options = redis::ScanOptions::default()
        .with_pattern(pattern)
        .with_count(1000);
    let mut keys = conn.scan_options::<String>(options).await.map_err(failed)?;
    match keys.next().await {
        Some(Ok(key)) => Ok(Some(key)),
        Some(Err(source)) => Err(failed(source)),
        None => Ok(None),
    }
}
