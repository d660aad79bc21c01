//! Watch streams: newline-delimited JSON `{"type", "object"}` events over a
//! chunked response, as kube-apiserver sends them.
//!
//! * `resourceVersion` unset or `"0"`: synthetic `ADDED` events for the
//!   current state, then changes.
//! * `resourceVersion=N`: every change after N from the change log; when N
//!   has been compacted away, one `ERROR` event with a `410 Expired` Status
//!   (what kube-runtime's watcher answers with a re-list).
//! * `sendInitialEvents=true`: the current state, then a `BOOKMARK` carrying
//!   the `k8s.io/initial-events-end` annotation (streaming lists).
//! * `allowWatchBookmarks`: periodic `BOOKMARK`s with the latest version.
//! * Objects entering or leaving a selector appear as `ADDED` / `DELETED`.
//! * `timeoutSeconds` ends the stream cleanly; fault injection can end or
//!   cut every open stream, and an outage cuts them all.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::error::ApiError;
use super::faults::{Outage, WatchSignal};
use super::meta;
use super::options;
use super::request::Request;
use super::resources::ResourceType;
use super::selectors::Filter;
use super::state::State;
use super::store::{Change, EventType};
use super::table;

/// Settings of watch streams.
#[derive(Debug, Clone)]
pub struct WatchSettings {
    pub bookmark_interval: Duration,
    /// Used when the client sends no `timeoutSeconds`.
    pub default_timeout: Duration,
}

/// Everything a watch needs once it has left the state lock.
pub struct WatchPlan {
    rt: Arc<ResourceType>,
    namespace: Option<String>,
    filter: Filter,
    table: bool,
    metadata_only: bool,
    bookmarks: bool,
    timeout: Duration,
    /// Events to send first (already rendered).
    initial: Vec<Value>,
    /// Live changes after `from_rv`.
    rx: broadcast::Receiver<Arc<Change>>,
    from_rv: u64,
    /// The requested resourceVersion was compacted: the stream is one 410 ERROR event.
    pub expired: bool,
}

fn event(kind: &str, object: Value) -> Value {
    json!({"type": kind, "object": object})
}

fn bookmark(rt: &ResourceType, rv: u64, initial_end: bool) -> Value {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    event(
        "BOOKMARK",
        json!({"kind": rt.kind, "apiVersion": rt.api_version(), "metadata": metadata}),
    )
}

/// Prepares a watch under the state lock (so no change is missed or doubled).
pub fn plan(
    state: &State,
    req: &Request<'_>,
    settings: &WatchSettings,
) -> Result<WatchPlan, ApiError> {
    options::check_list(req.query, true)?;
    let truthy = |k: &str| matches!(req.q(k), Some("true" | "1"));
    let current = state.store.current_rv();
    let mut plan = WatchPlan {
        rt: req.rt.clone(),
        namespace: req.namespace.clone(),
        filter: Filter::from_query(&req.rt, req.query)?,
        table: table::wants_table(req.accept),
        metadata_only: table::wants_metadata(req.accept),
        bookmarks: truthy("allowWatchBookmarks"),
        timeout: req
            .q("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .map(Duration::from_secs)
            .unwrap_or(settings.default_timeout),
        initial: Vec::new(),
        rx: state.store.subscribe(),
        from_rv: current,
        expired: false,
    };
    let send_initial = truthy("sendInitialEvents");
    match req.q("resourceVersion") {
        None | Some("0") => {
            plan.add_current(state);
            if send_initial {
                plan.initial.push(bookmark(&plan.rt, current, true));
            }
        }
        Some(v) => {
            let rv = v
                .parse::<u64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid resource version {v:?}")))?;
            if send_initial {
                plan.add_current(state);
                plan.initial.push(bookmark(&plan.rt, current, true));
            } else {
                plan.replay(state, rv);
            }
        }
    }
    Ok(plan)
}

impl WatchPlan {
    /// `ADDED` events for the current objects the watcher selects.
    fn add_current(&mut self, state: &State) {
        for obj in state
            .store
            .list(&self.rt.storage, self.namespace.as_deref())
        {
            if self.filter.matches(&obj) {
                let rendered = self.render(&obj);
                self.initial.push(event("ADDED", rendered));
            }
        }
    }

    /// The changes after `rv` from the change log; when it was compacted
    /// away, one `410 Expired` ERROR event that ends the stream.
    fn replay(&mut self, state: &State, rv: u64) {
        match state.store.changes_since(rv) {
            Ok(changes) => {
                for change in changes {
                    if let Some(ev) = self.translate(&change) {
                        self.initial.push(ev);
                    }
                }
            }
            Err(too_old) => {
                self.initial
                    .push(event("ERROR", too_old.gone().to_status()));
                self.timeout = Duration::ZERO;
                self.expired = true;
            }
        }
    }

    fn render(&self, stored: &Value) -> Value {
        let view = self.rt.to_view(stored);
        if self.table {
            let rv = json!({"resourceVersion": meta::resource_version(&view).unwrap_or_default()});
            table::render(&self.rt, &[view], rv, "Metadata")
        } else if self.metadata_only {
            table::as_metadata(&view)
        } else {
            view
        }
    }

    /// A change as this watcher sees it (None when it does not concern it).
    fn translate(&self, change: &Change) -> Option<Value> {
        let key = &change.key;
        if key.storage != self.rt.storage
            || self
                .namespace
                .as_deref()
                .is_some_and(|ns| key.namespace != ns)
        {
            return None;
        }
        let now = self.filter.matches(&change.object);
        let before = change
            .previous
            .as_deref()
            .is_some_and(|p| self.filter.matches(p));
        let kind = match change.event {
            EventType::Added if now => "ADDED",
            EventType::Modified if now && before => "MODIFIED",
            EventType::Modified if now => "ADDED",
            EventType::Modified if before => "DELETED",
            EventType::Deleted if now || before => "DELETED",
            _ => return None,
        };
        Some(event(kind, self.render(&change.object)))
    }
}

/// Counts open watch streams for as long as it lives.
struct OpenGuard(Arc<AtomicUsize>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn line(v: &Value) -> Result<Bytes, std::io::Error> {
    let mut s = v.to_string();
    s.push('\n');
    Ok(Bytes::from(s))
}

/// What ends a watch stream from outside.
pub struct Enders {
    pub signals: broadcast::Receiver<WatchSignal>,
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    pub outage: tokio::sync::watch::Receiver<Outage>,
}

/// Runs a planned watch as a streaming body.
pub fn stream(
    mut plan: WatchPlan,
    settings: WatchSettings,
    enders: Enders,
    open: Arc<AtomicUsize>,
) -> Body {
    let Enders {
        mut signals,
        mut shutdown,
        mut outage,
    } = enders;
    let (tx, mut out) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    open.fetch_add(1, Ordering::SeqCst);
    let guard = OpenGuard(open);
    tokio::spawn(async move {
        let _guard = guard;
        for ev in std::mem::take(&mut plan.initial) {
            if tx.send(line(&ev)).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::sleep(plan.timeout);
        tokio::pin!(deadline);
        // A crashing server cuts its watches (state-based: never missed).
        let outage = async move {
            let _ = outage.wait_for(|o| *o != Outage::None).await;
        };
        tokio::pin!(outage);
        let mut ticker = tokio::time::interval(settings.bookmark_interval);
        ticker.tick().await;
        let mut last_rv = plan.from_rv;
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = tx.closed() => return,
                _ = shutdown.changed() => return,
                _ = &mut outage => {
                    let _ = tx.send(Err(std::io::Error::other("API server outage"))).await;
                    return;
                }
                signal = signals.recv() => match signal {
                    Ok(WatchSignal::End) | Err(broadcast::error::RecvError::Closed) => return,
                    Ok(WatchSignal::Abort) => {
                        let _ = tx.send(Err(std::io::Error::other("watch aborted by fault injection"))).await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                },
                _ = ticker.tick(), if plan.bookmarks => {
                    if tx.send(line(&bookmark(&plan.rt, last_rv, false))).await.is_err() {
                        return;
                    }
                }
                change = plan.rx.recv() => match change {
                    Ok(change) => {
                        last_rv = last_rv.max(change.rv);
                        if change.rv <= plan.from_rv {
                            continue;
                        }
                        if let Some(ev) = plan.translate(&change)
                            && tx.send(line(&ev)).await.is_err()
                        {
                            return;
                        }
                    }
                    // A watcher too slow to keep up is closed; the client re-watches.
                    Err(_) => return,
                },
            }
        }
    });
    let body = futures::stream::poll_fn(move |cx| out.poll_recv(cx));
    Body::from_stream(body)
}
