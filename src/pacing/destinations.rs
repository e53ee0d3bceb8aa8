//! The destinations a client paces: a bounded map, idle ones forgotten.

use super::destination::Destination;
use super::key::Key;
use crate::time::instant_after;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// At the cap, new destinations look for idle ones to forget at most this often (each
/// look visits every destination).
const FULL_SWEEP_PAUSE: Duration = Duration::from_secs(1);

/// Every destination's state, by key. The map's lock is held only to find or add a
/// destination; each destination has its own lock, so destinations never wait on each
/// other.
#[derive(Debug)]
pub(crate) struct Destinations {
    map: Mutex<Map>,
    max: usize,
    idle: Duration,
}

#[derive(Debug)]
struct Map {
    entries: HashMap<Key, Arc<Destination>>,
    swept_at: Instant,
}

impl Destinations {
    /// At most `max` destinations; one with nothing pending for `idle` is forgotten.
    pub(crate) fn new(max: usize, idle: Duration) -> Self {
        Self {
            map: Mutex::new(Map {
                entries: HashMap::new(),
                swept_at: Instant::now(),
            }),
            max,
            idle,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Map> {
        // The map is consistent between statements: recover from poisoning.
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state of `key`, made by `make` if new; `None` when `max` destinations, none
    /// of them idle, are already paced (the request is then not paced).
    pub(crate) fn get_or_insert(
        &self,
        key: &Key,
        now: Instant,
        make: impl FnOnce() -> Destination,
    ) -> Option<Arc<Destination>> {
        let mut map = self.lock();
        if let Some(destination) = map.entries.get(key) {
            return Some(Arc::clone(destination));
        }
        let due = instant_after(map.swept_at, self.idle) <= now;
        let full = map.entries.len() >= self.max;
        if due || (full && instant_after(map.swept_at, FULL_SWEEP_PAUSE) <= now) {
            let idle = self.idle;
            map.entries.retain(|_, d| !d.is_idle(idle, now));
            map.swept_at = now;
        }
        if map.entries.len() >= self.max {
            tracing::debug!(to = %key, "pacing: too many busy destinations, request not paced");
            return None;
        }
        let destination = Arc::new(make());
        map.entries.insert(key.clone(), Arc::clone(&destination));
        Some(destination)
    }

    /// The state of `key`, if paced.
    pub(crate) fn get(&self, key: &Key) -> Option<Arc<Destination>> {
        self.lock().entries.get(key).cloned()
    }

    /// Every destination (a snapshot).
    pub(crate) fn all(&self) -> Vec<Arc<Destination>> {
        self.lock().entries.values().cloned().collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }
}
