//! The status plan: what a status write is, computed without I/O from the
//! ticket and the status as stored. The writer (`writer.rs`) sends what this
//! computes, and nothing else.
//!
//! For the CRD's fence rules to see this executor's values, every write
//! carries them (token, revision, run, ticket id, phase, observed
//! generation) even when they did not change since this executor last
//! looked, and every write is conditional on the resourceVersion it was
//! computed against: a merge patch computed against an outdated copy would
//! otherwise mix this executor's changes into a newer status.

use super::from_ticket::status_from_ticket;
use super::halt::rescan_condition;
use crate::kubernetes::crd::{AssetScan, AssetScanStatus};
use assetscan_domain::ticket::Ticket;
use assetscan_domain::{Fence, RESCAN_ANNOTATION, run_order};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::Value;
use std::time::Duration;

/// Status fields every write carries, changed or not, so that the CRD's
/// fence rules compare this executor's values with the stored ones.
const FENCE_FIELDS: [&str; 6] = [
    "fencingToken",
    "revision",
    "run",
    "ticketId",
    "phase",
    "observedGeneration",
];

/// `(fencingToken, revision)` of a status, if it carries them.
pub fn fence_of(status: &AssetScanStatus) -> Option<Fence> {
    Fence::from_status(status.fencing_token, status.revision)
}

/// What this executor last knew to be stored.
#[derive(Clone, Default)]
pub struct Stored {
    pub resource_version: Option<String>,
    pub status: Option<AssetScanStatus>,
}

impl Stored {
    /// The status and resourceVersion of `obj` as read or as a write left it.
    pub fn of(obj: &AssetScan) -> Stored {
        Stored {
            resource_version: obj.metadata.resource_version.clone(),
            status: obj.status.clone(),
        }
    }
}

impl From<AssetScan> for Stored {
    fn from(object: AssetScan) -> Stored {
        Stored {
            resource_version: object.metadata.resource_version,
            status: object.status,
        }
    }
}

/// A ticket's status, planned over what is stored.
pub struct Planned {
    pub status: AssetScanStatus,
    /// Whether it moves the phase or the run: worth an Event once written.
    pub news: bool,
}

/// A claim's status write: the status, whether it is news, and the patch
/// conditional on the resourceVersion of the object as read.
pub struct ClaimWrite {
    pub status: AssetScanStatus,
    pub news: bool,
    pub patch: Value,
}

/// Why a claim is not recorded over the status as read before the acquire.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClaimRefusal {
    #[error("token {token} is not above the recorded token {stored}")]
    TokenNotAbove { token: u64, stored: i64 },
    #[error("run {0} has ended")]
    RunEnded(String),
    #[error("the status records a later run, {0}")]
    LaterRun(String),
    /// Without a precondition the write could land on any status.
    #[error("the object as read has no resourceVersion")]
    NoResourceVersion,
}

/// A status behind the one known to be stored: the CRD's rule would refuse
/// it, and sending it again after a refusal is a retry storm.
#[derive(Debug, PartialEq, Eq)]
pub struct Behind {
    pub mine: Fence,
    pub stored: Fence,
}

impl std::fmt::Display for Behind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "status with {} not written: {} is stored",
            self.mine, self.stored
        )
    }
}

/// The next step of writing a status over what is stored.
#[derive(Debug, PartialEq)]
pub enum NextWrite {
    /// It is stored already: nothing to send.
    Stored,
    /// It is behind the stored one: not sent at all.
    Behind(Behind),
    /// This merge patch, conditional on the stored resourceVersion.
    Send(Value),
}

/// What the status of one object is planned from, besides the ticket.
pub struct StatusPlan {
    /// The `metadata.generation` the run acts on.
    generation: Option<i64>,
    /// How long after a run ended its next scan is due (the rescan
    /// interval and the object's share of the spread, see `spread.rs`): a
    /// terminal status carries `nextScanTime`.
    rescan: Option<Duration>,
    /// The rescan request the object carries as read.
    rescan_request: Option<String>,
}

impl StatusPlan {
    pub fn new(obj: &AssetScan, rescan: Option<Duration>) -> StatusPlan {
        StatusPlan {
            generation: obj.metadata.generation,
            rescan,
            rescan_request: obj
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(RESCAN_ANNOTATION))
                .cloned(),
        }
    }

    /// The status mirroring `ticket`, on top of what is stored.
    fn status(&self, ticket: &Ticket, previous: Option<&AssetScanStatus>) -> AssetScanStatus {
        // Conditions change when the ticket did, and the next scan is due an
        // interval (and the object's spread) after the run ended: both from
        // the ticket and the object, not the clock, so mirroring the same
        // ticket again (a later reconcile, another replica) gives the same
        // status and writes nothing.
        let changed_at = ticket_time(ticket);
        let next_scan = self
            .rescan
            .filter(|_| ticket.status.is_terminal())
            .and_then(|every| SignedDuration::try_from(every).ok())
            .and_then(|every| changed_at.checked_add(every).ok());
        status_from_ticket(ticket, previous, self.generation, changed_at, next_scan)
    }

    /// The status mirroring `ticket` over `previous`, and whether it is news.
    pub fn mirror(&self, ticket: &Ticket, previous: Option<&AssetScanStatus>) -> Planned {
        let status = self.status(ticket, previous);
        let news = is_news(previous, &status, ticket);
        Planned { status, news }
    }

    /// The claim of `ticket` over `read`, the object as read before the
    /// acquire, unless it must not be recorded there.
    pub fn claim(&self, ticket: &Ticket, read: &Stored) -> Result<ClaimWrite, ClaimRefusal> {
        let previous = read.status.as_ref();
        if let Some(why) = claim_refusal(previous, ticket) {
            return Err(why);
        }
        let resource_version = read
            .resource_version
            .as_deref()
            .ok_or(ClaimRefusal::NoResourceVersion)?;
        let mut status = self.status(ticket, previous);
        if previous.and_then(|r| r.run.as_deref()) != Some(ticket.run.as_str()) {
            // A new run: it handles the rescan request the object carries
            // as read (a request made later changes the object, and this
            // write, conditional on it, is refused). A rescan the minimum
            // interval held back starts now: its condition goes with the
            // claim, not in a write of its own.
            status.last_handled_rescan = self.rescan_request.clone();
            rescan_condition(&mut status, None, ticket_time(ticket));
        }
        let news = is_news(previous, &status, ticket);
        let patch = status_patch(previous, &status, Some(resource_version));
        Ok(ClaimWrite {
            status,
            news,
            patch,
        })
    }
}

/// The next step of writing `status` over `stored`: nothing when it equals
/// the stored one, nothing either when it is behind it (lower
/// `(fencingToken, revision)`), else the patch.
pub fn next_write(stored: &Stored, status: &AssetScanStatus) -> NextWrite {
    let previous = stored.status.as_ref();
    if previous == Some(status) {
        return NextWrite::Stored;
    }
    if let (Some(stored), Some(mine)) = (previous.and_then(fence_of), fence_of(status))
        && mine < stored
    {
        return NextWrite::Behind(Behind { mine, stored });
    }
    NextWrite::Send(status_patch(
        previous,
        status,
        stored.resource_version.as_deref(),
    ))
}

/// Whether writing `status` over `previous` moves the phase or the run.
fn is_news(previous: Option<&AssetScanStatus>, status: &AssetScanStatus, ticket: &Ticket) -> bool {
    let moved = previous.and_then(|p| p.phase) != status.phase;
    let same_run = previous.and_then(|p| p.run.as_deref()) == Some(ticket.run.as_str());
    moved || !same_run
}

/// Why a claim of `ticket` must not be recorded over `read` (the status as
/// read before the acquire), if it must not.
fn claim_refusal(read: Option<&AssetScanStatus>, ticket: &Ticket) -> Option<ClaimRefusal> {
    let read = read?;
    if let Some(stored) = read.fencing_token
        && u64::try_from(stored).is_ok_and(|stored| stored >= ticket.fencing_token)
    {
        return Some(ClaimRefusal::TokenNotAbove {
            token: ticket.fencing_token,
            stored,
        });
    }
    let recorded = read.run.as_deref()?;
    if recorded == ticket.run && read.phase.is_some_and(|phase| phase.is_terminal()) {
        return Some(ClaimRefusal::RunEnded(recorded.to_owned()));
    }
    match (run_order(recorded), run_order(&ticket.run)) {
        (Some((owner, later)), Some((mine, claimed))) if owner == mine && later > claimed => {
            Some(ClaimRefusal::LaterRun(recorded.to_owned()))
        }
        _ => None,
    }
}

/// When the ticket was last written (its `updated_at`), or now if that is
/// not a usable time.
fn ticket_time(ticket: &Ticket) -> Timestamp {
    i64::try_from(ticket.updated_at)
        .ok()
        .and_then(|ms| Timestamp::from_millisecond(ms).ok())
        .unwrap_or_else(Timestamp::now)
}

/// The merge patch writing `status` over `previous`: what changed, the fence
/// fields always, and `previous`'s resourceVersion as precondition.
fn status_patch(
    previous: Option<&AssetScanStatus>,
    status: &AssetScanStatus,
    resource_version: Option<&str>,
) -> Value {
    let new = serde_json::to_value(status).unwrap_or(Value::Null);
    let mut body = merge_patch(&serde_json::to_value(previous).unwrap_or(Value::Null), &new);
    if let (Value::Object(body), Value::Object(new)) = (&mut body, &new) {
        for field in FENCE_FIELDS {
            if let Some(value) = new.get(field) {
                body.insert(field.to_owned(), value.clone());
            }
        }
    }
    match resource_version {
        Some(rv) => serde_json::json!({"metadata": {"resourceVersion": rv}, "status": body}),
        None => serde_json::json!({"status": body}),
    }
}

/// The JSON merge patch (RFC 7386) that turns `from` into `to`: changed and
/// new members as in `to`, removed members as `null`, objects recursively.
pub fn merge_patch(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = serde_json::Map::new();
            for (key, value) in new {
                match old.get(key) {
                    Some(prev) if prev == value => {}
                    Some(prev) => {
                        patch.insert(key.clone(), merge_patch(prev, value));
                    }
                    None => {
                        patch.insert(key.clone(), value.clone());
                    }
                }
            }
            for key in old.keys().filter(|k| !new.contains_key(*k)) {
                patch.insert(key.clone(), Value::Null);
            }
            Value::Object(patch)
        }
        _ => to.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubernetes::controller::fleet::spread::rescan_after;
    use crate::kubernetes::crd::AssetScanSpec;
    use assetscan_domain::ticket::Status;
    use serde_json::json;
    use std::collections::{BTreeMap, BTreeSet};

    fn claimed(run: &str, token: u64) -> Ticket {
        Ticket {
            fencing_token: token,
            revision: 1,
            ..Ticket::new("web-01", run, 0)
        }
    }

    fn recorded(run: &str, token: i64, phase: Status) -> AssetScanStatus {
        AssetScanStatus {
            run: Some(run.into()),
            fencing_token: Some(token),
            revision: Some(3),
            phase: Some(phase),
            ..Default::default()
        }
    }

    /// An object at generation 2, read at resourceVersion 42, with a rescan
    /// request.
    fn object() -> AssetScan {
        let spec: AssetScanSpec =
            serde_json::from_value(json!({"assetId": "web-01", "target": {}})).expect("spec");
        let mut obj = AssetScan::new("web-01", spec);
        obj.metadata.generation = Some(2);
        obj.metadata.resource_version = Some("42".into());
        obj.metadata.annotations = Some(BTreeMap::from([(
            RESCAN_ANNOTATION.to_owned(),
            "t1".to_owned(),
        )]));
        obj
    }

    #[test]
    fn a_claim_is_recorded_only_above_the_read_token_and_never_behind_the_run() {
        let run = "1234abcd-g2-s0";
        // Nothing recorded yet, or an earlier run or token: recorded.
        assert_eq!(claim_refusal(None, &claimed(run, 1)), None);
        let earlier = recorded("1234abcd-g1-s4", 5, Status::Finished);
        assert_eq!(claim_refusal(Some(&earlier), &claimed(run, 6)), None);
        let same_open = recorded(run, 5, Status::VulnCheckDone);
        assert_eq!(claim_refusal(Some(&same_open), &claimed(run, 6)), None);
        // A token the status already holds (or a lower one): refused.
        assert!(claim_refusal(Some(&same_open), &claimed(run, 5)).is_some());
        assert!(claim_refusal(Some(&same_open), &claimed(run, 2)).is_some());
        // This run's recorded end is never re-opened, whatever the token.
        let ended = recorded(run, 5, Status::Finished);
        assert!(claim_refusal(Some(&ended), &claimed(run, 9)).is_some());
        // A later run (generation, then scan) of the same owner: refused.
        let later = recorded("1234abcd-g3-s0", 5, Status::Init);
        assert!(claim_refusal(Some(&later), &claimed(run, 9)).is_some());
        let next_scan = recorded("1234abcd-g2-s1", 5, Status::Init);
        assert!(claim_refusal(Some(&next_scan), &claimed(run, 9)).is_some());
        // Another owner's run (a recreated object) does not order ours.
        let other = recorded("ffff0000-g9-s9", 5, Status::Finished);
        assert_eq!(claim_refusal(Some(&other), &claimed(run, 6)), None);
    }

    #[test]
    fn a_claim_of_a_new_run_handles_the_rescan_request_as_read() {
        let plan = StatusPlan::new(&object(), None);
        let run = "1234abcd-g2-s1";
        let read = Stored {
            resource_version: Some("42".into()),
            status: Some(recorded("1234abcd-g2-s0", 5, Status::Finished)),
        };
        let claim = plan.claim(&claimed(run, 6), &read).expect("recorded");
        assert!(claim.news, "a new run");
        assert_eq!(claim.status.last_handled_rescan.as_deref(), Some("t1"));
        assert_eq!(claim.status.observed_generation, Some(2));
        assert_eq!(claim.patch["metadata"], json!({"resourceVersion": "42"}));
        assert_eq!(claim.patch["status"]["lastHandledRescan"], "t1");

        // The same run claimed again (a takeover): the request stays as it
        // was handled.
        let open = Stored {
            status: Some(recorded(run, 6, Status::VulnCheckDone)),
            ..read.clone()
        };
        let again = plan.claim(&claimed(run, 7), &open).expect("recorded");
        assert_eq!(again.status.last_handled_rescan, None);
        assert!(again.news, "the phase moves back to INIT");

        let unversioned = Stored {
            resource_version: None,
            ..read
        };
        assert_eq!(
            plan.claim(&claimed(run, 6), &unversioned).err(),
            Some(ClaimRefusal::NoResourceVersion)
        );
    }

    #[test]
    fn the_claim_of_the_run_a_deferred_rescan_waited_for_ends_its_condition() {
        use super::super::conditions::ConditionType::RescanPending;
        use super::super::halt::DeferredRescan;
        let plan = StatusPlan::new(&object(), None);
        let mut waiting = recorded("1234abcd-g2-s0", 5, Status::Finished);
        let deferred = DeferredRescan {
            starts_at: Timestamp::from_second(3700).expect("time"),
            ended: Timestamp::from_second(100).expect("time"),
            scheduled: false,
        };
        rescan_condition(&mut waiting, Some(&deferred), Timestamp::UNIX_EPOCH);
        let read = Stored {
            resource_version: Some("42".into()),
            status: Some(waiting.clone()),
        };
        // In the claim's own write: no write of its own.
        let claim = plan.claim(&claimed("1234abcd-g2-s1", 6), &read);
        let claim = claim.expect("recorded");
        assert!(RescanPending.find(&claim.status.conditions).is_none());
        let written = &claim.patch["status"]["conditions"];
        assert!(!written.to_string().contains("RescanPending"), "{written}");
        // The same run claimed again is no new run: it says nothing of it.
        waiting.run = Some("1234abcd-g2-s1".into());
        waiting.phase = Some(Status::VulnCheckDone);
        let open = Stored {
            status: Some(waiting),
            ..read
        };
        let again = plan.claim(&claimed("1234abcd-g2-s1", 7), &open);
        let again = again.expect("recorded");
        assert!(RescanPending.find(&again.status.conditions).is_some());
    }

    #[test]
    fn a_write_is_sent_only_when_it_changes_the_status_and_is_not_behind() {
        let stored = Stored {
            resource_version: Some("7".into()),
            status: Some(recorded("r", 5, Status::Init)),
        };
        let same = recorded("r", 5, Status::Init);
        assert_eq!(next_write(&stored, &same), NextWrite::Stored);
        let behind = AssetScanStatus {
            revision: Some(2),
            ..recorded("r", 5, Status::AssetOffline)
        };
        let refused = NextWrite::Behind(Behind {
            mine: Fence::new(5, 2),
            stored: Fence::new(5, 3),
        });
        assert_eq!(next_write(&stored, &behind), refused);
        let ahead = AssetScanStatus {
            revision: Some(4),
            ..recorded("r", 5, Status::AssetOnline)
        };
        let NextWrite::Send(patch) = next_write(&stored, &ahead) else {
            panic!("a newer status is sent");
        };
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(patch["status"]["phase"], "ASSET_ONLINE");
    }

    #[test]
    fn mirroring_the_same_ticket_is_no_news_and_its_end_carries_the_next_scan() {
        let plan = StatusPlan::new(&object(), Some(Duration::from_secs(60)));
        let mut ticket = claimed("1234abcd-g2-s0", 5);
        ticket.status = Status::Finished;
        ticket.updated_at = 1_767_225_600_000;
        let first = plan.mirror(&ticket, None);
        assert!(first.news);
        let next = first.status.next_scan_time.as_ref().expect("next scan");
        assert_eq!(next.0.as_second(), 1_767_225_660);
        let again = plan.mirror(&ticket, Some(&first.status));
        assert!(!again.news);
        assert_eq!(again.status, first.status);
    }

    /// Objects whose runs ended at the same moment are due again at
    /// different times (each its own share of the spread), and mirroring
    /// the same ticket again gives each the same status: nothing to write.
    #[test]
    fn runs_that_ended_together_are_due_again_apart_and_mirror_the_same_each_time() {
        let mut ticket = claimed("1234abcd-g2-s0", 5);
        ticket.status = Status::Finished;
        ticket.updated_at = 1_767_225_600_000;
        let ended = 1_767_225_600;
        let nexts: BTreeSet<i64> = (0..20)
            .map(|n| {
                let mut obj = object();
                obj.metadata.uid = Some(format!("5d1e6f70-{n:04}-4c2b-9a8e-0f1e2d3c4b5a"));
                obj.spec.rescan_interval = Some("1h".into());
                let plan = StatusPlan::new(&obj, rescan_after(&obj, 0.1));
                let first = plan.mirror(&ticket, None);
                let again = plan.mirror(&ticket, Some(&first.status));
                assert!(!again.news);
                assert_eq!(again.status, first.status);
                let stored = Stored {
                    resource_version: Some("43".into()),
                    status: Some(first.status.clone()),
                };
                assert_eq!(next_write(&stored, &again.status), NextWrite::Stored);
                let next = first.status.next_scan_time.expect("next scan").0;
                assert!((ended + 3600..ended + 3960).contains(&next.as_second()));
                next.as_second()
            })
            .collect();
        assert!(
            nexts.len() >= 15,
            "{} distinct of 20: {nexts:?}",
            nexts.len()
        );
    }

    #[test]
    fn a_status_patch_carries_the_fence_and_its_precondition() {
        let old = AssetScanStatus {
            fencing_token: Some(5),
            revision: Some(3),
            run: Some("r".into()),
            high_risk: Some(false),
            ..Default::default()
        };
        let new = AssetScanStatus {
            high_risk: Some(true),
            ..old.clone()
        };
        let patch = status_patch(Some(&old), &new, Some("42"));
        assert_eq!(
            patch,
            json!({
                "metadata": {"resourceVersion": "42"},
                "status": {"highRisk": true, "fencingToken": 5, "revision": 3, "run": "r"}
            })
        );
    }

    #[test]
    fn merge_patch_removes_what_is_gone_at_every_depth() {
        let from =
            json!({"a": 1, "n": {"state": "sent", "sentAt": "t"}, "gone": [1], "same": true});
        let to = json!({"a": 2, "n": {"state": "sending"}, "same": true, "new": "x"});
        assert_eq!(
            merge_patch(&from, &to),
            json!({"a": 2, "n": {"state": "sending", "sentAt": null}, "gone": null, "new": "x"})
        );
        assert_eq!(merge_patch(&json!(null), &to), to);
    }
}
