//! The test bed: one redis-server, stores and pipelines over it, requests.

use crate::BenchError;
use crate::effects::{InstantEffects, Path};
use assetscan_operator::domain::AssetId;
use assetscan_operator::domain::Policy;
use assetscan_operator::domain::ScanRequest;
use assetscan_operator::domain::TriageRequest;
use assetscan_operator::pipeline::{Pipeline, StepPolicies};
use assetscan_operator::store::{RedisTarget, StoreConfig, StoreError, TicketStore};
use assetscan_testkit::redis::RedisServer;
use std::time::Duration;

/// The owner every benched run belongs to, as the controller's runs do.
pub const OWNER: &str = "bench-owner";

pub struct Bed {
    pub server: RedisServer,
}

impl Bed {
    pub fn start() -> Result<Bed, BenchError> {
        Ok(Bed {
            server: RedisServer::start()?,
        })
    }

    pub fn port(&self) -> u16 {
        self.server.port()
    }

    pub fn version(&self) -> Result<String, BenchError> {
        let info = self.server.command(&["INFO", "server"])?;
        Ok(info
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("?")
            .trim()
            .to_owned())
    }

    /// A store with the default settings but `lock_ttl`.
    pub async fn store_with_ttl(&self, lock_ttl: Duration) -> Result<TicketStore, BenchError> {
        let config = StoreConfig {
            lock_ttl,
            ..StoreConfig::default()
        };
        Ok(TicketStore::connect(&RedisTarget::Standalone(self.server.url()), config).await?)
    }

    /// A store as the operator runs it (a 30 s lock ttl: no renewal falls
    /// inside a measured scan).
    pub async fn store(&self) -> Result<TicketStore, BenchError> {
        self.store_with_ttl(Duration::from_secs(30)).await
    }

    pub async fn pipeline(&self) -> Result<Pipeline<InstantEffects>, BenchError> {
        Ok(self.pipeline_and_store().await?.0)
    }

    /// A pipeline, and its own store connection (whose round trips a
    /// measure counts).
    pub async fn pipeline_and_store(
        &self,
    ) -> Result<(Pipeline<InstantEffects>, TicketStore), BenchError> {
        let store = self.store().await?;
        let pipeline = Pipeline::new(store.clone(), InstantEffects, StepPolicies::default());
        Ok((pipeline, store))
    }
}

pub fn asset(id: &str) -> Result<AssetId, BenchError> {
    Ok(AssetId::new(id).map_err(StoreError::from)?)
}

/// A run of `path` on `asset`, with one notification channel, as the
/// operator starts one: seen not ended, so not read before its claim.
pub fn request(
    asset: &str,
    run: &str,
    path: Path,
    holder: &str,
) -> Result<ScanRequest, BenchError> {
    Ok(ScanRequest {
        asset: AssetId::new(asset).map_err(StoreError::from)?,
        run: run.to_owned(),
        target: path.target(),
        software: Vec::new(),
        sbom: None,
        policy: Policy::default(),
        channels: vec!["secops".to_owned()],
        token_floor: 0,
        holder: holder.to_owned(),
        owner: Some(OWNER.to_owned()),
        supersedes: None,
        expect_open: true,
        resolves_alert: false,
        origin: None,
        triage: TriageRequest::default(),
    })
}
