//! Saturating time arithmetic for pacing.

use std::time::Duration;
use tokio::time::Instant;

/// About 30 years: how far "never" is (as tokio does for far deadlines).
const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);

/// `at + d`, saturating at about 30 years from `at`.
pub(crate) fn later(at: Instant, d: Duration) -> Instant {
    at.checked_add(d)
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}

/// An instant that never comes, in practice.
pub(crate) fn never(now: Instant) -> Instant {
    later(now, FAR)
}

/// `secs` as a duration, saturating (negative or NaN: zero; too large: `Duration::MAX`).
pub(crate) fn secs_f64(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or(if secs > 0.0 {
        Duration::MAX
    } else {
        Duration::ZERO
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_saturates() {
        let now = Instant::now();
        assert!(later(now, Duration::MAX) > now + Duration::from_secs(86_400 * 365));
        assert_eq!(
            later(now, Duration::from_secs(1)),
            now + Duration::from_secs(1)
        );
        assert_eq!(secs_f64(-1.0), Duration::ZERO);
        assert_eq!(secs_f64(f64::NAN), Duration::ZERO);
        assert_eq!(secs_f64(f64::INFINITY), Duration::MAX);
    }
}
