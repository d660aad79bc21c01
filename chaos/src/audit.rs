//! Reading what Redis recorded, with a client of the run's own: the audit
//! streams (per asset while the run supervises its drills; all of them in
//! a snapshot, with writes paused, before Redis loses its data and at the
//! end) and the ticket keys left over. Raw commands on the documented key
//! layout (`<prefix>:{<asset>}:audit`, `…:ticket:<run>`, and the
//! namespaced family `<prefix>:n:<namespace>:{<asset>}:…`), nothing of the
//! operator's store code.

use crate::ChaosError;
use crate::history::{AssetIdentity, AuditRecord};
use crate::objects::NAMESPACE;
use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
use redis::streams::StreamRangeReply;
use std::collections::BTreeMap;
use std::time::Duration;

/// The operator config's key prefix.
pub const PREFIX: &str = "asc";

pub struct RedisView {
    url: String,
}

fn failed(context: impl Into<String>) -> impl FnOnce(redis::RedisError) -> ChaosError {
    let context = context.into();
    move |source| ChaosError::Redis { context, source }
}

impl RedisView {
    pub fn new(url: &str) -> RedisView {
        RedisView {
            url: url.to_owned(),
        }
    }

    /// A fresh connection each time: the server is killed and restarted
    /// during the run. Generous bounds: the machine may be busy, and a
    /// snapshot reads every stream.
    async fn conn(&self) -> Result<MultiplexedConnection, ChaosError> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(10)))
            .set_response_timeout(Some(Duration::from_secs(30)));
        redis::Client::open(self.url.as_str())
            .map_err(failed("redis url"))?
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(failed("connect"))
    }

    /// One asset's audit, oldest first: the legacy family's stream (the
    /// bridge on), then the namespaced one of the run's objects (the bridge
    /// off, as on a new install); a run writes one of them. Each record is
    /// filed under its stream's identity, as [`RedisView::snapshot`] files
    /// it.
    pub async fn audit(&self, asset: &str, epoch: u32) -> Result<Vec<AuditRecord>, ChaosError> {
        let mut conn = self.conn().await?;
        let mut records = Vec::new();
        for identity in [
            AssetIdentity::legacy(asset),
            AssetIdentity::namespaced(NAMESPACE, asset),
        ] {
            records.extend(read_stream(&mut conn, identity, epoch).await?);
        }
        Ok(records)
    }

    /// Stops every client write (scripts included) for up to `ms`, so that
    /// a snapshot followed by the kill of the server misses nothing: writes
    /// that wait for the pause never happen.
    pub async fn pause_writes(&self, ms: u64) -> Result<(), ChaosError> {
        let mut conn = self.conn().await?;
        redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(ms)
            .arg("WRITE")
            .query_async::<()>(&mut conn)
            .await
            .map_err(failed("CLIENT PAUSE"))
    }

    /// Every audit stream, stream by stream: the legacy family's, then
    /// those of the namespaced family (written with the bridge off), each
    /// record under the identity of its stream's key (the namespace too,
    /// in the namespaced family: two namespaces' AssetScans of one assetId
    /// are two assets there, each with its own fence).
    pub async fn snapshot(&self, epoch: u32) -> Result<Vec<AuditRecord>, ChaosError> {
        let mut conn = self.conn().await?;
        let mut records = Vec::new();
        let mut keys = scan(&mut conn, &format!("{PREFIX}:{{*}}:audit")).await?;
        keys.extend(scan(&mut conn, &format!("{PREFIX}:n:*:{{*}}:audit")).await?);
        for key in keys {
            let Some((identity, "audit")) = AssetIdentity::of_key(&key) else {
                continue;
            };
            records.extend(read_stream(&mut conn, identity, epoch).await?);
        }
        // Stable: one stream's records stay together, in order.
        records.sort_by(|a, b| a.identity.cmp(&b.identity));
        Ok(records)
    }

    /// Ticket keys present now (the ticket and, where kept apart, its facts).
    pub async fn ticket_keys(&self) -> Result<Vec<String>, ChaosError> {
        let mut conn = self.conn().await?;
        let mut keys = Vec::new();
        for family in [format!("{PREFIX}:{{*}}"), format!("{PREFIX}:n:*:{{*}}")] {
            keys.extend(scan(&mut conn, &format!("{family}:ticket:*")).await?);
            keys.extend(scan(&mut conn, &format!("{family}:facts:*")).await?);
        }
        keys.sort();
        Ok(keys)
    }
}

async fn scan(conn: &mut MultiplexedConnection, pattern: &str) -> Result<Vec<String>, ChaosError> {
    let mut cursor: u64 = 0;
    let mut keys = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .map_err(failed(format!("SCAN {pattern}")))?;
        keys.extend(batch);
        if next == 0 {
            keys.sort();
            keys.dedup();
            return Ok(keys);
        }
        cursor = next;
    }
}

/// The records of `identity`'s audit stream, each filed under it.
async fn read_stream(
    conn: &mut MultiplexedConnection,
    identity: AssetIdentity,
    epoch: u32,
) -> Result<Vec<AuditRecord>, ChaosError> {
    let key = identity.key(PREFIX, "audit");
    let reply: StreamRangeReply = redis::cmd("XRANGE")
        .arg(&key)
        .arg("-")
        .arg("+")
        .query_async(conn)
        .await
        .map_err(failed(format!("XRANGE {key}")))?;
    Ok(reply
        .ids
        .into_iter()
        .map(|entry| AuditRecord {
            epoch,
            identity: identity.clone(),
            fields: entry
                .map
                .iter()
                .filter_map(|(k, v)| {
                    redis::from_redis_value_ref::<String>(v)
                        .ok()
                        .map(|v| (k.clone(), v))
                })
                .collect::<BTreeMap<_, _>>(),
            id: entry.id,
        })
        .collect())
}
