//! Which key layout a deployment's Redis is in ([`Layout`]), and so whether
//! the bridge to 0.1.0's layout is on (the keys of its family are those
//! [`super::AssetKeys`] names). A new install never takes 0.1.0's keys; an upgrade from 0.1.0 keeps the bridge until the
//! platform team turns it off, and from then on refuses 0.1.0 (a rollback
//! to it started without turning the bridge on again): each claim holds
//! 0.1.0's lock of the asset by [`CLOSED_HOLDER`], which 0.1.0's claim
//! finds held.
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
//! `false` records itself, so that `auto` keeps to the last one. `false`
//! where the bridge was on records [`Layout::Closed`], not
//! [`Layout::Namespaced`]: the bridge off is then remembered as an
//! upgrade's, which `auto` keeps closed to 0.1.0, while a new install stays
//! one that names no key of 0.1.0's. (`false` with nothing recorded is
//! taken as said, as before: an upgrade that skipped the bridge, which
//! docs/upgrading.md warns against and `make upgrade-test --inject
//! no-bridge` shows failing.)

use crate::store::StoreError;
use crate::store::conn::RedisConn;
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

/// The layout a deployment's Redis is in, as recorded at `<prefix>:layout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// A new install: only the namespaced keys, and no key of 0.1.0's
    /// layout is ever named.
    Namespaced,
    /// An upgrade from 0.1.0 with the bridge on: each claim also takes
    /// 0.1.0's lock, fence and ticket copy of the asset.
    Bridged,
    /// An upgrade from 0.1.0 whose bridge was turned off: the namespaced
    /// keys, and each claim also holds 0.1.0's lock of the asset, by
    /// [`CLOSED_HOLDER`] (`acquire.lua`'s `refuse_legacy_ms`). Without it
    /// a replica of 0.1.0 started now (a rollback) would take that lock
    /// while this release's replicas take only the namespaced one: two
    /// executors on one asset. With it, 0.1.0's claim is refused as
    /// `LOCKED` by that holder, and a claim of this release waits while a
    /// 0.1.0 executor holds the lock.
    Closed,
}

impl Layout {
    /// The value recorded at `<prefix>:layout`.
    fn recorded(self) -> &'static str {
        match self {
            Layout::Namespaced => "namespaced",
            Layout::Bridged => "bridged",
            Layout::Closed => "closed",
        }
    }

    /// The layout a recorded value names. A value this release does not
    /// know (a later release's) takes no legacy key, as before closing
    /// existed: [`Layout::Namespaced`].
    fn of_recorded(value: &str) -> Layout {
        [Layout::Bridged, Layout::Closed]
            .into_iter()
            .find(|layout| layout.recorded() == value)
            .unwrap_or(Layout::Namespaced)
    }
}

/// The holder a claim of a [`Layout::Closed`] deployment leaves on 0.1.0's
/// lock of the asset: a replica of 0.1.0 reports it as the asset's holder
/// (its status and log say "locked by" it), so it says why and where to
/// read on. `acquire.lua` names the same string (`CLOSED`); without
/// spaces, since `LOCKED <holder> <pttl>` is split on them.
pub const CLOSED_HOLDER: &str = "closed:identityBridge-off:see-docs/upgrading.md";

/// What the store decided, and why, for the start-up log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BridgeDecision {
    pub layout: Layout,
    pub why: String,
}

impl BridgeDecision {
    /// Whether the bridge is on: each claim takes 0.1.0's keys along.
    pub fn on(&self) -> bool {
        self.layout == Layout::Bridged
    }

    /// The bridge's state in a word or three, for the start-up log.
    pub fn summary(&self) -> &'static str {
        match self.layout {
            Layout::Bridged => "on",
            Layout::Namespaced => "off",
            Layout::Closed => "off (0.1.0 refused)",
        }
    }
}

/// The layout for `setting`, recorded at `<prefix>:layout`.
pub(in crate::store) async fn resolve(
    conn: &RedisConn,
    prefix: &str,
    setting: IdentityBridge,
) -> Result<BridgeDecision, StoreError> {
    let marker = format!("{prefix}:layout");
    let recorded = get(conn, &marker).await?;
    let was = (recorded.as_deref()).map(|value| (value, Layout::of_recorded(value)));
    let (layout, why) = match (setting, was) {
        (IdentityBridge::Auto, Some((value, layout))) => {
            let why = recorded_why(layout, &marker, value);
            return Ok(BridgeDecision { layout, why });
        }
        (IdentityBridge::Auto, None) => return detect(conn, prefix, &marker).await,
        (IdentityBridge::On, Some((_, Layout::Closed))) => {
            let why = format!(
                "configured (redis.identityBridge: true; recorded at {marker}, which recorded \
                 closed): re-opened to 0.1.0, each claim takes its lock over {CLOSED_HOLDER}"
            );
            (Layout::Bridged, why)
        }
        (IdentityBridge::On, _) => {
            let why = format!("configured (redis.identityBridge: true; recorded at {marker})");
            (Layout::Bridged, why)
        }
        (IdentityBridge::Off, Some((_, Layout::Bridged | Layout::Closed))) => {
            let why = format!(
                "configured (redis.identityBridge: false) after an upgrade from 0.1.0: \
                 0.1.0 is refused, each claim holds its lock as {CLOSED_HOLDER} \
                 (recorded at {marker}: closed)"
            );
            (Layout::Closed, why)
        }
        (IdentityBridge::Off, _) => {
            let why = format!("configured (redis.identityBridge: false; recorded at {marker})");
            (Layout::Namespaced, why)
        }
    };
    set(conn, &marker, layout.recorded(), false).await?;
    Ok(BridgeDecision { layout, why })
}

/// Why `auto` keeps to the `layout` recorded at `marker` as `value`.
fn recorded_why(layout: Layout, marker: &str, value: &str) -> String {
    match layout {
        Layout::Closed => format!(
            "auto: {marker} records closed (the bridge turned off after an upgrade from \
             0.1.0): 0.1.0 is refused, each claim holds its lock as {CLOSED_HOLDER}; \
             set redis.identityBridge to true before any rollback to 0.1.0 \
             (docs/upgrading.md)"
        ),
        Layout::Bridged | Layout::Namespaced => {
            format!("auto: {marker} records a {value} deployment")
        }
    }
}

/// `auto` with nothing recorded: an upgrade where 0.1.0 left a fence, else
/// a new install; recorded unless another replica recorded first.
async fn detect(
    conn: &RedisConn,
    prefix: &str,
    marker: &str,
) -> Result<BridgeDecision, StoreError> {
    // 0.1.0 keeps its fence as long as anything of the asset can be read.
    let found = first_key(conn, &format!("{prefix}:{{*}}:fence")).await?;
    let layout = if found.is_some() {
        Layout::Bridged
    } else {
        Layout::Namespaced
    };
    let stored = match set(conn, marker, layout.recorded(), true).await? {
        true => layout,
        false => get(conn, marker)
            .await?
            .map_or(layout, |value| Layout::of_recorded(&value)),
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
        layout: stored,
        why,
    })
}

/// The operation a Redis failure of this module is reported under.
const OP: &str = "layout";

async fn get(conn: &RedisConn, key: &str) -> Result<Option<String>, StoreError> {
    conn.clone().get(key).await.map_err(StoreError::redis(OP))
}

/// `SET` (or `SET NX` with `only_new`): whether it was written.
async fn set(conn: &RedisConn, key: &str, value: &str, only_new: bool) -> Result<bool, StoreError> {
    let mut cmd = redis::cmd("SET");
    cmd.arg(key).arg(value);
    if only_new {
        cmd.arg("NX");
    }
    let reply: Option<String> = cmd
        .query_async(&mut conn.clone())
        .await
        .map_err(StoreError::redis(OP))?;
    Ok(reply.is_some())
}

/// One key matching `pattern`, if any: SCAN, stopping at the first, on a
/// standalone server; KEYS on every primary of a Cluster.
async fn first_key(conn: &RedisConn, pattern: &str) -> Result<Option<String>, StoreError> {
    let mut conn = conn.clone();
    if conn.is_cluster() {
        let keys: Vec<String> = conn.keys(pattern).await.map_err(StoreError::redis(OP))?;
        return Ok(keys.into_iter().min());
    }
    use futures::StreamExt;
    let options = redis::ScanOptions::default()
        .with_pattern(pattern)
        .with_count(1000);
    let mut keys = conn
        .scan_options::<String>(options)
        .await
        .map_err(StoreError::redis(OP))?;
    keys.next().await.transpose().map_err(StoreError::redis(OP))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closed_holder_is_the_one_acquire_lua_writes() {
        let script = include_str!("../../../lua/acquire.lua");
        assert!(script.contains(&format!("local CLOSED = '{CLOSED_HOLDER}'")));
        assert!(!CLOSED_HOLDER.contains(char::is_whitespace));
    }

    #[test]
    fn each_layout_reads_back_as_recorded_and_an_unknown_one_takes_no_legacy_key() {
        for layout in [Layout::Namespaced, Layout::Bridged, Layout::Closed] {
            assert_eq!(Layout::of_recorded(layout.recorded()), layout);
        }
        assert_eq!(Layout::of_recorded("unbridged-v3"), Layout::Namespaced);
    }
}
