//! assetscan-operator: fenced, crash-safe security scans per asset.
//!
//! The layers, each depending only on those below it:
//!
//! - [`cli`]: the binary's subcommands (`run`, `crd`, `scan`, `ticket`);
//! - [`kubernetes`]: the adapter to the API server (custom resources,
//!   controller, RBAC);
//! - [`pipeline`] and [`providers`]: one run driven through its steps, and
//!   the outside world it calls;
//! - [`store`]: the fenced ticket store (Redis and the scripts in `lua/`);
//! - [`domain`]: tickets, the fence, runs, requests and verdicts.
//!
//! Beside them, what every layer may use: [`duration`],
//! [`telemetry`], [`probes`] and who may read them ([`http_access`]),
//! [`yaml`], and the fair shares of a rate
//! among namespaces ([`fair`]).
//!
//! Each layer owns its sections of the configuration file (their types,
//! defaults and rules); [`cli::config`] puts them side by side and reads
//! the file.

/// The domain (tickets, the fence, scan requests, verdicts): its own crate,
/// which knows neither Kubernetes nor Redis nor HTTP.
pub use assetscan_domain as domain;

mod backoff;
pub mod cli;
pub mod duration;
pub mod fair;
pub mod http_access;
pub mod kubernetes;
pub mod pipeline;
pub mod probes;
pub mod providers;
pub mod store;
pub mod telemetry;
pub mod yaml;
