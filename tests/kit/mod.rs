//! What the integration tests share beyond one harness: AssetScans built
//! the one way ([`scans`]), the pipeline's requests ([`requests`]), runs claimed and walked in the ticket store
//! ([`tickets`]), and the operator's config sections and the raw Redis
//! access the tests need ([`setup`]). Waiting and the operator process are
//! in the test kit (`assetscan_testkit::wait`, `assetscan_testkit::process`).
//!
//! A test file includes it with `mod kit;`, or through `controller_kit`,
//! which re-exports it.

#![allow(dead_code)]

pub mod requests;
pub mod scans;
pub mod setup;
pub mod tickets;
