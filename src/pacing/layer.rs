//! The [`tower_layer::Layer`] and its builder.

use super::Pacing;
use super::gate::{Settings, Shared, StatusSet};
use crate::backoff::ResponsiveBackOff;
use crate::error::ConfigError;
use http::StatusCode;
use http::uri::Authority;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tower_layer::Layer;

/// Paces a whole client: lowers its send rate after 429/503 responses, raises it again
/// as successes come, and holds requests to a destination that refuses everything with
/// `Retry-After` until its cool-down ends.
///
/// Every clone of the layer, and every [`Pacing`] service it makes, shares one state: one
/// learned rate and queue, one probing delay (a [`ResponsiveBackOff`]) for when a
/// destination answers nothing but refusals, and one table of cool-downs. Build the layer
/// once per client and clone it. See the [module docs](crate::pacing) for the rules, and
/// where to put it relative to a retry layer.
///
/// # Defaults
///
/// | setting | default | why |
/// |---|---|---|
/// | [`max_wait`](PacingBuilder::max_wait) | [`DEFAULT_MAX_WAIT`](Self::DEFAULT_MAX_WAIT), 30 s | room to drain a burst of a rate limit's typical 10 s window; past that a caller usually prefers an error it can act on |
/// | [`initial_window`](PacingBuilder::initial_window) | [`DEFAULT_INITIAL_WINDOW`](Self::DEFAULT_INITIAL_WINDOW), 4 | a burst to an unknown server learns its limit from a few requests, not all of them |
/// | [`max_cooldown`](PacingBuilder::max_cooldown) | [`DEFAULT_MAX_COOLDOWN`](Self::DEFAULT_MAX_COOLDOWN), 5 min | a broken or hostile `Retry-After` cannot stall a destination for hours |
/// | [`slow_down_on`](PacingBuilder::slow_down_on) | [`DEFAULT_SLOW_DOWN`](Self::DEFAULT_SLOW_DOWN): 429, 503 | the two statuses by which a server says "too much" |
/// | [`backoff`](PacingBuilder::backoff) | [`default_backoff`](Self::default_backoff) | the probing delay, tuned for HTTP latencies, not for the seed's batch jobs |
///
/// ```
/// use std::time::Duration;
/// use tower::{Service, ServiceBuilder, ServiceExt};
/// use tower_backoff::PacingLayer;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let pacing = PacingLayer::builder()
///     .max_wait(Duration::from_secs(2))
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
/// // Nothing served yet: the whole client probes, one request per backoff delay, and
/// // api.example, which refused all it was sent, cools down for 1 s.
/// assert_eq!(pacing.current_delay(), PacingLayer::DEFAULT_INITIAL_INTERVAL);
/// let authority = "api.example".parse()?;
/// assert_eq!(pacing.cooldown(&authority), Some(Duration::from_secs(1)));
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
    /// drain at the limit's pace; shorter budgets per request go in a
    /// [`PacingDeadline`](crate::PacingDeadline).
    pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(30);
    /// Requests a new client may have in flight before its first responses come back:
    /// 4 (TCP's initial window is of that order). A burst against an unknown rate limit
    /// then costs a handful of 429s, not one per request of the burst.
    pub const DEFAULT_INITIAL_WINDOW: u32 = 4;
    /// The slow start ends once this many requests are in flight without a refusal: 64.
    pub const OPEN_WINDOW: u32 = 64;
    /// The longest cool-down a `Retry-After` (or `RateLimit`) header can impose: 5 min.
    /// A server asking for more gets 5 min.
    pub const DEFAULT_MAX_COOLDOWN: Duration = Duration::from_secs(5 * 60);
    /// The statuses that slow the client down: 429 Too Many Requests and 503 Service
    /// Unavailable.
    pub const DEFAULT_SLOW_DOWN: [StatusCode; 2] = [
        StatusCode::TOO_MANY_REQUESTS,
        StatusCode::SERVICE_UNAVAILABLE,
    ];

    /// Default backoff: the first probing delay, when the client has no rate to go by,
    /// 100 ms (a few round trips, where the seed's 500 ms suits batch writers).
    pub const DEFAULT_INITIAL_INTERVAL: Duration = Duration::from_millis(100);
    /// Default backoff: the widest probing delay, 5 s: a destination that refuses
    /// everything still gets a request every 5 s, so its recovery is seen within 5 s.
    pub const DEFAULT_MAX_INTERVAL: Duration = Duration::from_secs(5);
    /// Default backoff: growth per refused probe, 2 (a 429/503 is an explicit request to
    /// back off, so react faster than the seed's 1.5).
    pub const DEFAULT_UP_MULTIPLIER: f64 = 2.0;
    /// Default backoff: shrink per success streak, 0.5: once a destination is back, its
    /// successes (at the recovered rate, many per second) bring the probing delay down
    /// within a few dozen, rather than the seed's 0.9, tuned for hours-long jobs.
    pub const DEFAULT_DOWN_MULTIPLIER: f64 = 0.5;
    /// Default backoff: successes in a row before the spacing shrinks, 10 (as the seed).
    pub const DEFAULT_DOWN_THRESHOLD: u32 = 10;
    /// Default backoff: random spread of each new spacing, ±20 %, so clients behind one
    /// proxy do not synchronise.
    pub const DEFAULT_RANDOMIZATION_FACTOR: f64 = 0.2;
    /// Default backoff: the largest random deviation, 1 s.
    pub const DEFAULT_MAX_RANDOMIZATION: Duration = Duration::from_secs(1);

    /// A layer with every default.
    pub fn new() -> Self {
        Self::default()
    }

    /// A builder starting from the defaults.
    pub fn builder() -> PacingBuilder {
        PacingBuilder::default()
    }

    /// The backoff the default layer probes with (the `DEFAULT_*` settings above,
    /// randomness seeded from the operating system).
    pub fn default_backoff() -> ResponsiveBackOff {
        Self::default_backoff_builder()
            .build()
            .expect("the default pacing backoff settings are valid")
    }

    fn default_backoff_builder() -> crate::backoff::ResponsiveBackOffBuilder {
        ResponsiveBackOff::builder()
            .with_initial_interval(Self::DEFAULT_INITIAL_INTERVAL)
            .with_max_interval(Self::DEFAULT_MAX_INTERVAL)
            .with_up_multiplier(Self::DEFAULT_UP_MULTIPLIER)
            .with_down_multiplier(Self::DEFAULT_DOWN_MULTIPLIER)
            .with_down_threshold(Self::DEFAULT_DOWN_THRESHOLD)
            .with_randomization_factor(Self::DEFAULT_RANDOMIZATION_FACTOR)
            .with_max_randomization(Self::DEFAULT_MAX_RANDOMIZATION)
    }

    /// The probing delay (a clone sharing its state): its
    /// [`current`](ResponsiveBackOff::current) value and its
    /// [`metrics`](ResponsiveBackOff::metrics) (one failure per refused probe round, one
    /// success per success while the delay is not zero).
    pub fn backoff(&self) -> &ResponsiveBackOff {
        &self.shared.backoff
    }

    /// The current spacing between requests (one over [`current_rate`](Self::current_rate)):
    /// zero while the client is not paced.
    pub fn current_delay(&self) -> Duration {
        self.shared.current_delay()
    }

    /// The learned send rate, in requests per second, while the client is paced; `None`
    /// while it is not (open, or in its slow start).
    pub fn current_rate(&self) -> Option<f64> {
        self.shared.current_rate()
    }

    /// How long new requests to `authority` are still held by its cool-down, if any.
    pub fn cooldown(&self, authority: &Authority) -> Option<Duration> {
        self.shared.cooldown(&Some(authority.clone()))
    }
}

impl Default for PacingLayer {
    fn default() -> Self {
        Self {
            shared: Arc::new(Shared::new(
                Self::default_backoff(),
                PacingBuilder::default().settings,
            )),
        }
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
/// use tower_backoff::backoff::ResponsiveBackOff;
///
/// let pacing = PacingLayer::builder()
///     .backoff(
///         ResponsiveBackOff::builder()
///             .with_initial_interval(Duration::from_millis(50))
///             .with_max_interval(Duration::from_secs(2))
///             .build()?,
///     )
///     .max_wait(Duration::from_secs(3))
///     .max_cooldown(Duration::from_secs(60))
///     .slow_down_on([StatusCode::TOO_MANY_REQUESTS, StatusCode::BAD_GATEWAY])
///     .build()?;
///
/// let err = PacingLayer::builder().slow_down_on([StatusCode::OK]).build().unwrap_err();
/// assert_eq!((err.field(), err.value()), ("slow_down_on", "200"));
/// # drop(pacing);
/// # Ok::<(), tower_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct PacingBuilder {
    backoff: Option<ResponsiveBackOff>,
    settings: Settings,
    slow_down: Vec<StatusCode>,
}

impl Default for PacingBuilder {
    fn default() -> Self {
        let mut slow_down = StatusSet::default();
        for status in PacingLayer::DEFAULT_SLOW_DOWN {
            slow_down.insert(status);
        }
        Self {
            backoff: None,
            settings: Settings {
                max_wait: PacingLayer::DEFAULT_MAX_WAIT,
                max_cooldown: PacingLayer::DEFAULT_MAX_COOLDOWN,
                initial_window: PacingLayer::DEFAULT_INITIAL_WINDOW,
                slow_down,
            },
            slow_down: PacingLayer::DEFAULT_SLOW_DOWN.to_vec(),
        }
    }
}

impl PacingBuilder {
    /// The probing delay: how long to wait between requests to a destination that
    /// answers nothing but refusals (the learned rate has nothing to go by then). Pass a
    /// clone of one you keep to watch its [`metrics`](ResponsiveBackOff::metrics).
    /// Default: [`PacingLayer::default_backoff`].
    pub fn backoff(mut self, backoff: ResponsiveBackOff) -> Self {
        self.backoff = Some(backoff);
        self
    }

    /// The longest a new request waits for the pace or a cool-down: one expected to
    /// wait longer (its cool-down, or its place in the queue at the current rate) fails
    /// at once with [`PacingError`](crate::PacingError); one whose wait grows past it in
    /// the queue (the pace went down) fails then. Zero never waits: every request that
    /// would have to fails fast (load shedding). Any duration is valid.
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.settings.max_wait = max_wait;
        self
    }

    /// The longest cool-down a response's `Retry-After` (or `RateLimit`) can impose;
    /// longer requests are cut to it. Zero ignores those headers: slow-down responses
    /// then only lower the client's rate. Any duration is valid.
    pub fn max_cooldown(mut self, max_cooldown: Duration) -> Self {
        self.settings.max_cooldown = max_cooldown;
        self
    }

    /// How many requests a new client sends before its first responses are back: the
    /// window of its slow start, which grows by one per success (doubling per round
    /// trip) until the first refusal or [`OPEN_WINDOW`](PacingLayer::OPEN_WINDOW)
    /// requests in flight. Zero skips the slow start: the client starts open. Any value
    /// is valid.
    pub fn initial_window(mut self, requests: u32) -> Self {
        self.settings.initial_window = requests;
        self
    }

    /// The statuses that slow the client down (replacing the default set); every other
    /// status counts as a success. Each must be a 4xx or 5xx, and the set not empty.
    pub fn slow_down_on(mut self, statuses: impl IntoIterator<Item = StatusCode>) -> Self {
        self.slow_down = statuses.into_iter().collect();
        self
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for field `slow_down_on` when it is empty or names a status
    /// outside 400–599.
    pub fn build(self) -> Result<PacingLayer, ConfigError> {
        if self.slow_down.is_empty() {
            return Err(ConfigError::new(
                "slow_down_on",
                self.slow_down,
                "must name at least one status, or the client would never slow down",
            ));
        }
        let mut slow_down = StatusSet::default();
        for status in &self.slow_down {
            if !(StatusSet::FIRST..=StatusSet::LAST).contains(&status.as_u16()) {
                return Err(ConfigError::new(
                    "slow_down_on",
                    status.as_u16(),
                    "must be a 4xx or 5xx status: only errors can ask a client to slow down",
                ));
            }
            slow_down.insert(*status);
        }
        let settings = Settings {
            slow_down,
            ..self.settings
        };
        let backoff = match self.backoff {
            Some(backoff) => backoff,
            None => PacingLayer::default_backoff_builder().build()?,
        };
        Ok(PacingLayer {
            shared: Arc::new(Shared::new(backoff, settings)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_backoff_settings_are_valid() {
        assert!(PacingLayer::default_backoff_builder().build().is_ok());
        let layer = PacingLayer::default();
        assert_eq!(layer.current_delay(), Duration::ZERO);
        assert_eq!(layer.shared.cooldown(&None), None);
    }
}
