//! The gRPC preset of the retry layer (`RetryLayer::grpc`), on paused time against a
//! scripted in-process service: decisions, pushback, backoff resets and attempt headers.

mod support;

use http::{HeaderMap, Method, Request, Response, StatusCode};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::backoffs::Counting;
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt, service_fn};

use tower_backoff::classify::GrpcClassifier;
use tower_backoff::grpc::{Code, GRPC_TIMEOUT, GrpcCodes};
use tower_backoff::{GiveUp, RetryLayer, RetrySettings, RetryStats};

const STEP: Duration = Counting::STEP;

/// The gRPC preset with the service of the test calls (`pkg.Svc`) declared retryable.
fn declared(backoff: Counting) -> RetryLayer<Counting> {
    let methods = GrpcClassifier::new().with_retryable_service("pkg.Svc");
    RetryLayer::grpc(backoff).with_classifier(methods.unwrap())
}

/// A response: HTTP `status`, and `grpc-status`/pushback headers when given.
fn grpc(status: u16, code: Option<Code>, pushback: Option<&str>) -> Response<String> {
    let mut res = Response::builder()
        .status(status)
        .header("content-type", "application/grpc");
    if let Some(code) = code {
        res = res.header("grpc-status", code.as_i32().to_string());
    }
    if let Some(ms) = pushback {
        res = res.header("grpc-retry-pushback-ms", ms);
    }
    res.body(String::new()).unwrap()
}

type Log = Arc<Mutex<Vec<(Instant, HeaderMap)>>>;

/// Sends one POST through `layer` to a service answering `script` in order (then OK).
async fn run(
    layer: RetryLayer<Counting>,
    script: Vec<Response<String>>,
) -> (Response<String>, Vec<(Duration, HeaderMap)>) {
    run_with(layer, script, None).await
}

/// [`run`], the call announcing a `grpc-timeout` when given.
async fn run_with(
    layer: RetryLayer<Counting>,
    script: Vec<Response<String>>,
    timeout: Option<&str>,
) -> (Response<String>, Vec<(Duration, HeaderMap)>) {
    let script = Arc::new(Mutex::new(VecDeque::from(script)));
    let log: Log = Arc::default();
    let seen = log.clone();
    let inner = service_fn(move |req: Request<String>| {
        seen.lock()
            .unwrap()
            .push((Instant::now(), req.headers().clone()));
        let res = script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| grpc(200, Some(Code::Ok), None));
        async move { Ok::<_, std::io::Error>(res) }
    });
    let start = Instant::now();
    let mut req = Request::builder()
        .method(Method::POST)
        .uri("http://svc/pkg.Svc/Call")
        .body(String::from("msg"))
        .unwrap();
    if let Some(timeout) = timeout {
        req.headers_mut()
            .insert(GRPC_TIMEOUT, timeout.parse().unwrap());
    }
    let res = ServiceBuilder::new()
        .layer(layer)
        .service(inner)
        .oneshot(req)
        .await
        .unwrap();
    let log = log.lock().unwrap();
    let seen = log.iter().map(|(at, h)| (*at - start, h.clone())).collect();
    (res, seen)
}

fn previous(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("grpc-previous-rpc-attempts")
        .map(|v| v.to_str().unwrap())
}

#[tokio::test(start_paused = true)]
async fn unavailable_is_retried_with_backoff_and_attempt_headers() {
    let layer = declared(Counting::default())
        .with_settings(RetrySettings::new().with_max_attempts(4).unwrap());
    let unavailable = || grpc(200, Some(Code::Unavailable), None);
    let (res, seen) = run(layer, vec![unavailable(), unavailable()]).await;
    assert_eq!(res.headers()["grpc-status"], "0");
    assert_eq!(res.extensions().get::<RetryStats>().unwrap().attempts, 3);
    let times: Vec<_> = seen.iter().map(|(t, _)| *t).collect();
    assert_eq!(times, [Duration::ZERO, STEP, STEP + 2 * STEP]);
    let previous: Vec<_> = seen.iter().map(|(_, h)| previous(h)).collect();
    assert_eq!(previous, [None, Some("1"), Some("2")]);
}

#[tokio::test(start_paused = true)]
async fn pushback_is_waited_exactly_and_restarts_the_backoff() {
    let backoff = Counting::default();
    let resets = backoff.resets.clone();
    // Exactly: no spread of the server's delay.
    let settings = RetrySettings::new()
        .with_max_attempts(5)
        .unwrap()
        .with_retry_after_jitter(0.0)
        .unwrap();
    let layer = declared(backoff).with_settings(settings);
    let script = vec![
        grpc(200, Some(Code::Unavailable), None),
        grpc(200, Some(Code::Unavailable), None),
        grpc(200, Some(Code::ResourceExhausted), Some("750")),
        grpc(200, Some(Code::Unavailable), None),
    ];
    let (res, seen) = run(layer, script).await;
    assert_eq!(res.headers()["grpc-status"], "0");
    let times: Vec<_> = seen.iter().map(|(t, _)| *t).collect();
    let after_pushback = 3 * STEP + Duration::from_millis(750);
    // 100 ms, 200 ms, then exactly the pushback, then the backoff from its start again.
    assert_eq!(
        times,
        [
            Duration::ZERO,
            STEP,
            3 * STEP,
            after_pushback,
            after_pushback + STEP
        ]
    );
    // Once when the request started, once for the pushback.
    assert_eq!(*resets.lock().unwrap(), 2);
}

#[tokio::test(start_paused = true)]
async fn committed_and_non_retryable_responses_are_returned_at_once() {
    for res in [
        // Headers without a status: messages follow, the call is committed.
        grpc(200, None, None),
        grpc(200, Some(Code::InvalidArgument), None),
        grpc(200, Some(Code::ResourceExhausted), None),
        grpc(200, Some(Code::Ok), None),
    ] {
        let expected = res.headers().clone();
        let (got, seen) = run(declared(Counting::default()), vec![res]).await;
        assert_eq!(got.headers(), &expected);
        assert_eq!(seen.len(), 1, "{expected:?}");
        // Nothing to say about a call answered at once: no stats.
        assert_eq!(got.extensions().get::<RetryStats>(), None);
    }
}

#[tokio::test(start_paused = true)]
async fn a_negative_pushback_stops_the_retries() {
    let stop = grpc(200, Some(Code::Unavailable), Some("-1"));
    let (got, seen) = run(declared(Counting::default()), vec![stop]).await;
    assert_eq!(got.headers()["grpc-status"], "14");
    assert_eq!(seen.len(), 1);
    let stats = got.extensions().get::<RetryStats>().unwrap();
    assert_eq!(stats.gave_up, Some(GiveUp::Pushback));
}

/// A 503 from a proxy in front of the gRPC server carries no grpc-status: gRPC maps it
/// to UNAVAILABLE, which is retried, even though the call is a POST.
#[tokio::test(start_paused = true)]
async fn http_503_without_grpc_status_is_unavailable() {
    let proxy = Response::builder()
        .status(StatusCode::SERVICE_UNAVAILABLE)
        .body(String::new())
        .unwrap();
    let (res, seen) = run(declared(Counting::default()), vec![proxy]).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(seen.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_http_preset_does_not_read_grpc_statuses() {
    let layer = RetryLayer::new(Counting::default());
    let (res, seen) = run(layer, vec![grpc(200, Some(Code::Unavailable), None)]).await;
    assert_eq!(res.headers()["grpc-status"], "14");
    assert_eq!(seen.len(), 1);
    assert_eq!(previous(&seen[0].1), None);
}

#[tokio::test(start_paused = true)]
async fn the_retried_codes_are_configurable() {
    let codes = GrpcCodes::empty().with(Code::Aborted);
    let layer = RetryLayer::new(Counting::default()).with_classifier(
        GrpcClassifier::new()
            .with_codes(codes)
            .with_every_method_retryable(),
    );
    let script = vec![
        grpc(200, Some(Code::Aborted), None),
        grpc(200, Some(Code::Unavailable), None),
    ];
    let (res, seen) = run(layer, script).await;
    assert_eq!(res.headers()["grpc-status"], "14");
    assert_eq!(seen.len(), 2);
}

/// A6: a retryable status is no proof the call was not processed (a proxy answers
/// `UNAVAILABLE` or 503 when the upstream died after it got the call), so a method not
/// declared retryable is not resent.
#[tokio::test(start_paused = true)]
async fn a_method_not_declared_retryable_is_not_resent_on_a_status() {
    let other_service = GrpcClassifier::new().with_retryable_method("pkg.Other", "Call");
    let unavailable = || grpc(200, Some(Code::Unavailable), None);
    let proxy_503 = || grpc(503, None, None);
    for reply in [unavailable as fn() -> Response<String>, proxy_503] {
        for layer in [
            RetryLayer::grpc(Counting::default()),
            RetryLayer::grpc(Counting::default()).with_classifier(other_service.clone().unwrap()),
        ] {
            let (res, seen) = run(layer, vec![reply()]).await;
            assert_eq!(seen.len(), 1);
            let stats = res.extensions().get::<RetryStats>().unwrap();
            assert_eq!(stats.gave_up, Some(GiveUp::NotIdempotent));
        }
    }
}

#[test]
fn a_method_name_with_a_slash_is_a_config_error() {
    let err = GrpcClassifier::new()
        .with_retryable_service("pkg.Svc/Call")
        .unwrap_err();
    assert_eq!(err.field(), "retryable_service");
    let err = GrpcClassifier::new()
        .with_retryable_method("pkg.Svc", "")
        .unwrap_err();
    assert_eq!(err.field(), "retryable_method");
}

/// A6: each attempt announces only the time the call has left, and no attempt starts
/// once the call's own timeout has passed.
#[tokio::test(start_paused = true)]
async fn each_attempt_announces_the_time_the_call_has_left() {
    let unavailable = || grpc(200, Some(Code::Unavailable), None);
    // Counting waits 100 ms, then 200 ms: the second retry would start at 300 ms.
    let script = vec![unavailable(), unavailable(), unavailable()];
    let (res, seen) = run_with(declared(Counting::default()), script, Some("250m")).await;
    assert_eq!(res.headers()["grpc-status"], "14");
    let announced: Vec<_> = seen.iter().map(|(_, h)| h[GRPC_TIMEOUT].clone()).collect();
    assert_eq!(announced, ["250m", "150000u"]);
    let stats = res.extensions().get::<RetryStats>().unwrap();
    assert!(matches!(stats.gave_up, Some(GiveUp::Limit(_))), "{stats:?}");
}
