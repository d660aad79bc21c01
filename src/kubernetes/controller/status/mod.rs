//! The fenced status mirror: the pipeline's observer. Each ticket the
//! pipeline accepts is mapped into a status (`from_ticket`, `conditions`),
//! planned over what is stored (`plan`, pure), and written conditional on
//! its fence (`writer`); a run's end is recorded as a report (`report`)
//! and said in Events (`events`); the conditions no ticket sets say why no
//! run goes on (`halt`). `mirror` composes them.

pub(super) mod conditions;
pub(super) mod events;
pub(super) mod from_ticket;
pub(super) mod halt;
pub(super) mod mirror;
pub(super) mod plan;
pub(super) mod report;
pub(super) mod writer;
