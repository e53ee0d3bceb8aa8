//! Retrying any async operation with a [`BackOff`], without tower.
//!
//! The operation says how it failed: a [`Permanent`](Error::Permanent) error (a 4xx, a
//! parse error) stops at once, a [`Transient`](Error::Transient) one (a timeout, a 503)
//! is retried after the backoff's delay, or after the delay the server asked for. Plain
//! errors convert into transient ones, so `?` inside the operation just works.
//!
//! For a loop that pulls rather than calls (a reconnect loop, a poller), [`Ticker`] is a
//! stream of instants spaced by the same backoffs.
//!
//! ```
//! use std::time::Duration;
//! use tower_backoff::{BackOffExt, ConstantBackOff, retry};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let mut calls = 0;
//! let backoff = ConstantBackOff::new(Duration::from_millis(10)).unwrap().with_max_retries(5);
//! let value = retry(backoff, || {
//!     calls += 1;
//!     let n = calls;
//!     async move {
//!         if n < 3 {
//!             Err(retry::Error::transient("not yet"))
//!         } else {
//!             Ok(n)
//!         }
//!     }
//! })
//! .await;
//! assert_eq!(value, Ok(3));
//! # }
//! ```

use crate::backoff::BackOff;
use std::fmt;
use std::future::Future;
use std::time::Duration;

mod ticker;
pub use ticker::Ticker;

/// How an operation failed: whether, and when, to try it again.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error<E> {
    /// Retrying cannot help: stop at once and return the error.
    Permanent(E),
    /// Retrying may help.
    Transient {
        /// The error, returned if no retry is left.
        err: E,
        /// A delay requested by the other side (e.g. `Retry-After`); it replaces the
        /// backoff's delay for this retry, though the backoff still decides whether to
        /// stop, and a delay that would end past the backoff's time limit
        /// ([`BackOff::remaining`]) stops the retrying at once.
        retry_after: Option<Duration>,
    },
}

impl<E> Error<E> {
    /// An error that must not be retried.
    pub const fn permanent(err: E) -> Self {
        Self::Permanent(err)
    }

    /// An error to retry after the backoff's delay.
    pub const fn transient(err: E) -> Self {
        Self::Transient {
            err,
            retry_after: None,
        }
    }

    /// An error to retry after `delay` rather than the backoff's delay (unless `delay`
    /// would end past the backoff's time limit: then the retrying stops).
    pub const fn retry_after(err: E, delay: Duration) -> Self {
        Self::Transient {
            err,
            retry_after: Some(delay),
        }
    }

    /// The underlying error.
    pub fn into_inner(self) -> E {
        match self {
            Self::Permanent(err) | Self::Transient { err, .. } => err,
        }
    }

    /// Whether this error stops retrying.
    pub const fn is_permanent(&self) -> bool {
        matches!(self, Self::Permanent(_))
    }
}

/// Any error is transient unless said otherwise, so `?` retries.
impl<E> From<E> for Error<E> {
    fn from(err: E) -> Self {
        Self::transient(err)
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Permanent(err) | Self::Transient { err, .. } => err.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Permanent(err) | Self::Transient { err, .. } => Some(err),
        }
    }
}

/// Runs `op` until it succeeds, fails permanently, or `backoff` stops; returns its value
/// or its last error.
///
/// The backoff is reset first, and `op` always runs at least once. Between attempts it
/// sleeps with [`tokio::time::sleep`]. A delay the operation asks for with
/// [`Error::retry_after`] replaces the backoff's delay, but never outlasts the backoff's
/// time limit ([`BackOff::remaining`], e.g. [`with_max_elapsed`](crate::backoff::BackOffExt::with_max_elapsed)):
/// when it would end past it, `retry` returns the error at once instead of sleeping only
/// to give up. Plain errors raised with `?` are transient; mark
/// the ones retrying cannot fix as [`Error::permanent`]:
///
/// ```
/// use std::io;
/// use std::time::Duration;
/// use tower_backoff::{ExponentialBackOff, retry};
///
/// async fn read_config(attempt: u32) -> io::Result<String> {
///     match attempt {
///         1 => Err(io::Error::new(io::ErrorKind::TimedOut, "slow disk")),
///         _ => Err(io::Error::new(io::ErrorKind::NotFound, "no config")),
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut attempt = 0;
/// let result: Result<String, io::Error> = retry(ExponentialBackOff::default(), || {
///     attempt += 1;
///     let n = attempt;
///     async move {
///         match read_config(n).await {
///             Err(e) if e.kind() == io::ErrorKind::NotFound => Err(retry::Error::permanent(e)),
///             other => Ok(other?),
///         }
///     }
/// })
/// .await;
/// assert_eq!(result.unwrap_err().kind(), io::ErrorKind::NotFound);
/// assert_eq!(attempt, 2);
/// # }
/// ```
pub async fn retry<B, T, E, F, Fut>(backoff: B, op: F) -> Result<T, E>
where
    B: BackOff,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error<E>>>,
{
    retry_notify(backoff, op, |_: &E, _| {}).await
}

/// Like [`retry`], calling `notify(&error, delay)` before each sleep (to log or count
/// retries); it is not called for the error that ends the retrying.
///
/// ```
/// use std::time::Duration;
/// use tower_backoff::{BackOffExt, retry};
/// use tower_backoff::backoff::ZeroBackOff;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut seen = Vec::new();
/// let result: Result<(), &str> = retry::retry_notify(
///     ZeroBackOff.with_max_retries(2),
///     || async { Err(retry::Error::transient("down")) },
///     |err: &&str, delay| seen.push((*err, delay)),
/// )
/// .await;
/// assert_eq!(result, Err("down"));
/// assert_eq!(seen, [("down", Duration::ZERO); 2]);
/// # }
/// ```
pub async fn retry_notify<B, T, E, F, Fut, N>(
    mut backoff: B,
    mut op: F,
    mut notify: N,
) -> Result<T, E>
where
    B: BackOff,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error<E>>>,
    N: FnMut(&E, Duration),
{
    backoff.reset();
    loop {
        let (err, retry_after) = match op().await {
            Ok(value) => return Ok(value),
            Err(Error::Permanent(err)) => return Err(err),
            Err(Error::Transient { err, retry_after }) => (err, retry_after),
        };
        let Some(computed) = backoff.next_backoff() else {
            return Err(err);
        };
        let delay = match retry_after {
            // A requested delay ending past the backoff's time limit: give up now.
            Some(asked) if crate::backoff::outlasts(&backoff, asked) => {
                return Err(err);
            }
            Some(asked) => asked,
            None => computed,
        };
        notify(&err, delay);
        tokio::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::{BackOffExt, ConstantBackOff, StopBackOff, ZeroBackOff};
    use tokio::time::Instant;

    /// Fails with a transient error `failures` times, then returns the call count.
    async fn flaky(calls: &std::cell::Cell<u32>, failures: u32) -> Result<u32, Error<String>> {
        calls.set(calls.get() + 1);
        if calls.get() <= failures {
            Err(format!("failure {}", calls.get()))?
        }
        Ok(calls.get())
    }

    #[tokio::test(start_paused = true)]
    async fn succeeds_after_transient_errors_waiting_each_delay() {
        let calls = std::cell::Cell::new(0);
        let start = Instant::now();
        let backoff = ConstantBackOff::new(Duration::from_secs(2))
            .unwrap()
            .with_max_retries(10);
        let result = retry(backoff, || flaky(&calls, 3)).await;
        assert_eq!(result, Ok(4));
        assert_eq!(calls.get(), 4);
        assert_eq!(start.elapsed(), Duration::from_secs(6));
    }

    #[tokio::test(start_paused = true)]
    async fn returns_last_error_when_backoff_stops() {
        let calls = std::cell::Cell::new(0);
        let backoff = ConstantBackOff::new(Duration::from_secs(1))
            .unwrap()
            .with_max_retries(2);
        let result = retry(backoff, || flaky(&calls, 100)).await;
        assert_eq!(result, Err("failure 3".to_string()));
        assert_eq!(calls.get(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn permanent_error_stops_at_once() {
        let calls = std::cell::Cell::new(0);
        let start = Instant::now();
        let result: Result<(), _> = retry(
            ConstantBackOff::new(Duration::from_secs(1)).unwrap(),
            || {
                calls.set(calls.get() + 1);
                async { Err(Error::permanent("bad request")) }
            },
        )
        .await;
        assert_eq!(result, Err("bad request"));
        assert_eq!(calls.get(), 1);
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn stop_backoff_runs_once() {
        let calls = std::cell::Cell::new(0);
        let result = retry(StopBackOff, || flaky(&calls, 1)).await;
        assert_eq!(result, Err("failure 1".to_string()));
        assert_eq!(calls.get(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn notify_sees_each_retry_but_not_the_stop() {
        let calls = std::cell::Cell::new(0);
        let mut seen = Vec::new();
        let backoff = ConstantBackOff::new(Duration::from_millis(300))
            .unwrap()
            .with_max_retries(2);
        let result = retry_notify(
            backoff,
            || flaky(&calls, 100),
            |err: &String, delay| seen.push((err.clone(), delay)),
        )
        .await;
        assert_eq!(result, Err("failure 3".to_string()));
        let d = Duration::from_millis(300);
        assert_eq!(
            seen,
            [("failure 1".to_string(), d), ("failure 2".to_string(), d)]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_replaces_the_delay_but_backoff_still_stops() {
        let calls = std::cell::Cell::new(0);
        let mut delays = Vec::new();
        let start = Instant::now();
        let backoff = ConstantBackOff::new(Duration::from_secs(1))
            .unwrap()
            .with_max_retries(2);
        let result: Result<(), _> = retry_notify(
            backoff,
            || {
                calls.set(calls.get() + 1);
                let n = calls.get();
                async move {
                    if n == 1 {
                        Err(Error::retry_after("busy", Duration::from_secs(30)))
                    } else {
                        Err(Error::transient("busy"))
                    }
                }
            },
            |_: &&str, d| delays.push(d),
        )
        .await;
        assert_eq!(result, Err("busy"));
        assert_eq!(calls.get(), 3);
        assert_eq!(delays, [Duration::from_secs(30), Duration::from_secs(1)]);
        assert_eq!(start.elapsed(), Duration::from_secs(31));
    }

    /// Fails once asking for `asked`, then succeeds; counts the calls.
    async fn asks_once(
        calls: &std::cell::Cell<u32>,
        asked: Duration,
    ) -> Result<u32, Error<&'static str>> {
        calls.set(calls.get() + 1);
        if calls.get() == 1 {
            Err(Error::retry_after("busy", asked))
        } else {
            Ok(calls.get())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_requested_delay_past_the_time_limit_gives_up_at_once() {
        let calls = std::cell::Cell::new(0);
        let mut notified = 0;
        let start = Instant::now();
        let backoff = ConstantBackOff::new(Duration::from_secs(1))
            .unwrap()
            .with_max_elapsed(Duration::from_secs(60));
        let result = retry_notify(
            backoff,
            || asks_once(&calls, Duration::from_secs(86_400)),
            |_: &&str, _| notified += 1,
        )
        .await;
        assert_eq!(result, Err("busy"));
        assert_eq!((calls.get(), notified), (1, 0));
        assert_eq!(start.elapsed(), Duration::ZERO, "did not sleep");
    }

    #[tokio::test(start_paused = true)]
    async fn a_requested_delay_within_the_time_limit_is_honoured() {
        let calls = std::cell::Cell::new(0);
        let start = Instant::now();
        let backoff = ConstantBackOff::new(Duration::from_secs(1))
            .unwrap()
            .with_max_elapsed(Duration::from_secs(60));
        let result = retry(backoff, || asks_once(&calls, Duration::from_secs(60))).await;
        assert_eq!(result, Ok(2));
        assert_eq!(start.elapsed(), Duration::from_secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn the_exponential_max_elapsed_time_bounds_requested_delays_too() {
        let calls = std::cell::Cell::new(0);
        let start = Instant::now();
        let backoff = crate::backoff::ExponentialBackOff::builder()
            .with_max_elapsed(Some(Duration::from_secs(60)))
            .build()
            .unwrap();
        let result = retry(backoff, || asks_once(&calls, Duration::from_secs(61))).await;
        assert_eq!(result, Err("busy"));
        assert_eq!(start.elapsed(), Duration::ZERO);
        // Without a time limit, any requested delay is honoured.
        calls.set(0);
        let unbounded = ConstantBackOff::new(Duration::from_secs(1)).unwrap();
        let result = retry(unbounded, || asks_once(&calls, Duration::from_secs(86_400))).await;
        assert_eq!(result, Ok(2));
        assert_eq!(start.elapsed(), Duration::from_secs(86_400));
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_is_reset_before_starting() {
        let mut backoff = ZeroBackOff.with_max_retries(1);
        assert_eq!(backoff.next_backoff(), Some(Duration::ZERO));
        assert_eq!(backoff.next_backoff(), None);
        let calls = std::cell::Cell::new(0);
        let result = retry(&mut backoff, || flaky(&calls, 1)).await;
        assert_eq!(result, Ok(2));
    }

    #[tokio::test]
    async fn future_is_send_for_spawning() {
        fn assert_send<T: Send>(t: T) -> T {
            t
        }
        let fut = assert_send(retry(
            crate::backoff::ExponentialBackOff::default(),
            || async { Ok::<_, Error<std::io::Error>>(5) },
        ));
        assert_eq!(tokio::spawn(fut).await.unwrap().unwrap(), 5);
    }

    #[test]
    fn error_constructors_and_conversions() {
        let e: Error<&str> = "x".into();
        assert_eq!(
            e,
            Error::Transient {
                err: "x",
                retry_after: None
            }
        );
        assert!(!e.is_permanent());
        assert!(Error::permanent(1).is_permanent());
        assert_eq!(
            Error::retry_after(1, Duration::from_secs(2)),
            Error::Transient {
                err: 1,
                retry_after: Some(Duration::from_secs(2))
            }
        );
        assert_eq!(Error::permanent(7).into_inner(), 7);
        assert_eq!(Error::permanent("boom").to_string(), "boom");
        let io = Error::transient(std::io::Error::other("io"));
        assert!(std::error::Error::source(&io).is_some());
    }
}
