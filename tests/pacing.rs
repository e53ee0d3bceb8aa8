//! Adaptive pacing: the client slows down on 429/503, speeds up on successes, and holds
//! requests to a destination that sent `Retry-After`.

use http::{Request, Response, StatusCode};
use std::convert::Infallible;
use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};
use tower_backoff::backoff::ResponsiveBackOff;
use tower_backoff::{ConfigError, Pacing, PacingDeadline, PacingError, PacingLayer};

type BoxError = Box<dyn Error + Send + Sync>;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// When each request reached the inner service, and its URI.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<(Instant, String)>>>);

impl Log {
    /// Offsets of the calls from `start`.
    fn offsets(&self, start: Instant) -> Vec<Duration> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(at, _)| *at - start)
            .collect()
    }

    fn uris(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, uri)| uri.clone())
            .collect()
    }

    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

/// The inner service: answers with the status named by the path (`/503`), echoes an
/// `x-retry-after` request header as `Retry-After`, fails with an I/O error on `/err`,
/// takes `?sleep=<ms>` to answer, and logs every call.
fn scripted(
    log: &Log,
) -> impl Service<Request<()>, Response = Response<()>, Error = std::io::Error, Future: Send>
+ Clone
+ Send
+ 'static {
    let log = log.clone();
    tower::service_fn(move |request: Request<()>| {
        let log = log.clone();
        async move {
            log.0
                .lock()
                .unwrap()
                .push((Instant::now(), request.uri().to_string()));
            if let Some(sleep) = request.uri().query().and_then(|q| q.strip_prefix("sleep=")) {
                tokio::time::sleep(ms(sleep.parse().unwrap())).await;
            }
            let path = request.uri().path().trim_start_matches('/');
            if path == "err" {
                return Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
            }
            let mut response = Response::builder().status(path.parse::<u16>().unwrap_or(200));
            if let Some(ra) = request.headers().get("x-retry-after") {
                response = response.header("retry-after", ra);
            }
            Ok(response.body(()).unwrap())
        }
    })
}

/// Deterministic pace: 100 ms, ×2 up, ×0.5 down after `threshold` successes.
fn backoff(threshold: u32) -> ResponsiveBackOff {
    ResponsiveBackOff::builder()
        .with_initial_interval(ms(100))
        .with_max_interval(secs(10))
        .with_up_multiplier(2.0)
        .with_down_multiplier(0.5)
        .with_down_threshold(threshold)
        .with_randomization_factor(0.0)
        .build()
        .unwrap()
}

fn layer(threshold: u32) -> PacingLayer {
    PacingLayer::builder()
        .backoff(backoff(threshold))
        .build()
        .unwrap()
}

fn get(uri: &str) -> Request<()> {
    Request::get(uri).body(()).unwrap()
}

fn get_ra(uri: &str, retry_after: &str) -> Request<()> {
    Request::get(uri)
        .header("x-retry-after", retry_after)
        .body(())
        .unwrap()
}

async fn send<S>(service: &mut S, request: Request<()>) -> Result<Response<()>, BoxError>
where
    S: Service<Request<()>, Response = Response<()>, Error = BoxError>,
{
    service.ready().await?.call(request).await
}

fn pacing_error(err: &BoxError) -> PacingError {
    *err.downcast_ref::<PacingError>()
        .unwrap_or_else(|| panic!("not a pacing error: {err}"))
}

/// Gaps between consecutive offsets.
fn gaps(offsets: &[Duration]) -> Vec<Duration> {
    offsets.windows(2).map(|w| w[1] - w[0]).collect()
}

#[tokio::test(start_paused = true)]
async fn a_slow_down_makes_the_next_new_requests_wait() {
    let log = Log::default();
    let pacing = layer(100);
    let mut client = pacing.layer(scripted(&log));
    let start = Instant::now();

    let busy = send(&mut client, get("http://a/503")).await.unwrap();
    assert_eq!(busy.status(), StatusCode::SERVICE_UNAVAILABLE);
    // Nothing measured yet: the client probes, one request per backoff delay.
    assert_eq!(pacing.current_delay(), ms(100));
    assert_eq!(pacing.current_rate(), Some(10.0));
    // New requests (not retries), to any destination, wait for the pace.
    send(&mut client, get("http://b/200")).await.unwrap();
    assert_eq!(log.offsets(start), [ms(0), ms(100)]);

    // A second refusal, of a request sent at the new pace: the pace goes down again.
    send(&mut client, get("http://a/429")).await.unwrap();
    let slower = pacing.current_delay();
    assert!(slower > ms(55), "{slower:?}");
    let before = Instant::now();
    send(&mut client, get("http://b/200")).await.unwrap();
    // (Timers fire on whole milliseconds.)
    assert!(before.elapsed() >= slower && before.elapsed() < slower + ms(1));
}

#[tokio::test(start_paused = true)]
async fn successes_speed_the_client_up_and_it_opens_after_a_quiet_period() {
    let log = Log::default();
    let pacing = layer(100);
    let mut client = pacing.layer(scripted(&log));
    let start = Instant::now();
    send(&mut client, get("http://a/503")).await.unwrap();
    for _ in 0..12 {
        send(&mut client, get("http://a/200")).await.unwrap();
    }
    // Each success raises the rate: every gap is shorter than the one before (the old
    // delay halved only once per ten successes, which came one delay apart).
    let gaps = gaps(&log.offsets(start));
    assert_eq!(gaps[0], ms(100));
    assert!(gaps.windows(2).all(|w| w[1] < w[0]), "{gaps:?}");
    assert!(gaps[11] < ms(15), "{gaps:?}");
    assert!(log.offsets(start)[12] < ms(500));

    // Ten seconds without a refusal: pacing stops, requests no longer wait at all.
    tokio::time::advance(secs(10)).await;
    send(&mut client, get("http://a/200")).await.unwrap();
    assert_eq!(pacing.current_delay(), Duration::ZERO);
    assert_eq!(pacing.current_rate(), None);
    let before = Instant::now();
    let burst: Vec<_> = (0..5)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/200"))))
        .collect();
    for task in burst {
        task.await.unwrap().unwrap();
    }
    assert_eq!(before.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn retry_after_cools_down_its_destination_only() {
    let log = Log::default();
    let pacing = layer(100);
    let client = pacing.layer(scripted(&log));
    let start = Instant::now();

    let refused = client
        .clone()
        .oneshot(get_ra("http://a.example/429", "5"))
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let a: http::uri::Authority = "a.example".parse().unwrap();
    let b: http::uri::Authority = "b.example".parse().unwrap();
    assert_eq!(pacing.cooldown(&a), Some(secs(5)));
    assert_eq!(pacing.cooldown(&b), None);

    // Once the client's own spacing (100 ms) is over, B goes at once; A waits for its
    // cool-down, whichever is sent first.
    tokio::time::advance(secs(1)).await;
    let to_a = tokio::spawn(client.clone().oneshot(get("http://a.example/200")));
    tokio::task::yield_now().await;
    let to_b = tokio::spawn(client.clone().oneshot(get("http://b.example/200")));
    to_b.await.unwrap().unwrap();
    assert_eq!(log.offsets(start), [secs(0), secs(1)]);
    assert_eq!(log.uris()[1], "http://b.example/200");
    to_a.await.unwrap().unwrap();
    assert_eq!(log.offsets(start), [secs(0), secs(1), secs(5)]);
    assert_eq!(log.uris()[2], "http://a.example/200");
    // The cool-down is over.
    assert_eq!(pacing.cooldown(&a), None);
}

#[tokio::test(start_paused = true)]
async fn requests_held_by_a_cool_down_leave_at_the_pace_not_in_a_burst() {
    let log = Log::default();
    let pacing = layer(100);
    let client = pacing.layer(scripted(&log));
    let start = Instant::now();
    client
        .clone()
        .oneshot(get_ra("http://a/503", "2"))
        .await
        .unwrap();
    let queued: Vec<_> = (0..3)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/200"))))
        .collect();
    for task in queued {
        task.await.unwrap().unwrap();
    }
    // Not a burst of three at 2 s: the cool-down's end, then the client's pace.
    let offsets = log.offsets(start);
    assert_eq!(offsets[..2], [ms(0), ms(2000)]);
    assert!(
        gaps(&offsets[1..]).iter().all(|gap| *gap >= ms(30)),
        "{offsets:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lone_retry_after_among_successes_does_not_close_the_destination() {
    let log = Log::default();
    let pacing = layer(100);
    let mut client = pacing.layer(scripted(&log));
    for _ in 0..20 {
        send(&mut client, get("http://a/200")).await.unwrap();
    }
    // A server shedding one request of many: the client slows down, but the
    // destination does not close for everyone for the Retry-After.
    send(&mut client, get_ra("http://a/503", "5"))
        .await
        .unwrap();
    assert!(pacing.current_delay() > Duration::ZERO);
    assert_eq!(pacing.cooldown(&"a".parse().unwrap()), None);
    let before = Instant::now();
    send(&mut client, get("http://a/200")).await.unwrap();
    assert!(before.elapsed() <= ms(100), "{:?}", before.elapsed());

    // A destination whose answers are mostly refusals does cool down.
    for _ in 0..6 {
        send(&mut client, get_ra("http://a/503", "5"))
            .await
            .unwrap();
    }
    assert_eq!(pacing.cooldown(&"a".parse().unwrap()), Some(secs(5)));
}

#[tokio::test(start_paused = true)]
async fn a_wait_beyond_max_wait_or_the_deadline_fails_fast() {
    let log = Log::default();
    let pacing = PacingLayer::builder()
        .backoff(backoff(100))
        .max_wait(secs(3))
        .build()
        .unwrap();
    let mut client = pacing.layer(scripted(&log));
    send(&mut client, get_ra("http://a/429", "5"))
        .await
        .unwrap();

    // max_wait: 3 s < 5 s.
    let before = Instant::now();
    let err = send(&mut client, get("http://a/200")).await.unwrap_err();
    assert!(matches!(
        pacing_error(&err),
        PacingError::WouldExceedBudget { wait, .. } if wait == secs(5)
    ));
    assert_eq!(
        (pacing_error(&err).wait(), pacing_error(&err).budget()),
        (secs(5), secs(3))
    );
    assert_eq!(Instant::now(), before, "failing fast does not wait");
    assert_eq!(log.len(), 1, "the inner service was not called");

    // The request's own deadline is shorter still.
    let mut request = get("http://a/200");
    request
        .extensions_mut()
        .insert(PacingDeadline(Instant::now() + secs(1)));
    let err = send(&mut client, request).await.unwrap_err();
    assert_eq!(
        (pacing_error(&err).wait(), pacing_error(&err).budget()),
        (secs(5), secs(1))
    );
    assert_eq!((Instant::now(), log.len()), (before, 1));

    // Neither failure reserved anything: once within budget, the request goes.
    tokio::time::advance(secs(2)).await;
    send(&mut client, get("http://a/200")).await.unwrap();
    assert_eq!(Instant::now(), before + secs(5));
    assert_eq!(log.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_later_than_the_wait_lets_the_request_wait() {
    let log = Log::default();
    let pacing = layer(100);
    let mut client = pacing.layer(scripted(&log));
    send(&mut client, get_ra("http://a/503", "5"))
        .await
        .unwrap();
    let start = Instant::now();
    let mut request = get("http://a/200");
    request
        .extensions_mut()
        .insert(PacingDeadline(start + secs(6)));
    send(&mut client, request).await.unwrap();
    assert_eq!(start.elapsed(), secs(5));
}

#[tokio::test(start_paused = true)]
async fn zero_max_wait_sheds_every_request_that_would_wait() {
    let log = Log::default();
    let pacing = PacingLayer::builder()
        .backoff(backoff(100))
        .max_wait(Duration::ZERO)
        .build()
        .unwrap();
    let mut client = pacing.layer(scripted(&log));
    send(&mut client, get("http://a/200")).await.unwrap();
    send(&mut client, get("http://a/503")).await.unwrap();
    let err = send(&mut client, get("http://a/200")).await.unwrap_err();
    assert_eq!(pacing_error(&err).wait(), ms(100));
    tokio::time::advance(ms(100)).await;
    send(&mut client, get("http://a/200")).await.unwrap();
    assert_eq!(log.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_hostile_retry_after_is_capped() {
    let log = Log::default();
    let pacing = PacingLayer::builder()
        .backoff(backoff(100))
        .max_wait(secs(3600))
        .build()
        .unwrap();
    let mut client = pacing.layer(scripted(&log));
    let start = Instant::now();
    send(&mut client, get_ra("http://a/429", "100000000000000000000"))
        .await
        .unwrap();
    let a = "a".parse().unwrap();
    assert_eq!(pacing.cooldown(&a), Some(PacingLayer::DEFAULT_MAX_COOLDOWN));

    let mut hurried = get("http://a/200");
    hurried
        .extensions_mut()
        .insert(PacingDeadline(start + secs(1)));
    let err = send(&mut client, hurried).await.unwrap_err();
    assert_eq!(pacing_error(&err).wait(), secs(300));

    send(&mut client, get("http://a/200")).await.unwrap();
    assert_eq!(log.offsets(start), [secs(0), secs(300)]);

    // A smaller cap applies the same way; zero ignores the header entirely.
    for (cap, expected) in [(secs(7), Some(secs(7))), (Duration::ZERO, None)] {
        let pacing = PacingLayer::builder().max_cooldown(cap).build().unwrap();
        let mut client = pacing.layer(scripted(&log));
        send(&mut client, get_ra("http://a/503", "60"))
            .await
            .unwrap();
        assert_eq!(pacing.cooldown(&a), expected);
    }
}

#[tokio::test(start_paused = true)]
async fn the_ratelimit_header_cools_down_too() {
    let log = Log::default();
    let pacing = layer(100);
    let inner = tower::service_fn(|_: Request<()>| async {
        let response = Response::builder()
            .status(429)
            .header("ratelimit", r#""burst";r=0;t=4"#);
        Ok::<_, Infallible>(response.body(()).unwrap())
    });
    let mut client = pacing.layer(inner);
    send(&mut client, get("http://a/")).await.unwrap();
    assert_eq!(pacing.cooldown(&"a".parse().unwrap()), Some(secs(4)));
    drop(log);
}

#[tokio::test(start_paused = true)]
async fn only_slow_down_statuses_slow_down() {
    let log = Log::default();
    let pacing = layer(100);
    let mut client = pacing.layer(scripted(&log));
    let start = Instant::now();
    // A 500 with Retry-After is a failure of the request, not a request to slow down.
    for status in [200, 404, 500, 502] {
        send(&mut client, get_ra(&format!("http://a/{status}"), "5"))
            .await
            .unwrap();
    }
    assert_eq!(pacing.current_delay(), Duration::ZERO);
    assert_eq!(pacing.cooldown(&"a".parse().unwrap()), None);
    assert_eq!(log.offsets(start), [Duration::ZERO; 4]);

    // Unless configured so.
    let pacing = PacingLayer::builder()
        .backoff(backoff(100))
        .slow_down_on([StatusCode::BAD_GATEWAY])
        .build()
        .unwrap();
    let mut client = pacing.layer(scripted(&log));
    send(&mut client, get("http://a/503")).await.unwrap();
    assert_eq!(pacing.current_delay(), Duration::ZERO);
    send(&mut client, get_ra("http://c/502", "5"))
        .await
        .unwrap();
    assert_eq!(pacing.current_delay(), ms(100));
    assert_eq!(pacing.cooldown(&"c".parse().unwrap()), Some(secs(5)));
}

#[tokio::test(start_paused = true)]
async fn transport_errors_leave_the_pace_alone() {
    let log = Log::default();
    let pacing = layer(1);
    let mut client = pacing.layer(scripted(&log));
    for _ in 0..3 {
        let err = send(&mut client, get("http://a/err")).await.unwrap_err();
        assert!(err.downcast_ref::<std::io::Error>().is_some(), "{err}");
    }
    assert_eq!(pacing.current_delay(), Duration::ZERO);
    assert_eq!(pacing.backoff().metrics().invocations, 0);

    // Nor do they count as successes: the delay only goes down on real responses.
    send(&mut client, get("http://a/503")).await.unwrap();
    send(&mut client, get("http://a/err")).await.unwrap_err();
    assert_eq!(pacing.current_delay(), ms(100));
    assert_eq!(pacing.backoff().metrics().invocations, 1);
}

#[tokio::test(start_paused = true)]
async fn concurrent_requests_sharing_a_layer_are_spaced() {
    let log = Log::default();
    let pacing = layer(1000);
    let client = pacing.layer(scripted(&log));
    let start = Instant::now();
    client.clone().oneshot(get("http://a/503")).await.unwrap();
    // Each task its own service, from the layer or a clone: one shared pace.
    let tasks: Vec<_> = (0..10)
        .map(|i| {
            let service = if i % 2 == 0 {
                client.clone()
            } else {
                pacing.clone().layer(scripted(&log))
            };
            tokio::spawn(service.oneshot(get("http://a/200")))
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let offsets = log.offsets(start);
    assert_eq!(offsets[..2], [ms(0), ms(100)]);
    // One at a time, never a herd: every gap is positive, and they shrink as the
    // successes raise the rate.
    let gaps = gaps(&offsets);
    assert!(gaps.iter().all(|gap| !gap.is_zero()), "{gaps:?}");
    assert!(gaps.windows(2).all(|w| w[1] <= w[0]), "{gaps:?}");
}

#[tokio::test(start_paused = true)]
async fn a_burst_from_a_new_client_is_slow_started() {
    let log = Log::default();
    let pacing = layer(100);
    let client = pacing.layer(scripted(&log));
    let start = Instant::now();
    let burst: Vec<_> = (0..10)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/200?sleep=20"))))
        .collect();
    for task in burst {
        task.await.unwrap().unwrap();
    }
    // Four at first (the initial window); each success opens the window by one more.
    let offsets = log.offsets(start);
    assert_eq!(offsets[..4], [ms(0); 4]);
    assert_eq!(offsets[4..], [ms(20); 6]);

    // Without a slow start, all at once.
    let log = Log::default();
    let start = Instant::now();
    let client = PacingLayer::builder()
        .initial_window(0)
        .build()
        .unwrap()
        .layer(scripted(&log));
    let burst: Vec<_> = (0..10)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/200?sleep=20"))))
        .collect();
    for task in burst {
        task.await.unwrap().unwrap();
    }
    assert_eq!(log.offsets(start), [ms(0); 10]);
}

#[tokio::test(start_paused = true)]
async fn a_queued_request_fails_when_its_budget_runs_out_and_a_dropped_one_frees_its_place() {
    let log = Log::default();
    let pacing = PacingLayer::builder()
        .backoff(backoff(100))
        .max_wait(ms(250))
        .build()
        .unwrap();
    let client = pacing.layer(scripted(&log));
    let start = Instant::now();
    // The destination refuses everything: the client probes at 100, 200, 400 ms ...
    client.clone().oneshot(get("http://a/503")).await.unwrap();
    let waiting: Vec<_> = (0..3)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/503"))))
        .collect();
    tokio::task::yield_now().await;
    // A dropped request leaves the queue: it is never sent.
    let dropped = tokio::spawn(client.clone().oneshot(get("http://a/dropped")));
    tokio::task::yield_now().await;
    dropped.abort();
    let mut results = Vec::new();
    for task in waiting {
        results.push(task.await.unwrap());
    }
    // The first probe at 100 ms is refused (next probe 200 ms later, at 300 ms): the
    // second request's 250 ms budget runs out in the queue; so does the third's.
    assert_eq!(results[0].as_ref().unwrap().status(), 503);
    for result in &results[1..] {
        let err = result.as_ref().unwrap_err();
        assert_eq!(pacing_error(err).budget(), ms(250));
        assert!(pacing_error(err).wait() > ms(250));
    }
    assert_eq!(log.offsets(start), [ms(0), ms(100)]);
    assert!(!log.uris().iter().any(|uri| uri.contains("dropped")));
}

#[tokio::test(start_paused = true)]
async fn a_rate_limited_burst_completes_near_the_limit_with_few_429s() {
    // A token bucket of 50 requests per second (burst 5) behind a 20 ms round trip,
    // answering 429 + Retry-After: 1 over the limit; a burst of 200 requests, each
    // retried until it succeeds.
    let bucket = Arc::new(Mutex::new((5.0_f64, Instant::now(), 0_u32)));
    let server = {
        let bucket = Arc::clone(&bucket);
        tower::service_fn(move |_: Request<()>| {
            let bucket = Arc::clone(&bucket);
            async move {
                tokio::time::sleep(ms(10)).await;
                let status = {
                    let mut b = bucket.lock().unwrap();
                    let now = Instant::now();
                    b.0 = (b.0 + (now - b.1).as_secs_f64() * 50.0).min(5.0);
                    b.1 = now;
                    if b.0 >= 1.0 {
                        b.0 -= 1.0;
                        200
                    } else {
                        b.2 += 1;
                        429
                    }
                };
                tokio::time::sleep(ms(10)).await;
                let response = Response::builder()
                    .status(status)
                    .header("retry-after", "1");
                Ok::<_, Infallible>(response.body(()).unwrap())
            }
        })
    };
    let client = layer(100).layer(server);
    let start = Instant::now();
    let burst: Vec<_> = (0..200)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                loop {
                    let response = client.clone().oneshot(get("http://api/")).await.unwrap();
                    if response.status() == 200 {
                        return;
                    }
                    tokio::time::sleep(secs(1)).await;
                }
            })
        })
        .collect();
    for task in burst {
        task.await.unwrap();
    }
    let elapsed = start.elapsed();
    let refused = bucket.lock().unwrap().2;
    // Ideal: 200 / 50 = 4 s, plus the 1 s Retry-After of the requests refused last.
    // Without pacing, the first round alone gets 195 429s.
    assert!(elapsed < secs(5), "{elapsed:?}, {refused} 429s");
    assert!(refused < 30, "{refused} 429s");
}

#[tokio::test(start_paused = true)]
async fn refusals_of_requests_already_in_flight_raise_the_delay_once() {
    let log = Log::default();
    let pacing = PacingLayer::builder()
        .backoff(backoff(100))
        .initial_window(0)
        .build()
        .unwrap();
    let client = pacing.layer(scripted(&log));
    let burst: Vec<_> = (0..8)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/503?sleep=1000"))))
        .collect();
    for task in burst {
        assert_eq!(task.await.unwrap().unwrap().status(), 503);
    }
    // Eight refusals of one round: one step down, not 100 ms × 2⁷.
    assert_eq!(pacing.current_delay(), ms(100));
    assert_eq!(pacing.backoff().metrics().went_up, 1);
    // A request sent at the new pace and refused again: the next step.
    client.clone().oneshot(get("http://a/503")).await.unwrap();
    assert_eq!(pacing.current_delay(), ms(200));
}

/// Checks tower's contract: `call` only on an instance that `poll_ready` made ready.
/// As with tower's `Buffer`, a clone does not inherit the readiness.
struct Strict<S> {
    inner: S,
    ready: bool,
    readied: Arc<Mutex<usize>>,
}

impl<S: Clone> Clone for Strict<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            ready: false,
            readied: Arc::clone(&self.readied),
        }
    }
}

impl<S: Service<Request<()>>> Service<Request<()>> for Strict<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        let poll = self.inner.poll_ready(cx);
        if poll.is_ready() && !self.ready {
            self.ready = true;
            *self.readied.lock().unwrap() += 1;
        }
        poll
    }

    fn call(&mut self, request: Request<()>) -> S::Future {
        assert!(self.ready, "called without poll_ready");
        self.ready = false;
        self.inner.call(request)
    }
}

#[tokio::test(start_paused = true)]
async fn a_waiting_request_readies_its_own_clone_of_the_inner_service() {
    let log = Log::default();
    let readied = Arc::new(Mutex::new(0));
    let pacing = layer(100);
    let mut client = pacing.layer(Strict {
        inner: scripted(&log),
        ready: false,
        readied: Arc::clone(&readied),
    });
    send(&mut client, get("http://a/503")).await.unwrap();
    assert_eq!(*readied.lock().unwrap(), 1);
    // This one waits 100 ms, with an unready clone that it readies after the wait...
    send(&mut client, get("http://a/200")).await.unwrap();
    assert_eq!(*readied.lock().unwrap(), 3);
    // ...while the service's own readiness was kept for the next request.
    assert!(client.get_ref().ready);
    assert_eq!(log.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn clones_share_one_state() {
    let log = Log::default();
    let pacing = layer(100);
    let copy = pacing.clone();
    let mut first = copy.layer(scripted(&log));
    let mut second: Pacing<_> = pacing.clone().layer(scripted(&log));
    let mut third = second.clone();

    send(&mut first, get_ra("http://a/503", "3")).await.unwrap();
    assert_eq!(pacing.current_delay(), ms(100));
    assert_eq!(copy.backoff().current(), ms(100));
    assert_eq!(pacing.cooldown(&"a".parse().unwrap()), Some(secs(3)));

    let start = Instant::now();
    send(&mut second, get("http://b/200")).await.unwrap();
    assert_eq!(start.elapsed(), ms(100));
    send(&mut third, get("http://a/200")).await.unwrap();
    assert_eq!(start.elapsed(), secs(3));
}

#[tokio::test(start_paused = true)]
async fn the_host_header_names_the_destination_of_a_relative_uri() {
    let log = Log::default();
    let pacing = layer(100);
    let mut client = pacing.layer(scripted(&log));
    let request = Request::get("/503")
        .header("host", "h.example")
        .header("x-retry-after", "2")
        .body(())
        .unwrap();
    send(&mut client, request).await.unwrap();
    assert_eq!(
        pacing.cooldown(&"h.example".parse().unwrap()),
        Some(secs(2))
    );
    let start = Instant::now();
    send(&mut client, get("http://h.example/200"))
        .await
        .unwrap();
    assert_eq!(start.elapsed(), secs(2));
}

#[test]
fn invalid_settings_are_config_errors() {
    let status = |code| StatusCode::from_u16(code).unwrap();
    let cases: Vec<(Vec<StatusCode>, &str)> = vec![
        (vec![], "[]"),
        (vec![status(200)], "200"),
        (vec![status(429), status(302)], "302"),
        (vec![status(399)], "399"),
        (vec![status(600)], "600"),
        (vec![status(101)], "101"),
    ];
    for (statuses, value) in cases {
        let err: ConfigError = PacingLayer::builder()
            .slow_down_on(statuses)
            .build()
            .unwrap_err();
        assert_eq!((err.field(), err.value()), ("slow_down_on", value));
    }
    assert!(
        PacingLayer::builder()
            .slow_down_on([status(400), status(599)])
            .max_wait(Duration::MAX)
            .max_cooldown(Duration::MAX)
            .build()
            .is_ok()
    );
}

#[test]
fn the_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    fn assert_sync<T: Send + Sync>() {}
    let log = Log::default();
    let mut client = PacingLayer::new().layer(scripted(&log));
    assert_send(&client.call(get("http://a/")));
    assert_sync::<PacingLayer>();
    assert_sync::<PacingError>();
}

#[tokio::test(start_paused = true)]
async fn huge_delays_do_not_overflow() {
    let log = Log::default();
    let huge = ResponsiveBackOff::builder()
        .with_initial_interval(Duration::MAX)
        .with_max_interval(Duration::MAX)
        .with_randomization_factor(0.0)
        .build()
        .unwrap();
    let pacing = PacingLayer::builder()
        .backoff(huge)
        .max_cooldown(Duration::MAX)
        .build()
        .unwrap();
    let mut client = pacing.layer(scripted(&log));
    send(&mut client, get_ra("http://a/503", "100000000000000000000"))
        .await
        .unwrap();
    send(&mut client, get("http://a/503")).await.unwrap_err();
    let err = send(&mut client, get("http://b/200")).await.unwrap_err();
    assert!(pacing_error(&err).wait() > secs(86_400 * 365));
    assert_eq!(log.len(), 1);
}

/// A real hyper server on loopback and hyper-util's legacy client: a 429 with
/// `Retry-After: 1` holds the next request to that server for 1 s.
#[tokio::test(start_paused = true)]
async fn hyper_client_waits_out_a_real_servers_retry_after() {
    use bytes::Bytes;
    use http_body_util::Empty;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let server_hits = Arc::clone(&hits);
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let hits = Arc::clone(&server_hits);
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |_: Request<hyper::body::Incoming>| {
                        let hits = Arc::clone(&hits);
                        async move {
                            let mut hits = hits.lock().unwrap();
                            hits.push(Instant::now());
                            let response = if hits.len() == 1 {
                                Response::builder().status(429).header("retry-after", "1")
                            } else {
                                Response::builder().status(200)
                            };
                            Ok::<_, Infallible>(response.body(Empty::<Bytes>::new()).unwrap())
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });

    let pacing = PacingLayer::new();
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut client = pacing.layer(client);
    let uri = format!("http://{addr}/");
    let request = || Request::get(&uri).body(Empty::<Bytes>::new()).unwrap();

    let first = client.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(first.status(), StatusCode::TOO_MANY_REQUESTS);
    let authority = addr.to_string().parse().unwrap();
    assert!(pacing.cooldown(&authority).is_some());
    let second = client.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(second.status(), StatusCode::OK);

    let hits = hits.lock().unwrap();
    assert_eq!(hits.len(), 2);
    let gap = hits[1] - hits[0];
    assert!(gap >= secs(1) && gap < ms(1100), "{gap:?}");
}

#[tokio::test(start_paused = true)]
async fn an_outage_is_probed_and_its_waiting_requests_succeed_after_it() {
    // Bare 503s for the first second, then all well; 10 ms each way.
    let start = Instant::now();
    let attempts = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let server = {
        let attempts = Arc::clone(&attempts);
        tower::service_fn(move |_: Request<()>| {
            let attempts = Arc::clone(&attempts);
            async move {
                tokio::time::sleep(ms(10)).await;
                attempts.lock().unwrap().push(Instant::now());
                let status = if start.elapsed() < secs(1) { 503 } else { 200 };
                tokio::time::sleep(ms(10)).await;
                Ok::<_, Infallible>(Response::builder().status(status).body(()).unwrap())
            }
        })
    };
    let pacing = PacingLayer::builder()
        .backoff(backoff(10))
        .initial_window(0)
        .build()
        .unwrap();
    let client = pacing.layer(server);
    // One request every 10 ms for 1.5 s, none retried.
    let mut tasks = Vec::new();
    for _ in 0..150 {
        tasks.push(tokio::spawn(client.clone().oneshot(get("http://api/"))));
        tokio::time::sleep(ms(10)).await;
    }
    let mut ok = 0;
    for task in tasks {
        if task.await.unwrap().unwrap().status() == 200 {
            ok += 1;
        }
    }
    let attempts = attempts.lock().unwrap();
    let during = attempts.iter().filter(|at| **at - start < secs(1)).count();
    // During the outage the client only probes: a handful of the 100 requests issued
    // then reach the server. The others wait, and succeed once it is back.
    assert!(during <= 10, "{during} attempts during the outage");
    assert!(ok >= 140, "{ok} of 150 succeeded");
}
