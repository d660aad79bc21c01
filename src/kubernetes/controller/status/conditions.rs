//! The status conditions, one model for every writer: the ticket mapping
//! (`status.rs`) and the controller's own reports (a stall, a suspended
//! spec, an invalid spec) build them alike, bound their messages alike, and
//! keep a condition's `lastTransitionTime` while its status stays the same.

use assetscan_domain::text::truncate_bytes;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

/// Bound on a free-text message copied into the status (a condition's,
/// `lastError`'s), in bytes: a provider's long error text can never make a
/// status write fail schema validation.
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// The condition types an AssetScan's status carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionType {
    /// The last run finished: the status describes a complete scan.
    Ready,
    /// A run is in progress.
    Reconciling,
    /// The run gave up (retries exhausted) or the operator cannot go on; a
    /// new spec generation or the next scheduled rescan starts a new run.
    Stalled,
    /// A high-risk vulnerability was confirmed on the asset. About the
    /// asset, not the operator, so a finding never reads as a failure.
    HighRisk,
    /// The object's shard label is not a bucket: it is ignored, and the
    /// object is scanned by the replica its asset id hashes to. Present
    /// only while that holds (absent means false).
    ShardLabelInvalid,
    /// A channel the spec names may not be used from the object's
    /// namespace (`channelAccess`): nothing is sent on it. Present only
    /// while that holds.
    ChannelRefused,
    /// A rescan the `assetscan.io/rescan` annotation asks for waits for
    /// `scanStarts.rescanMinInterval`; the message says when its run
    /// starts. Present only while it waits: the claim of that run (or a
    /// suspended spec, or a request withdrawn) removes it, so that a
    /// deferral is never silent and never outlives its run.
    RescanPending,
}

impl ConditionType {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionType::Ready => "Ready",
            ConditionType::Reconciling => "Reconciling",
            ConditionType::Stalled => "Stalled",
            ConditionType::HighRisk => "HighRisk",
            ConditionType::ShardLabelInvalid => "ShardLabelInvalid",
            ConditionType::ChannelRefused => "ChannelRefused",
            ConditionType::RescanPending => "RescanPending",
        }
    }

    /// This type's condition among `conditions`, if set.
    pub fn find(self, conditions: &[Condition]) -> Option<&Condition> {
        conditions.iter().find(|c| c.type_ == self.as_str())
    }
}

/// A condition's status (Kubernetes API conventions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// Sets the conditions of one status write: all describe the same
/// generation, and those that change, change at the same second.
pub struct ConditionBuilder {
    observed_generation: Option<i64>,
    now: Time,
}

impl ConditionBuilder {
    pub fn new(observed_generation: Option<i64>, now: Timestamp) -> ConditionBuilder {
        ConditionBuilder {
            observed_generation,
            now: whole_seconds(now),
        }
    }

    /// Inserts or replaces the condition of `type_`, like apimachinery's
    /// `meta.SetStatusCondition`: while its status stays the same, the
    /// previous `lastTransitionTime` is kept, so mirroring an unchanged
    /// ticket again produces an identical status (no timestamp churn, no
    /// needless writes).
    pub fn set(
        &self,
        conditions: &mut Vec<Condition>,
        type_: ConditionType,
        status: ConditionStatus,
        reason: &str,
        message: &str,
    ) {
        self.set_named(conditions, type_.as_str(), status, reason, message);
    }

    /// [`ConditionBuilder::set`] for a condition of another resource
    /// (a NotificationChannel's `Ready`, `Delivered`).
    pub fn set_named(
        &self,
        conditions: &mut Vec<Condition>,
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: &str,
    ) {
        let mut condition = Condition {
            type_: type_.to_owned(),
            status: status.as_str().to_owned(),
            reason: reason.to_owned(),
            message: bounded(message),
            observed_generation: self.observed_generation,
            last_transition_time: self.now.clone(),
        };
        match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
            Some(existing) => {
                if existing.status == condition.status {
                    condition.last_transition_time = existing.last_transition_time.clone();
                }
                *existing = condition;
            }
            None => conditions.push(condition),
        }
    }

    /// Sets several conditions that share one reason and one message: the
    /// run's, or why none goes on.
    pub fn set_all(
        &self,
        conditions: &mut Vec<Condition>,
        states: &[(ConditionType, ConditionStatus)],
        reason: &str,
        message: &str,
    ) {
        for &(type_, status) in states {
            self.set(conditions, type_, status, reason, message);
        }
    }
}

/// `message`, cut to [`MAX_MESSAGE_BYTES`].
pub fn bounded(message: &str) -> String {
    truncate_bytes(message, MAX_MESSAGE_BYTES)
}

/// `metav1.Time` has whole seconds on the wire: truncating first makes a
/// status compare equal to what the API server hands back.
pub fn whole_seconds(ts: Timestamp) -> Time {
    Time(Timestamp::from_second(ts.as_second()).unwrap_or(ts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    /// Sets `Ready` through `builder`, and returns it as set.
    fn set_ready(
        conditions: &mut Vec<Condition>,
        builder: &ConditionBuilder,
        (status, reason, message): (ConditionStatus, &str, &str),
    ) -> Condition {
        builder.set(conditions, ConditionType::Ready, status, reason, message);
        ConditionType::Ready.find(conditions).unwrap().clone()
    }

    #[test]
    fn a_transition_time_moves_only_with_the_status() {
        use ConditionStatus::{True, Unknown};
        let mut conditions = Vec::new();
        let first = ConditionBuilder::new(Some(1), at(100));
        set_ready(
            &mut conditions,
            &first,
            (Unknown, "Scanning", "scan in progress"),
        );
        let later = ConditionBuilder::new(Some(2), at(200));
        let ready = set_ready(
            &mut conditions,
            &later,
            (Unknown, "Scanning", "still scanning"),
        );
        assert_eq!(ready.last_transition_time.0, at(100));
        assert_eq!(
            (ready.message.as_str(), ready.observed_generation),
            ("still scanning", Some(2))
        );
        let ready = set_ready(&mut conditions, &later, (True, "ScanComplete", "done"));
        assert_eq!(ready.last_transition_time.0, at(200));
        assert_eq!(conditions.len(), 1);
        assert!(ConditionType::Stalled.find(&conditions).is_none());
    }

    #[test]
    fn several_conditions_share_one_reason_and_message() {
        use ConditionStatus::{False, True};
        let mut conditions = Vec::new();
        let states = [
            (ConditionType::Stalled, True),
            (ConditionType::Ready, False),
        ];
        ConditionBuilder::new(Some(4), at(100)).set_all(
            &mut conditions,
            &states,
            "RedisUnavailable",
            "connection refused",
        );
        let set: Vec<_> = conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
            .collect();
        assert_eq!(
            set,
            [
                ("Stalled", "True", "RedisUnavailable"),
                ("Ready", "False", "RedisUnavailable")
            ]
        );
        assert!(conditions.iter().all(|c| c.message == "connection refused"));
    }

    #[test]
    fn times_are_whole_seconds_and_messages_bounded() {
        let mut conditions = Vec::new();
        let now = Timestamp::from_millisecond(1_500).unwrap();
        ConditionBuilder::new(None, now).set(
            &mut conditions,
            ConditionType::Stalled,
            ConditionStatus::True,
            "RedisUnavailable",
            &"é".repeat(MAX_MESSAGE_BYTES),
        );
        let stalled = &conditions[0];
        assert_eq!(stalled.last_transition_time.0, at(1));
        assert!(stalled.message.len() <= MAX_MESSAGE_BYTES);
        assert!(stalled.message.ends_with('…'));
    }
}
