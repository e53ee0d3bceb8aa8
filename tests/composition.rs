//! The composition matrix: the README's stacks under tower's own middlewares, placed below
//! and above, on virtual time. Every request must end by its deadline, and the server must
//! see each request the right number of times: a GET twice (a 503, then its retry), a POST
//! once (a 503 it may have processed is not resent).

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower::limit::{ConcurrencyLimitLayer, RateLimitLayer};
use tower::util::BoxCloneService;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use tower_backoff::classify::GrpcClassifier;
use tower_backoff::layer::LastResponse;
use tower_backoff::{ConstantBackOff, GiveUp, PacingError, PacingLayer, RetryLayer, RetrySettings};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Svc<B> = BoxCloneService<Request<B>, Response<String>, BoxError>;

/// How many times the server saw each request, by its `x-id`.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<HashMap<String, usize>>>);

impl Seen {
    fn of(&self, id: &str) -> usize {
        self.0.lock().unwrap().get(id).copied().unwrap_or(0)
    }
}

/// The server: reads the body, answers 503 to the first attempt of each request and 200
/// to the others, 10 ms after it arrived (10 s with an `x-slow` header). A gRPC call (one
/// with a `grpc-timeout`) gets `UNAVAILABLE`, then `OK`.
fn server<B>(seen: &Seen) -> Svc<B>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let seen = seen.clone();
    BoxCloneService::new(tower::service_fn(move |req: Request<B>| {
        let seen = seen.clone();
        async move {
            let id = req.headers()["x-id"].to_str().unwrap().to_owned();
            let slow = req.headers().contains_key("x-slow");
            let grpc = req.headers().contains_key("grpc-timeout");
            req.into_body().collect().await.map_err(Into::into)?;
            let delay = if slow { 10_000 } else { 10 };
            tokio::time::sleep(Duration::from_millis(delay)).await;
            let count = {
                let mut seen = seen.0.lock().unwrap();
                let count = seen.entry(id).or_default();
                *count += 1;
                *count
            };
            let res = if grpc {
                // A Trailers-Only answer: UNAVAILABLE, then OK.
                let code = if count == 1 { "14" } else { "0" };
                Response::builder().header("grpc-status", code)
            } else {
                Response::builder().status(if count == 1 { 503 } else { 200 })
            };
            Ok::<_, BoxError>(res.body(String::new())?)
        }
    }))
}

/// A tower middleware of the matrix.
#[derive(Debug, Clone, Copy)]
enum Middleware {
    ConcurrencyLimit,
    Buffer,
    /// tower's `RateLimit` is not `Clone`: users put it behind a `Buffer`.
    RateLimit,
    Timeout,
    /// Sheds what a `ConcurrencyLimit` below it cannot take now.
    LoadShed,
}

const MIDDLEWARES: [Middleware; 5] = [
    Middleware::ConcurrencyLimit,
    Middleware::Buffer,
    Middleware::RateLimit,
    Middleware::Timeout,
    Middleware::LoadShed,
];

fn wrap<B: Send + 'static>(middleware: Middleware, service: Svc<B>) -> Svc<B> {
    let limit = ConcurrencyLimitLayer::new(2);
    match middleware {
        Middleware::ConcurrencyLimit => BoxCloneService::new(limit.layer(service)),
        Middleware::Buffer => {
            BoxCloneService::new(ServiceBuilder::new().buffer(2).service(service))
        }
        Middleware::RateLimit => BoxCloneService::new(
            ServiceBuilder::new()
                .buffer(2)
                .layer(RateLimitLayer::new(10, Duration::from_secs(1)))
                .service(service),
        ),
        Middleware::Timeout => BoxCloneService::new(
            ServiceBuilder::new()
                .timeout(Duration::from_secs(60))
                .service(service),
        ),
        Middleware::LoadShed => BoxCloneService::new(
            ServiceBuilder::new()
                .load_shed()
                .layer(limit)
                .service(service),
        ),
    }
}

/// The README's stacks.
#[derive(Debug, Clone, Copy)]
enum Stack {
    Retry,
    RetryOverPacing,
    ReplayBodies,
    /// The gRPC preset: `pkg.Svc/Get` declared retryable, `pkg.Svc/Charge` not.
    Grpc,
}

const STACKS: [Stack; 4] = [
    Stack::Retry,
    Stack::RetryOverPacing,
    Stack::ReplayBodies,
    Stack::Grpc,
];

fn retry() -> RetryLayer<ConstantBackOff> {
    RetryLayer::new(ConstantBackOff::new(Duration::from_millis(100)).unwrap())
}

fn under<B: Send + 'static>(below: bool, middleware: Middleware, service: Svc<B>) -> Svc<B> {
    if below {
        wrap(middleware, service)
    } else {
        service
    }
}

/// `stack` over the server, with `middleware` below it (`below`) or above it.
fn client(stack: Stack, middleware: Middleware, below: bool, seen: &Seen) -> Svc<Full<Bytes>> {
    let top: Svc<Full<Bytes>> = match stack {
        Stack::Retry => BoxCloneService::new(
            retry()
                .layer(under(below, middleware, server(seen)))
                .map_err(BoxError::from),
        ),
        Stack::RetryOverPacing => {
            // Ten requests a second: a burst of them queues in pacing.
            let pacing = PacingLayer::builder()
                .with_known_rate("api.test", 10, Duration::from_secs(1))
                .build()
                .unwrap();
            let paced = BoxCloneService::new(pacing.layer(under(below, middleware, server(seen))));
            BoxCloneService::new(retry().layer(paced).map_err(BoxError::from))
        }
        Stack::ReplayBodies => BoxCloneService::new(
            retry()
                .replay_bodies(64 * 1024)
                .layer(under(below, middleware, server(seen)))
                .map_err(BoxError::from),
        ),
        Stack::Grpc => {
            let methods = GrpcClassifier::new().with_retryable_method("pkg.Svc", "Get");
            let layer = RetryLayer::grpc(ConstantBackOff::new(Duration::from_millis(100)).unwrap())
                .with_classifier(methods.unwrap())
                .replay_bodies(64 * 1024);
            let inner = under(below, middleware, server(seen));
            BoxCloneService::new(layer.layer(inner).map_err(BoxError::from))
        }
    };
    if below { top } else { wrap(middleware, top) }
}

fn request(method: Method, id: &str) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri("http://api.test/orders")
        .header("x-id", id)
        .body(Full::new(Bytes::from_static(b"{\"amount\":1}")))
        .unwrap()
}

/// A gRPC call of `pkg.Svc`: `Get` when `retryable`, else `Charge`.
fn call(retryable: bool, id: &str) -> Request<Full<Bytes>> {
    let method = if retryable { "Get" } else { "Charge" };
    Request::builder()
        .method(Method::POST)
        .uri(format!("http://api.test/pkg.Svc/{method}"))
        .header("x-id", id)
        .header("content-type", "application/grpc")
        .header("grpc-timeout", "20S")
        .body(Full::new(Bytes::from_static(b"\0\0\0\0\0")))
        .unwrap()
}

/// What a response says: its gRPC status if it has one, else its HTTP status.
fn said(res: &Response<String>) -> String {
    match res.headers().get("grpc-status") {
        Some(code) => format!("grpc {}", code.to_str().unwrap()),
        None => res.status().as_str().to_owned(),
    }
}

/// Sends three GETs and three POSTs at once (for gRPC, three calls of a retryable method
/// and three of another); checks each ended in time, and what the server saw of it.
/// `shed`: attempts may be turned away before the server.
async fn check(stack: Stack, middleware: Middleware, below: bool) {
    let seen = Seen::default();
    let client = client(stack, middleware, below, &seen);
    let case = format!(
        "{stack:?} with {middleware:?} {}",
        if below { "below" } else { "above" }
    );
    let shed = matches!(middleware, Middleware::LoadShed);
    let tasks: Vec<_> = (0..6)
        .map(|i| {
            let method = if i % 2 == 0 {
                Method::GET
            } else {
                Method::POST
            };
            let request = match stack {
                Stack::Grpc => call(method == Method::GET, &i.to_string()),
                _ => request(method.clone(), &i.to_string()),
            };
            let call = client.clone().oneshot(request);
            // The retry layer's own deadline is 30 s from the first attempt.
            let call = tokio::time::timeout(Duration::from_secs(31), call);
            (i, method, tokio::spawn(call))
        })
        .collect();
    for (i, method, task) in tasks {
        let id = i.to_string();
        let result = task
            .await
            .unwrap()
            .unwrap_or_else(|_| panic!("{case}: request {id} hangs past its deadline"));
        let seen = seen.of(&id);
        let (retried, refused) = match stack {
            Stack::Grpc => ("grpc 0", "grpc 14"),
            _ => ("200", "503"),
        };
        match (method, shed) {
            (Method::GET, false) => {
                assert_eq!(said(&result.unwrap()), retried, "{case}: {id}");
                assert_eq!(seen, 2, "{case}: GET {id}");
            }
            (_, false) => {
                assert_eq!(said(&result.unwrap()), refused, "{case}: {id}");
                assert_eq!(seen, 1, "{case}: POST {id}");
            }
            (Method::GET, true) => assert!(seen <= 3, "{case}: GET {id} seen {seen} times"),
            (_, true) => assert!(seen <= 1, "{case}: POST {id} seen {seen} times"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn every_stack_ends_in_time_under_every_middleware_below_it() {
    for stack in STACKS {
        for middleware in MIDDLEWARES {
            check(stack, middleware, true).await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn every_stack_ends_in_time_under_every_middleware_above_it() {
    for stack in STACKS {
        for middleware in MIDDLEWARES {
            check(stack, middleware, false).await;
        }
    }
}

/// The case of the report: three requests paced at 10/s behind `ConcurrencyLimit(2)`.
#[tokio::test(start_paused = true)]
async fn paced_requests_behind_a_concurrency_limit_do_not_hang() {
    let seen = Seen::default();
    let client = client(
        Stack::RetryOverPacing,
        Middleware::ConcurrencyLimit,
        true,
        &seen,
    );
    let start = tokio::time::Instant::now();
    let tasks: Vec<_> = (0..3)
        .map(|i| tokio::spawn(client.clone().oneshot(request(Method::GET, &i.to_string()))))
        .collect();
    for task in tasks {
        let result = tokio::time::timeout(Duration::from_secs(31), task).await;
        let response = result.expect("no hang").unwrap().unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    // Six sends at ten a second.
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}

/// Pacing's wait for the inner service's readiness ends at its max wait: here both
/// permits are held by slow requests when the third one's turn comes.
#[tokio::test(start_paused = true)]
async fn pacing_never_waits_past_its_max_wait_for_a_service_that_is_not_ready() {
    let pacing = PacingLayer::builder()
        .with_known_rate("api.test", 1, Duration::from_secs(1))
        .with_max_wait(Duration::from_secs(3))
        .build()
        .unwrap();
    let seen = Seen::default();
    let mut client = pacing.layer(ConcurrencyLimitLayer::new(2).layer(server(&seen)));
    let start = tokio::time::Instant::now();
    let mut calls = Vec::new();
    for id in ["slow 1", "slow 2", "third"] {
        let mut request = request(Method::GET, id);
        if id.starts_with("slow") {
            request
                .headers_mut()
                .insert("x-slow", "10".parse().unwrap());
        }
        calls.push(tokio::spawn(client.ready().await.unwrap().call(request)));
    }
    let third = calls.pop().unwrap().await.unwrap();
    let err = third.map(|r| (r, start.elapsed())).unwrap_err();
    let err = err.downcast_ref::<PacingError>().expect("a pacing error");
    assert!(matches!(err, PacingError::WaitTooLong { .. }), "{err:?}");
    assert_eq!(start.elapsed(), Duration::from_secs(3));
    assert_eq!(seen.of("third"), 0);
    for slow in calls {
        assert!(slow.await.unwrap().is_ok());
    }
}

/// An attempt's timeout counts from its send: time queued in pacing is not the server's.
#[tokio::test(start_paused = true)]
async fn an_attempt_timeout_does_not_count_time_queued_in_pacing() {
    let pacing = PacingLayer::builder()
        .with_known_rate("api.test", 1, Duration::from_secs(1))
        .build()
        .unwrap();
    let settings = RetrySettings::new()
        .with_attempt_timeout(Duration::from_millis(500))
        .unwrap()
        .with_max_attempts(1)
        .unwrap();
    let seen = Seen::default();
    let client = retry()
        .with_settings(settings)
        .layer(pacing.layer(server(&seen)));
    let start = tokio::time::Instant::now();
    // The second waits a second for its turn, then the server answers in 10 ms.
    let tasks: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|id| tokio::spawn(client.clone().oneshot(request(Method::GET, id))))
        .collect();
    for task in tasks {
        let response = task.await.unwrap().expect("answered within its timeout");
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    // Queued for its turn a second after the first, longer than its attempt timeout.
    let elapsed = start.elapsed();
    assert!(elapsed > Duration::from_secs(1), "{elapsed:?}");
    assert_eq!((seen.of("a"), seen.of("b")), (1, 1));
}

/// A service that fails as it is readied again after its first call (a closed pool).
#[derive(Clone)]
struct ClosesAfterOneCall {
    inner: Svc<Full<Bytes>>,
    called: Arc<Mutex<bool>>,
}

impl Service<Request<Full<Bytes>>> for ClosesAfterOneCall {
    type Response = Response<String>;
    type Error = BoxError;
    type Future = <Svc<Full<Bytes>> as Service<Request<Full<Bytes>>>>::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        if *self.called.lock().unwrap() {
            return std::task::Poll::Ready(Err("pool closed".into()));
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Full<Bytes>>) -> Self::Future {
        *self.called.lock().unwrap() = true;
        self.inner.call(request)
    }
}

/// When the inner service fails as a retry is about to go, the caller gets the head of the
/// last response, and the hooks and stats say the request was given up on.
#[tokio::test(start_paused = true)]
async fn a_service_that_fails_to_get_ready_for_a_retry_returns_the_last_response() {
    let seen = Seen::default();
    let gave_up = Arc::new(Mutex::new(Vec::new()));
    let log = gave_up.clone();
    let inner = ClosesAfterOneCall {
        inner: server(&seen),
        called: Arc::default(),
    };
    let client = retry()
        .on_give_up(move |event: &tower_backoff::GiveUpEvent<'_>| {
            log.lock().unwrap().push(event.why());
        })
        .layer(inner);
    let err = client.oneshot(request(Method::GET, "a")).await.unwrap_err();
    assert_eq!(err.stats().gave_up, Some(GiveUp::ServiceNotReady));
    let last = err.into_inner().downcast::<LastResponse>().unwrap();
    assert_eq!(last.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(*gave_up.lock().unwrap(), [GiveUp::ServiceNotReady]);
    assert_eq!(seen.of("a"), 1);
}
