//! Fault injection: make the next N matching requests fail or slow down, end
//! or cut open watch streams, or take the whole API server down for a while
//! — the API server misbehaviours a controller must survive (conflicts, 5xx,
//! throttling, slow answers, dropped watches, outages).
//!
//! An outage looks to clients like a crashed kube-apiserver: new connections
//! are refused, open watches are cut, idle connections closed. The data
//! survives (it lives in etcd): when the server is back, every object has
//! the resourceVersion it had, and, as after a real restart, the watch cache
//! starts at the current version: a watch can resume from the latest version
//! a client saw, while an older one gets `410 Expired` (and a re-list).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, watch};
use tokio::time::Instant;

/// What an injected fault answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// `409 Conflict` (reason `Conflict`), as for a stale resourceVersion.
    Conflict,
    /// `500 InternalError`.
    InternalError,
    /// `403 Forbidden`, worded as the RBAC authorizer denies `user` the
    /// request's verb on its resource.
    Forbidden { user: String, verb: String },
    /// `429 TooManyRequests` with `Retry-After`. kube-rs clients retry these by default.
    TooManyRequests { retry_after_seconds: u64 },
    /// Answer normally, after a delay.
    Delay(Duration),
}

/// A request that received an injected fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FiredFault {
    pub method: String,
    pub path: String,
    pub fault: Fault,
}

#[derive(Debug)]
struct Rule {
    method: Option<String>,
    path_contains: String,
    remaining: usize,
    fault: Fault,
}

/// A signal to every open watch stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchSignal {
    /// End the response cleanly, as a server does when `timeoutSeconds` elapse.
    End,
    /// Cut the connection mid-stream (the client sees a body error).
    Abort,
}

/// Whether the emulated API server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    Serving,
    /// Connections are refused.
    Down,
}

/// What was asked of the server's availability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outage {
    None,
    /// Down until the instant, or until `end_outage` when `None`.
    Until(Option<Instant>),
}

/// Handle for injecting faults; cheap to clone, shared with the server.
#[derive(Debug, Clone)]
pub struct Faults {
    rules: Arc<Mutex<Vec<Rule>>>,
    fired: Arc<Mutex<Vec<FiredFault>>>,
    watches: broadcast::Sender<WatchSignal>,
    outage: Arc<watch::Sender<Outage>>,
    availability: Arc<watch::Sender<Availability>>,
    outages: Arc<AtomicUsize>,
}

impl Default for Faults {
    fn default() -> Self {
        Self::new()
    }
}

/// What to do with one request.
#[derive(Debug, Default)]
pub(crate) struct Decision {
    pub delay: Duration,
    pub fail: Option<Fault>,
}

impl Faults {
    pub fn new() -> Self {
        let (watches, _) = broadcast::channel(16);
        Self {
            rules: Arc::default(),
            fired: Arc::default(),
            watches,
            outage: Arc::new(watch::Sender::new(Outage::None)),
            availability: Arc::new(watch::Sender::new(Availability::Serving)),
            outages: Arc::default(),
        }
    }

    /// Takes the API server down: for `duration`, or until `end_outage`
    /// when `None`. Returns at once; `wait_until(Availability::Down)` waits
    /// until every connection is closed and new ones are refused.
    pub fn begin_outage(&self, duration: Option<Duration>) {
        let until = duration.map(|d| Instant::now() + d);
        self.outage.send_replace(Outage::Until(until));
    }

    /// Brings the API server back; `wait_until(Availability::Serving)` waits
    /// until it accepts connections again.
    pub fn end_outage(&self) {
        self.outage.send_replace(Outage::None);
    }

    /// Whether the server answers right now.
    pub fn availability(&self) -> Availability {
        *self.availability.borrow()
    }

    /// Waits until the server is (again) in the given state.
    pub async fn wait_until(&self, wanted: Availability) {
        let mut rx = self.availability.subscribe();
        // The sender lives as long as `self`: the wait cannot fail.
        let _ = rx.wait_for(|a| *a == wanted).await;
    }

    /// How many outages have taken effect.
    pub fn outages(&self) -> usize {
        self.outages.load(Ordering::SeqCst)
    }

    pub(crate) fn outage_requests(&self) -> watch::Receiver<Outage> {
        self.outage.subscribe()
    }

    pub(crate) fn set_availability(&self, now: Availability) {
        if now == Availability::Down {
            self.outages.fetch_add(1, Ordering::SeqCst);
        }
        self.availability.send_replace(now);
    }

    /// Answers the next `times` requests whose method is `method` (any, when
    /// `"*"`) and whose path-and-query contains `path_contains` with `fault`.
    ///
    /// Example: `faults.inject("PATCH", "/status", 2, Fault::Conflict)`.
    pub fn inject(&self, method: &str, path_contains: &str, times: usize, fault: Fault) {
        let method = (method != "*").then(|| method.to_ascii_uppercase());
        self.lock_rules().push(Rule {
            method,
            path_contains: path_contains.to_string(),
            remaining: times,
            fault,
        });
    }

    /// Delays the next `times` matching requests by `delay`.
    pub fn delay(&self, method: &str, path_contains: &str, times: usize, delay: Duration) {
        self.inject(method, path_contains, times, Fault::Delay(delay));
    }

    /// Drops every pending rule.
    pub fn clear(&self) {
        self.lock_rules().clear();
    }

    /// Injected answers not yet given.
    pub fn pending(&self) -> usize {
        self.lock_rules().iter().map(|r| r.remaining).sum()
    }

    /// Every request that got an injected fault, in order.
    pub fn fired(&self) -> Vec<FiredFault> {
        self.fired.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Ends every open watch stream cleanly; returns how many were told.
    pub fn end_watches(&self) -> usize {
        self.watches.send(WatchSignal::End).unwrap_or(0)
    }

    /// Cuts every open watch connection; returns how many were told.
    pub fn abort_watches(&self) -> usize {
        self.watches.send(WatchSignal::Abort).unwrap_or(0)
    }

    pub(crate) fn watch_signals(&self) -> broadcast::Receiver<WatchSignal> {
        self.watches.subscribe()
    }

    fn lock_rules(&self) -> std::sync::MutexGuard<'_, Vec<Rule>> {
        self.rules.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Consumes the matching rules for a request: all matching delays add
    /// up; the first matching failure is answered.
    pub(crate) fn decide(&self, method: &str, path_and_query: &str) -> Decision {
        let mut decision = Decision::default();
        let mut rules = self.lock_rules();
        for rule in rules.iter_mut() {
            let matches = rule.remaining > 0
                && rule.method.as_deref().is_none_or(|m| m == method)
                && path_and_query.contains(&rule.path_contains);
            if !matches {
                continue;
            }
            match &rule.fault {
                Fault::Delay(d) => decision.delay += *d,
                _ if decision.fail.is_some() => continue,
                f => decision.fail = Some(f.clone()),
            }
            rule.remaining -= 1;
            self.fired
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(FiredFault {
                    method: method.to_string(),
                    path: path_and_query.to_string(),
                    fault: rule.fault.clone(),
                });
        }
        rules.retain(|r| r.remaining > 0);
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_count_down() {
        let f = Faults::new();
        f.inject("patch", "/status", 2, Fault::Conflict);
        f.delay("*", "assetscans", 1, Duration::from_millis(5));
        assert_eq!(
            f.decide("GET", "/apis/x/v1/assetscans").delay,
            Duration::from_millis(5)
        );
        assert!(f.decide("GET", "/x/status").fail.is_none());
        assert_eq!(f.decide("PATCH", "/x/status").fail, Some(Fault::Conflict));
        assert_eq!(f.decide("PATCH", "/x/status").fail, Some(Fault::Conflict));
        assert!(f.decide("PATCH", "/x/status").fail.is_none());
        assert_eq!(f.pending(), 0);
        assert_eq!(f.fired().len(), 3);
    }
}
