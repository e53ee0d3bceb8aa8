//! The decision table of `RetryLayer`, row by row: which statuses and errors are retried,
//! for which methods, after which wait; and the set of retryable statuses, configured.

mod support;

use http::{HeaderValue, Method, Request, Response, StatusCode};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::backoffs::Steps;
use support::scripted::Reply::*;
use support::scripted::{exact, get, layer, post, req, run, stats};
use support::time::{MS, SEC};
use tower::{Layer, ServiceExt};
use tower_backoff::classify::HttpClassifier;
use tower_backoff::classify::{ErrorClass, IDEMPOTENCY_KEY, StatusSet, default_error_class};
use tower_backoff::{GiveUp, RetryError, RetryLayer, RetryStats};

/// The kind of the io::Error a request finally failed with.
fn io_kind(err: RetryError) -> io::ErrorKind {
    err.into_inner().downcast::<io::Error>().unwrap().kind()
}

// ---- the rows of the decision table ----

#[tokio::test(start_paused = true)]
async fn row_429_waits_for_retry_after_for_idempotent_requests() {
    for request in [get(), req(Method::PUT, "/")] {
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

/// A 429 may come from a proxy after the server acted (RFC 9110 §9.2.2): a POST or a
/// PATCH is not resent.
#[tokio::test(start_paused = true)]
async fn row_429_returns_a_non_idempotent_request_as_is() {
    for request in [post(), req(Method::PATCH, "/")] {
        let (res, arrivals) = run(layer(), request, &[WithHeader(429, "retry-after", b"2")]).await;
        let res = res.unwrap();
        assert_eq!(res.status(), 429);
        assert_eq!(arrivals, [Duration::ZERO]);
        assert_eq!(stats(&res).gave_up, Some(GiveUp::NotIdempotent));
    }
}

/// An API whose 429 means "refused before processing" says so, and then a POST is resent.
#[tokio::test(start_paused = true)]
async fn row_429_resends_a_post_when_the_api_says_429_is_unprocessed() {
    let trusting = layer().with_classifier(HttpClassifier::new().with_429_as_unprocessed());
    let (res, arrivals) = run(trusting, post(), &[WithHeader(429, "retry-after", b"2")]).await;
    assert_eq!(res.unwrap().status(), 200);
    assert_eq!(arrivals, [Duration::ZERO, 2 * SEC]);
}

#[tokio::test(start_paused = true)]
async fn row_429_without_retry_after_waits_for_the_backoff() {
    let (res, arrivals) = run(layer(), get(), &[Status(429), Status(429)]).await;
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
        RetryLayer::new(slow).with_settings(exact()),
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
    let fatal = layer().with_classifier(HttpClassifier::new().with_error_class(|e| {
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
async fn an_empty_idempotency_key_does_not_make_a_post_retryable() {
    for key in ["", "  ", "\"\""] {
        let mut request = post();
        request
            .headers_mut()
            .insert(IDEMPOTENCY_KEY, HeaderValue::from_static(key));
        let (res, arrivals) = run(layer(), request, &[Status(503)]).await;
        assert_eq!(res.unwrap().status(), 503, "{key:?}");
        assert_eq!(arrivals.len(), 1, "{key:?}: sent once");
    }
}

#[tokio::test(start_paused = true)]
async fn retry_non_idempotent_gives_posts_the_idempotent_column() {
    let all = layer().with_settings(exact().with_retry_non_idempotent(true));
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
    let custom = || layer().with_settings(settings.clone());
    let (res, arrivals) = run(custom(), get(), &[Status(500)]).await;
    assert_eq!(res.unwrap().status(), 200);
    assert_eq!(arrivals.len(), 2);
    let (res, arrivals) = run(custom(), get(), &[Status(503)]).await;
    assert_eq!(res.unwrap().status(), 503);
    assert_eq!(arrivals.len(), 1);

    let only_errors = layer().with_settings(exact().with_statuses(StatusSet::EMPTY));
    let (res, _) = run(only_errors, get(), &[Status(429)]).await;
    assert_eq!(res.unwrap().status(), 429);
}
