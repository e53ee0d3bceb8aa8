//! How long to wait before a retry: the backoff's delay, the server's, or both.

use super::settings::RetrySettings;
use super::stats::GiveUp;
use crate::backoff::BackOff;
use crate::backoff::jitter::Jitter;
use crate::classify::ServerDelay;
use std::time::Duration;

/// The delay before the next retry.
///
/// - No server delay: the backoff's.
/// - [`ServerDelay::Exactly`]: the server's (the backoff still advances, and may stop).
/// - [`ServerDelay::AtLeast`]: the longer of the two.
/// - [`ServerDelay::Restart`]: the server's, and the backoff starts over.
///
/// A server delay past the settings' cap gives up, or waits for the cap when clamping; one
/// past the backoff's own time limit ([`BackOff::remaining`]) gives up too. A
/// delay that comes from the server is spread over `[d, d × (1 + jitter))` so that
/// clients told the same delay do not come back as one herd, but never past `time_left`
/// (the request's deadline) because of the spread alone.
pub(crate) fn plan<B: BackOff>(
    backoff: &mut B,
    server: Option<ServerDelay>,
    settings: &RetrySettings,
    jitter: &mut Draw<'_>,
    time_left: Duration,
) -> Result<Duration, GiveUp> {
    let server_said = match server {
        Some(delay) => Some((delay, capped(delay.duration(), settings)?)),
        None => None,
    };
    if let Some((_, asked)) = server_said
        && crate::backoff::outlasts(backoff, asked)
    {
        return Err(GiveUp::BackOff);
    }
    if let Some((ServerDelay::Restart(_), asked)) = server_said {
        backoff.reset();
        return Ok(spread(asked, settings, jitter, time_left));
    }
    let ours = backoff.next_backoff().ok_or(GiveUp::BackOff)?;
    Ok(match server_said {
        Some((ServerDelay::AtLeast(_), asked)) if ours >= asked => ours,
        Some((_, asked)) => spread(asked, settings, jitter, time_left),
        None => ours,
    })
}

/// A request's random stream, taken from its layer's generator at the first draw (most
/// requests never draw).
pub(crate) struct Draw<'a> {
    pub(crate) own: &'a mut Option<Jitter>,
    pub(crate) layer: &'a Jitter,
}

impl Draw<'_> {
    fn uniform(&mut self, low: f64, high: f64) -> f64 {
        let layer = self.layer;
        self.own
            .get_or_insert_with(|| layer.clone())
            .uniform(low, high)
    }
}

/// The server's delay within the settings' cap.
fn capped(asked: Duration, settings: &RetrySettings) -> Result<Duration, GiveUp> {
    let cap = settings.max_retry_after();
    if asked <= cap {
        Ok(asked)
    } else if settings.clamp_retry_after() {
        Ok(cap)
    } else {
        Err(GiveUp::RetryAfterTooLong(asked))
    }
}

/// `asked` plus a random part of `asked × jitter`, the random part kept within `time_left`.
fn spread(
    asked: Duration,
    settings: &RetrySettings,
    jitter: &mut Draw<'_>,
    time_left: Duration,
) -> Duration {
    let fraction = settings.retry_after_jitter();
    if fraction <= 0.0 || asked.is_zero() {
        return asked;
    }
    let room = time_left.saturating_sub(asked);
    let most = crate::time::mul_f64(asked, fraction).min(room);
    let extra = jitter.uniform(0.0, most.as_secs_f64());
    asked.saturating_add(crate::time::from_secs_f64(extra))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::ConstantBackOff;
    use crate::backoff::StopBackOff;

    const SEC: Duration = Duration::from_secs(1);
    const LOTS: Duration = Duration::from_secs(3600);

    /// A draw of its own from a generator seeded with `seed`.
    fn seeded(seed: u64) -> (Option<Jitter>, Jitter) {
        (None, Jitter::seeded(seed))
    }

    fn exact() -> RetrySettings {
        RetrySettings::new().with_retry_after_jitter(0.0).unwrap()
    }

    #[test]
    fn the_largest_server_delay_spreads_without_overflow() {
        let (mut own, layer) = seeded(1);
        let mut jitter = Draw {
            own: &mut own,
            layer: &layer,
        };
        let huge = Duration::from_secs(u64::MAX);
        let settings = RetrySettings::new()
            .with_max_retry_after(Duration::MAX)
            .unwrap()
            .with_retry_after_jitter(1.0)
            .unwrap();
        let delay = spread(huge, &settings, &mut jitter, Duration::MAX);
        assert!(delay >= huge);
    }

    #[test]
    fn server_delays_combine_with_the_backoff_as_documented() {
        let (mut own, layer) = seeded(1);
        let mut jitter = Draw {
            own: &mut own,
            layer: &layer,
        };
        let mut b = ConstantBackOff::new(2 * SEC).unwrap();
        let s = exact();
        let plan = |b: &mut ConstantBackOff, d, j: &mut Draw<'_>| plan(b, d, &s, j, LOTS);
        assert_eq!(plan(&mut b, None, &mut jitter), Ok(2 * SEC));
        assert_eq!(
            plan(&mut b, Some(ServerDelay::Exactly(SEC)), &mut jitter),
            Ok(SEC)
        );
        assert_eq!(
            plan(&mut b, Some(ServerDelay::AtLeast(SEC)), &mut jitter),
            Ok(2 * SEC)
        );
        assert_eq!(
            plan(&mut b, Some(ServerDelay::AtLeast(5 * SEC)), &mut jitter),
            Ok(5 * SEC)
        );
        assert_eq!(
            plan(&mut b, Some(ServerDelay::Restart(SEC)), &mut jitter),
            Ok(SEC)
        );
    }

    #[test]
    fn a_stopped_backoff_stops_unless_the_server_restarts_it() {
        let (mut own, layer) = seeded(1);
        let mut jitter = Draw {
            own: &mut own,
            layer: &layer,
        };
        let s = exact();
        let mut stop = StopBackOff;
        assert_eq!(
            plan(
                &mut stop,
                Some(ServerDelay::Exactly(SEC)),
                &s,
                &mut jitter,
                LOTS
            ),
            Err(GiveUp::BackOff)
        );
        assert_eq!(
            plan(
                &mut stop,
                Some(ServerDelay::Restart(SEC)),
                &s,
                &mut jitter,
                LOTS
            ),
            Ok(SEC)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_server_delay_outlasts_the_backoffs_time_limit() {
        use crate::backoff::BackOffExt;
        let (mut own, layer) = seeded(1);
        let mut jitter = Draw {
            own: &mut own,
            layer: &layer,
        };
        let mut b = ConstantBackOff::new(SEC).unwrap().with_max_elapsed(5 * SEC);
        let clamp = exact().with_clamp_retry_after(true);
        let asked = Some(ServerDelay::Exactly(8 * SEC));
        assert_eq!(
            plan(&mut b, asked, &clamp, &mut jitter, LOTS),
            Err(GiveUp::BackOff)
        );
        let asked = Some(ServerDelay::Exactly(4 * SEC));
        assert_eq!(plan(&mut b, asked, &clamp, &mut jitter, LOTS), Ok(4 * SEC));
    }

    #[test]
    fn the_cap_gives_up_or_clamps() {
        let (mut own, layer) = seeded(1);
        let mut jitter = Draw {
            own: &mut own,
            layer: &layer,
        };
        let mut b = ConstantBackOff::new(SEC).unwrap();
        let asked = Some(ServerDelay::Exactly(Duration::from_secs(86_400)));
        assert_eq!(
            plan(&mut b, asked, &exact(), &mut jitter, LOTS),
            Err(GiveUp::RetryAfterTooLong(Duration::from_secs(86_400)))
        );
        let clamp = exact().with_clamp_retry_after(true);
        assert_eq!(
            plan(&mut b, asked, &clamp, &mut jitter, LOTS),
            Ok(clamp.max_retry_after())
        );
    }

    #[test]
    fn server_delays_are_spread_after_what_was_asked_and_never_before() {
        let settings = RetrySettings::new().with_retry_after_jitter(0.5).unwrap();
        let (mut own, layer) = seeded(7);
        let mut jitter = Draw {
            own: &mut own,
            layer: &layer,
        };
        let mut b = ConstantBackOff::new(SEC).unwrap();
        let delays: Vec<Duration> = (0..200)
            .map(|_| {
                plan(
                    &mut b,
                    Some(ServerDelay::Exactly(SEC)),
                    &settings,
                    &mut jitter,
                    LOTS,
                )
            })
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(delays.iter().all(|d| *d >= SEC && *d < SEC * 3 / 2));
        let late = delays.iter().filter(|d| **d >= SEC * 5 / 4).count();
        assert!((60..140).contains(&late), "{late} of 200 in the upper half");
    }

    #[test]
    fn the_spread_never_crosses_the_deadline() {
        let settings = RetrySettings::new().with_retry_after_jitter(1.0).unwrap();
        let (mut own, layer) = seeded(3);
        let mut jitter = Draw {
            own: &mut own,
            layer: &layer,
        };
        let mut b = ConstantBackOff::new(SEC).unwrap();
        for _ in 0..100 {
            let d = plan(
                &mut b,
                Some(ServerDelay::Exactly(SEC)),
                &settings,
                &mut jitter,
                SEC + Duration::from_millis(10),
            )
            .unwrap();
            assert!(d <= SEC + Duration::from_millis(10), "{d:?}");
        }
    }
}
