//! The command line: `run`, `crd`, `scan`, `ticket`. Every setting is a flag
//! with an environment variable.

pub mod chart;
pub mod config;
mod metrics_serving;
mod sbom;
mod scan;
mod ticket;

use crate::backoff::Backoff;
use crate::kubernetes::controller::{self, ControllerSettings};
use crate::pipeline::Pipeline;
use crate::providers::{Providers, install_crypto_provider};
use crate::store::{Credentials, RedisSecurity, RedisTarget, StoreConfig, TicketStore};
use crate::telemetry::{LogFormat, Metrics};
use assetscan_domain::AssetId;
use assetscan_domain::shard::Shard;
use clap::{Args, Parser, Subcommand};
use config::Config;
use metrics_serving::MetricsServing;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

#[derive(Parser, Debug)]
#[command(
    name = "assetscan-operator",
    version,
    about = "Fenced, crash-safe security scans per asset"
)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the controller.
    Run(RunArgs),
    /// Print the CRDs (YAML).
    Crd,
    /// Print the JSON Schema of the Helm chart's values, the operator's
    /// configuration included (the chart's values.schema.json).
    ValuesSchema,
    /// Run one scan standalone, against Redis, without Kubernetes; prints the
    /// final ticket.
    Scan(scan::ScanArgs),
    /// Read tickets and their audit history.
    #[command(subcommand)]
    Ticket(TicketCommand),
    /// Show what a run would ask about for SBOM files: the format, the
    /// entries listed and asked, by ecosystem, and not asked by reason.
    Sbom(sbom::SbomArgs),
}

/// Where Redis is and how the operator is configured.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Redis: `redis://host:6379`, `rediss://…` (TLS),
    /// `redis+sentinel://host:26379,host2:26379/<master>` (`rediss+sentinel://`
    /// for TLS) or `cluster:url1,url2`. Overrides `redis.url` of the config file.
    #[arg(long, env = "REDIS_URL", hide_env_values = true)]
    redis_url: Option<String>,
    /// ACL user of the Redis data nodes (overrides the URL's).
    #[arg(long, env = "REDIS_USERNAME")]
    redis_username: Option<String>,
    /// Password of the Redis data nodes (overrides the URL's).
    #[arg(long, env = "REDIS_PASSWORD", hide_env_values = true)]
    redis_password: Option<String>,
    /// User of the sentinels, when they require authentication.
    #[arg(long, env = "REDIS_SENTINEL_USERNAME")]
    redis_sentinel_username: Option<String>,
    /// Password of the sentinels, when they require authentication.
    #[arg(long, env = "REDIS_SENTINEL_PASSWORD", hide_env_values = true)]
    redis_sentinel_password: Option<String>,
    /// CA bundle (PEM) to trust for `rediss://` instead of the system's.
    #[arg(long, env = "REDIS_CA_FILE")]
    redis_ca_file: Option<PathBuf>,
    /// Client certificate (PEM) for Redis servers that verify clients.
    #[arg(long, env = "REDIS_CERT_FILE", requires = "redis_key_file")]
    redis_cert_file: Option<PathBuf>,
    /// Key (PEM) of the client certificate.
    #[arg(long, env = "REDIS_KEY_FILE", requires = "redis_cert_file")]
    redis_key_file: Option<PathBuf>,
    /// The YAML configuration file.
    #[arg(long, env = "ASSETSCAN_CONFIG")]
    config: PathBuf,
}

impl Common {
    fn load(&self) -> Result<(Config, RedisTarget), String> {
        let config = Config::load(&self.config).map_err(|e| e.to_string())?;
        let url = self
            .redis_url
            .clone()
            .or_else(|| config.redis.url.clone())
            .ok_or("no Redis: pass --redis-url (REDIS_URL) or set redis.url in the config")?;
        let target = RedisTarget::parse(&url).map_err(|e| e.to_string())?;
        Ok((config, target))
    }

    /// Whether Redis is reached without a password or without TLS: a
    /// warning, and `assetscan_redis_insecure`.
    fn report_redis_exposure(&self, target: &RedisTarget, metrics: &Metrics) -> Result<(), String> {
        let exposure = target.exposure(&self.security()?);
        metrics
            .security
            .set_redis(exposure.authenticated, exposure.encrypted);
        if !exposure.authenticated || !exposure.encrypted {
            warn!(
                redis = %target.redacted(),
                authenticated = exposure.authenticated,
                tls = exposure.encrypted,
                "Redis is reached without authentication or without TLS: whoever can reach it can hold every asset's lock and forge notifications (docs/redis.md)"
            );
        }
        Ok(())
    }

    /// The Redis credentials and TLS files of the flags.
    fn security(&self) -> Result<RedisSecurity, String> {
        let tls = RedisSecurity::tls_files(
            self.redis_ca_file.as_deref(),
            self.redis_cert_file.as_deref(),
            self.redis_key_file.as_deref(),
        )
        .map_err(|e| e.to_string())?;
        Ok(RedisSecurity {
            credentials: Credentials {
                username: self.redis_username.clone(),
                password: self.redis_password.clone(),
            },
            sentinel_credentials: Credentials {
                username: self.redis_sentinel_username.clone(),
                password: self.redis_sentinel_password.clone(),
            },
            tls,
        })
    }

    async fn store(&self) -> Result<(Config, TicketStore), String> {
        let (config, target) = self.load()?;
        let store_config = StoreConfig {
            security: self.security()?,
            ..config.store()
        };
        let store = TicketStore::connect(&target, store_config)
            .await
            .map_err(|e| e.to_string())?;
        Ok((config, store))
    }

    /// The store for a long-running process: while Redis is unreachable at
    /// start, it waits (as it does when Redis goes away later) instead of
    /// exiting, until `shutdown` fires. Any other error (a bad target, a
    /// refused login, a TLS file) ends the start at once.
    async fn store_when_reachable(
        &self,
        config: &Config,
        target: &RedisTarget,
        shutdown: &CancellationToken,
    ) -> Result<Option<TicketStore>, String> {
        let store_config = StoreConfig {
            security: self.security()?,
            ..config.store()
        };
        let mut delays = REDIS_AT_START_BACKOFF.delays();
        loop {
            match TicketStore::connect(target, store_config.clone()).await {
                Ok(store) => {
                    let bridge = store.bridge();
                    info!(
                        bridge = bridge.summary(),
                        why = %bridge.why,
                        "the identity bridge to 0.1.0's key layout"
                    );
                    return Ok(Some(store));
                }
                Err(err) if err.is_unavailable() => {
                    let retry_in = delays.next().unwrap_or(Duration::from_secs(15));
                    warn!(error = %err, ?retry_in, "redis unreachable at start: waiting for it");
                    tokio::select! {
                        () = tokio::time::sleep(retry_in) => {}
                        () = shutdown.cancelled() => return Ok(None),
                    }
                }
                Err(err) => return Err(err.to_string()),
            }
        }
    }
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    common: Common,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    #[command(flatten)]
    metrics: MetricsServing,
    /// Reconciles in flight at once.
    #[arg(long, env = "ASSETSCAN_CONCURRENCY", default_value_t = 8)]
    concurrency: u16,
    /// Watch only this namespace (default: all).
    #[arg(long, env = "WATCH_NAMESPACE")]
    namespace: Option<String>,
    /// This replica's id (lock holder prefix, event reporter).
    #[arg(long, env = "POD_NAME")]
    instance: Option<String>,
    /// With --shard-count: this replica's shard. It asks the API server only
    /// for the AssetScans of the buckets `b` with `b % count == index`.
    #[arg(long, env = "ASSETSCAN_SHARD_INDEX", requires = "shard_count")]
    shard_index: Option<u32>,
    /// Number of shards the replicas split the 256 buckets into (1 to 256).
    #[arg(long, env = "ASSETSCAN_SHARD_COUNT", requires = "shard_index")]
    shard_count: Option<u32>,
}

#[derive(Subcommand, Debug)]
enum TicketCommand {
    /// Print one ticket (JSON).
    Show {
        #[command(flatten)]
        common: Common,
        #[arg(long)]
        asset: String,
        #[arg(long)]
        run: String,
        /// The AssetScan's namespace (its asset's identity is namespace and
        /// asset id); absent: the legacy layout (the `scan` command's runs,
        /// and with the identity bridge on, a copy of every run's ticket).
        #[arg(long)]
        namespace: Option<String>,
    },
    /// Print an asset's audit history: acquisitions, accepted and rejected writes.
    History {
        #[command(flatten)]
        common: Common,
        #[arg(long)]
        asset: String,
        /// At most this many records, oldest first.
        #[arg(long, default_value_t = 200)]
        limit: usize,
        /// The AssetScan's namespace; absent: the legacy layout's stream
        /// (with the identity bridge on, where every run's history is).
        #[arg(long)]
        namespace: Option<String>,
    },
    /// List tickets.
    List {
        #[command(flatten)]
        common: Common,
        /// Only this asset's tickets.
        #[arg(long)]
        asset: Option<String>,
    },
}

/// Exit code for errors before or outside a scan (bad flags, config, Redis).
const EXIT_ERROR: u8 = 1;

pub async fn main() -> ExitCode {
    let cli = Cli::parse();
    // Reads FAILPOINTS; inert unless built with the `failpoints` feature.
    let _drills = fail::FailScenario::setup();
    crate::telemetry::init_logging(cli.log_format, "info,kube=warn,hyper=warn");
    install_crypto_provider();
    let result = match cli.command {
        Command::Crd => {
            // One YAML stream: `assetscan-operator crd | kubectl apply -f -`.
            let crds: Vec<String> = (crate::kubernetes::crd::crds_yaml().into_iter())
                .map(|(_, yaml)| yaml)
                .collect();
            print!("{}", crds.join("---\n"));
            Ok(ExitCode::SUCCESS)
        }
        Command::ValuesSchema => chart::values_schema()
            .map(|schema| {
                print!("{schema}");
                ExitCode::SUCCESS
            })
            .map_err(|e| format!("the values schema: {e}")),
        Command::Run(args) => run(args).await.map(|()| ExitCode::SUCCESS),
        Command::Scan(args) => scan::run(args).await,
        Command::Ticket(command) => ticket_command(command).await.map(|()| ExitCode::SUCCESS),
        Command::Sbom(args) => sbom::run(&args),
    };
    result.unwrap_or_else(|message| {
        error!("{message}");
        eprintln!("error: {message}");
        ExitCode::from(EXIT_ERROR)
    })
}

/// Fires on SIGINT or SIGTERM.
fn shutdown_on_signal() -> CancellationToken {
    let token = CancellationToken::new();
    let fire = token.clone();
    tokio::spawn(async move {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) else {
                return;
            };
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        info!("shutdown requested");
        fire.cancel();
    });
    token
}

fn instance_id(given: Option<String>) -> String {
    given.unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_else(|_| "host".into());
        format!("{host}-{}", std::process::id())
    })
}

/// Connection attempts while Redis is unreachable at start: from 1 s,
/// doubling, up to 15 s (as a reconcile waits for Redis).
const REDIS_AT_START_BACKOFF: Backoff =
    Backoff::new(Duration::from_secs(1), Duration::from_secs(15));

async fn run(args: RunArgs) -> Result<(), String> {
    let shard = match args.shard_index.zip(args.shard_count) {
        Some((index, count)) => {
            Shard::new(index, count).map_err(|e| format!("--shard-index/--shard-count: {e}"))?
        }
        None => Shard::ALL,
    };
    // The configuration is checked whole before any connection is made: a
    // bad channel or source is said at once, also while Redis is down.
    let (config, target) = args.common.load()?;
    let providers = Providers::from_config(&config.providers)
        .map_err(|e| e.to_string())?
        .paced(config.scan_starts.quota());
    let channels = config.channel_policy(args.namespace.as_deref())?;
    let team_channels = config.team_channel_settings(&providers)?;
    let shutdown = shutdown_on_signal();
    let metrics = Arc::new(Metrics::new());
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("cannot reach the Kubernetes API: {e}"))?;
    // Probes first: the process is alive (and not ready) while it waits.
    let ready_store = Arc::new(OnceLock::new());
    let probes = tokio::spawn(crate::probes::serve(
        args.metrics_addr,
        args.metrics.exposure(&client)?,
        metrics.clone(),
        ready_store.clone(),
        shutdown.clone(),
    ));
    args.common.report_redis_exposure(&target, &metrics)?;
    let reachable = args
        .common
        .store_when_reachable(&config, &target, &shutdown);
    let Some(store) = reachable.await? else {
        return Ok(());
    };
    let settings = ControllerSettings {
        channels,
        team_channels,
        concurrency: args.concurrency,
        shard,
        namespace: args.namespace,
        instance: instance_id(args.instance),
        progress_every: config.status.progress_every,
        scan_starts: config.scan_starts.clone(),
        reports: config.reports.clone(),
        events: config.events.clone(),
    };
    info!(instance = %settings.instance, metrics = %args.metrics_addr, "starting controller");
    let pipeline = Pipeline::new(store.clone(), providers, config.steps.clone());
    let ctx = Arc::new(controller::Context::new(
        client,
        pipeline,
        store.doors(),
        metrics,
        settings,
        shutdown.clone(),
    ));
    // The cell is empty until now, so this first set cannot fail.
    let _ = ready_store.set(store);
    controller::run(ctx).await;
    shutdown.cancel();
    match probes.await {
        Ok(Err(e)) => Err(format!("metrics server on {}: {e}", args.metrics_addr)),
        _ => Ok(()),
    }
}

/// The store `common` names, scoped by `namespace` when one is given, and
/// the asset a command is about.
async fn asset_in(
    common: &Common,
    namespace: Option<&str>,
    asset: String,
) -> Result<(TicketStore, AssetId), String> {
    let store = common.store().await?.1;
    let store = match namespace {
        Some(namespace) => store.scoped(namespace).map_err(|e| e.to_string())?,
        None => store,
    };
    let asset = AssetId::new(asset).map_err(|e| e.to_string())?;
    Ok((store, asset))
}

async fn ticket_command(command: TicketCommand) -> Result<(), String> {
    match command {
        TicketCommand::Show {
            common,
            asset,
            run,
            namespace,
        } => {
            let (store, asset) = asset_in(&common, namespace.as_deref(), asset).await?;
            match store
                .get_ticket(&asset, &run)
                .await
                .map_err(|e| e.to_string())?
            {
                Some(t) => println!("{}", ticket::show(&t)),
                None => return Err(format!("no ticket for asset {asset} run {run}")),
            }
        }
        TicketCommand::History {
            common,
            asset,
            limit,
            namespace,
        } => {
            let (store, asset) = asset_in(&common, namespace.as_deref(), asset).await?;
            let entries = store
                .audit(&asset, limit)
                .await
                .map_err(|e| e.to_string())?;
            print!("{}", ticket::history_table(&entries));
        }
        TicketCommand::List { common, asset } => {
            let (_, store) = common.store().await?;
            let asset = asset
                .map(AssetId::new)
                .transpose()
                .map_err(|e| e.to_string())?;
            print!(
                "{}",
                ticket::list(&store, asset.as_ref())
                    .await
                    .map_err(|e| e.to_string())?
            );
        }
    }
    Ok(())
}
