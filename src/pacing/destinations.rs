//! The destinations a client paces, by key: a bounded map, idle ones forgotten.

use super::destination::Destination;
use crate::time::instant_after;
use http::Request;
use http::uri::Authority;
use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

/// A destination: the request URI's authority, else its `Host` header, without userinfo,
/// so credentials never become a key or a log field. `None`: requests that name none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Key(Option<Authority>);

impl Key {
    pub(crate) fn of<B>(request: &Request<B>) -> Self {
        if let Some(authority) = request.uri().authority() {
            return Self::from_authority(authority);
        }
        let host = request.headers().get(http::header::HOST);
        let host = host.and_then(|host| Authority::try_from(host.as_bytes()).ok());
        host.map_or(Self(None), |host| Self::from_authority(&host))
    }

    /// `authority` without its userinfo.
    pub(crate) fn from_authority(authority: &Authority) -> Self {
        Self(match authority.as_str().rsplit_once('@') {
            None => Some(authority.clone()),
            Some((_, host)) => Authority::try_from(host).ok(),
        })
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let authority = self.0.as_ref().map(Authority::as_str);
        f.write_str(authority.unwrap_or("(no authority)"))
    }
}

/// At the cap, new destinations look for idle ones at most this often (a look visits all).
const FULL_SWEEP_PAUSE: Duration = Duration::from_secs(1);
/// Parts of the map, each behind its own lock: destinations seldom wait for each other.
const SHARDS: usize = 16;

type Shard = HashMap<Key, Arc<Destination>>;

/// Every destination's state, in [`SHARDS`] parts. A request locks only its destination's
/// part, then the destination's own lock. The bound and the sweeps are the whole map's.
#[derive(Debug)]
pub(crate) struct Destinations {
    shards: Box<[Mutex<Shard>]>,
    hasher: RandomState,
    /// Destinations held and being added: a place is taken before the insertion, so the
    /// bound holds under races.
    count: AtomicUsize,
    max: usize,
    idle: Duration,
    swept_at: Mutex<Instant>,
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
            swept_at: Mutex::new(Instant::now()),
        }
    }

    fn shard(&self, key: &Key) -> MutexGuard<'_, Shard> {
        lock(&self.shards[self.hasher.hash_one(key) as usize % SHARDS])
    }

    /// The state of `key`, made by `make` if new; `None` when `max` destinations, none
    /// idle, are held (the request is then not paced), unless `always` (a known rate).
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
        // Sweep every `idle` period, and at the cap at most every `FULL_SWEEP_PAUSE`.
        let full = self.count.load(Relaxed) >= self.max;
        let pause = full.then_some(FULL_SWEEP_PAUSE);
        if self.sweep_due(pause.map_or(self.idle, |p| p.min(self.idle)), now) {
            for shard in self.shards.iter() {
                let mut shard = lock(shard);
                let before = shard.len();
                shard.retain(|_, d| !d.forget_if_idle(self.idle, now));
                self.count.fetch_sub(before - shard.len(), AcqRel);
            }
        }
        let reserve = |count| (always || count < self.max).then_some(count + 1);
        let reserved = self.count.fetch_update(AcqRel, Acquire, reserve).is_ok();
        let mut shard = self.shard(key);
        if let Some(destination) = shard.get(key) {
            // Added by another request meanwhile.
            if reserved {
                self.count.fetch_sub(1, AcqRel);
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

    /// Whether the last sweep is `every` ago or more; if so, this caller sweeps.
    fn sweep_due(&self, every: Duration, now: Instant) -> bool {
        let mut swept_at = lock(&self.swept_at);
        let due = instant_after(*swept_at, every) <= now;
        if due {
            *swept_at = now;
        }
        due
    }

    pub(crate) fn get(&self, key: &Key) -> Option<Arc<Destination>> {
        self.shard(key).get(key).cloned()
    }

    /// Every destination (a snapshot).
    pub(crate) fn all(&self) -> Vec<Arc<Destination>> {
        let shards = self.shards.iter();
        shards
            .flat_map(|s| lock(s).values().cloned().collect::<Vec<_>>())
            .collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|shard| lock(shard).len()).sum()
    }
}

/// Locks, recovering from poisoning: every update leaves the state consistent.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::PacingSeries;
    use crate::pacing::PacingLayer;
    use std::sync::mpsc;

    fn destination(key: &Key, now: Instant) -> Destination {
        let settings = PacingLayer::new().shared.settings;
        Destination::new(
            key.clone(),
            settings,
            (None, false),
            PacingSeries::new(1).gauges(key, false),
            now,
        )
    }

    fn key(host: &str) -> Key {
        Key::from_authority(&host.parse().unwrap())
    }

    #[test]
    fn the_key_is_the_authority_else_the_host_header_without_userinfo() {
        let key = |request: Request<()>| Key::of(&request).to_string();
        let absolute = Request::get("http://a.example:8080/x").body(()).unwrap();
        assert_eq!(key(absolute), "a.example:8080");
        let relative = Request::get("/x")
            .header("host", "b.example")
            .body(())
            .unwrap();
        assert_eq!(key(relative), "b.example");
        let bare = Request::get("/x").body(()).unwrap();
        assert_eq!(Key::of(&bare), Key(None));
        assert_eq!(key(bare), "(no authority)");

        let secret = Request::get("http://user:s3cret@c.example/x")
            .body(())
            .unwrap();
        let plain = Request::get("http://c.example/y").body(()).unwrap();
        assert_eq!(Key::of(&secret), Key::of(&plain));
        assert_eq!(key(secret.clone()), "c.example");
        assert!(!format!("{:?}", Key::of(&secret)).contains("s3cret"));
        let host_secret = Request::get("/x")
            .header("host", "u:s3cret@d.example")
            .body(())
            .unwrap();
        assert_eq!(key(host_secret), "d.example");
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
        assert_eq!(destinations.count.load(Relaxed), 3);
    }
}
