//! What `RetryLayer` tells about its retries: the `on_retry` hook, the `RetryStats` of the
//! final response, and one tracing event per retry.

mod support;

use http::{Method, StatusCode};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::scripted::Reply::*;
use support::scripted::{attempts_layer, get, layer, req, run, stats};
use support::time::{MS, SEC};
use tower_backoff::{GiveUp, GiveUpEvent, RetryEvent, RetryReason, RetryStats};

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
        req(Method::PUT, "/"),
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
                "PUT / false".to_owned()
            ),
            (
                2,
                200 * MS,
                RetryReason::Connect,
                None,
                None,
                "PUT / true".to_owned()
            ),
            (
                3,
                300 * MS,
                RetryReason::Status(StatusCode::TOO_MANY_REQUESTS),
                Some(StatusCode::TOO_MANY_REQUESTS),
                None,
                "PUT / false".to_owned()
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
    // A first-attempt success carries no stats at all (`stats` reads that as one
    // attempt, nothing waited).
    let (res, _) = run(layer(), get(), &[]).await;
    let res = res.unwrap();
    assert!(res.extensions().get::<RetryStats>().is_none());
    assert_eq!(
        stats(&res),
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

// ---- tracing ----

thread_local! {
    /// The events seen on this thread while capturing.
    static CAPTURED: std::cell::RefCell<Option<Vec<String>>> = const { std::cell::RefCell::new(None) };
}

/// A global subscriber recording each event's fields as `name=value` text, on the threads
/// that asked for it (a global one, so no other test's callsite caching can hide events).
struct Capture;

/// Records this thread's events from now on, installing [`Capture`] once per process.
fn capture() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| tracing::subscriber::set_global_default(Capture).unwrap());
    CAPTURED.with(|c| *c.borrow_mut() = Some(Vec::new()));
}

/// The events this thread recorded since [`capture`].
fn captured() -> Vec<String> {
    CAPTURED.with(|c| c.borrow_mut().take().unwrap())
}

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
    capture();
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
    let events = captured();
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

    // A URI with credentials: the events name the host, never the user or password.
    capture();
    let with_credentials = req(Method::GET, "http://alice:s3cret@api.example/orders");
    let (res, _) = run(layer(), with_credentials, &[Status(503)]).await;
    assert_eq!(res.unwrap().status(), 200);
    let events = captured();
    let retry = events
        .iter()
        .find(|e| e.contains("retrying request"))
        .expect("a retry event");
    assert!(retry.contains("server.address=\"api.example\""), "{retry}");
    assert!(
        events
            .iter()
            .all(|e| !e.contains("alice") && !e.contains("s3cret")),
        "{events:?}"
    );
}

// ---- redaction ----

/// Credentials, two signed values (redacted by default) and a plain parameter.
const SECRET_URI: &str = "http://user:pw@host/p?AWSAccessKeyId=x&sig=y&ok=1";
/// [`SECRET_URI`] as OpenTelemetry's `url.full` shows it.
const REDACTED_URI: &str =
    "http://REDACTED:REDACTED@host/p?AWSAccessKeyId=REDACTED&sig=REDACTED&ok=1";

/// Whether `text` shows none of [`SECRET_URI`]'s secrets.
fn no_secret(text: &str) -> bool {
    !text.contains("pw") && !text.contains("=x") && !text.contains("=y")
}

#[tokio::test(start_paused = true)]
async fn the_events_debug_shows_no_credentials_nor_signed_values() {
    let shown: Arc<Mutex<Vec<String>>> = Arc::default();
    let (on_retry, on_give_up) = (shown.clone(), shown.clone());
    let hooked = layer()
        .on_retry(move |e: &RetryEvent<'_>| on_retry.lock().unwrap().push(format!("{e:?}")))
        .on_give_up(move |e: &GiveUpEvent<'_>| on_give_up.lock().unwrap().push(format!("{e:?}")));
    let replies = [Status(503); 4];
    let (res, _) = run(hooked, req(Method::GET, SECRET_URI), &replies).await;
    assert_eq!(res.unwrap().status(), 503);
    let shown = shown.lock().unwrap();
    assert_eq!(shown.len(), 4, "three retries, one give-up: {shown:?}");
    assert!(shown[0].starts_with("RetryEvent {"), "{}", shown[0]);
    assert!(shown[3].starts_with("GiveUpEvent {"), "{}", shown[3]);
    for debug in shown.iter() {
        assert!(no_secret(debug), "{debug}");
        assert!(debug.contains(&format!("uri: {REDACTED_URI}")), "{debug}");
    }
}

#[tokio::test(start_paused = true)]
async fn tracing_events_show_the_url_redacted() {
    capture();
    let replies = [Status(503); 4];
    let (res, _) = run(layer(), req(Method::GET, SECRET_URI), &replies).await;
    assert_eq!(res.unwrap().status(), 503);
    let events = captured();
    let ours: Vec<&String> = events
        .iter()
        .filter(|e| e.contains("retrying request") || e.contains("not retrying"))
        .collect();
    assert_eq!(ours.len(), 4, "{events:?}");
    for event in ours {
        assert!(
            event.contains(&format!("url.full={REDACTED_URI} ")),
            "{event}"
        );
    }
    assert!(events.iter().all(|e| no_secret(e)), "{events:?}");
}

#[tokio::test(start_paused = true)]
async fn a_configured_query_parameter_is_redacted_everywhere() {
    capture();
    let shown: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = shown.clone();
    let hooked = layer()
        .with_redacted_query_params(["api_key"])
        .unwrap()
        .on_retry(move |e: &RetryEvent<'_>| {
            let mut sink = sink.lock().unwrap();
            sink.push(e.uri().to_string());
            sink.push(format!("{e:?}"));
            sink.push(e.raw_uri().to_string());
        });
    let uri = "https://host/p?api_key=k3y&sig=y";
    let (res, _) = run(hooked, req(Method::GET, uri), &[Status(503)]).await;
    assert_eq!(res.unwrap().status(), 200);
    // The list replaces the default: `sig` is shown.
    let redacted = "https://host/p?api_key=REDACTED&sig=y";
    let shown = shown.lock().unwrap();
    assert_eq!(shown[0], redacted);
    assert!(
        shown[1].contains(&format!("uri: {redacted}")),
        "{}",
        shown[1]
    );
    // The raw URI stays reachable, for hooks that need it.
    assert_eq!(shown[2], uri);
    let events = captured();
    let retry = events
        .iter()
        .find(|e| e.contains("retrying request"))
        .expect("a retry event");
    assert!(retry.contains(&format!("url.full={redacted} ")), "{retry}");
    assert!(events.iter().all(|e| !e.contains("k3y")), "{events:?}");

    let err = layer()
        .with_redacted_query_params(["api_key="])
        .unwrap_err();
    assert_eq!(err.field(), "redacted_query_params");
}

// ---- layer order ----

/// A timeout above the retry layer cuts a retry's wait: the hooks hear the request given
/// up, cancelled, and the stack that does it right is a setting of the layer.
#[tokio::test(start_paused = true)]
async fn a_request_dropped_while_its_retry_waits_is_given_up_as_cancelled() {
    let seen: Arc<Mutex<Vec<GiveUp>>> = Arc::default();
    let sink = seen.clone();
    let hooked = layer().on_give_up(move |e: &GiveUpEvent<'_>| sink.lock().unwrap().push(e.why()));
    let client = tower::ServiceBuilder::new()
        .timeout(Duration::from_secs(1))
        .layer(hooked)
        .service(tower::service_fn(|_: http::Request<String>| async {
            let res = http::Response::builder()
                .status(503)
                .header("retry-after", "5");
            Ok::<_, io::Error>(res.body(String::new()).unwrap())
        }));
    let err = tower::ServiceExt::oneshot(client, get()).await.unwrap_err();
    assert!(err.is::<tower::timeout::error::Elapsed>());
    assert_eq!(*seen.lock().unwrap(), [GiveUp::Cancelled]);
}

/// A pacing layer above the retry layer paces nothing a retry sends: it is reported.
#[tokio::test(start_paused = true)]
async fn a_pacing_layer_above_the_retry_layer_is_reported() {
    let server = || {
        tower::service_fn(|_: http::Request<String>| async {
            Ok::<_, io::Error>(http::Response::new(String::new()))
        })
    };
    capture();
    let right = tower::ServiceBuilder::new()
        .layer(layer().paced(tower_backoff::PacingLayer::new()))
        .service(server());
    tower::ServiceExt::oneshot(right, get()).await.unwrap();
    assert!(!captured().iter().any(|e| e.contains("PacingLayer")));
    capture();
    let wrong = tower::ServiceBuilder::new()
        .layer(tower_backoff::PacingLayer::new())
        .layer(layer())
        .service(server());
    tower::ServiceExt::oneshot(wrong, get()).await.unwrap();
    let events = captured();
    assert!(
        events
            .iter()
            .any(|e| e.contains("PacingLayer sits above RetryLayer")),
        "{events:?}"
    );
}
