//! Adaptive pacing: a whole client slows down when servers say "too much", and speeds up
//! again when they cope.
//!
//! A retry layer makes *one request* wait before its next attempt. That is not enough
//! when a server is overloaded: meanwhile every other task of the client keeps sending
//! new requests at full speed, and the server keeps refusing them. [`PacingLayer`]
//! paces the client itself, every request it sends:
//!
//! - **Spacing.** It learns one delay for the whole client with the
//!   [`ResponsiveBackOff`](crate::ResponsiveBackOff) of seed 002. A response whose
//!   status is a slow-down status (429 and 503 by default) raises the delay (to 100 ms
//!   from zero, then ×2 up to 5 s by default) and pushes the next request's start one
//!   delay past that response. New requests are then spaced at least the delay apart,
//!   in arrival order. Every other response is a success; after 10 in a row (default)
//!   the delay halves, and drops to zero below its initial value: the client is back at
//!   full speed, and requests no longer wait at all.
//! - **Once per round.** Only a refusal of a request sent *after* the delay last went up
//!   raises it again. When 50 requests are in flight and the server refuses them all,
//!   they answer the old pace: the delay goes up one step, not fifty (TCP, likewise,
//!   backs off once per round trip). The other refusals still push the next slot and
//!   set cool-downs, but are not reported to the backoff (nor counted in its
//!   [`metrics`](crate::ResponsiveBackOff::metrics)).
//! - **Cool-downs.** When a slow-down response carries `Retry-After` (or a `RateLimit`
//!   reset, read by [`retry_after::from_headers`](crate::retry_after::from_headers)), its
//!   destination — the request URI's authority, else its `Host` header — cools down:
//!   new requests to it wait until then (capped by
//!   [`max_cooldown`](PacingBuilder::max_cooldown), 5 min by default), then leave one
//!   delay apart, not in a burst. Requests to other destinations are not held by it,
//!   and it does not let its own requests jump the client's queue either.
//! - **Fail fast.** A request never waits longer than
//!   [`max_wait`](PacingBuilder::max_wait) (10 s by default), nor past its own
//!   [`PacingDeadline`], if it carries one: when its wait would, it fails at once with
//!   [`PacingError::WouldExceedBudget`], unsent, and reserves nothing.
//!   A request dropped while it waits leaves its slot unused.
//! - **Transport errors** (connection refused, reset, …) change nothing: they do not say
//!   the server is overloaded, and one dead host must not slow the client down for all
//!   the others.
//!
//! Pacing is off unless this layer is added. While the client is not throttled, a
//! request costs one atomic load on the way in and one uncontended lock on the way back
//! (the backoff's success count); locks are taken on the way in only while there is
//! something to wait for.
//!
//! # Where to put it
//!
//! - **Inside the retry layer** (`ServiceBuilder::new().layer(retry).layer(pacing)`,
//!   recommended): every attempt is paced, retries included, so a retry also waits for
//!   its destination's cool-down and takes its turn behind the client's other requests,
//!   and every attempt's response teaches the pace.
//! - **Outside the retry layer** (`.layer(pacing).layer(retry)`): only new requests are
//!   paced, and pacing only sees the final response of each one.
//!
//! Inside, a request turned away by pacing reaches the retry policy as an error (a boxed
//! [`PacingError`]); a policy should not retry it, since the wait that made it fail is
//! still ahead.
//!
//! Below, a 503 with `Retry-After: 2` is retried by the crate's [`RetryLayer`](crate::RetryLayer);
//! because pacing is inside, the retry also waits out the destination's cool-down, and a
//! new request to the same destination that cannot wait that long fails fast:
//!
//! ```
//! use std::time::Duration;
//! use tokio::time::Instant;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use tower_backoff::{ExponentialBackOff, PacingError, PacingLayer, RetryLayer};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let pacing = PacingLayer::builder().max_wait(Duration::from_secs(1)).build()?;
//! let mut calls = 0;
//! let server = tower::service_fn(move |_: http::Request<String>| {
//!     calls += 1;
//!     let status = if calls == 1 { 503 } else { 200 };
//!     let response = http::Response::builder().status(status).header("retry-after", "2");
//!     async move { Ok::<_, std::convert::Infallible>(response.body(()).unwrap()) }
//! });
//! let client = ServiceBuilder::new()
//!     .layer(RetryLayer::new(ExponentialBackOff::default()))
//!     .layer(pacing)
//!     .service(server);
//!
//! let start = Instant::now();
//! let first = tokio::spawn(client.clone().oneshot(http::Request::get("http://api.example/").body(String::new())?));
//! tokio::time::sleep(Duration::from_millis(10)).await;
//! // api.example cools down for 2 s: more than this client's 1 s max wait.
//! let second = client.clone().oneshot(http::Request::get("http://api.example/").body(String::new())?).await;
//! assert!(second.unwrap_err().is::<PacingError>());
//! let response = first.await??;
//! assert_eq!(response.status(), 200);
//! assert_eq!(start.elapsed(), Duration::from_secs(2)); // the retry waited for the cool-down
//! # Ok(())
//! # }
//! ```

mod deadline;
mod error;
mod future;
mod gate;
mod layer;
mod service;

pub use deadline::PacingDeadline;
pub use error::PacingError;
pub use future::ResponseFuture;
pub use layer::{PacingBuilder, PacingLayer};
pub use service::Pacing;

/// The error type of [`Pacing`]: the inner service's error or a [`PacingError`], boxed.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;
