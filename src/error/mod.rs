//! The error every fallible constructor of this crate returns, and the boxed error the
//! layers carry.

use std::fmt;

pub(crate) mod pacing;

/// Any error, boxed: what a layer's inner service's errors become.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An invalid configuration value, naming the field and the value that was rejected.
///
/// Every builder of this crate validates its input and returns this error instead of
/// panicking or silently clamping: a misconfigured retry policy is a bug that should
/// surface at start-up, not as a retry storm in production.
///
/// ```
/// use tower_backoff::ConfigError;
///
/// let err = ConfigError::new("multiplier", 0.5, "must be at least 1.0");
/// assert_eq!(err.field(), "multiplier");
/// assert_eq!(err.value(), "0.5");
/// assert_eq!(err.to_string(), "invalid `multiplier` = 0.5: must be at least 1.0");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    value: String,
    reason: &'static str,
}

impl ConfigError {
    /// A new error for `field`, whose rejected `value` is shown with its `Debug` form.
    pub fn new(field: &'static str, value: impl fmt::Debug, reason: &'static str) -> Self {
        Self {
            field,
            value: format!("{value:?}"),
            reason,
        }
    }

    /// The name of the rejected field, as spelled by its builder method.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The rejected value, in its `Debug` form.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Why the value was rejected.
    pub fn reason(&self) -> &'static str {
        self.reason
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid `{}` = {}: {}",
            self.field, self.value, self.reason
        )
    }
}

impl std::error::Error for ConfigError {}

/// Checks shared by the builders: each returns the value or a [`ConfigError`] naming `field`.
pub(crate) mod check {
    use super::ConfigError;
    use std::time::Duration;

    /// A finite float within `[min, max]`.
    pub(crate) fn float_in(
        field: &'static str,
        value: f64,
        min: f64,
        max: f64,
        reason: &'static str,
    ) -> Result<f64, ConfigError> {
        if value.is_finite() && value >= min && value <= max {
            Ok(value)
        } else {
            Err(ConfigError::new(field, value, reason))
        }
    }

    /// `lower <= upper`, reported against the field named `field` (holding `lower`).
    pub(crate) fn not_above(
        field: &'static str,
        lower: Duration,
        upper: Duration,
        reason: &'static str,
    ) -> Result<(), ConfigError> {
        if lower <= upper {
            Ok(())
        } else {
            Err(ConfigError::new(field, lower, reason))
        }
    }
}
