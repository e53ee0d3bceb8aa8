//! Adaptive pacing per destination: a client slows down for a server that says "too
//! much", speeds up again when it copes, and never lets one server's trouble delay its
//! requests to the others.
//!
//! A retry layer makes *one request* wait before its next attempt. That is not enough
//! when a server is overloaded: meanwhile every other task of the client keeps sending
//! it new requests at full speed, and it keeps refusing them. [`PacingLayer`] paces the
//! requests each destination (the request URI's authority, else its `Host` header,
//! without userinfo) is sent, by a learned **send rate**:
//!
//! - **Per destination.** Each destination has its own rate, queue, slow start, probing
//!   delay and cool-down. A destination's refusals never delay or fail requests to
//!   another; requests to different destinations take no common lock but to find their
//!   destination. Destinations idle for [`with_idle_timeout`](PacingBuilder::with_idle_timeout) are
//!   forgotten, and at most [`with_max_destinations`](PacingBuilder::with_max_destinations) are
//!   kept, so a client calling millions of hosts does not grow without end.
//! - **Only explicit rate signals slow a destination down.** A 429, or a 503 that says
//!   when to come back (`Retry-After`), lowers its rate; successes raise it. A bare 503,
//!   other 5xx and transport errors never do: a failing server is the retry budget's
//!   concern, not a rate to learn. Until a
//!   destination refuses (or reports its quota spent, see below), no request to it ever
//!   fails for waiting: slow, healthy servers and long-polls are not throttled.
//! - **Paced: one queue, one at a time.** While a destination is paced, its requests
//!   leave one at a time, at most `rate` per second, in arrival order. Only the first in
//!   line sleeps, until its slot, and reads the pace *then*: a faster pace applies to
//!   every waiting request at once, and a waiting crowd leaves at the pace, never as a
//!   herd. A request whose future is not polled when its turn comes is passed over after
//!   a few milliseconds, so it never holds the others; a dropped request leaves the
//!   queue. The queue is bounded ([`with_max_queue`](PacingBuilder::with_max_queue)): when it is
//!   full, a new request fails at once with [`PacingError::QueueFull`].
//! - **Down on refusals, once per round.** A refusal lowers the rate to just under what
//!   the server actually served since the previous refusal (×0.97) — a server that
//!   refuses the excess serves exactly its capacity — or to 60 % of itself when that is
//!   not measured yet (and never below that in one step). Only the refusal of a request
//!   sent *after* the last decrease counts: when 50 requests in flight are all refused,
//!   the rate goes down one step, not fifty.
//! - **Up on successes, fast then slow.** Each success raises the rate by 8 requests per
//!   second (2 for a destination that reports its room without a reset, a token bucket:
//!   its refusals are its rate, and clients sharing it that all grow back fast overshoot
//!   it together) until it nears the *ceiling*, the rate at which the server last refused;
//!   there it grows by 1 request per second each second, whatever the rate, faster the
//!   longer no refusal comes, so a ceiling measured too low is soon left behind. Equal
//!   steps up and cuts in proportion to the rate (AIMD, as TCP) bring clients that share
//!   one limit to equal shares. After ten seconds without a refusal,
//!   once no request waits, the destination is open again: nothing waits.
//! - **Probing.** When a destination serves nothing at all (refusals, and no success for
//!   a tenth of a second or more) it is sent one request per delay of its own
//!   [`ResponsiveBackOff`](crate::backoff::ResponsiveBackOff) — 100 ms, ×2 per refused probe, up to
//!   5 s by default — until the first success, from where the rate grows again.
//! - **Slow start.** A new destination is sent at most 4 requests (default) before
//!   responses come back, and one more per success (doubling per round trip): a burst
//!   of a thousand requests against an unknown rate limit then costs a few dozen 429s,
//!   not a thousand. A window that stays full for a second with no response doubles, so
//!   a slow server or long-polls hold a burst back about a second; requests waiting for
//!   the window never fail for their `max_wait`. The slow start ends at the first
//!   refusal (the rate then starts from what was served) or with 64 requests in flight.
//! - **Cool-downs.** A slow-down response with `Retry-After` (or a `RateLimit` reset,
//!   read by [`retry_after::from_headers`](crate::retry_after::from_headers)) closes its
//!   destination until then (capped by [`with_max_cooldown`](PacingBuilder::with_max_cooldown),
//!   5 min by default) *when most of its recent answers are refusals*: an API whose
//!   quota is spent, or that is down. One shed request among many successes does not
//!   close a destination for everyone; it lowers the rate, and the retry layer honours
//!   the header for that request. A cool-down also holds the requests already waiting
//!   (those that cannot wait it out fail at once); when it ends, they leave at the pace,
//!   not in a burst: the pace of what the destination served over the cool-down's length
//!   before it (a window limiter's allowance), held for four windows before it probes
//!   for more. After 429s that no reported quota explains, the cool-down lasts longer
//!   than asked by the refusals of the last second per success (at most twice as long):
//!   a limiter that counts refusals too (HAProxy's stick tables) still remembers them
//!   when its `Retry-After` runs out. A refusal of the first requests after a cool-down
//!   (such a limiter still over its limit) extends the cool-down without cutting that
//!   pace.
//! - **Quotas the server reports.** A response that says how many requests its sender
//!   still grants (the `RateLimit` field of the IETF drafts, `RateLimit-Remaining`, or
//!   `X-RateLimit-Remaining`) is believed: once the requests sent since use that room up,
//!   the destination holds its requests until the reset the response gave (capped by
//!   [`with_max_cooldown`](PacingBuilder::with_max_cooldown)), instead of sending what
//!   it has said it will refuse; and while it reports no room left, it is neither sent
//!   more at once nor faster. Without a reset time nothing is held on that account.
//!   A sliding window that reports its length as a reset (`t=1`) is told from a fixed
//!   one by its count, whose room comes back before that "reset" and does not start over
//!   at it: its clients count (a share of) their own requests leaving it as room, where
//!   spreading the room alone until the "reset" settled a client alone at half the limit.
//! - **Fail fast.** A request to a destination that refused lately (or said its quota
//!   is spent) never waits longer
//!   than [`with_max_wait`](PacingBuilder::with_max_wait) (30 s by default): when the wait expected
//!   on arrival (the cool-down or quota reset, or its place in the queue at the rate, or at the ceiling
//!   the rate is growing back to) is longer, it fails at once with
//!   [`PacingError::WaitTooLong`], unsent; if the pace drops while it waits, it fails
//!   when its max wait runs out. No request is ever sent after its own
//!   [`PacingDeadline`]: one that would be fails with [`PacingError::DeadlinePassed`].
//! - **Transport errors** (connection refused, reset, …) change nothing: they do not say
//!   the server is overloaded.
//! - **A rate you know.** A destination given
//!   [`with_known_rate`](PacingBuilder::with_known_rate) is paced at it from its first
//!   request (no slow start), and never faster; refusals still slow it down, and it grows
//!   back to that rate, not past it. A limiter that tells nothing of its limit then need
//!   not be found by refusals (figures in `docs/BENCHMARKS.md`).
//!
//! # Where to put it
//!
//! **Inside the retry layer** (`ServiceBuilder::new().layer(retry).layer(pacing)`), every
//! attempt is paced and teaches the pace; outside it, only new requests and final
//! responses. Inside, a request turned away reaches the retry policy as a boxed
//! [`PacingError`], which it should not retry: the wait that made it fail is still ahead.
//!
//! Below, a 503 with `Retry-After: 2` is retried by [`RetryLayer`](crate::RetryLayer)
//! after the destination's cool-down; a second request cannot wait that long and fails:
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
mod future;
mod layer;
mod queue;
mod room;
mod served;
mod service;
mod window;

pub use crate::error::pacing::PacingError;
pub use future::ResponseFuture;
pub use layer::{PacingBuilder, PacingLayer};
pub use service::{Pacing, PacingDeadline};
