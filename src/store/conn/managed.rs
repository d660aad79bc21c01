//! One multiplexed connection to the node that takes writes, replaced when it
//! breaks, with a backoff between failed attempts.
//!
//! Why not the `redis` crate's `ConnectionManager`: it reconnects to one fixed
//! address, so it cannot follow a Sentinel failover; it keeps a failed
//! connection attempt that was not an I/O error (a wrong password) as the
//! answer to every later command, so the operator would never recover without
//! a restart; and it starts a new attempt for every command that meets a
//! broken connection, so a busy process hammers a Redis that refuses it.
//!
//! Here at most one attempt is in flight; after a failed attempt, commands
//! fail at once with that attempt's error until the backoff has passed (the
//! error is logged once per attempt, and readiness reports it), and the first
//! attempt after the backoff decides again. A connection is replaced when a
//! command on it shows it is unusable: dropped, timed out, or talking to a
//! node that no longer takes writes (`READONLY`: a demoted master).
//!
//! Behind Sentinel, a request that met a lost master (its connection
//! dropped or refused, a node answering `READONLY`, no master the sentinels
//! can name yet) is sent again on a new connection, which asks the sentinels
//! where the master is now, with backoff, for up to the failover wait: a
//! master killed mid-run is replaced within seconds, and the run goes on
//! instead of failing on the first `broken pipe`. A resend cannot apply
//! twice in effect, whether or not the first one reached the old master and
//! its replica: every write is a fenced script. `advance.lua` accepts a write
//! only under the ticket's token and along the state machine, so a resent
//! advance that already applied is `X → X` under the same token (it rewrites
//! the same facts) or, at a terminal status, is refused and the store reads
//! the ticket back (`write.rs`); a resent `acquire.lua` by the same holder
//! re-enters its lock and draws a new, higher token (the first one never
//! acts: its claim was never returned); renewing, releasing and retiring are
//! idempotent; reads change nothing. A timeout is not resent: the first
//! request may still be running.

use crate::backoff::Backoff;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::sentinel::SentinelClient;
use redis::{AsyncConnectionConfig, Client, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture};
use redis::{RedisResult, ServerErrorKind, Value};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;
use tracing::{debug, info, warn};

/// Wait after the first failed attempt; doubled after each further failure.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// Longest wait between attempts: a Redis that comes back is used within it.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Between resends of a request that lost its master: short, since the new
/// master is named within the sentinels' `down-after-milliseconds` plus an
/// election.
const FAILOVER_BACKOFF: Backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));

/// Where a new connection goes.
pub(super) enum Endpoint {
    /// Always the same server.
    Fixed(Client),
    /// Whichever node the sentinels name as master at the time of the attempt
    /// (the client checks that the node agrees it is the master). A request
    /// that lost its master is resent for up to `failover_wait`.
    Sentinel {
        sentinels: tokio::sync::Mutex<SentinelClient>,
        failover_wait: Duration,
    },
}

impl Endpoint {
    /// A new connection, and the address of the node it goes to.
    async fn connect(
        &self,
        config: &AsyncConnectionConfig,
    ) -> RedisResult<(MultiplexedConnection, Arc<str>)> {
        let client = match self {
            Endpoint::Fixed(client) => client.clone(),
            Endpoint::Sentinel { .. } => self.named_master().await?,
        };
        let node = Arc::from(client.get_connection_info().addr().to_string());
        let conn = client
            .get_multiplexed_async_connection_with_config(config)
            .await?;
        Ok((conn, node))
    }

    /// A client of the master the sentinels name now (the `redis` crate
    /// checks that the node agrees it is the master); the fixed client
    /// otherwise.
    /// Boxed: the `redis` crate's lookup is a deep future, and the
    /// background task that awaits it must be provably `Send`.
    fn named_master(&self) -> futures::future::BoxFuture<'_, RedisResult<Client>> {
        Box::pin(async move {
            match self {
                Endpoint::Fixed(client) => Ok(client.clone()),
                Endpoint::Sentinel { sentinels, .. } => {
                    sentinels.lock().await.async_get_client().await
                }
            }
        })
    }
}

/// A connection shared by clones; see the module documentation.
#[derive(Clone)]
pub struct Managed {
    shared: Arc<Shared>,
}

struct Shared {
    endpoint: Endpoint,
    config: AsyncConnectionConfig,
    /// Bound on one whole attempt (Sentinel lookups included).
    timeout: Duration,
    /// The target without secrets, for logs.
    target: String,
    db: i64,
    state: Mutex<State>,
    /// Held while an attempt is in flight, so there is only one.
    attempt: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    current: Option<Current>,
    failure: Option<Failure>,
    next_id: u64,
}

#[derive(Clone)]
struct Current {
    /// Tells a connection from its replacement, so that a late error on the
    /// old one does not throw the new one away.
    id: u64,
    conn: MultiplexedConnection,
    /// The address of the node it talks to (`host:port`).
    node: Arc<str>,
}

struct Failure {
    error: RedisError,
    retry_at: Instant,
    backoff: Duration,
}

impl Managed {
    pub(super) fn new(endpoint: Endpoint, timeout: Duration, target: String, db: i64) -> Managed {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout));
        Managed {
            shared: Arc::new(Shared {
                endpoint,
                config,
                timeout,
                target,
                db,
                state: Mutex::new(State::default()),
                attempt: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// Connects now, without waiting for a backoff and without logging: the
    /// caller reports the error (used at start, where it is fatal).
    pub(super) async fn connect_now(&self) -> RedisResult<()> {
        let _only = self.shared.attempt.lock().await;
        self.attempt().await.map(|_| ())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every update of the state is a single assignment: a panic while
        // holding the lock cannot leave it half-written.
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn current(&self) -> Option<Current> {
        self.state().current.clone()
    }

    /// The live connection, or a new one if the backoff allows an attempt,
    /// or the last attempt's error.
    async fn connection(&self) -> RedisResult<Current> {
        if let Some(current) = self.current() {
            return Ok(current);
        }
        let _only = self.shared.attempt.lock().await;
        // Another caller may have connected, or failed, while this one waited.
        if let Some(current) = self.current() {
            return Ok(current);
        }
        if let Some(failure) = &self.state().failure
            && Instant::now() < failure.retry_at
        {
            return Err(failure.error.clone());
        }
        let result = self.attempt().await;
        match &result {
            Ok(_) => {}
            Err(error) => {
                let retry_in = self.state().failure.as_ref().map(|f| f.backoff);
                warn!(redis = %self.shared.target, %error, ?retry_in, "cannot connect to redis");
            }
        }
        result
    }

    /// One attempt, bounded by the timeout; records its outcome.
    async fn attempt(&self) -> RedisResult<Current> {
        let attempt = self.shared.endpoint.connect(&self.shared.config);
        let result = match tokio::time::timeout(self.shared.timeout, attempt).await {
            Ok(result) => result,
            Err(_) => Err(timed_out(format!(
                "no connection within {:?}",
                self.shared.timeout
            ))),
        };
        let mut state = self.state();
        match result {
            Ok((conn, node)) => {
                if state.failure.take().is_some() {
                    info!(redis = %self.shared.target, "connected to redis again");
                }
                state.next_id += 1;
                let current = Current {
                    id: state.next_id,
                    conn,
                    node,
                };
                state.current = Some(current.clone());
                Ok(current)
            }
            Err(error) => {
                let backoff = state
                    .failure
                    .as_ref()
                    .map_or(FIRST_BACKOFF, |f| (f.backoff * 2).min(MAX_BACKOFF));
                // Up to a quarter less, so that replicas that lost Redis
                // together do not come back in step.
                let wait = backoff.mul_f64(1.0 - rand::random::<f64>() / 4.0);
                state.failure = Some(Failure {
                    error: error.clone(),
                    retry_at: Instant::now() + wait,
                    backoff,
                });
                Err(error)
            }
        }
    }

    /// Sends one request with `send` on the live connection (or a new one);
    /// behind Sentinel, resends it while it meets a lost master, within the
    /// failover wait (see the module documentation for why that is safe).
    async fn request<T, F>(&self, send: impl Fn(MultiplexedConnection) -> F) -> RedisResult<T>
    where
        F: Future<Output = RedisResult<T>>,
    {
        let once = async || {
            let Current { id, conn, .. } = self.connection().await?;
            let result = send(conn).await;
            self.check(id, &result);
            result
        };
        let Endpoint::Sentinel { failover_wait, .. } = &self.shared.endpoint else {
            return once().await;
        };
        let deadline = Instant::now() + *failover_wait;
        let mut delays = FAILOVER_BACKOFF.delays();
        loop {
            let result = once().await;
            let now = Instant::now();
            match result {
                Err(error) if master_lost(&error) && now < deadline => {
                    let delay = delays.next().unwrap_or(MAX_BACKOFF).min(deadline - now);
                    debug!(redis = %self.shared.target, %error, ?delay, "master lost: asking the sentinels again");
                    tokio::time::sleep(delay).await;
                }
                result => return result,
            }
        }
    }

    /// The address of the node the live connection talks to, if there is
    /// one.
    pub(super) fn node(&self) -> Option<Arc<str>> {
        self.current().map(|c| c.node)
    }

    /// Whether `node` is the master the sentinels name now, bounded by the
    /// timeout; a fixed endpoint has nobody else to name a master, so yes.
    pub(super) async fn is_named_master(&self, node: &str) -> RedisResult<bool> {
        if matches!(self.shared.endpoint, Endpoint::Fixed(_)) {
            return Ok(true);
        }
        let named = tokio::time::timeout(self.shared.timeout, self.shared.endpoint.named_master())
            .await
            .map_err(|_| {
                timed_out(format!(
                    "no sentinel answered within {:?}",
                    self.shared.timeout
                ))
            })??;
        Ok(*named.get_connection_info().addr().to_string() == *node)
    }

    /// Drops connection `id` if `result` shows it unusable.
    fn check<T>(&self, id: u64, result: &RedisResult<T>) {
        let Err(error) = result else {
            return;
        };
        if !breaks_connection(error) {
            return;
        }
        let mut state = self.state();
        if state.current.as_ref().is_some_and(|c| c.id == id) {
            state.current = None;
        }
    }
}

/// An attempt that did not finish in time, as an I/O timeout.
fn timed_out(what: String) -> RedisError {
    RedisError::from(std::io::Error::new(std::io::ErrorKind::TimedOut, what))
}

/// Whether a command's error means the connection must be replaced: it broke
/// (or the server went silent), or its node stopped taking writes.
fn breaks_connection(error: &RedisError) -> bool {
    error.is_unrecoverable_error()
        || error.is_timeout()
        || matches!(error.kind(), ErrorKind::Server(ServerErrorKind::ReadOnly))
}

/// Whether a request met a master that is gone (so that a new connection,
/// to the master the sentinels name now, may succeed) and was not run: its
/// connection broke or was refused, the node was demoted, or no sentinel
/// names a reachable master yet.
fn master_lost(error: &RedisError) -> bool {
    error.is_connection_dropped()
        || error.is_connection_refusal()
        || matches!(
            error.kind(),
            ErrorKind::Server(ServerErrorKind::ReadOnly) | ErrorKind::MasterNameNotFoundBySentinel
        )
}

impl ConnectionLike for Managed {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            self.request(move |mut conn| async move { conn.send_packed_command(cmd).await })
                .await
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            self.request(move |mut conn| async move {
                conn.send_packed_commands(pipeline, offset, count).await
            })
            .await
        })
    }

    fn get_db(&self) -> i64 {
        self.shared.db
    }
}
