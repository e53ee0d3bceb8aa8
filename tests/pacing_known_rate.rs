//! A destination whose rate the user knows (`PacingBuilder::with_known_rate`): paced at
//! it from the first request, never faster, and no other destination with it.

mod support;

use http::StatusCode;
use support::pacing::*;
use tokio::time::Instant;
use tower::{Layer, ServiceExt};
use tower_backoff::pacing::PacingBuilder;
use tower_backoff::{PacingError, PacingLayer};

/// Sends `n` GETs to `uri` at once through clones of `client`; the results in order.
async fn burst<S: Client>(
    client: &S,
    uri: &str,
    n: usize,
) -> Vec<Result<http::Response<()>, BoxError>> {
    let tasks: Vec<_> = (0..n)
        .map(|_| tokio::spawn(client.clone().oneshot(get(uri))))
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    results
}

/// A client of a pacing layer built by `builder` (the fixtures' probing backoff) told
/// that destination `a` allows `per_second` requests a second, over the scripted server;
/// its log and layer.
fn knowing_a(
    per_second: u32,
    builder: PacingBuilder,
) -> (
    Log,
    PacingLayer,
    impl tower::Service<
        http::Request<()>,
        Response = http::Response<()>,
        Error = BoxError,
        Future: Send,
    > + Clone
    + Send
    + 'static,
) {
    let log = Log::default();
    let pacing = builder
        .with_known_rate("a", per_second, secs(1))
        .build()
        .unwrap();
    let client = pacing.layer(scripted(&log));
    (log, pacing, client)
}

#[tokio::test(start_paused = true)]
async fn a_known_rate_paces_its_destination_from_the_first_request_and_no_other() {
    let (log, pacing, client) = knowing_a(10, builder());
    let start = Instant::now();
    let (to_a, to_b) = tokio::join!(
        burst(&client, "http://a/200", 5),
        burst(&client, "http://b/200", 5)
    );
    assert!(to_a.iter().chain(&to_b).all(|r| r.is_ok()));
    // Without a slow start or a refusal: evenly spaced at 10 r/s from the first.
    assert_eq!(
        log.offsets_to("a", start),
        [ms(0), ms(100), ms(200), ms(300), ms(400)]
    );
    assert_eq!(pacing.current_rate_to(&authority("a")), Some(10.0));
    // The other destination is neither paced nor held.
    assert_eq!(log.offsets_to("b", start), [ms(0); 5]);
    assert_eq!(pacing.current_rate_to(&authority("b")), None);
}

#[tokio::test(start_paused = true)]
async fn a_known_rate_slower_than_the_learned_floor_is_kept() {
    let log = Log::default();
    let pacing = builder()
        .with_known_rate("a", 1, secs(10))
        .with_max_wait(secs(60))
        .build()
        .unwrap();
    let client = pacing.layer(scripted(&log));
    let start = Instant::now();
    assert!(
        burst(&client, "http://a/200", 3)
            .await
            .iter()
            .all(|r| r.is_ok())
    );
    assert_eq!(log.offsets_to("a", start), [secs(0), secs(10), secs(20)]);
    assert_eq!(pacing.current_rate_to(&authority("a")), Some(0.1));
}

#[tokio::test(start_paused = true)]
async fn successes_never_push_a_known_rate_past_itself() {
    let (log, pacing, client) = knowing_a(20, builder());
    let start = Instant::now();
    let results = burst(&client, "http://a/200", 60).await;
    assert!(results.iter().all(|r| r.is_ok()));
    let offsets = log.offsets_to("a", start);
    assert_eq!(offsets.len(), 60);
    assert!(
        gaps(&offsets).iter().all(|&gap| gap == ms(50)),
        "{offsets:?}"
    );
    assert_eq!(pacing.current_rate_to(&authority("a")), Some(20.0));
    // Quiet for longer than an episode, it is still paced at its rate.
    tokio::time::advance(secs(30)).await;
    burst(&client, "http://a/200", 2).await;
    assert_eq!(pacing.current_rate_to(&authority("a")), Some(20.0));
    // The first goes at once, the next at the known spacing.
    let last = log.offsets_to("a", start);
    assert_eq!(last[61] - last[60], ms(50));
}

#[tokio::test(start_paused = true)]
async fn a_refusal_slows_a_known_destination_and_it_grows_back_only_to_its_rate() {
    let (_, pacing, client) = knowing_a(20, builder());
    burst(&client, "http://a/200", 20).await;
    let refused = burst(&client, "http://a/429", 1).await;
    assert_eq!(
        refused[0].as_ref().unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    let slowed = pacing.current_rate_to(&authority("a")).unwrap();
    assert!(slowed < 20.0, "{slowed}");
    // Successes bring it back to its rate, and no further.
    let mut highest: f64 = 0.0;
    for _ in 0..10 {
        burst(&client, "http://a/200", 20).await;
        highest = highest.max(pacing.current_rate_to(&authority("a")).unwrap());
    }
    assert_eq!(highest, 20.0);
    assert_eq!(pacing.current_rate_to(&authority("a")), Some(20.0));
}

#[tokio::test(start_paused = true)]
async fn probing_a_known_destination_is_never_faster_than_its_rate() {
    // The probing delay is 100 ms; the known rate, one request a second.
    let (log, pacing, client) = knowing_a(1, builder());
    burst(&client, "http://a/429", 1).await;
    assert_eq!(pacing.current_delay_to(&authority("a")), secs(1));
    let start = Instant::now();
    burst(&client, "http://a/429", 3).await;
    // The first of them a second after the first refusal, then one a second.
    assert_eq!(
        gaps(&log.offsets_to("a", start)),
        [secs(1), secs(1), secs(1)]
    );
}

#[tokio::test(start_paused = true)]
async fn a_known_destination_waits_at_most_max_wait() {
    let (log, _, client) = knowing_a(10, builder().with_max_wait(ms(250)));
    let start = Instant::now();
    let results = burst(&client, "http://a/200", 5).await;
    // 0, 100 and 200 ms are within the wait; 300 and 400 ms are not, and fail at once:
    // the queue cannot drain faster than the known rate.
    assert_eq!(start.elapsed(), ms(200));
    let failed: Vec<_> = results
        .iter()
        .filter_map(|r| r.as_ref().err().map(pacing_error))
        .collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed
            .iter()
            .all(|e| matches!(e, PacingError::WaitTooLong { .. }))
    );
    assert_eq!(log.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_known_destination_is_paced_when_the_table_is_full() {
    let (log, pacing, client) = knowing_a(10, builder().with_max_destinations(1));
    // b takes the only place; used a moment ago, it is not forgotten.
    burst(&client, "http://b/429", 1).await;
    assert_eq!(pacing.destinations(), 1);
    let start = Instant::now();
    burst(&client, "http://a/200", 3).await;
    assert_eq!(log.offsets_to("a", start), [ms(0), ms(100), ms(200)]);
    assert_eq!(pacing.destinations(), 2);
}
