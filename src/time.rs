//! Saturating arithmetic on durations and instants: no strategy, limit or timer of this
//! crate may panic or wrap, whatever its inputs. And the wall clock that `Retry-After`
//! dates are measured against.

use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// A wall clock: what `Retry-After` dates and quota reset timestamps are measured against.
pub(crate) type ClockFn = dyn Fn() -> SystemTime + Send + Sync;

/// A request extension: the retry layer's own wall clock
/// ([`RetryLayer::with_wall_clock`](crate::RetryLayer::with_wall_clock)), lent to each
/// attempt so that a pacing layer below reads the response with the same clock.
#[derive(Clone)]
pub(crate) struct WallClock(pub(crate) Arc<ClockFn>);

/// The time now by `clock`, or by the system's wall clock.
pub(crate) fn wall_now(clock: Option<&ClockFn>) -> SystemTime {
    clock.map_or_else(SystemTime::now, |clock| clock())
}

/// Which clock `clock` is, to tell whether two readings used the same one: `0` for the
/// system's, else the address of the clock (each is its own allocation).
pub(crate) fn clock_id(clock: Option<&ClockFn>) -> usize {
    clock.map_or(0, |clock| std::ptr::from_ref(clock).cast::<()>() as usize)
}

/// Far enough in the future to mean "never", near enough not to overflow an `Instant`
/// (about 30 years, as tokio uses for far deadlines).
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// Seconds as a duration, saturating at `Duration::MAX`; NaN or negative is zero.
pub(crate) fn from_secs_f64(secs: f64) -> Duration {
    if secs.is_nan() || secs <= 0.0 {
        Duration::ZERO
    } else {
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
    }
}

/// `d × factor`, saturating at `Duration::MAX`; a NaN or non-positive product is zero.
pub(crate) fn mul_f64(d: Duration, factor: f64) -> Duration {
    from_secs_f64(d.as_secs_f64() * factor)
}

/// `base × step^exp`, saturating; `exp` may be any `u32`.
pub(crate) fn mul_pow(base: Duration, step: f64, exp: u32) -> Duration {
    // powi takes an i32; any exponent past i32::MAX already overflows for step > 1.
    let exp = i32::try_from(exp).unwrap_or(i32::MAX);
    mul_f64(base, step.powi(exp))
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

/// `at + d`, saturating at about 30 years from `at` (an `Instant` cannot hold more).
pub(crate) fn instant_after(at: Instant, d: Duration) -> Instant {
    at.checked_add(d)
        .or_else(|| at.checked_add(FAR_FUTURE))
        .unwrap_or(at)
}

/// An instant that never comes, in practice: about 30 years after `now`.
pub(crate) fn never(now: Instant) -> Instant {
    instant_after(now, FAR_FUTURE)
}

/// Whether a wait of `wait`, starting `elapsed` into a time limit of `max_elapsed`, ends
/// within it (ending exactly at the limit counts as within). Saturating.
///
/// The one rule every "max elapsed" limit of this crate applies: a retry whose wait would
/// end past the limit is not started.
pub(crate) fn ends_within(elapsed: Duration, wait: Duration, max_elapsed: Duration) -> bool {
    elapsed.saturating_add(wait) <= max_elapsed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_products_saturate_instead_of_panicking() {
        assert_eq!(mul_f64(Duration::MAX, 2.0), Duration::MAX);
        assert_eq!(
            mul_f64(Duration::from_secs(1), f64::INFINITY),
            Duration::MAX
        );
        assert_eq!(mul_f64(Duration::from_secs(1), f64::NAN), Duration::ZERO);
        assert_eq!(mul_f64(Duration::from_secs(1), -1.0), Duration::ZERO);
        assert_eq!(from_secs_f64(f64::NEG_INFINITY), Duration::ZERO);
        assert_eq!(from_secs_f64(1e300), Duration::MAX);
        assert_eq!(
            mul_pow(Duration::from_secs(1), 2.0, u32::MAX),
            Duration::MAX
        );
        assert_eq!(
            mul_pow(Duration::from_secs(1), 2.0, 3),
            Duration::from_secs(8)
        );
    }

    #[test]
    fn integer_products_are_exact_and_saturate() {
        assert_eq!(
            mul_u64(Duration::new(1, 500_000_000), 3),
            Duration::new(4, 500_000_000)
        );
        assert_eq!(mul_u64(Duration::from_secs(2), u64::MAX), Duration::MAX);
        assert_eq!(mul_u64(Duration::MAX, 1), Duration::MAX);
        assert_eq!(mul_u64(Duration::MAX, 0), Duration::ZERO);
    }

    #[test]
    fn instants_saturate_about_thirty_years_ahead() {
        let now = Instant::now();
        assert_eq!(
            instant_after(now, Duration::from_secs(5)),
            now + Duration::from_secs(5)
        );
        assert_eq!(instant_after(now, Duration::MAX), now + FAR_FUTURE);
        assert!(instant_after(now, Duration::MAX) > now + Duration::from_secs(86_400 * 365));
        assert_eq!(never(now), now + FAR_FUTURE);
    }

    #[test]
    fn seconds_saturate_at_both_ends() {
        assert_eq!(from_secs_f64(-1.0), Duration::ZERO);
        assert_eq!(from_secs_f64(f64::NAN), Duration::ZERO);
        assert_eq!(from_secs_f64(f64::INFINITY), Duration::MAX);
    }

    #[test]
    fn ends_within_includes_the_limit_and_saturates() {
        let s = Duration::from_secs;
        assert!(ends_within(s(4), s(6), s(10)));
        assert!(!ends_within(s(4), s(6) + Duration::from_nanos(1), s(10)));
        assert!(ends_within(Duration::MAX, Duration::MAX, Duration::MAX));
        assert!(!ends_within(s(1), Duration::MAX, s(10)));
    }
}
