//! The fence: the zombie-write defence, in one place.
//!
//! A lock says who may run now; it never proves that an executor that lost
//! it (a pause, a stall, a partition) will not write later. Only a fencing
//! token does. How a stale executor is stopped, top to bottom:
//!
//! 1. **Claim.** `acquire.lua` (called by the store's `acquire`) takes the
//!    asset's lock and, in the same atomic step, draws a new token from the
//!    asset's counter, strictly above every earlier one and above the
//!    caller's [`floor`], and claims the run's ticket with it. From then on
//!    every older token is stale.
//! 2. **Record the claim.** Before any provider call, the claim is written
//!    to the AssetScan's status, conditional on the object being unchanged
//!    since the read that gave the floor (the status writer's claim). Only a
//!    recorded claim acts: after Redis lost its data and hands a number out
//!    again, two executors still never act under one token. The pipeline
//!    cannot start a run without this step: `Observer::record_claim` has no
//!    default, and a claim it refuses releases the lock before any call.
//!    (Callers of no AssetScan, the standalone scan and the bench, say that
//!    they keep no record, and run under steps 1 and 3 alone.)
//! 3. **Every ticket write is fenced in Redis.** `advance.lua` accepts a
//!    write only if the caller's token equals the ticket's and the
//!    transition is in the state machine's table (`ticket::Status::allows`);
//!    a stale write is refused atomically and audited, and its executor
//!    stops at once.
//! 4. **Every status write is fenced by the API server.** The CRD carries
//!    [`STATUS_RULES`]: `(fencingToken, revision)` ([`Fence`]) and
//!    `observedGeneration` may never go backwards. A stale executor that
//!    slipped one Redis write in before a takeover still cannot overwrite
//!    the newer status; the writer knows such a refusal by its structured
//!    cause ([`is_fence_cause`]) and stops, without retrying.
//! 5. **Tokens never go backwards from the cluster's point of view.** The
//!    token the status last recorded is the [`floor`] of the next claim, so
//!    a counter lost with Redis's data restarts above it.
//! 6. **Deletion.** `retire.lua` leaves a tombstone for the object's runs,
//!    fails every run in progress under a fresh token and removes their
//!    tickets; a late claim for that owner is refused.
//! 7. **Whose asset.** The lock, fence, tickets, audit and tombstones are
//!    those of `(namespace, assetId)`. While the bridge to the previous
//!    release's layout is on, the claim also takes that release's lock
//!    (keyed by `assetId` alone), draws above both fences and moves both,
//!    and every write goes to both copies of the ticket and is refused
//!    unless both hold the caller's token: an executor of either release
//!    that lost the run is stale in both layouts.
//!
//! A token lives in three representations: `u64` in the ticket and the
//! pipeline, a JSON integer in the scripts' argument objects (Redis's Lua
//! numbers are doubles, exact up to 2^53, far beyond any counter), and
//! `i64` in the status (the OpenAPI `integer`). [`Fence`] is the one place
//! that converts between them.

use serde::Serialize;
use std::fmt;

/// `(fencingToken, revision)`: who owns a run, and how far its owner got.
/// Ordered lexicographically, as the CRD's rule and the scripts compare.
/// Its JSON, `{"token": t, "revision": r}`, is how `acquire.lua` is told
/// which copy of a ticket the caller holds (`known`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Fence {
    pub token: u64,
    pub revision: u64,
}

impl Fence {
    pub fn new(token: u64, revision: u64) -> Fence {
        Fence { token, revision }
    }

    /// The fence a status records, if it records both halves as valid
    /// (non-negative) numbers.
    pub fn from_status(token: Option<i64>, revision: Option<i64>) -> Option<Fence> {
        Some(Fence {
            token: u64::try_from(token?).ok()?,
            revision: u64::try_from(revision?).ok()?,
        })
    }

    /// `(fencingToken, revision)` as the status stores them. A counter
    /// cannot reach `i64::MAX` (it counts claims); saturating keeps the
    /// order should one ever be corrupted that far.
    pub fn status_fields(self) -> (i64, i64) {
        (saturate(self.token), saturate(self.revision))
    }
}

impl fmt::Display for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "token {}, revision {}", self.token, self.revision)
    }
}

fn saturate(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The floor of the next claim: the token the status last recorded, or 0.
/// After Redis lost its data this keeps tokens from going backwards from
/// the cluster's point of view.
pub fn floor(recorded_token: Option<i64>) -> u64 {
    recorded_token
        .and_then(|t| u64::try_from(t).ok())
        .unwrap_or(0)
}

/// One CEL rule of the status fence, as the CRD states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusRule {
    /// The CEL expression, evaluated at `.status`.
    pub rule: &'static str,
    /// What the API server says when it refuses a write.
    pub message: &'static str,
    /// The field the refusal names, relative to `.status` (`fieldPath`);
    /// the API server reports it as `status<field_path>`.
    pub field_path: Option<&'static str>,
    /// The refusal's machine-readable reason; `None` leaves the API
    /// server's default, `FieldValueInvalid`.
    pub forbidden: bool,
}

/// `fencingToken` and `revision` are set together or not at all.
pub const FENCE_PAIR_RULE: StatusRule = StatusRule {
    rule: "has(self.fencingToken) == has(self.revision)",
    message: "status.fencingToken and status.revision must be set together",
    field_path: None,
    forbidden: false,
};

/// Lexicographic `(fencingToken, revision)` may not decrease. A transition
/// rule: the API server evaluates it only on update, and only once a status
/// exists, so the first status write always passes.
pub const TOKEN_RULE: StatusRule = StatusRule {
    rule: "!has(oldSelf.fencingToken) || (has(self.fencingToken) && (self.fencingToken > oldSelf.fencingToken || (self.fencingToken == oldSelf.fencingToken && self.revision >= oldSelf.revision)))",
    message: "status.fencingToken/revision may not go backwards (a stale executor tried to overwrite newer state)",
    field_path: Some(".fencingToken"),
    forbidden: true,
};

/// `observedGeneration` may not decrease either: an executor that read an
/// older spec (a stale cache, a stall) draws a fresh, higher token like any
/// other, so the token alone cannot tell that its run is about an outdated
/// generation. A transition rule, like the token's.
pub const GENERATION_RULE: StatusRule = StatusRule {
    rule: "!has(oldSelf.observedGeneration) || (has(self.observedGeneration) && self.observedGeneration >= oldSelf.observedGeneration)",
    message: "status.observedGeneration may not go backwards (a stale executor tried to overwrite newer state)",
    field_path: Some(".observedGeneration"),
    forbidden: true,
};

/// The rules on the status, in the order the CRD lists them.
pub const STATUS_RULES: [StatusRule; 3] = [FENCE_PAIR_RULE, TOKEN_RULE, GENERATION_RULE];

/// The rules whose refusal means "a newer executor's status is stored".
const FENCING_RULES: [StatusRule; 2] = [TOKEN_RULE, GENERATION_RULE];

/// One cause of an API server's `Invalid` (422) answer, as its
/// `details.causes[]` carry it.
#[derive(Clone, Copy, Debug)]
pub struct Cause<'a> {
    pub reason: &'a str,
    pub field: &'a str,
    pub message: &'a str,
}

/// Whether a cause of a refused status write is the fence (a newer
/// executor's status is stored), as opposed to any other invalid status.
///
/// By structure: the fencing rules report `FieldValueForbidden` at their
/// own field (`status.fencingToken`, `status.observedGeneration`). A CRD
/// installed by an earlier version of the operator (Helm never upgrades a
/// chart's CRDs) has the same rules without `reason` and `fieldPath`: the
/// API server then reports `FieldValueInvalid` at `status`, and only the
/// rule's own message, which it quotes, tells which rule refused.
pub fn is_fence_cause(cause: Cause<'_>) -> bool {
    FENCING_RULES.iter().any(|rule| {
        let field = rule.field_path.unwrap_or_default();
        let by_field = cause.reason == "FieldValueForbidden"
            && cause.field.strip_prefix("status") == Some(field);
        let by_rule = cause.field == "status" && cause.message.contains(rule.message);
        by_field || by_rule
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_order_by_token_then_revision_and_convert_both_ways() {
        assert!(Fence::new(2, 0) > Fence::new(1, 9));
        assert!(Fence::new(2, 3) > Fence::new(2, 2));
        let fence = Fence::new(7, 3);
        let (token, revision) = fence.status_fields();
        assert_eq!(Fence::from_status(Some(token), Some(revision)), Some(fence));
        assert_eq!(Fence::from_status(Some(7), None), None);
        assert_eq!(Fence::from_status(Some(-1), Some(0)), None);
        assert_eq!(Fence::new(u64::MAX, 1).status_fields(), (i64::MAX, 1));
        assert_eq!(
            serde_json::to_string(&fence).unwrap(),
            r#"{"token":7,"revision":3}"#
        );
    }

    #[test]
    fn the_floor_is_the_recorded_token_or_zero() {
        assert_eq!(floor(Some(41)), 41);
        assert_eq!(floor(None), 0);
        assert_eq!(floor(Some(-5)), 0);
    }

    #[test]
    fn a_fence_refusal_is_known_by_its_cause_not_by_any_invalid_status() {
        let cause = |reason, field, message| Cause {
            reason,
            field,
            message,
        };
        let forbidden = "FieldValueForbidden";
        assert!(is_fence_cause(cause(forbidden, "status.fencingToken", "")));
        assert!(is_fence_cause(cause(
            forbidden,
            "status.observedGeneration",
            "x"
        )));
        // The CRD of an earlier version: the rule's message at `status`.
        let quoted = format!("Invalid value: \"object\": {}", TOKEN_RULE.message);
        assert!(is_fence_cause(cause(
            "FieldValueInvalid",
            "status",
            &quoted
        )));
        // Anything else is an invalid status, not the fence.
        assert!(!is_fence_cause(cause(forbidden, "status.revision", "")));
        assert!(!is_fence_cause(cause(
            "FieldValueInvalid",
            "status.fencingToken",
            ""
        )));
        let pair = FENCE_PAIR_RULE.message;
        assert!(!is_fence_cause(cause("FieldValueInvalid", "status", pair)));
        let elsewhere = cause("FieldValueInvalid", "status.lastError", TOKEN_RULE.message);
        assert!(!is_fence_cause(elsewhere));
    }
}
