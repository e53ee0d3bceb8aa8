//! The told reference's share: the real runs (`lab/src/bin/limiters.rs`) and the model
//! (`simulate -- limiters`) read it alike.

use std::sync::OnceLock;
use std::time::Duration;

/// A fleet client's share of the 50 r/s limit: 8 clients, one request per 160 ms each.
pub const TOLD_SPACING: Duration = Duration::from_millis(160);

/// The rate a fleet sharing its pacing in Redis is told, once for all its processes
/// ([`Stack::ToldRedis`](super::client::Stack::ToldRedis)): 49 of the 50 r/s. The
/// limiters count arrivals, which loopback and 8 processes on 2 cores bunch by a few
/// milliseconds; told exactly 50, one HAProxy fleet of two had 6 of 529 attempts refused,
/// and each refusal cuts the shared pace below the rate told. 49 keeps 2 % for that, and
/// caps the fleet at 98 % of the capacity: the target's bound, with no room to spare.
pub const FLEET_RATE: u32 = 49;

/// The share of [`TOLD_SPACING`]'s rate the told client is told: `LIMITERS_TOLD_SHARE`
/// (1 when unset; 0.97 paces each client of the fleet at 97 % of its share), read once.
/// The environment reaches a fleet's processes as it is.
pub fn told_share() -> Result<f64, String> {
    static SHARE: OnceLock<Result<f64, String>> = OnceLock::new();
    SHARE
        .get_or_init(|| match std::env::var("LIMITERS_TOLD_SHARE") {
            Err(_) => Ok(1.0),
            Ok(text) => text
                .parse::<f64>()
                .ok()
                .filter(|share| *share > 0.0 && *share <= 2.0)
                .ok_or(format!(
                    "LIMITERS_TOLD_SHARE={text}: a share of the limit over 0 and at most 2"
                )),
        })
        .clone()
}

/// The told client's spacing at its [`told_share`]; the harness and the model refuse an
/// invalid share before any fleet starts.
pub fn told_spacing() -> Duration {
    let share = told_share().expect("checked before the fleet starts");
    TOLD_SPACING.div_f64(share)
}
