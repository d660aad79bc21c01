//! The operator replicas: real `run` processes against the proxy in front
//! of the emulator and the real redis-server. The run stops (SIGSTOP),
//! resumes, kills and restarts them; a replica may also stop itself at its
//! fault drill. Whatever becomes of each process is recorded.

use crate::ChaosError;
use crate::history::{Ended, ProcessRecord};
use crate::objects::NAMESPACE;
use crate::plan::Plan;
use assetscan_testkit::process::{OperatorCommand, is_stopped};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

/// `chaos-operator` in the directory of the running program: cargo builds
/// it beside the chaos run and the upgrade test.
pub fn sibling_operator() -> Option<PathBuf> {
    Some(
        std::env::current_exe()
            .ok()?
            .parent()?
            .join("chaos-operator"),
    )
}

/// How replicas are started.
#[derive(Clone, Debug)]
pub struct Launch {
    pub binary: PathBuf,
    pub config: PathBuf,
    pub kubeconfig: PathBuf,
    pub redis_url: String,
    /// Where the logs go.
    pub dir: PathBuf,
}

/// A fault drill as armed in a process: stop before `write` for `asset`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArmedDrill {
    pub asset: String,
    pub write: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Running,
    /// Stopped by the run until `until`; `isolating` while a drill's
    /// replica is left alone with its target.
    Paused {
        until: Instant,
        isolating: bool,
    },
    /// Stopped itself at its drill; `token` is its claim on the drilled
    /// asset, when the audit shows it.
    Drilled {
        since: Instant,
        token: Option<u64>,
    },
}

pub struct Replica {
    pub instance: String,
    pub drill: Option<ArmedDrill>,
    pub state: State,
    child: Child,
    log: PathBuf,
}

impl Replica {
    fn spawn(
        launch: &Launch,
        instance: &str,
        drill: Option<ArmedDrill>,
        all_namespaces: bool,
    ) -> Result<Replica, ChaosError> {
        let log = launch
            .dir
            .join(format!("{instance}.{}.log", crate::now_ms()));
        let command = OperatorCommand::new(
            &launch.binary,
            &launch.config,
            &launch.redis_url,
            &launch.kubeconfig,
            instance,
            NAMESPACE,
        );
        let command = if all_namespaces {
            command.all_namespaces()
        } else {
            command
        };
        let mut command = command.command(&log).map_err(|source| ChaosError::Io {
            context: format!("create {}", log.display()),
            source,
        })?;
        command.args(["--concurrency", "8"]);
        if let Some(drill) = &drill {
            command.env(
                "FAILPOINTS",
                format!("stop-before-write=return({}:{})", drill.asset, drill.write),
            );
        }
        let child = command.spawn().map_err(|source| ChaosError::Io {
            context: format!("start {}", launch.binary.display()),
            source,
        })?;
        Ok(Replica {
            instance: instance.to_owned(),
            drill,
            state: State::Running,
            child,
            log,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn signal(&self, signal: Signal) {
        // The process may be gone already; that is what `exited` reports.
        let _ = kill(Pid::from_raw(self.child.id() as i32), signal);
    }

    /// Whether the process is stopped (state `T` in `/proc/<pid>/stat`).
    pub fn is_stopped(&self) -> bool {
        is_stopped(self.child.id())
    }

    pub fn resume(&mut self) {
        self.signal(Signal::SIGCONT);
        self.state = State::Running;
    }

    /// Waits up to `grace` for the exit of a process sent SIGTERM; then
    /// SIGKILL.
    fn terminate(&mut self, grace: Duration) -> Ended {
        self.resume();
        self.signal(Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        loop {
            match self.child.try_wait() {
                Ok(Some(exit)) => return Ended::Terminated(exit.code()),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                _ => {
                    self.signal(Signal::SIGKILL);
                    let _ = self.child.wait();
                    return Ended::Hung;
                }
            }
        }
    }

    fn record(&self, ended: Ended) -> ProcessRecord {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        ProcessRecord {
            instance: self.instance.clone(),
            pid: self.child.id(),
            ended,
            panics: log
                .lines()
                .filter(|line| line.contains("panicked at"))
                .map(|line| line.chars().take(500).collect())
                .collect(),
        }
    }
}

/// What the replica set noticed.
#[derive(Debug, PartialEq, Eq)]
pub enum Noticed {
    /// A replica exited while nobody asked it to (it was restarted).
    Exited { slot: usize, how: String },
    /// A replica stopped itself at its drill.
    Drilled { slot: usize },
}

/// Counts of what was done to the replicas.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub pauses: usize,
    pub drill_stops: usize,
    pub kills: usize,
    pub restarts_same_instance: usize,
    pub restarts_new_instance: usize,
}

pub struct ReplicaSet {
    launch: Launch,
    slots: Vec<Option<Replica>>,
    /// Instance names used per slot so far.
    incarnations: Vec<usize>,
    /// Whether the slot's first process was started.
    started: Vec<bool>,
    records: Vec<ProcessRecord>,
    pub tally: Tally,
    /// Whether the replicas watch every namespace rather than
    /// [`NAMESPACE`].
    all_namespaces: bool,
}

impl ReplicaSet {
    pub fn new(launch: Launch, replicas: usize) -> ReplicaSet {
        ReplicaSet {
            launch,
            slots: (0..replicas).map(|_| None).collect(),
            incarnations: vec![0; replicas],
            started: vec![false; replicas],
            records: Vec::new(),
            tally: Tally::default(),
            all_namespaces: false,
        }
    }

    /// Replicas that watch every namespace, as a cluster-wide install
    /// runs them (the upgrade test spreads its AssetScans over two).
    pub fn all_namespaces(mut self) -> ReplicaSet {
        self.all_namespaces = true;
        self
    }

    pub fn get(&self, slot: usize) -> Option<&Replica> {
        self.slots.get(slot)?.as_ref()
    }

    pub fn get_mut(&mut self, slot: usize) -> Option<&mut Replica> {
        self.slots.get_mut(slot)?.as_mut()
    }

    /// Starts the slot's process (its first, or a restart with the same
    /// instance name or a new one).
    pub fn start(
        &mut self,
        slot: usize,
        new_instance: bool,
        drill: Option<ArmedDrill>,
    ) -> Result<&Replica, ChaosError> {
        let restart = std::mem::replace(&mut self.started[slot], true);
        if new_instance {
            self.incarnations[slot] += 1;
        }
        if restart {
            if new_instance {
                self.tally.restarts_new_instance += 1;
            } else {
                self.tally.restarts_same_instance += 1;
            }
        }
        let instance = Plan::instance_name(slot, self.incarnations[slot]);
        let replica = Replica::spawn(&self.launch, &instance, drill, self.all_namespaces)?;
        Ok(self.slots[slot].insert(replica))
    }

    /// How the replicas started from now on are launched (a rollout to
    /// another binary or config); those running are left as they are.
    pub fn relaunch(&mut self, launch: Launch) {
        self.launch = launch;
    }

    /// SIGTERM, as a rollout ends a pod, and waits up to `grace` for the
    /// exit (SIGKILL then: recorded as hung). Returns its instance name.
    pub fn stop(&mut self, slot: usize, grace: Duration) -> Option<String> {
        let mut replica = self.slots.get_mut(slot)?.take()?;
        let ended = replica.terminate(grace);
        self.records.push(replica.record(ended));
        Some(replica.instance)
    }

    /// SIGSTOP until `until`, if the replica runs (not stopped already).
    pub fn pause(&mut self, slot: usize, until: Instant, isolating: bool) -> bool {
        let Some(replica) = self.get_mut(slot) else {
            return false;
        };
        if replica.state != State::Running {
            return false;
        }
        replica.signal(Signal::SIGSTOP);
        replica.state = State::Paused { until, isolating };
        self.tally.pauses += 1;
        true
    }

    /// SIGKILL, stopped or not.
    pub fn kill(&mut self, slot: usize) -> Option<String> {
        let mut replica = self.slots.get_mut(slot)?.take()?;
        replica.signal(Signal::SIGKILL);
        let _ = replica.child.wait();
        self.tally.kills += 1;
        self.records.push(replica.record(Ended::Killed));
        Some(replica.instance)
    }

    /// Resumes the replicas whose pause is over (or, with `isolation_over`,
    /// that were paused to isolate a drill). Returns their instance names.
    pub fn resume_due(&mut self, now: Instant, isolation_over: bool) -> Vec<String> {
        let mut resumed = Vec::new();
        for replica in self.slots.iter_mut().flatten() {
            if let State::Paused { until, isolating } = replica.state
                && (until <= now || (isolating && isolation_over))
            {
                replica.resume();
                resumed.push(replica.instance.clone());
            }
        }
        resumed
    }

    /// Resumes every replica the run paused. Returns their instance names.
    pub fn resume_paused(&mut self) -> Vec<String> {
        let mut resumed = Vec::new();
        for replica in self.slots.iter_mut().flatten() {
            if let State::Paused { .. } = replica.state {
                replica.resume();
                resumed.push(replica.instance.clone());
            }
        }
        resumed
    }

    /// Notices exits nobody asked for (and restarts those replicas, same
    /// instance, drill and all) and replicas that stopped themselves.
    pub fn supervise(&mut self) -> Result<Vec<Noticed>, ChaosError> {
        let mut noticed = Vec::new();
        for slot in 0..self.slots.len() {
            let Some(replica) = self.slots[slot].as_mut() else {
                continue;
            };
            if let Ok(Some(exit)) = replica.child.try_wait() {
                let how = exit.to_string();
                let drill = replica.drill.clone();
                self.records
                    .push(replica.record(Ended::ByItself(how.clone())));
                self.slots[slot] = None;
                self.start(slot, false, drill)?;
                noticed.push(Noticed::Exited { slot, how });
                continue;
            }
            if replica.state == State::Running && replica.is_stopped() {
                replica.state = State::Drilled {
                    since: Instant::now(),
                    token: None,
                };
                self.tally.drill_stops += 1;
                noticed.push(Noticed::Drilled { slot });
            }
        }
        Ok(noticed)
    }

    /// How many replicas run (neither stopped nor killed).
    pub fn running(&self) -> usize {
        self.slots
            .iter()
            .flatten()
            .filter(|r| r.state == State::Running)
            .count()
    }

    /// Whether any replica is stopped (paused or at its drill).
    pub fn any_stopped(&self) -> bool {
        self.slots
            .iter()
            .flatten()
            .any(|r| r.state != State::Running)
    }

    /// SIGCONT and SIGTERM to every replica; each gets `grace` to exit.
    /// Returns every process's record, the killed and crashed ones too.
    pub fn terminate_all(mut self, grace: Duration) -> Vec<ProcessRecord> {
        for replica in self.slots.iter_mut().flatten() {
            replica.resume();
            replica.signal(Signal::SIGTERM);
        }
        for mut replica in self.slots.iter_mut().filter_map(Option::take) {
            let ended = replica.terminate(grace);
            self.records.push(replica.record(ended));
        }
        std::mem::take(&mut self.records)
    }
}

impl Drop for ReplicaSet {
    fn drop(&mut self) {
        for replica in self.slots.iter_mut().flatten() {
            replica.signal(Signal::SIGCONT);
            replica.signal(Signal::SIGKILL);
            let _ = replica.child.wait();
        }
    }
}
