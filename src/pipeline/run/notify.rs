//! The notify step of a run: the channels still without a receipt, and
//! the message they get, the same for every executor.

use super::Run;
use crate::pipeline::facts::{Facts, to_json};
use crate::pipeline::{Effects, Notification, Observer, Resend, StepError};
use assetscan_domain::ticket::{
    Fact, NotificationFacts, NotificationState, RiskFacts, Status, Ticket, now_ms,
};
use std::collections::BTreeMap;

impl<E: Effects, O: Observer> Run<'_, E, O> {
    /// Sends to the channels that have not confirmed yet (a retry or a
    /// takeover skips those with a receipt) and records each receipt.
    pub(super) async fn notify(
        &self,
        ticket: &Ticket,
    ) -> Result<(Status, Facts), (StepError, Facts)> {
        let mut facts = ticket
            .facts
            .notification
            .clone()
            .unwrap_or_else(|| NotificationFacts {
                idempotency_key: ticket.id.clone(),
                state: NotificationState::Sending,
                sent_at: None,
                attempted_at: None,
                receipt: BTreeMap::new(),
                channels: self.req.channels.clone(),
            });
        let pending: Vec<String> = self
            .req
            .channels
            .iter()
            .filter(|c| !facts.receipt.contains_key(*c))
            .cloned()
            .collect();
        let results = self
            .pipeline
            .effects
            .notify(&pending, &self.notification(ticket, &facts))
            .await;
        let mut failures = Vec::new();
        for (channel, result) in results {
            match result {
                Ok(receipt) => {
                    facts.receipt.insert(channel, receipt);
                }
                Err(error) => failures.push((channel, error)),
            }
        }
        if failures.is_empty() {
            facts.state = if self.req.channels.is_empty() {
                NotificationState::Skipped
            } else {
                NotificationState::Sent
            };
            facts.sent_at = (!self.req.channels.is_empty()).then(now_ms);
            let recorded = to_json(&facts).map_err(|e| (e, Facts::new()))?;
            return Ok((
                Status::Notified,
                Facts::from([(Fact::Notification, recorded)]),
            ));
        }
        let error = StepError {
            message: failures
                .iter()
                .map(|(name, e)| format!("channel {name}: {}", e.message))
                .collect::<Vec<_>>()
                .join("; "),
            retryable: failures.iter().all(|(_, e)| e.retryable),
            retry_after: failures.iter().filter_map(|(_, e)| e.retry_after).max(),
        };
        let partial = to_json(&facts).map(|v| Facts::from([(Fact::Notification, v)]));
        Err((error, partial.unwrap_or_default()))
    }

    /// The notification is built from the ticket and the object that asked
    /// for the run (the same for every executor), so a re-send after a
    /// takeover is the same message under the same key; any send but the
    /// one right after this pass wrote the intent is marked as a re-send,
    /// with the first attempt's time from the intent (`facts`).
    fn notification(&self, ticket: &Ticket, facts: &NotificationFacts) -> Notification {
        let first = self
            .first_send
            .swap(false, std::sync::atomic::Ordering::Relaxed);
        Notification {
            ticket_id: ticket.id.clone(),
            asset: ticket.asset.clone(),
            run: ticket.run.clone(),
            fencing_token: ticket.fencing_token,
            risk: ticket.facts.risk.clone().unwrap_or(RiskFacts {
                high_risk: true,
                reasons: Vec::new(),
                confirmed_at: None,
            }),
            vulnerabilities: ticket.facts.vulnerabilities.clone().unwrap_or_default(),
            threat_intel: ticket.facts.threat_intel.clone(),
            origin: self.req.origin.clone(),
            resend: (!first).then_some(Resend {
                first_attempt_at: facts.attempted_at,
            }),
        }
    }
}
