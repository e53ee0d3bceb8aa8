//! Short names for the durations tests count in.

use std::time::Duration;

/// One millisecond: `100 * MS`.
pub const MS: Duration = Duration::from_millis(1);

/// One second: `2 * SEC`.
pub const SEC: Duration = Duration::from_secs(1);

/// `n` milliseconds.
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `n` seconds.
pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}
