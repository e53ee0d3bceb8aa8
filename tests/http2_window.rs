//! A response that will be retried frees its connection at once: its unread body must not
//! hold the HTTP/2 receive window that healthy streams on the same connection share. A real
//! hyper HTTP/2 server and the real hyper-util client, on one connection.
#![cfg(feature = "hyper")]

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_backoff::{ConstantBackOff, RetryLayer, RetrySettings};

/// Serves HTTP/2: `/busy` answers 503 with 512 KiB of body and `Retry-After: 8`, `/ok`
/// 200 with 64 KiB. Counts the requests to `/busy`.
async fn server() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let busy = Arc::new(AtomicUsize::new(0));
    let count = busy.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let count = count.clone();
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let count = count.clone();
                async move {
                    let res = if req.uri().path() == "/busy" {
                        count.fetch_add(1, Ordering::SeqCst);
                        Response::builder()
                            .status(503)
                            .header("retry-after", "8")
                            .body(Full::new(Bytes::from(vec![b'x'; 512 * 1024])))
                    } else {
                        Response::builder().body(Full::new(Bytes::from(vec![b'y'; 64 * 1024])))
                    };
                    Ok::<_, Infallible>(res.unwrap())
                }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, busy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retried_503s_do_not_stall_a_healthy_stream_on_their_connection() {
    let (addr, busy) = server().await;
    // One HTTP/2 connection for every request, as a gRPC or HTTP/2 client keeps.
    let client = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<Full<Bytes>>();
    let settings = RetrySettings::new().with_retry_after_jitter(0.0).unwrap();
    let client = ServiceBuilder::new()
        .layer(
            RetryLayer::new(ConstantBackOff::new(Duration::from_millis(10)).unwrap())
                .with_settings(settings),
        )
        .service(client);
    let get = |path: &str| {
        Request::get(format!("http://{addr}{path}"))
            .body(Full::default())
            .unwrap()
    };
    // Twelve requests answered 503 with 6 MiB of body in all: more than the connection's
    // receive window. Each retry then waits 8 s.
    let waiting: Vec<_> = (0..12)
        .map(|_| tokio::spawn(client.clone().oneshot(get("/busy"))))
        .collect();
    while busy.load(Ordering::SeqCst) < 12 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The healthy request is answered while they wait, not after.
    let healthy = async {
        let res = client
            .clone()
            .ready()
            .await
            .unwrap()
            .call(get("/ok"))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        res.into_body().collect().await.unwrap().to_bytes().len()
    };
    let len = tokio::time::timeout(Duration::from_secs(4), healthy)
        .await
        .expect("the healthy stream is stalled behind the held 503 bodies");
    assert_eq!(len, 64 * 1024);
    assert_eq!(busy.load(Ordering::SeqCst), 12, "no retry was sent yet");
    for task in waiting {
        task.abort();
    }
}
