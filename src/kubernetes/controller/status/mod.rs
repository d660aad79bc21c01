//! The fenced status mirror: the pipeline's observer. Each ticket the
//! pipeline accepts is mapped into a status (`from_ticket`, `conditions`),
//! planned over what is stored (`plan`, pure), and written conditional on
//! its fence (`writer`); a run's end is recorded as a report (`report`)
//! and said in Events (`events`); the conditions no ticket sets say why no
//! run goes on (`halt`). `mirror` composes them.

pub mod conditions;
pub mod events;
pub mod from_ticket;
pub mod halt;
pub mod mirror;
pub mod plan;
pub mod report;
pub mod writer;
