//! The [`tower_layer::Layer`] and its builder.

use super::control::{FIRST_PROBE, MAX_PROBE};
use super::key::Key;
use super::service::Pacing;
use super::settings::Settings;
use super::shared::Shared;
use super::window::OPEN_WINDOW;
use crate::classify::StatusSet;
use crate::error::ConfigError;
use http::StatusCode;
use http::uri::Authority;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tower_layer::Layer;

/// Paces a client per destination: lowers a destination's send rate after its 429s (and
/// 503s with `Retry-After`), raises it again as successes come, and holds requests to a destination
/// that refuses everything with `Retry-After` until its cool-down ends.
///
/// Every clone of the layer, and every [`Pacing`] service it makes, shares one table of
/// destinations, each with its own learned rate, queue, slow start, probing delay and
/// cool-down. Build the layer once
/// per client and clone it. See the [module docs](crate::pacing) for the rules, and
/// where to put it relative to a retry layer.
///
/// # Defaults
///
/// | setting | default | why |
/// |---|---|---|
/// | [`with_max_wait`](PacingBuilder::with_max_wait) | [`DEFAULT_MAX_WAIT`](Self::DEFAULT_MAX_WAIT), 30 s | room to drain a burst of a rate limit's typical 10 s window; past that a caller usually prefers an error it can act on |
/// | [`with_initial_window`](PacingBuilder::with_initial_window) | [`DEFAULT_INITIAL_WINDOW`](Self::DEFAULT_INITIAL_WINDOW), 4 | a burst to an unknown server learns its limit from a few requests, not all of them |
/// | [`with_max_cooldown`](PacingBuilder::with_max_cooldown) | [`DEFAULT_MAX_COOLDOWN`](Self::DEFAULT_MAX_COOLDOWN), 5 min | a broken or hostile `Retry-After` cannot stall a destination for hours |
/// | [`with_slow_down_on`](PacingBuilder::with_slow_down_on) | [`DEFAULT_SLOW_DOWN`](Self::DEFAULT_SLOW_DOWN): 429, 503 | the two statuses by which a server says "too much"; a status other than 429 counts only with `Retry-After` |
/// | [`with_probe`](PacingBuilder::with_probe) | [`DEFAULT_FIRST_PROBE`](Self::DEFAULT_FIRST_PROBE), 100 ms, to [`DEFAULT_MAX_PROBE`](Self::DEFAULT_MAX_PROBE), 5 s | a destination that serves nothing is tried again soon, then less and less often |
/// | [`with_max_queue`](PacingBuilder::with_max_queue) | [`DEFAULT_MAX_QUEUE`](Self::DEFAULT_MAX_QUEUE), 4096 per destination | a burst of thousands still queues; a flood fails fast instead of growing memory |
/// | [`with_max_destinations`](PacingBuilder::with_max_destinations) | [`DEFAULT_MAX_DESTINATIONS`](Self::DEFAULT_MAX_DESTINATIONS), 4096 | bounded memory for a client calling any number of hosts |
/// | [`with_idle_timeout`](PacingBuilder::with_idle_timeout) | [`DEFAULT_IDLE_TIMEOUT`](Self::DEFAULT_IDLE_TIMEOUT), 60 s | a destination not used for a minute is forgotten (its learned rate is stale by then) |
///
/// ```
/// use std::time::Duration;
/// use tower::{Service, ServiceBuilder, ServiceExt};
/// use tower_backoff::PacingLayer;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let pacing = PacingLayer::builder()
///     .with_max_wait(Duration::from_secs(2))
///     .build()?;
/// let mut client = ServiceBuilder::new()
///     .layer(pacing.clone())
///     .service(tower::service_fn(|_: http::Request<()>| async {
///         let busy = http::Response::builder().status(503).header("retry-after", "1");
///         Ok::<_, std::convert::Infallible>(busy.body(()).unwrap())
///     }));
///
/// let request = || http::Request::get("http://api.example/").body(()).unwrap();
/// let response = client.ready().await?.call(request()).await?;
/// assert_eq!(response.status(), 503);
/// // Nothing served yet: api.example is probed, one request per probing delay, and,
/// // as it refused all it was sent, it cools down for 1 s. Other hosts are not held.
/// let authority = "api.example".parse()?;
/// assert_eq!(pacing.current_delay_to(&authority), PacingLayer::DEFAULT_FIRST_PROBE);
/// assert_eq!(pacing.cooldown(&authority), Some(Duration::from_secs(1)));
/// assert_eq!(pacing.current_delay_to(&"other.example".parse()?), Duration::ZERO);
///
/// let start = tokio::time::Instant::now();
/// client.ready().await?.call(request()).await?;
/// assert_eq!(start.elapsed(), Duration::from_secs(1));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct PacingLayer {
    shared: Arc<Shared>,
}

impl PacingLayer {
    /// The longest a new request waits for the pace or a cool-down before failing fast:
    /// 30 s. Long enough for a burst of 10 s worth of a rate limit (a common window) to
    /// drain at the limit's pace; shorter limits per request go in a
    /// [`PacingDeadline`](crate::pacing::PacingDeadline).
    pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(30);
    /// Requests a new destination may have in flight before its first responses come back:
    /// 4 (TCP's initial window is of that order). A burst against an unknown rate limit
    /// then costs a handful of 429s, not one per request of the burst.
    pub const DEFAULT_INITIAL_WINDOW: u32 = 4;
    /// The slow start ends once this many requests are in flight without a refusal: 64.
    pub const OPEN_WINDOW: u32 = OPEN_WINDOW;
    /// Requests that may wait for one destination: 4096. A burst of thousands to one
    /// host still queues; past that, new requests fail fast with
    /// [`PacingError::QueueFull`](crate::PacingError::QueueFull) rather than growing memory
    /// without end.
    pub const DEFAULT_MAX_QUEUE: usize = 4096;
    /// Destinations whose state is kept: 4096. Past that, idle ones are forgotten; if
    /// none is idle, requests to further destinations are sent unpaced.
    pub const DEFAULT_MAX_DESTINATIONS: usize = 4096;
    /// A destination with nothing in flight, waiting or cooling down for this long is
    /// forgotten: 60 s. Its next request starts afresh, with a slow start.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
    /// The longest cool-down a `Retry-After` (or `RateLimit`) header can impose: 5 min.
    /// A server asking for more gets 5 min.
    pub const DEFAULT_MAX_COOLDOWN: Duration = Duration::from_secs(5 * 60);
    /// The statuses that slow a destination down: 429 Too Many Requests, and 503 Service
    /// Unavailable when it carries `Retry-After` (a bare 503 is a failure, not a rate).
    pub const DEFAULT_SLOW_DOWN: [StatusCode; 2] = [
        StatusCode::TOO_MANY_REQUESTS,
        StatusCode::SERVICE_UNAVAILABLE,
    ];

    /// The first probing delay of a destination that serves nothing: 100 ms, a few
    /// round trips.
    pub const DEFAULT_FIRST_PROBE: Duration = FIRST_PROBE;
    /// The longest probing delay, 5 s: a destination that refuses everything is still
    /// tried every 5 s, so its recovery is seen within 5 s.
    pub const DEFAULT_MAX_PROBE: Duration = MAX_PROBE;

    /// A layer with every default.
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder starting from the defaults.
    pub fn builder() -> PacingBuilder {
        PacingBuilder::default()
    }

    /// The probing delay of `authority`: zero unless it serves nothing and is probed.
    pub fn probe_delay_to(&self, authority: &Authority) -> Duration {
        self.shared
            .find(&Key::from_authority(authority))
            .map_or(Duration::ZERO, |d| d.probe_delay())
    }

    /// The longest spacing between requests of any destination (one over its
    /// [`current_rate_to`](Self::current_rate_to)): zero while no destination is paced.
    pub fn current_delay(&self) -> Duration {
        self.shared.slowest_delay()
    }

    /// The lowest learned send rate of any paced destination, in requests per second;
    /// `None` while no destination is paced (open, or in its slow start).
    pub fn current_rate(&self) -> Option<f64> {
        self.shared.slowest_rate()
    }

    /// The spacing between requests to `authority`: zero while it is not paced.
    pub fn current_delay_to(&self, authority: &Authority) -> Duration {
        self.shared
            .find(&Key::from_authority(authority))
            .map_or(Duration::ZERO, |d| d.delay())
    }

    /// The learned send rate of `authority`, in requests per second, while it is paced.
    pub fn current_rate_to(&self, authority: &Authority) -> Option<f64> {
        self.shared
            .find(&Key::from_authority(authority))
            .and_then(|d| d.rate())
    }

    /// How long new requests to `authority` are still held by its cool-down, if any.
    pub fn cooldown(&self, authority: &Authority) -> Option<Duration> {
        self.shared
            .find(&Key::from_authority(authority))
            .and_then(|d| d.cooldown(tokio::time::Instant::now()))
    }

    /// How many destinations' states are kept (at most
    /// [`with_max_destinations`](PacingBuilder::with_max_destinations)).
    pub fn destinations(&self) -> usize {
        self.shared.destinations()
    }
}

impl Default for PacingLayer {
    fn default() -> Self {
        PacingBuilder::default()
            .build()
            .expect("the default settings are valid")
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
        Pacing::new(inner, Arc::clone(&self.shared))
    }
}

/// Settings of a [`PacingLayer`]; each defaults to the matching `DEFAULT_*` constant of
/// [`PacingLayer`].
///
/// ```
/// use std::time::Duration;
/// use http::StatusCode;
/// use tower_backoff::PacingLayer;
///
/// let pacing = PacingLayer::builder()
///     .with_probe(Duration::from_millis(50), Duration::from_secs(2))
///     .with_max_wait(Duration::from_secs(3))
///     .with_max_cooldown(Duration::from_secs(60))
///     .with_slow_down_on([StatusCode::TOO_MANY_REQUESTS, StatusCode::BAD_GATEWAY])
///     .with_max_queue(1_000)
///     .with_max_destinations(100)
///     .with_idle_timeout(Duration::from_secs(30))
///     .build()?;
///
/// let err = PacingLayer::builder().with_slow_down_on([StatusCode::OK]).build().unwrap_err();
/// assert_eq!((err.field(), err.value()), ("slow_down_on", "200"));
/// let err = PacingLayer::builder().with_max_queue(0).build().unwrap_err();
/// assert_eq!((err.field(), err.value()), ("max_queue", "0"));
/// # drop(pacing);
/// # Ok::<(), tower_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct PacingBuilder {
    settings: Settings,
    slow_down: Vec<StatusCode>,
    /// `with_known_rate`'s destinations, their requests and periods, as given.
    known: Vec<(String, u32, Duration)>,
}

impl Default for PacingBuilder {
    fn default() -> Self {
        Self {
            settings: Settings {
                max_wait: PacingLayer::DEFAULT_MAX_WAIT,
                max_cooldown: PacingLayer::DEFAULT_MAX_COOLDOWN,
                initial_window: PacingLayer::DEFAULT_INITIAL_WINDOW,
                // Set by `build`, from `slow_down` below once validated.
                slow_down: StatusSet::EMPTY,
                max_queue: PacingLayer::DEFAULT_MAX_QUEUE,
                max_destinations: PacingLayer::DEFAULT_MAX_DESTINATIONS,
                idle_timeout: PacingLayer::DEFAULT_IDLE_TIMEOUT,
                first_probe: PacingLayer::DEFAULT_FIRST_PROBE,
                max_probe: PacingLayer::DEFAULT_MAX_PROBE,
            },
            slow_down: PacingLayer::DEFAULT_SLOW_DOWN.to_vec(),
            known: Vec::new(),
        }
    }
}

impl PacingBuilder {
    /// The probing delays of a destination that serves nothing (its pace has nothing to
    /// go by then): one request after `first`, then after twice the delay before, up to
    /// `max`. A success ends the probing. `first` must be greater than zero, and `max` at
    /// least `first`.
    pub fn with_probe(mut self, first: Duration, max: Duration) -> Self {
        self.settings.first_probe = first;
        self.settings.max_probe = max;
        self
    }

    /// The longest a request waits for its destination's pace or cool-down: one expected
    /// to wait longer (its cool-down, or its place in the queue at the current rate)
    /// fails at once with [`PacingError::WaitTooLong`](crate::PacingError::WaitTooLong);
    /// one whose wait grows past it in the queue (the pace went down) fails then. A
    /// destination that has not refused lately never fails a request for its wait (only
    /// its [`PacingDeadline`](crate::pacing::PacingDeadline) does). Zero never waits for a pace:
    /// every request that would have to fails fast (load shedding). Any duration is
    /// valid.
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.settings.max_wait = max_wait;
        self
    }

    /// The longest cool-down a response's `Retry-After` (or `RateLimit`) can impose;
    /// longer requests are cut to it. Zero ignores those headers: slow-down responses
    /// then only lower the destination's rate. Any duration is valid.
    pub fn with_max_cooldown(mut self, max_cooldown: Duration) -> Self {
        self.settings.max_cooldown = max_cooldown;
        self
    }

    /// How many requests a new destination is sent before its first responses are back:
    /// the window of its slow start, which grows by one per success (doubling per round
    /// trip), and doubles after each second spent full without any response (so a slow
    /// server or long-polls hold others back about a second, never fail them), until the
    /// first refusal or [`OPEN_WINDOW`](PacingLayer::OPEN_WINDOW) requests in flight.
    /// Zero skips the slow start: destinations start open. Any value is valid.
    pub fn with_initial_window(mut self, requests: u32) -> Self {
        self.settings.initial_window = requests;
        self
    }

    /// The statuses that slow a destination down (replacing the default set); every other
    /// status counts as a success. Each must be a 4xx or 5xx, and the set not empty.
    pub fn with_slow_down_on(mut self, statuses: impl IntoIterator<Item = StatusCode>) -> Self {
        self.slow_down = statuses.into_iter().collect();
        self
    }

    /// How many requests may wait for one destination; when that many wait, new ones
    /// fail at once with [`PacingError::QueueFull`](crate::PacingError::QueueFull).
    /// At least 1 (use [`with_max_wait`](Self::with_max_wait) zero to shed every request that
    /// would wait).
    pub fn with_max_queue(mut self, requests: usize) -> Self {
        self.settings.max_queue = requests;
        self
    }

    /// How many destinations' states are kept. When that many are kept, new destinations
    /// take the place of idle ones; with none idle, their requests are sent unpaced. At
    /// least 1. It bounds the series of the pacing gauges too (see
    /// [`metrics`](crate::metrics#bounded-series)).
    pub fn with_max_destinations(mut self, destinations: usize) -> Self {
        self.settings.max_destinations = destinations;
        self
    }

    /// How long a destination with nothing in flight, waiting or cooling down is kept;
    /// then its learned rate is forgotten (when the next new destination arrives: an
    /// idle client does no work). Greater than zero.
    pub fn with_idle_timeout(mut self, idle: Duration) -> Self {
        self.settings.idle_timeout = idle;
        self
    }

    /// The rate `destination` allows this client, if you know it: `requests` per `per`
    /// (as tower's `RateLimit` takes it). Its requests are paced at it, evenly spaced,
    /// from the first one (no slow start), and never faster, also when it serves them all
    /// (a timer that fired late may be caught up by up to 5 ms at the next request);
    /// refusals still slow it down, and it grows back to this rate, not past it. Its
    /// requests wait for their turn and fail past [`with_max_wait`](Self::with_max_wait),
    /// and it is paced even when [`with_max_destinations`](Self::with_max_destinations)
    /// are busy. Other destinations are not affected.
    ///
    /// A limiter that tells nothing of its limit can only be found by its refusals, and
    /// one that counts them too (HAProxy's stick tables) is not found well: give a little
    /// under your share of it, such as 97 % (see `docs/BENCHMARKS.md`). `destination` is
    /// the authority as the
    /// request URIs (or `Host` headers) name it: `host`, or `host:port` when they give
    /// the port; one destination takes one rate.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tower_backoff::PacingLayer;
    ///
    /// // 100 requests a minute, sent at 97 % of that: one every 0.62 s.
    /// let pacing = PacingLayer::builder()
    ///     .with_known_rate("api.example", 97, Duration::from_secs(60))
    ///     .build()?;
    /// # drop(pacing);
    /// let err = PacingLayer::builder()
    ///     .with_known_rate("api.example", 0, Duration::from_secs(1))
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "known_rate");
    /// # Ok::<(), tower_backoff::ConfigError>(())
    /// ```
    pub fn with_known_rate(
        mut self,
        destination: impl Into<String>,
        requests: u32,
        per: Duration,
    ) -> Self {
        self.known.push((destination.into(), requests, per));
        self
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for field `slow_down_on` when it is empty or names a status
    /// outside 400–599, for `probe` when its first delay is zero or its longest is
    /// shorter, for `max_queue` or `max_destinations` when zero, for
    /// `idle_timeout` when zero, for `known_rate` when its destination is no authority
    /// (`host` or `host:port`) or was given a rate already, when its requests or period
    /// are zero, or when the rate is under one request a day.
    pub fn build(self) -> Result<PacingLayer, ConfigError> {
        if self.settings.max_queue == 0 {
            return Err(ConfigError::new(
                "max_queue",
                0,
                "must be at least 1; to shed every request that would wait, set max_wait to zero",
            ));
        }
        if self.settings.max_destinations == 0 {
            return Err(ConfigError::new(
                "max_destinations",
                0,
                "must be at least 1",
            ));
        }
        if self.settings.idle_timeout.is_zero() {
            return Err(ConfigError::new(
                "idle_timeout",
                self.settings.idle_timeout,
                "must be greater than zero, or every destination would be forgotten at once",
            ));
        }
        if self.slow_down.is_empty() {
            return Err(ConfigError::new(
                "slow_down_on",
                self.slow_down,
                "must name at least one status, or the client would never slow down",
            ));
        }
        let mut slow_down = StatusSet::EMPTY;
        for status in &self.slow_down {
            slow_down = slow_down.with(*status).map_err(|_| {
                ConfigError::new(
                    "slow_down_on",
                    status.as_u16(),
                    "must be a 4xx or 5xx status: only errors can ask a client to slow down",
                )
            })?;
        }
        let (first, max) = (self.settings.first_probe, self.settings.max_probe);
        if first.is_zero() || max < first {
            return Err(ConfigError::new(
                "probe",
                (first, max),
                "the first delay must be greater than zero, and the longest at least the first",
            ));
        }
        let settings = Settings {
            slow_down,
            ..self.settings
        };
        let known = known_rates(&self.known)?;
        Ok(PacingLayer {
            shared: Arc::new(Shared::new(settings, known)),
        })
    }
}

/// The slowest rate `with_known_rate` takes: one request a day. Slower, a spacing of
/// centuries is more likely a mistake than a limit.
const MIN_KNOWN_RATE: f64 = 1.0 / 86_400.0;

/// `with_known_rate`'s destinations, validated: their rates in requests per second.
fn known_rates(known: &[(String, u32, Duration)]) -> Result<HashMap<Key, f64>, ConfigError> {
    let mut rates = HashMap::with_capacity(known.len());
    for (destination, requests, per) in known {
        let authority = Authority::try_from(destination.as_str()).map_err(|_| {
            ConfigError::new(
                "known_rate",
                destination,
                "must name a destination as its URIs do: host, or host:port",
            )
        })?;
        let rate = f64::from(*requests) / per.as_secs_f64();
        // Checked in this order, the rate is finite.
        if *requests == 0 || per.is_zero() || rate < MIN_KNOWN_RATE {
            return Err(ConfigError::new(
                "known_rate",
                (destination, requests, per),
                "must allow at least one request a day, in a period greater than zero",
            ));
        }
        if rates
            .insert(Key::from_authority(&authority), rate)
            .is_some()
        {
            return Err(ConfigError::new(
                "known_rate",
                destination,
                "names a destination given a rate already (userinfo is not part of it)",
            ));
        }
    }
    Ok(rates)
}

#[cfg(test)]
impl PacingLayer {
    /// The validated settings, for the pacing modules' unit tests.
    pub(crate) fn settings(&self) -> Settings {
        self.shared.settings
    }
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
