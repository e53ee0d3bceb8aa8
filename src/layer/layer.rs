//! The [`tower::Layer`] that wraps a client in a [`RetryService`].

use super::hook::{OnGiveUp, OnRetry};
use super::policy::RetryPolicy;
use super::routes::Routes;
use super::service::RetryService;
use super::settings::RetrySettings;
use super::shared::{Classifier, Shared};
use crate::backoff::BackOff;
use crate::backoff::jitter::Jitter;
use crate::body::ReplayBodyLayer;
use crate::budget::{LayerBudget, RetryBudget, RetryQuota, RetryThrottle};
use crate::classify::{Classify, GrpcClassifier};
use crate::error::ConfigError;
use crate::pacing::PacingLayer;
use crate::redact::RedactedParams;
use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;
use tower_layer::{Layer, Stack};

/// Retries HTTP requests on 429, 503 (honouring `Retry-After`), 502, 504, 408 and
/// transport errors, within per-request limits.
///
/// The layer wraps services in a [`RetryService`] driven by a [`RetryPolicy`]; `backoff`
/// gives the delays when the server does not, and is reset for every logical request.
/// Failed requests come back as a [`RetryError`](crate::RetryError) carrying their
/// [`RetryStats`](crate::RetryStats); so do retried responses.
///
/// # Decisions
///
/// "Idempotent" means an idempotent method of RFC 9110 §9.2.2 (GET, HEAD, OPTIONS, TRACE,
/// PUT, DELETE) or any request carrying a non-blank `Idempotency-Key` header; other methods
/// (POST, PATCH, CONNECT, …) are only retried when the server cannot have acted on them.
///
/// | Outcome of an attempt | Idempotent request | Other methods | Delay before the retry |
/// |---|---|---|---|
/// | 429 Too Many Requests | retry | retry | `Retry-After`, else the backoff's |
/// | 503 Service Unavailable | retry | returned as is | `Retry-After`, else the backoff's |
/// | 502, 504, 408 | retry | returned as is | the backoff's, but never less than a `Retry-After` |
/// | any other status | returned as is | returned as is | — |
/// | connect failure ([`ErrorClass::Connect`](crate::classify::ErrorClass::Connect)) | retry | retry | the backoff's |
/// | refused unprocessed: HTTP/2 `REFUSED_STREAM`, `GOAWAY` ([`ErrorClass::Unprocessed`](crate::classify::ErrorClass::Unprocessed)) | retry | retry | the backoff's |
/// | other transport error ([`ErrorClass::Transport`](crate::classify::ErrorClass::Transport)), attempt timeout | retry | error returned | the backoff's |
/// | [`ErrorClass::Fatal`](crate::classify::ErrorClass::Fatal) error | error returned | error returned | — |
///
/// A delay the server asked for is spread by
/// [`RetrySettings::with_retry_after_jitter`] (20 % by default): never sooner than asked,
/// but not every client at the same instant either.
///
/// This table is the default [`HttpClassifier`](crate::classify::HttpClassifier)'s. gRPC
/// calls are read by the [`GrpcClassifier`] of [`RetryLayer::grpc`]: the `grpc-status` of
/// a Trailers-Only response decides, whatever the method, and a server's pushback sets the
/// delay. A classifier of your own plugs in with [`RetryLayer::with_classifier`].
///
/// The retried statuses are configurable ([`RetrySettings::with_status`],
/// [`RetrySettings::with_statuses`]); [`RetrySettings::with_retry_non_idempotent`] gives
/// other methods the idempotent column. A retry is not started — the last response or
/// error is returned at once — when:
///
/// - the server asks for more than [`RetrySettings::max_retry_after`] (default
///   [`DEFAULT_MAX_RETRY_AFTER`](super::settings::DEFAULT_MAX_RETRY_AFTER)); with
///   [`RetrySettings::with_clamp_retry_after`] the policy waits for the cap instead;
/// - the attempts reach [`Limits::max_attempts`](crate::limits::Limits::max_attempts), or
///   the wait would end after [`Limits::max_elapsed`](crate::limits::Limits::max_elapsed)
///   from the start of the first attempt;
/// - the backoff returns `None`;
/// - the layer's shared [`RetryBudget`](crate::budget::RetryBudget) is spent, or its
///   [`RetryThrottle`](crate::budget::RetryThrottle) (if any) has stopped retries;
/// - the request's body could not be replayed ([`ReplayGuard`](crate::body::ReplayGuard)
///   capped), checked again when the wait ends, or is still held by the previous attempt
///   at the request's deadline;
/// - no tokio runtime runs on the calling thread.
///
/// The retry's wait uses tokio's timer: in a runtime built without it (no
/// `enable_time`/`enable_all`), tokio panics at the first retry, saying what to enable.
///
/// ```
/// use std::time::Duration;
/// use http::Method;
/// use tower::ServiceBuilder;
/// use tower_backoff::{ConstantBackOff, RetryEvent, RetryLayer, RetrySettings, Routes};
///
/// let layer = RetryLayer::new(ConstantBackOff::new(Duration::from_millis(100)).unwrap())
///     .with_settings(RetrySettings::new().with_max_attempts(4)?)
///     .with_routes(Routes::new().route(Method::POST, "/orders", RetrySettings::disabled())?)
///     .on_retry(|e: &RetryEvent<'_>| eprintln!("retry #{} in {:?}", e.attempt(), e.delay()));
/// let service = ServiceBuilder::new()
///     .layer(layer)
///     .service(tower::service_fn(|_: http::Request<String>| async {
///         Ok::<_, std::io::Error>(http::Response::new(String::new()))
///     }));
/// # drop(service);
/// # Ok::<(), tower_backoff::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct RetryLayer<B> {
    backoff: B,
    shared: Arc<Shared>,
}

impl<B: BackOff> RetryLayer<B> {
    /// A layer with the default [`RetrySettings`], no routes, no hook and the
    /// [default error classifier](crate::classify::default_error_class).
    pub fn new(backoff: B) -> Self {
        Self {
            backoff,
            shared: Arc::new(Shared::default()),
        }
    }

    /// The gRPC preset: a layer whose classifier is a [`GrpcClassifier`], for tonic channels
    /// and other gRPC clients (with the `tonic` feature, `integrations::tonic::TonicRetryLayer`
    /// fits it to tonic's body type).
    ///
    /// As gRPC's retry design (A6), it resends a call that provably never reached the
    /// server, for every method. A call that failed with a retryable status is resent only
    /// for the methods you declare, as A6's `methodConfig`: give a [`GrpcClassifier`] that
    /// names them to [`with_classifier`](Self::with_classifier), as below.
    ///
    /// Reading outcomes as gRPC calls is a property of the layer: settings given afterwards,
    /// to [`with_settings`](Self::with_settings) or per route, change limits and delays, never that.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    /// use tower::{ServiceBuilder, ServiceExt};
    /// use tower_backoff::classify::GrpcClassifier;
    /// use tower_backoff::{ConstantBackOff, RetryLayer, RetrySettings};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), tower_backoff::ConfigError> {
    /// // A server that is UNAVAILABLE once (a Trailers-Only response), then answers.
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// let server = tower::service_fn(move |req: http::Request<String>| {
    ///     let mut log = log.lock().unwrap();
    ///     log.push(req.headers().get("grpc-previous-rpc-attempts").cloned());
    ///     let status = if log.len() == 1 { "14" } else { "0" };
    ///     let res = http::Response::builder().header("grpc-status", status).body(String::new());
    ///     async move { Ok::<_, std::io::Error>(res.unwrap()) }
    /// });
    /// // Every method of `pkg.Service` may run twice.
    /// let methods = GrpcClassifier::new().with_retryable_service("pkg.Service")?;
    /// let layer = RetryLayer::grpc(ConstantBackOff::new(Duration::from_millis(50)).unwrap())
    ///     .with_classifier(methods)
    ///     .with_settings(RetrySettings::new().with_max_attempts(4)?);
    /// let client = ServiceBuilder::new().layer(layer).service(server);
    ///
    /// let call = http::Request::post("/pkg.Service/Method").body(String::new()).unwrap();
    /// let res = client.oneshot(call).await.unwrap();
    /// assert_eq!(res.headers()["grpc-status"], "0");
    /// assert_eq!(*seen.lock().unwrap(), [None, Some("1".parse().unwrap())]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn grpc(backoff: B) -> Self {
        Self::new(backoff).with_classifier(GrpcClassifier::new())
    }

    /// Reads the outcome of each attempt with `classifier` instead of the default
    /// [`HttpClassifier`](crate::classify::HttpClassifier) (see [`crate::classify`]).
    pub fn with_classifier<C: Classify>(mut self, classifier: C) -> Self {
        self.shared_mut().classifier = Classifier::Custom(Arc::new(classifier));
        self
    }

    fn shared_mut(&mut self) -> &mut Shared {
        Arc::make_mut(&mut self.shared)
    }

    /// The settings of requests that match no route and carry no settings of their own.
    pub fn with_settings(mut self, settings: RetrySettings) -> Self {
        self.shared_mut().settings = settings;
        self
    }

    /// Chooses settings per request (first match wins; see [`Routes`]).
    pub fn with_routes(mut self, routes: Routes) -> Self {
        self.shared_mut().routes = routes;
        self
    }

    /// Calls `hook` before each retry's wait.
    pub fn on_retry<H>(mut self, hook: H) -> Self
    where
        H: OnRetry + Send + Sync + 'static,
    {
        self.shared_mut().on_retry = Arc::new(hook);
        self
    }

    /// Calls `hook` when a request whose last attempt failed in a retryable way is not
    /// retried.
    pub fn on_give_up<H>(mut self, hook: H) -> Self
    where
        H: OnGiveUp + Send + Sync + 'static,
    {
        self.shared_mut().on_give_up = Arc::new(hook);
        self
    }

    /// Redacts the values of the query parameters `names` (case-sensitive) wherever the
    /// layer shows a URI: [`RetryEvent::uri`](crate::RetryEvent::uri), the events' `Debug`
    /// and the `url.full` field of its `tracing` events. Credentials (`user:password@`)
    /// are always redacted.
    ///
    /// The list replaces the default,
    /// [`DEFAULT_REDACTED_QUERY_PARAMS`](crate::layer::DEFAULT_REDACTED_QUERY_PARAMS)
    /// (OpenTelemetry's). An empty list redacts no query value. A name no parameter can
    /// have (empty, or holding `&`, `=` or `#`) is a [`ConfigError`].
    ///
    /// ```
    /// use tower_backoff::{ExponentialBackOff, RetryLayer};
    ///
    /// let layer = RetryLayer::new(ExponentialBackOff::default())
    ///     .with_redacted_query_params(["api_key", "sig"])?;
    /// # drop(layer);
    /// assert!(RetryLayer::new(ExponentialBackOff::default()).with_redacted_query_params(["api_key="]).is_err());
    /// # Ok::<(), tower_backoff::ConfigError>(())
    /// ```
    pub fn with_redacted_query_params<I>(mut self, names: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.shared_mut().redacted = RedactedParams::new(names)?;
        Ok(self)
    }

    /// Draws the spread of server-requested delays from a generator seeded with `seed`,
    /// for reproducible tests and simulations (each request still draws its own stream).
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.shared_mut().jitter = Jitter::seeded(seed);
        self
    }

    /// Reads the wall clock (for `Retry-After` HTTP-dates) with `clock` instead of
    /// `SystemTime::now` — for tests and simulations.
    ///
    /// A [`PacingLayer`](crate::PacingLayer) below reads each response (its `Retry-After`
    /// dates, its quota reset timestamps) with the same clock: every attempt carries it
    /// there. (Under tower's `Retry` with a [`RetryPolicy`](crate::layer::RetryPolicy), every
    /// attempt but the first, which tower sends as it came.)
    pub fn with_wall_clock<F>(mut self, clock: F) -> Self
    where
        F: Fn() -> SystemTime + Send + Sync + 'static,
    {
        self.shared_mut().wall_clock = Some(Arc::new(clock));
        self
    }

    /// Shares `quota` between every request of this layer (and of its clones), in place
    /// of its budget: a retry costs tokens, a retry that succeeds gives them back, so an
    /// outage does not multiply the load on the failing server (see [`RetryQuota`]).
    ///
    /// Every layer has one by default: [`RetryQuota::default()`], the AWS SDKs' standard
    /// retry quota, created by [`RetryLayer::new`].
    pub fn with_retry_quota(mut self, quota: RetryQuota) -> Self {
        self.shared_mut().retry_budget = Some(LayerBudget::Quota(quota));
        self
    }

    /// Shares `budget` between every request of this layer (and of its clones), in place
    /// of its quota: retries may add only a fraction of recent requests, and a retry that
    /// succeeds is refunded (see [`RetryBudget`]).
    pub fn with_retry_budget(mut self, budget: RetryBudget) -> Self {
        self.shared_mut().retry_budget = Some(LayerBudget::Window(budget));
        self
    }

    /// Stops inserting [`RetryStats`](crate::RetryStats) into retried responses (errors
    /// still carry them).
    ///
    /// Responses that succeeded at once never carry them; for the others the insert costs
    /// a few small allocations (the response's extension map and the boxed value).
    pub fn without_stats(mut self) -> Self {
        self.shared_mut().stats = false;
        self
    }

    /// Adds gRPC-style retry throttling shared by every request of this layer: every
    /// failed attempt drains the bucket, every success refills it a little, and no retry
    /// is started while it is at most half full — so a server that is down entirely gets
    /// no retries at all after a few failures. Off by default; combines with the retry
    /// budget (both must allow a retry).
    pub fn with_retry_throttle(mut self, throttle: RetryThrottle) -> Self {
        self.shared_mut().retry_throttle = Some(throttle);
        self
    }

    /// Removes the shared retry quota or budget: only the per-request
    /// [`Limits`](crate::limits::Limits) bound retries.
    pub fn without_retry_budget(mut self) -> Self {
        self.shared_mut().retry_budget = None;
        self
    }

    /// Makes requests whose body is not `Clone` (hyper's `Incoming`, axum, tonic and
    /// streaming bodies) retryable: a [`ReplayBodyLayer`] in front of the retry buffers
    /// each body *as the first attempt streams it*, up to `max_bytes`
    /// ([`DEFAULT_MAX_BYTES`](crate::body::DEFAULT_MAX_BYTES) is a good start), so that a
    /// retry can send it again. A body that outgrows the cap is sent once, normally, and
    /// its request is not retried.
    ///
    /// The inner service then receives `http::Request<ReplayBody<B>>`.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http_body_util::{BodyExt, channel::Channel};
    /// use std::time::Duration;
    /// use tower::{ServiceBuilder, ServiceExt};
    /// use tower_backoff::{ConstantBackOff, RetryLayer, body::DEFAULT_MAX_BYTES};
    /// use tower_backoff::body::ReplayBody;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// // The upstream answers 503 to the first attempt; both attempts see the whole body.
    /// let mut calls = 0;
    /// let upstream = tower::service_fn(move |req: http::Request<ReplayBody<Channel<Bytes>>>| {
    ///     calls += 1;
    ///     let status = if calls == 1 { 503 } else { 200 };
    ///     async move {
    ///         let body = req.into_body().collect().await?.to_bytes();
    ///         assert_eq!(&body[..], b"hello world");
    ///         let res = http::Response::builder().status(status).body(()).unwrap();
    ///         Ok::<_, Box<dyn std::error::Error + Send + Sync>>(res)
    ///     }
    /// });
    /// let backoff = ConstantBackOff::new(Duration::from_millis(10)).unwrap();
    /// let client = ServiceBuilder::new()
    ///     .layer(RetryLayer::new(backoff).replay_bodies(DEFAULT_MAX_BYTES))
    ///     .service(upstream);
    ///
    /// // A streaming body (not `Clone`), written while the request is in flight.
    /// let (mut tx, body) = Channel::<Bytes>::new(1);
    /// tokio::spawn(async move {
    ///     tx.send_data(Bytes::from("hello ")).await.unwrap();
    ///     tx.send_data(Bytes::from("world")).await.unwrap();
    /// });
    /// let res = client.oneshot(http::Request::put("/").body(body).unwrap()).await.unwrap();
    /// assert_eq!(res.status(), 200);
    /// # }
    /// ```
    pub fn replay_bodies(self, max_bytes: usize) -> Stack<Self, ReplayBodyLayer> {
        Stack::new(self, ReplayBodyLayer::new().with_max_bytes(max_bytes))
    }

    /// This layer over `pacing`: the order in which retries are paced too.
    ///
    /// The retry layer must be outside the pacing layer. Inside it, only first attempts
    /// would be paced, and a retry's wait would not count against pacing's queue. A pacing
    /// layer found above a retry layer is reported once, as a `tracing` warning.
    ///
    /// ```
    /// use tower::ServiceBuilder;
    /// use tower_backoff::{ExponentialBackOff, PacingLayer, RetryLayer};
    ///
    /// # let client = tower::service_fn(|_: http::Request<String>| async {
    /// #     Ok::<_, std::io::Error>(http::Response::new(String::new()))
    /// # });
    /// let retry = RetryLayer::new(ExponentialBackOff::default());
    /// let client = ServiceBuilder::new()
    ///     .layer(retry.paced(PacingLayer::new()))
    ///     .service(client);
    /// # drop(client);
    /// ```
    pub fn paced(self, pacing: PacingLayer) -> Stack<PacingLayer, Self> {
        Stack::new(pacing, self)
    }

    /// The policy this layer installs, for `tower::retry::RetryLayer::new` or direct use
    /// (see [`RetryPolicy`] for what tower's service does differently).
    pub fn policy(&self) -> RetryPolicy<B>
    where
        B: Clone,
    {
        RetryPolicy::new(self.backoff.clone(), self.shared.clone())
    }

    /// The policy this layer installs, consuming the layer.
    pub fn into_policy(self) -> RetryPolicy<B> {
        RetryPolicy::new(self.backoff, self.shared)
    }
}

impl<S, B: BackOff + Clone> Layer<S> for RetryLayer<B> {
    type Service = RetryService<B, S>;

    fn layer(&self, service: S) -> Self::Service {
        RetryService::new(service, self.policy())
    }
}

impl<B: fmt::Debug> fmt::Debug for RetryLayer<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryLayer")
            .field("backoff", &self.backoff)
            .field("settings", &self.shared.settings)
            .field("routes", &self.shared.routes)
            .finish_non_exhaustive()
    }
}
