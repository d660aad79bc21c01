use super::*;
use assetscan_operator::store::AuditEntry;
use assetscan_testkit::process::is_stopped;
use assetscan_testkit::stubs::osv::QUERYBATCH_ROUTE;
use assetscan_testkit::wait::{until, until_ok, until_some};
use kit::tickets::{HIGH_RISK, transitions};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::Child;

/// What only the signal tests need.
impl Env {
    /// Starts a scan in the background, its output going to files in the
    /// temp dir (shown when a test fails).
    fn spawn_scan(&self, asset: &str, holder: &str, extra: &[&str], drill: Option<&str>) -> Child {
        let mut cmd = self.scan(asset, holder, extra);
        if let Some(drill) = drill {
            cmd.env("FAILPOINTS", format!("stop-before-write=return({drill})"));
        }
        let log = |name: &str| {
            std::fs::File::create(self.dir.path().join(format!("{holder}.{name}"))).unwrap()
        };
        cmd.stdout(log("stdout")).stderr(log("stderr"));
        cmd.spawn().unwrap()
    }

    /// What a background scan wrote to stderr so far.
    fn stderr_of(&self, holder: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{holder}.stderr")))
            .unwrap_or_default()
    }

    async fn audit(&self, asset: &str) -> Vec<AuditEntry> {
        self.store
            .audit(&AssetId::new(asset).unwrap(), 1000)
            .await
            .unwrap()
    }

    fn lock(asset: &str) -> String {
        format!("asc:{{{asset}}}:lock")
    }

    /// The asset's lock holder in Redis, if any.
    fn lock_holder(&self, asset: &str) -> Option<String> {
        kit::setup::get(&self.redis, &Env::lock(asset))
    }

    /// Makes the asset's lock expire now, as Redis does once a dead
    /// holder's ttl ran out: for the tests about what a successor does,
    /// not about when.
    fn expire_lock(&self, asset: &str) {
        kit::setup::expire_lock(&self.redis, &Env::lock(asset));
    }

    /// Waits until the asset's ticket satisfies `done`.
    async fn wait_ticket(&self, asset: &str, what: &str, done: impl Fn(&Ticket) -> bool) -> Ticket {
        until_some(what, PATIENCE, async || {
            self.ticket(asset).await.filter(|ticket| done(ticket))
        })
        .await
    }

    /// Runs a scan to its end; while the asset is locked (exit 5) by a dead
    /// or stopped holder, tries again.
    async fn scan_until_not_locked(&self, asset: &str, holder: &str, extra: &[&str]) -> Output {
        until_some("the asset is not locked", PATIENCE, async || {
            let out = self.scan(asset, holder, extra).output().await.unwrap();
            (code(&out) != exit::LOCKED).then_some(out)
        })
        .await
    }
}

fn signal(child: &Child, signal: Signal) {
    let pid = child.id().expect("still running");
    kill(Pid::from_raw(pid as i32), signal).unwrap();
}

async fn wait_stopped(env: &Env, child: &Child, holder: &str) {
    let pid = child.id().expect("still running");
    let what = format!("{holder} stopped");
    // Not stopped (yet): what it said so far, should it never be.
    until_ok(&what, PATIENCE, async || match is_stopped(pid) {
        true => Ok(()),
        false => Err(env.stderr_of(holder)),
    })
    .await
}

/// Waits for the process's exit code.
async fn exit_code(env: &Env, child: &mut Child, holder: &str) -> u8 {
    let status = tokio::time::timeout(PATIENCE, child.wait())
        .await
        .unwrap_or_else(|_| panic!("{holder} did not exit: {}", env.stderr_of(holder)))
        .unwrap();
    status
        .code()
        .unwrap_or_else(|| panic!("{holder} died: {status}")) as u8
}

/// Waits until the asset's lock ran out in Redis (its holder is stopped:
/// the ttl passing is the scenario).
async fn wait_lock_free(env: &Env, asset: &str) {
    until("the lock expired", PATIENCE, async || {
        env.lock_holder(asset).is_none()
    })
    .await
}

/// The token `holder` acquired with, from the audit stream.
fn token_of(audit: &[AuditEntry], holder: &str) -> u64 {
    audit
        .iter()
        .find(|e| e.op() == "acquire" && e.get("holder") == Some(holder))
        .and_then(AuditEntry::token)
        .unwrap_or_else(|| panic!("{holder} never acquired: {audit:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_scan_is_resumed_by_the_same_run_without_repeating_confirmed_steps() {
    // Kill A while the call after `status` is in flight (held by the
    // stub), then run the same `--run` again as B.
    for status in [Status::AssetOnline, Status::VulnCheckDone] {
        let env = Env::with_lock_ttl(LINGERING_TTL_MS).await;
        env.stubs.inventory.set_online("web-01", true);
        let slow = match status {
            Status::AssetOnline => &*env.stubs.osv,
            _ => &*env.stubs.kev,
        };
        slow.faults().hold();
        let args = [
            "--package",
            GLIBC,
            "--cvss-threshold",
            "9",
            "--notify",
            "webhook",
        ];
        let mut a = env.spawn_scan("web-01", "A", &args, None);
        env.wait_ticket("web-01", status.as_str(), |t| t.status == status)
            .await;
        until("A's call is in flight", PATIENCE, async || {
            slow.total_calls() > 0
        })
        .await;
        a.kill().await.unwrap(); // SIGKILL
        let killed = env.ticket("web-01").await.unwrap();
        assert_eq!(killed.status, status);
        // Killed: nothing released, the lock is still A's until its ttl.
        assert_eq!(env.lock_holder("web-01").as_deref(), Some("A"));
        env.expire_lock("web-01");
        slow.faults().clear();

        let out = env.scan_until_not_locked("web-01", "B", &args).await;
        assert_eq!(code(&out), exit::HIGH_RISK, "{status}: {}", stderr(&out));
        let done = printed_ticket(&out);
        assert_eq!(done.status, Status::Finished);
        assert!(done.fencing_token > killed.fencing_token);
        assert_eq!(
            done.attempts.values().max(),
            Some(&1),
            "{status}: {done:#?}"
        );

        let c = env.counters();
        // Confirmed before the kill: never again.
        assert_eq!(c.inventory, 1, "{status}");
        // The call in flight was not confirmed: B makes it again.
        let (querybatch, kev) = match status {
            Status::AssetOnline => (2, 1),
            _ => (1, 2),
        };
        assert_eq!((c.querybatch, c.kev), (querybatch, kev), "{status}: {c:?}");
        assert_eq!((c.deliveries, c.effects), (1, 1), "{status}");
        let advances: Vec<(String, String)> = env
            .audit("web-01")
            .await
            .iter()
            .filter(|e| e.op() == "advance")
            .map(|e| (e.get("from").unwrap().into(), e.get("to").unwrap().into()))
            .collect();
        // Threat intel is recorded with the verdict it leads to.
        let expected = transitions(&HIGH_RISK);
        assert_eq!(advances, expected, "{status}: each transition once");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_at_notifying_resends_with_the_same_idempotency_key() {
    let env = Env::with_lock_ttl(LINGERING_TTL_MS).await;
    env.stubs.inventory.set_online("web-01", true);
    let args = ["--package", XZ, "--notify", "webhook"];
    // A delivers, then stops itself right before recording NOTIFIED.
    let mut a = env.spawn_scan("web-01", "A", &args, Some("web-01:NOTIFIED"));
    wait_stopped(&env, &a, "A").await;
    let notifying = env.ticket("web-01").await.unwrap();
    assert_eq!(notifying.status, Status::Notifying);
    assert_eq!(env.stubs.sink.deliveries().len(), 1);
    a.kill().await.unwrap(); // and dies there
    env.expire_lock("web-01");

    let out = env.scan_until_not_locked("web-01", "B", &args).await;
    assert_eq!(code(&out), exit::HIGH_RISK, "{}", stderr(&out));
    let done = printed_ticket(&out);
    assert_eq!(done.status, Status::Finished);
    assert!(done.fencing_token > notifying.fencing_token);
    assert_eq!(done.holder.as_deref(), Some("B"));

    let deliveries = env.stubs.sink.deliveries();
    assert_eq!(deliveries.len(), 2, "at least once on the wire");
    assert_eq!(env.stubs.sink.effects(), 1, "once in effect");
    for d in &deliveries {
        assert_eq!(d.header("Idempotency-Key"), Some("web-01/r1"));
        assert_eq!(d.json()["ticket_id"], "web-01/r1");
    }
    let senders: Vec<&str> = deliveries
        .iter()
        .map(|d| d.header("X-AssetScan-Fencing-Token").unwrap())
        .collect();
    assert_eq!(
        senders,
        [
            notifying.fencing_token.to_string(),
            done.fencing_token.to_string()
        ]
    );
    let c = env.counters();
    assert_eq!((c.inventory, c.querybatch, c.records), (1, 1, 1));

    let audit = env.audit("web-01").await;
    let b_token = token_of(&audit, "B");
    let late: Vec<(&str, Option<u64>)> = audit
        .iter()
        .filter(|e| e.op() == "advance")
        .skip_while(|e| e.get("to") != Some("NOTIFIED"))
        .map(|e| (e.get("to").unwrap(), e.token()))
        .collect();
    assert_eq!(
        late,
        [("NOTIFIED", Some(b_token)), ("FINISHED", Some(b_token))]
    );
    assert!(audit.iter().all(AuditEntry::accepted), "{audit:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scan_stalled_in_a_provider_call_past_its_ttl_is_fenced_when_it_wakes() {
    let env = Env::start().await;
    env.stubs.inventory.set_online("web-01", true);
    let args = ["--package", XZ, "--notify", "webhook"];
    // A's vulnerability query is held; A is frozen while it is in
    // flight, and stays frozen past the reply and its lock's ttl.
    env.stubs.osv.faults().hold();
    let mut a = env.spawn_scan("web-01", "A", &args, None);
    env.wait_ticket("web-01", "ASSET_ONLINE", |t| {
        t.status == Status::AssetOnline
    })
    .await;
    until("A's query arrived", PATIENCE, async || {
        env.stubs.osv.querybatch_calls() > 0
    })
    .await;
    signal(&a, Signal::SIGSTOP);
    wait_stopped(&env, &a, "A").await;
    // Frozen with its query in flight: no reply was processed yet.
    assert_eq!(env.stubs.osv.vuln_calls(), 0, "A went on before the stop");
    let frozen = env.ticket("web-01").await.unwrap();
    assert_eq!(frozen.status, Status::AssetOnline);
    // The reply goes into A's socket while A is frozen.
    env.stubs.osv.faults().release();
    until("A's query answered", PATIENCE, async || {
        env.stubs.osv.answers(QUERYBATCH_ROUTE) > 0
    })
    .await;
    wait_lock_free(&env, "web-01").await;

    let out = env.scan_until_not_locked("web-01", "B", &args).await;
    assert_eq!(code(&out), exit::HIGH_RISK, "{}", stderr(&out));
    let done = env.ticket("web-01").await.unwrap();
    assert_eq!(done.status, Status::Finished);
    let before = env.counters();
    assert_eq!((before.deliveries, before.effects), (1, 1));

    signal(&a, Signal::SIGCONT);
    let a_code = exit_code(&env, &mut a, "A").await;
    let a_log = env.stderr_of("A");
    assert_eq!(a_code, exit::INTERRUPTED, "{a_log}");
    // Awake, A made no provider call and sent nothing...
    assert_eq!(env.counters(), before, "{a_log}");
    // ...and the ticket is B's, as B left it.
    assert_eq!(env.ticket("web-01").await.unwrap(), done);
    // A either wrote and was refused, or saw its lease gone first.
    let audit = env.audit("web-01").await;
    let a_token = token_of(&audit, "A");
    let by_a: Vec<&AuditEntry> = audit
        .iter()
        .filter(|e| e.op() == "advance" && e.token() == Some(a_token))
        .collect();
    let refused: Vec<&&AuditEntry> = by_a.iter().filter(|e| !e.accepted()).collect();
    assert!(
        refused
            .iter()
            .all(|e| e.get("result") == Some("STALE_TOKEN"))
    );
    if a_log.contains("superseded") {
        assert_eq!(refused.len(), 1, "{audit:#?}");
    } else {
        assert!(a_log.contains("stopped before the run ended"), "{a_log}");
        assert!(refused.is_empty(), "{audit:#?}");
    }
    // Only INIT → ASSET_ONLINE went in under A's token.
    let accepted: Vec<Option<&str>> = by_a
        .iter()
        .filter(|e| e.accepted())
        .map(|e| e.get("to"))
        .collect();
    assert_eq!(accepted, [Some("ASSET_ONLINE")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zombies_offline_write_is_rejected_and_history_shows_it() {
    let env = Env::start().await;
    let args = ["--package", XZ, "--notify", "webhook"];
    // A sees the asset offline and stops right before writing it.
    env.stubs.inventory.set_online("web-01", false);
    let mut a = env.spawn_scan("web-01", "A", &args, Some("web-01:ASSET_OFFLINE"));
    wait_stopped(&env, &a, "A").await;
    assert_eq!(env.ticket("web-01").await.unwrap().status, Status::Init);
    wait_lock_free(&env, "web-01").await;

    // B takes over; the asset is online now; B finishes and notifies.
    env.stubs.inventory.set_online("web-01", true);
    let out = env.scan_until_not_locked("web-01", "B", &args).await;
    assert_eq!(code(&out), exit::HIGH_RISK, "{}", stderr(&out));
    let done = env.ticket("web-01").await.unwrap();
    assert_eq!(done.status, Status::Finished);
    assert_eq!(done.facts.online, Some(true));
    let before = env.counters();
    assert_eq!(
        (before.inventory, before.deliveries, before.effects),
        (2, 1, 1)
    );

    // A wakes and writes ASSET_OFFLINE: refused, the ticket unchanged.
    signal(&a, Signal::SIGCONT);
    let a_code = exit_code(&env, &mut a, "A").await;
    let a_log = env.stderr_of("A");
    assert_eq!(a_code, exit::INTERRUPTED, "{a_log}");
    assert!(a_log.contains("superseded"), "{a_log}");
    assert_eq!(env.ticket("web-01").await.unwrap(), done);
    assert_eq!(env.counters(), before);

    let audit = env.audit("web-01").await;
    let (a_token, b_token) = (token_of(&audit, "A"), token_of(&audit, "B"));
    let refused: Vec<&AuditEntry> = audit.iter().filter(|e| !e.accepted()).collect();
    assert_eq!(refused.len(), 1, "{audit:#?}");
    let r = refused[0];
    assert_eq!(r.get("result"), Some("STALE_TOKEN"));
    assert_eq!(r.get("to"), Some("ASSET_OFFLINE"));
    assert_eq!(r.get("from"), Some("FINISHED"));
    assert_eq!(r.token(), Some(a_token));
    assert_eq!(r.get("valid"), Some(b_token.to_string().as_str()));

    // `ticket history` shows the refused write.
    let out = env
        .command(&["ticket", "history", "--asset", "web-01"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let history = stdout(&out);
    let stale: Vec<&str> = history
        .lines()
        .filter(|l| l.contains("STALE_TOKEN"))
        .collect();
    assert_eq!(stale.len(), 1, "{history}");
    let cols: Vec<&str> = stale[0].split_whitespace().collect();
    assert_eq!(
        cols[1..8],
        [
            "advance",
            "STALE_TOKEN",
            &a_token.to_string(),
            &b_token.to_string(),
            "FINISHED",
            "ASSET_OFFLINE",
            &done.revision.to_string(),
        ],
        "{history}"
    );
    // One line per audit record, after the header.
    assert_eq!(history.lines().count(), audit.len() + 1, "{history}");
    assert!(
        history
            .lines()
            .any(|l| l.contains(" acquire ") && l.ends_with(" A"))
    );
    assert!(
        history
            .lines()
            .any(|l| l.contains(" acquire ") && l.ends_with(" B"))
    );

    // `ticket show` prints the ticket as stored.
    let out = env
        .command(&["ticket", "show", "--asset", "web-01", "--run", RUN])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(printed_ticket(&out), done);
    // …and says so when there is none.
    let out = env
        .command(&["ticket", "show", "--asset", "web-01", "--run", "nope"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no ticket for asset web-01 run nope"));
}
