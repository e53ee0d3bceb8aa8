//! HTTP/2 says when the server did not process a request (RFC 9113 §8.7): a POST refused
//! that way is sent again, a POST whose stream was cancelled is not. A real h2 server (the
//! `h2` crate) and the real hyper-util client speaking HTTP/2.
#![cfg(feature = "hyper")]

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tower::{ServiceBuilder, ServiceExt};
use tower_backoff::{ConstantBackOff, RetryEvent, RetryLayer, RetryReason};

/// Serves HTTP/2: resets the first stream with `first`, answers 201 to the others.
/// Counts the requests it received.
async fn server(first: h2::Reason) -> (SocketAddr, Arc<Mutex<usize>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(0));
    let count = seen.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let count = count.clone();
            tokio::spawn(async move {
                let mut conn = h2::server::handshake(stream).await.unwrap();
                while let Some(Ok((_req, mut respond))) = conn.accept().await {
                    let n = {
                        let mut count = count.lock().unwrap();
                        *count += 1;
                        *count
                    };
                    if n == 1 {
                        respond.send_reset(first);
                    } else {
                        let res = Response::builder().status(201).body(()).unwrap();
                        respond.send_response(res, true).unwrap();
                    }
                }
            });
        }
    });
    (addr, seen)
}

async fn post(addr: SocketAddr) -> (Result<u16, String>, Vec<RetryReason>) {
    let reasons: Arc<Mutex<Vec<RetryReason>>> = Arc::default();
    let sink = reasons.clone();
    let layer = RetryLayer::new(ConstantBackOff::new(Duration::from_millis(1)).unwrap())
        .on_retry(move |e: &RetryEvent<'_>| sink.lock().unwrap().push(e.reason()));
    let client = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<Full<Bytes>>();
    let service = ServiceBuilder::new().layer(layer).service(client);
    let req = Request::builder()
        .method(Method::POST)
        .uri(format!("http://{addr}/orders"))
        .body(Full::new(Bytes::from_static(b"{\"item\":42}")))
        .unwrap();
    let res = service.oneshot(req).await;
    let reasons = reasons.lock().unwrap().clone();
    (
        res.map(|r| r.status().as_u16())
            .map_err(|e| format!("{e:?}")),
        reasons,
    )
}

#[tokio::test]
async fn a_post_the_server_refused_unprocessed_is_sent_again() {
    let (addr, seen) = server(h2::Reason::REFUSED_STREAM).await;
    let (res, reasons) = post(addr).await;
    assert_eq!(res, Ok(201));
    assert_eq!(*seen.lock().unwrap(), 2);
    assert_eq!(reasons.len(), 1);
}

#[tokio::test]
async fn a_post_whose_stream_the_server_cancelled_is_sent_once() {
    let (addr, seen) = server(h2::Reason::CANCEL).await;
    let (res, reasons) = post(addr).await;
    let err = res.unwrap_err();
    assert!(err.contains("CANCEL"), "{err}");
    assert_eq!(*seen.lock().unwrap(), 1);
    assert!(reasons.is_empty());
}
