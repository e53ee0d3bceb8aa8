//! The layer in front of a real hyper-util client, against real hyper servers on loopback.
//!
//! The client runs on paused tokio time: the retry waits (whole seconds of `Retry-After`)
//! pass instantly in real time, while the server stamps each arrival with the virtual
//! clock, so the waits are measured exactly.
#![cfg(feature = "hyper")]

mod support;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use support::backoffs::Fixed;
use support::time::{MS, SEC};
use support::upstream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};
use tower_backoff::{
    GiveUp, RetryError, RetryEvent, RetryLayer, RetryReason, RetrySettings, RetryStats,
};

type Arrivals = Arc<Mutex<Vec<(Instant, Method)>>>;
type Reply = fn(usize) -> Response<Full<Bytes>>;

/// Serves `listener` with hyper, answering the n-th request (from 0) with `reply(n)`.
fn serve(listener: TcpListener, reply: Reply) -> Arrivals {
    let arrivals: Arrivals = Arc::default();
    let log = arrivals.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let log = log.clone();
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let mut log = log.lock().unwrap();
                let n = log.len();
                log.push((Instant::now(), req.method().clone()));
                std::future::ready(Ok::<_, Infallible>(reply(n)))
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    arrivals
}

async fn server(reply: Reply) -> (SocketAddr, Arrivals) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (addr, serve(listener, reply))
}

fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

fn request(method: Method, addr: SocketAddr) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(format!("http://{addr}/items"))
        .body(Full::new(Bytes::from_static(b"{\"n\":1}")))
        .unwrap()
}

fn status(code: u16) -> Response<Full<Bytes>> {
    Response::builder()
        .status(code)
        .body(Full::new(Bytes::from_static(b"-")))
        .unwrap()
}

type Seen = Arc<Mutex<Vec<(Duration, RetryReason)>>>;

fn recorder() -> (Seen, impl Fn(&RetryEvent<'_>) + Send + Sync + 'static) {
    let seen: Seen = Arc::default();
    let sink = seen.clone();
    (seen, move |e: &RetryEvent<'_>| {
        sink.lock().unwrap().push((e.delay(), e.reason()))
    })
}

#[tokio::test(start_paused = true)]
async fn waits_for_retry_after_seconds_then_http_date_then_backs_off_on_429() {
    let real_start = std::time::Instant::now();
    let (addr, arrivals) = server(|n| match n {
        0 => {
            let mut res = status(503);
            res.headers_mut()
                .insert("retry-after", "1".parse().unwrap());
            res
        }
        1 => {
            let mut res = status(503);
            let date = httpdate::fmt_http_date(SystemTime::now() + 2 * SEC);
            res.headers_mut()
                .insert("retry-after", date.parse().unwrap());
            res
        }
        2 => status(429),
        _ => status(200),
    })
    .await;
    let (seen, hook) = recorder();
    let client = ServiceBuilder::new()
        .layer(
            RetryLayer::new(Fixed)
                .with_settings(
                    RetrySettings::new()
                        .with_max_attempts(4)
                        .unwrap()
                        .with_retry_after_jitter(0.0)
                        .unwrap(),
                )
                .on_retry(hook),
        )
        .service(client());

    let res = client.oneshot(request(Method::GET, addr)).await.unwrap();

    assert_eq!(res.status(), StatusCode::OK);
    let arrivals = arrivals.lock().unwrap().clone();
    assert_eq!(arrivals.len(), 4);
    let gaps: Vec<Duration> = arrivals.windows(2).map(|w| w[1].0 - w[0].0).collect();
    let seen = seen.lock().unwrap().clone();
    let reasons: Vec<RetryReason> = seen.iter().map(|s| s.1).collect();
    assert_eq!(
        reasons,
        [
            RetryReason::Status(StatusCode::SERVICE_UNAVAILABLE),
            RetryReason::Status(StatusCode::SERVICE_UNAVAILABLE),
            RetryReason::Status(StatusCode::TOO_MANY_REQUESTS),
        ]
    );
    // Delay-seconds: exactly 1 s.
    assert_eq!(seen[0].0, SEC);
    // The HTTP-date has a 1 s resolution: "now + 2 s", truncated, read a moment later.
    assert!(
        (900 * MS..=2 * SEC).contains(&seen[1].0),
        "HTTP-date delay {:?}",
        seen[1].0
    );
    // 429 without Retry-After: the backoff's delay.
    assert_eq!(seen[2].0, 100 * MS);
    // Never sooner than the server asked; requests themselves take no virtual time.
    for (gap, (delay, _)) in gaps.iter().zip(&seen) {
        assert!(
            *gap >= *delay && *gap < *delay + 10 * MS,
            "{gap:?} vs {delay:?}"
        );
    }
    let waited: Duration = seen.iter().map(|s| s.0).sum();
    assert_eq!(
        res.extensions().get::<RetryStats>(),
        Some(&RetryStats {
            attempts: 4,
            waited,
            gave_up: None,
        })
    );
    assert!(real_start.elapsed() < SEC, "ran on virtual time");
}

/// A GET to `addr` through the retry layer, `Retry-After` waited exactly (no spread), once
/// answered `first`: it must succeed on its second attempt. Returns the delay waited.
async fn delay_waited_after(first: Reply) -> Duration {
    let (addr, arrivals) = server(first).await;
    let (seen, hook) = recorder();
    let settings = RetrySettings::new().with_retry_after_jitter(0.0).unwrap();
    let retry = RetryLayer::new(Fixed)
        .with_settings(settings)
        .on_retry(hook);
    let client = ServiceBuilder::new().layer(retry).service(client());
    let res = client.oneshot(request(Method::GET, addr)).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let arrivals = arrivals.lock().unwrap().clone();
    assert_eq!(arrivals.len(), 2);
    let delay = seen.lock().unwrap()[0].0;
    assert!(arrivals[1].0 - arrivals[0].0 >= delay);
    delay
}

/// OpenAI and Azure ask for a delay in milliseconds (`retry-after-ms`), which wins over
/// `Retry-After` in whole seconds, as their SDKs read it.
#[tokio::test(start_paused = true)]
async fn retry_after_ms_is_waited_to_the_millisecond() {
    let delay = delay_waited_after(|n| match n {
        0 => {
            let mut res = status(429);
            res.headers_mut()
                .insert("retry-after", "2".parse().unwrap());
            res.headers_mut()
                .insert("retry-after-ms", "1500".parse().unwrap());
            res
        }
        _ => status(200),
    })
    .await;
    assert_eq!(delay, 1500 * MS);
}

/// A server whose clock is a minute ahead asks, by date, for a retry in 2 s: its date is
/// read on its own clock (its `Date` field), so the client waits 2 s, not 62.
#[tokio::test(start_paused = true)]
async fn an_http_date_is_read_on_the_servers_clock() {
    let delay = delay_waited_after(|n| match n {
        0 => {
            let ahead = SystemTime::now() + 60 * SEC;
            let mut res = status(503);
            let headers = res.headers_mut();
            headers.insert("date", httpdate::fmt_http_date(ahead).parse().unwrap());
            let retry = httpdate::fmt_http_date(ahead + 2 * SEC);
            headers.insert("retry-after", retry.parse().unwrap());
            res
        }
        _ => status(200),
    })
    .await;
    assert!((SEC..=2 * SEC).contains(&delay), "waited {delay:?}");
}

/// A server whose clock is a minute behind says its quota resets at a Unix time 2 s on
/// its clock: the client waits those 2 s, not nothing (the local past).
#[tokio::test(start_paused = true)]
async fn a_reset_timestamp_is_read_on_the_servers_clock() {
    let delay = delay_waited_after(|n| match n {
        0 => {
            let behind = SystemTime::now() - 60 * SEC;
            let unix = behind.duration_since(std::time::UNIX_EPOCH).unwrap();
            let mut res = status(503);
            let headers = res.headers_mut();
            headers.insert("date", httpdate::fmt_http_date(behind).parse().unwrap());
            headers.insert("ratelimit-remaining", "0".parse().unwrap());
            let reset = (unix.as_secs() + 2).to_string();
            headers.insert("ratelimit-reset", reset.parse().unwrap());
            res
        }
        _ => status(200),
    })
    .await;
    assert!((SEC..=2 * SEC).contains(&delay), "waited {delay:?}");
}

#[tokio::test(start_paused = true)]
async fn a_post_answered_503_is_sent_once_and_a_get_is_not() {
    let (addr, arrivals) = server(|_| status(503)).await;
    let client = ServiceBuilder::new()
        .layer(RetryLayer::new(Fixed))
        .service(client());

    let res = client
        .clone()
        .oneshot(request(Method::POST, addr))
        .await
        .unwrap();
    assert_eq!(res.status(), 503);
    assert_eq!(res.extensions().get::<RetryStats>().unwrap().attempts, 1);
    assert_eq!(arrivals.lock().unwrap().len(), 1, "the POST was sent once");

    let res = client.oneshot(request(Method::GET, addr)).await.unwrap();
    assert_eq!(res.status(), 503);
    assert_eq!(
        arrivals.lock().unwrap().len(),
        1 + 4,
        "the GET was tried 4 times"
    );
}

/// Reads one request, then closes the connection without answering: the client sees an
/// incomplete message, so the request may have been processed.
async fn hang_up_server() -> (SocketAddr, Arc<Mutex<usize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(Mutex::new(0));
    let counter = count.clone();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let n = {
                let mut c = counter.lock().unwrap();
                *c += 1;
                *c
            };
            if n > 1 {
                let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                stream.write_all(ok).await.unwrap();
            }
            drop(stream);
        }
    });
    (addr, count)
}

#[tokio::test(start_paused = true)]
async fn a_post_that_may_have_arrived_is_not_resent_but_a_get_is() {
    let (addr, count) = hang_up_server().await;
    let err = ServiceBuilder::new()
        .layer(RetryLayer::new(Fixed))
        .service(client())
        .oneshot(request(Method::POST, addr))
        .await
        .unwrap_err();
    assert_eq!(err.stats().attempts, 1);
    assert_eq!(err.stats().gave_up, Some(GiveUp::NotIdempotent));
    assert!(!hyper_error(err).is_connect());
    assert_eq!(*count.lock().unwrap(), 1, "the POST was sent once");

    let (addr, count) = hang_up_server().await;
    let (seen, hook) = recorder();
    let res = ServiceBuilder::new()
        .layer(RetryLayer::new(Fixed).on_retry(hook))
        .service(client())
        .oneshot(request(Method::PUT, addr))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(*count.lock().unwrap(), 2);
    assert_eq!(*seen.lock().unwrap(), [(100 * MS, RetryReason::Transport)]);
}

/// The hyper-util error a request finally failed with.
fn hyper_error(err: RetryError) -> Box<hyper_util::client::legacy::Error> {
    err.into_inner()
        .downcast()
        .expect("a hyper-util client error")
}

#[tokio::test(start_paused = true)]
async fn a_refused_post_is_retried_and_gives_up_with_the_connect_error() {
    let (_socket, addr) = upstream::unlistened();
    let (seen, hook) = recorder();
    let err = ServiceBuilder::new()
        .layer(RetryLayer::new(Fixed).on_retry(hook))
        .service(client())
        .oneshot(request(Method::POST, addr))
        .await
        .unwrap_err();
    assert_eq!(err.stats().attempts, 4);
    assert!(hyper_error(err).is_connect());
    assert_eq!(*seen.lock().unwrap(), [(100 * MS, RetryReason::Connect); 3]);
}

#[tokio::test(start_paused = true)]
async fn a_refused_post_succeeds_once_the_server_is_up() {
    let (socket, addr) = upstream::unlistened();
    let socket = Mutex::new(Some(socket));
    let arrivals: Arc<Mutex<Option<Arrivals>>> = Arc::default();
    let slot = arrivals.clone();
    // The server comes up during the first retry's wait.
    let hook = move |e: &RetryEvent<'_>| {
        assert_eq!(e.reason(), RetryReason::Connect);
        let listener = socket.lock().unwrap().take().unwrap().listen(16).unwrap();
        *slot.lock().unwrap() = Some(serve(listener, |_| status(201)));
    };
    let res = ServiceBuilder::new()
        .layer(RetryLayer::new(Fixed).on_retry(hook))
        .service(client())
        .oneshot(request(Method::POST, addr))
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    assert_eq!(
        res.extensions().get::<RetryStats>(),
        Some(&RetryStats {
            attempts: 2,
            waited: 100 * MS,
            gave_up: None,
        })
    );
    let arrivals = arrivals.lock().unwrap().clone().unwrap();
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 1);
    assert_eq!(arrivals[0].1, Method::POST);
}
