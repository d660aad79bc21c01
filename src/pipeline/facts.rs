//! Facts as a step hands them to `advance`: each as JSON.

use super::StepError;
use assetscan_domain::ticket::{Fact, Status, Step};
use serde::Serialize;
use std::collections::BTreeMap;

/// Facts as `advance.lua` merges them into the ticket, one field each.
pub(super) type Facts = BTreeMap<Fact, serde_json::Value>;

pub(super) fn to_json(value: &impl Serialize) -> Result<serde_json::Value, StepError> {
    serde_json::to_value(value)
        .map_err(|e| StepError::permanent(format!("cannot record fact: {e}")))
}

/// Whether a step's answer is one its declaration allows
/// ([`assetscan_domain::machine`]): a status it leads to, and only facts it
/// records. The model check and the generated scripts go by the
/// declaration, so the pipeline must not stray from it.
pub(super) fn as_declared(
    step: Step,
    result: &Result<(Status, Facts), (StepError, Facts)>,
) -> bool {
    let declared = step.declared();
    let (to, facts) = match result {
        Ok((to, facts)) => (Some(to), facts),
        Err((_, learned)) => (None, learned),
    };
    to.is_none_or(|to| declared.leads_to.contains(to)) && facts.keys().all(|f| step.records(*f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn an_answer_outside_its_steps_declaration_is_told_apart() {
        let online = Facts::from([(Fact::Online, Value::Bool(true))]);
        let failed = |facts: Facts| Err((StepError::permanent("down"), facts));
        assert!(as_declared(
            Step::OnlineCheck,
            &Ok((Status::AssetOffline, online.clone()))
        ));
        assert!(!as_declared(
            Step::OnlineCheck,
            &Ok((Status::VulnCheckDone, online.clone()))
        ));
        assert!(!as_declared(
            Step::VulnQuery,
            &Ok((Status::VulnCheckDone, online.clone()))
        ));
        let sbom = Facts::from([(Fact::Sbom, Value::Null)]);
        assert!(as_declared(Step::VulnQuery, &failed(sbom)));
        assert!(!as_declared(Step::Notify, &failed(online)));
    }
}
