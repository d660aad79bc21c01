//! Writing a claimed run: `advance.lua`, the only write to a ticket after
//! its claim, accepted only under the ticket's own token and along the
//! state machine's table.

use super::replica_ack::{guards_side_effect, invoke_acknowledged};
use super::scripts::{ADVANCE, AdvanceArgs, argument_object};
use super::{StoreError, TicketStore, assemble, corrupt, millis};
use assetscan_domain::AssetId;
use assetscan_domain::asset::validate_run;
use assetscan_domain::ticket::{Fact, LastError, Status, Step, Ticket, now_ms};
use serde::Serialize;
use std::collections::BTreeMap;

/// What a step learned, merged into the ticket by `advance.lua`. Its JSON
/// is the `patch` of the script's argument object; the facts travel beside
/// it, each as its own JSON, so that the script stores them without
/// decoding them.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Patch {
    /// Facts, each replaced whole (sent under its name: `online`,
    /// `vulnerabilities`, …).
    #[serde(skip)]
    pub facts: BTreeMap<Fact, serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub complete_step: Option<Step>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub attempts: BTreeMap<Step, u32>,
    #[serde(skip_serializing_if = "LastErrorChange::is_keep")]
    pub last_error: LastErrorChange,
}

/// What a write does to the ticket's last error. `advance.lua` tells the
/// three apart by the patch's `last_error`: absent, `null`, or the error.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum LastErrorChange {
    /// Leaves it as it is: a write that says nothing about the step's
    /// failures (a move, a verdict).
    #[default]
    Keep,
    /// Removes it: the step it was about has completed.
    Clear,
    /// Records this failure: an attempt failed, or the step's retries ended.
    Set(LastError),
}

impl LastErrorChange {
    fn is_keep(&self) -> bool {
        *self == LastErrorChange::Keep
    }
}

impl Serialize for LastErrorChange {
    /// The error, or `null` to clear it. A patch leaves the key out for
    /// [`LastErrorChange::Keep`] before it gets here.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            LastErrorChange::Keep | LastErrorChange::Clear => serializer.serialize_none(),
            LastErrorChange::Set(error) => error.serialize(serializer),
        }
    }
}

impl Patch {
    /// Sets one fact.
    pub fn fact(mut self, fact: Fact, value: impl Serialize) -> Patch {
        let value = serde_json::to_value(value).unwrap_or(serde_json::Value::Null);
        self.facts.insert(fact, value);
        self
    }

    /// Marks `step` done and clears the last error.
    pub fn completes(mut self, step: Step) -> Patch {
        self.complete_step = Some(step);
        self.last_error = LastErrorChange::Clear;
        self
    }
}

impl TicketStore {
    /// Moves the ticket to `to` with `patch`, if `token` is still the
    /// ticket's and the transition is legal, and returns it with all its
    /// facts (read in the same step). For tools and tests; an executor
    /// holding the ticket uses [`TicketStore::advance_from`].
    pub async fn advance(
        &self,
        asset: &AssetId,
        run: &str,
        token: u64,
        to: Status,
        patch: &Patch,
    ) -> Result<Ticket, StoreError> {
        let key = self.keys(asset).ticket(run);
        let (raw, facts): (String, Vec<(String, String)>) = self
            .send_advance(asset, run, token, to, patch, true)
            .await?;
        assemble(&key, &raw, &facts)
    }

    /// [`TicketStore::advance`] by the executor holding `base`, the ticket
    /// as of its last accepted write or its claim: the one write path after
    /// a claim. Only the patch's facts are sent and only the header comes
    /// back; the facts are `base`'s with the patch's. That is exact because
    /// an accepted write proves that nobody wrote since `base` (any other
    /// writer would have changed the token); should the revision say
    /// otherwise, the facts are read again.
    pub async fn advance_from(
        &self,
        asset: &AssetId,
        base: &Ticket,
        token: u64,
        to: Status,
        patch: &Patch,
    ) -> Result<Ticket, StoreError> {
        let key = self.keys(asset).ticket(&base.run);
        let raw: String = match self
            .send_advance(asset, &base.run, token, to, patch, false)
            .await
        {
            Ok(raw) => raw,
            Err(refused @ StoreError::IllegalTransition { .. }) if to.is_terminal() => {
                return self
                    .applied_before(asset, &base.run, token, to, refused)
                    .await;
            }
            Err(err) => return Err(err),
        };
        let mut ticket = assemble(&key, &raw, &[])?;
        if ticket.revision != base.revision + 1 {
            return self
                .get_ticket(asset, &base.run)
                .await?
                .ok_or(StoreError::TicketNotFound { key });
        }
        ticket.facts = base.facts.clone();
        for (fact, value) in &patch.facts {
            ticket
                .facts
                .set(*fact, value)
                .map_err(|e| corrupt(&key, &e))?;
        }
        Ok(ticket)
    }

    /// The answer to a write to terminal `to` that was `refused` as illegal:
    /// the ticket, if it is already at `to` under `token`. A request resent
    /// after its connection broke (`conn`) meets its own first attempt that
    /// way; only the holder of `token` writes under it, so that write was
    /// this one. Anything else stays refused.
    async fn applied_before(
        &self,
        asset: &AssetId,
        run: &str,
        token: u64,
        to: Status,
        refused: StoreError,
    ) -> Result<Ticket, StoreError> {
        match self.get_ticket(asset, run).await? {
            Some(ticket) if ticket.status == to && ticket.fencing_token == token => Ok(ticket),
            _ => Err(refused),
        }
    }

    /// One `advance.lua` call; with `with_facts`, the reply also carries
    /// the facts hash. A write that records a side effect's intent or
    /// receipt waits for a replica, when so configured (`replica_ack`).
    async fn send_advance<T: redis::FromRedisValue>(
        &self,
        asset: &AssetId,
        run: &str,
        token: u64,
        to: Status,
        patch: &Patch,
        with_facts: bool,
    ) -> Result<T, StoreError> {
        validate_run(run)?;
        let keys = self.keys(asset);
        let ticket_key = keys.ticket(run);
        let protocol = |e: serde_json::Error| StoreError::Protocol {
            script: "advance",
            reason: e.to_string(),
        };
        let mut invocation = ADVANCE.key(&ticket_key);
        invocation.key(keys.audit()).key(keys.facts(run));
        let legacy = keys.legacy();
        if let Some(legacy) = &legacy {
            invocation.key(legacy.ticket(run)).key(legacy.facts(run));
        }
        invocation.arg(argument_object(
            "advance",
            &AdvanceArgs {
                token,
                to,
                now: now_ms(),
                patch,
                keep_terminal_ms: millis(self.config.terminal_retention),
                keep_open_ms: millis(self.config.abandon_after),
                audit_cap: self.config.audit_cap,
                return_facts: with_facts,
                bridge: legacy.is_some(),
            },
        )?);
        for (fact, value) in &patch.facts {
            invocation
                .arg(fact.as_str())
                .arg(serde_json::to_string(value).map_err(protocol)?);
        }
        let mut conn = self.conn.clone();
        match &self.replica_ack {
            Some(wait) if guards_side_effect(to) => {
                invoke_acknowledged(
                    &mut conn,
                    &ADVANCE,
                    &invocation,
                    ("advance", &ticket_key),
                    wait,
                )
                .await
            }
            _ => invocation
                .invoke_async(&mut conn)
                .await
                .map_err(|e| StoreError::from_redis("advance", &ticket_key, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_error_is_left_out_cleared_with_null_or_sent() {
        let json = |patch: &Patch| serde_json::to_string(patch).unwrap();
        assert_eq!(json(&Patch::default()), "{}");
        let done = Patch::default().completes(Step::Notify);
        assert_eq!(
            json(&done),
            r#"{"complete_step":"notify","last_error":null}"#
        );
        let failed = Patch {
            last_error: LastErrorChange::Set(LastError {
                step: Step::Notify,
                message: "timed out".to_owned(),
                at: 7,
                attempt: 2,
            }),
            ..Patch::default()
        };
        assert_eq!(
            json(&failed),
            r#"{"last_error":{"step":"notify","message":"timed out","at":7,"attempt":2}}"#
        );
    }
}
