//! The random source of every randomized strategy.

use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A seedable random source whose clones draw *different* streams.
///
/// A retry policy is cloned once per request; if every clone copied the same generator
/// state, every request would pick the same "random" delay and the jitter would not
/// spread a herd at all. So a clone takes a fresh seed from a counter shared with its
/// parent: still deterministic when seeded (the n-th clone always gets the same stream),
/// never synchronized. A clone seeds its generator at its first draw, so a policy cloned
/// for a request that never retries pays only for an `Arc` clone.
#[derive(Debug)]
pub(crate) struct Jitter {
    rng: Option<SmallRng>,
    seeds: Arc<AtomicU64>,
}

impl Jitter {
    /// Seeded from the operating system's entropy (via the thread-local generator).
    pub(crate) fn from_entropy() -> Self {
        Self::seeded(rand::rng().next_u64())
    }

    /// A reproducible stream: the same seed gives the same sequence, clones included.
    pub(crate) fn seeded(seed: u64) -> Self {
        Self {
            rng: Some(SmallRng::seed_from_u64(seed)),
            seeds: Arc::new(AtomicU64::new(seed)),
        }
    }

    /// The generator, for strategies that draw from it directly.
    pub(crate) fn rng(&mut self) -> &mut SmallRng {
        let seeds = &self.seeds;
        self.rng
            .get_or_insert_with(|| SmallRng::seed_from_u64(next_seed(seeds)))
    }

    /// A uniform sample in `[low, high)`; `low` itself when the range is empty or not finite.
    pub(crate) fn uniform(&mut self, low: f64, high: f64) -> f64 {
        if low < high && low.is_finite() && high.is_finite() {
            // One draw in [0, 1) scaled: cheaper than a general range sample, and the
            // excluded upper bound does not matter for a delay.
            low + (high - low) * self.rng().random::<f64>()
        } else {
            low
        }
    }
}

impl Default for Jitter {
    fn default() -> Self {
        Self::from_entropy()
    }
}

impl Clone for Jitter {
    fn clone(&self) -> Self {
        Self {
            rng: None,
            seeds: Arc::clone(&self.seeds),
        }
    }
}

/// The next seed of the stream shared by a generator and its clones: a SplitMix64 step,
/// which turns consecutive counter values into unrelated seeds.
fn next_seed(seeds: &AtomicU64) -> u64 {
    let mut z = seeds
        .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let (mut a, mut b) = (Jitter::seeded(7), Jitter::seeded(7));
        for _ in 0..10 {
            assert_eq!(a.uniform(0.0, 1.0), b.uniform(0.0, 1.0));
        }
    }

    #[test]
    fn clones_draw_different_streams_reproducibly() {
        let parent = Jitter::seeded(7);
        let (mut c1, mut c2) = (parent.clone(), parent.clone());
        let (x1, x2) = (c1.uniform(0.0, 1.0), c2.uniform(0.0, 1.0));
        assert_ne!(x1, x2);
        let again = Jitter::seeded(7);
        assert_eq!(again.clone().uniform(0.0, 1.0), x1);
    }

    #[test]
    fn empty_or_bad_range_is_low() {
        let mut j = Jitter::seeded(1);
        assert_eq!(j.uniform(2.0, 2.0), 2.0);
        assert_eq!(j.uniform(3.0, 1.0), 3.0);
        assert_eq!(j.uniform(0.0, f64::INFINITY), 0.0);
    }
}
