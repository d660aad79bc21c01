//! `ticket show|history|list`: reading tickets and their audit history, for
//! troubleshooting. Read-only: nothing here takes a lock or writes.

use crate::store::{AuditEntry, TicketStore};
use assetscan_domain::AssetId;
use assetscan_domain::ticket::Ticket;
use std::fmt::Write;

/// `ticket show`: the ticket as JSON (pretty).
pub fn show(ticket: &Ticket) -> String {
    serde_json::to_string_pretty(ticket).unwrap_or_else(|e| format!("unprintable ticket: {e}"))
}

/// `ticket history`: the audit stream as a table, oldest first.
pub fn history_table(entries: &[AuditEntry]) -> String {
    let mut out = history_row([
        "TIME",
        "OP",
        "RESULT",
        "TOKEN",
        "VALID",
        "FROM",
        "TO",
        "REV",
        "HOLDER/TICKET",
    ]);
    for e in entries {
        let at = e
            .get("at")
            .and_then(|ms| ms.parse::<i64>().ok())
            .and_then(|ms| k8s_openapi::jiff::Timestamp::from_millisecond(ms).ok())
            .map(|t| t.to_string())
            .unwrap_or_else(|| "-".into());
        let field = |name: &str| e.get(name).unwrap_or("-");
        let who = e
            .get("holder")
            .or_else(|| e.get("ticket").and_then(|t| t.rsplit(':').next()))
            .unwrap_or("-");
        out.push_str(&history_row([
            &at,
            e.op(),
            field("result"),
            field("token"),
            field("valid"),
            field("from"),
            field("to"),
            field("revision"),
            who,
        ]));
    }
    out
}

fn history_row(cols: [&str; 9]) -> String {
    let [at, op, result, token, valid, from, to, revision, who] = cols;
    let at: String = at.chars().take(24).collect();
    format!(
        "{at:<24} {op:<8} {result:<19} {token:>6} {valid:>6} {from:<17} {to:<17} {revision:>4}  {who}\n"
    )
}

/// `ticket list`: one line per ticket: key, status, token, revision.
pub async fn list(
    store: &TicketStore,
    asset: Option<&AssetId>,
) -> Result<String, crate::store::StoreError> {
    let keys = store.ticket_keys().await?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<40} {:<24} {:<17} {:>6} {:>4}",
        "ASSET", "RUN", "STATUS", "TOKEN", "REV"
    );
    for key in keys {
        let Some((asset_id, run)) = parse_ticket_key(store, &key) else {
            continue;
        };
        if asset.is_some_and(|a| a.as_str() != asset_id) {
            continue;
        }
        let Ok(id) = AssetId::new(asset_id.clone()) else {
            continue;
        };
        let line = match store.get_ticket(&id, &run).await {
            Ok(Some(t)) => format!(
                "{:<40} {:<24} {:<17} {:>6} {:>4}",
                asset_id, run, t.status, t.fencing_token, t.revision
            ),
            Ok(None) => continue,
            Err(err) => format!("{asset_id:<40} {run:<24} unreadable: {err}"),
        };
        let _ = writeln!(out, "{line}");
    }
    Ok(out)
}

/// Splits `<prefix>:{<asset>}:ticket:<run>`.
fn parse_ticket_key(store: &TicketStore, key: &str) -> Option<(String, String)> {
    let rest = key.strip_prefix(&format!("{}:{{", store.config().prefix))?;
    let (asset, rest) = rest.split_once("}:ticket:")?;
    Some((asset.to_owned(), rest.to_owned()))
}
