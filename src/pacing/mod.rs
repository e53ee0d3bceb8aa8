//! Adaptive pacing per destination: a client slows down for a server that says "too
//! much", and speeds up again as soon as it copes.
//!
//! A retry layer makes one request wait before its next attempt; meanwhile the client's
//! other tasks keep sending. [`PacingLayer`] paces what each destination (the request's
//! authority, without userinfo) is sent, by a pure controller fed by its answers:
//!
//! - **Only explicit rate signals count**: a 429, a 503 with `Retry-After`, a reported
//!   quota (`RateLimit`, `X-RateLimit-*`), gRPC's `RESOURCE_EXHAUSTED` with a pushback.
//!   Bare 5xx, other gRPC errors and transport errors are the retry budget's concern. A
//!   destination that never refused is not paced, and no request to it fails for waiting.
//! - **Slow start.** A new destination gets 4 requests in flight, one more per success,
//!   up to 64 (TCP's slow start). Unless a quota bounds it, the limit at most doubles per
//!   100 ms (BBR's start-up). A send unanswered for 100 ms leaves the count, so slow
//!   servers and long-polls are barely held back.
//! - **Start-up.** The first refusal paces at what the last second served. The pace
//!   doubles every 100 ms, up to twice what the last 100 ms delivered (BBR).
//! - **CUBIC.** Each later refusal cuts the pace to 70 % of the delivery rate, or of the
//!   pace if lower (RFC 9438; the AWS SDKs' adaptive mode). A refusal comes a round trip
//!   late: what was served is the better measure. The pace grows back along CUBIC's
//!   curve: back in 0.9 s, ×4 in 2 s more. Only a request sent after a cut can cut again,
//!   as TCP cuts once per round trip. A send late by less than a spacing counts at its
//!   slot (GCRA's theoretical arrival time), so one late wake-up slows no later send.
//! - **Probing.** A refusal when nothing was served since the last cut closes the
//!   destination for 100 ms, doubled per refused probe up to 2 s (TCP's retransmission
//!   timer), never sooner than the pace allows. Asked no delay, it probes within a second
//!   of the cut. When nothing was served for a second, it closes for the `Retry-After`
//!   asked instead. The first success after that resumes the last cut's pace (BBR's
//!   restore), or starts over where nothing was ever served (TCP after a timeout).
//! - **Reported quotas.** Once the reported room is sent, the destination is held until
//!   the reset. After a refusal, the room left is spread until the reset. Clients sharing
//!   a quota count their own share of its use. A reset given as a Unix time in whole
//!   seconds may pass up to a second sooner: a spent room is probed by bisection, one
//!   request at a time, as its windows' length is learned. A count that does not start
//!   over at its reset is a sliding window's: its reports are ignored, and it is paced at
//!   its quota over its length. Until a count is seen to start over, the first request
//!   after a reset goes alone, for two round trips at most.
//! - **Recovery.** Ten seconds without a refusal and the destination is open again.
//! - **A rate you know** ([`with_known_rate`](PacingBuilder::with_known_rate)) paces a
//!   destination from its first request and is never passed.
//! - **A fleet** (feature `redis`, `PacingBuilder::with_redis`) keeps this state in Redis:
//!   many processes pace a destination as one client.
//!
//! Paced requests wait in one queue per destination, in order; a waiter whose future is
//! not polled is passed over. A request that would wait past
//! [`with_max_wait`](PacingBuilder::with_max_wait) or its [`PacingDeadline`] fails at once
//! with a [`PacingError`], unsent; so does one past a full queue. Destinations never
//! delay each other, and idle ones are forgotten.
//!
//! Every 429 is taken as the rate's. A server refusing at random, whatever the rate (a
//! flaky upstream, not a limiter), drags the pace down round after round: the retry
//! layer alone suits it better. One client cannot tell it from a limit shared with others,
//! where slowing down is the fair answer (TCP takes every loss for congestion alike).
//!
//! # Where to put it
//!
//! Inside the retry layer (`retry.paced(pacing)`): every attempt is paced and teaches the
//! pace; a request pacing turns away fails with a [`PacingError`], not retried. Below, the
//! retry of a 503 waits out its `Retry-After`; a new request that cannot wait fails fast:
//!
//! ```
//! use std::time::Duration;
//! use tower::{ServiceBuilder, ServiceExt};
//! use tower_backoff::{ExponentialBackOff, PacingError, PacingLayer, RetryLayer};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let pacing = PacingLayer::builder().with_max_wait(Duration::from_secs(1)).build()?;
//! let mut calls = 0;
//! let client = ServiceBuilder::new()
//!     .layer(RetryLayer::new(ExponentialBackOff::default()))
//!     .layer(pacing)
//!     .service(tower::service_fn(move |_: http::Request<String>| {
//!         calls += 1;
//!         let status = if calls == 1 { 503 } else { 200 };
//!         let response = http::Response::builder().status(status).header("retry-after", "2");
//!         async move { Ok::<_, std::convert::Infallible>(response.body(()).unwrap()) }
//!     }));
//! let request = || http::Request::get("http://api.example/").body(String::new());
//!
//! let first = tokio::spawn(client.clone().oneshot(request()?));
//! tokio::time::sleep(Duration::from_millis(10)).await;
//! let second = client.clone().oneshot(request()?).await;
//! assert!(second.unwrap_err().inner().is::<PacingError>());
//! assert_eq!(first.await??.status(), 200);
//! # Ok(())
//! # }
//! ```

mod control;
mod destination;
mod destinations;
#[cfg(feature = "redis")]
mod fleet;
mod layer;
mod queue;
mod service;

pub use crate::error::pacing::PacingError;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use fleet::RedisPacing;
pub use layer::{PacingBuilder, PacingLayer};
pub use service::{Pacing, PacingDeadline, ResponseFuture};
