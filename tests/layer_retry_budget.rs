//! The layer's shared retry budget: an outage cannot multiply the load on the server.

use http::{Request, Response};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tower::{Layer, Service, ServiceExt};
use tower_backoff::budget::{RetryBudget, RetryThrottle, ThrottleOutcome};
use tower_backoff::limits::LimitReached;
use tower_backoff::{ConstantBackOff, GiveUp, RetryLayer, RetrySettings, RetryStats};

/// A server in total outage: every request is answered 503; counts the attempts.
fn outage(
    attempts: Arc<AtomicU32>,
) -> impl Service<
    Request<String>,
    Response = Response<String>,
    Error = std::io::Error,
    Future = impl Send,
> + Clone {
    tower::service_fn(move |_req: Request<String>| {
        attempts.fetch_add(1, Ordering::SeqCst);
        async {
            Ok::<_, std::io::Error>(Response::builder().status(503).body(String::new()).unwrap())
        }
    })
}

fn layer(budget: Option<RetryBudget>) -> RetryLayer<ConstantBackOff> {
    let layer = RetryLayer::new(ConstantBackOff::new(Duration::from_millis(10)).unwrap())
        .with_settings(RetrySettings::new().with_max_attempts(3).unwrap());
    match budget {
        Some(budget) => layer.with_retry_budget(budget),
        None => layer.without_retry_budget(),
    }
}

async fn run(layer: RetryLayer<ConstantBackOff>, requests: u32) -> u32 {
    let attempts = Arc::new(AtomicU32::new(0));
    let service = layer.layer(outage(attempts.clone()));
    for _ in 0..requests {
        let res = service
            .clone()
            .oneshot(Request::get("/").body(String::new()).unwrap())
            .await
            .unwrap();
        assert_eq!(res.status(), 503);
        let gave_up = res.extensions().get::<RetryStats>().unwrap().gave_up;
        assert!(
            matches!(
                gave_up,
                Some(
                    GiveUp::RetryBudget
                        | GiveUp::Throttled
                        | GiveUp::Limit(LimitReached::MaxAttempts)
                )
            ),
            "{gave_up:?}"
        );
    }
    attempts.load(Ordering::SeqCst)
}

#[tokio::test(start_paused = true)]
async fn without_a_budget_an_outage_triples_the_load() {
    assert_eq!(run(layer(None), 50).await, 150);
}

#[tokio::test(start_paused = true)]
async fn the_budget_caps_retries_at_its_floor_plus_ratio_of_requests() {
    // Floor: 1 retry/s over a 1 s window = 1 retry; ratio 0.1 of 50 requests = 5 more.
    let budget = RetryBudget::new(Duration::from_secs(1), 1, 0.1).unwrap();
    let attempts = run(layer(Some(budget.clone())), 50).await;
    assert_eq!(attempts, 50 + 1 + 5);
    assert_eq!(budget.available(), 0);
}

#[tokio::test(start_paused = true)]
async fn clones_of_a_layer_and_its_services_share_one_budget() {
    let budget = RetryBudget::new(Duration::from_secs(1), 1, 0.0).unwrap();
    let layer = layer(Some(budget));
    // Two services from two clones of the layer: one retry in all.
    let first = run(layer.clone(), 1).await;
    let second = run(layer, 1).await;
    assert_eq!((first, second), (2, 1));
}

#[tokio::test(start_paused = true)]
async fn the_default_layer_has_the_aws_retry_quota() {
    // RetryQuota::default(): 500 tokens, 5 a retry. An outage's retries all fail, so it
    // pays for 100 of them and then for none, however many requests come.
    let attempts = run(
        RetryLayer::new(ConstantBackOff::new(Duration::from_millis(1)).unwrap()),
        1000,
    )
    .await;
    assert_eq!(attempts, 1000 + 100);
}

/// A window budget refunds a retry that succeeds: scattered failures cost it nothing.
#[tokio::test(start_paused = true)]
async fn a_window_budget_refunds_retries_that_succeed() {
    // No floor, one retry per ten requests: two requests earn 0.2 retries, none.
    let budget = RetryBudget::new(Duration::from_secs(10), 1, 0.0).unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    // Every first attempt fails, every retry succeeds.
    let flaky = tower::service_fn(move |_: Request<String>| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        let status = if n.is_multiple_of(2) { 503 } else { 200 };
        async move {
            Ok::<_, std::io::Error>(
                Response::builder()
                    .status(status)
                    .body(String::new())
                    .unwrap(),
            )
        }
    });
    let service = RetryLayer::new(ConstantBackOff::new(Duration::from_millis(1)).unwrap())
        .with_retry_budget(budget.clone())
        .layer(flaky);
    // A floor of 10 retries over the window: 30 requests retried, all refunded.
    for _ in 0..30 {
        let res = service
            .clone()
            .oneshot(Request::get("/").body(String::new()).unwrap())
            .await;
        assert_eq!(res.unwrap().status(), 200);
    }
    assert_eq!(budget.available(), 10);
}

#[tokio::test(start_paused = true)]
async fn the_throttle_stops_retries_after_a_few_failures_in_a_row() {
    // 10 tokens, 0.1 per success: retries only while more than 5 tokens are left.
    let throttle = RetryThrottle::new(10, 0.1).unwrap();
    let layer = layer(None).with_retry_throttle(throttle.clone());
    // Request 1: three attempts (10 → 7 tokens); request 2: two (7 → 5, then no retry);
    // the other 48: one each.
    assert_eq!(run(layer.clone(), 50).await, 3 + 2 + 48);
    assert_eq!(throttle.tokens(), 0.0);
}

#[tokio::test(start_paused = true)]
async fn successes_refill_the_throttle_and_retries_resume() {
    let throttle = RetryThrottle::new(10, 0.1).unwrap();
    for _ in 0..10 {
        throttle.record(ThrottleOutcome::RetryableFailure);
    }
    let ok = tower::service_fn(|_req: Request<String>| async {
        Ok::<_, std::io::Error>(Response::new(String::new()))
    });
    let service = layer(None).with_retry_throttle(throttle.clone()).layer(ok);
    // 61 successes: 6.1 tokens.
    for _ in 0..61 {
        service
            .clone()
            .oneshot(Request::get("/").body(String::new()).unwrap())
            .await
            .unwrap();
    }
    assert!(throttle.allows_retry(), "tokens = {}", throttle.tokens());
    // Retries flow again: the first failure leaves 5.1 tokens, enough for one retry,
    // whose failure leaves 4.1: throttled.
    let attempts = Arc::new(AtomicU32::new(0));
    let failing = layer(None)
        .with_retry_throttle(throttle)
        .layer(outage(attempts.clone()));
    let res = failing
        .oneshot(Request::get("/").body(String::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(res.status(), 503);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(
        res.extensions().get::<RetryStats>().unwrap().gave_up,
        Some(GiveUp::Throttled)
    );
}

/// A rate limiter: answers 429 with `retry_after` to the first attempt of each request,
/// then 200; counts the attempts.
fn limiter(
    attempts: Arc<AtomicU32>,
    retry_after: &'static str,
) -> impl Service<
    Request<String>,
    Response = Response<String>,
    Error = std::io::Error,
    Future = impl Send,
> + Clone {
    tower::service_fn(move |req: Request<String>| {
        attempts.fetch_add(1, Ordering::SeqCst);
        let retried = req
            .extensions()
            .get::<tower_backoff::pacing::PacingDeadline>()
            .is_some();
        async move {
            let res = if retried {
                Response::builder().status(200)
            } else {
                Response::builder()
                    .status(429)
                    .header("retry-after", retry_after)
            };
            Ok::<_, std::io::Error>(res.body(String::new()).unwrap())
        }
    })
}

#[tokio::test(start_paused = true)]
async fn retries_a_rate_limiter_scheduled_do_not_spend_the_budget() {
    // A budget with nothing in it: no blind retry is allowed.
    let spent = || RetryBudget::new(Duration::from_secs(10), 0, 0.0).unwrap();
    let attempts = Arc::new(AtomicU32::new(0));
    let client = layer(Some(spent())).layer(limiter(attempts.clone(), "1"));
    for _ in 0..20 {
        let res = client
            .clone()
            .oneshot(Request::new(String::new()))
            .await
            .unwrap();
        assert_eq!(
            res.status(),
            200,
            "the server said when: the retry went ahead"
        );
    }
    assert_eq!(attempts.load(Ordering::SeqCst), 40);

    // "Retry-After: 0" (what a limiter that rounds down says under a second) schedules
    // the retry too: it goes ahead on a spent budget.
    let attempts = Arc::new(AtomicU32::new(0));
    let client = layer(Some(spent())).layer(limiter(attempts.clone(), "0"));
    let res = client.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn retry_after_zero_leaves_the_delay_to_the_backoff() {
    let attempts = Arc::new(AtomicU32::new(0));
    let start = tokio::time::Instant::now();
    let res = layer(None)
        .layer(limiter(attempts.clone(), "0"))
        .oneshot(Request::new(String::new()))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    // The constant backoff's 10 ms, not an immediate retry.
    assert_eq!(start.elapsed(), Duration::from_millis(10));
}

/// A server that answers 200 at once, or (`delay`) after a while.
fn healthy(
    delay: Option<Duration>,
) -> impl Service<Request<String>, Response = Response<String>, Error = std::io::Error> + Clone {
    tower::service_fn(move |_req: Request<String>| async move {
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        Ok::<_, std::io::Error>(Response::new(String::new()))
    })
}

// Every request funds the budget once, whether its response is there at once (no clock
// is read for it) or has to be waited for, and whether or not it could be retried.
#[tokio::test(start_paused = true)]
async fn every_request_funds_the_budget_once() {
    for delay in [None, Some(Duration::from_millis(5))] {
        let budget = RetryBudget::new(Duration::from_secs(10), 0, 0.5).unwrap();
        let mut svc = layer(Some(budget.clone())).layer(healthy(delay));
        for method in ["GET", "GET", "POST", "POST"] {
            let req = Request::builder()
                .method(method)
                .body(String::new())
                .unwrap();
            svc.ready().await.unwrap().call(req).await.unwrap();
        }
        assert_eq!(budget.available(), 2, "delay {delay:?}");
    }
}

async fn send_gets<S>(svc: &mut S, n: usize)
where
    S: Service<Request<String>>,
    S::Error: std::fmt::Debug,
{
    for _ in 0..n {
        svc.ready()
            .await
            .unwrap()
            .call(Request::new(String::new()))
            .await
            .unwrap();
    }
}

// The time of a response that is there at once is the latest the budget has seen. After
// a long quiet spell with no clock read, such deposits may land in a window that has
// already passed: they are lost, never counted twice or kept too long.
#[tokio::test(start_paused = true)]
async fn a_quiet_budget_errs_towards_fewer_retries() {
    let budget = RetryBudget::new(Duration::from_secs(1), 0, 0.5).unwrap();
    let mut svc = layer(Some(budget.clone())).layer(healthy(None));
    tokio::time::advance(Duration::from_secs(5)).await;
    send_gets(&mut svc, 4).await;
    assert_eq!(budget.available(), 0, "deposits filed under a past window");
    // `available` read the clock: from now on, deposits are filed in the current window.
    send_gets(&mut svc, 4).await;
    assert_eq!(budget.available(), 2);
    // A second later they have left the window.
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(budget.available(), 0);
}

/// A6 counts every outcome, not only those of requests that may be retried: failures of
/// requests on a route that disables retries drain the throttle too, and their successes
/// refill it.
#[tokio::test(start_paused = true)]
async fn the_throttle_hears_requests_that_are_never_retried() {
    let throttle = RetryThrottle::new(10, 0.1).unwrap();
    let once = RetrySettings::new().with_max_attempts(1).unwrap();
    let layer = RetryLayer::new(ConstantBackOff::new(Duration::from_millis(1)).unwrap())
        .with_retry_throttle(throttle.clone());
    let unavailable = tower::service_fn(|_req: Request<String>| async {
        let res = Response::builder().status(503).body(String::new()).unwrap();
        Ok::<_, std::io::Error>(res)
    });
    let service = layer.layer(unavailable);
    for _ in 0..6 {
        let mut req = Request::get("/").body(String::new()).unwrap();
        req.extensions_mut().insert(once.clone());
        let res = service.clone().oneshot(req).await.unwrap();
        assert_eq!(res.status(), 503);
    }
    assert_eq!(throttle.tokens(), 4.0);
    // So a retryable request is no longer retried.
    let res = service
        .clone()
        .oneshot(Request::get("/").body(String::new()).unwrap())
        .await
        .unwrap();
    let stats = res.extensions().get::<RetryStats>().unwrap();
    assert_eq!(stats.gave_up, Some(GiveUp::Throttled));
    // An error of a request never retried counts too.
    let refused = tower::service_fn(|_req: Request<String>| async {
        Err::<Response<String>, _>(std::io::Error::from(std::io::ErrorKind::ConnectionReset))
    });
    let service = RetryLayer::new(ConstantBackOff::new(Duration::from_millis(1)).unwrap())
        .with_retry_throttle(throttle.clone())
        .layer(refused);
    let mut req = Request::get("/").body(String::new()).unwrap();
    req.extensions_mut().insert(once);
    service.oneshot(req).await.unwrap_err();
    assert_eq!(throttle.tokens(), 2.0);
}
