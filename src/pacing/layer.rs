//! The [`tower_layer::Layer`], its builder, and the state its clones share.

use super::control::{Controller, FIRST_PROBE, MAX_PROBE, OPEN_WINDOW, interval};
use super::destination::{Alone, Destination};
use super::destinations::{Destinations, Key};
use super::service::Pacing;
use crate::classify::StatusSet;
use crate::error::ConfigError;
use crate::metrics::PacingSeries;
use http::StatusCode;
use http::uri::Authority;
use std::collections::HashMap;
use std::fmt::{self, Debug};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tower_layer::Layer;

/// Paces a client per destination: slower after its 429s (and 503s with `Retry-After`),
/// faster as successes come, and held through the cool-downs it asks for.
///
/// Its clones and their [`Pacing`] services share one table of destinations: build it
/// once per client. The [module docs](crate::pacing) give the rules, and where to put it.
///
/// ```
/// use std::time::Duration;
/// use tower::{Layer, Service, ServiceExt};
/// use tower_backoff::PacingLayer;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let pacing = PacingLayer::new();
/// let mut client = pacing.layer(tower::service_fn(|_: http::Request<()>| async {
///     let busy = http::Response::builder().status(503).header("retry-after", "1");
///     Ok::<_, std::convert::Infallible>(busy.body(()).unwrap())
/// }));
/// let request = || http::Request::get("http://api.example/").body(()).unwrap();
/// assert_eq!(client.ready().await?.call(request()).await?.status(), 503);
/// // Nothing served: api.example cools down for 1 s, then is probed. Other hosts are not held.
/// let authority = "api.example".parse()?;
/// assert_eq!(pacing.cooldown(&authority), Some(Duration::from_secs(1)));
/// assert_eq!(pacing.current_delay_to(&authority), PacingLayer::DEFAULT_FIRST_PROBE);
/// assert_eq!(pacing.current_delay_to(&"other.example".parse()?), Duration::ZERO);
/// let start = tokio::time::Instant::now();
/// client.ready().await?.call(request()).await?;
/// assert_eq!(start.elapsed(), Duration::from_secs(1));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PacingLayer {
    pub(super) shared: Arc<Shared>,
}

impl PacingLayer {
    /// The longest wait at a destination that refused lately, 30 s: a 10 s window drains in it.
    pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(30);
    /// Requests in flight to a new destination, 4: a burst at an unknown limit costs a few 429s.
    pub const DEFAULT_INITIAL_WINDOW: u32 = 4;
    /// The slow start ends once this many requests are in flight without a refusal: 64.
    pub const OPEN_WINDOW: u32 = OPEN_WINDOW;
    /// Requests that may wait for one destination, 4096: a flood fails fast, not in memory.
    pub const DEFAULT_MAX_QUEUE: usize = 4096;
    /// Destinations whose state is kept, 4096: bounded memory for any number of hosts.
    pub const DEFAULT_MAX_DESTINATIONS: usize = 4096;
    /// A destination with nothing pending this long is forgotten, 60 s: its rate is stale.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
    /// The longest cool-down a header imposes, 5 min: no broken `Retry-After` stalls for hours.
    pub const DEFAULT_MAX_COOLDOWN: Duration = Duration::from_secs(5 * 60);
    /// The statuses that slow a destination down: 429, and 503 with `Retry-After`.
    pub const DEFAULT_SLOW_DOWN: [StatusCode; 2] = [
        StatusCode::TOO_MANY_REQUESTS,
        StatusCode::SERVICE_UNAVAILABLE,
    ];
    /// The first probing delay of a destination that serves nothing: 100 ms.
    pub const DEFAULT_FIRST_PROBE: Duration = FIRST_PROBE;
    /// The longest probing delay, 2 s: longer than a second's window, which some limiters
    /// restart at each request they refuse; a recovery is seen within 2 s.
    pub const DEFAULT_MAX_PROBE: Duration = MAX_PROBE;

    /// A layer with every default.
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder starting from the defaults.
    pub fn builder() -> PacingBuilder {
        PacingBuilder::default()
    }

    /// Reads the controller of `to`, if kept; `T::default()` otherwise.
    fn read<T: Default>(&self, to: &Authority, f: impl FnOnce(&mut Controller, Instant) -> T) -> T {
        let found = self.shared.destinations.get(&Key::from_authority(to));
        found.map(|d| d.control(f)).unwrap_or_default()
    }

    /// The probing delay of `authority`: zero unless it serves nothing and is probed.
    pub fn probe_delay_to(&self, authority: &Authority) -> Duration {
        self.read(authority, |c, _| c.probe)
    }

    /// The longest spacing between requests of any destination: zero while none is paced.
    pub fn current_delay(&self) -> Duration {
        self.current_rate().map_or(Duration::ZERO, interval)
    }

    /// The fleet's store, while Redis answers: the accessors read what it last said.
    #[cfg(feature = "redis")]
    fn fleet(&self) -> Option<&super::fleet::Store> {
        let store = self.shared.fleet.as_ref();
        store.filter(|store| store.usable())
    }

    /// The lowest send rate of any paced destination, in requests per second. In a fleet
    /// (feature `redis`), the fleet's paces as this process's requests last saw them.
    pub fn current_rate(&self) -> Option<f64> {
        #[cfg(feature = "redis")]
        if let Some(store) = self.fleet() {
            return store.lowest_pace();
        }
        let all = self.shared.destinations.all();
        let rates = all.iter().filter_map(|d| d.control(Controller::rate));
        rates.reduce(f64::min)
    }

    /// The spacing between requests to `authority`: zero while it is not paced.
    pub fn current_delay_to(&self, authority: &Authority) -> Duration {
        let rate = self.current_rate_to(authority);
        rate.map_or(Duration::ZERO, interval)
    }

    /// The send rate of `authority`, in requests per second, while it is paced. In a fleet
    /// (feature `redis`), the fleet's pace as this process's last request to it saw it.
    pub fn current_rate_to(&self, authority: &Authority) -> Option<f64> {
        #[cfg(feature = "redis")]
        if let Some(store) = self.fleet() {
            return store.pace(&Key::from_authority(authority));
        }
        self.read(authority, Controller::rate)
    }

    /// How long new requests to `authority` are still held by its cool-down, if any.
    pub fn cooldown(&self, authority: &Authority) -> Option<Duration> {
        self.read(authority, |c, now| c.cooldown(now).map(|until| until - now))
    }

    /// How many destinations' states are kept.
    pub fn destinations(&self) -> usize {
        self.shared.destinations.len()
    }
}

impl Default for PacingLayer {
    fn default() -> Self {
        let layer = PacingBuilder::default().build();
        layer.expect("the default settings are valid")
    }
}

impl fmt::Debug for PacingLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacingLayer")
            .field("settings", &self.shared.settings)
            .field("current_delay", &self.current_delay())
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for PacingLayer {
    type Service = Pacing<S>;

    fn layer(&self, inner: S) -> Pacing<S> {
        let shared = Arc::clone(&self.shared);
        Pacing { inner, shared }
    }
}

/// What [`PacingBuilder`] validated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    pub(crate) max_wait: Duration,
    pub(crate) max_cooldown: Duration,
    pub(crate) initial_window: u32,
    pub(crate) slow_down: StatusSet,
    pub(crate) max_queue: usize,
    pub(crate) max_destinations: usize,
    pub(crate) idle_timeout: Duration,
    pub(crate) first_probe: Duration,
    pub(crate) max_probe: Duration,
}

/// Shared by a layer, its clones, and every service and response future they make.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) settings: Settings,
    pub(crate) destinations: Destinations,
    /// The rates the user said destinations allow (req/s).
    pub(crate) known: HashMap<Key, f64>,
    /// The labels of the destinations' gauges, bounded as the table is.
    pub(crate) series: PacingSeries,
    /// The fleet's shared state, if kept in Redis.
    #[cfg(feature = "redis")]
    pub(crate) fleet: Option<super::fleet::Store>,
}

impl Shared {
    /// The in-process state of `key` (`None`: too many destinations). While Redis fails, it
    /// paces at this process's share of the fleet's last pace and quota, told once per outage.
    pub(crate) fn destination(&self, key: &Key, now: Instant) -> Option<Arc<Destination>> {
        #[cfg(feature = "redis")]
        let (fleet, alone) = (
            self.fleet.is_some(),
            self.fleet.as_ref().and_then(|s| s.take_alone(key)),
        );
        #[cfg(not(feature = "redis"))]
        let (fleet, alone): (bool, Option<Alone>) = (false, None);
        let known = self.known.get(key).copied();
        let alone = alone.map(|alone| Alone {
            pace: alone
                .pace
                .map(|pace| known.map_or(pace, |known| known.min(pace))),
            ..alone
        });
        let known = alone.and_then(|alone| alone.pace).or(known);
        let destination = self
            .destinations
            .get_or_insert(key, known.is_some(), now, || {
                let gauges = self.series.gauges(key, known.is_some());
                Destination::new(key.clone(), self.settings, (known, fleet), gauges, now)
            })?;
        if let Some(alone) = alone {
            destination.retell(alone, now);
        }
        Some(destination)
    }
}

/// Settings of a [`PacingLayer`]; each defaults to the matching `DEFAULT_*` constant.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::PacingLayer;
///
/// let pacing = PacingLayer::builder()
///     .with_max_wait(Duration::from_secs(3))
///     // 100 requests a minute, sent at 97 % of that: one every 0.62 s.
///     .with_known_rate("api.example", 97, Duration::from_secs(60))
///     .build()?;
/// let err = PacingLayer::builder().with_max_queue(0).build().unwrap_err();
/// assert_eq!((err.field(), err.value()), ("max_queue", "0"));
/// # drop(pacing);
/// # Ok::<(), tower_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct PacingBuilder {
    settings: Settings,
    slow_down: Vec<StatusCode>,
    /// `with_known_rate`'s destinations, requests and periods, as given.
    known: Vec<(String, u32, Duration)>,
    #[cfg(feature = "redis")]
    redis: Option<super::RedisPacing>,
}

impl Default for PacingBuilder {
    fn default() -> Self {
        Self {
            settings: Settings {
                max_wait: PacingLayer::DEFAULT_MAX_WAIT,
                max_cooldown: PacingLayer::DEFAULT_MAX_COOLDOWN,
                initial_window: PacingLayer::DEFAULT_INITIAL_WINDOW,
                // Set by `build`, from `slow_down` once validated.
                slow_down: StatusSet::EMPTY,
                max_queue: PacingLayer::DEFAULT_MAX_QUEUE,
                max_destinations: PacingLayer::DEFAULT_MAX_DESTINATIONS,
                idle_timeout: PacingLayer::DEFAULT_IDLE_TIMEOUT,
                first_probe: PacingLayer::DEFAULT_FIRST_PROBE,
                max_probe: PacingLayer::DEFAULT_MAX_PROBE,
            },
            slow_down: PacingLayer::DEFAULT_SLOW_DOWN.to_vec(),
            known: Vec::new(),
            #[cfg(feature = "redis")]
            redis: None,
        }
    }
}

impl PacingBuilder {
    /// The probing delays of a destination that serves nothing: `first`, doubled per
    /// refused probe up to `max`. `first` must be over zero, and `max` at least `first`.
    pub fn with_probe(mut self, first: Duration, max: Duration) -> Self {
        (self.settings.first_probe, self.settings.max_probe) = (first, max);
        self
    }

    /// The longest a request waits for a destination that refused lately, before it fails
    /// with [`PacingError::WaitTooLong`](crate::PacingError::WaitTooLong). Zero sheds load.
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.settings.max_wait = max_wait;
        self
    }

    /// The longest cool-down a `Retry-After` or `RateLimit` header imposes; zero ignores them.
    pub fn with_max_cooldown(mut self, max_cooldown: Duration) -> Self {
        self.settings.max_cooldown = max_cooldown;
        self
    }

    /// Requests a new destination is sent before its first responses: its slow start's
    /// window, until a refusal or [`OPEN_WINDOW`](PacingLayer::OPEN_WINDOW). Until a quota
    /// is reported, it at most doubles every 100 ms. Zero: none.
    pub fn with_initial_window(mut self, requests: u32) -> Self {
        self.settings.initial_window = requests;
        self
    }

    /// How many requests may wait for one destination (at least 1); more fail at once
    /// with [`PacingError::QueueFull`](crate::PacingError::QueueFull).
    pub fn with_max_queue(mut self, requests: usize) -> Self {
        self.settings.max_queue = requests;
        self
    }

    /// How many destinations are kept (at least 1); past that, new ones replace idle ones
    /// or go unpaced. It bounds the gauges' [series](crate::metrics#bounded-series) too.
    pub fn with_max_destinations(mut self, destinations: usize) -> Self {
        self.settings.max_destinations = destinations;
        self
    }

    /// How long a destination with nothing pending is kept (over zero).
    pub fn with_idle_timeout(mut self, idle: Duration) -> Self {
        self.settings.idle_timeout = idle;
        self
    }

    /// The statuses that slow a destination down (4xx or 5xx, at least one); others are successes.
    pub fn with_slow_down_on(mut self, statuses: impl IntoIterator<Item = StatusCode>) -> Self {
        self.slow_down = statuses.into_iter().collect();
        self
    }

    /// The rate `destination` (`host` or `host:port`) allows, if you know it: `requests` per
    /// `per`, at least one a day, once per destination. It is paced so from its first request.
    pub fn with_known_rate(
        mut self,
        destination: impl Into<String>,
        requests: u32,
        per: Duration,
    ) -> Self {
        self.known.push((destination.into(), requests, per));
        self
    }

    /// Keeps the pacing state in Redis (feature `redis`): the processes built with one
    /// [`RedisPacing`](super::RedisPacing) pace as one client, each in-process while Redis
    /// fails. A rate given by [`with_known_rate`](Self::with_known_rate) is the whole fleet's.
    #[cfg(feature = "redis")]
    pub fn with_redis(mut self, redis: super::RedisPacing) -> Self {
        self.redis = Some(redis);
        self
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first invalid setting, as its method describes it.
    pub fn build(self) -> Result<PacingLayer, ConfigError> {
        let s = self.settings;
        let why = "must be at least 1; to shed every request that would wait, set max_wait to zero";
        ensure(s.max_queue > 0, "max_queue", 0, why)?;
        let why = "must be at least 1";
        ensure(s.max_destinations > 0, "max_destinations", 0, why)?;
        let idle = s.idle_timeout;
        let why = "must be greater than zero, or every destination would be forgotten at once";
        ensure(!idle.is_zero(), "idle_timeout", idle, why)?;
        let statuses = &self.slow_down;
        let why = "must name at least one status, or the client would never slow down";
        ensure(!statuses.is_empty(), "slow_down_on", statuses, why)?;
        let mut slow_down = StatusSet::EMPTY;
        for status in statuses {
            let why = "must be a 4xx or 5xx status: only errors can ask a client to slow down";
            let error = |_| ConfigError::new("slow_down_on", status.as_u16(), why);
            slow_down = slow_down.with(*status).map_err(error)?;
        }
        let (first, max) = (s.first_probe, s.max_probe);
        let why = "the first delay must be greater than zero, and the longest at least the first";
        ensure(!first.is_zero() && max >= first, "probe", (first, max), why)?;
        let mut known = HashMap::with_capacity(self.known.len());
        for (destination, requests, per) in &self.known {
            let why = "must name a destination as its URIs do: host, or host:port";
            let error = |_| ConfigError::new("known_rate", destination, why);
            let key = Key::from_authority(&destination.parse().map_err(error)?);
            let rate = f64::from(*requests) / per.as_secs_f64();
            // Checked in this order, the rate is finite.
            let ok = *requests > 0 && !per.is_zero() && rate >= 1.0 / 86_400.0;
            let why = "must allow at least one request a day, in a period greater than zero";
            ensure(ok, "known_rate", (destination, requests, per), why)?;
            let new = known.insert(key, rate).is_none();
            let why = "names a destination given a rate already (userinfo is not part of it)";
            ensure(new, "known_rate", destination, why)?;
        }
        #[cfg(feature = "redis")]
        if let Some(timeout) = self.redis.as_ref().map(|redis| redis.timeout) {
            let why = "must be greater than zero: every call to Redis would time out";
            ensure(!timeout.is_zero(), "redis_timeout", timeout, why)?;
        }
        let shared = Arc::new(Shared {
            settings: Settings { slow_down, ..s },
            destinations: Destinations::new(s.max_destinations, s.idle_timeout),
            known,
            series: PacingSeries::new(s.max_destinations),
            #[cfg(feature = "redis")]
            fleet: self
                .redis
                .map(|redis| super::fleet::Store::new(redis, s.max_destinations)),
        });
        Ok(PacingLayer { shared })
    }
}

type Str = &'static str;

/// An error for `field` holding `value` unless `ok`.
fn ensure(ok: bool, field: Str, value: impl Debug, why: Str) -> Result<(), ConfigError> {
    ok.then_some(())
        .ok_or_else(|| ConfigError::new(field, value, why))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_settings_are_valid() {
        let layer = PacingLayer::default();
        assert_eq!(layer.current_delay(), Duration::ZERO);
        assert_eq!(layer.destinations(), 0);
    }
}
