//! The replicas: none exits unless the run ends it, none panics.

use super::{Invariant, Violation};
use crate::history::{Ended, ProcessRecord};

pub(super) fn check(processes: &[ProcessRecord], out: &mut Vec<Violation>) {
    for p in processes {
        let subject = format!("replica {} (pid {})", p.instance, p.pid);
        let ended = match &p.ended {
            Ended::ByItself(how) => Some(format!("exited by itself: {how}")),
            Ended::Hung => Some("did not stop after SIGTERM".to_owned()),
            Ended::Terminated(code) if *code != Some(0) => {
                Some(format!("no clean exit after SIGTERM: exit code {code:?}"))
            }
            Ended::Killed | Ended::Terminated(_) => None,
        };
        if let Some(detail) = ended {
            out.push(Violation {
                invariant: Invariant::Processes,
                subject: subject.clone(),
                detail,
            });
        }
        for line in &p.panics {
            out.push(Violation {
                invariant: Invariant::Processes,
                subject: subject.clone(),
                detail: format!("panicked: {line}"),
            });
        }
    }
}
