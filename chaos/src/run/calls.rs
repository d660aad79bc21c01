//! The API calls on the AssetScans: each a task of its own, chained after
//! the object's previous call, so that the schedule never waits for the API
//! server; a failed call is reported as soon as it is over.

use super::Driver;
use crate::ChaosError;

/// An API call on an AssetScan.
#[derive(Clone, Copy)]
enum Call {
    Create,
    Edit,
    Delete,
}

impl Driver<'_> {
    /// Creates `object`, its asset known to the inventory; with `isolate`,
    /// while only that (armed) replica runs.
    pub(super) fn create(&mut self, object: usize, isolate: Option<usize>) {
        if let Some(slot) = isolate {
            self.isolate(slot, object);
        }
        let planned = &self.plan.objects[object];
        self.world
            .stubs
            .inventory
            .set_online(&planned.asset, planned.online());
        self.call(object, Call::Create);
        self.created.insert(object);
    }

    /// Edits `object`'s spec: a new generation.
    pub(super) fn edit(&mut self, object: usize) {
        self.call(object, Call::Edit);
        self.edited.insert(object);
        let name = &self.plan.objects[object].name;
        self.say(format!("edit {name} (a new generation)"));
    }

    pub(super) fn delete(&mut self, object: usize) {
        self.call(object, Call::Delete);
        self.deleted.insert(object);
        self.say(format!("delete {}", self.plan.objects[object].name));
    }

    /// Makes an API call on `object` as a task of its own, after the
    /// object's previous call: the schedule never waits for the API server.
    fn call(&mut self, object: usize, call: Call) {
        let previous = self.calls.remove(&object);
        let objects = self.world.api.clone();
        let planned = self.plan.objects[object].clone();
        let task = tokio::spawn(async move {
            if let Some(previous) = previous {
                previous.await.map_err(ChaosError::from)??;
            }
            match call {
                Call::Create => objects.create(&planned).await,
                Call::Edit => objects.edit(&planned).await,
                Call::Delete => objects.delete(&planned).await,
            }
        });
        self.calls.insert(object, task);
    }

    /// Reports a failed API call as soon as it is over; with `all`, waits
    /// for every call.
    pub(super) async fn collect_calls(&mut self, all: bool) -> Result<(), ChaosError> {
        let done: Vec<usize> = self
            .calls
            .iter()
            .filter(|(_, task)| all || task.is_finished())
            .map(|(object, _)| *object)
            .collect();
        for object in done {
            if let Some(task) = self.calls.remove(&object) {
                task.await??;
            }
        }
        Ok(())
    }
}
