//! Everything the replicas run against, started by the chaos run itself on
//! loopback: a real redis-server (no persistence), the provider stubs with
//! the real fixtures, the Kubernetes API emulator with the repository's
//! CRD, and the proxy the replicas reach it through. Also the run's own
//! hands on them: injecting faults, and reading back what each one
//! recorded.

use crate::ChaosError;
use crate::audit::{PREFIX, RedisView};
use crate::history::{Delivery, StatusWrite, Timing, parse_wecom_ticket_line};
use crate::objects::{Channel, NAMESPACE, Objects};
use crate::plan::{ApiFault, Scale, Stub};
use crate::proxy::ApiProxy;
use crate::replicas::Launch;
use assetscan_operator::kubernetes::controller::DELIVERY_WAIT;
use assetscan_testkit::emulator::{Emulator, EmulatorOptions, Fault};
use assetscan_testkit::redis::RedisServer;
use assetscan_testkit::stubs::{Faults, ProviderStubs};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The notify step's settings (`steps.notify`): with the lock's ttl they
/// bound how soon a confirmed high risk goes out.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);
const NOTIFY_MAX_ATTEMPTS: u32 = 4;
const NOTIFY_MAX_BACKOFF: Duration = Duration::from_secs(1);

/// The bound's settings of a run at `scale` (its outages are recorded as
/// they happen).
pub fn timing(scale: &Scale) -> Timing {
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    Timing {
        lock_ttl_ms: ms(scale.lock_ttl),
        notify_max_backoff_ms: ms(NOTIFY_MAX_BACKOFF),
        cache_wait_ms: ms(DELIVERY_WAIT),
        notify_pass_ms: ms(
            NOTIFY_TIMEOUT * NOTIFY_MAX_ATTEMPTS + NOTIFY_MAX_BACKOFF * (NOTIFY_MAX_ATTEMPTS - 1)
        ),
        outages: Vec::new(),
    }
}

pub struct World {
    pub redis: RedisServer,
    pub view: RedisView,
    pub stubs: ProviderStubs,
    pub emu: Emulator,
    pub proxy: ApiProxy,
    pub launch: Launch,
    /// The run's own client of the API server (not through the proxy).
    pub api: Objects,
    /// Logs, config and the recorded history.
    pub dir: PathBuf,
}

/// The operator config of the run: the lock ttl of the scale, audit
/// streams that keep everything, tickets kept past the end of the run,
/// and retries generous enough that passing provider faults do not fail
/// scans. `prefix` is the Redis key prefix ([`PREFIX`], where the run's
/// audit is read).
pub fn config_yaml(scale: &Scale, providers: &str, prefix: &str) -> String {
    format!(
        "redis: {{prefix: {prefix}, timeout: 1s}}\n\
         lock: {{ttl: {ttl}ms}}\n\
         tickets: {{retention: 1h, abandonAfter: 1h, auditCap: 100000}}\n\
         steps:\n\
         \x20 onlineCheck: {{timeout: 3s, maxAttempts: 8, initialBackoff: 100ms, maxBackoff: 1s}}\n\
         \x20 vulnQuery: {{timeout: 10s, maxAttempts: 8, initialBackoff: 100ms, maxBackoff: 1s}}\n\
         \x20 threatIntel: {{timeout: 10s, maxAttempts: 8, initialBackoff: 100ms, maxBackoff: 1s}}\n\
         \x20 notify: {{timeout: {notify_timeout}ms, maxAttempts: {NOTIFY_MAX_ATTEMPTS}, initialBackoff: 100ms, maxBackoff: {notify_backoff}ms}}\n\
         {providers}",
        ttl = scale.lock_ttl.as_millis(),
        notify_timeout = NOTIFY_TIMEOUT.as_millis(),
        notify_backoff = NOTIFY_MAX_BACKOFF.as_millis(),
    )
}

/// The chaos run's config: [`config_yaml`], and a membership that lapses
/// with the lock (`membershipTtl` = the lock's ttl), so that a paused
/// replica's share moves on as soon as its lock may be taken and the
/// replica wakes up to stale writes, as without a membership. The key is
/// this release's: the upgrade test's config for the previous release never
/// carries it.
fn chaos_config_yaml(scale: &Scale, providers: &str) -> String {
    format!(
        "{}scanStarts: {{membershipTtl: {}ms}}\n",
        config_yaml(scale, providers, PREFIX),
        scale.lock_ttl.as_millis()
    )
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ChaosError {
    let context = context.into();
    move |source| ChaosError::Io { context, source }
}

impl World {
    /// Starts everything; the replicas' files go to `dir`.
    pub async fn start(scale: &Scale, operator: &Path, dir: &Path) -> Result<World, ChaosError> {
        let redis = tokio::task::block_in_place(RedisServer::start)?;
        let stubs = ProviderStubs::start()
            .await
            .map_err(io("start the provider stubs"))?;
        stubs.serve_examples();
        let emu = Emulator::start(EmulatorOptions {
            crd_dir: Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds")),
            ..EmulatorOptions::default()
        })
        .await?;
        let upstream = format!("127.0.0.1:{}", emu.port())
            .parse()
            .map_err(|e| ChaosError::Io {
                context: "emulator address".into(),
                source: std::io::Error::other(e),
            })?;
        let proxy = ApiProxy::start(upstream)
            .await
            .map_err(io("start the API proxy"))?;

        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            emu.kubeconfig_yaml().replace(emu.url(), &proxy.url()),
        )
        .map_err(io("write the kubeconfig"))?;
        let providers = stubs
            .write_providers_section(dir, "secops-")
            .map_err(io("write the providers section"))?;
        let config = dir.join("config.yaml");
        std::fs::write(&config, chaos_config_yaml(scale, &providers))
            .map_err(io("write the operator config"))?;
        let api = Objects::new(emu.client()?);
        Ok(World {
            view: RedisView::new(&redis.url()),
            launch: Launch {
                binary: operator.to_owned(),
                config,
                kubeconfig,
                redis_url: redis.url(),
                dir: dir.to_owned(),
            },
            redis,
            stubs,
            emu,
            proxy,
            api,
            dir: dir.to_owned(),
        })
    }

    /// The object as stored now, read from the emulator directly.
    pub fn object(&self, name: &str) -> Option<Value> {
        self.emu.object("assetscans", Some(NAMESPACE), name)
    }

    /// Every status write the API server accepted for `name`, oldest first.
    pub fn status_writes(&self, name: &str) -> Vec<StatusWrite> {
        self.emu
            .history("assetscans", Some(NAMESPACE), name)
            .into_iter()
            .filter(|r| r.subresource.as_deref() == Some("status"))
            .map(|r| StatusWrite {
                resource_version: r.resource_version,
                status: r.object.get("status").cloned().unwrap_or_default(),
            })
            .collect()
    }

    pub fn api_fault(&self, fault: ApiFault) {
        let faults = self.emu.faults();
        match fault {
            ApiFault::ConflictOnStatus(n) => faults.inject("PATCH", "/status", n, Fault::Conflict),
            ApiFault::InternalErrorOnWrite(n) => {
                faults.inject("PATCH", "/assetscans/", n, Fault::InternalError);
            }
            ApiFault::ThrottleWrites(n) => faults.inject(
                "PATCH",
                "/assetscans/",
                n,
                Fault::TooManyRequests {
                    retry_after_seconds: 1,
                },
            ),
            ApiFault::EndWatches => {
                faults.end_watches();
            }
            ApiFault::AbortWatches => {
                faults.abort_watches();
            }
        }
    }

    pub fn stub(&self, stub: Stub) -> &Faults {
        match stub {
            Stub::Inventory => self.stubs.inventory.faults(),
            Stub::Osv => self.stubs.osv.faults(),
            Stub::Kev => self.stubs.kev.faults(),
            Stub::Epss => self.stubs.epss.faults(),
            Stub::Webhook => self.stubs.sink.faults(),
            Stub::WeCom => self.stubs.wecom.faults(),
        }
    }

    /// No more injected faults: the API answers, the providers are quick.
    pub fn calm(&self) {
        self.proxy.end_outage();
        self.emu.faults().clear();
        for stub in Stub::ALL {
            self.stub(stub).clear();
        }
    }

    /// What the receivers accepted, in order per receiver.
    pub fn deliveries(&self) -> Vec<Delivery> {
        deliveries(&self.stubs)
    }
}

/// What the stubs' receivers accepted, in order per receiver.
pub fn deliveries(stubs: &ProviderStubs) -> Vec<Delivery> {
    let webhook = stubs.sink.deliveries().into_iter().map(|d| {
        let body = d.json();
        Delivery {
            channel: Channel::Webhook,
            key: d.header("idempotency-key").map(str::to_owned),
            ticket: body
                .get("ticket_id")
                .and_then(Value::as_str)
                .map(str::to_owned),
            token: body.get("fencing_token").and_then(Value::as_u64),
        }
    });
    let wecom = stubs.wecom.messages().into_iter().map(|text| {
        let (ticket, token) = parse_wecom_ticket_line(&text);
        Delivery {
            channel: Channel::WeCom,
            key: None,
            ticket,
            token,
        }
    });
    webhook.chain(wecom).collect()
}
