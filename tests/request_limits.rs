//! The limits of one logical request in `RetryLayer`: its attempts, its deadline (time inside
//! attempts counts), and a backoff that stops.

mod support;

use std::time::Duration;
use support::backoffs::Steps;
use support::scripted::Reply::*;
use support::scripted::{Script, attempts_layer, exact, get, layer, run, stats};
use support::time::{MS, SEC};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};
use tower_backoff::limits::{LimitReached, Limits};
use tower_backoff::{GiveUp, RetryLayer, RetryStats};

// ---- budget ----

#[tokio::test(start_paused = true)]
async fn max_attempts_counts_the_first_attempt() {
    let (res, arrivals) = run(attempts_layer(3), get(), &[Status(503); 5]).await;
    let res = res.unwrap();
    assert_eq!(res.status(), 503);
    assert_eq!(arrivals, [Duration::ZERO, 100 * MS, 300 * MS]);
    assert_eq!(
        stats(&res),
        RetryStats {
            attempts: 3,
            waited: 300 * MS,
            gave_up: Some(GiveUp::Limit(LimitReached::MaxAttempts)),
        }
    );
    // The default is three attempts.
    let (_, arrivals) = run(layer(), get(), &[Status(503); 5]).await;
    assert_eq!(
        arrivals.len(),
        tower_backoff::limits::DEFAULT_MAX_ATTEMPTS as usize
    );
}

#[tokio::test(start_paused = true)]
async fn a_wait_ending_past_the_deadline_is_not_started() {
    let settings = exact().with_limits(Limits::new(10, SEC).unwrap());
    let slow_steps = Steps {
        step: 400 * MS,
        ..Steps::new()
    };
    let t0 = Instant::now();
    let script = Script::new(&[Status(503); 5]);
    let res = RetryLayer::new(slow_steps)
        .with_settings(settings)
        .layer(script.service())
        .oneshot(get())
        .await
        .unwrap();
    // Waits 400 ms, then the next 800 ms wait would end at 1.2 s > 1 s: returned at 400 ms.
    assert_eq!(script.arrivals(), [Duration::ZERO, 400 * MS]);
    assert_eq!(t0.elapsed(), 400 * MS, "no sleep just to give up");
    assert_eq!(res.status(), 503);
    assert_eq!(
        stats(&res),
        RetryStats {
            attempts: 2,
            waited: 400 * MS,
            gave_up: Some(GiveUp::Limit(LimitReached::MaxElapsed)),
        }
    );
}

#[tokio::test(start_paused = true)]
async fn time_spent_inside_attempts_counts_against_the_deadline() {
    let settings = exact()
        .with_max_attempts(10)
        .unwrap()
        .with_max_elapsed(SEC)
        .unwrap();
    let t0 = Instant::now();
    let (res, arrivals) = run(
        layer().with_settings(settings),
        get(),
        &[Slow(700 * MS, 503), Slow(700 * MS, 503)],
    )
    .await;
    // 700 ms + 100 ms wait = 800 ms: allowed; 1.5 s + 200 ms: past the 1 s deadline.
    assert_eq!(arrivals, [Duration::ZERO, 800 * MS]);
    assert_eq!(t0.elapsed(), 1500 * MS);
    assert_eq!(res.unwrap().status(), 503);
}

#[tokio::test(start_paused = true)]
async fn a_backoff_returning_none_stops_the_retries() {
    let two = Steps {
        limit: 1,
        ..Steps::new()
    };
    let (res, arrivals) = run(
        RetryLayer::new(two).with_settings(exact().with_max_attempts(10).unwrap()),
        get(),
        &[Status(503); 5],
    )
    .await;
    let res = res.unwrap();
    assert_eq!(res.status(), 503);
    assert_eq!(stats(&res).gave_up, Some(GiveUp::BackOff));
    assert_eq!(arrivals.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_backoff_starts_fresh_for_each_logical_request() {
    let script = Script::new(&[Status(503), Status(503), Status(200), Status(503)]);
    let mut svc = attempts_layer(5).layer(script.service());
    let t0 = Instant::now();
    svc.ready().await.unwrap().call(get()).await.unwrap();
    let t1 = Instant::now();
    let res = svc.ready().await.unwrap().call(get()).await.unwrap();
    assert_eq!(t1 - t0, 300 * MS);
    // The second request's first wait is the backoff's first delay again.
    assert_eq!(t1.elapsed(), 100 * MS);
    assert_eq!(
        stats(&res),
        RetryStats {
            attempts: 2,
            waited: 100 * MS,
            gave_up: None,
        }
    );
}

#[tokio::test(start_paused = true)]
async fn the_largest_time_limit_saturates_instead_of_overflowing() {
    // `Duration::MAX` is a valid limit ("no limit"): the deadline it makes must not
    // overflow the clock when a retry marks it.
    let settings = exact().with_max_elapsed(Duration::MAX).unwrap();
    let (res, arrivals) = run(
        layer().with_settings(settings),
        get(),
        &[Status(503), Status(200)],
    )
    .await;
    assert_eq!(res.unwrap().status(), 200);
    assert_eq!(arrivals.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_backoffs_own_time_limit_counts_from_the_first_failure() {
    use tower_backoff::ConstantBackOff;
    use tower_backoff::backoff::BackOffExt;
    // The backoff stops after 3 s of its own; the first attempt alone takes 5 s. The
    // layer's copy of the backoff starts at the first retry, so that retry is made.
    let backoff = ConstantBackOff::new(SEC).unwrap().with_max_elapsed(3 * SEC);
    let script = Script::new(&[Slow(5 * SEC, 503), Status(503), Status(503)]);
    let layer = RetryLayer::new(backoff).with_settings(
        exact()
            .with_max_attempts(10)
            .unwrap()
            .with_max_elapsed(60 * SEC)
            .unwrap(),
    );
    let res = layer.layer(script.service()).oneshot(get()).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        script.arrivals(),
        [Duration::ZERO, 6 * SEC, 7 * SEC, 8 * SEC]
    );
}
