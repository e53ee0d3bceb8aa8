//! Uniform sampling of durations, shared by the randomized strategies.

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
}
