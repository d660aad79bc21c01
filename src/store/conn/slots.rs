//! Requests sent to one Redis Cluster node at a time, and which node serves
//! which hash slot. The cluster client routes each command by its own map;
//! a pipeline of calls to keys of many slots needs the caller to know the
//! node of each key, so that one node's calls share one round trip (the
//! watchdog's renewals).

use super::{Link, RedisConn};
use redis::aio::ConnectionLike;
use redis::cluster_routing::{Route, SingleNodeRoutingInfo, Slot, SlotAddr};
use redis::{Pipeline, RedisResult, Script, Value};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use tracing::debug;

/// A node's address: host and port, as `CLUSTER SLOTS` names it.
pub(crate) type Node = (String, u16);

/// Items sent in one round trip, and the node they are sent to: `None` for
/// a standalone server, or an item routed by its own key.
pub(crate) struct NodeGroup<T> {
    pub(crate) node: Option<Node>,
    pub(crate) items: Vec<T>,
}

/// The slot ranges of a Cluster by node, from `CLUSTER SLOTS`: read when
/// first needed, and again after its user invalidated it (a request that
/// failed may have met a node that moved or failed over).
#[derive(Default)]
pub(crate) struct SlotMap {
    /// (first slot, last slot, node host, node port), sorted by first slot.
    ranges: Vec<(u16, u16, String, u16)>,
}

impl SlotMap {
    /// Forgets the map: the next grouping reads it again.
    pub(crate) fn invalidate(&mut self) {
        self.ranges.clear();
    }

    async fn refresh(&mut self, conn: &mut RedisConn) {
        let reply: redis::RedisResult<Vec<Vec<redis::Value>>> =
            redis::cmd("CLUSTER").arg("SLOTS").query_async(conn).await;
        let Ok(rows) = reply else { return };
        let mut ranges = Vec::new();
        for row in rows {
            let (Some(redis::Value::Int(first)), Some(redis::Value::Int(last)), Some(node)) =
                (row.first(), row.get(1), row.get(2))
            else {
                continue;
            };
            let redis::Value::Array(parts) = node else {
                continue;
            };
            let (Some(redis::Value::BulkString(host)), Some(redis::Value::Int(port))) =
                (parts.first(), parts.get(1))
            else {
                continue;
            };
            ranges.push((
                *first as u16,
                *last as u16,
                String::from_utf8_lossy(host).into_owned(),
                *port as u16,
            ));
        }
        ranges.sort();
        self.ranges = ranges;
    }

    fn node_of(&self, key: &str) -> Option<Node> {
        let slot = hash_slot(key);
        self.ranges
            .iter()
            .find(|(first, last, _, _)| (*first..=*last).contains(&slot))
            .map(|(_, _, host, port)| (host.clone(), *port))
    }

    /// Splits `items` into one group per node, by the key `key_of` names for
    /// each (all of an item's keys must be of that key's node). Items
    /// without a key, or of a slot the map does not know, go alone, to be
    /// routed by their key.
    pub(crate) async fn group_by_node<T>(
        &mut self,
        conn: &mut RedisConn,
        items: Vec<T>,
        key_of: impl Fn(&T) -> Option<&str>,
    ) -> Vec<NodeGroup<T>> {
        if self.ranges.is_empty() {
            self.refresh(conn).await;
        }
        let mut by_node: HashMap<Node, Vec<T>> = HashMap::new();
        let mut groups = Vec::new();
        for item in items {
            match key_of(&item).and_then(|k| self.node_of(k)) {
                Some(node) => by_node.entry(node).or_default().push(item),
                None => groups.push(NodeGroup {
                    node: None,
                    items: vec![item],
                }),
            }
        }
        groups.extend(by_node.into_iter().map(|(node, items)| NodeGroup {
            node: Some(node),
            items,
        }));
        groups
    }
}

impl RedisConn {
    /// Sends `pipe`, `count` EVALSHA calls of `script`, to `node` as one
    /// request. A node that lost its scripts (a restart, a failover) is
    /// given `script` and asked once more: `Script` does that for one call,
    /// not for a pipeline. Off a Cluster the one connection takes it.
    pub(crate) async fn script_calls_on(
        &mut self,
        node: &Node,
        script: &Script,
        pipe: Pipeline,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        if !self.is_cluster() {
            return self.req_packed_commands(&pipe, 0, count).await;
        }
        let (host, port) = node;
        let route = SingleNodeRoutingInfo::ByAddress {
            host: host.clone(),
            port: *port,
        };
        let mut replies = self.routed(route.clone(), &pipe, count).await;
        let lost_scripts = match &replies {
            Err(err) => err.code() == Some("NOSCRIPT"),
            Ok(values) => values
                .iter()
                .any(|v| matches!(v, Value::ServerError(e) if e.code() == "NOSCRIPT")),
        };
        if lost_scripts {
            debug!(node = %host, script = script.get_hash(), "loading a lost script");
            if let Link::Cluster(cluster) = &mut self.link {
                script.load_async(cluster).await?;
            }
            replies = self.routed(route, &pipe, count).await;
        }
        replies
    }

    /// Sends `pipe` (`count` replies) as one request to the node that takes
    /// `key`'s writes: on a Cluster, the master of its slot, so that a
    /// script and the `WAIT` behind it reach the same node.
    pub(crate) async fn pipeline_on_master_of(
        &mut self,
        key: &str,
        pipe: &Pipeline,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let route = SingleNodeRoutingInfo::SpecificNode(Route::with_slot(
            Slot::for_key(key),
            SlotAddr::Master,
        ));
        self.routed(route, pipe, count).await
    }

    /// `pipe` on the Cluster's node `route` names, counted as one round
    /// trip; off a Cluster, on the one connection.
    async fn routed(
        &mut self,
        route: SingleNodeRoutingInfo,
        pipe: &Pipeline,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let Link::Cluster(cluster) = &mut self.link else {
            return self.req_packed_commands(pipe, 0, count).await;
        };
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        cluster.route_pipeline(pipe.clone(), 0, count, route).await
    }
}

/// Redis Cluster's hash slot: CRC16 (XMODEM) of the hash tag, mod 16384.
fn hash_slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes
        .iter()
        .position(|b| *b == b'{')
        .and_then(|open| {
            let rest = &bytes[open + 1..];
            rest.iter()
                .position(|b| *b == b'}')
                .filter(|close| *close > 0)
                .map(|close| &rest[..close])
        })
        .unwrap_or(bytes);
    crc16::State::<crc16::XMODEM>::calculate(tagged) % 16384
}

#[cfg(test)]
mod tests {
    use super::hash_slot;

    #[test]
    fn hash_slot_matches_redis() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(hash_slot("123456789"), 0x31C3);
        assert_eq!(hash_slot("foo"), 12182);
        assert_eq!(hash_slot("{user1000}.following"), hash_slot("user1000"));
        // An empty tag does not count: the whole key is hashed.
        assert_ne!(hash_slot("foo{}{bar}"), hash_slot("bar"));
    }
}
