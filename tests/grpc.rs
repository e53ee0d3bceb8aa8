//! gRPC retry classification (A6), row by row of the decision table.

use http::{HeaderMap, HeaderValue, Response, StatusCode};
use proptest::prelude::*;
use std::time::Duration;
use tower_backoff::RetryReason;
use tower_backoff::classify::{Outcome, Resend, ServerDelay};
use tower_backoff::grpc::{
    self, Code, GrpcCodes, PREVIOUS_RPC_ATTEMPTS, Pushback, classify, classify_response, pushback,
    set_previous_attempts, status_from_headers,
};

/// Response headers of a Trailers-Only response with `status` and an optional pushback.
fn trailers_only(status: &str, pushback_ms: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/grpc"));
    headers.insert("grpc-status", HeaderValue::from_str(status).unwrap());
    if let Some(ms) = pushback_ms {
        headers.insert("grpc-retry-pushback-ms", HeaderValue::from_str(ms).unwrap());
    }
    headers
}

/// A retry for `code`; a pushback delay replaces the backoff's and starts it over.
fn retry(code: Code, after: Option<Duration>) -> Outcome {
    let outcome = Outcome::retry(RetryReason::Grpc(code));
    match after {
        Some(after) => outcome.with_server_delay(ServerDelay::Restart(after)),
        None => outcome,
    }
}

/// A failure no retry fixes (the code, not retryable, is the response's own `grpc-status`).
fn not_retryable(_code: Code) -> Outcome {
    Outcome::failure()
}

/// A retryable failure the server's pushback asked not to retry.
fn refused_by_pushback(code: Code) -> Outcome {
    Outcome::stop(RetryReason::Grpc(code))
}

/// An OK status, or a committed call: neither is retried.
const SUCCESS: Outcome = Outcome::success();

fn ms(n: u64) -> Option<Duration> {
    Some(Duration::from_millis(n))
}

#[test]
fn decision_table_with_the_default_set() {
    let table: &[(&str, Option<&str>, Outcome)] = &[
        // OK.
        ("0", None, SUCCESS),
        ("0", Some("100"), SUCCESS),
        ("0", Some("-1"), SUCCESS),
        // UNAVAILABLE, retryable by default.
        ("14", None, retry(Code::Unavailable, None)),
        ("14", Some("0"), retry(Code::Unavailable, ms(0))),
        ("14", Some("250"), retry(Code::Unavailable, ms(250))),
        (
            "14",
            Some("2147483647"),
            retry(Code::Unavailable, ms(2_147_483_647)),
        ),
        // Huge pushback saturates instead of failing.
        (
            "14",
            Some("99999999999999999999999"),
            retry(Code::Unavailable, ms(u64::MAX)),
        ),
        // Negative or unparseable pushback: do not retry.
        ("14", Some("-1"), refused_by_pushback(Code::Unavailable)),
        ("14", Some("-250"), refused_by_pushback(Code::Unavailable)),
        ("14", Some("soon"), refused_by_pushback(Code::Unavailable)),
        ("14", Some("1.5"), refused_by_pushback(Code::Unavailable)),
        ("14", Some("+5"), refused_by_pushback(Code::Unavailable)),
        ("14", Some(""), refused_by_pushback(Code::Unavailable)),
        // RESOURCE_EXHAUSTED: only with a valid pushback.
        ("8", None, not_retryable(Code::ResourceExhausted)),
        ("8", Some("500"), retry(Code::ResourceExhausted, ms(500))),
        ("8", Some("0"), retry(Code::ResourceExhausted, ms(0))),
        ("8", Some("-1"), not_retryable(Code::ResourceExhausted)),
        ("8", Some("x"), not_retryable(Code::ResourceExhausted)),
        // Other codes: never, pushback or not.
        ("1", None, not_retryable(Code::Cancelled)),
        ("3", None, not_retryable(Code::InvalidArgument)),
        ("4", None, not_retryable(Code::DeadlineExceeded)),
        ("10", None, not_retryable(Code::Aborted)),
        ("10", Some("100"), not_retryable(Code::Aborted)),
        ("13", Some("100"), not_retryable(Code::Internal)),
        ("16", None, not_retryable(Code::Unauthenticated)),
        // An invalid status is UNKNOWN, not retryable by default.
        ("17", None, not_retryable(Code::Unknown)),
        ("-14", None, not_retryable(Code::Unknown)),
        ("fourteen", None, not_retryable(Code::Unknown)),
        ("", None, not_retryable(Code::Unknown)),
        (
            "99999999999999999999999",
            None,
            not_retryable(Code::Unknown),
        ),
        // Whitespace around the digits is tolerated.
        (" 14 ", None, retry(Code::Unavailable, None)),
    ];
    for (status, pushback_ms, expected) in table {
        let headers = trailers_only(status, *pushback_ms);
        assert_eq!(
            classify(&headers, GrpcCodes::default()),
            *expected,
            "grpc-status {status:?}, pushback {pushback_ms:?}"
        );
    }
}

#[test]
fn headers_without_status_are_committed() {
    let mut headers = HeaderMap::new();
    assert_eq!(status_from_headers(&headers), None);
    assert_eq!(classify(&headers, GrpcCodes::default()), SUCCESS);
    headers.insert("content-type", HeaderValue::from_static("application/grpc"));
    // Even a pushback does not matter: the call has started streaming.
    headers.insert("grpc-retry-pushback-ms", HeaderValue::from_static("10"));
    assert_eq!(classify(&headers, GrpcCodes::default()), SUCCESS);
    let all = (0..=16).filter_map(Code::from_i32).collect();
    assert_eq!(classify(&headers, all), SUCCESS);
}

#[test]
fn custom_code_sets() {
    let codes = GrpcCodes::empty().with(Code::Aborted).with(Code::Internal);
    assert_eq!(
        classify(&trailers_only("10", None), codes),
        retry(Code::Aborted, None)
    );
    assert_eq!(
        classify(&trailers_only("13", Some("40")), codes),
        retry(Code::Internal, ms(40))
    );
    assert_eq!(
        classify(&trailers_only("13", Some("-1")), codes),
        refused_by_pushback(Code::Internal)
    );
    // UNAVAILABLE is no longer in this set.
    assert_eq!(
        classify(&trailers_only("14", None), codes),
        not_retryable(Code::Unavailable)
    );
    // The empty set retries nothing, except a RESOURCE_EXHAUSTED the server pushes back on.
    let none = GrpcCodes::empty();
    assert_eq!(
        classify(&trailers_only("14", None), none),
        not_retryable(Code::Unavailable)
    );
    assert_eq!(
        classify(&trailers_only("8", Some("5")), none),
        retry(Code::ResourceExhausted, ms(5))
    );
    // UNKNOWN (what an invalid status reads as) can be opted into.
    let unknown = GrpcCodes::empty().with(Code::Unknown);
    assert_eq!(
        classify(&trailers_only("42", None), unknown),
        retry(Code::Unknown, None)
    );
}

#[test]
fn resource_exhausted_put_in_the_set_retries_without_pushback() {
    let codes = GrpcCodes::default().with(Code::ResourceExhausted);
    assert_eq!(
        classify(&trailers_only("8", None), codes),
        retry(Code::ResourceExhausted, None)
    );
    assert_eq!(
        classify(&trailers_only("8", Some("-1")), codes),
        refused_by_pushback(Code::ResourceExhausted)
    );
}

#[test]
fn status_from_headers_reads_the_first_value() {
    assert_eq!(status_from_headers(&HeaderMap::new()), None);
    let mut headers = trailers_only("14", None);
    assert_eq!(status_from_headers(&headers), Some(Code::Unavailable));
    headers.append("grpc-status", HeaderValue::from_static("0"));
    assert_eq!(status_from_headers(&headers), Some(Code::Unavailable));
    let bytes = HeaderValue::from_bytes(b"1\xff").unwrap();
    headers.insert("grpc-status", bytes);
    assert_eq!(status_from_headers(&headers), Some(Code::Unknown));
}

#[test]
fn pushback_values() {
    assert_eq!(pushback(&HeaderMap::new()), None);
    let table: &[(&str, Pushback)] = &[
        ("0", Pushback::RetryAfter(Duration::ZERO)),
        ("1", Pushback::RetryAfter(Duration::from_millis(1))),
        ("007", Pushback::RetryAfter(Duration::from_millis(7))),
        (
            "18446744073709551615",
            Pushback::RetryAfter(Duration::from_millis(u64::MAX)),
        ),
        (
            "18446744073709551616",
            Pushback::RetryAfter(Duration::from_millis(u64::MAX)),
        ),
        ("-1", Pushback::DoNotRetry),
        ("-0", Pushback::DoNotRetry),
        ("-99999999999999999999999", Pushback::DoNotRetry),
        ("abc", Pushback::DoNotRetry),
        ("", Pushback::DoNotRetry),
        ("  ", Pushback::DoNotRetry),
        ("1 2", Pushback::DoNotRetry),
        ("0x10", Pushback::DoNotRetry),
    ];
    for (value, expected) in table {
        let headers = trailers_only("14", Some(value));
        assert_eq!(pushback(&headers), Some(*expected), "{value:?}");
    }
    // More than one value is unparseable: do not retry.
    let mut headers = trailers_only("14", Some("10"));
    headers.append("grpc-retry-pushback-ms", HeaderValue::from_static("20"));
    assert_eq!(pushback(&headers), Some(Pushback::DoNotRetry));
    assert_eq!(
        classify(&headers, GrpcCodes::default()),
        refused_by_pushback(Code::Unavailable)
    );
    // Non-UTF-8 bytes.
    let mut headers = HeaderMap::new();
    headers.insert(
        "grpc-retry-pushback-ms",
        HeaderValue::from_bytes(b"1\x80").unwrap(),
    );
    assert_eq!(pushback(&headers), Some(Pushback::DoNotRetry));
}

#[test]
fn codes_round_trip_and_have_names() {
    for n in 0..=16 {
        let code = Code::from_i32(n).unwrap();
        assert_eq!(code.as_i32(), n);
        let value = HeaderValue::from(n);
        assert_eq!(Code::from_header_value(&value), code);
    }
    assert_eq!(Code::from_i32(-1), None);
    assert_eq!(Code::from_i32(17), None);
    assert_eq!(Code::from_i32(i32::MAX), None);
    assert_eq!(Code::from_i32(i32::MIN), None);
    assert_eq!(Code::Ok.as_str(), "OK");
    assert_eq!(Code::ResourceExhausted.to_string(), "RESOURCE_EXHAUSTED");
    assert_eq!(Code::Unauthenticated.as_i32(), 16);
}

#[test]
fn code_sets() {
    assert_eq!(GrpcCodes::default(), GrpcCodes::DEFAULT_RETRYABLE);
    assert_eq!(
        GrpcCodes::default().iter().collect::<Vec<_>>(),
        [Code::Unavailable]
    );
    assert!(GrpcCodes::empty().is_empty());
    let set = GrpcCodes::empty()
        .with(Code::Ok)
        .with(Code::Unauthenticated);
    assert!(set.contains(Code::Ok) && set.contains(Code::Unauthenticated));
    assert!(!set.contains(Code::Unavailable));
    assert!(
        set.without(Code::Ok)
            .without(Code::Unauthenticated)
            .is_empty()
    );
    assert_eq!(set.with(Code::Ok), set);
    assert_eq!(format!("{set:?}"), "{Ok, Unauthenticated}");
    let all: GrpcCodes = (0..=16).filter_map(Code::from_i32).collect();
    assert_eq!(all.iter().count(), 17);
}

#[test]
fn previous_attempts_header() {
    let mut headers = HeaderMap::new();
    set_previous_attempts(&mut headers, 0);
    assert!(headers.is_empty());
    set_previous_attempts(&mut headers, 1);
    assert_eq!(headers[PREVIOUS_RPC_ATTEMPTS], "1");
    set_previous_attempts(&mut headers, u32::MAX);
    assert_eq!(headers[PREVIOUS_RPC_ATTEMPTS], "4294967295");
    assert_eq!(headers.get_all(PREVIOUS_RPC_ATTEMPTS).iter().count(), 1);
    set_previous_attempts(&mut headers, 0);
    assert!(headers.get(PREVIOUS_RPC_ATTEMPTS).is_none());
    assert_eq!(PREVIOUS_RPC_ATTEMPTS, "grpc-previous-rpc-attempts");
}

#[test]
fn classify_response_maps_http_errors_without_status() {
    let response = |status: StatusCode, headers: HeaderMap| {
        let mut response = Response::new(());
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        response
    };
    let default = GrpcCodes::default();
    // A 200 without grpc-status is a streaming gRPC response: committed.
    assert_eq!(
        classify_response(&response(StatusCode::OK, HeaderMap::new()), default),
        SUCCESS
    );
    // A proxy's 503 / 429 / 502 / 504 is UNAVAILABLE: retried.
    for status in [429, 502, 503, 504] {
        let status = StatusCode::from_u16(status).unwrap();
        assert_eq!(
            classify_response(&response(status, HeaderMap::new()), default),
            retry(Code::Unavailable, None),
            "{status}"
        );
    }
    for (status, code) in [
        (400, Code::Internal),
        (401, Code::Unauthenticated),
        (403, Code::PermissionDenied),
        (404, Code::Unimplemented),
        (500, Code::Unknown),
    ] {
        let status = StatusCode::from_u16(status).unwrap();
        assert_eq!(
            classify_response(&response(status, HeaderMap::new()), default),
            not_retryable(code),
            "{status}"
        );
    }
    // A grpc-status present wins over the HTTP status.
    assert_eq!(
        classify_response(
            &response(StatusCode::SERVICE_UNAVAILABLE, trailers_only("0", None)),
            default
        ),
        SUCCESS
    );
    assert_eq!(
        classify_response(
            &response(StatusCode::OK, trailers_only("14", Some("9"))),
            default
        ),
        retry(Code::Unavailable, ms(9))
    );
}

#[test]
fn outcomes_carry_the_code_and_no_resend_rule() {
    let pushed_back = classify(&trailers_only("14", Some("-1")), GrpcCodes::default());
    assert_eq!(
        pushed_back.reason(),
        Some(RetryReason::Grpc(Code::Unavailable))
    );
    assert!(pushed_back.is_stopped());
    let retried = classify(&trailers_only("14", None), GrpcCodes::default());
    assert_eq!(retried.reason(), Some(RetryReason::Grpc(Code::Unavailable)));
    // The classifier, which knows the method, decides whether any method may be resent.
    assert_eq!(retried.resend(), Resend::IfIdempotent);
    assert_eq!(grpc::GRPC_STATUS, "grpc-status");
    assert_eq!(grpc::RETRY_PUSHBACK_MS, "grpc-retry-pushback-ms");
}

proptest! {
    #[test]
    fn classification_never_panics(
        status in proptest::collection::vec(any::<u8>(), 0..24),
        pushback_ms in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..24)),
        bits in any::<u32>(),
    ) {
        let codes: GrpcCodes = (0..=16).filter(|n| bits & (1 << n) != 0).filter_map(Code::from_i32).collect();
        let mut headers = HeaderMap::new();
        if let Ok(value) = HeaderValue::from_bytes(&status) {
            headers.insert("grpc-status", value);
        }
        if let Some(Ok(value)) = pushback_ms.map(|b| HeaderValue::from_bytes(&b)) {
            headers.insert("grpc-retry-pushback-ms", value);
        }
        let outcome = classify(&headers, codes);
        // Invariant: a server delay is a pushback, which starts the backoff over.
        if let Some(delay) = outcome.server_delay() {
            prop_assert!(matches!(delay, ServerDelay::Restart(_)));
            prop_assert!(outcome.is_retryable());
        }
    }

    #[test]
    fn any_non_negative_i64_pushback_is_that_many_ms(ms in 0i64..=i64::MAX) {
        let headers = trailers_only("14", Some(&ms.to_string()));
        prop_assert_eq!(pushback(&headers), Some(Pushback::RetryAfter(Duration::from_millis(ms as u64))));
    }

    #[test]
    fn any_negative_pushback_refuses(ms in i64::MIN..0) {
        let headers = trailers_only("14", Some(&ms.to_string()));
        prop_assert_eq!(pushback(&headers), Some(Pushback::DoNotRetry));
    }
}
