use super::*;

struct Case {
    name: &'static str,
    software: &'static [Pkg],
    policy: ThreatIntelPolicy,
    cvss_threshold: f64,
    /// Whether KEV and EPSS are each called once (else never).
    intel: bool,
    high_risk: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intel_calls_follow_the_policy_exactly() {
    use ThreatIntelPolicy::*;
    let cases = [
        Case {
            name: "WhenNeeded, every finding >= threshold",
            software: &[XZ, OPENSSH],
            policy: WhenNeeded,
            cvss_threshold: 7.0,
            intel: false,
            high_risk: true,
        },
        Case {
            name: "WhenNeeded, one finding >= threshold decides alone",
            software: &[XZ, URLLIB3],
            policy: WhenNeeded,
            cvss_threshold: 7.0,
            intel: false,
            high_risk: true,
        },
        Case {
            name: "WhenNeeded, findings below threshold or unscored",
            software: &[URLLIB3, GO_STDLIB],
            policy: WhenNeeded,
            cvss_threshold: 7.0,
            intel: true,
            high_risk: false,
        },
        Case {
            name: "WhenNeeded, below threshold but known exploited",
            software: &[GLIBC],
            policy: WhenNeeded,
            cvss_threshold: 9.0,
            intel: true,
            high_risk: true,
        },
        Case {
            name: "WhenNeeded, no findings",
            software: &[],
            policy: WhenNeeded,
            cvss_threshold: 7.0,
            intel: false,
            high_risk: false,
        },
        Case {
            name: "Always, findings >= threshold",
            software: &[XZ],
            policy: Always,
            cvss_threshold: 7.0,
            intel: true,
            high_risk: true,
        },
        Case {
            name: "Always, findings below threshold",
            software: &[URLLIB3],
            policy: Always,
            cvss_threshold: 7.0,
            intel: true,
            high_risk: false,
        },
        Case {
            name: "Always, no findings",
            software: &[],
            policy: Always,
            cvss_threshold: 7.0,
            intel: false,
            high_risk: false,
        },
        Case {
            name: "Never, below threshold and known exploited",
            software: &[GLIBC],
            policy: Never,
            cvss_threshold: 9.0,
            intel: false,
            high_risk: false,
        },
        Case {
            name: "Never, findings >= threshold",
            software: &[XZ, URLLIB3, GO_STDLIB],
            policy: Never,
            cvss_threshold: 7.0,
            intel: false,
            high_risk: true,
        },
    ];
    for case in &cases {
        let name = case.name;
        let env = Env::start("5s").await;
        let req = request("A", case.software, policy(case.policy, case.cvss_threshold));
        let ticket = run_to_end(&env.pipeline().await, &req, &()).await;
        assert_eq!(ticket.status, Status::Finished, "{name}");

        let c = env.counters();
        let calls = u64::from(case.intel);
        assert_eq!((c.kev, c.epss), (calls, calls), "{name}");
        assert_eq!(
            ticket.has_completed(Step::ThreatIntel),
            case.intel,
            "{name}"
        );
        assert_eq!(ticket.facts.threat_intel.is_some(), case.intel, "{name}");
        let risk = ticket.facts.risk.as_ref().unwrap();
        assert_eq!(risk.high_risk, case.high_risk, "{name}: {risk:?}");
        assert_eq!(c.effects, usize::from(case.high_risk), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_epss_score_over_threshold_makes_high_risk() {
    let env = Env::start("5s").await;
    // Derived: the stub gets an EPSS score for urllib3's CVE (the
    // fixtures have none for the OSV records' CVEs).
    env.stubs
        .epss
        .set_score("CVE-2024-37891", "0.910000000", "0.990000000", "2025-08-25");
    let req = request("A", &[URLLIB3], Policy::default());
    let ticket = run_to_end(&env.pipeline().await, &req, &()).await;
    assert_eq!(ticket.status, Status::Finished);
    let intel = ticket.facts.threat_intel.as_ref().unwrap();
    assert_eq!(intel.epss.get("CVE-2024-37891"), Some(&0.91));
    assert_eq!(intel.known_exploited, Vec::<String>::new());
    assert_eq!(intel.catalog_version.as_deref(), Some("2025.08.25"));
    let risk = ticket.facts.risk.as_ref().unwrap();
    assert!(risk.high_risk);
    assert_eq!(risk.reasons, ["CVE-2024-37891 EPSS 0.910 >= 0.500"]);
    assert_eq!(env.stubs.epss.cve_params(), ["CVE-2024-37891"]);
    assert_eq!(env.counters().effects, 1);
}
