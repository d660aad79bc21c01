//! How big a run is: the two sizes, `make chaos` and the run inside
//! `make test`.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How big a run is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scale {
    /// `full` or `bounded`.
    pub name: String,
    pub objects: usize,
    pub replicas: usize,
    /// The operator's lock ttl; pauses last 0.5–2.5 times this.
    pub lock_ttl: Duration,
    /// Objects are created, and faults happen, within this window.
    pub window: Duration,
    pub pauses: usize,
    /// SIGKILLs; each replica killed is restarted 1–4 s later.
    pub kills: usize,
    pub edits: usize,
    pub deletions: usize,
    /// Injected API errors and ended or cut watches.
    pub api_faults: usize,
    /// Bounds of the API server outage, in seconds.
    pub outage_secs: (f64, f64),
    /// How long the operators get to converge once the faults stop.
    pub settle: Duration,
}

impl Scale {
    /// `make chaos`: a few hundred objects and every fault many times.
    pub fn full() -> Scale {
        Scale {
            name: "full".into(),
            objects: 240,
            replicas: 3,
            lock_ttl: Duration::from_secs(2),
            window: Duration::from_secs(240),
            pauses: 40,
            kills: 6,
            edits: 24,
            deletions: 20,
            api_faults: 40,
            outage_secs: (5.0, 20.0),
            settle: Duration::from_secs(300),
        }
    }

    /// The run inside `make test`: every kind of fault, fewer of each.
    pub fn bounded() -> Scale {
        Scale {
            name: "bounded".into(),
            objects: 30,
            replicas: 3,
            lock_ttl: Duration::from_secs(2),
            window: Duration::from_secs(45),
            pauses: 6,
            kills: 2,
            edits: 4,
            deletions: 3,
            api_faults: 6,
            outage_secs: (5.0, 7.0),
            settle: Duration::from_secs(40),
        }
    }
}
