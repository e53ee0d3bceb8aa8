//! Adaptive pacing per destination: a client slows down for a server that says "too
//! much", and speeds up again as soon as it copes.
//!
//! A retry layer makes one request wait before its next attempt; meanwhile the client's
//! other tasks keep sending. [`PacingLayer`] paces what each destination (the request's
//! authority, without userinfo) is sent, by a pure controller fed by its answers:
//!
//! - **Only explicit rate signals count**: a 429, a 503 with `Retry-After`, a reported
//!   quota (`RateLimit`, `X-RateLimit-*`). Bare 5xx and transport errors change nothing:
//!   a failing server is the retry budget's concern. A destination that never refused
//!   is not paced, and no request to it fails for waiting.
//! - **Slow start.** A new destination gets 4 requests in flight, one more per success,
//!   up to 64 (TCP's slow start). Unless a reported quota bounds the sends, it at most
//!   doubles per 100 ms (BBR's start-up doubles per round): answers in a millisecond do
//!   not outrun a limiter's window before its first refusal. A send unanswered for
//!   100 ms leaves the count, so the window doubles at least every 100 ms: slow servers
//!   and long-polls are barely held back.
//! - **Start-up.** The first refusal paces the destination at what it served in the last
//!   second, doubling every 100 ms up to twice what it delivered in the last 100 ms
//!   (BBR's start-up), until the next refusal. The burst before the refusal is not a rate.
//! - **CUBIC.** Each later refusal cuts the pace to 70 % (RFC 9438; the AWS SDKs'
//!   adaptive retry mode): of the pace refused at the end of the start-up, of what the
//!   destination served in the last second after (its delivery rate, which BBR paces at).
//!   The pace then grows back along CUBIC's curve, relative to the pace refused: back in
//!   0.9 s, ×4 in 2 s more. Only a request sent after a cut can cut again: 50 refused
//!   requests in flight make one cut, as TCP cuts once per round trip. A paced send late
//!   by less than a spacing counts at its slot (GCRA's theoretical arrival time).
//! - **Probing.** A refusal after nothing was served since the last cut closes the
//!   destination for a probing delay, 100 ms doubled per refused probe up to 5 s (TCP's
//!   retransmission timer). When nothing was served for a whole second either (a spent
//!   quota, a server down), it closes for the `Retry-After` asked instead, once. A younger
//!   destination, told no rate, first waits for its other requests' answers.
//! - **Reported quotas.** A response that says how many requests remain until a reset
//!   holds the destination once they are sent, until the reset. The next window is
//!   guessed as full as the last began until it reports, so the requests waiting for a
//!   reset do not all leave at once. Once it has refused, the room left is spread until
//!   the reset, unless a known rate spreads the sends already. Clients sharing a quota count their own share of its use. A reset rounded
//!   up to whole seconds ends by the earliest bound its window's reports give; a report
//!   of a request sent before the last reset, with no more room than that window had, is
//!   that window's. Requests overtake each other on the way: only a request sent after a
//!   report of the window can tell, with more room, that a new one began.
//! - **Recovery.** Ten seconds without a refusal and the destination is open again.
//! - **A rate you know** ([`with_known_rate`](PacingBuilder::with_known_rate)) paces a
//!   destination from its first request and is never passed.
//! - **A fleet** (feature `redis`, `PacingBuilder::with_redis`) keeps these rules' state in
//!   Redis: many processes pace a destination as one client.
//!
//! Paced requests wait in one queue per destination, in order; a waiter whose future is
//! not polled is passed over. A request that would wait past
//! [`with_max_wait`](PacingBuilder::with_max_wait) or its [`PacingDeadline`] fails at once
//! with a [`PacingError`], unsent; so does one past a full queue. Destinations never
//! delay each other, and idle ones are forgotten.
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
