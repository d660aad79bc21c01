//! The two big faults: Redis killed without persistence (every key lost,
//! the audit snapshotted first) and the API server cut off; each comes back
//! when its time is up, or when the faults stop ([`Driver::calm`]).

use super::Driver;
use crate::ChaosError;
use crate::history::{DataLoss, OutageCause};
use std::time::{Duration, Instant};

impl Driver<'_> {
    /// Snapshots every audit stream with writes paused, then kills Redis:
    /// without persistence it comes back empty.
    pub(super) async fn lose_redis_data(&mut self, down: Duration) -> Result<(), ChaosError> {
        self.world.view.pause_writes(30_000).await?;
        let snapshot = self.world.view.snapshot(self.epoch).await?;
        self.audit.extend(snapshot);
        self.data_losses.push(DataLoss {
            epoch: self.epoch,
            api_resource_version: self.world.emu.resource_version(),
        });
        tokio::task::block_in_place(|| self.world.redis.kill());
        self.outage_begins(OutageCause::Redis);
        self.epoch += 1;
        self.redis_back_at = Some(Instant::now() + down);
        self.figures.redis_data_losses += 1;
        self.say(format!(
            "redis-server killed: every key lost (audit snapshotted first); back in {:.1} s",
            down.as_secs_f64()
        ));
        Ok(())
    }

    /// The API server stops answering from `now` for `down`.
    pub(super) fn begin_outage(&mut self, now: Instant, down: Duration) {
        self.world.proxy.begin_outage();
        self.outage_begins(OutageCause::ApiServer);
        self.api_back_at = Some(now + down);
        self.figures.api_outages += 1;
        self.say(format!(
            "API server outage for {:.1} s: connections cut and refused",
            down.as_secs_f64()
        ));
    }

    /// Ends the API server outage and brings Redis back, each once its time
    /// is up at `now`.
    pub(super) fn end_outages_due(&mut self, now: Instant) -> Result<(), ChaosError> {
        if let Some(ends) = self.api_back_at
            && now >= ends
        {
            self.world.proxy.end_outage();
            self.outage_ends(OutageCause::ApiServer);
            self.api_back_at = None;
            self.say("API server answers again".into());
        }
        if let Some(at) = self.redis_back_at
            && now >= at
        {
            tokio::task::block_in_place(|| self.world.redis.restart())?;
            self.outage_ends(OutageCause::Redis);
            self.redis_back_at = None;
            self.say("redis-server restarted, empty".into());
        }
        Ok(())
    }

    /// The faults stop: Redis and the API answer, the providers are quick,
    /// paused replicas go on. Drilled replicas stay stopped until their
    /// asset is taken over.
    pub(super) fn calm(&mut self) -> Result<(), ChaosError> {
        if self.redis_back_at.take().is_some() {
            tokio::task::block_in_place(|| self.world.redis.restart())?;
            self.outage_ends(OutageCause::Redis);
        }
        if self.api_back_at.take().is_some() {
            self.outage_ends(OutageCause::ApiServer);
        }
        self.world.calm();
        self.isolation = None;
        for name in self.replicas.resume_paused() {
            self.say(format!("{name} resumed (SIGCONT)"));
        }
        self.say("faults stopped; waiting for every object to settle".into());
        Ok(())
    }
}
