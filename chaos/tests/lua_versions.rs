//! Two versions of the Lua scripts side by side against one Redis, as a
//! rolling upgrade runs them: an earlier text of `acquire.lua` and
//! `advance.lua` (fixtures/lua-before-fc8aac7, from this repository's
//! history) and this tree's. Redis knows scripts by their SHA-1, so both
//! versions are loaded at once; the fence must hold across them in both
//! directions: a holder whose lock passed to a replica running the other
//! version is refused (`STALE_TOKEN`, audited), and the new holder goes on
//! with the ticket the other version wrote. Each version is called as its
//! release calls it: the earlier one with positional arguments, this
//! tree's with its argument object.

use assetscan_operator::domain::ticket::Ticket;
use assetscan_testkit::redis::RedisServer;
use redis::aio::MultiplexedConnection;
use redis::{Script, Value};

struct Version {
    name: &'static str,
    acquire: Script,
    advance: Script,
    /// Called with the argument object (ARGV[1]) rather than positionally.
    object: bool,
}

fn earlier() -> Version {
    Version {
        name: "earlier",
        acquire: Script::new(include_str!("fixtures/lua-before-fc8aac7/acquire.lua")),
        advance: Script::new(include_str!("fixtures/lua-before-fc8aac7/advance.lua")),
        object: false,
    }
}

fn this_tree() -> Version {
    Version {
        name: "this tree's",
        acquire: Script::new(include_str!("../../lua/acquire.lua")),
        advance: Script::new(include_str!("../../lua/advance.lua")),
        object: true,
    }
}

/// The keys of one asset's run, as the operator names them.
struct Keys {
    asset: String,
    run: &'static str,
}

impl Keys {
    fn key(&self, part: &str) -> String {
        format!("asc:{{{}}}:{part}", self.asset)
    }
}

fn now() -> u64 {
    assetscan_chaos::now_ms()
}

/// A claim as the operator sends it (every key and argument it passes).
async fn acquire(
    conn: &mut MultiplexedConnection,
    version: &Version,
    keys: &Keys,
    holder: &str,
) -> redis::RedisResult<u64> {
    let initial = Ticket::new(&keys.asset, keys.run, now());
    let mut call = version.acquire.prepare_invoke();
    call.key(keys.key("lock"))
        .key(keys.key("fence"))
        .key(keys.key(&format!("ticket:{}", keys.run)))
        .key(keys.key("audit"))
        .key(keys.key("retired:"))
        .key(keys.key(&format!("facts:{}", keys.run)));
    if version.object {
        call.arg(
            serde_json::json!({
                "v": 1, "holder": holder, "ttl_ms": 60_000, "floor": 0, "now": now(),
                "initial": initial, "audit_cap": 1000, "keep_ticket_ms": 0, "keep_asset_ms": 0,
            })
            .to_string(),
        );
    } else {
        call.arg(holder)
            .arg(60_000)
            .arg(0)
            .arg(now())
            .arg(serde_json::to_string(&initial).unwrap())
            .arg(1000)
            .arg(0)
            .arg(0)
            .arg("");
    }
    let reply: Vec<Value> = call.invoke_async(conn).await?;
    Ok(redis::from_redis_value_ref(&reply[0]).unwrap())
}

async fn advance(
    conn: &mut MultiplexedConnection,
    version: &Version,
    keys: &Keys,
    token: u64,
    to: &str,
) -> redis::RedisResult<()> {
    let mut call = version.advance.prepare_invoke();
    call.key(keys.key(&format!("ticket:{}", keys.run)))
        .key(keys.key("audit"))
        .key(keys.key(&format!("facts:{}", keys.run)));
    if version.object {
        call.arg(
            serde_json::json!({
                "v": 1, "token": token, "to": to, "now": now(), "patch": {},
                "keep_terminal_ms": 0, "audit_cap": 1000, "keep_open_ms": 0,
            })
            .to_string(),
        );
    } else {
        call.arg(token)
            .arg(to)
            .arg(now())
            .arg("{}")
            .arg(0)
            .arg(1000)
            .arg(0);
    }
    let _: Value = call.invoke_async(conn).await?;
    Ok(())
}

/// `first` claims and writes, its lock passes (the ttl ran out while it
/// stalled) to a holder running `second`, and `first` writes again.
async fn takeover(conn: &mut MultiplexedConnection, first: &Version, second: &Version) {
    let keys = Keys {
        asset: format!("{}-then-{}.example", first.name, second.name)
            .replace(' ', "-")
            .replace('\'', ""),
        run: "r1-g1-s0",
    };
    let old = acquire(conn, first, &keys, "replica-a#1").await.unwrap();
    advance(conn, first, &keys, old, "ASSET_ONLINE")
        .await
        .unwrap();
    // The lock's ttl passes: its key is gone, as expiry leaves it.
    let _: () = redis::cmd("DEL")
        .arg(keys.key("lock"))
        .query_async(conn)
        .await
        .unwrap();
    let new = acquire(conn, second, &keys, "replica-b#1").await.unwrap();
    assert!(
        new > old,
        "{} then {}: token {new} after {old}",
        first.name,
        second.name
    );

    let stale = advance(conn, first, &keys, old, "VULN_CHECK_DONE").await;
    let err = stale
        .expect_err("the earlier holder's write must be refused")
        .to_string();
    assert!(
        err.contains("STALE_TOKEN"),
        "{} then {}: {err}",
        first.name,
        second.name
    );
    advance(conn, second, &keys, new, "VULN_CHECK_DONE")
        .await
        .unwrap();

    let audit: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(keys.key("audit"))
        .arg("-")
        .arg("+")
        .query_async(conn)
        .await
        .unwrap();
    let refused = audit.ids.iter().any(|entry| {
        entry.get::<String>("result").as_deref() == Some("STALE_TOKEN")
            && entry.get::<String>("token").as_deref() == Some(old.to_string().as_str())
    });
    assert!(
        refused,
        "{} then {}: the refusal is audited",
        first.name, second.name
    );
}

#[tokio::test]
async fn two_script_versions_keep_the_fence_side_by_side() {
    let (earlier, current) = (earlier(), this_tree());
    for (a, b) in [
        (&earlier.acquire, &current.acquire),
        (&earlier.advance, &current.advance),
    ] {
        assert_ne!(
            a.get_hash(),
            b.get_hash(),
            "the versions differ, so Redis holds both"
        );
    }
    let server = RedisServer::start().unwrap();
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    takeover(&mut conn, &earlier, &current).await;
    takeover(&mut conn, &current, &earlier).await;
    let loaded: Vec<bool> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(earlier.advance.get_hash())
        .arg(current.advance.get_hash())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(loaded, vec![true, true], "both versions are loaded at once");
}
