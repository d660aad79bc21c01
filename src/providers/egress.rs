//! Which addresses the operator may dial on a tenant's word: the TCP online
//! check's targets, and the URLs of the channels teams define. Both are
//! written by a tenant, and the operator's network position is not the
//! tenant's: without a policy, "online" answers whether the operator can
//! reach the tenant's guess, and a channel posts wherever it is aimed (its own Redis on loopback, the cloud metadata
//! service, a Service behind a NetworkPolicy the tenant is kept out of).
//!
//! Built-in rules refuse loopback, link-local (with the cloud metadata
//! addresses named apart), unspecified, multicast and broadcast addresses;
//! `allow` and `deny` CIDRs complete them. The most specific rule (longest
//! prefix) that contains the address decides; between equally specific
//! rules, a configured one wins over a built-in one, and among configured
//! ones refusal wins; an address no rule contains may be dialled.
//! IPv4-mapped IPv6 addresses (`::ffff:127.0.0.1`) are judged as the IPv4
//! address they carry.

use crate::providers::error::ProviderConfigError;
use ipnet::IpNet;
use schemars::JsonSchema;
use serde::Deserialize;
use std::net::IpAddr;

/// `online.tcp.egress` in the config.
///
/// ```yaml
/// egress:
///   allow: [10.42.0.0/16]          # e.g. the pod range
///   deny: [10.96.0.0/12]           # e.g. the Service range
/// ```
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct EgressConfig {
    /// CIDRs that may be dialled, also inside a built-in rule's range when
    /// more specific than it (`127.0.0.1/32` opens loopback's one address,
    /// `0.0.0.0/0` opens nothing the built-in rules refuse).
    pub allow: Vec<String>,
    /// CIDRs that are never dialled unless a more specific `allow` opens
    /// part of them.
    pub deny: Vec<String>,
}

/// The rule that refused an address: its name is in the error message and
/// its reason in the AssetScan's condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EgressRule {
    Loopback,
    LinkLocal,
    CloudMetadata,
    Unspecified,
    Multicast,
    Broadcast,
    /// A CIDR of `online.tcp.egress.deny`.
    Denied,
}

const RULES: [EgressRule; 7] = [
    EgressRule::Loopback,
    EgressRule::LinkLocal,
    EgressRule::CloudMetadata,
    EgressRule::Unspecified,
    EgressRule::Multicast,
    EgressRule::Broadcast,
    EgressRule::Denied,
];

impl EgressRule {
    /// The rule's name in messages: `rule loopback (127.0.0.0/8)`.
    pub fn as_str(self) -> &'static str {
        match self {
            EgressRule::Loopback => "loopback",
            EgressRule::LinkLocal => "link-local",
            EgressRule::CloudMetadata => "cloud-metadata",
            EgressRule::Unspecified => "unspecified",
            EgressRule::Multicast => "multicast",
            EgressRule::Broadcast => "broadcast",
            EgressRule::Denied => "egress.deny",
        }
    }

    /// The condition reason of a run this rule refused.
    pub fn reason(self) -> &'static str {
        match self {
            EgressRule::Loopback => "EgressRefusedLoopback",
            EgressRule::LinkLocal => "EgressRefusedLinkLocal",
            EgressRule::CloudMetadata => "EgressRefusedCloudMetadata",
            EgressRule::Unspecified => "EgressRefusedUnspecified",
            EgressRule::Multicast => "EgressRefusedMulticast",
            EgressRule::Broadcast => "EgressRefusedBroadcast",
            EgressRule::Denied => "EgressRefusedDenyList",
        }
    }

    /// The rule named in a recorded error message (the ticket keeps the
    /// message, not the error): `None` when the policy refused nothing.
    pub fn named_in(message: &str) -> Option<EgressRule> {
        let (_, refusal) = message.split_once(REFUSAL)?;
        RULES
            .into_iter()
            .find(|rule| refusal.contains(&format!("rule {} (", rule.as_str())))
    }
}

/// The words that start a refusal's description (see [`Refusal`]).
const REFUSAL: &str = "the egress policy refuses ";

/// Why an address may not be dialled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the egress policy refuses {address}: rule {} ({net}); no connection was attempted", .rule.as_str())]
pub struct Refusal {
    pub address: IpAddr,
    pub rule: EgressRule,
    pub net: IpNet,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Allow,
    Refuse(EgressRule),
}

#[derive(Clone, Debug)]
struct Rule {
    net: IpNet,
    verdict: Verdict,
    configured: bool,
}

/// The built-in rules and the configured CIDRs.
#[derive(Clone, Debug)]
pub struct EgressPolicy {
    rules: Vec<Rule>,
}

/// The built-in refusals: (CIDR, rule). The metadata addresses are more
/// specific than link-local (and than any range a team opens), so opening
/// link-local or a provider's range does not open them.
const BUILT_IN: [(&str, EgressRule); 9] = [
    ("127.0.0.0/8", EgressRule::Loopback),
    ("::1/128", EgressRule::Loopback),
    ("169.254.0.0/16", EgressRule::LinkLocal),
    ("fe80::/10", EgressRule::LinkLocal),
    // Linux connects 0.0.0.0 to the local host.
    ("0.0.0.0/8", EgressRule::Unspecified),
    ("::/128", EgressRule::Unspecified),
    ("224.0.0.0/4", EgressRule::Multicast),
    ("ff00::/8", EgressRule::Multicast),
    ("255.255.255.255/32", EgressRule::Broadcast),
];

/// The metadata and credential endpoints the major clouds document for
/// their instances and pods (docs/security.md lists each with its source):
/// what a tenant's target could reach for the node's credentials.
const CLOUD_METADATA: [&str; 9] = [
    // AWS EC2 IMDS; GCP, Azure IMDS, Oracle, IBM, DigitalOcean, OpenStack.
    "169.254.169.254/32",
    "fd00:ec2::254/128",
    // AWS ECS task metadata and credentials.
    "169.254.170.2/32",
    // AWS EKS Pod Identity agent.
    "169.254.170.23/32",
    "fd00:ec2::23/128",
    // Alibaba Cloud ECS metadata (in 100.64.0.0/10, not link-local).
    "100.100.100.200/32",
    // Azure's platform endpoint (WireServer), not link-local.
    "168.63.129.16/32",
    // Oracle Cloud's legacy metadata address.
    "192.0.0.192/32",
    // Tencent Cloud CVM metadata.
    "169.254.0.23/32",
];

impl EgressPolicy {
    pub fn new(config: &EgressConfig) -> Result<EgressPolicy, ProviderConfigError> {
        let mut rules = Vec::new();
        let metadata = CLOUD_METADATA.map(|cidr| (cidr, EgressRule::CloudMetadata));
        for (cidr, rule) in BUILT_IN.into_iter().chain(metadata) {
            let net = cidr.parse().map_err(|e: ipnet::AddrParseError| {
                ProviderConfigError::invalid("tcp probe", "egress", e.to_string())
            })?;
            rules.push(Rule {
                net,
                verdict: Verdict::Refuse(rule),
                configured: false,
            });
        }
        for (field, cidrs, verdict) in [
            ("egress.allow", &config.allow, Verdict::Allow),
            (
                "egress.deny",
                &config.deny,
                Verdict::Refuse(EgressRule::Denied),
            ),
        ] {
            for cidr in cidrs {
                rules.push(Rule {
                    net: parse_cidr(field, cidr)?,
                    verdict,
                    configured: true,
                });
            }
        }
        Ok(EgressPolicy { rules })
    }

    /// `Ok` when `address` may be dialled; else the rule that refuses it.
    pub fn check(&self, address: IpAddr) -> Result<(), Refusal> {
        let address = address.to_canonical();
        let decisive = self
            .rules
            .iter()
            .filter(|rule| rule.net.contains(&address))
            .max_by_key(|rule| {
                let refuses = rule.verdict != Verdict::Allow;
                (rule.net.prefix_len(), rule.configured, refuses)
            });
        match decisive {
            Some(Rule {
                net,
                verdict: Verdict::Refuse(rule),
                ..
            }) => Err(Refusal {
                address,
                rule: *rule,
                net: *net,
            }),
            _ => Ok(()),
        }
    }
}

/// A CIDR (`10.0.0.0/8`) or one address (`10.1.2.3`, as a /32 or /128).
fn parse_cidr(field: &'static str, text: &str) -> Result<IpNet, ProviderConfigError> {
    let text = text.trim();
    let parsed = text
        .parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from));
    parsed.map_err(|_| {
        let shown = assetscan_domain::text::truncate_chars(text, 64);
        ProviderConfigError::invalid(
            "tcp probe",
            field,
            format!("{shown:?} is not a CIDR such as 10.0.0.0/8 or fd00::/8"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str], deny: &[&str]) -> EgressPolicy {
        EgressPolicy::new(&EgressConfig {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
        })
        .unwrap()
    }

    fn refused_by(policy: &EgressPolicy, address: &str) -> Option<EgressRule> {
        policy.check(address.parse().unwrap()).err().map(|r| r.rule)
    }

    #[test]
    fn the_metadata_endpoints_of_the_major_clouds_stay_refused_when_their_ranges_are_opened() {
        // Opening link-local, CGNAT (Alibaba's), Azure's and the IETF
        // protocol block leaves each metadata address refused.
        let opened = policy(
            &[
                "169.254.0.0/16",
                "100.64.0.0/10",
                "168.63.0.0/16",
                "192.0.0.0/24",
                "fd00::/8",
            ],
            &[],
        );
        for address in [
            "169.254.169.254",
            "fd00:ec2::254",
            "169.254.170.2",
            "169.254.170.23",
            "fd00:ec2::23",
            "100.100.100.200",
            "168.63.129.16",
            "192.0.0.192",
            "169.254.0.23",
        ] {
            assert_eq!(
                refused_by(&opened, address),
                Some(EgressRule::CloudMetadata),
                "{address}"
            );
        }
        assert_eq!(refused_by(&opened, "100.100.100.201"), None);
    }

    #[test]
    fn the_built_in_rules_refuse_local_addresses() {
        use EgressRule::*;
        let default = policy(&[], &[]);
        for (address, rule) in [
            ("127.0.0.1", Some(Loopback)),
            ("127.1.2.3", Some(Loopback)),
            ("::1", Some(Loopback)),
            ("::ffff:127.0.0.1", Some(Loopback)),
            ("169.254.169.254", Some(CloudMetadata)),
            ("fd00:ec2::254", Some(CloudMetadata)),
            ("169.254.1.1", Some(LinkLocal)),
            ("fe80::1", Some(LinkLocal)),
            ("0.0.0.0", Some(Unspecified)),
            ("::", Some(Unspecified)),
            ("224.0.0.1", Some(Multicast)),
            ("ff02::1", Some(Multicast)),
            ("255.255.255.255", Some(Broadcast)),
            ("10.1.2.3", None),
            ("192.0.2.1", None),
            ("2001:db8::1", None),
            ("fd00:ec2::253", None),
        ] {
            assert_eq!(refused_by(&default, address), rule, "{address}");
        }
    }

    #[test]
    fn the_most_specific_rule_decides_and_refusal_wins_ties() {
        use EgressRule::*;
        let p = policy(
            &["127.0.0.1/32", "0.0.0.0/0", "169.254.0.0/16", "10.96.5.5"],
            &["10.96.0.0/12", "10.0.0.7/32", "10.0.0.7/32"],
        );
        assert_eq!(refused_by(&p, "127.0.0.1"), None);
        assert_eq!(refused_by(&p, "127.0.0.2"), Some(Loopback));
        assert_eq!(refused_by(&p, "169.254.1.1"), None);
        assert_eq!(refused_by(&p, "169.254.169.254"), Some(CloudMetadata));
        assert_eq!(refused_by(&p, "10.96.0.1"), Some(Denied));
        assert_eq!(refused_by(&p, "10.96.5.5"), None);
        assert_eq!(refused_by(&p, "10.0.0.7"), Some(Denied));
        let tie = policy(&["10.0.0.0/8"], &["10.0.0.0/8"]);
        assert_eq!(refused_by(&tie, "10.1.1.1"), Some(Denied));
    }

    #[test]
    fn a_refusal_names_its_rule_in_words_that_survive_the_ticket() {
        let refusal = policy(&[], &[])
            .check("169.254.169.254".parse().unwrap())
            .unwrap_err();
        let message = format!("online check: {refusal}");
        assert_eq!(
            message,
            "online check: the egress policy refuses 169.254.169.254: rule cloud-metadata \
             (169.254.169.254/32); no connection was attempted"
        );
        assert_eq!(
            EgressRule::named_in(&message),
            Some(EgressRule::CloudMetadata)
        );
        assert_eq!(EgressRule::named_in("connection refused"), None);
        for rule in RULES {
            let r = Refusal {
                address: "10.0.0.1".parse().unwrap(),
                rule,
                net: "10.0.0.0/8".parse().unwrap(),
            };
            assert_eq!(EgressRule::named_in(&r.to_string()), Some(rule));
        }
    }

    #[test]
    fn bad_cidrs_are_named() {
        let err = EgressPolicy::new(&EgressConfig {
            allow: vec!["10.0.0.0/33".into()],
            deny: vec![],
        })
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("egress.allow") && err.contains("10.0.0.0/33"),
            "{err}"
        );
        let err = EgressPolicy::new(&EgressConfig {
            allow: vec![],
            deny: vec!["pods".into()],
        })
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("egress.deny") && err.contains("\"pods\""),
            "{err}"
        );
    }
}
