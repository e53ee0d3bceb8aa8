//! Adaptive pacing: a whole client slows down when servers say "too much", and speeds up
//! again when they cope.
//!
//! A retry layer makes *one request* wait before its next attempt. That is not enough
//! when a server is overloaded: meanwhile every other task of the client keeps sending
//! new requests at full speed, and the server keeps refusing them. [`PacingLayer`]
//! paces the client itself, every request it sends, by a learned **send rate**:
//!
//! - **One rate, one queue.** While paced, requests leave one at a time, at most `rate`
//!   per second, in arrival order, from one queue shared by every clone of the layer.
//!   Only the first in line sleeps, until its slot; when it leaves, the next one takes
//!   its place and reads the pace *then*. No request reserves a slot ahead of time, so a
//!   faster pace applies to every waiting request at once — not after the slots booked
//!   at the old pace are used up — and a waiting crowd leaves at the pace, never as a
//!   herd.
//! - **Down on refusals, once per round.** A response whose status is a slow-down status
//!   (429 and 503 by default) lowers the rate to just under what the server actually
//!   served since the previous refusal (×0.97) — a server that refuses the excess serves
//!   exactly its capacity, so this lands just under it — or to 60 % of itself when that
//!   is not measured yet (and never below that in one step). Only the refusal of a request sent *after* the last
//!   decrease counts: when 50 requests are in flight and all are refused, they answer the
//!   old pace, and the rate goes down one step, not fifty (TCP, likewise, backs off once
//!   per round trip).
//! - **Up on successes, fast then slow.** Each success raises the rate by 8 requests per
//!   second (so it doubles in about 90 ms at full use) until it nears the *ceiling*, the
//!   rate at which the server last refused; there it grows by about 1 % per second,
//!   faster the longer no refusal comes (as TCP CUBIC probes), so a ceiling measured too
//!   low is soon left behind. Only measured cuts set the ceiling: after a blind one the
//!   rate grows back fast until the next refusal measures it. After ten seconds without a refusal, once no request waits,
//!   the client is open again: nothing waits, and a request costs one atomic load on the
//!   way in.
//! - **Probing.** When the server serves nothing at all (an outage: refusals, and no
//!   success for a tenth of a second or more) the rate has nothing to go by: the client then sends one request per delay of the
//!   [`ResponsiveBackOff`](crate::backoff::ResponsiveBackOff) of seed 002 — 100 ms, ×2 per refused
//!   probe, up to 5 s by default — and leaves probing at the first success, at that
//!   pace, from where the rate grows again. The backoff's delay comes down after streaks
//!   of successes, so a destination that keeps failing is probed ever more rarely.
//! - **Slow start.** A new client sends at most 4 requests (default) before their
//!   responses come back, and one more per success (doubling per round trip): a burst of
//!   a thousand requests against an unknown rate limit then costs a few dozen 429s, not
//!   a thousand. The slow start ends at the first refusal — the rate then starts from
//!   what was served so far, not from what was sent — or with 64 requests in flight.
//! - **Cool-downs.** A slow-down response with `Retry-After` (or a `RateLimit` reset,
//!   read by [`retry_after::from_headers`](crate::retry_after::from_headers)) closes its
//!   destination — the request URI's authority, else its `Host` header — until then
//!   (capped by [`max_cooldown`](PacingBuilder::max_cooldown), 5 min by default) *when
//!   most recent answers of that destination are refusals*: an API whose quota is spent,
//!   or that is down. One shed request among many successes is no reason to close a
//!   destination for everyone (a server shedding its excess sends `Retry-After` with
//!   each refusal); it lowers the rate, and the retry layer honours the header for that
//!   request. When a cool-down ends, its requests join the queue and leave at the pace,
//!   not in a burst. Requests to other destinations are not held by it.
//! - **Fail fast.** A request never waits longer than
//!   [`max_wait`](PacingBuilder::max_wait) (30 s by default), nor past its own
//!   [`PacingDeadline`], if it carries one: when the wait expected on arrival (the
//!   cool-down, or its place in the queue at the rate, or at the ceiling the rate is
//!   growing back to) is longer, it fails at once with
//!   [`PacingError::WouldExceedBudget`], unsent. With no ceiling known (in the slow
//!   start, while probing, or ramping up after an outage) only the next slot counts:
//!   the rate may grow manyfold before its turn. If the pace drops while it waits, it
//!   fails when its budget runs out. A request dropped while it waits leaves
//!   the queue.
//! - **Transport errors** (connection refused, reset, …) change nothing: they do not say
//!   the server is overloaded, and one dead host must not slow the client down for all
//!   the others.
//!
//! Why a rate and not a delay per request: the first version of this layer spaced
//! requests by the backoff's delay and let each request book the slot one delay after
//! the previous booking. Under overload this booked slots up to `max_wait` ahead at the
//! pace of the moment and kept draining them long after the delay was back to zero
//! (2.9 % goodput in the simulation of `examples/simulate.rs`), released a herd when the
//! delay reached zero with bookings outstanding, and recovered only once per ten
//! successes, which came one delay apart. A rate measured against what the server
//! serves settles just under its capacity (over 95 % goodput under 2× overload, a rate
//! limited burst completed within 1.1× of the ideal time with under 5 % 429s, see
//! `docs/BENCHMARKS.md`), and the backoff keeps the role it fits: how long to wait
//! between attempts at a destination that answers nothing but refusals.
//!
//! Pacing is off unless this layer is added. While the client is open, a request costs
//! one atomic load on the way in and one uncontended lock on the way back (the meters of
//! the rate); locks are taken on the way in only while the client is paced.
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
//! assert!(second.unwrap_err().inner().is::<PacingError>());
//! let response = first.await??;
//! assert_eq!(response.status(), 200);
//! assert!(start.elapsed() >= Duration::from_secs(2)); // the retry waited for the cool-down
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
