//! Saturating duration arithmetic: no strategy may panic or wrap, whatever its inputs.

use std::time::Duration;

/// `d × factor`, saturating at `Duration::MAX`; a NaN or non-positive product is zero.
pub(crate) fn mul_f64(d: Duration, factor: f64) -> Duration {
    from_secs_f64(d.as_secs_f64() * factor)
}

/// Seconds as a duration, saturating at `Duration::MAX`; NaN or negative is zero.
pub(crate) fn from_secs_f64(secs: f64) -> Duration {
    if secs.is_nan() || secs <= 0.0 {
        Duration::ZERO
    } else {
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
    }
}

/// `base × step^exp`, saturating; `exp` may be any `u32`.
pub(crate) fn mul_pow(base: Duration, step: f64, exp: u32) -> Duration {
    // powi takes an i32; any exponent past i32::MAX already overflows for step > 1.
    let exp = i32::try_from(exp).unwrap_or(i32::MAX);
    mul_f64(base, step.powi(exp))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturates_instead_of_panicking() {
        assert_eq!(mul_f64(Duration::MAX, 2.0), Duration::MAX);
        assert_eq!(
            mul_f64(Duration::from_secs(1), f64::INFINITY),
            Duration::MAX
        );
        assert_eq!(mul_f64(Duration::from_secs(1), f64::NAN), Duration::ZERO);
        assert_eq!(mul_f64(Duration::from_secs(1), -1.0), Duration::ZERO);
        assert_eq!(
            mul_pow(Duration::from_secs(1), 2.0, u32::MAX),
            Duration::MAX
        );
        assert_eq!(
            mul_pow(Duration::from_secs(1), 2.0, 3),
            Duration::from_secs(8)
        );
    }
}
