//! What a GitOps install relies on, beyond the chart's core (tests/chart/):
//!
//! - the Argo CD health scripts in deploy/argocd/resource_customizations,
//!   run by real Lua interpreters (5.4, and 5.1, the dialect of Argo CD's
//!   own interpreter) against every sample in their `health_test.yaml`,
//!   against the statuses the operator's own mirror function writes for
//!   every phase, and against the objects a real operator process wrote
//!   through the Kubernetes API emulator;
//! - the argocd-cm patch that carries those scripts;
//! - the chart's production parts: the supported Kubernetes version, every
//!   values file in charts/assetscan-operator/ci (real `helm template` and
//!   `helm lint --strict`), the optional NetworkPolicy, PrometheusRule and
//!   Grafana dashboard (rendered only when enabled; every query names a
//!   metric the operator really exports, read from its own registry; the
//!   alerts pass `promtool check rules` and fire as `promtool test rules`
//!   expects), and the `helm test` hook, whose script is run against a real
//!   operator.
//!
//! Needs helm v4 (on PATH or at target/tools/helm: scripts/ensure-helm.sh),
//! lua5.4 + lua5.1 with cjson (scripts/ensure-lua.sh) and promtool
//! (scripts/ensure-promtool.sh); each is installed by its script when
//! missing.
//!
//!   cargo test --all-features --test gitops

#[path = "../gitops_kit/mod.rs"]
mod gitops_kit;
#[path = "../kit/mod.rs"]
mod kit;
#[path = "../metrics_kit/mod.rs"]
mod metrics_kit;

use assetscan_operator::domain::ticket::{RiskFacts, Status, Ticket};
use assetscan_operator::kubernetes::controller::{ConditionType, status_from_ticket};
use assetscan_operator::kubernetes::crd::{AssetScan, AssetScanStatus};
use assetscan_testkit::emulator::{Emulator, EmulatorOptions};
use assetscan_testkit::process::free_port;
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::wait;
use gitops_kit::lua::{Health, asset_scan_script, check_health_tests, health};
use gitops_kit::process::{run_hook, start_operator};
use gitops_kit::promql::{check_query, dashboard_queries};
use gitops_kit::*;
use k8s_openapi::jiff::Timestamp;
use kit::scans::{is_terminal, reason, scan};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

mod alerts;
mod chart;
mod health;
mod process;
