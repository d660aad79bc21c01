//! Facts as a step hands them to `advance`: by name, as JSON.

use super::StepError;
use serde::Serialize;

/// Facts by name, as `advance.lua` merges them into the ticket.
pub(super) type Facts = serde_json::Map<String, serde_json::Value>;

pub(super) fn to_json(value: &impl Serialize) -> Result<serde_json::Value, StepError> {
    serde_json::to_value(value)
        .map_err(|e| StepError::permanent(format!("cannot record fact: {e}")))
}
