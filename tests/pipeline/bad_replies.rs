use super::*;

/// Which stub misbehaves.
#[derive(Clone, Copy, Debug)]
enum Culprit {
    Inventory,
    Osv,
    Kev,
    Epss,
    Sink,
}

impl Culprit {
    fn server(self, stubs: &ProviderStubs) -> &StubServer {
        match self {
            Culprit::Inventory => &stubs.inventory,
            Culprit::Osv => &stubs.osv,
            Culprit::Kev => &stubs.kev,
            Culprit::Epss => &stubs.epss,
            Culprit::Sink => &stubs.sink,
        }
    }
}

struct Case {
    name: &'static str,
    culprit: Culprit,
    fault: Fault,
    step: Step,
    /// What `last_error.message` must contain.
    message: &'static str,
    /// The status the run was at when the step failed.
    at: Status,
}

/// urllib3 (CVSS 4.4) so that threat intel runs, xz (10.0) so that a
/// notification is sent.
fn software(case: &Case) -> &'static [Pkg] {
    match case.step {
        Step::ThreatIntel => &[URLLIB3],
        _ => &[XZ],
    }
}

/// Runs `case` on a fresh environment and checks the common promises:
/// FAILED with a clear `last_error` after `attempts` attempts, nothing
/// confirmed before the failing step repeated, no panic.
async fn check(case: &Case, attempts: u32) -> Vec<(Instant, Ticket)> {
    let env = Env::start("5s").await;
    case.culprit
        .server(&env.stubs)
        .faults()
        .always(case.fault.clone());
    let recorder = Recorder::default();
    let req = request("A", software(case), Policy::default());
    let ticket = run_to_end(&env.pipeline().await, &req, &recorder).await;
    let name = case.name;

    assert_eq!(ticket.status, Status::Failed, "{name}: {ticket:#?}");
    let error = ticket.last_error.as_ref().expect("last_error");
    assert_eq!(error.step, case.step, "{name}");
    assert_eq!(error.attempt, attempts, "{name}");
    assert!(
        error.message.contains(case.message),
        "{name}: {:?} lacks {:?}",
        error.message,
        case.message
    );
    assert!(error.at > 0, "{name}");
    assert_eq!(ticket.attempts[&case.step], attempts, "{name}");
    assert!(!ticket.has_completed(case.step), "{name}");
    // The misbehaving stub was called once per attempt, no more.
    let calls = case.culprit.server(&env.stubs).total_calls();
    assert_eq!(calls, u64::from(attempts), "{name}");
    let c = env.counters();
    if case.step != Step::OnlineCheck {
        assert_eq!(c.inventory, 1, "{name}: online check once");
    }
    if case.step != Step::OnlineCheck && case.step != Step::VulnQuery {
        assert_eq!(c.querybatch, 1, "{name}: vulnerability query once");
    }
    if case.step != Step::Notify {
        assert_eq!(c.effects, 0, "{name}: nothing notified");
    }
    // The run failed from the status it was at, nothing in between.
    let path = path(&env.store().await).await;
    assert_eq!(
        path.last(),
        Some(&(case.at.to_string(), "FAILED".to_owned())),
        "{name}: {path:?}"
    );
    recorder.tickets()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permanent_errors_fail_the_run_at_once() {
    let cases = [
        Case {
            name: "inventory answers a body that is not JSON",
            culprit: Culprit::Inventory,
            fault: Fault::Malformed,
            step: Step::OnlineCheck,
            message: "not JSON",
            at: Status::Init,
        },
        Case {
            name: "inventory answers 404",
            culprit: Culprit::Inventory,
            fault: Fault::Status(404),
            step: Step::OnlineCheck,
            message: "HTTP 404",
            at: Status::Init,
        },
        Case {
            name: "OSV answers JSON of the wrong shape",
            culprit: Culprit::Osv,
            fault: Fault::WrongShape,
            step: Step::VulnQuery,
            message: "wrong shape",
            at: Status::AssetOnline,
        },
        Case {
            name: "OSV answers 400",
            culprit: Culprit::Osv,
            fault: Fault::Status(400),
            step: Step::VulnQuery,
            message: "HTTP 400",
            at: Status::AssetOnline,
        },
        Case {
            name: "OSV streams a 10 MB body",
            culprit: Culprit::Osv,
            fault: Fault::Oversized(10 * 1024 * 1024),
            step: Step::VulnQuery,
            message: "larger than the 4194304 byte cap",
            at: Status::AssetOnline,
        },
        Case {
            name: "EPSS answers a body that is not JSON",
            culprit: Culprit::Epss,
            fault: Fault::Malformed,
            step: Step::ThreatIntel,
            message: "not JSON",
            at: Status::VulnCheckDone,
        },
        Case {
            name: "the webhook answers 403",
            culprit: Culprit::Sink,
            fault: Fault::Status(403),
            step: Step::Notify,
            message: "HTTP 403",
            at: Status::Notifying,
        },
    ];
    for case in &cases {
        let seen = check(case, 1).await;
        // No retry was recorded before FAILED.
        assert!(
            seen.iter()
                .all(|(_, t)| t.last_error.is_none() || t.status == Status::Failed),
            "{}",
            case.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retryable_errors_are_retried_with_backoff_then_fail_the_run() {
    let cases = [
        Case {
            name: "inventory answers 503",
            culprit: Culprit::Inventory,
            fault: Fault::Status(503),
            step: Step::OnlineCheck,
            message: "HTTP 503",
            at: Status::Init,
        },
        Case {
            name: "OSV answers 502",
            culprit: Culprit::Osv,
            fault: Fault::Status(502),
            step: Step::VulnQuery,
            message: "HTTP 502",
            at: Status::AssetOnline,
        },
        Case {
            name: "OSV never answers",
            culprit: Culprit::Osv,
            fault: Fault::Hang,
            step: Step::VulnQuery,
            message: "vuln_query timed out after 1s",
            at: Status::AssetOnline,
        },
        Case {
            name: "the KEV feed answers 500",
            culprit: Culprit::Kev,
            fault: Fault::Status(500),
            step: Step::ThreatIntel,
            message: "known-exploited catalog unavailable",
            at: Status::VulnCheckDone,
        },
    ];
    for case in &cases {
        let name = case.name;
        let seen = check(case, 3).await;
        // Each failed attempt was recorded before the next one, at the
        // same status, with the attempt counter.
        let retries: Vec<&(Instant, Ticket)> = seen
            .iter()
            .filter(|(_, t)| t.last_error.is_some())
            .collect();
        assert_eq!(retries.len(), 3, "{name}: {seen:#?}");
        for (i, (_, t)) in retries.iter().enumerate() {
            let attempt = i as u32 + 1;
            let error = t.last_error.as_ref().unwrap();
            assert_eq!((error.step, error.attempt), (case.step, attempt), "{name}");
            assert_eq!(t.attempts[&case.step], attempt, "{name}");
            let expected = if attempt < 3 { case.at } else { Status::Failed };
            assert_eq!(t.status, expected, "{name}");
        }
        // Backoff: 100 ms then 200 ms, jittered down to half at most.
        let gap = |i: usize| retries[i + 1].0 - retries[i].0;
        assert!(gap(0) >= Duration::from_millis(50), "{name}: {:?}", gap(0));
        assert!(gap(1) >= Duration::from_millis(100), "{name}: {:?}", gap(1));
    }
}
