//! The audit streams: per ticket, revisions, transitions, terminal states
//! and tokens; per asset, the order of claims. Also indexes every claim
//! and accepted write for the status and notification checks.
//!
//! An asset is an [`AssetIdentity`], as the operator keys it: two
//! namespaces' AssetScans of one assetId are two assets with the bridge
//! off (each its own fence, whose tokens start at 1), one with it on.

use super::{Invariant, Violation};
use crate::history::{AssetIdentity, AuditRecord};
use assetscan_operator::domain::ticket::Status;
use std::collections::{HashMap, HashSet};

/// Where one ticket stands while its writes are replayed.
#[derive(Default)]
struct Ticket {
    epoch: u32,
    status: Option<Status>,
    revision: Option<u64>,
    /// The token of the latest claim (acquire or retirement).
    token: Option<u64>,
    /// The ticket key, the status it left and the revision of the latest
    /// write, when that write was a retirement.
    retired: Option<(String, String, u64)>,
}

/// Every claim and every accepted write, by ticket.
///
/// Its questions name a run and where to look for it (`at`): the
/// identities an object's records may be filed under
/// ([`ObjectHistory::identities`](crate::history::ObjectHistory::identities)),
/// or those of a ticket id ([`Claims::identities_of`]). A run id names one
/// object (it starts with the object's uid), so a run found under any of
/// them is that object's.
#[derive(Debug, Default)]
pub struct Claims {
    /// The Redis epoch of each claim.
    claims: HashMap<(AssetIdentity, String, u64), u32>,
    writes: HashSet<(AssetIdentity, String, u64, u64, String)>,
}

impl Claims {
    /// Where a ticket id `<asset>/<run>` (which names no namespace, as the
    /// receivers see it) may have been claimed: every identity of `asset`
    /// that claimed `run`.
    pub fn identities_of(&self, asset: &str, run: &str) -> Vec<AssetIdentity> {
        let mut found: Vec<AssetIdentity> = (self.claims.keys())
            .filter(|(identity, r, _)| identity.asset == asset && r == run)
            .map(|(identity, _, _)| identity.clone())
            .collect();
        found.sort();
        found.dedup();
        found
    }

    /// The Redis epoch in which `run` was claimed under `token` at one of
    /// `at`.
    pub fn claim_epoch(&self, at: &[AssetIdentity], run: &str, token: u64) -> Option<u32> {
        at.iter().find_map(|identity| {
            self.claims
                .get(&(identity.clone(), run.to_owned(), token))
                .copied()
        })
    }

    /// Whether `run` stood at `status` under `token` at one of `at` at
    /// some point (claimed there, or moved there).
    pub fn held_at(&self, at: &[AssetIdentity], run: &str, token: u64, status: &str) -> bool {
        self.writes
            .iter()
            .any(|(i, r, t, _, s)| at.contains(i) && r == run && *t == token && s == status)
    }

    /// The epochs in which `run` was claimed at one of `at`.
    pub fn epochs_of(&self, at: &[AssetIdentity], run: &str) -> Vec<u32> {
        self.claims
            .iter()
            .filter(|((i, r, _), _)| at.contains(i) && r == run)
            .map(|(_, epoch)| *epoch)
            .collect()
    }

    /// Whether Redis accepted a write at one of `at` that left `run` at
    /// `status` under `(token, revision)`.
    pub fn accepted(
        &self,
        at: &[AssetIdentity],
        run: &str,
        token: u64,
        revision: u64,
        status: &str,
    ) -> bool {
        at.iter().any(|identity| {
            self.writes.contains(&(
                identity.clone(),
                run.to_owned(),
                token,
                revision,
                status.to_owned(),
            ))
        })
    }
}

fn excerpt(r: &AuditRecord) -> String {
    let fields: Vec<String> = r.fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("[epoch {} {}] {}", r.epoch, r.id, fields.join(" "))
}

/// A claim whose token is not above one drawn before (for the ticket, or
/// for the asset): after a data loss Redis may hand a number out again, and
/// only a claim that acts on it breaks the promise.
struct Reused {
    invariant: Invariant,
    asset: AssetIdentity,
    run: String,
    token: u64,
    epoch: u32,
    subject: String,
    detail: String,
}

/// What one write breaks: at once, or (a number drawn again, with the
/// token it drew) only if the claim that drew it acts.
#[derive(Default)]
struct Findings {
    now: Vec<(Invariant, String)>,
    if_it_acts: Vec<(Invariant, u64, String)>,
}

/// The ticket writes replayed in the order Redis applied them.
#[derive(Default)]
struct Replay {
    tickets: HashMap<(AssetIdentity, String), Ticket>,
    /// The highest token drawn per asset.
    asset_tokens: HashMap<AssetIdentity, u64>,
    claims: Claims,
    reused: Vec<Reused>,
    /// (asset, run, token, epoch) of every accepted advance: the claims that
    /// acted.
    acted: HashSet<(AssetIdentity, String, u64, u32)>,
}

pub(super) fn check(audit: &[AuditRecord], out: &mut Vec<Violation>) -> Claims {
    let mut replay = Replay::default();
    for r in audit.iter().filter(|r| r.is_ticket_write()) {
        replay.write(r, out);
    }
    replay.finish(out)
}

impl Replay {
    /// Checks one accepted write against where its ticket stood, then
    /// moves the ticket on.
    fn write(&mut self, r: &AuditRecord, out: &mut Vec<Violation>) {
        let run = r.run().unwrap_or_default().to_owned();
        let ticket = ticket_of(&mut self.tickets, r, &run);
        if ticket.is_the_other_copy(r) {
            return;
        }
        let token = r.token();
        let claims_anew = r.op() != "advance";
        if !claims_anew && let Some(t) = token {
            self.acted
                .insert((r.identity.clone(), run.clone(), t, r.epoch));
        }
        let mut found = Findings::default();
        ticket.check(r, claims_anew, &mut found);
        if claims_anew && let Some(t) = token {
            let asset_max = self.asset_tokens.entry(r.identity.clone()).or_insert(0);
            if t <= *asset_max {
                found.if_it_acts.push((
                    Invariant::Claims,
                    t,
                    format!(
                        "the asset's token {t} drawn after its token {asset_max}, and acted on"
                    ),
                ));
            }
            *asset_max = (*asset_max).max(t);
        }
        transition(r, ticket.status, &mut |invariant, detail| {
            found.now.push((invariant, detail))
        });
        let subject = format!("ticket {}/{run}", r.identity);
        out.extend(found.now.into_iter().map(|(invariant, detail)| Violation {
            invariant,
            subject: subject.clone(),
            detail: format!("{detail}: {}", excerpt(r)),
        }));
        self.reused.extend(
            found
                .if_it_acts
                .into_iter()
                .map(|(invariant, token, detail)| Reused {
                    invariant,
                    asset: r.identity.clone(),
                    run: run.clone(),
                    token,
                    epoch: r.epoch,
                    subject: subject.clone(),
                    detail: format!("{detail}: {}", excerpt(r)),
                }),
        );
        self.claims.record(r, &run);
        ticket.advance(r);
    }

    /// A number drawn again is a violation only if the claim that drew it
    /// acted: an accepted write under it, in the same Redis epoch.
    fn finish(self, out: &mut Vec<Violation>) -> Claims {
        let acted = self.acted;
        out.extend(
            self.reused
                .into_iter()
                .filter(|c| acted.contains(&(c.asset.clone(), c.run.clone(), c.token, c.epoch)))
                .map(|c| Violation {
                    invariant: c.invariant,
                    subject: c.subject,
                    detail: c.detail,
                }),
        );
        self.claims
    }
}

/// The ticket `r` writes, as it stood; started again when Redis lost it
/// (its tokens are not).
fn ticket_of<'t>(
    tickets: &'t mut HashMap<(AssetIdentity, String), Ticket>,
    r: &AuditRecord,
    run: &str,
) -> &'t mut Ticket {
    let ticket = tickets
        .entry((r.identity.clone(), run.to_owned()))
        .or_default();
    if r.epoch != ticket.epoch {
        *ticket = Ticket {
            epoch: r.epoch,
            token: ticket.token,
            ..Ticket::default()
        };
    }
    ticket
}

impl Ticket {
    /// What `r` breaks against where the ticket stands: a write after its
    /// end, a revision that does not grow, a token not its own (or, for a
    /// claim, not above its last).
    fn check(&self, r: &AuditRecord, claims_anew: bool, found: &mut Findings) {
        if let Some(ended) = self.status.filter(|s| s.is_terminal()) {
            found
                .now
                .push((Invariant::Terminal, format!("accepted after {ended}")));
        }
        match (r.revision(), self.revision) {
            (None, _) => found.now.push((Invariant::Revisions, "no revision".into())),
            (Some(now), Some(before)) if now <= before => found.now.push((
                Invariant::Revisions,
                format!("revision {now} after revision {before}"),
            )),
            _ => {}
        }
        match (r.token(), self.token) {
            (None, _) => found.now.push((Invariant::TicketTokens, "no token".into())),
            (Some(t), Some(before)) if claims_anew && t <= before => found.if_it_acts.push((
                Invariant::TicketTokens,
                t,
                format!("claimed under token {t}, not above token {before}, and acted on it"),
            )),
            (Some(t), before) if !claims_anew && before != Some(t) => found.now.push((
                Invariant::TicketTokens,
                format!("written under token {t} while the ticket's token is {before:?}"),
            )),
            _ => {}
        }
    }

    /// Whether `r` retires the other key family's copy of the run the
    /// record before retired: with `redis.identityBridge` on, a deletion
    /// retires both families (one `retire.lua` call each, into the one
    /// audit stream), and the two copies, written alike by every write,
    /// go from the same status to `FAILED` at the same revision. The same
    /// copy retired twice is not this.
    fn is_the_other_copy(&self, r: &AuditRecord) -> bool {
        let Some((key, from, revision)) = &self.retired else {
            return false;
        };
        r.op() == "retire"
            && r.get("ticket") != Some(key.as_str())
            && r.get("from") == Some(from.as_str())
            && r.revision() == Some(*revision)
    }

    /// Where the ticket stands after `r`.
    fn advance(&mut self, r: &AuditRecord) {
        self.retired = match (r.op(), r.get("ticket"), r.get("from"), r.revision()) {
            ("retire", Some(key), Some(from), Some(revision)) => {
                Some((key.to_owned(), from.to_owned(), revision))
            }
            _ => None,
        };
        let after = r.status_after().and_then(Status::parse);
        self.status = after.or(self.status);
        self.revision = r.revision().or(self.revision);
        self.token = match (r.token(), self.token) {
            (Some(t), Some(before)) => Some(t.max(before)),
            (t, before) => t.or(before),
        };
    }
}

impl Claims {
    /// Indexes `r` of `run`: its claim, if it is one, and the state it left.
    fn record(&mut self, r: &AuditRecord, run: &str) {
        let token = r.token();
        if r.op() == "acquire"
            && let Some(t) = token
        {
            self.claims
                .insert((r.identity.clone(), run.to_owned(), t), r.epoch);
        }
        if let (Some(t), Some(rev), Some(status)) = (token, r.revision(), r.status_after()) {
            self.writes.insert((
                r.identity.clone(),
                run.to_owned(),
                t,
                rev,
                status.to_owned(),
            ));
        }
    }
}

/// The state machine, with the operator's own table: a claim finds the
/// ticket where it stood (`INIT` when it creates it), an advance moves from
/// there along the table, a retirement fails a run in progress.
fn transition(
    r: &AuditRecord,
    current: Option<Status>,
    violation: &mut impl FnMut(Invariant, String),
) {
    let named = |field| r.get(field).and_then(Status::parse);
    match r.op() {
        "acquire" => {
            let claimed = named("status");
            let expected = current.unwrap_or(Status::Init);
            if claimed != Some(expected) {
                violation(
                    Invariant::Transitions,
                    format!("claimed at {claimed:?} while the ticket stood at {expected}"),
                );
            }
        }
        op => {
            let (from, to) = match op {
                "advance" => (named("from"), named("to")),
                _ => (named("from"), Some(Status::Failed)),
            };
            let legal = match (from, to) {
                (Some(from), Some(to)) => Some(from) == current && from.allows(to),
                _ => false,
            };
            if !legal {
                violation(
                    Invariant::Transitions,
                    format!("{from:?} -> {to:?} accepted while the ticket stood at {current:?}"),
                );
            }
        }
    }
}
