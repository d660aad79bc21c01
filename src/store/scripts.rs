//! The Lua scripts of `lua/`, compiled into the binary, and the argument
//! objects the store sends them. `redis::Script` sends EVALSHA and, on
//! NOSCRIPT (a restarted or flushed Redis), loads the script and retries
//! once, so each script crosses the wire only when Redis lost it.
//!
//! Each script that takes arguments beyond its keys takes them as one JSON
//! object in ARGV[1], of a version (`v`) the script checks, with named
//! fields: a later release adds a field or a version, where positional
//! arguments could only grow by optional tails whose meaning hangs on
//! their place. The headers of `lua/` are the reference; the types here
//! are what this store sends, every field given.

use super::{Patch, StoreError};
use assetscan_domain::fence::Fence;
use assetscan_domain::ticket::{Status, Ticket};
use redis::Script;
use serde::Serialize;
use std::sync::LazyLock;

pub(crate) static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/acquire.lua")));
pub(crate) static ADVANCE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/advance.lua")));
pub(crate) static RENEW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/renew.lua")));
pub(crate) static RENEW_MANY: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/renew_many.lua")));
pub(crate) static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/release.lua")));
pub(crate) static RETIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/retire.lua")));

/// The version of the argument objects this store sends.
const VERSION: u32 = 1;

/// An argument object with its version, as the scripts decode it.
#[derive(Serialize)]
struct Versioned<'a, T> {
    v: u32,
    #[serde(flatten)]
    args: &'a T,
}

/// `args` as the JSON of `script`'s ARGV[1].
pub(super) fn argument_object<T: Serialize>(
    script: &'static str,
    args: &T,
) -> Result<String, StoreError> {
    serde_json::to_string(&Versioned { v: VERSION, args }).map_err(|e| StoreError::Protocol {
        script,
        reason: e.to_string(),
    })
}

/// `acquire.lua`'s arguments. KEYS[7] is the superseded run's ticket when
/// `supersedes`; the legacy family follows when `bridge`, and the legacy
/// lock alone when `refuse_legacy_ms` is not 0.
#[derive(Serialize)]
pub(super) struct AcquireArgs<'a> {
    pub holder: &'a str,
    pub ttl_ms: u64,
    pub floor: u64,
    pub now: u64,
    pub initial: &'a Ticket,
    pub audit_cap: u32,
    pub keep_ticket_ms: u64,
    pub keep_asset_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub known: Option<Fence>,
    pub supersedes: bool,
    pub bridge: bool,
    /// How long the legacy lock keeps the closed marker after this claim
    /// ([`super::Layout::Closed`]); 0 with any other layout.
    pub refuse_legacy_ms: u64,
}

/// `advance.lua`'s arguments; the facts follow in ARGV as name, JSON pairs,
/// which the script stores without decoding them.
#[derive(Serialize)]
pub(super) struct AdvanceArgs<'a> {
    pub token: u64,
    pub to: Status,
    pub now: u64,
    pub patch: &'a Patch,
    pub keep_terminal_ms: u64,
    pub keep_open_ms: u64,
    pub audit_cap: u32,
    pub return_facts: bool,
    pub bridge: bool,
}

/// `release.lua`'s arguments; KEYS[3] is the legacy lock when `bridge`.
#[derive(Serialize)]
pub(super) struct ReleaseArgs<'a> {
    pub holder: &'a str,
    pub now: u64,
    pub audit_cap: u32,
    pub bridge: bool,
}

/// `retire.lua`'s arguments: KEYS holds `tickets` tickets, then their
/// facts hashes.
#[derive(Serialize)]
pub(super) struct RetireArgs<'a> {
    pub holder: &'a str,
    pub now: u64,
    pub tombstone_ms: u64,
    pub tickets: usize,
    pub audit_cap: u32,
}
