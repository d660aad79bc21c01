//! The state machine across releases: the scripts of two releases run side
//! by side during a rolling upgrade, each with its own table (docs/design/state-machine.md,
//! "The state machine across releases"). The declaration of the oldest
//! release still supported is kept here as it shipped; this release may
//! only add to it, and may write only what that release knows.

use assetscan_domain::ticket::{Status, Ticket};
use assetscan_domain::{Next, VERDICT, plan};
use std::collections::BTreeSet;

/// The statuses and moves of the releases still supported (0.1.0 and
/// 0.2.0 declare the same; an upgrade from either is tested, so the
/// oldest one's table is the one kept). The scripts of both releases run
/// side by side during a rolling upgrade, each with its own table: a
/// ticket either writes must stay one the other may advance. Updated when
/// a release is cut or its support ends, never to let a change pass.
const RELEASED: &[(&str, &[&str])] = &[
    ("INIT", &["ASSET_ONLINE", "ASSET_OFFLINE"]),
    ("ASSET_ONLINE", &["VULN_CHECK_DONE"]),
    ("ASSET_OFFLINE", &["FINISHED"]),
    ("VULN_CHECK_DONE", &["HIGH_RISK_FOUND", "FINISHED"]),
    ("HIGH_RISK_FOUND", &["NOTIFYING"]),
    ("NOTIFYING", &["NOTIFIED"]),
    ("NOTIFIED", &["FINISHED"]),
    ("FINISHED", &[]),
    ("FAILED", &[]),
];

/// The latest release's alerting statuses, those that end a run, and
/// its steps.
const RELEASED_ALERTING: &[&str] = &["HIGH_RISK_FOUND", "NOTIFYING", "NOTIFIED"];
const RELEASED_ENDS: &[&str] = &["FINISHED", "FAILED"];
const RELEASED_STEPS: &[&str] = &["online_check", "vuln_query", "threat_intel", "notify"];

fn released(name: &str) -> Status {
    Status::parse(name).unwrap_or_else(|| panic!("{name} was removed"))
}

#[test]
fn the_machine_only_grows_from_the_latest_release() {
    for (from, moves) in RELEASED {
        let from = released(from);
        for to in *moves {
            assert!(from.allows(released(to)), "{from} -> {to} was removed");
        }
        let name = from.as_str();
        assert_eq!(
            from.is_alerting(),
            RELEASED_ALERTING.contains(&name),
            "{from} changed whether it alerts"
        );
        assert_eq!(
            from.is_terminal(),
            RELEASED_ENDS.contains(&name),
            "{from} changed whether it ends a run"
        );
    }
}

/// A status or a step is declared in one release and written from the
/// next: a replica of the release before must be able to read, claim
/// and judge (does it alert?) every ticket a replica of this one writes,
/// while both run during a rolling upgrade. So every status this
/// release's plan, steps and verdict write, and every step it plans
/// (written in `completed_steps`, `attempts`), is one the latest release
/// declares.
#[test]
fn everything_written_is_known_to_the_latest_release() {
    let known = |s: Status| RELEASED.iter().any(|(name, _)| *name == s.as_str());
    let mut written: BTreeSet<Status> = VERDICT.iter().copied().collect();
    let mut planned = BTreeSet::new();
    for at in Status::ALL {
        let mut ticket = Ticket::new("a", "r", 0);
        ticket.status = at;
        for intel in [false, true] {
            match plan(&ticket, intel) {
                Next::Move(to) => _ = written.insert(to),
                Next::Call(step) => _ = planned.insert(step),
                Next::Decide | Next::Done => {}
            }
        }
    }
    written.extend(planned.iter().flat_map(|s| s.declared().leads_to));
    let rule = "declare it in one release and write it from the next (docs/design/state-machine.md, \
                \"The state machine across releases\")";
    for status in written {
        assert!(
            known(status),
            "{status} is written, but the latest release does not know it: {rule}"
        );
    }
    for step in planned {
        assert!(
            RELEASED_STEPS.contains(&step.as_str()),
            "{step} is planned, but the latest release does not know it: {rule}"
        );
    }
}
