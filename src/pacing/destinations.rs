//! The destinations a client paces: a bounded map, idle ones forgotten.

use super::destination::Destination;
use super::key::Key;
use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// At the cap, new destinations look for idle ones to forget at most this often (each
/// look visits every destination).
const FULL_SWEEP_PAUSE: Duration = Duration::from_secs(1);
/// The map is split in this many parts, each behind its own lock: requests to different
/// destinations seldom wait on one lock, as they would on a single map's (every request
/// looks its destination up).
const SHARDS: usize = 16;

/// One part of the map.
type Shard = HashMap<Key, Arc<Destination>>;

/// Every destination's state, by key, in [`SHARDS`] parts. A request locks only its
/// destination's part to find it, and then the destination's own lock; no lock is held
/// across destinations. The bound and the sweeps of idle destinations are the whole
/// map's, kept in atomics.
#[derive(Debug)]
pub(crate) struct Destinations {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    /// Destinations in every part, and those being added (a place is taken before the
    /// insertion, so the bound holds under races).
    count: AtomicUsize,
    max: usize,
    idle: Duration,
    /// The instants below count from here.
    origin: Instant,
    /// The last sweep of every part, in nanoseconds since `origin`.
    swept_at: AtomicU64,
}

impl Destinations {
    /// At most `max` destinations; one with nothing pending for `idle` is forgotten.
    pub(crate) fn new(max: usize, idle: Duration) -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            hasher: RandomState::new(),
            count: AtomicUsize::new(0),
            max,
            idle,
            origin: Instant::now(),
            swept_at: AtomicU64::new(0),
        }
    }

    /// The part `key` lives in, locked.
    fn shard(&self, key: &Key) -> MutexGuard<'_, Shard> {
        let index = self.hasher.hash_one(key) as usize % SHARDS;
        lock(&self.shards[index])
    }

    /// The state of `key`, made by `make` if new; `None` when `max` destinations, none
    /// of them idle, are already paced (the request is then not paced), unless `always`
    /// (a destination the user configured is paced whatever the bound).
    pub(crate) fn get_or_insert(
        &self,
        key: &Key,
        always: bool,
        now: Instant,
        make: impl FnOnce() -> Destination,
    ) -> Option<Arc<Destination>> {
        if let Some(destination) = self.get(key) {
            return Some(destination);
        }
        // A new destination: forget the idle ones first, every `idle` period, and when
        // the map is full, at most every `FULL_SWEEP_PAUSE`.
        let full = self.count.load(Ordering::Relaxed) >= self.max;
        if self.sweep_due(self.idle, now) || (full && self.sweep_due(FULL_SWEEP_PAUSE, now)) {
            self.sweep(now);
        }
        let reserved = self
            .count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |count| {
                (always || count < self.max).then_some(count + 1)
            })
            .is_ok();
        let mut shard = self.shard(key);
        if let Some(destination) = shard.get(key) {
            // Added by another request meanwhile.
            if reserved {
                self.count.fetch_sub(1, Ordering::AcqRel);
            }
            return Some(Arc::clone(destination));
        }
        if !reserved {
            tracing::debug!(to = %key, "pacing: too many busy destinations, request not paced");
            return None;
        }
        let destination = Arc::new(make());
        shard.insert(key.clone(), Arc::clone(&destination));
        Some(destination)
    }

    /// Whether the last sweep is `every` ago or more; if so, this caller sweeps (the
    /// others see the sweep as just done).
    fn sweep_due(&self, every: Duration, now: Instant) -> bool {
        let now = self.nanos(now);
        let last = self.swept_at.load(Ordering::Acquire);
        let every = u64::try_from(every.as_nanos()).unwrap_or(u64::MAX);
        now.saturating_sub(last) >= every
            && self
                .swept_at
                .compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
    }

    /// Forgets the idle destinations, one part at a time.
    fn sweep(&self, now: Instant) {
        for shard in self.shards.iter() {
            let mut shard = lock(shard);
            let before = shard.len();
            shard.retain(|_, d| !d.forget_if_idle(self.idle, now));
            self.count.fetch_sub(before - shard.len(), Ordering::AcqRel);
        }
    }

    fn nanos(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.origin).as_nanos();
        u64::try_from(since).unwrap_or(u64::MAX)
    }

    /// The state of `key`, if paced.
    pub(crate) fn get(&self, key: &Key) -> Option<Arc<Destination>> {
        self.shard(key).get(key).cloned()
    }

    /// Every destination (a snapshot).
    pub(crate) fn all(&self) -> Vec<Arc<Destination>> {
        self.shards
            .iter()
            .flat_map(|shard| lock(shard).values().cloned().collect::<Vec<_>>())
            .collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|shard| lock(shard).len()).sum()
    }
}

/// Locks a part, recovering from poisoning: a part is consistent between statements.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::PacingSeries;
    use crate::pacing::PacingLayer;
    use std::sync::mpsc;

    fn destination(key: &Key, now: Instant) -> Destination {
        let settings = PacingLayer::new().settings();
        Destination::new(
            key.clone(),
            settings,
            None,
            PacingSeries::new(1).gauges(key, false),
            now,
        )
    }

    fn key(host: &str) -> Key {
        Key::from_authority(&host.parse().unwrap())
    }

    #[tokio::test(start_paused = true)]
    async fn a_lookup_does_not_wait_for_another_destinations_part() {
        let destinations = Arc::new(Destinations::new(100, Duration::from_secs(10)));
        let now = Instant::now();
        let first = key("a.example");
        let index = |k: &Key| destinations.hasher.hash_one(k) as usize % SHARDS;
        let other = (0..1000)
            .map(|i| key(&format!("h{i}.example")))
            .find(|k| index(k) != index(&first))
            .unwrap();
        let held = destinations.shard(&first);
        // With one lock for the map, this thread would wait for `held` forever.
        let (tx, rx) = mpsc::channel();
        let (theirs, lookup) = (Arc::clone(&destinations), other.clone());
        let thread = std::thread::spawn(move || {
            let found = theirs
                .get_or_insert(&lookup, false, now, || destination(&lookup, now))
                .is_some();
            tx.send(found).unwrap();
        });
        let found = rx.recv_timeout(std::time::Duration::from_secs(5));
        drop(held);
        thread.join().unwrap();
        assert_eq!(found, Ok(true));
        assert_eq!(destinations.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_bound_is_the_whole_maps_across_its_parts() {
        let destinations = Destinations::new(3, Duration::from_secs(10));
        let now = Instant::now();
        let added = (0..40)
            .filter(|i| {
                let k = key(&format!("h{i}.example"));
                destinations
                    .get_or_insert(&k, false, now, || destination(&k, now))
                    .is_some()
            })
            .count();
        // The first three are kept (and found again); the 37 others are not paced.
        assert_eq!(added, 3);
        assert_eq!(destinations.len(), 3);
        assert_eq!(destinations.count.load(Ordering::Relaxed), 3);
    }
}
