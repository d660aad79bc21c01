//! The scripts' arguments, against a real redis-server: the argument object
//! (ARGV[1], JSON, version 1) and the positional form it replaces, which is
//! deprecated and accepted until 0.3.0. Both forms of one call leave Redis
//! exactly as the other does; an argument object that is malformed, of an
//! unknown version or at odds with its KEYS is refused with `BAD_ARGS`,
//! writing nothing; and the holders of either form fence each other.

mod kit;

use assetscan_testkit::redis::RedisServer;
use kit::setup::connect;
use redis::aio::MultiplexedConnection;
use redis::{Script, Value};
use serde_json::{Value as Json, json};
use std::collections::BTreeMap;
use std::sync::LazyLock;

static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/acquire.lua")));
static ADVANCE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/advance.lua")));
static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/release.lua")));
static RETIRE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../lua/retire.lua")));

const NOW: u64 = 1_700_000_000_000;
const TTL: u64 = 30_000;
const KEEP_OPEN: u64 = 86_400_000;
const KEEP_TERMINAL: u64 = 604_800_000;

/// One script call, written in both forms.
struct Call {
    script: &'static Script,
    keys: Vec<String>,
    /// ARGV of the positional form, whole.
    positional: Vec<String>,
    /// ARGV[1] of the argument object form.
    object: Json,
    /// ARGV after the object (`advance.lua`'s fact name, JSON pairs).
    tail: Vec<String>,
}

#[derive(Clone, Copy, Debug)]
enum Form {
    Positional,
    Object,
}

impl Call {
    fn new(script: &'static Script, keys: &[String], positional: &[&str], object: Json) -> Call {
        Call {
            script,
            keys: keys.to_vec(),
            positional: positional.iter().map(|a| (*a).to_owned()).collect(),
            object,
            tail: Vec::new(),
        }
    }

    fn facts(mut self, pairs: &[(&str, &str)]) -> Call {
        for (name, json) in pairs {
            self.positional
                .extend([(*name).to_owned(), (*json).to_owned()]);
            self.tail.extend([(*name).to_owned(), (*json).to_owned()]);
        }
        self
    }

    async fn send(&self, conn: &mut MultiplexedConnection, form: Form) -> Result<Value, String> {
        let mut invocation = self.script.prepare_invoke();
        for key in &self.keys {
            invocation.key(key);
        }
        match form {
            Form::Positional => {
                for arg in &self.positional {
                    invocation.arg(arg);
                }
            }
            Form::Object => {
                invocation.arg(self.object.to_string());
                for arg in &self.tail {
                    invocation.arg(arg);
                }
            }
        }
        invocation.invoke_async(conn).await.map_err(|e| {
            format!(
                "{} {}",
                e.code().unwrap_or("(no code)"),
                e.detail().unwrap_or("")
            )
        })
    }
}

/// The keys of one asset's run: `asc:{web}:…`, or `asc:n:team:{web}:…`.
fn key(namespaced: bool, part: &str) -> String {
    let ns = if namespaced { "n:team:" } else { "" };
    format!("asc:{ns}{{web}}:{part}")
}

fn keys(namespaced: bool, parts: &[&str]) -> Vec<String> {
    parts.iter().map(|part| key(namespaced, part)).collect()
}

/// `acquire.lua`'s KEYS for run `r1` of no owner.
fn unowned_claim() -> Vec<String> {
    keys(
        false,
        &[
            "lock",
            "fence",
            "ticket:r1",
            "audit",
            "retired:",
            "facts:r1",
        ],
    )
}

fn initial(run: &str) -> Json {
    json!({
        "id": format!("web/{run}"), "asset": "web", "run": run, "status": "INIT",
        "fencing_token": 0, "revision": 0, "holder": null, "completed_steps": [],
        "attempts": {}, "last_error": null, "created_at": NOW, "updated_at": NOW,
    })
}

/// Every key's value (a stream's entries without their ids) and the time it
/// has left in tens of seconds (-1: no expiry): what a call leaves behind.
/// The times set are whole tens of seconds (the lock's 30 s) or more, and
/// rounding to the nearest ten leaves them the same in two runs of the
/// same calls a few seconds apart; rounding to minutes put the lock's 30 s
/// on the boundary.
async fn snapshot(conn: &mut MultiplexedConnection) -> BTreeMap<String, (String, i64)> {
    let names: Vec<String> = redis::cmd("KEYS").arg("*").query_async(conn).await.unwrap();
    let mut found = BTreeMap::new();
    for name in names {
        let kind: String = redis::cmd("TYPE")
            .arg(&name)
            .query_async(conn)
            .await
            .unwrap();
        let value: String = match kind.as_str() {
            "string" => redis::cmd("GET")
                .arg(&name)
                .query_async(conn)
                .await
                .unwrap(),
            "hash" => {
                let fields: BTreeMap<String, String> = redis::cmd("HGETALL")
                    .arg(&name)
                    .query_async(conn)
                    .await
                    .unwrap();
                format!("{fields:?}")
            }
            "stream" => {
                let entries: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
                    .arg(&name)
                    .arg("-")
                    .arg("+")
                    .query_async(conn)
                    .await
                    .unwrap();
                let entries: Vec<BTreeMap<String, String>> = entries
                    .ids
                    .iter()
                    .map(|entry| {
                        entry
                            .map
                            .keys()
                            .map(|field| (field.clone(), entry.get::<String>(field).unwrap()))
                            .collect()
                    })
                    .collect();
                format!("{entries:?}")
            }
            other => panic!("{name} is a {other}"),
        };
        let pttl: i64 = redis::cmd("PTTL")
            .arg(&name)
            .query_async(conn)
            .await
            .unwrap();
        let tens_of_seconds = if pttl > 0 {
            (pttl + 5_000) / 10_000
        } else {
            -1
        };
        found.insert(name, (value, tens_of_seconds));
    }
    found
}

/// What one call answered, and what Redis held after it.
type Step = (Result<Value, String>, BTreeMap<String, (String, i64)>);

/// Plays `calls` in `form` on an empty Redis.
async fn play(conn: &mut MultiplexedConnection, calls: &[Call], form: Form) -> Vec<Step> {
    let _: () = redis::cmd("FLUSHALL").query_async(conn).await.unwrap();
    let mut steps = Vec::new();
    for call in calls {
        let reply = call.send(conn, form).await;
        steps.push((reply, snapshot(conn).await));
    }
    steps
}

/// Plays `calls` in both forms: each call answers alike and leaves Redis
/// alike. Returns the replies.
async fn same_in_both_forms(calls: &[Call]) -> Vec<Result<Value, String>> {
    let server = RedisServer::start().unwrap();
    let mut conn = connect(&server).await;
    let positional = play(&mut conn, calls, Form::Positional).await;
    let object = play(&mut conn, calls, Form::Object).await;
    for (i, (p, o)) in positional.iter().zip(&object).enumerate() {
        assert_eq!(p.0, o.0, "call {i}: the two forms answer alike");
        assert_eq!(p.1, o.1, "call {i}: the two forms leave Redis alike");
    }
    object.into_iter().map(|(reply, _)| reply).collect()
}

/// The calls of a run as release 0.1.0 sends them (every key and argument
/// it passes), and the same calls as argument objects: claim, a write with
/// a fact, a write that returns the facts, a stale write, a claim again by
/// the holder with its copy current, the release and the owner's
/// retirement.
#[tokio::test]
async fn the_positional_form_of_0_1_0_and_the_object_leave_the_same_state() {
    let claim = keys(
        false,
        &[
            "lock",
            "fence",
            "ticket:r1",
            "audit",
            "retired:o1",
            "facts:r1",
        ],
    );
    let write = keys(false, &["ticket:r1", "audit", "facts:r1"]);
    let (now, ttl, open, terminal) = (
        NOW.to_string(),
        TTL.to_string(),
        KEEP_OPEN.to_string(),
        KEEP_TERMINAL.to_string(),
    );
    let online = json!({"complete_step": "online_check", "last_error": null});
    // A claim by `A`, naming the copy it holds (positionally
    // "<token>:<revision>", or nothing).
    let acquire = |known: &str, fence: Option<Json>| {
        let mut object = json!({
            "v": 1, "holder": "A", "ttl_ms": TTL, "floor": 0, "now": NOW,
            "initial": initial("r1"), "audit_cap": 1000, "keep_ticket_ms": KEEP_OPEN,
            "keep_asset_ms": KEEP_TERMINAL,
        });
        if let Some(fence) = fence {
            object["known"] = fence;
        }
        let initial = initial("r1").to_string();
        let positional = [
            "A", &ttl, "0", &now, &initial, "1000", &open, &terminal, known,
        ];
        Call::new(&ACQUIRE, &claim, &positional, object)
    };
    let calls = [
        acquire("", None),
        Call::new(
            &ADVANCE,
            &write,
            &[
                "1",
                "ASSET_ONLINE",
                &now,
                &online.to_string(),
                &terminal,
                "1000",
                &open,
                "0",
            ],
            json!({
                "v": 1, "token": 1, "to": "ASSET_ONLINE", "now": NOW, "patch": online,
                "keep_terminal_ms": KEEP_TERMINAL, "audit_cap": 1000,
                "keep_open_ms": KEEP_OPEN, "return_facts": false,
            }),
        )
        .facts(&[("online", "true")]),
        Call::new(
            &ADVANCE,
            &write,
            &[
                "1",
                "VULN_CHECK_DONE",
                &now,
                "{}",
                &terminal,
                "1000",
                &open,
                "1",
            ],
            json!({
                "v": 1, "token": 1, "to": "VULN_CHECK_DONE", "now": NOW,
                "keep_terminal_ms": KEEP_TERMINAL, "audit_cap": 1000,
                "keep_open_ms": KEEP_OPEN, "return_facts": true,
            }),
        )
        .facts(&[("vulnerabilities", r#"{"count":0}"#)]),
        Call::new(
            &ADVANCE,
            &write,
            &["9", "FINISHED", &now, "{}", &terminal, "1000", &open, "0"],
            json!({"v": 1, "token": 9, "to": "FINISHED", "now": NOW}),
        ),
        acquire("1:3", Some(json!({"token": 1, "revision": 3}))),
        Call::new(
            &RELEASE,
            &keys(false, &["lock", "audit"]),
            &["A", &now, "1000"],
            json!({"v": 1, "holder": "A", "now": NOW, "audit_cap": 1000}),
        ),
        Call::new(
            &RETIRE,
            &keys(
                false,
                &["fence", "audit", "retired:o1", "ticket:r1", "facts:r1"],
            ),
            &["A", &now, &open, "1000", "1"],
            json!({
                "v": 1, "holder": "A", "now": NOW, "tombstone_ms": KEEP_OPEN,
                "tickets": 1, "audit_cap": 1000,
            }),
        ),
    ];
    let replies = same_in_both_forms(&calls).await;
    assert!(replies[..3].iter().all(Result::is_ok), "{replies:?}");
    assert!(
        replies[3]
            .as_ref()
            .is_err_and(|e| e.starts_with("STALE_TOKEN 9 1")),
        "{replies:?}"
    );
    let Ok(Value::Array(claimed)) = &replies[4] else {
        panic!("{replies:?}");
    };
    assert_eq!(
        claimed[3],
        Value::Int(1),
        "the copy named current is current"
    );
}

/// The optional keys this release added before the argument object: the
/// bridge's legacy family and a superseded run, placed by ARGV[10] in the
/// positional form and named by `bridge` and `supersedes` in the object.
#[tokio::test]
async fn the_bridge_and_a_superseded_run_take_the_same_keys_in_both_forms() {
    // The namespaced family (with the audit stream), then the legacy one.
    let claim = |run: &str, earlier: Option<&str>| {
        let (ticket, facts) = (format!("ticket:{run}"), format!("facts:{run}"));
        let earlier = earlier.map(|e| format!("ticket:{e}"));
        let mut all = keys(
            true,
            &["lock", "fence", &ticket, "audit", "retired:o1", &facts],
        );
        all.extend(earlier.iter().map(|e| key(true, e)));
        all.extend(keys(
            false,
            &["lock", "fence", &ticket, &facts, "retired:o1"],
        ));
        all.extend(earlier.iter().map(|e| key(false, e)));
        all
    };
    let (now, ttl) = (NOW.to_string(), TTL.to_string());
    let object = |run: &str, supersedes: bool| {
        json!({
            "v": 1, "holder": "A", "ttl_ms": TTL, "floor": 0, "now": NOW,
            "initial": initial(run), "supersedes": supersedes, "bridge": true,
        })
    };
    let mut write = keys(true, &["ticket:r1", "audit", "facts:r1"]);
    write.extend(keys(false, &["ticket:r1", "facts:r1"]));
    let calls = [
        Call::new(
            &ACQUIRE,
            &claim("r1", None),
            &[
                "A",
                &ttl,
                "0",
                &now,
                &initial("r1").to_string(),
                "1000",
                "0",
                "0",
                "",
                "7",
            ],
            object("r1", false),
        ),
        Call::new(
            &ADVANCE,
            &write,
            &["1", "ASSET_ONLINE", &now, "{}", "0", "1000", "0", "0"],
            json!({"v": 1, "token": 1, "to": "ASSET_ONLINE", "now": NOW, "bridge": true}),
        )
        .facts(&[("online", "true")]),
        Call::new(
            &ACQUIRE,
            &claim("r2", Some("r1")),
            &[
                "A",
                &ttl,
                "0",
                &now,
                &initial("r2").to_string(),
                "1000",
                "0",
                "0",
                "",
                "8",
            ],
            object("r2", true),
        ),
        Call::new(
            &RELEASE,
            &[key(true, "lock"), key(true, "audit"), key(false, "lock")],
            &["A", &now, "1000"],
            json!({"v": 1, "holder": "A", "now": NOW, "bridge": true}),
        ),
    ];
    let replies = same_in_both_forms(&calls).await;
    assert!(replies.iter().all(Result::is_ok), "{replies:?}");
}

/// What a script answers an argument object it cannot use: `BAD_ARGS` and
/// what is wrong, never a Lua error, and nothing written.
#[tokio::test]
async fn a_malformed_or_unknown_argument_object_is_refused_with_bad_args() {
    let server = RedisServer::start().unwrap();
    let mut conn = connect(&server).await;
    let claim = unowned_claim();
    let write = keys(false, &["ticket:r1", "audit", "facts:r1"]);
    let acquire = |object: Json| Call::new(&ACQUIRE, &claim, &[], object);
    let good = json!({
        "v": 1, "holder": "A", "ttl_ms": TTL, "floor": 0, "now": NOW, "initial": initial("r1"),
    });
    let with = |name: &str, value: Json| {
        let mut object = good.clone();
        object[name] = value;
        object
    };
    let without = |name: &str| {
        let mut object = good.clone();
        object.as_object_mut().unwrap().remove(name);
        object
    };
    let not_json = Call::new(&ACQUIRE, &claim, &["{not json"], json!(null));
    let refused = not_json
        .send(&mut conn, Form::Positional)
        .await
        .unwrap_err();
    assert!(
        refused.starts_with("BAD_ARGS") && refused.contains("ARGV[1] is not a JSON object"),
        "{refused}"
    );
    let cases = [
        (
            acquire(with("v", json!(2))),
            "argument version 2 is unknown",
        ),
        (acquire(without("v")), "argument version nil is unknown"),
        (
            acquire(with("colour", json!("red"))),
            "unknown argument colour",
        ),
        (
            acquire(with("ttl_ms", json!("30000"))),
            "ttl_ms must be an integer >= 0",
        ),
        (
            acquire(with("floor", json!(-1))),
            "floor must be an integer >= 0",
        ),
        (
            acquire(with("holder", json!(""))),
            "holder must be a non-empty string",
        ),
        (
            acquire(with("initial", json!("{}"))),
            "initial must be a JSON object",
        ),
        (acquire(without("now")), "now is required"),
        (
            acquire(with("known", json!({"token": 1}))),
            "known must be {\"token\": integer, \"revision\": integer}",
        ),
        (
            acquire(with("supersedes", json!(true))),
            "7 KEYS expected with supersedes and bridge as given, 6 given",
        ),
        (
            acquire(with("bridge", json!(true))),
            "11 KEYS expected with supersedes and bridge as given, 6 given",
        ),
        (
            Call::new(
                &ADVANCE,
                &write[..2],
                &[],
                json!({"v": 1, "token": 1, "to": "ASSET_ONLINE", "now": NOW}),
            ),
            "3 KEYS expected with bridge as given, 2 given",
        ),
        (
            Call::new(
                &ADVANCE,
                &write,
                &[],
                json!({"v": 1, "token": 1, "to": "ASSET_ONLINE", "now": NOW, "patch": "{}"}),
            ),
            "patch must be a JSON object",
        ),
        (
            Call::new(
                &RELEASE,
                &keys(false, &["lock"]),
                &[],
                json!({"v": 1, "holder": "A", "now": NOW}),
            ),
            "2 KEYS expected with bridge as given, 1 given",
        ),
        (
            Call::new(
                &RETIRE,
                &keys(false, &["fence", "audit", "retired:o1", "ticket:r1"]),
                &[],
                json!({"v": 1, "holder": "A", "now": NOW, "tombstone_ms": 1, "tickets": 1}),
            ),
            "5 KEYS expected for 1 tickets and their facts, 4 given",
        ),
        (
            Call::new(
                &RETIRE,
                &keys(false, &["fence", "audit", "retired:o1"]),
                &[],
                json!({"v": 3, "holder": "A", "now": NOW, "tombstone_ms": 1, "tickets": 0}),
            ),
            "argument version 3 is unknown (this script knows 1)",
        ),
    ];
    for (call, why) in cases {
        let Err(refused) = call.send(&mut conn, Form::Object).await else {
            panic!("{} was accepted", call.object);
        };
        assert!(
            refused.starts_with("BAD_ARGS") && refused.contains(why),
            "{}: {refused}",
            call.object
        );
    }
    let written: usize = redis::cmd("DBSIZE").query_async(&mut conn).await.unwrap();
    assert_eq!(written, 0, "a refused call writes nothing");
}

/// A `facts` key in the patch is a form of the positional contract only:
/// the object sends facts as ARGV pairs, which are never decoded. Refused
/// after the ticket is read, so audited like every other refusal there.
#[tokio::test]
async fn the_object_form_takes_facts_only_beside_the_patch() {
    let server = RedisServer::start().unwrap();
    let mut conn = connect(&server).await;
    let claim = unowned_claim();
    let acquire = Call::new(
        &ACQUIRE,
        &claim,
        &[],
        json!({"v": 1, "holder": "A", "ttl_ms": TTL, "floor": 0, "now": NOW, "initial": initial("r1")}),
    );
    acquire.send(&mut conn, Form::Object).await.unwrap();
    let write = keys(false, &["ticket:r1", "audit", "facts:r1"]);
    let patch = json!({"facts": {"online": true}});
    let inside = Call::new(
        &ADVANCE,
        &write,
        &["1", "ASSET_ONLINE", &NOW.to_string(), &patch.to_string()],
        json!({"v": 1, "token": 1, "to": "ASSET_ONLINE", "now": NOW, "patch": patch}),
    );
    let refused = inside.send(&mut conn, Form::Object).await.unwrap_err();
    assert!(
        refused.contains("BAD_ARGS unknown patch key facts"),
        "{refused}"
    );
    inside.send(&mut conn, Form::Positional).await.unwrap();
    let online: String = redis::cmd("HGET")
        .arg(key(false, "facts:r1"))
        .arg("online")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(online, "true", "the positional form still takes them");
}

/// A holder of either form loses the run to a holder of the other and is
/// refused, audited: the fence does not depend on the form.
#[tokio::test]
async fn holders_of_the_two_forms_fence_each_other() {
    let server = RedisServer::start().unwrap();
    let mut conn = connect(&server).await;
    let claim = unowned_claim();
    let write = keys(false, &["ticket:r1", "audit", "facts:r1"]);
    let acquire = |holder: &str| {
        Call::new(
            &ACQUIRE,
            &claim,
            &[
                holder,
                "30000",
                "0",
                &NOW.to_string(),
                &initial("r1").to_string(),
            ],
            json!({"v": 1, "holder": holder, "ttl_ms": TTL, "floor": 0, "now": NOW, "initial": initial("r1")}),
        )
    };
    let advance = |token: u64, to: &str| {
        Call::new(
            &ADVANCE,
            &write,
            &[&token.to_string(), to, &NOW.to_string(), "{}"],
            json!({"v": 1, "token": token, "to": to, "now": NOW}),
        )
    };
    for (first, second) in [
        (Form::Positional, Form::Object),
        (Form::Object, Form::Positional),
    ] {
        let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
        let token = |reply: Value| match reply {
            Value::Array(items) => redis::from_redis_value_ref::<u64>(&items[0]).unwrap(),
            other => panic!("{other:?}"),
        };
        let old = token(acquire("A").send(&mut conn, first).await.unwrap());
        let _: () = redis::cmd("DEL")
            .arg(key(false, "lock"))
            .query_async(&mut conn)
            .await
            .unwrap();
        let new = token(acquire("B").send(&mut conn, second).await.unwrap());
        assert!(new > old, "{first:?} then {second:?}");
        let stale = advance(old, "ASSET_ONLINE")
            .send(&mut conn, first)
            .await
            .unwrap_err();
        assert!(stale.contains("STALE_TOKEN"), "{first:?}: {stale}");
        advance(new, "ASSET_ONLINE")
            .send(&mut conn, second)
            .await
            .unwrap();
        let audit: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
            .arg(key(false, "audit"))
            .arg("-")
            .arg("+")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(
            audit.ids.iter().any(|entry| {
                entry.get::<String>("result").as_deref() == Some("STALE_TOKEN")
                    && entry.get::<String>("token") == Some(old.to_string())
            }),
            "{first:?} then {second:?}: the refusal is audited"
        );
    }
}
