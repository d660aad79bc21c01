//! What a chaos run recorded, and all the checker reads: the audit streams
//! of every asset (snapshotted before the data loss and at the end), the
//! API server's history of every AssetScan status write, the deliveries the
//! notification receivers saw, and what became of every operator process.
//! It is plain data (saved as JSON with each run), so the checker can be
//! fed a recorded history with a fault injected into it.

use crate::objects::{Channel, Kind, NAMESPACE};
use assetscan_operator::domain::ticket::Status;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    pub objects: Vec<ObjectHistory>,
    /// Every audit record, in the order Redis applied them: by epoch, then
    /// by stream id within an asset's stream.
    pub audit: Vec<AuditRecord>,
    /// The moments Redis lost its data.
    pub data_losses: Vec<DataLoss>,
    /// In the order each receiver accepted them.
    pub deliveries: Vec<Delivery>,
    pub processes: Vec<ProcessRecord>,
    /// Ticket keys left in Redis at the end (`…:ticket:<run>`, and
    /// `…:facts:<run>` where facts are kept apart).
    pub leftover_keys: Vec<String>,
    /// What the time from a confirmed high risk to its notification is
    /// checked against. Absent from histories recorded before it was: their
    /// times are measured, not checked.
    #[serde(default)]
    pub timing: Timing,
}

/// The operator's settings that bound the time from a confirmed high risk
/// to its notification, and the spells during which nothing could make
/// progress whatever the operator did (docs/guarantees.md, "How soon a
/// confirmed high risk goes out").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// `lock.ttl`: how long a stalled or killed executor holds a run.
    pub lock_ttl_ms: u64,
    /// `steps.notify.maxBackoff`: the wait before a deferred notification
    /// is tried again.
    pub notify_max_backoff_ms: u64,
    /// The longest a reconcile waits for the watch to deliver its own
    /// status write before it reads the object instead (the operator's
    /// `DELIVERY_WAIT`).
    #[serde(default)]
    pub cache_wait_ms: u64,
    /// One notify pass at worst: every attempt times out,
    /// `maxAttempts × timeout + (maxAttempts − 1) × maxBackoff`.
    pub notify_pass_ms: u64,
    /// In the order they began.
    pub outages: Vec<Outage>,
}

impl Timing {
    /// How long the outages of `cause` lasted in all, in seconds.
    pub fn seconds_of(&self, cause: OutageCause) -> f64 {
        let ms: u64 = self
            .outages
            .iter()
            .filter(|o| o.cause == cause)
            .map(|o| o.to_ms.saturating_sub(o.from_ms))
            .sum();
        ms as f64 / 1000.0
    }
}

/// A spell during which no run could make progress.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outage {
    pub cause: OutageCause,
    /// Unix ms, on the clock the audit's `at` fields use (one machine).
    pub from_ms: u64,
    pub to_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutageCause {
    /// redis-server was down.
    Redis,
    /// The API server did not answer.
    ApiServer,
    /// Every replica was stopped or killed.
    NoReplicaRunning,
}

/// One AssetScan: what it is, and what the API server stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ObjectHistory {
    pub name: String,
    /// Absent from histories recorded before the upgrade test spread its
    /// AssetScans over two namespaces: all of those were in [`NAMESPACE`].
    #[serde(default = "chaos_namespace")]
    pub namespace: String,
    pub asset: String,
    pub kind: Kind,
    /// The chaos run deleted it.
    pub deleted: bool,
    /// Every accepted write through `/status`, oldest first.
    pub status_writes: Vec<StatusWrite>,
    /// The object as stored at the end; `None` when it is gone.
    pub last: Option<Value>,
}

fn chaos_namespace() -> String {
    NAMESPACE.to_owned()
}

impl ObjectHistory {
    /// Where its records may be filed, as the operator keys the object:
    /// under its namespace and assetId (the bridge off), and under the
    /// assetId alone, 0.1.0's layout (0.1.0 itself, or the bridge on), which
    /// every namespace's object of that assetId shares. A record of the
    /// latter is this object's only if its run is: a run id starts with the
    /// object's uid, so no other object's run has it.
    pub fn identities(&self) -> [AssetIdentity; 2] {
        [
            AssetIdentity::namespaced(&self.namespace, &self.asset),
            AssetIdentity::legacy(&self.asset),
        ]
    }

    /// Whether its status ever named `run`: each run's claim is written
    /// there before the run starts, and a run id names one object.
    pub fn ran(&self, run: &str) -> bool {
        self.status_writes.iter().any(|w| w.str("run") == Some(run))
            || self
                .last
                .as_ref()
                .and_then(|o| o.pointer("/status/run"))
                .and_then(Value::as_str)
                == Some(run)
    }

    /// `spec.notify`, as the object last had it.
    pub fn channels(&self) -> Vec<String> {
        self.last
            .as_ref()
            .and_then(|o| o.pointer("/spec/notify"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|c| c.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Whether a phase ends a run, as the state machine declares it (the
/// operator's own declaration, not a copy of it).
pub fn is_terminal(phase: Option<&str>) -> bool {
    phase
        .and_then(Status::parse)
        .is_some_and(Status::is_terminal)
}

/// Whether a stored AssetScan has settled: its status shows a terminal
/// phase of its current generation.
pub fn is_settled(stored: &Value) -> bool {
    let status = &stored["status"];
    is_terminal(status["phase"].as_str())
        && status["observedGeneration"].as_i64().is_some()
        && status["observedGeneration"].as_i64() == stored["metadata"]["generation"].as_i64()
}

/// One status write as the API server accepted it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusWrite {
    /// The resourceVersion the write was stored under.
    pub resource_version: u64,
    pub status: Value,
}

impl StatusWrite {
    pub fn fence(&self) -> Option<(i64, i64)> {
        Some((
            self.status.get("fencingToken")?.as_i64()?,
            self.status.get("revision")?.as_i64()?,
        ))
    }

    pub fn observed_generation(&self) -> Option<i64> {
        self.status.get("observedGeneration")?.as_i64()
    }

    pub fn str(&self, field: &str) -> Option<&str> {
        self.status.get(field)?.as_str()
    }
}

/// An asset as the operator keys it, and so one audit stream, one fence
/// and one sequence of tokens: its namespace and assetId
/// (`<prefix>:n:<namespace>:{<asset>}:…`), or, in 0.1.0's layout (which
/// the identity bridge keeps writing), its assetId alone
/// (`<prefix>:{<asset>}:…`, shared by every namespace). Two namespaces'
/// AssetScans of one assetId draw their tokens from one fence only in the
/// latter.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AssetIdentity {
    /// `None` in 0.1.0's layout. Absent from histories recorded before the
    /// namespaced family was told apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub asset: String,
}

impl AssetIdentity {
    pub fn legacy(asset: &str) -> AssetIdentity {
        AssetIdentity {
            namespace: None,
            asset: asset.to_owned(),
        }
    }

    pub fn namespaced(namespace: &str, asset: &str) -> AssetIdentity {
        AssetIdentity {
            namespace: Some(namespace.to_owned()),
            asset: asset.to_owned(),
        }
    }

    /// The identity a key of either family is filed under, and what follows
    /// its hash tag (`audit`, `ticket:<run>`, …). A namespace has no `:`
    /// nor `{`; the asset is everything up to the last `}:`.
    pub fn of_key(key: &str) -> Option<(AssetIdentity, &str)> {
        let (head, tail) = key.split_once('{')?;
        let (asset, rest) = tail.rsplit_once("}:")?;
        let parts: Vec<&str> = head.strip_suffix(':')?.split(':').collect();
        let identity = match parts[..] {
            [_prefix] => AssetIdentity::legacy(asset),
            [_prefix, "n", namespace] => AssetIdentity::namespaced(namespace, asset),
            _ => return None,
        };
        Some((identity, rest))
    }

    /// Its key `<prefix>:…{<asset>}:<rest>`.
    pub fn key(&self, prefix: &str, rest: &str) -> String {
        match &self.namespace {
            Some(namespace) => format!("{prefix}:n:{namespace}:{{{}}}:{rest}", self.asset),
            None => format!("{prefix}:{{{}}}:{rest}", self.asset),
        }
    }
}

/// `<namespace>/<asset>`, or the bare asset in 0.1.0's layout.
impl fmt::Display for AssetIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(namespace) => write!(f, "{namespace}/{}", self.asset),
            None => f.write_str(&self.asset),
        }
    }
}

/// One record of an asset's audit stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// How many data losses came before it.
    pub epoch: u32,
    /// The identity of the stream it was read from.
    #[serde(flatten)]
    pub identity: AssetIdentity,
    /// The stream id (`<ms>-<seq>`).
    pub id: String,
    pub fields: BTreeMap<String, String>,
}

impl AuditRecord {
    pub fn get(&self, field: &str) -> Option<&str> {
        self.fields.get(field).map(String::as_str)
    }

    pub fn op(&self) -> &str {
        self.get("op").unwrap_or_default()
    }

    pub fn accepted(&self) -> bool {
        self.get("result") == Some("ok")
    }

    pub fn token(&self) -> Option<u64> {
        self.get("token")?.parse().ok()
    }

    pub fn revision(&self) -> Option<u64> {
        self.get("revision")?.parse().ok()
    }

    /// The run of the ticket the record is about (`…:ticket:<run>`).
    pub fn run(&self) -> Option<&str> {
        self.get("ticket")?
            .rsplit_once(":ticket:")
            .map(|(_, run)| run)
    }

    /// Whether it changed a ticket: a claim, an accepted advance, or the
    /// retirement or supersession of a run still in progress (failed under
    /// a new token).
    pub fn is_ticket_write(&self) -> bool {
        self.accepted()
            && self.run().is_some()
            && match self.op() {
                "acquire" | "advance" => true,
                "retire" | "supersede" => self.get("from").is_some(),
                _ => false,
            }
    }

    /// The status the ticket has after this write.
    pub fn status_after(&self) -> Option<&str> {
        match self.op() {
            "advance" => self.get("to"),
            _ => self.get("status"),
        }
    }
}

/// Redis lost every key: the records of `epoch` and earlier came before.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataLoss {
    pub epoch: u32,
    /// The API server's resourceVersion at that moment: status writes under
    /// a lower one were stored before the loss.
    pub api_resource_version: u64,
}

/// One notification as a receiver accepted it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    pub channel: Channel,
    /// The idempotency key it carried (WeCom: none, the text names the
    /// ticket).
    pub key: Option<String>,
    /// The ticket id (`<asset>/<run>`) the notification is about.
    pub ticket: Option<String>,
    /// The sender's fencing token.
    pub token: Option<u64>,
}

impl Delivery {
    /// `(asset, run)` of its ticket id; a run id has no `/`, an asset may.
    pub fn asset_run(&self) -> Option<(&str, &str)> {
        self.ticket.as_deref()?.rsplit_once('/')
    }
}

/// How an operator process ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Ended {
    /// The chaos run killed it (SIGKILL).
    Killed,
    /// It stopped on SIGTERM at the end of the run, with this exit code.
    Terminated(Option<i32>),
    /// It exited while nobody asked it to: the exit code or signal.
    ByItself(String),
    /// It did not exit within the grace period after SIGTERM.
    Hung,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    pub instance: String,
    pub pid: u32,
    pub ended: Ended,
    /// Log lines that report a panic.
    pub panics: Vec<String>,
}

/// The WeCom message's ticket line: `> ticket <asset>/<run>, fencing token <n>`.
pub fn parse_wecom_ticket_line(text: &str) -> (Option<String>, Option<u64>) {
    let Some((_, rest)) = text.split_once("> ticket ") else {
        return (None, None);
    };
    let Some((ticket, rest)) = rest.split_once(", fencing token ") else {
        return (None, None);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (Some(ticket.to_owned()), digits.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wecom_text_names_ticket_and_token() {
        let text = "## <font color=\"warning\">high risk</font>\n> ticket a.example/x-g1-s0, fencing token 12\n";
        assert_eq!(
            parse_wecom_ticket_line(text),
            (Some("a.example/x-g1-s0".into()), Some(12))
        );
        assert_eq!(parse_wecom_ticket_line("nothing"), (None, None));
    }

    #[test]
    fn ticket_ids_split_at_the_last_slash() {
        let d = Delivery {
            channel: Channel::Webhook,
            key: None,
            ticket: Some("a/b.example/r-g1-s0".into()),
            token: None,
        };
        assert_eq!(d.asset_run(), Some(("a/b.example", "r-g1-s0")));
    }

    #[test]
    fn keys_of_both_families_name_their_identity() {
        let namespaced = AssetIdentity::namespaced("upgrade-a", "x.example");
        let legacy = AssetIdentity::legacy("x.example");
        for identity in [&namespaced, &legacy] {
            let key = identity.key("asc", "ticket:r-g1-s0");
            assert_eq!(
                AssetIdentity::of_key(&key),
                Some((identity.clone(), "ticket:r-g1-s0"))
            );
        }
        assert_eq!(
            namespaced.key("asc", "audit"),
            "asc:n:upgrade-a:{x.example}:audit"
        );
        assert_eq!(legacy.key("asc", "audit"), "asc:{x.example}:audit");
        assert_eq!(AssetIdentity::of_key("asc:x:y:{a}:audit"), None);
        assert_eq!(AssetIdentity::of_key("asc:{a}"), None);
    }

    #[test]
    fn an_audit_record_keeps_its_json_shape() {
        let record = AuditRecord {
            epoch: 0,
            identity: AssetIdentity::legacy("a"),
            id: "1-0".into(),
            fields: BTreeMap::new(),
        };
        let json = serde_json::to_value(&record).expect("json");
        assert_eq!(json["asset"], "a");
        assert!(json.get("namespace").is_none());
        let namespaced: AuditRecord = serde_json::from_value(serde_json::json!({
            "epoch": 1, "namespace": "upgrade-b", "asset": "a", "id": "1-0", "fields": {}
        }))
        .expect("record");
        assert_eq!(
            namespaced.identity,
            AssetIdentity::namespaced("upgrade-b", "a")
        );
    }
}
