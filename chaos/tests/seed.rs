//! `make chaos` with `CHAOS_SEED` set but empty stops with a message that
//! names the mistake, before it starts anything.

use std::process::Command;

#[test]
fn an_empty_chaos_seed_is_named_before_anything_starts() {
    let out = Command::new(env!("CARGO_BIN_EXE_assetscan-chaos"))
        .env("CHAOS_SEED", "")
        .output()
        .expect("the chaos binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("the seed is empty"), "{stderr}");
    assert!(stderr.contains("unset CHAOS_SEED"), "{stderr}");
    assert!(out.stdout.is_empty(), "no run started");
}
