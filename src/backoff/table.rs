//! A table of delays, looked up by retry number: the "simple backoff" of a persistent
//! connection loop.

use super::Schedule;
use super::sample::between;
use crate::error::ConfigError;
use rand::RngCore;
use std::time::Duration;

/// A list of delays, one per retry, saturating at the last one, each jittered to
/// `[0.5 d, 1.5 d]` so that clients that failed together do not retry together.
///
/// A `Table` is data only: it holds no attempt counter, so one value (or one `Arc`) is
/// shared by every task and each task keeps its own counter — a plain integer it can reset
/// whenever it likes (say, on an out-of-band "server is back" signal). Retry `n` (from 1)
/// waits about entry `n − 1`; retries past the end of the table wait about the last entry;
/// retry 0 is treated like retry 1. A zero entry stays exactly zero (an immediate retry).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use rand::SeedableRng;
/// use tower_backoff::backoff::{Schedule, Table};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// // One table for the whole program; each task holds its own attempt counter.
/// let table = Arc::new(Table::from_millis(&[0, 10, 100, 1_000]).unwrap());
///
/// let tasks: Vec<_> = (0..4u64)
///     .map(|task| {
///         let table = Arc::clone(&table);
///         tokio::spawn(async move {
///             let mut rng = rand::rngs::SmallRng::seed_from_u64(task);
///             let mut attempt = 0;
///             let mut waited = Vec::new();
///             // This task fails `task + 1` times, backing off between attempts.
///             while attempt <= task as u32 {
///                 attempt += 1;
///                 waited.push(table.delay(attempt, &mut rng));
///             }
///             waited
///         })
///     })
///     .collect();
///
/// for (task, handle) in tasks.into_iter().enumerate() {
///     let waited = handle.await.unwrap();
///     assert_eq!(waited.len(), task + 1); // the counters did not interfere
///     assert_eq!(waited[0], Duration::ZERO); // entry 0 = 0 ms, never jittered
///     for (i, d) in waited.iter().enumerate().skip(1) {
///         let nominal = [0, 10, 100, 1_000][i];
///         assert!(*d >= Duration::from_millis(nominal / 2));
///         assert!(*d <= Duration::from_millis(nominal * 3 / 2));
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Table {
    delays: Box<[Duration]>,
}

impl Table {
    /// The default table, in milliseconds: a first immediate retry, then up to 5 s.
    ///
    /// Short waits first (most failures are blips), a few seconds once the peer is really
    /// down — the usual table of a "simple backoff" reconnect loop.
    pub const DEFAULT_MILLIS: [u64; 10] = [0, 10, 10, 100, 100, 500, 500, 3000, 3000, 5000];

    /// A table of `delays`, in retry order.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] for the field `delays` when the list is empty: there would be no
    /// delay to saturate at.
    pub fn new(delays: impl Into<Vec<Duration>>) -> Result<Self, ConfigError> {
        let delays: Vec<Duration> = delays.into();
        if delays.is_empty() {
            return Err(ConfigError::new(
                "delays",
                delays,
                "must hold at least one delay",
            ));
        }
        Ok(Self {
            delays: delays.into_boxed_slice(),
        })
    }

    /// A table of delays given in milliseconds.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new): a [`ConfigError`] when `millis` is empty.
    pub fn from_millis(millis: &[u64]) -> Result<Self, ConfigError> {
        Self::new(
            millis
                .iter()
                .map(|&ms| Duration::from_millis(ms))
                .collect::<Vec<_>>(),
        )
    }

    /// The nominal (un-jittered) delays, in retry order; never empty.
    pub fn delays(&self) -> &[Duration] {
        &self.delays
    }

    /// The nominal delay of retry `retry`, before jitter.
    pub fn nominal(&self, retry: u32) -> Duration {
        let index = usize::try_from(retry.saturating_sub(1)).unwrap_or(usize::MAX);
        // `delays` is never empty (checked by `new`).
        self.delays
            .get(index)
            .or_else(|| self.delays.last())
            .copied()
            .unwrap_or(Duration::ZERO)
    }
}

impl Default for Table {
    /// The table of [`DEFAULT_MILLIS`](Self::DEFAULT_MILLIS): 0 ms up to 5 s.
    fn default() -> Self {
        Self {
            delays: Self::DEFAULT_MILLIS
                .iter()
                .map(|&ms| Duration::from_millis(ms))
                .collect(),
        }
    }
}

impl Schedule for Table {
    /// The nominal delay `d` of `retry`, drawn uniformly from `[d / 2, d + d / 2]`.
    fn delay(&self, retry: u32, rng: &mut dyn RngCore) -> Duration {
        let d = self.nominal(retry);
        let half = d / 2;
        between(rng, half, d.saturating_add(half))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::{BackOff, Scheduled};
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn default_is_the_documented_table() {
        let t = Table::default();
        let expected: Vec<_> = [0, 10, 10, 100, 100, 500, 500, 3000, 3000, 5000]
            .into_iter()
            .map(ms)
            .collect();
        assert_eq!(t.delays(), expected.as_slice());
    }

    #[test]
    fn retry_n_uses_entry_n_minus_one_and_saturates() {
        let t = Table::from_millis(&[1, 2, 3]).unwrap();
        assert_eq!(t.nominal(0), ms(1));
        assert_eq!(t.nominal(1), ms(1));
        assert_eq!(t.nominal(2), ms(2));
        assert_eq!(t.nominal(3), ms(3));
        assert_eq!(t.nominal(4), ms(3));
        assert_eq!(t.nominal(u32::MAX), ms(3));
    }

    #[test]
    fn jitter_spans_half_to_one_and_a_half() {
        let t = Table::from_millis(&[1000]).unwrap();
        let mut rng = SmallRng::seed_from_u64(42);
        let (mut lo, mut hi) = (Duration::MAX, Duration::ZERO);
        for _ in 0..2000 {
            let d = t.delay(1, &mut rng);
            assert!(ms(500) <= d && d <= ms(1500), "{d:?}");
            lo = lo.min(d);
            hi = hi.max(d);
        }
        // Really jittered, over most of the range.
        assert!(lo < ms(550), "{lo:?}");
        assert!(hi > ms(1450), "{hi:?}");
    }

    #[test]
    fn saturated_retries_are_jittered_around_the_last_entry() {
        let t = Table::default();
        let mut rng = SmallRng::seed_from_u64(7);
        for retry in [10, 11, 1000, u32::MAX] {
            let d = t.delay(retry, &mut rng);
            assert!(ms(2500) <= d && d <= ms(7500), "{d:?}");
        }
    }

    #[test]
    fn zero_stays_zero() {
        let t = Table::default();
        let mut rng = SmallRng::seed_from_u64(3);
        for _ in 0..100 {
            assert_eq!(t.delay(1, &mut rng), Duration::ZERO);
            assert_eq!(t.delay(0, &mut rng), Duration::ZERO);
        }
    }

    #[test]
    fn huge_entries_saturate_instead_of_overflowing() {
        let t = Table::new([Duration::MAX]).unwrap();
        let mut rng = SmallRng::seed_from_u64(3);
        let d = t.delay(1, &mut rng);
        assert!(d >= Duration::MAX / 2);
    }

    #[test]
    fn empty_table_is_a_config_error() {
        let err = Table::new(Vec::new()).unwrap_err();
        assert_eq!(err.field(), "delays");
        assert_eq!(err.value(), "[]");
        assert_eq!(Table::from_millis(&[]).unwrap_err().field(), "delays");
    }

    #[test]
    fn driven_as_a_backoff_it_walks_the_table() {
        let t = Table::from_millis(&[0, 100, 200]).unwrap();
        let mut b = Scheduled::new(t).with_seed(5);
        assert_eq!(b.next_backoff(), Some(Duration::ZERO));
        let second = b.next_backoff().unwrap();
        assert!(ms(50) <= second && second <= ms(150));
        let third = b.next_backoff().unwrap();
        assert!(ms(100) <= third && third <= ms(300));
        b.reset();
        assert_eq!(b.next_backoff(), Some(Duration::ZERO));
    }

    #[test]
    fn shareable_across_threads() {
        fn assert_send_sync<T: Send + Sync + 'static>() {}
        assert_send_sync::<Table>();
    }
}
