//! Uniform sampling of durations, shared by the randomized strategies of section B.

use rand::{Rng, RngCore};
use std::time::Duration;

/// A uniform sample in `[low, high]` at nanosecond resolution; `low` when `high <= low`.
///
/// Sampling `Duration`s directly (not `f64` seconds) keeps every nanosecond reachable and
/// the bounds exact, up to `Duration::MAX`.
pub(crate) fn between(rng: &mut dyn RngCore, low: Duration, high: Duration) -> Duration {
    if low < high {
        rng.random_range(low..=high)
    } else {
        low
    }
}

/// `d × k`, saturating at `Duration::MAX` (exact: computed in nanoseconds).
pub(crate) fn mul_u64(d: Duration, k: u64) -> Duration {
    const NANOS_PER_SEC: u128 = 1_000_000_000;
    let nanos = d.as_nanos().saturating_mul(u128::from(k));
    match u64::try_from(nanos / NANOS_PER_SEC) {
        // The remainder is below 10^9, so it fits in a u32.
        Ok(secs) => Duration::new(secs, (nanos % NANOS_PER_SEC) as u32),
        Err(_) => Duration::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;

    #[test]
    fn between_stays_in_bounds_and_handles_empty_ranges() {
        let mut rng = SmallRng::seed_from_u64(1);
        let (lo, hi) = (Duration::from_millis(5), Duration::from_millis(6));
        for _ in 0..1000 {
            let d = between(&mut rng, lo, hi);
            assert!(lo <= d && d <= hi, "{d:?}");
        }
        assert_eq!(between(&mut rng, hi, lo), hi);
        assert_eq!(between(&mut rng, lo, lo), lo);
        let d = between(&mut rng, Duration::ZERO, Duration::MAX);
        assert!(d <= Duration::MAX);
    }

    #[test]
    fn mul_u64_is_exact_and_saturates() {
        assert_eq!(
            mul_u64(Duration::new(1, 500_000_000), 3),
            Duration::new(4, 500_000_000)
        );
        assert_eq!(mul_u64(Duration::from_secs(2), u64::MAX), Duration::MAX);
        assert_eq!(mul_u64(Duration::MAX, 1), Duration::MAX);
        assert_eq!(mul_u64(Duration::MAX, 0), Duration::ZERO);
    }
}
