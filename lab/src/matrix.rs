//! Issue #29's matrix as the real runs (`tower-backoff-peers`' `matrix`) and the models
//! (`simulate`) both need it: the rows' sizes and conditions, the random failures' draw,
//! and the measures of rows 3 and 4. One definition, so a model is measured as the real
//! run it is compared with.

use crate::limiters::client::Stack;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;

/// Sizes of the rows: the issue's, or smaller for `--short`.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// Row 1: GETs against each limiter.
    pub limiter_requests: u64,
    /// Row 2: GETs against the random failures.
    pub failure_requests: u64,
    /// Row 3: how long the outage lasts, and the load's window from its start.
    pub outage: Duration,
    pub outage_window: Duration,
    /// Row 4: how long each of the three limits lasts.
    pub phase: Duration,
    /// Row 5: each load's window.
    pub destination_window: Duration,
    /// Row 6: GETs to the slow path, long-polls, and a long-poll's length.
    pub slow_requests: u64,
    pub long_polls: u64,
    pub long_poll: Duration,
}

pub const FULL: Sizes = Sizes {
    limiter_requests: 300,
    failure_requests: 1000,
    outage: Duration::from_secs(5),
    outage_window: Duration::from_secs(10),
    phase: Duration::from_secs(5),
    destination_window: Duration::from_secs(4),
    slow_requests: 100,
    long_polls: 10,
    long_poll: Duration::from_secs(10),
};

pub const SHORT: Sizes = Sizes {
    limiter_requests: 100,
    failure_requests: 100,
    outage: Duration::from_secs(1),
    outage_window: Duration::from_secs(2),
    phase: Duration::from_secs(2),
    destination_window: Duration::from_secs(1),
    slow_requests: 20,
    long_polls: 4,
    long_poll: Duration::from_secs(2),
};

/// How `matrix --record` and the models name rows 2 to 4 (target, server) and the two
/// tower-backoff stacks (the retry layer alone, the quick start): the calibration pairs them.
pub const RECORDED_ROWS: [(&str, &str); 3] = [
    ("row2", "random-503"),
    ("row3", "outage"),
    ("row4", "changing"),
];
pub const RECORDED_STACKS: [Stack; 2] = [Stack::Retry, Stack::RetryPacing];

/// Requests in flight at once, or workers, in every row's main load.
pub const CONCURRENCY: u64 = 20;

/// The header carrying a request's number, from which row 2's server draws its answers.
pub const ID_HEADER: &str = "x-peer-id";

/// Row 2: the share of attempts answered 503.
pub const FAILURE_SHARE: f64 = 0.2;

/// Random failures' answer to the `attempt`-th attempt (from 1) of request `id` in run
/// `seed`: whether it fails, with probability `share`. The same in every library, whatever
/// order the attempts come in.
pub fn fails(share: f64, seed: u64, id: u64, attempt: u32) -> bool {
    let key = seed.wrapping_mul(1_000_003) ^ (id << 8) ^ u64::from(attempt);
    StdRng::seed_from_u64(key).random_bool(share)
}

/// Row 4: the three limits, each for one phase, and the leaky bucket's burst.
pub const RATES: [f64; 3] = [100.0, 25.0, 100.0];
pub const BURST: f64 = 10.0;

/// Row 4's limit `t` after the load's start.
pub fn rate_at(t: Duration, phase: Duration) -> f64 {
    let index = (t.as_secs_f64() / phase.as_secs_f64()) as usize;
    RATES[index.min(RATES.len() - 1)]
}

/// Row 3's buckets of completions, and the share of the steady rate that counts as recovered.
const BUCKET: Duration = Duration::from_millis(100);
const RECOVERED: f64 = 0.9;

/// Row 3: seconds from the outage's end until the first 100 ms whose completions reach
/// 90 % of the steady rate (infinite: never), and that rate per second. `ok_ends`: when
/// each request answered 200 ended; the steady rate is the mean per 100 ms over the second
/// half of the time after the outage.
pub fn recovery(ok_ends: &[Duration], sizes: &Sizes) -> (f64, f64) {
    let buckets = per_bucket(ok_ends, BUCKET, sizes.outage_window);
    let first = (sizes.outage.as_secs_f64() / BUCKET.as_secs_f64()).ceil() as usize;
    let after = buckets.get(first..).unwrap_or(&[]);
    let tail = &after[after.len() / 2..];
    let steady = tail.iter().sum::<u64>() as f64 / tail.len().max(1) as f64;
    let reached = after
        .iter()
        .position(|&n| steady > 0.0 && n as f64 >= RECOVERED * steady);
    let recovery = reached.map_or(f64::INFINITY, |k| (k + 1) as f64 * BUCKET.as_secs_f64());
    (recovery, steady / BUCKET.as_secs_f64())
}

/// How many of `ends` fall in each `bucket` from the origin until `until`.
fn per_bucket(ends: &[Duration], bucket: Duration, until: Duration) -> Vec<u64> {
    let count = (until.as_secs_f64() / bucket.as_secs_f64()).ceil() as usize;
    let mut buckets = vec![0; count];
    for end in ends.iter().filter(|&&end| end < until) {
        let index = (end.as_secs_f64() / bucket.as_secs_f64()) as usize;
        buckets[index.min(count - 1)] += 1;
    }
    buckets
}

/// Row 4's send rate: attempts in the trailing 500 ms, sampled every 100 ms.
const WINDOW: Duration = Duration::from_millis(500);
const STEP: Duration = Duration::from_millis(100);

/// Row 4: seconds from the change at `at` (from `before` to `after` r/s) until the send
/// rate follows it: ≤ 1.2× a lower limit, or ≥ 0.8× a higher one. Infinite if it never
/// does within the `phase` after it. `sends`: when each attempt left.
pub fn follows(
    sends: &[Duration],
    (at, phase): (Duration, Duration),
    before: f64,
    after: f64,
) -> f64 {
    let samples = (phase.as_secs_f64() / STEP.as_secs_f64()) as u32;
    for k in 1..=samples {
        let t = at + STEP * k;
        let rate = send_rate(sends, t.saturating_sub(WINDOW), t);
        let followed = if after < before {
            rate <= 1.2 * after
        } else {
            rate >= 0.8 * after
        };
        if followed {
            return (STEP * k).as_secs_f64();
        }
    }
    f64::INFINITY
}

/// Attempts per second sent in `[from, to)`.
pub fn send_rate(sends: &[Duration], from: Duration, to: Duration) -> f64 {
    let sent = sends.iter().filter(|&&at| at >= from && at < to).count();
    sent as f64 / (to - from).as_secs_f64().max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Sends every `every` ms in `[from, to)` ms.
    fn sends(from: u64, to: u64, every: u64) -> Vec<Duration> {
        (from..to).step_by(every as usize).map(ms).collect()
    }

    #[test]
    fn a_change_is_followed_at_the_first_sample_past_its_bound() {
        // 100 r/s for 5 s, then 25: the trailing 500 ms hold 20 sends at 5.4 s (40 r/s),
        // 13 at 5.5 s (26 r/s, under 1.2 × 25).
        let fall = [sends(0, 5000, 10), sends(5000, 10_000, 40)].concat();
        let followed = follows(&fall, (ms(5000), ms(5000)), 100.0, 25.0);
        assert!((followed - 0.5).abs() < 1e-9, "{followed}");
        // At 25 r/s throughout: a rise to 100 is never followed.
        let never = follows(&sends(0, 10_000, 40), (ms(5000), ms(5000)), 25.0, 100.0);
        assert_eq!(never, f64::INFINITY);
    }

    #[test]
    fn recovery_is_the_first_bucket_at_nine_tenths_of_the_steady_rate() {
        let sizes = FULL;
        // Nothing served in the 5 s outage; then 0, 0, 50, 100, 100… per 100 ms.
        let mut ends = Vec::new();
        for bucket in 50..100_u64 {
            let served = match bucket {
                50 | 51 => 0,
                52 => 50,
                _ => 100,
            };
            ends.extend((0..served).map(|k| ms(bucket * 100 + k)));
        }
        let (recovery, steady) = recovery(&ends, &sizes);
        assert!((recovery - 0.4).abs() < 1e-9, "{recovery}");
        assert!((steady - 1000.0).abs() < 1e-9, "{steady}");
    }

    #[test]
    fn a_random_failure_depends_on_the_run_the_request_and_the_attempt_alone() {
        let draws: Vec<bool> = (0..10_000)
            .map(|id| fails(FAILURE_SHARE, 7, id, 1))
            .collect();
        let again: Vec<bool> = (0..10_000)
            .map(|id| fails(FAILURE_SHARE, 7, id, 1))
            .collect();
        assert_eq!(draws, again);
        let share = draws.iter().filter(|&&f| f).count() as f64 / draws.len() as f64;
        assert!((share - FAILURE_SHARE).abs() < 0.02, "{share}");
        let other_run: Vec<bool> = (0..10_000)
            .map(|id| fails(FAILURE_SHARE, 8, id, 1))
            .collect();
        assert_ne!(draws, other_run);
    }
}
