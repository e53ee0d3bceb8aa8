//! What the policy retries, how often, and how long it waits for the server.

use crate::classify::StatusSet;
use crate::error::ConfigError;
use crate::limits::Limits;
use http::StatusCode;
use std::sync::Arc;
use std::time::Duration;

/// Default cap on a server-requested delay (`Retry-After`): a server asking for a longer
/// pause is shedding load for a while, and the caller learns more from its response now
/// than from a silent wait.
pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

/// Default spread of server-requested delays: a retry told to wait `d` waits a random
/// time in `[d, d × 1.2)`. Every client told "1 s" by a rate limiter would otherwise come
/// back at the same instant and be refused again as one herd; a fifth of the delay spreads
/// them without making any of them retry sooner than asked.
pub const DEFAULT_RETRY_AFTER_JITTER: f64 = 0.2;

/// The retry settings of a request: retried statuses, method rule, limits and the cap on
/// server-requested delays.
///
/// Cheap to clone (one `Arc`), so choosing settings per request (see
/// [`Routes`](crate::Routes)) is a pointer copy. A value placed in a request's extensions
/// overrides every other setting for that request. Every value is valid by construction:
/// setters that can fail return a [`ConfigError`].
///
/// # Default
///
/// Statuses [`StatusSet::DEFAULT`] (408, 429, 502, 503, 504), [`Limits::DEFAULT`] (3
/// attempts within 30 s), non-idempotent requests retried only when the server did not act
/// on them (connect failures, 429), server delays capped at [`DEFAULT_MAX_RETRY_AFTER`]
/// and given up on past it, spread by [`DEFAULT_RETRY_AFTER_JITTER`], no timeout per
/// attempt.
///
/// ```
/// use std::time::Duration;
/// use http::StatusCode;
/// use tower_backoff::RetrySettings;
///
/// let settings = RetrySettings::default()
///     .with_max_attempts(5)?
///     .with_max_elapsed(Duration::from_secs(20))?
///     .with_status(StatusCode::INTERNAL_SERVER_ERROR)?
///     .with_clamp_retry_after(true);
/// assert_eq!(settings.limits().max_attempts(), 5);
/// assert!(settings.statuses().contains(StatusCode::INTERNAL_SERVER_ERROR));
/// assert!(RetrySettings::default().with_max_attempts(0).is_err());
/// # Ok::<(), tower_backoff::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetrySettings(Arc<Inner>);

#[derive(Debug, Clone, PartialEq)]
struct Inner {
    statuses: StatusSet,
    limits: Limits,
    retry_non_idempotent: bool,
    max_retry_after: Duration,
    clamp_retry_after: bool,
    retry_after_jitter: f64,
    attempt_timeout: Option<Duration>,
}

// `retry_after_jitter` is finite (checked by its setter), so equality is total.
impl Eq for Inner {}

impl Default for Inner {
    fn default() -> Self {
        Self {
            statuses: StatusSet::DEFAULT,
            limits: Limits::DEFAULT,
            retry_non_idempotent: false,
            max_retry_after: DEFAULT_MAX_RETRY_AFTER,
            clamp_retry_after: false,
            retry_after_jitter: DEFAULT_RETRY_AFTER_JITTER,
            attempt_timeout: None,
        }
    }
}

impl RetrySettings {
    /// The default settings (see the type's docs).
    pub fn new() -> Self {
        Self::default()
    }

    /// Settings that never retry: one attempt. Requests using them are not even cloned.
    pub fn disabled() -> Self {
        let mut s = Self::default();
        s.inner_mut().limits = Limits::DEFAULT
            .with_max_attempts(1)
            .expect("1 is a valid attempt count");
        s
    }

    fn inner_mut(&mut self) -> &mut Inner {
        Arc::make_mut(&mut self.0)
    }

    /// Retries exactly the statuses in `statuses` (transport errors are unaffected).
    pub fn with_statuses(mut self, statuses: StatusSet) -> Self {
        self.inner_mut().statuses = statuses;
        self
    }

    /// Also retries `status`; an error unless it is a 4xx or 5xx.
    pub fn with_status(mut self, status: StatusCode) -> Result<Self, ConfigError> {
        let set = self.0.statuses.with(status)?;
        self.inner_mut().statuses = set;
        Ok(self)
    }

    /// No longer retries `status`.
    pub fn without_status(mut self, status: StatusCode) -> Self {
        let set = self.0.statuses.without(status);
        self.inner_mut().statuses = set;
        self
    }

    /// Uses `limits` for attempts and elapsed time.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.inner_mut().limits = limits;
        self
    }

    /// At most `max_attempts` attempts, the first one included (at least 1).
    pub fn with_max_attempts(mut self, max_attempts: u32) -> Result<Self, ConfigError> {
        let limits = self.0.limits.with_max_attempts(max_attempts)?;
        self.inner_mut().limits = limits;
        Ok(self)
    }

    /// At most `max_elapsed` from the start of the first attempt to the start of the last
    /// (more than zero).
    pub fn with_max_elapsed(mut self, max_elapsed: Duration) -> Result<Self, ConfigError> {
        let limits = self.0.limits.with_max_elapsed(max_elapsed)?;
        self.inner_mut().limits = limits;
        Ok(self)
    }

    /// When true, non-idempotent requests (POST, PATCH, …) are retried on every retryable
    /// outcome, like idempotent ones. Only for servers known to deduplicate requests.
    pub fn with_retry_non_idempotent(mut self, yes: bool) -> Self {
        self.inner_mut().retry_non_idempotent = yes;
        self
    }

    /// Caps the server-requested delay (`Retry-After`) at `max` (more than zero).
    pub fn with_max_retry_after(mut self, max: Duration) -> Result<Self, ConfigError> {
        if max.is_zero() {
            return Err(ConfigError::new(
                "max_retry_after",
                max,
                "must be more than zero",
            ));
        }
        self.inner_mut().max_retry_after = max;
        Ok(self)
    }

    /// Past the cap, wait for the cap instead of giving up (the default gives up and
    /// returns the server's response unchanged).
    pub fn with_clamp_retry_after(mut self, clamp: bool) -> Self {
        self.inner_mut().clamp_retry_after = clamp;
        self
    }

    /// Spreads server-requested delays (`Retry-After`, gRPC pushback): a retry told to
    /// wait `d` waits a random time in `[d, d × (1 + jitter))`, never less than asked.
    /// `0.0` waits exactly what the server said; at most `1.0`.
    pub fn with_retry_after_jitter(mut self, jitter: f64) -> Result<Self, ConfigError> {
        if !(0.0..=1.0).contains(&jitter) {
            return Err(ConfigError::new(
                "retry_after_jitter",
                jitter,
                "must be between 0.0 and 1.0",
            ));
        }
        self.inner_mut().retry_after_jitter = jitter;
        Ok(self)
    }

    /// Fails an attempt that has not answered within `timeout` (more than zero), so that a
    /// retry can start; the attempt is then classed as a [`RetryReason::Timeout`] (the
    /// request may have reached the server: only idempotent requests are retried).
    ///
    /// Without it, an attempt runs as long as the inner service lets it: the per-request
    /// [`Limits::max_elapsed`] decides whether another attempt *starts*, it never cancels
    /// one in flight.
    ///
    /// [`RetryReason::Timeout`]: crate::RetryReason::Timeout
    pub fn with_attempt_timeout(mut self, timeout: Duration) -> Result<Self, ConfigError> {
        if timeout.is_zero() {
            return Err(ConfigError::new(
                "attempt_timeout",
                timeout,
                "must be more than zero",
            ));
        }
        self.inner_mut().attempt_timeout = Some(timeout);
        Ok(self)
    }

    /// The retried statuses.
    pub fn statuses(&self) -> StatusSet {
        self.0.statuses
    }

    /// The retried statuses, borrowed (for the classifier's view of an attempt).
    pub(crate) fn statuses_ref(&self) -> &StatusSet {
        &self.0.statuses
    }

    /// The attempt and time limits.
    pub fn limits(&self) -> Limits {
        self.0.limits
    }

    /// Whether non-idempotent requests are retried on every retryable outcome.
    pub fn retry_non_idempotent(&self) -> bool {
        self.0.retry_non_idempotent
    }

    /// The cap on server-requested delays.
    pub fn max_retry_after(&self) -> Duration {
        self.0.max_retry_after
    }

    /// Whether a server delay past the cap is clamped to it (else the policy gives up).
    pub fn clamp_retry_after(&self) -> bool {
        self.0.clamp_retry_after
    }

    /// The spread of server-requested delays (see
    /// [`with_retry_after_jitter`](Self::with_retry_after_jitter)).
    pub fn retry_after_jitter(&self) -> f64 {
        self.0.retry_after_jitter
    }

    /// The timeout of each attempt, if any.
    pub fn attempt_timeout(&self) -> Option<Duration> {
        self.0.attempt_timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_values_name_their_field() {
        for bad in [-0.1, 1.5, f64::NAN, f64::INFINITY] {
            let err = RetrySettings::new()
                .with_retry_after_jitter(bad)
                .unwrap_err();
            assert_eq!(err.field(), "retry_after_jitter");
        }
        let err = RetrySettings::new()
            .with_attempt_timeout(Duration::ZERO)
            .unwrap_err();
        assert_eq!((err.field(), err.value()), ("attempt_timeout", "0ns"));
        assert!(
            RetrySettings::new()
                .with_max_retry_after(Duration::ZERO)
                .is_err()
        );
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let s = RetrySettings::new();
        assert_eq!(s.retry_after_jitter(), DEFAULT_RETRY_AFTER_JITTER);
        assert_eq!(s.attempt_timeout(), None);
        assert_eq!(s.max_retry_after(), DEFAULT_MAX_RETRY_AFTER);
        assert_eq!(s.limits(), Limits::DEFAULT);
    }
}
