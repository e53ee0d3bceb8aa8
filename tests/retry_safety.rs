//! What the layer promises when things go wrong around a retry: a body that changes during
//! the wait, a previous attempt that will not let go of the body, no runtime, a herd told
//! the same delay, failures that must still say what happened.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use http_body_util::channel::Channel;
use std::convert::Infallible;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tower::{Layer, ServiceBuilder, ServiceExt};
use tower_backoff::body::DEFAULT_MAX_BYTES;
use tower_backoff::body::ReplayBody;
use tower_backoff::budget::RetryThrottle;
use tower_backoff::classify::GrpcClassifier;
use tower_backoff::grpc::Code;
use tower_backoff::layer::LastResponse;
use tower_backoff::limits::LimitReached;
use tower_backoff::{
    ConstantBackOff, GiveUp, GiveUpEvent, RetryError, RetryEvent, RetryLayer, RetryReason,
    RetrySettings, RetryStats,
};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

type Upload = Channel<Bytes, io::Error>;
type Body = ReplayBody<Upload>;

fn layer() -> RetryLayer<ConstantBackOff> {
    RetryLayer::new(ConstantBackOff::new(100 * MS).unwrap())
}

fn response(status: u16) -> Response<String> {
    Response::builder()
        .status(status)
        .body(format!("attempt answered {status}"))
        .unwrap()
}

/// An upstream that answers its first attempt with 503 at once, leaving the body with a
/// task that reads it to its end (`hold`: or keeps it without reading), and 200 after.
fn upstream(
    hold: bool,
) -> (
    impl tower::Service<
        Request<Body>,
        Response = Response<String>,
        Error = Infallible,
        Future = impl Send,
    > + Clone,
    Arc<Mutex<u32>>,
) {
    let calls = Arc::new(Mutex::new(0));
    let count = calls.clone();
    let svc = tower::service_fn(move |req: Request<Body>| {
        let n = {
            let mut calls = count.lock().unwrap();
            *calls += 1;
            *calls
        };
        let body = req.into_body();
        if n == 1 {
            tokio::spawn(async move {
                if hold {
                    std::future::pending::<()>().await;
                }
                let _ = body.collect().await;
            });
            return std::future::ready(Ok(response(503)));
        }
        std::future::ready(Ok(response(200)))
    });
    (svc, calls)
}

fn put(body: Upload) -> Request<Upload> {
    Request::put("/upload").body(body).unwrap()
}

/// A retry that could not start after its wait: the error carries the head of the last
/// response (503), whose body was dropped to free its connection; its stats.
fn gave_up_after_a_503(err: RetryError) -> RetryStats {
    let stats = err.stats();
    let last = err
        .into_inner()
        .downcast::<LastResponse>()
        .expect("the last response");
    assert_eq!(last.status(), StatusCode::SERVICE_UNAVAILABLE);
    stats
}

#[tokio::test(start_paused = true)]
async fn a_body_that_outgrows_its_buffer_during_the_wait_is_not_resent() {
    let (svc, calls) = upstream(false);
    let client = ServiceBuilder::new()
        .layer(layer().replay_bodies(8))
        .service(svc);
    let (mut tx, body) = Upload::new(4);
    tx.send_data(Bytes::from("1234")).await.unwrap();
    let call = tokio::spawn(client.oneshot(put(body)));
    // The 503 came back and the retry waits 100 ms; meanwhile the upload goes on past
    // the 8-byte buffer.
    tokio::time::sleep(10 * MS).await;
    tx.send_data(Bytes::from("5678-and-more")).await.unwrap();
    drop(tx);
    let err = call.await.unwrap().unwrap_err();
    let stats = gave_up_after_a_503(err);
    assert_eq!(stats.gave_up, Some(GiveUp::BodyNotReplayable));
    assert_eq!(stats.attempts, 1);
    assert_eq!(*calls.lock().unwrap(), 1, "the retry was never sent");
}

#[tokio::test(start_paused = true)]
async fn a_body_that_fails_during_the_wait_is_not_resent() {
    let (svc, calls) = upstream(false);
    let client = ServiceBuilder::new()
        .layer(layer().replay_bodies(DEFAULT_MAX_BYTES))
        .service(svc);
    let (mut tx, body) = Upload::new(4);
    tx.send_data(Bytes::from("part")).await.unwrap();
    let call = tokio::spawn(client.oneshot(put(body)));
    tokio::time::sleep(10 * MS).await;
    tx.abort(io::Error::other("upload broke")); // mid-stream
    let stats = gave_up_after_a_503(call.await.unwrap().unwrap_err());
    assert_eq!(stats.gave_up, Some(GiveUp::BodyNotReplayable));
    assert_eq!(*calls.lock().unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_retry_waits_for_a_held_body_only_until_the_deadline() {
    let (svc, calls) = upstream(true);
    let settings = RetrySettings::new().with_max_elapsed(5 * SEC).unwrap();
    let given_up = Arc::new(Mutex::new(Vec::new()));
    let log = given_up.clone();
    let client = ServiceBuilder::new()
        .layer(
            layer()
                .with_settings(settings)
                .on_give_up(move |e: &GiveUpEvent<'_>| log.lock().unwrap().push(e.why()))
                .replay_bodies(DEFAULT_MAX_BYTES),
        )
        .service(svc);
    let (_tx, body) = Upload::new(4);
    let start = Instant::now();
    let err = client.oneshot(put(body)).await.unwrap_err();
    // The previous attempt never lets go of the body: given up at the deadline, with the
    // last response's head, instead of waiting for ever.
    assert_eq!(start.elapsed(), 5 * SEC);
    let why = GiveUp::Limit(LimitReached::MaxElapsed);
    assert_eq!(gave_up_after_a_503(err).gave_up, Some(why));
    assert_eq!(*given_up.lock().unwrap(), [why]);
    assert_eq!(*calls.lock().unwrap(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_retry_waits_for_the_body_to_be_handed_back_then_replays_all_of_it() {
    // The first attempt keeps reading the body for 300 ms after its 503.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let mut calls = 0;
    let svc = tower::service_fn(move |req: Request<Body>| {
        calls += 1;
        let first = calls == 1;
        let log = log.clone();
        let body = req.into_body();
        let read = async move {
            if first {
                tokio::time::sleep(300 * MS).await;
            }
            let bytes = body.collect().await.unwrap().to_bytes();
            log.lock().unwrap().push((Instant::now(), bytes));
        };
        if first {
            tokio::spawn(read);
            std::future::ready(Ok::<_, Infallible>(response(503)))
        } else {
            tokio::spawn(read);
            std::future::ready(Ok(response(200)))
        }
    });
    let client = ServiceBuilder::new()
        .layer(layer().replay_bodies(DEFAULT_MAX_BYTES))
        .service(svc);
    let (mut tx, body) = Upload::new(4);
    tx.send_data(Bytes::from("whole body")).await.unwrap();
    drop(tx);
    let start = Instant::now();
    let res = client.oneshot(put(body)).await.unwrap();
    assert_eq!(res.status(), 200);
    tokio::time::sleep(SEC).await;
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].1, "whole body");
    assert_eq!(seen[1].1, "whole body");
    // The retry went out once the first attempt let go (300 ms), not at its 100 ms delay.
    assert!(seen[1].0.duration_since(start) >= 300 * MS);
}

/// Runs `future` to completion on this thread, outside any tokio runtime.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Arc::new(Unpark(std::thread::current())).into();
    let mut cx = std::task::Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

#[test]
fn without_a_runtime_the_last_response_comes_back_instead_of_a_panic() {
    let svc = tower::service_fn(|_: Request<String>| async { Ok::<_, Infallible>(response(503)) });
    let res = block_on(layer().layer(svc).oneshot(Request::new(String::new()))).unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    let stats = res.extensions().get::<RetryStats>().copied().unwrap();
    assert_eq!(stats.gave_up, Some(GiveUp::NoRuntime));
}

#[test]
#[should_panic(expected = "Call `enable_time` on the runtime builder")]
fn a_runtime_without_timers_panics_saying_what_to_enable() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let svc = tower::service_fn(|_: Request<String>| async { Ok::<_, Infallible>(response(503)) });
    let _ = rt.block_on(layer().layer(svc).oneshot(Request::new(String::new())));
}

#[tokio::test(start_paused = true)]
async fn clients_told_the_same_delay_come_back_spread_never_sooner() {
    // 20 requests, all refused with `Retry-After: 1` at the same instant.
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let log = arrivals.clone();
    let start = Instant::now();
    let svc = tower::service_fn(move |_: Request<String>| {
        log.lock().unwrap().push(Instant::now());
        let res = if Instant::now() == start {
            Response::builder()
                .status(429)
                .header("retry-after", "1")
                .body(String::new())
                .unwrap()
        } else {
            response(200)
        };
        std::future::ready(Ok::<_, Infallible>(res))
    });
    let client = layer().with_seed(7).layer(svc);
    let calls = (0..20).map(|_| client.clone().oneshot(Request::new(String::new())));
    let results = futures_join(calls).await;
    assert!(results.iter().all(|r| r.as_ref().unwrap().status() == 200));
    let arrivals = arrivals.lock().unwrap();
    let retries: Vec<Duration> = arrivals
        .iter()
        .map(|t| t.duration_since(start))
        .filter(|d| !d.is_zero())
        .collect();
    assert_eq!(retries.len(), 20);
    assert!(
        retries.iter().all(|d| *d >= SEC && *d < SEC * 6 / 5),
        "{retries:?}"
    );
    let mut distinct = retries.clone();
    distinct.sort();
    distinct.dedup();
    assert!(distinct.len() >= 18, "not one herd: {retries:?}");
    let span = *distinct.last().unwrap() - distinct[0];
    assert!(span >= 100 * MS, "spread over {span:?}");
}

#[tokio::test(start_paused = true)]
async fn exactness_is_one_setting_away() {
    let settings = RetrySettings::new().with_retry_after_jitter(0.0).unwrap();
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let log = arrivals.clone();
    let mut n = 0;
    let svc = tower::service_fn(move |_: Request<String>| {
        n += 1;
        log.lock().unwrap().push(Instant::now());
        let res = if n == 1 {
            Response::builder()
                .status(503)
                .header("retry-after", "1")
                .body(String::new())
                .unwrap()
        } else {
            response(200)
        };
        std::future::ready(Ok::<_, Infallible>(res))
    });
    let res = layer()
        .with_settings(settings)
        .layer(svc)
        .oneshot(Request::new(String::new()))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals[1] - arrivals[0], SEC);
}

/// Awaits every future, concurrently, in order.
async fn futures_join<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for handle in handles {
        out.push(handle.await.unwrap());
    }
    out
}

#[tokio::test(start_paused = true)]
async fn a_failed_request_says_how_many_attempts_and_why_and_the_hook_hears_of_it() {
    let given_up = Arc::new(Mutex::new(Vec::new()));
    let log = given_up.clone();
    let svc = tower::service_fn(|_: Request<String>| async {
        Err::<Response<String>, _>(io::Error::from(io::ErrorKind::ConnectionReset))
    });
    let client = layer()
        .on_give_up(move |e: &GiveUpEvent<'_>| {
            log.lock()
                .unwrap()
                .push((e.attempts(), e.reason(), e.why(), e.uri().to_string()))
        })
        .layer(svc);
    // A POST that may have reached the server: not resent, and the error says so.
    let post = Request::post("http://user:secret@api.example/orders")
        .body(String::new())
        .unwrap();
    let err: RetryError = client.clone().oneshot(post).await.unwrap_err();
    assert_eq!(err.stats().attempts, 1);
    assert_eq!(err.stats().gave_up, Some(GiveUp::NotIdempotent));
    assert!(
        err.to_string().contains("method is not idempotent"),
        "{err}"
    );
    // A GET: retried until its attempts run out.
    let get = Request::get("http://api.example/items")
        .body(String::new())
        .unwrap();
    let err = client.oneshot(get).await.unwrap_err();
    assert_eq!(err.stats().attempts, 4);
    assert_eq!(err.stats().waited, 300 * MS);
    assert_eq!(
        err.into_inner().downcast::<io::Error>().unwrap().kind(),
        io::ErrorKind::ConnectionReset
    );
    assert_eq!(
        *given_up.lock().unwrap(),
        [
            (
                1,
                RetryReason::Transport,
                GiveUp::NotIdempotent,
                // Credentials never reach a hook: they are redacted.
                "http://REDACTED:REDACTED@api.example/orders".to_owned()
            ),
            (
                4,
                RetryReason::Transport,
                GiveUp::Limit(LimitReached::MaxAttempts),
                "http://api.example/items".to_owned()
            ),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn the_retry_hook_never_sees_credentials() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let mut n = 0;
    let svc = tower::service_fn(move |_: Request<String>| {
        n += 1;
        std::future::ready(Ok::<_, Infallible>(response(if n == 1 {
            502
        } else {
            200
        })))
    });
    let client = layer()
        .on_retry(move |e: &RetryEvent<'_>| log.lock().unwrap().push(e.uri().to_string()))
        .layer(svc);
    let req = Request::get("https://me:pw@api.example:8443/a?b=c")
        .body(String::new())
        .unwrap();
    client.oneshot(req).await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        ["https://REDACTED:REDACTED@api.example:8443/a?b=c"]
    );
}

#[tokio::test(start_paused = true)]
async fn grpc_stays_grpc_whatever_settings_come_after() {
    let mut n = 0;
    let svc = tower::service_fn(move |_: Request<String>| {
        n += 1;
        let code = if n == 1 { Code::Unavailable } else { Code::Ok };
        let res = Response::builder()
            .header("grpc-status", code.as_i32())
            .body(String::new())
            .unwrap();
        std::future::ready(Ok::<_, Infallible>(res))
    });
    let methods = GrpcClassifier::new()
        .with_retryable_service("pkg.Svc")
        .unwrap();
    let client = RetryLayer::grpc(ConstantBackOff::new(10 * MS).unwrap())
        .with_classifier(methods)
        .with_settings(RetrySettings::new())
        .layer(svc);
    let res = client
        .oneshot(Request::post("/pkg.Svc/Call").body(String::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(res.headers()["grpc-status"], "0");
    assert_eq!(res.extensions().get::<RetryStats>().unwrap().attempts, 2);
}

#[tokio::test(start_paused = true)]
async fn an_attempt_timeout_lets_a_get_retry_and_never_resends_a_post() {
    let calls = Arc::new(Mutex::new(0));
    let count = calls.clone();
    let svc = tower::service_fn(move |_: Request<String>| {
        let n = {
            let mut calls = count.lock().unwrap();
            *calls += 1;
            *calls
        };
        async move {
            if n == 1 || n == 3 {
                tokio::time::sleep(3600 * SEC).await; // a hung attempt
            }
            Ok::<_, Infallible>(response(200))
        }
    });
    let settings = RetrySettings::new().with_attempt_timeout(SEC).unwrap();
    let client = layer().with_settings(settings).layer(svc);
    let start = Instant::now();
    let res = client
        .clone()
        .oneshot(Request::get("/").body(String::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(start.elapsed(), SEC + 100 * MS);
    let stats = res.extensions().get::<RetryStats>().copied().unwrap();
    assert_eq!(stats.attempts, 2);

    let err = client
        .oneshot(Request::post("/").body(String::new()).unwrap())
        .await
        .unwrap_err();
    assert!(err.inner().is::<tower_backoff::layer::AttemptTimedOut>());
    assert_eq!(err.stats().gave_up, Some(GiveUp::NotIdempotent));
    assert_eq!(*calls.lock().unwrap(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_timeout_layer_inside_bounds_each_attempt_the_same_way() {
    let mut n = 0;
    let svc = tower::service_fn(move |_: Request<String>| {
        n += 1;
        let hang = n == 1;
        async move {
            if hang {
                tokio::time::sleep(3600 * SEC).await;
            }
            Ok::<_, Infallible>(response(200))
        }
    });
    let client = ServiceBuilder::new()
        .layer(layer())
        .layer(tower::timeout::TimeoutLayer::new(SEC))
        .service(svc);
    let start = Instant::now();
    let res = client
        .oneshot(Request::get("/").body(String::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(start.elapsed(), SEC + 100 * MS);
}

#[tokio::test(start_paused = true)]
async fn the_throttle_counts_attempts_as_grpc_a6_does() {
    let throttle = RetryThrottle::new(10, 0.5).unwrap();
    let statuses = Arc::new(Mutex::new(vec![503, 503, 503, 404, 404, 404, 200]));
    let script = statuses.clone();
    let svc = tower::service_fn(move |_: Request<String>| {
        let status = script.lock().unwrap().remove(0);
        std::future::ready(Ok::<_, Infallible>(response(status)))
    });
    let three = RetrySettings::new().with_max_attempts(3).unwrap();
    let mut client = layer()
        .with_settings(three)
        .with_retry_throttle(throttle.clone())
        .layer(svc);
    let mut send = async || {
        (&mut client)
            .oneshot(Request::get("/").body(String::new()).unwrap())
            .await
            .unwrap()
            .status()
    };
    // Three retryable failures (one request, all its attempts) drain a token each.
    assert_eq!(send().await, 503);
    assert_eq!(throttle.tokens(), 7.0);
    // Answers that say nothing of the server's health leave the bucket alone.
    for _ in 0..3 {
        assert_eq!(send().await, 404);
    }
    assert_eq!(throttle.tokens(), 7.0);
    // A success refills `token_ratio`.
    assert_eq!(send().await, 200);
    assert_eq!(throttle.tokens(), 7.5);
}
