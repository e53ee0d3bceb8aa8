//! The decision table of `RetryLayer`, row by row, and the rules around it, on virtual time.

use http::{HeaderValue, Method, Request, Response, StatusCode, Version};
use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tower::retry::Policy;
use tower::{Layer, Service, ServiceExt};
use tower_backoff::body::ReplayGuard;
use tower_backoff::classify::HttpClassifier;
use tower_backoff::classify::{ErrorClass, IDEMPOTENCY_KEY, StatusSet, default_error_class};
use tower_backoff::limits::{LimitReached, Limits};
use tower_backoff::{
    BackOff, GiveUp, ReplayBody, RetryError, RetryEvent, RetryLayer, RetryReason, RetrySettings,
    RetryStats, Routes,
};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

/// Waits `step`, `2 * step`, `3 * step`…, and gives up after `limit` delays.
#[derive(Clone, Debug)]
struct Steps {
    n: u32,
    step: Duration,
    limit: u32,
}

impl Steps {
    fn new() -> Self {
        Self {
            n: 0,
            step: 100 * MS,
            limit: u32::MAX,
        }
    }
}

impl BackOff for Steps {
    fn next_backoff(&mut self) -> Option<Duration> {
        self.n += 1;
        (self.n <= self.limit).then(|| self.step * self.n)
    }
    fn reset(&mut self) {
        self.n = 0;
    }
}

/// What the test server answers, in order.
#[derive(Clone, Copy)]
enum Reply {
    Status(u16),
    WithHeader(u16, &'static str, &'static [u8]),
    Error(io::ErrorKind),
    /// Takes this long, then answers the status.
    Slow(Duration, u16),
}

use Reply::*;

/// A scripted service: records when each attempt arrived, answers the next reply
/// (200 once the script is over).
#[derive(Clone)]
struct Script {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    arrivals: Arc<Mutex<Vec<(Duration, Method)>>>,
    t0: Instant,
}

impl Script {
    fn new(replies: &[Reply]) -> Self {
        Self {
            replies: Arc::new(Mutex::new(replies.iter().cloned().collect())),
            arrivals: Arc::default(),
            t0: Instant::now(),
        }
    }

    fn arrivals(&self) -> Vec<Duration> {
        self.arrivals.lock().unwrap().iter().map(|a| a.0).collect()
    }

    fn service(
        &self,
    ) -> impl tower::Service<
        Request<String>,
        Response = Response<String>,
        Error = io::Error,
        Future = impl Send,
    > + Clone {
        let this = self.clone();
        tower::service_fn(move |req: Request<String>| {
            let this = this.clone();
            async move {
                this.arrivals
                    .lock()
                    .unwrap()
                    .push((this.t0.elapsed(), req.method().clone()));
                let reply = this
                    .replies
                    .lock()
                    .unwrap()
                    .pop_front()
                    .unwrap_or(Status(200));
                let status = |code| {
                    Response::builder()
                        .status(code)
                        .body(format!("body {code}"))
                        .unwrap()
                };
                match reply {
                    Status(code) => Ok(status(code)),
                    WithHeader(code, name, value) => {
                        let mut res = status(code);
                        res.headers_mut()
                            .insert(name, HeaderValue::from_bytes(value).unwrap());
                        Ok(res)
                    }
                    Error(kind) => Err(io::Error::new(kind, "scripted")),
                    Slow(d, code) => {
                        tokio::time::sleep(d).await;
                        Ok(status(code))
                    }
                }
            }
        })
    }
}

fn req(method: Method, path: &str) -> Request<String> {
    Request::builder()
        .method(method)
        .uri(path)
        .body("payload".to_owned())
        .unwrap()
}

fn get() -> Request<String> {
    req(Method::GET, "/")
}

fn post() -> Request<String> {
    req(Method::POST, "/")
}

/// Sends `request` through `layer` to a server answering `replies`.
async fn run(
    layer: RetryLayer<Steps>,
    request: Request<String>,
    replies: &[Reply],
) -> (Result<Response<String>, RetryError>, Vec<Duration>) {
    let script = Script::new(replies);
    let result = layer.layer(script.service()).oneshot(request).await;
    (result, script.arrivals())
}

/// The default settings, but server delays waited exactly (no spread), so that the
/// tables below can name every instant.
fn exact() -> RetrySettings {
    RetrySettings::new().with_retry_after_jitter(0.0).unwrap()
}

fn layer() -> RetryLayer<Steps> {
    RetryLayer::new(Steps::new()).settings(exact())
}

fn attempts_layer(n: u32) -> RetryLayer<Steps> {
    layer().settings(exact().with_max_attempts(n).unwrap())
}

/// The kind of the io::Error a request finally failed with.
fn io_kind(err: RetryError) -> io::ErrorKind {
    err.into_inner().downcast::<io::Error>().unwrap().kind()
}

/// The guard of a body that can never be replayed.
fn capped_guard() -> ReplayGuard {
    ReplayBody::unreplayable(String::new()).guard()
}

/// The stats of a final response: a response that succeeded at its first attempt carries
/// none, which means one attempt and nothing waited.
fn stats(res: &Response<String>) -> RetryStats {
    res.extensions()
        .get::<RetryStats>()
        .copied()
        .unwrap_or(RetryStats {
            attempts: 1,
            ..RetryStats::default()
        })
}

// ---- the rows of the decision table ----

#[tokio::test(start_paused = true)]
async fn row_429_waits_for_retry_after_for_every_method() {
    for request in [get(), post(), req(Method::PATCH, "/")] {
        let (res, arrivals) = run(layer(), request, &[WithHeader(429, "retry-after", b"2")]).await;
        let res = res.unwrap();
        assert_eq!(res.status(), 200);
        assert_eq!(arrivals, [Duration::ZERO, 2 * SEC]);
        assert_eq!(
            stats(&res),
            RetryStats {
                attempts: 2,
                waited: 2 * SEC,
                gave_up: None,
            }
        );
    }
}

#[tokio::test(start_paused = true)]
async fn row_429_without_retry_after_waits_for_the_backoff() {
    let (res, arrivals) = run(layer(), post(), &[Status(429), Status(429)]).await;
    assert_eq!(res.unwrap().status(), 200);
    assert_eq!(arrivals, [Duration::ZERO, 100 * MS, 300 * MS]);
}

#[tokio::test(start_paused = true)]
async fn row_503_waits_for_retry_after_even_when_shorter_than_the_backoff() {
    let slow = Steps {
        step: 5 * SEC,
        ..Steps::new()
    };
    let (res, arrivals) = run(
        RetryLayer::new(slow).settings(exact()),
        get(),
        &[WithHeader(503, "retry-after", b"1")],
    )
    .await;
    assert_eq!(res.unwrap().status(), 200);
    assert_eq!(arrivals, [Duration::ZERO, SEC]);
}

#[tokio::test(start_paused = true)]
async fn row_503_without_retry_after_waits_for_the_backoff() {
    let (res, arrivals) = run(layer(), get(), &[Status(503)]).await;
    assert_eq!(res.unwrap().status(), 200);
    assert_eq!(arrivals, [Duration::ZERO, 100 * MS]);
}

#[tokio::test(start_paused = true)]
async fn row_503_for_a_non_idempotent_request_is_returned_as_is() {
    for method in [Method::POST, Method::PATCH, Method::CONNECT] {
        let (res, arrivals) = run(
            layer(),
            req(method, "/"),
            &[WithHeader(503, "retry-after", b"1")],
        )
        .await;
        let res = res.unwrap();
        assert_eq!(res.status(), 503);
        assert_eq!(arrivals.len(), 1);
        assert_eq!(
            stats(&res),
            RetryStats {
                attempts: 1,
                waited: Duration::ZERO,
                gave_up: Some(GiveUp::NotIdempotent),
            }
        );
    }
}

#[tokio::test(start_paused = true)]
async fn row_502_504_408_are_retried_after_the_backoff_for_idempotent_requests() {
    for code in [502, 504, 408] {
        let (res, arrivals) = run(layer(), get(), &[Status(code), Status(code)]).await;
        assert_eq!(res.unwrap().status(), 200, "{code}");
        assert_eq!(arrivals, [Duration::ZERO, 100 * MS, 300 * MS], "{code}");

        let (res, arrivals) = run(layer(), post(), &[Status(code)]).await;
        assert_eq!(res.unwrap().status(), code, "POST {code}");
        assert_eq!(arrivals.len(), 1, "POST {code}");
    }
}

#[tokio::test(start_paused = true)]
async fn row_502_retry_after_is_a_floor_under_the_backoff() {
    // Longer than the backoff: the server's value wins.
    let (_, arrivals) = run(layer(), get(), &[WithHeader(502, "retry-after", b"1")]).await;
    assert_eq!(arrivals, [Duration::ZERO, SEC]);
    // Shorter than the backoff: the backoff wins (never sooner than asked, but no hurry).
    let (_, arrivals) = run(layer(), get(), &[WithHeader(502, "retry-after", b"0")]).await;
    assert_eq!(arrivals, [Duration::ZERO, 100 * MS]);
}

#[tokio::test(start_paused = true)]
async fn row_other_statuses_are_returned_as_is() {
    for code in [200, 201, 301, 400, 401, 404, 409, 500, 501, 505] {
        let (res, arrivals) = run(layer(), get(), &[Status(code)]).await;
        let res = res.unwrap();
        assert_eq!(res.status(), code);
        assert_eq!(res.body(), &format!("body {code}"));
        assert_eq!(arrivals.len(), 1, "{code}");
        assert_eq!(stats(&res).attempts, 1);
    }
}

#[tokio::test(start_paused = true)]
async fn row_connect_failure_is_retried_for_every_method() {
    for request in [get(), post(), req(Method::PATCH, "/")] {
        let (res, arrivals) =
            run(layer(), request, &[Error(io::ErrorKind::ConnectionRefused)]).await;
        assert_eq!(res.unwrap().status(), 200);
        assert_eq!(arrivals, [Duration::ZERO, 100 * MS]);
    }
}

#[tokio::test(start_paused = true)]
async fn row_other_transport_errors_are_retried_only_for_idempotent_requests() {
    for kind in [
        io::ErrorKind::ConnectionReset,
        io::ErrorKind::TimedOut,
        io::ErrorKind::UnexpectedEof,
    ] {
        let (res, arrivals) = run(layer(), get(), &[Error(kind)]).await;
        assert_eq!(res.unwrap().status(), 200);
        assert_eq!(arrivals.len(), 2);

        let (res, arrivals) = run(layer(), post(), &[Error(kind)]).await;
        assert_eq!(io_kind(res.unwrap_err()), kind);
        assert_eq!(
            arrivals.len(),
            1,
            "a POST that may have arrived is sent once"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn row_fatal_errors_are_never_retried() {
    let fatal = layer().classifier(HttpClassifier::new().with_error_class(|e| {
        if e.to_string() == "scripted" {
            ErrorClass::Fatal
        } else {
            default_error_class(e)
        }
    }));
    let (res, arrivals) = run(fatal, get(), &[Error(io::ErrorKind::ConnectionRefused)]).await;
    assert!(res.is_err());
    assert_eq!(arrivals.len(), 1);
}

// ---- methods ----

#[tokio::test(start_paused = true)]
async fn every_idempotent_method_is_retried_on_503() {
    for method in ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"] {
        let (res, arrivals) = run(layer(), req(method.parse().unwrap(), "/"), &[Status(503)]).await;
        assert_eq!(res.unwrap().status(), 200, "{method}");
        assert_eq!(arrivals.len(), 2, "{method}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_idempotency_key_makes_a_post_retryable() {
    let mut request = post();
    request
        .headers_mut()
        .insert(IDEMPOTENCY_KEY, HeaderValue::from_static("k-1"));
    let (res, arrivals) = run(
        layer(),
        request,
        &[Status(503), Error(io::ErrorKind::ConnectionReset)],
    )
    .await;
    assert_eq!(res.unwrap().status(), 200);
    assert_eq!(arrivals.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn retry_non_idempotent_gives_posts_the_idempotent_column() {
    let all = layer().settings(exact().with_retry_non_idempotent(true));
    let (res, arrivals) = run(
        all,
        post(),
        &[Status(503), Error(io::ErrorKind::ConnectionReset)],
    )
    .await;
    assert_eq!(res.unwrap().status(), 200);
    assert_eq!(arrivals.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_boxed_connection_refused_is_retried_but_not_under_an_unknown_wrapper() {
    #[derive(Debug)]
    struct ConnectFailed(io::Error);
    impl std::fmt::Display for ConnectFailed {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("connect failed")
        }
    }
    impl std::error::Error for ConnectFailed {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    let calls = Arc::new(Mutex::new(0));
    let counter = calls.clone();
    let svc = tower::service_fn(move |_: Request<String>| {
        let mut n = counter.lock().unwrap();
        *n += 1;
        let result: Result<Response<String>, tower::BoxError> = if *n == 1 {
            Err(Box::new(io::Error::from(io::ErrorKind::ConnectionRefused)))
        } else if *n == 2 {
            // The wrapper's name proves nothing: the classifier does not know it.
            Err(Box::new(ConnectFailed(
                io::ErrorKind::ConnectionRefused.into(),
            )))
        } else {
            Ok(Response::new(String::new()))
        };
        std::future::ready(result)
    });
    let res = layer().layer(svc).oneshot(post()).await;
    // Retried after the bare refusal, not after the wrapped one.
    assert!(res.unwrap_err().inner().is::<ConnectFailed>());
    assert_eq!(*calls.lock().unwrap(), 2);
}

// ---- configurable statuses ----

#[tokio::test(start_paused = true)]
async fn the_retryable_status_set_is_configurable() {
    let settings = exact()
        .with_status(StatusCode::INTERNAL_SERVER_ERROR)
        .unwrap()
        .without_status(StatusCode::SERVICE_UNAVAILABLE);
    let custom = || layer().settings(settings.clone());
    let (res, arrivals) = run(custom(), get(), &[Status(500)]).await;
    assert_eq!(res.unwrap().status(), 200);
    assert_eq!(arrivals.len(), 2);
    let (res, arrivals) = run(custom(), get(), &[Status(503)]).await;
    assert_eq!(res.unwrap().status(), 503);
    assert_eq!(arrivals.len(), 1);

    let only_errors = layer().settings(exact().with_statuses(StatusSet::EMPTY));
    let (res, _) = run(only_errors, get(), &[Status(429)]).await;
    assert_eq!(res.unwrap().status(), 429);
}

// ---- Retry-After: cap, clamp, malformed, hostile ----

#[tokio::test(start_paused = true)]
async fn retry_after_past_the_cap_gives_up_at_once_with_the_response_unchanged() {
    let t0 = Instant::now();
    let (res, arrivals) = run(layer(), get(), &[WithHeader(503, "retry-after", b"11")]).await;
    let res = res.unwrap();
    assert_eq!(t0.elapsed(), Duration::ZERO, "no sleep just to give up");
    assert_eq!(arrivals.len(), 1);
    assert_eq!(res.status(), 503);
    assert_eq!(res.headers()["retry-after"], "11");
    assert_eq!(res.body(), "body 503");
    assert_eq!(
        stats(&res).gave_up,
        Some(GiveUp::RetryAfterTooLong(11 * SEC))
    );
    // Exactly at the default cap (10 s) is still waited for.
    let (_, arrivals) = run(layer(), get(), &[WithHeader(503, "retry-after", b"10")]).await;
    assert_eq!(arrivals, [Duration::ZERO, 10 * SEC]);
}

#[tokio::test(start_paused = true)]
async fn clamp_waits_for_the_cap_instead_of_giving_up() {
    let clamp = layer().settings(
        exact()
            .with_max_retry_after(3 * SEC)
            .unwrap()
            .with_clamp_retry_after(true),
    );
    let (res, arrivals) = run(clamp, get(), &[WithHeader(429, "retry-after", b"60")]).await;
    assert_eq!(res.unwrap().status(), 200);
    assert_eq!(arrivals, [Duration::ZERO, 3 * SEC]);
}

#[tokio::test(start_paused = true)]
async fn malformed_retry_after_falls_back_to_the_backoff() {
    let malformed: [&[u8]; 7] = [
        b"soon",
        b"-5",
        b"1.5",
        b"",
        b"\xff\xfe",
        b"5 s",
        b"Wed, 99 Foo",
    ];
    for value in malformed {
        let (res, arrivals) = run(layer(), get(), &[WithHeader(503, "retry-after", value)]).await;
        assert_eq!(res.unwrap().status(), 200, "{value:?}");
        assert_eq!(arrivals, [Duration::ZERO, 100 * MS], "{value:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn hostile_retry_after_cannot_stall_the_client() {
    let hostile: [&[u8]; 3] = [
        b"100000000000000000000",
        b"18446744073709551615",
        b"Fri, 31 Dec 9999 23:59:59 GMT",
    ];
    for value in hostile {
        for clamp in [false, true] {
            let settings = exact().with_clamp_retry_after(clamp);
            let t0 = Instant::now();
            let (res, arrivals) = run(
                layer().settings(settings),
                get(),
                &[WithHeader(503, "retry-after", value)],
            )
            .await;
            assert!(res.is_ok());
            assert!(arrivals.len() <= 2);
            assert!(
                t0.elapsed() <= tower_backoff::DEFAULT_MAX_RETRY_AFTER,
                "{value:?} clamp={clamp}: waited {:?}",
                t0.elapsed()
            );
        }
    }
    // Given up on without a wait by default; waited for exactly the cap when clamping.
    let t0 = Instant::now();
    let (res, _) = run(
        layer(),
        get(),
        &[WithHeader(429, "retry-after", hostile[0])],
    )
    .await;
    assert_eq!(res.unwrap().status(), 429);
    assert_eq!(t0.elapsed(), Duration::ZERO);
    let clamp = layer().settings(exact().with_clamp_retry_after(true));
    let (_, arrivals) = run(clamp, get(), &[WithHeader(429, "retry-after", hostile[0])]).await;
    assert_eq!(
        arrivals,
        [Duration::ZERO, tower_backoff::DEFAULT_MAX_RETRY_AFTER]
    );
}

#[tokio::test(start_paused = true)]
async fn a_clamped_hostile_retry_after_still_respects_the_budget() {
    let settings = exact()
        .with_clamp_retry_after(true)
        .with_max_elapsed(5 * SEC)
        .unwrap();
    let t0 = Instant::now();
    let (res, arrivals) = run(
        layer().settings(settings),
        get(),
        &[WithHeader(503, "retry-after", b"100000000000000000000")],
    )
    .await;
    assert_eq!(res.unwrap().status(), 503);
    assert_eq!(arrivals.len(), 1);
    assert_eq!(t0.elapsed(), Duration::ZERO);
}

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
        .settings(settings)
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
        layer().settings(settings),
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
        RetryLayer::new(two).settings(exact().with_max_attempts(10).unwrap()),
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

// ---- routes and per-request settings ----

#[tokio::test(start_paused = true)]
async fn routes_choose_settings_by_method_and_path_prefix() {
    let routes = Routes::new()
        .route(
            Method::POST,
            "/uploads",
            exact().with_retry_non_idempotent(true),
        )
        .unwrap()
        .route_any("/payments", RetrySettings::disabled())
        .unwrap()
        .route_fn(|head| {
            (head.uri().path() == "/slow").then(|| exact().with_max_attempts(5).unwrap())
        });
    let routed = || layer().routes(routes.clone());

    let (_, arrivals) = run(routed(), req(Method::POST, "/uploads/1"), &[Status(503)]).await;
    assert_eq!(arrivals.len(), 2, "POST /uploads is retried");
    let (_, arrivals) = run(routed(), req(Method::POST, "/other"), &[Status(503)]).await;
    assert_eq!(arrivals.len(), 1, "other POSTs use the defaults");
    let (res, arrivals) = run(routed(), req(Method::GET, "/payments/7"), &[Status(503)]).await;
    assert_eq!(arrivals.len(), 1, "payments are never retried");
    assert!(res.unwrap().extensions().get::<RetryStats>().is_none());
    let (_, arrivals) = run(routed(), get(), &[Status(503); 9]).await;
    assert_eq!(arrivals.len(), 3);
    let (_, arrivals) = run(routed(), req(Method::GET, "/slow"), &[Status(503); 9]).await;
    assert_eq!(arrivals.len(), 5, "route_fn settings");
}

#[tokio::test(start_paused = true)]
async fn settings_in_the_request_extensions_override_the_routes() {
    let routes = Routes::new()
        .route_any("/", RetrySettings::disabled())
        .unwrap();
    let mut request = get();
    request
        .extensions_mut()
        .insert(exact().with_max_attempts(4).unwrap());
    let (res, arrivals) = run(layer().routes(routes.clone()), request, &[Status(503); 9]).await;
    assert_eq!(arrivals.len(), 4);
    assert_eq!(stats(&res.unwrap()).attempts, 4);

    let mut request = get();
    request.extensions_mut().insert(RetrySettings::disabled());
    let (_, arrivals) = run(layer(), request, &[Status(503); 9]).await;
    assert_eq!(arrivals.len(), 1);
}

// ---- hook and stats ----

#[tokio::test(start_paused = true)]
async fn the_hook_sees_every_retry() {
    type Seen = (
        u32,
        Duration,
        RetryReason,
        Option<StatusCode>,
        Option<Duration>,
        String,
    );
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let sink = seen.clone();
    let hooked = attempts_layer(5).on_retry(move |e: &RetryEvent<'_>| {
        sink.lock().unwrap().push((
            e.attempt(),
            e.delay(),
            e.reason(),
            e.status(),
            e.retry_after(),
            format!("{} {} {}", e.method(), e.uri(), e.error().is_some()),
        ));
    });
    let (res, _) = run(
        hooked,
        post(),
        &[
            WithHeader(429, "retry-after", b"2"),
            Error(io::ErrorKind::ConnectionRefused),
            Status(429),
        ],
    )
    .await;
    assert_eq!(res.unwrap().status(), 200);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (
                1,
                2 * SEC,
                RetryReason::Status(StatusCode::TOO_MANY_REQUESTS),
                Some(StatusCode::TOO_MANY_REQUESTS),
                Some(2 * SEC),
                "POST / false".to_owned()
            ),
            (
                2,
                200 * MS,
                RetryReason::Connect,
                None,
                None,
                "POST / true".to_owned()
            ),
            (
                3,
                300 * MS,
                RetryReason::Status(StatusCode::TOO_MANY_REQUESTS),
                Some(StatusCode::TOO_MANY_REQUESTS),
                None,
                "POST / false".to_owned()
            ),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn without_stats_the_response_carries_no_extension_but_retries_the_same() {
    let (res, arrivals) = run(layer().without_stats(), get(), &[Status(503)]).await;
    let res = res.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(arrivals, [Duration::ZERO, 100 * MS]);
    assert!(res.extensions().get::<RetryStats>().is_none());
}

#[tokio::test(start_paused = true)]
async fn the_final_response_carries_attempts_and_time_waited() {
    let (res, _) = run(layer(), get(), &[]).await;
    assert_eq!(
        stats(&res.unwrap()),
        RetryStats {
            attempts: 1,
            waited: Duration::ZERO,
            gave_up: None,
        }
    );
    let (res, _) = run(
        layer(),
        get(),
        &[WithHeader(503, "retry-after", b"1"), Slow(SEC, 502)],
    )
    .await;
    // Time inside attempts is not "waited".
    assert_eq!(
        stats(&res.unwrap()),
        RetryStats {
            attempts: 3,
            waited: SEC + 200 * MS,
            gave_up: None,
        }
    );
}

// ---- the policy used directly ----

#[tokio::test(start_paused = true)]
async fn clone_request_copies_the_whole_request() {
    #[derive(Clone, Debug, PartialEq)]
    struct Tag(u8);
    let mut policy = layer().policy();
    let mut original = Request::builder()
        .method(Method::PUT)
        .uri("http://example.com/a?b=c")
        .version(Version::HTTP_2)
        .header("x-one", "1")
        .body("body".to_owned())
        .unwrap();
    original.extensions_mut().insert(Tag(7));
    let copy = <_ as Policy<_, Response<String>, io::Error>>::clone_request(&mut policy, &original)
        .unwrap();
    assert_eq!(copy.method(), Method::PUT);
    assert_eq!(copy.uri(), original.uri());
    assert_eq!(copy.version(), Version::HTTP_2);
    assert_eq!(copy.headers(), original.headers());
    assert_eq!(copy.extensions().get::<Tag>(), Some(&Tag(7)));
    assert_eq!(copy.body(), "body");
}

#[tokio::test(start_paused = true)]
async fn requests_that_can_never_be_retried_are_not_cloned() {
    let mut policy = layer().policy();
    let mut request = get();
    request.extensions_mut().insert(capped_guard());
    assert!(
        <_ as Policy<_, Response<String>, io::Error>>::clone_request(&mut policy, &request)
            .is_none()
    );
    let mut request = get();
    request.extensions_mut().insert(RetrySettings::disabled());
    assert!(
        <_ as Policy<_, Response<String>, io::Error>>::clone_request(&mut policy, &request)
            .is_none()
    );
}

#[tokio::test(start_paused = true)]
async fn a_body_capped_during_the_attempt_is_not_retried() {
    use http_body_util::BodyExt;
    // A streamed body with a 4-byte replay buffer.
    let (mut tx, stream) = http_body_util::channel::Channel::<bytes::Bytes>::new(4);
    let body = ReplayBody::try_new(stream, 4).unwrap();
    let guard = body.guard();
    let mut policy = layer().policy();
    let mut request = get();
    request.extensions_mut().insert(guard.clone());
    let mut copy =
        <_ as Policy<_, Response<String>, io::Error>>::clone_request(&mut policy, &request)
            .unwrap();
    // The attempt sends 6 bytes: the body outgrows its buffer while being sent.
    tx.send_data(bytes::Bytes::from("abcdef")).await.unwrap();
    drop(tx);
    assert_eq!(body.collect().await.unwrap().to_bytes(), "abcdef");
    assert!(guard.is_capped());
    let mut result: Result<Response<String>, io::Error> =
        Ok(Response::builder().status(503).body(String::new()).unwrap());
    assert!(policy.retry(&mut copy, &mut result).is_none());
    assert_eq!(stats(result.as_ref().unwrap()).attempts, 1);
    assert_eq!(
        stats(result.as_ref().unwrap()).gave_up,
        Some(GiveUp::BodyNotReplayable)
    );
}

#[tokio::test(start_paused = true)]
async fn the_policy_plugs_into_towers_own_retry_layer() {
    let script = Script::new(&[Status(503)]);
    let svc = tower::retry::RetryLayer::new(layer().policy()).layer(script.service());
    let res = svc.oneshot(get()).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(script.arrivals(), [Duration::ZERO, 100 * MS]);
}

// ---- invalid configuration ----

#[test]
fn invalid_configuration_is_a_typed_error() {
    let cases = [
        exact().with_max_attempts(0).unwrap_err(),
        exact().with_max_elapsed(Duration::ZERO).unwrap_err(),
        exact().with_max_retry_after(Duration::ZERO).unwrap_err(),
        exact().with_status(StatusCode::OK).unwrap_err(),
        Limits::new(0, SEC).unwrap_err(),
        Routes::new().route_any("no-slash", exact()).unwrap_err(),
    ];
    let fields: Vec<_> = cases
        .iter()
        .map(|e| (e.field(), e.value().to_owned()))
        .collect();
    assert_eq!(
        fields,
        [
            ("max_attempts", "0".to_owned()),
            ("max_elapsed", "0ns".to_owned()),
            ("max_retry_after", "0ns".to_owned()),
            ("retry_status", "200".to_owned()),
            ("max_attempts", "0".to_owned()),
            ("route", "\"no-slash\"".to_owned()),
        ]
    );
}

// ---- tracing ----

thread_local! {
    /// The events seen on this thread while capturing.
    static CAPTURED: std::cell::RefCell<Option<Vec<String>>> = const { std::cell::RefCell::new(None) };
}

/// A global subscriber recording each event's fields as `name=value` text, on the threads
/// that asked for it (a global one, so no other test's callsite caching can hide events).
struct Capture;

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0 += &format!("{}={:?} ", field.name(), value);
    }
}

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        CAPTURED.with(|c| {
            if let Some(events) = c.borrow_mut().as_mut() {
                events.push(fields.0);
            }
        });
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test(start_paused = true)]
async fn each_retry_is_a_tracing_event_with_attempt_delay_reason_and_status() {
    // Only this test installs a global subscriber.
    tracing::subscriber::set_global_default(Capture).unwrap();
    CAPTURED.with(|c| *c.borrow_mut() = Some(Vec::new()));
    let (res, _) = run(
        layer(),
        get(),
        &[
            WithHeader(429, "retry-after", b"2"),
            Error(io::ErrorKind::ConnectionRefused),
        ],
    )
    .await;
    assert_eq!(res.unwrap().status(), 200);
    let events = CAPTURED.with(|c| c.borrow_mut().take().unwrap());
    let retries: Vec<&String> = events
        .iter()
        .filter(|e| e.contains("retrying request"))
        .collect();
    assert_eq!(retries.len(), 2, "{events:?}");
    assert!(
        retries[0].contains(
            "http.request.resend_count=1 http.request.method=GET server.address=\"\" \
             http.response.status_code=429 delay=2s reason=status 429"
        ),
        "{}",
        retries[0]
    );
    assert!(
        retries[1].contains("http.request.resend_count=2 http.request.method=GET"),
        "{}",
        retries[1]
    );
    assert!(
        retries[1].contains("delay=200ms reason=connect error"),
        "{}",
        retries[1]
    );
}

// ---- wall clock and thread safety ----

/// Needs the HTTP-date parser of `retry_after`.
#[tokio::test(start_paused = true)]
async fn http_dates_are_read_against_the_injected_wall_clock() {
    let now = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let date = httpdate::fmt_http_date(now + 5 * SEC);
    let date: &'static [u8] = Box::leak(date.into_bytes().into_boxed_slice());
    let (res, arrivals) = run(
        layer().wall_clock(move || now),
        get(),
        &[WithHeader(503, "retry-after", date)],
    )
    .await;
    assert_eq!(res.unwrap().status(), 200);
    assert_eq!(arrivals, [Duration::ZERO, 5 * SEC]);
}

#[test]
fn the_layer_policy_and_delay_can_cross_threads() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<RetryLayer<Steps>>();
    send_sync::<tower_backoff::RetryPolicy<Steps>>();
    send_sync::<tower_backoff::RetryDelay>();
    send_sync::<RetrySettings>();
    send_sync::<Routes>();
}

// ---- property: no server value escapes the cap and the budget ----

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    #[test]
    fn no_retry_after_escapes_the_cap_or_the_budget(
        secs in proptest::prelude::any::<u64>(),
        raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..32),
        use_raw in proptest::prelude::any::<bool>(),
        code in proptest::sample::select(vec![429u16, 503, 502, 504, 408]),
        clamp in proptest::prelude::any::<bool>(),
        spent_ms in 0u32..6_000,
    ) {
        let value = if use_raw { raw } else { secs.to_string().into_bytes() };
        let Ok(value) = HeaderValue::from_bytes(&value) else { return Ok(()) };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let budget = 5 * SEC;
        let cap = 2 * SEC;
        rt.block_on(async {
            let settings = exact()
                .with_max_elapsed(budget).unwrap()
                .with_max_retry_after(cap).unwrap()
                .with_clamp_retry_after(clamp);
            let mut policy = layer().settings(settings).policy();
            let request = get();
            let mut copy =
                <_ as Policy<_, Response<String>, io::Error>>::clone_request(&mut policy, &request)
                    .unwrap();
            // Time already spent inside the first attempt.
            tokio::time::advance(spent_ms * MS).await;
            let mut res = Response::builder().status(code).body(String::new()).unwrap();
            res.headers_mut().insert("retry-after", value.clone());
            let mut result: Result<_, io::Error> = Ok(res);
            let t0 = Instant::now();
            match policy.retry(&mut copy, &mut result) {
                Some(wait) => {
                    wait.await;
                    let waited = t0.elapsed();
                    // The backoff's first delay is 100 ms; the server's value is capped.
                    proptest::prop_assert!(waited <= cap.max(100 * MS), "waited {waited:?}");
                    proptest::prop_assert!(spent_ms * MS + waited <= budget);
                }
                None => {
                    let res = result.unwrap();
                    proptest::prop_assert_eq!(res.status().as_u16(), code);
                    proptest::prop_assert_eq!(&res.headers()["retry-after"], &value);
                    proptest::prop_assert_eq!(t0.elapsed(), Duration::ZERO);
                }
            }
            Ok(())
        })?;
    }
}
