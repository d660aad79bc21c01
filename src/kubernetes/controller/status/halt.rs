//! Why no run goes on for an object, as its status says it: the one place
//! that sets the conditions a ticket does not (a suspended spec, an invalid
//! spec, an operator that cannot go on; and, while runs go on, a shard label
//! that is not a bucket, channels the namespace may not use, and a rescan
//! held back by the minimum interval).

use super::conditions::{ConditionBuilder, ConditionStatus, ConditionType};
use crate::kubernetes::controller::fleet::shard::InvalidShardLabel;
use crate::kubernetes::crd::AssetScanStatus;
use assetscan_domain::RESCAN_ANNOTATION;
use k8s_openapi::jiff::Timestamp;

/// Sets `ShardLabelInvalid` on `status` while `invalid` holds, and removes
/// it once it does not (absent means false: a valid object carries no
/// condition for it).
pub fn shard_label_condition(
    status: &mut AssetScanStatus,
    invalid: Option<InvalidShardLabel>,
    now: Timestamp,
) {
    let holds = invalid.map(|label| ("NotABucket", label.message()));
    true_while(status, ConditionType::ShardLabelInvalid, holds, now);
}

/// Sets `type_` to True with the reason and message of `holds`, or removes
/// it when `holds` is `None`: for the conditions whose absence means false,
/// so that an object in order carries none of them.
fn true_while(
    status: &mut AssetScanStatus,
    type_: ConditionType,
    holds: Option<(&str, String)>,
    now: Timestamp,
) {
    match holds {
        Some((reason, message)) => ConditionBuilder::new(status.observed_generation, now).set(
            &mut status.conditions,
            type_,
            ConditionStatus::True,
            reason,
            &message,
        ),
        None => status.conditions.retain(|c| c.type_ != type_.as_str()),
    }
}

/// The channels of one object its namespace may not use, each with why.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Refused(pub Vec<(String, String)>);

impl Refused {
    pub fn contains(&self, channel: &str) -> bool {
        self.0.iter().any(|(c, _)| c == channel)
    }

    /// What the condition and the Event say.
    pub fn message(&self) -> String {
        let whys: Vec<&str> = self.0.iter().map(|(_, why)| why.as_str()).collect();
        format!("nothing is sent on these channels: {}", whys.join("; "))
    }
}

/// Sets `ChannelRefused` on `status` while a channel is refused, and
/// removes it once none is (absent means false).
pub fn channel_condition(status: &mut AssetScanStatus, refused: &Refused, now: Timestamp) {
    let holds = (!refused.0.is_empty()).then(|| ("ChannelNotAllowed", refused.message()));
    true_while(status, ConditionType::ChannelRefused, holds, now);
}

/// A rescan the annotation asks for that `scanStarts.rescanMinInterval`
/// holds back: when its run starts. Derived from the status and the
/// setting alone, never from the clock, so that every reconcile while it
/// waits finds the same message and writes nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeferredRescan {
    /// When the run starts.
    pub starts_at: Timestamp,
    /// When the last run ended (`status.lastScanTime`): the minimum
    /// interval counts from there.
    pub ended: Timestamp,
    /// The scheduled rescan (`status.nextScanTime`) comes first, and is
    /// the run that handles the request.
    pub scheduled: bool,
}

impl DeferredRescan {
    /// What the condition and the Event say: the start as an RFC 3339
    /// time, and why then.
    pub fn message(&self) -> String {
        let why = match self.scheduled {
            true => "the scheduled rescan, due before scanStarts.rescanMinInterval",
            false => "scanStarts.rescanMinInterval",
        };
        format!(
            "the rescan the {RESCAN_ANNOTATION} annotation asks for starts at {}: {why} after \
             the last run ended at {}",
            self.starts_at, self.ended
        )
    }
}

/// Sets `RescanPending` on `status` while `deferred` holds, and removes it
/// once it does not (absent means false, like `ChannelRefused`).
pub fn rescan_condition(
    status: &mut AssetScanStatus,
    deferred: Option<&DeferredRescan>,
    now: Timestamp,
) {
    let holds = deferred.map(|deferred| ("RescanDeferred", deferred.message()));
    true_while(status, ConditionType::RescanPending, holds, now);
}

/// Why no run goes on.
#[derive(Debug)]
pub enum Halt {
    /// `spec.suspend`: no new run starts.
    Suspended,
    /// The spec cannot make a scan request: only a new spec helps.
    InvalidSpec(String),
    /// An infrastructure failure (the ticket store, the API server): the
    /// reason and the error's text (never a secret: store and API errors
    /// carry no credentials).
    Stalled {
        reason: &'static str,
        message: String,
    },
}

impl Halt {
    /// `current` (the status as last written or read) with this halt's
    /// conditions, for `generation`, changed at `now`.
    pub fn status(
        &self,
        current: Option<AssetScanStatus>,
        generation: Option<i64>,
        now: Timestamp,
    ) -> AssetScanStatus {
        use ConditionStatus::{False, True};
        use ConditionType::{Ready, Reconciling, Stalled};
        let mut status = current.unwrap_or_default();
        let (states, reason, message): (&[_], _, _) = match self {
            Halt::Suspended => {
                // Say that this generation was seen, and why nothing runs.
                status.observed_generation = generation;
                (
                    &[(Reconciling, False)],
                    "Suspended",
                    "spec.suspend is true: no new run starts",
                )
            }
            Halt::InvalidSpec(why) => (&[(Stalled, True)], "InvalidSpec", why.as_str()),
            Halt::Stalled { reason, message } => (
                &[(Stalled, True), (Ready, False)],
                *reason,
                message.as_str(),
            ),
        };
        ConditionBuilder::new(generation, now).set_all(
            &mut status.conditions,
            states,
            reason,
            message,
        );
        if matches!(self, Halt::Suspended | Halt::InvalidSpec(_)) {
            // No run starts: a rescan held back by the minimum interval
            // does not either, and the status stops saying when (in this
            // write, not one more).
            rescan_condition(&mut status, None, now);
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).expect("time")
    }

    fn conditions(status: &AssetScanStatus) -> Vec<(&str, &str, &str)> {
        fn row(c: &Condition) -> (&str, &str, &str) {
            (c.type_.as_str(), c.status.as_str(), c.reason.as_str())
        }
        status.conditions.iter().map(row).collect()
    }

    #[test]
    fn each_halt_sets_its_own_conditions_over_the_current_status() {
        let current = AssetScanStatus {
            fencing_token: Some(5),
            observed_generation: Some(1),
            ..Default::default()
        };
        let suspended = Halt::Suspended.status(Some(current.clone()), Some(2), at(10));
        assert_eq!(
            conditions(&suspended),
            [("Reconciling", "False", "Suspended")]
        );
        assert_eq!(suspended.observed_generation, Some(2), "this spec was seen");
        assert_eq!(suspended.fencing_token, Some(5), "the rest is kept");

        let invalid =
            Halt::InvalidSpec("no target".into()).status(Some(current.clone()), Some(2), at(10));
        assert_eq!(conditions(&invalid), [("Stalled", "True", "InvalidSpec")]);
        assert_eq!(invalid.observed_generation, Some(1));
        assert_eq!(invalid.conditions[0].message, "no target");

        let stalled = Halt::Stalled {
            reason: "RedisUnavailable",
            message: "connection refused".into(),
        };
        let stalled = stalled.status(None, Some(2), at(10));
        assert_eq!(
            conditions(&stalled),
            [
                ("Stalled", "True", "RedisUnavailable"),
                ("Ready", "False", "RedisUnavailable")
            ]
        );
        assert!(
            stalled
                .conditions
                .iter()
                .all(|c| c.observed_generation == Some(2))
        );
    }

    #[test]
    fn a_deferred_rescan_says_when_it_starts_until_no_run_can_start() {
        let deferred = DeferredRescan {
            starts_at: at(7200),
            ended: at(3600),
            scheduled: false,
        };
        let mut status = AssetScanStatus {
            observed_generation: Some(2),
            ..Default::default()
        };
        rescan_condition(&mut status, Some(&deferred), at(3700));
        assert_eq!(
            conditions(&status),
            [("RescanPending", "True", "RescanDeferred")]
        );
        assert_eq!(
            status.conditions[0].message,
            "the rescan the assetscan.io/rescan annotation asks for starts at \
             1970-01-01T02:00:00Z: scanStarts.rescanMinInterval after the last run ended at \
             1970-01-01T01:00:00Z"
        );
        // Said again by a later reconcile: the same condition.
        let shown = status.conditions.clone();
        rescan_condition(&mut status, Some(&deferred), at(3800));
        assert_eq!(status.conditions, shown);
        let scheduled = DeferredRescan {
            scheduled: true,
            ..deferred
        };
        assert!(
            scheduled
                .message()
                .contains(": the scheduled rescan, due before")
        );
        // Suspending, or an invalid spec, starts no run: the condition goes
        // in the halt's own write.
        for halt in [Halt::Suspended, Halt::InvalidSpec("no target".into())] {
            let halted = halt.status(Some(status.clone()), Some(2), at(3900));
            let types: Vec<_> = conditions(&halted).iter().map(|c| c.0).collect();
            assert!(!types.contains(&"RescanPending"), "{halt:?}: {types:?}");
        }
        // A stalled operator still starts it once it can go on.
        let stalled = Halt::Stalled {
            reason: "RedisUnavailable",
            message: "connection refused".into(),
        };
        let stalled = stalled.status(Some(status.clone()), Some(2), at(3900));
        assert!(
            ConditionType::RescanPending
                .find(&stalled.conditions)
                .is_some()
        );
        rescan_condition(&mut status, None, at(4000));
        assert!(status.conditions.is_empty());
    }
}
