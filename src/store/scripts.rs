//! The Lua scripts of `lua/`, compiled into the binary. `redis::Script` sends
//! EVALSHA and, on NOSCRIPT (a restarted or flushed Redis), loads the script
//! and retries once, so each script crosses the wire only when Redis lost it.

use redis::Script;
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
