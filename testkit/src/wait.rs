//! Waiting on the event that proves a test's point, never on a wall-clock
//! window: a test polls for its condition and goes on the moment it holds.
//! The timeout only turns a hang into a failure with a message; it is
//! generous so that a loaded machine slows a test down without failing it.
//!
//! One loop, [`poll`], under every wait here: a condition ([`until`]), a
//! value ([`until_some`], [`until_ok`]), a Kubernetes object in a given state
//! ([`object`]) or gone ([`gone`]).

use kube::api::Api;
use kube::core::NamespaceResourceScope;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::{Debug, Display};
use std::time::Duration;

/// How often a condition is checked.
pub const POLL: Duration = Duration::from_millis(20);

/// Calls `check` every [`POLL`] until it gives `Ok`, for up to `timeout`;
/// after that, `Err` with what the last check said. Checked at least once.
pub async fn poll<T, E>(
    timeout: Duration,
    mut check: impl AsyncFnMut() -> Result<T, E>,
) -> Result<T, E> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match check().await {
            Ok(done) => return Ok(done),
            Err(last) if tokio::time::Instant::now() >= deadline => return Err(last),
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

/// Polls `done` until it holds; panics with `what` after `timeout`.
pub async fn until(what: &str, timeout: Duration, mut done: impl AsyncFnMut() -> bool) {
    until_some(what, timeout, async || done().await.then_some(())).await
}

/// Polls `found` until it finds something, and returns that; panics with
/// `what` after `timeout`.
pub async fn until_some<T>(
    what: &str,
    timeout: Duration,
    mut found: impl AsyncFnMut() -> Option<T>,
) -> T {
    until_ok(what, timeout, async || found().await.ok_or("not yet")).await
}

/// Polls `attempt` until it succeeds, and returns its value; panics with
/// `what` and the last error after `timeout`.
pub async fn until_ok<T, E: Display>(
    what: &str,
    timeout: Duration,
    attempt: impl AsyncFnMut() -> Result<T, E>,
) -> T {
    poll(timeout, attempt).await.unwrap_or_else(|last| {
        panic!("timed out after {timeout:?} waiting until {what}; last: {last}")
    })
}

/// Polls the namespaced object `name` until `done` holds, and returns it;
/// panics after `timeout` with `what` and the status last seen.
pub async fn object<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    done: impl Fn(&K) -> bool,
) -> K
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Serialize + Debug,
{
    let seen = poll(timeout, async || match api.get_opt(name).await {
        Ok(Some(obj)) if done(&obj) => Ok(obj),
        Ok(Some(obj)) => Err(status_of(&obj)),
        Ok(None) => Err("no such object".to_owned()),
        Err(e) => Err(format!("GET failed: {e}")),
    })
    .await;
    seen.unwrap_or_else(|last| {
        panic!("timed out after {timeout:?} waiting for {name} to be {what}; last seen: {last}")
    })
}

/// Polls until the namespaced object `name` is gone (its finalizers done);
/// panics after `timeout` with the object last seen.
pub async fn gone<K>(api: &Api<K>, name: &str, timeout: Duration)
where
    K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Serialize + Debug,
{
    let seen = poll(timeout, async || match api.get_opt(name).await {
        Ok(None) => Ok(()),
        Ok(Some(obj)) => Err(format!(
            "finalizers {:?}, {}",
            obj.finalizers(),
            status_of(&obj)
        )),
        Err(e) => Err(format!("GET failed: {e}")),
    })
    .await;
    seen.unwrap_or_else(|last| {
        panic!("timed out after {timeout:?} waiting for {name} to be gone; last seen: {last}")
    })
}

/// An object's `status`, as JSON, for a failure message.
fn status_of<K: Serialize>(obj: &K) -> String {
    let status = serde_json::to_value(obj)
        .map(|json| json["status"].clone())
        .unwrap_or_default();
    format!("status {status:#}")
}
