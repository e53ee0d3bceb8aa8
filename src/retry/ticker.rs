//! A stream of instants spaced by a [`BackOff`], for loops that pull rather than call.

use crate::backoff::BackOff;
use crate::time::instant_after;
use futures_core::Stream;
use futures_core::stream::FusedStream;
use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::time::{Instant, Sleep};

pin_project! {
    /// Ticks at once, then after each delay of the backoff; ends when the backoff stops.
    ///
    /// The next delay is taken from the backoff as soon as a tick is handed out, so the
    /// wait runs while the consumer works on that tick (as cenkalti's `Ticker`): a slow
    /// attempt is followed by the next tick sooner, never by a longer pause. The backoff
    /// is reset when the ticker is created.
    ///
    /// ```
    /// use std::future::poll_fn;
    /// use std::pin::pin;
    /// use std::time::Duration;
    /// use futures_core::Stream;
    /// use tower_backoff::{BackOffExt, ConstantBackOff};
    /// use tower_backoff::retry::Ticker;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let backoff = ConstantBackOff::new(Duration::from_secs(1)).unwrap().with_max_retries(2);
    /// let mut ticker = pin!(Ticker::new(backoff));
    /// let start = tokio::time::Instant::now();
    /// let mut ticks = Vec::new();
    /// while let Some(at) = poll_fn(|cx| ticker.as_mut().poll_next(cx)).await {
    ///     ticks.push(at - start);
    /// }
    /// assert_eq!(ticks, [0, 1, 2].map(Duration::from_secs));
    /// # }
    /// ```
    #[derive(Debug)]
    #[must_use = "streams do nothing unless polled"]
    pub struct Ticker<B> {
        backoff: B,
        state: State,
        // Created on the first wait, then re-armed: no allocation or registration per tick.
        #[pin]
        sleep: Option<Sleep>,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    First,
    Waiting,
    Done,
}

impl<B: BackOff> Ticker<B> {
    /// A ticker driven by `backoff` (after resetting it).
    pub fn new(mut backoff: B) -> Self {
        backoff.reset();
        Self {
            backoff,
            state: State::First,
            sleep: None,
        }
    }

    /// The backoff driving this ticker.
    pub fn get_ref(&self) -> &B {
        &self.backoff
    }

    /// Unwraps the backoff.
    pub fn into_inner(self) -> B {
        self.backoff
    }
}

impl<B: BackOff> Stream for Ticker<B> {
    type Item = Instant;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        let mut this = self.project();
        match *this.state {
            State::Done => return Poll::Ready(None),
            State::First => {}
            State::Waiting => {
                // NOTE: `sleep` is always `Some` in `Waiting`: it is armed before entering it.
                if let Some(sleep) = this.sleep.as_mut().as_pin_mut() {
                    ready!(sleep.poll(cx));
                }
            }
        }
        let now = Instant::now();
        match this.backoff.next_backoff() {
            Some(delay) => {
                let deadline = instant_after(now, delay);
                match this.sleep.as_mut().as_pin_mut() {
                    Some(sleep) => sleep.reset(deadline),
                    None => this.sleep.set(Some(tokio::time::sleep_until(deadline))),
                }
                *this.state = State::Waiting;
            }
            None => *this.state = State::Done,
        }
        Poll::Ready(Some(now))
    }
}

impl<B: BackOff> FusedStream for Ticker<B> {
    fn is_terminated(&self) -> bool {
        self.state == State::Done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::{BackOffExt, ConstantBackOff, StopBackOff, ZeroBackOff};
    use std::future::poll_fn;
    use std::pin::pin;
    use std::time::Duration;

    async fn next<S: Stream>(mut s: Pin<&mut S>) -> Option<S::Item> {
        poll_fn(|cx| s.as_mut().poll_next(cx)).await
    }

    /// 1 s, 2 s, 3 s, then stops.
    struct Steps(u64);

    impl BackOff for Steps {
        fn next_backoff(&mut self) -> Option<Duration> {
            self.0 += 1;
            (self.0 <= 3).then(|| Duration::from_secs(self.0))
        }
        fn reset(&mut self) {
            self.0 = 0;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn first_tick_is_immediate_then_follows_intervals_then_ends() {
        let start = Instant::now();
        // Already advanced: the ticker resets it.
        let mut ticker = pin!(Ticker::new(Steps(10)));
        let mut offsets = Vec::new();
        while let Some(at) = next(ticker.as_mut()).await {
            assert_eq!(at, Instant::now());
            offsets.push(at - start);
        }
        assert_eq!(offsets, [0, 1, 3, 6].map(Duration::from_secs));
        assert!(ticker.is_terminated());
        assert_eq!(next(ticker.as_mut()).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn waits_while_consumer_works() {
        let start = Instant::now();
        let mut ticker = pin!(Ticker::new(
            ConstantBackOff::new(Duration::from_secs(5)).unwrap()
        ));
        next(ticker.as_mut()).await;
        // Work on the first tick for 2 s: the next tick comes 3 s later, 5 s after the first.
        tokio::time::advance(Duration::from_secs(2)).await;
        let second = next(ticker.as_mut()).await.unwrap();
        assert_eq!(second - start, Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn pending_until_the_delay_has_passed() {
        let mut ticker = pin!(Ticker::new(
            ConstantBackOff::new(Duration::from_secs(1)).unwrap()
        ));
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(ticker.as_mut().poll_next(&mut cx).is_ready());
        assert!(ticker.as_mut().poll_next(&mut cx).is_pending());
        tokio::time::advance(Duration::from_millis(999)).await;
        assert!(ticker.as_mut().poll_next(&mut cx).is_pending());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(ticker.as_mut().poll_next(&mut cx).is_ready());
    }

    #[test]
    fn is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Ticker<crate::backoff::ExponentialBackOff>>();
    }

    #[tokio::test(start_paused = true)]
    async fn stop_ticks_once() {
        let mut ticker = pin!(Ticker::new(StopBackOff));
        assert!(next(ticker.as_mut()).await.is_some());
        assert_eq!(next(ticker.as_mut()).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn zero_delays_and_huge_delays_do_not_panic() {
        let start = Instant::now();
        let mut ticker = pin!(Ticker::new(ZeroBackOff.with_max_retries(3)));
        let mut n = 0;
        while next(ticker.as_mut()).await.is_some() {
            n += 1;
        }
        assert_eq!((n, start.elapsed()), (4, Duration::ZERO));

        let mut ticker = pin!(Ticker::new(ConstantBackOff::new(Duration::MAX).unwrap()));
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(ticker.as_mut().poll_next(&mut cx).is_ready());
        assert!(ticker.as_mut().poll_next(&mut cx).is_pending());
    }
}
