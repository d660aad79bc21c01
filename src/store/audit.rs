//! Reading an asset's audit stream: every acquire, release, accepted write
//! and rejected write, as the scripts recorded them.

use super::StoreError;
use super::conn::RedisConn;
use redis::streams::StreamRangeReply;
use serde::Serialize;
use std::collections::BTreeMap;

/// One audit record. `fields` holds what the script wrote (`op`, `result`,
/// `token`, `valid`, `from`, `to`, `revision`, `holder`, `at`, …).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AuditEntry {
    /// Stream id (`<ms>-<seq>`): the order Redis applied them in.
    pub id: String,
    pub fields: BTreeMap<String, String>,
}

impl AuditEntry {
    pub fn get(&self, field: &str) -> Option<&str> {
        self.fields.get(field).map(String::as_str)
    }

    /// `op` field: `acquire`, `advance`, `release`, `renew`, `retire` or
    /// `supersede`.
    pub fn op(&self) -> &str {
        self.get("op").unwrap_or("")
    }

    /// Whether the write was accepted (`result` is `ok`).
    pub fn accepted(&self) -> bool {
        self.get("result") == Some("ok")
    }

    /// The fencing token the record is about, if it has one.
    pub fn token(&self) -> Option<u64> {
        self.get("token").and_then(|t| t.parse().ok())
    }
}

pub(super) async fn read(
    conn: &mut RedisConn,
    key: &str,
    count: usize,
) -> Result<Vec<AuditEntry>, StoreError> {
    let reply: StreamRangeReply = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .arg("COUNT")
        .arg(count)
        .query_async(conn)
        .await
        .map_err(StoreError::redis("read audit"))?;
    Ok(reply
        .ids
        .into_iter()
        .map(|entry| AuditEntry {
            fields: entry
                .map
                .iter()
                .filter_map(|(k, v)| {
                    redis::from_redis_value_ref::<String>(v)
                        .ok()
                        .map(|v| (k.clone(), v))
                })
                .collect(),
            id: entry.id,
        })
        .collect())
}
