//! The FindingExceptions a run of an AssetScan applies: those of the
//! AssetScan's own namespace (never another's) that name its asset or no
//! asset. Listed at most once per namespace per 30 seconds, so the API
//! server sees one list per namespace, not one per run; an exception made
//! or changed applies from the runs that start after that.

use crate::kubernetes::crd::{AssetScan, ExceptionState, FindingException};
use crate::telemetry::Throttle;
use assetscan_domain::{Statement, TriageState};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::warn;

/// How long a namespace's exceptions are taken as listed.
const EXCEPTIONS_TTL: Duration = Duration::from_secs(30);

/// Warns once a minute that the FindingException CRD is not installed.
static ABSENT: Throttle = Throttle::new(Duration::from_secs(60));

type Listed = Arc<Vec<FindingException>>;

pub struct ExceptionGate {
    client: Client,
    known: Mutex<HashMap<String, (Instant, Listed)>>,
}

impl ExceptionGate {
    pub fn new(client: Client) -> ExceptionGate {
        ExceptionGate {
            client,
            known: Mutex::new(HashMap::new()),
        }
    }

    /// The statements of `obj`'s namespace's exceptions for its asset. A
    /// cluster without the FindingException CRD has none (said once a
    /// minute); any other failure to list is the reconcile's error, and the
    /// run waits for the next attempt rather than alert on what a team
    /// decided about.
    pub async fn statements(&self, obj: &AssetScan) -> Result<Vec<Statement>, kube::Error> {
        let namespace = obj.namespace().unwrap_or_default();
        let listed = self.listed(&namespace).await?;
        Ok(statements_of(&listed, &namespace, &obj.spec.asset_id))
    }

    async fn listed(&self, namespace: &str) -> Result<Listed, kube::Error> {
        let cached = self.known().get(namespace).cloned();
        if let Some((at, listed)) = cached
            && at.elapsed() < EXCEPTIONS_TTL
        {
            return Ok(listed);
        }
        let api: Api<FindingException> = Api::namespaced(self.client.clone(), namespace);
        let listed = match api.list(&ListParams::default()).await {
            Ok(list) => Arc::new(list.items),
            Err(kube::Error::Api(status)) if status.code == 404 => {
                if let Some(held) = ABSENT.admit(Instant::now()) {
                    warn!(
                        held_back = held,
                        "the FindingException CRD is not installed: no exception applies (assetscan-operator crd | kubectl apply -f -)"
                    );
                }
                Arc::new(Vec::new())
            }
            Err(err) => return Err(err),
        };
        self.known()
            .insert(namespace.to_owned(), (Instant::now(), listed.clone()));
        Ok(listed)
    }

    fn known(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Listed)>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The statements of the exceptions of `namespace` that apply to `asset`.
fn statements_of(exceptions: &[FindingException], namespace: &str, asset: &str) -> Vec<Statement> {
    exceptions
        .iter()
        .filter(|e| e.namespace().as_deref() == Some(namespace))
        .filter(|e| e.spec.asset_ids.is_empty() || e.spec.asset_ids.iter().any(|a| a == asset))
        .map(|e| Statement {
            by: format!("FindingException {namespace}/{}", e.name_any()),
            vulnerabilities: e.spec.vulnerabilities.clone(),
            packages: e.spec.packages.clone(),
            state: match e.spec.state {
                ExceptionState::NotAffected => TriageState::NotAffected,
                ExceptionState::FalsePositive => TriageState::FalsePositive,
                ExceptionState::Accepted => TriageState::Accepted,
            },
            justification: e.spec.justification.clone(),
            owner: Some(e.spec.owner.clone()),
            expires_ms: (e.spec.expires.as_ref())
                .map(|t| u64::try_from(t.0.as_millisecond()).unwrap_or(0)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn exception(namespace: &str, name: &str, assets: &[&str]) -> FindingException {
        serde_json::from_value(json!({
            "apiVersion": "assetscan.io/v1alpha1", "kind": "FindingException",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"vulnerabilities": ["CVE-2023-2650"], "assetIds": assets,
                "state": "Accepted", "justification": "compensating control",
                "owner": "team-a", "expires": "2030-01-01T00:00:00Z"}
        }))
        .unwrap()
    }

    #[test]
    fn a_namespace_s_exceptions_apply_to_its_own_assets_only() {
        let listed = [
            exception("team-a", "all", &[]),
            exception("team-a", "web", &["web-1"]),
            exception("team-b", "theirs", &[]),
        ];
        let by = |asset| -> Vec<String> {
            statements_of(&listed, "team-a", asset)
                .into_iter()
                .map(|s| s.by)
                .collect()
        };
        assert_eq!(
            by("web-1"),
            ["FindingException team-a/all", "FindingException team-a/web"]
        );
        assert_eq!(by("db-1"), ["FindingException team-a/all"]);
        let accepted = &statements_of(&listed, "team-a", "db-1")[0];
        assert_eq!(accepted.state, TriageState::Accepted);
        assert_eq!(accepted.expires_ms, Some(1_893_456_000_000));
    }
}
