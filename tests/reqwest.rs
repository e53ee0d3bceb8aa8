//! The retry layer in front of a `reqwest::Client` (feature `reqwest`), against a real hyper
//! server on loopback.
//!
//! The client runs on paused tokio time: a `Retry-After: 1` passes instantly in real time,
//! while the server stamps each arrival with the virtual clock, so the wait is measured.

mod support;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, Full, StreamBody};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::upstream::{self, reply};
use tower::{ServiceBuilder, ServiceExt};
use tower_backoff::body::ReplayBodyLayer;
use tower_backoff::integrations::reqwest::{ClientExt, ReqwestService};
use tower_backoff::{
    ConstantBackOff, GiveUp, PacingLayer, RetryEvent, RetryLayer, RetryReason, RetrySettings,
    RetryStats,
};

/// Long enough that a retry made after it could not be mistaken for one after `Retry-After`.
const BACKOFF: Duration = Duration::from_secs(10);

fn layer() -> RetryLayer<ConstantBackOff> {
    RetryLayer::new(ConstantBackOff::new(BACKOFF).unwrap()).with_settings(
        RetrySettings::new()
            .with_max_elapsed(Duration::from_secs(60))
            .unwrap(),
    )
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

/// A streaming body: `chunks` chunks of `size` bytes, with no known length.
fn stream_body(chunks: usize, size: usize) -> reqwest::Body {
    let frames = (0..chunks).map(move |i| {
        let byte = b'a' + (i % 26) as u8;
        Ok::<_, Infallible>(Frame::data(Bytes::from(vec![byte; size])))
    });
    reqwest::Body::wrap(StreamBody::new(tokio_stream::iter(frames)))
}

#[tokio::test(start_paused = true)]
async fn without_the_layer_the_503_is_final() {
    let (addr, arrivals) = upstream::serve(|n, _| match n {
        0 => reply(503, &[("retry-after", "1")], "busy"),
        _ => reply(200, &[], "ok"),
    })
    .await;
    let res = client()
        .get(format!("http://{addr}/"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(arrivals.lock().unwrap().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn waits_for_retry_after_then_gets_the_200() {
    let real_start = std::time::Instant::now();
    let (addr, arrivals) = upstream::serve(|n, _| match n {
        0 => reply(503, &[("retry-after", "1")], "busy"),
        _ => reply(200, &[], "ok"),
    })
    .await;
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let service = ServiceBuilder::new()
        .layer(layer().on_retry(move |e: &RetryEvent<'_>| {
            seen.lock()
                .unwrap()
                .push((e.reason(), e.retry_after(), e.delay()));
        }))
        .service(ReqwestService::new(client()));

    let req = Request::get(format!("http://{addr}/items"))
        .body(String::new())
        .unwrap();
    let res = service.oneshot(req).await.unwrap();

    assert_eq!(res.status(), StatusCode::OK);
    let stats = *res.extensions().get::<RetryStats>().unwrap();
    assert_eq!(stats.attempts, 2);
    assert_eq!(res.into_body().collect().await.unwrap().to_bytes(), "ok");
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 2);
    let gap = arrivals[1].at - arrivals[0].at;
    assert!(
        gap >= Duration::from_secs(1) && gap < BACKOFF,
        "retried after {gap:?}, not after the server's Retry-After"
    );
    let events = events.lock().unwrap();
    assert_eq!(events.len(), 1);
    let (reason, asked, waited) = events[0];
    assert_eq!(reason, RetryReason::Status(StatusCode::SERVICE_UNAVAILABLE));
    assert_eq!(asked, Some(Duration::from_secs(1)));
    // Never sooner than asked, spread by at most a fifth of it.
    assert!(waited >= Duration::from_secs(1) && waited < Duration::from_millis(1200));
    assert!(real_start.elapsed() < Duration::from_secs(1));
}

/// A streaming `reqwest::Body` is not `Clone`; `ReplayBodyLayer` buffers it as it is sent,
/// so the retry sends the same bytes again.
#[tokio::test(start_paused = true)]
async fn a_streaming_body_is_replayed_through_replay_body_layer() {
    let (addr, arrivals) = upstream::serve(|n, _| match n {
        0 => reply(503, &[("retry-after", "0")], "busy"),
        _ => reply(201, &[], "created"),
    })
    .await;
    let service = ServiceBuilder::new()
        .layer(ReplayBodyLayer::new().with_max_bytes(64 * 1024))
        .layer(layer())
        .service(ReqwestService::new(client()));

    let req = Request::put(format!("http://{addr}/upload"))
        .body(stream_body(8, 1024))
        .unwrap();
    let res = service.oneshot(req).await.unwrap();

    assert_eq!(res.status(), StatusCode::CREATED);
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 2);
    assert_eq!(arrivals[0].body.len(), 8 * 1024);
    assert_eq!(arrivals[1].body, arrivals[0].body);
    assert_eq!(arrivals[1].method, Method::PUT);
}

/// Past the replay cap the body is still sent whole, once; the retry is refused (the
/// body's `ReplayGuard` is capped) and the server's answer comes back as it is.
#[tokio::test(start_paused = true)]
async fn a_streaming_body_past_the_cap_is_sent_once_and_not_retried() {
    let (addr, arrivals) = upstream::serve(|n, _| match n {
        0 => reply(503, &[("retry-after", "0")], "busy"),
        _ => reply(201, &[], "created"),
    })
    .await;
    let retries = Arc::new(Mutex::new(0));
    let counted = retries.clone();
    let service = ServiceBuilder::new()
        .layer(ReplayBodyLayer::new().with_max_bytes(1024))
        .layer(layer().on_retry(move |_: &RetryEvent<'_>| *counted.lock().unwrap() += 1))
        .service(ReqwestService::new(client()));

    let req = Request::put(format!("http://{addr}/upload"))
        .body(stream_body(8, 1024))
        .unwrap();
    let res = service.oneshot(req).await.unwrap();

    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    let stats = res.extensions().get::<RetryStats>().unwrap();
    assert_eq!(stats.attempts, 1);
    assert_eq!(stats.gave_up, Some(GiveUp::BodyNotReplayable));
    assert_eq!(*retries.lock().unwrap(), 0);
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 1);
    assert_eq!(arrivals[0].body.len(), 8 * 1024);
}

/// reqwest's connect errors are classified as connect failures: a POST is retried, as it
/// never reached a server.
#[tokio::test(start_paused = true)]
async fn connection_refused_is_retried_even_for_a_post() {
    let addr = upstream::refused_addr();
    let reasons = Arc::new(Mutex::new(Vec::new()));
    let seen = reasons.clone();
    let service = ServiceBuilder::new()
        .layer(
            RetryLayer::new(ConstantBackOff::new(Duration::from_millis(100)).unwrap())
                .on_retry(move |e: &RetryEvent<'_>| seen.lock().unwrap().push(e.reason())),
        )
        .service(ReqwestService::new(client()));
    let req = Request::post(format!("http://{addr}/orders"))
        .body(Full::new(Bytes::from_static(b"{}")))
        .unwrap();
    let err = service.oneshot(req).await.unwrap_err();
    assert_eq!(err.stats().attempts, 4);
    let err = err.into_inner().downcast::<reqwest::Error>().unwrap();
    assert!(err.is_connect(), "{err:?}");
    assert_eq!(*reasons.lock().unwrap(), [RetryReason::Connect; 3]);
}

/// A URI reqwest cannot send to is an error of the call, not a panic.
#[tokio::test]
async fn a_relative_uri_is_an_error() {
    let service = ReqwestService::new(client());
    let err = service
        .oneshot(Request::get("/relative").body(String::new()).unwrap())
        .await
        .unwrap_err();
    assert!(err.is_builder(), "{err:?}");
}

/// A small body of known length that fails while it is read: reqwest reports the failure
/// as its own error, and the server gets no request.
#[tokio::test]
async fn a_small_body_that_fails_is_reqwests_error() {
    struct Broken;
    impl http_body::Body for Broken {
        type Data = Bytes;
        type Error = std::io::Error;
        fn poll_frame(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
            std::task::Poll::Ready(Some(Err(std::io::ErrorKind::BrokenPipe.into())))
        }
        fn size_hint(&self) -> http_body::SizeHint {
            http_body::SizeHint::with_exact(5)
        }
    }
    let (addr, arrivals) = upstream::serve(|_, _| reply(200, &[], "ok")).await;
    let service = ReqwestService::new(client());
    let request = Request::post(format!("http://{addr}/orders"))
        .body(Broken)
        .unwrap();
    let err = service.oneshot(request).await.unwrap_err();
    assert!(err.is_request() || err.is_body(), "{err:?}");
    assert!(arrivals.lock().unwrap().is_empty());
}

/// A body that says it is `.1` bytes long, whatever it yields.
struct Exactly<B>(B, u64);

impl<B: http_body::Body + Unpin> http_body::Body for Exactly<B> {
    type Data = B::Data;
    type Error = B::Error;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        std::pin::Pin::new(&mut self.0).poll_frame(cx)
    }
    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.1)
    }
}

/// What a server received of a request body: the headers that frame it, its data and
/// its trailers.
type Wire = (
    Option<http::HeaderValue>,
    Option<http::HeaderValue>,
    Bytes,
    Option<http::HeaderMap>,
);

fn wire(arrival: &upstream::Arrival) -> Wire {
    (
        arrival.headers.get("content-length").cloned(),
        arrival.headers.get("transfer-encoding").cloned(),
        arrival.body.clone(),
        arrival.trailers.clone(),
    )
}

/// Sends a body `make` builds through [`ReqwestService`], then another with reqwest itself:
/// the server receives the same from both. Returns what it received.
async fn same_on_the_wire_as_reqwest<B>(make: impl Fn() -> B) -> Wire
where
    B: http_body::Body + Send + Sync + 'static,
    B::Data: Into<Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (addr, arrivals) = upstream::serve(|_, _| reply(201, &[], "created")).await;
    let url = format!("http://{addr}/orders");
    let request = Request::post(&url).body(make()).unwrap();
    let ours = ReqwestService::new(client())
        .oneshot(request)
        .await
        .unwrap();
    assert_eq!(ours.status(), StatusCode::CREATED);
    let theirs = client()
        .post(&url)
        .body(reqwest::Body::wrap(make()))
        .send()
        .await
        .unwrap();
    assert_eq!(theirs.status(), StatusCode::CREATED);
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(wire(&arrivals[0]), wire(&arrivals[1]));
    wire(&arrivals[0])
}

/// A small body of known length whose data is not there yet is not waited for before
/// the request goes: it streams, and the server gets all of it, under its length.
#[tokio::test]
async fn a_small_body_still_arriving_is_streamed_whole() {
    let received = same_on_the_wire_as_reqwest(|| {
        let (mut tx, body) = http_body_util::channel::Channel::<Bytes, Infallible>::new(1);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            tx.send_data(Bytes::from_static(b"order 42")).await.unwrap();
        });
        Exactly(body, 8)
    })
    .await;
    assert_eq!(received.0.unwrap(), "8");
    assert_eq!(received.2, "order 42".as_bytes());
}

/// A small body whose data is all there but which ends with trailers goes as reqwest sends
/// it: over HTTP/1.1, under its length and without them.
#[tokio::test]
async fn a_small_body_with_trailers_goes_as_reqwest_sends_it() {
    let received = same_on_the_wire_as_reqwest(|| {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-checksum", "c0ffee".parse().unwrap());
        let frames = [
            Ok::<_, Infallible>(Frame::data(Bytes::from_static(b"order 42"))),
            Ok(Frame::trailers(trailers)),
        ];
        Exactly(StreamBody::new(tokio_stream::iter(frames)), 8)
    })
    .await;
    assert_eq!(received.0.unwrap(), "8");
    assert_eq!(received.2, "order 42".as_bytes());
}

/// A small body that yields more than the length it declared goes as reqwest sends it:
/// under that length, the surplus cut off (not streamed whole, as it was).
#[tokio::test]
async fn a_small_body_longer_than_it_said_goes_as_reqwest_sends_it() {
    let received = same_on_the_wire_as_reqwest(|| {
        Exactly(Full::new(Bytes::from_static(b"order 42 and more")), 8)
    })
    .await;
    assert_eq!(received.0.unwrap(), "8");
    assert_eq!(received.2, "order 42".as_bytes());
}

// ---- RetryClient: reqwest's own request and response types ----

/// The cases reqwest 0.12 shares (`tests/reqwest_0_12.rs` runs them too).
mod shared {
    use tower_backoff::integrations::reqwest::{ClientExt, RetryClient};
    include!("support/retry_client.rs");
}

/// A `reqwest::Request` with a streaming body, sent with `execute`: buffered as it is sent
/// and replayed on the retry.
#[tokio::test(start_paused = true)]
async fn retry_client_executes_a_streaming_request_and_replays_it() {
    let (addr, arrivals) = upstream::serve(|n, _| match n {
        0 => reply(503, &[("retry-after", "0")], "busy"),
        _ => reply(201, &[], "created"),
    })
    .await;
    let client = client().with_retry(layer());
    let request = client
        .client()
        .put(format!("http://{addr}/upload"))
        .body(stream_body(8, 1024))
        .build()
        .unwrap();

    let res = client.execute(request).await.unwrap();

    assert_eq!(res.status(), StatusCode::CREATED);
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 2);
    assert_eq!(arrivals[0].body.len(), 8 * 1024);
    assert_eq!(arrivals[1].body, arrivals[0].body);
}

/// A streaming body longer than the replay cap is sent once and not retried.
#[tokio::test(start_paused = true)]
async fn retry_client_does_not_retry_a_stream_past_the_cap() {
    let (addr, arrivals) = upstream::serve(|n, _| match n {
        0 => reply(503, &[("retry-after", "0")], "busy"),
        _ => reply(201, &[], "created"),
    })
    .await;
    let client = client().with_retry(layer()).with_max_replay_bytes(1024);

    let res = client
        .put(format!("http://{addr}/upload"))
        .body(stream_body(8, 1024))
        .send()
        .await
        .unwrap();

    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    let stats = res.extensions().get::<RetryStats>().unwrap();
    assert_eq!(stats.gave_up, Some(GiveUp::BodyNotReplayable));
    assert_eq!(arrivals.lock().unwrap().len(), 1);
}

/// The error of a POST through `client` to a port nobody listens on.
macro_rules! post_to_a_refused_port {
    ($client:expr) => {{
        let addr = upstream::refused_addr();
        let post = $client.post(format!("http://{addr}/orders")).body("{}");
        post.send().await.unwrap_err()
    }};
}

/// Connection refused: the error still says so, and holds reqwest's error.
#[tokio::test(start_paused = true)]
async fn retry_client_reports_connect_errors() {
    let client = client().with_retry(RetryLayer::new(
        ConstantBackOff::new(Duration::from_millis(100)).unwrap(),
    ));
    let err = post_to_a_refused_port!(client);
    assert!(err.is_connect(), "{err:?}");
    assert!(err.reqwest().is_some_and(|e| e.url().is_some()));
}

/// The quick start's stack (retry over pacing) as a reqwest client: a 429 paces the
/// destination and is retried after its `Retry-After`; a connect error still reads as
/// reqwest's, through pacing's boxed error.
#[tokio::test(start_paused = true)]
async fn retry_client_with_pacing_retries_a_429_and_reports_connect_errors() {
    let (addr, arrivals) = upstream::serve(|n, _| match n {
        0 => reply(429, &[("retry-after", "1")], "slow down"),
        _ => reply(200, &[], "ok"),
    })
    .await;
    let paced = || layer().paced(PacingLayer::new());
    let retrying = client().with_retry(paced());
    let res = retrying
        .get(format!("http://{addr}/items"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.extensions().get::<RetryStats>().unwrap().attempts, 2);
    let gap = {
        let arrivals = arrivals.lock().unwrap();
        arrivals[1].at - arrivals[0].at
    };
    assert!(gap >= Duration::from_secs(1) && gap < BACKOFF, "{gap:?}");

    let err = post_to_a_refused_port!(client().with_retry(paced()));
    assert!(err.is_connect(), "{err:?}");
    assert!(err.reqwest().is_some_and(|e| e.url().is_some()));
}

/// A URL reqwest refuses is an error of the send, not a panic.
#[tokio::test]
async fn retry_client_reports_a_bad_url() {
    let client = client().with_retry(layer());
    let err = client.get("not a url").send().await.unwrap_err();
    assert!(
        err.reqwest().is_some_and(reqwest::Error::is_builder),
        "{err:?}"
    );
}

/// A per-request timeout set on the builder bounds every attempt: it survives the trip
/// through the layer (reqwest keeps it in the request's extensions).
#[tokio::test(start_paused = true)]
async fn retry_client_keeps_the_per_request_timeout() {
    // A server that accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(Mutex::new(Vec::new()));
    let held = accepted.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            held.lock().unwrap().push(stream);
        }
    });
    let client = client().with_retry(RetryLayer::new(
        ConstantBackOff::new(Duration::from_millis(100)).unwrap(),
    ));

    let sent = client
        .get(format!("http://{addr}/slow"))
        .timeout(Duration::from_secs(2))
        .send();
    let err = tokio::time::timeout(Duration::from_secs(60), sent)
        .await
        .expect("the per-request timeout was lost")
        .unwrap_err();

    assert!(err.is_timeout(), "{err:?}");
    assert!(
        accepted.lock().unwrap().len() >= 2,
        "a timed-out GET is retried"
    );
}
