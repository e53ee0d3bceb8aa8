//! What the policy retries, how often, and how long it waits for the server.

use crate::ConfigError;
use crate::classify::StatusSet;
use crate::grpc::GrpcCodes;
use crate::limits::Limits;
use http::StatusCode;
use std::sync::Arc;
use std::time::Duration;

/// Default cap on a server-requested delay (`Retry-After`): a server asking for a longer
/// pause is shedding load for a while, and the caller learns more from its response now
/// than from a silent wait.
pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

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
/// attempts within 30 s), non-idempotent requests retried only after connect failures and
/// 429, server delays capped at [`DEFAULT_MAX_RETRY_AFTER`] and given up on past it.
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

#[derive(Debug, Clone, PartialEq, Eq)]
struct Inner {
    statuses: StatusSet,
    limits: Limits,
    retry_non_idempotent: bool,
    max_retry_after: Duration,
    clamp_retry_after: bool,
    grpc: Option<GrpcCodes>,
}

impl Default for Inner {
    fn default() -> Self {
        Self {
            statuses: StatusSet::DEFAULT,
            limits: Limits::DEFAULT,
            retry_non_idempotent: false,
            max_retry_after: DEFAULT_MAX_RETRY_AFTER,
            clamp_retry_after: false,
            grpc: None,
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

    /// The gRPC preset: the default settings, with outcomes read as gRPC statuses.
    ///
    /// Same as `RetrySettings::new().with_grpc_codes(GrpcCodes::DEFAULT_RETRYABLE)`:
    /// `UNAVAILABLE` is retried, and `RESOURCE_EXHAUSTED` when the server sends a pushback.
    ///
    /// ```
    /// use tower_backoff::RetrySettings;
    /// use tower_backoff::grpc::{Code, GrpcCodes};
    ///
    /// let settings = RetrySettings::grpc().with_max_attempts(4)?;
    /// assert_eq!(settings.grpc_codes(), Some(GrpcCodes::DEFAULT_RETRYABLE));
    /// let aborted_too = RetrySettings::grpc()
    ///     .with_grpc_codes(GrpcCodes::DEFAULT_RETRYABLE.with(Code::Aborted));
    /// assert!(aborted_too.grpc_codes().unwrap().contains(Code::Aborted));
    /// assert_eq!(RetrySettings::new().grpc_codes(), None);
    /// # Ok::<(), tower_backoff::ConfigError>(())
    /// ```
    pub fn grpc() -> Self {
        Self::new().with_grpc_codes(GrpcCodes::DEFAULT_RETRYABLE)
    }

    /// Reads responses as gRPC calls ([A6] retries) instead of by HTTP status.
    ///
    /// A response is classified by [`grpc::classify_response`](crate::grpc::classify_response):
    /// a Trailers-Only response whose `grpc-status` is in `codes` is retried whatever the
    /// method (every gRPC call is a POST; A6 leaves idempotency to the choice of codes), a
    /// `grpc-retry-pushback-ms` is waited exactly (capped like a `Retry-After`) and restarts
    /// the backoff, a negative pushback stops, and a response without a status is
    /// committed and never retried. Retries carry `grpc-previous-rpc-attempts`. The HTTP
    /// statuses ([`statuses`](Self::statuses)) are not used; transport errors are retried as
    /// for any POST.
    ///
    /// [A6]: https://github.com/grpc/proposal/blob/master/A6-client-retries.md
    pub fn with_grpc_codes(mut self, codes: GrpcCodes) -> Self {
        self.inner_mut().grpc = Some(codes);
        self
    }

    /// The retried gRPC codes when responses are read as gRPC calls, else `None`.
    pub fn grpc_codes(&self) -> Option<GrpcCodes> {
        self.0.grpc
    }

    /// The retried statuses.
    pub fn statuses(&self) -> StatusSet {
        self.0.statuses
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
}
