//! A POST the server processed is never sent again when the connection then fails with a
//! route error: the real hyper-util client, a real hyper server that counts requests, and
//! a real `EHOSTUNREACH` on the established connection (see `netns` for how).
#![cfg(feature = "hyper")]

mod netns;

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::convert::Infallible;
use std::error::Error;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::time::timeout;
use tower::{ServiceBuilder, ServiceExt};
use tower_backoff::classify::{ErrorClass, default_error_class};
use tower_backoff::{ConstantBackOff, RetryEvent, RetryLayer, RetryReason};

/// How long the client's kernel keeps retransmitting unacknowledged data.
const USER_TIMEOUT: Duration = Duration::from_millis(300);
/// Bound on every wait of the test: the failure comes after about `USER_TIMEOUT`.
const PATIENCE: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Server {
    posts: AtomicUsize,
    gets: AtomicUsize,
    processed: Notify,
}

/// A hyper server on `netns::SERVER`: answers GETs; reads each POST whole, counts it (the
/// side effect of processing it), then never answers.
async fn server() -> (SocketAddr, Arc<Server>) {
    let listener = TcpListener::bind((netns::SERVER, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = Arc::new(Server::default());
    let shared = state.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let state = shared.clone();
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let state = state.clone();
                async move {
                    if req.method() == Method::POST {
                        req.into_body().collect().await.unwrap();
                        state.posts.fetch_add(1, Ordering::SeqCst);
                        state.processed.notify_one();
                        std::future::pending::<()>().await;
                    }
                    state.gets.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    (addr, state)
}

fn request(method: Method, addr: SocketAddr) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(format!("http://{addr}/orders"))
        .body(Full::new(Bytes::from_static(b"{\"item\":42}")))
        .unwrap()
}

fn find<'a, T: Error + 'static>(err: &'a (dyn Error + 'static)) -> Option<&'a T> {
    let mut e = Some(err);
    while let Some(err) = e {
        if let Some(found) = err.downcast_ref::<T>() {
            return Some(found);
        }
        e = match err.downcast_ref::<io::Error>().and_then(|io| io.get_ref()) {
            Some(inner) => Some(inner),
            None => err.source(),
        };
    }
    None
}

#[test]
fn a_post_processed_before_the_route_was_lost_is_sent_once() {
    netns::run(
        "a_post_processed_before_the_route_was_lost_is_sent_once",
        || {
            tokio::runtime::Runtime::new()
                .unwrap()
                .block_on(post_processed_before_the_route_was_lost())
        },
    );
}

async fn post_processed_before_the_route_was_lost() {
    let (addr, server) = server().await;
    let mut connector = HttpConnector::new();
    connector.set_local_address(Some(netns::CLIENT));
    connector.set_tcp_user_timeout(Some(USER_TIMEOUT));
    let client = Client::builder(TokioExecutor::new()).build(connector);
    // A retry would need the network back: the hook restores it, so that a wrongful
    // retry reaches the server and is counted.
    let retries: Arc<Mutex<Vec<RetryReason>>> = Arc::default();
    let seen = retries.clone();
    let layer = RetryLayer::new(ConstantBackOff::new(Duration::from_millis(10))).on_retry(
        move |e: &RetryEvent<'_>| {
            netns::restore();
            seen.lock().unwrap().push(e.reason());
        },
    );
    let service = ServiceBuilder::new().layer(layer).service(client);

    // An established, pooled connection.
    let res = service
        .clone()
        .oneshot(request(Method::GET, addr))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    // The server stops acknowledging: the POST reaches it but stays unacknowledged.
    netns::unreachable(netns::CLIENT);
    let post = tokio::spawn(service.oneshot(request(Method::POST, addr)));
    timeout(PATIENCE, server.processed.notified())
        .await
        .expect("the server processed the POST");
    // Then the route to the server is lost too: the retransmission fails.
    netns::unreachable(netns::SERVER);

    let res = timeout(PATIENCE, post).await;
    assert_eq!(
        server.posts.load(Ordering::SeqCst),
        1,
        "the processed POST was sent again (retries: {:?})",
        retries.lock().unwrap()
    );
    let err = res
        .expect("the POST failed in time")
        .unwrap()
        .expect_err("the server never answered the POST");
    assert!(retries.lock().unwrap().is_empty());

    // The failure is the one of the issue: not a connect error, over EHOSTUNREACH.
    let client_err = find::<hyper_util::client::legacy::Error>(&err).expect("a client error");
    assert!(!client_err.is_connect(), "{err:?}");
    let io_err = find::<io::Error>(&err).unwrap_or_else(|| panic!("no io::Error in {err:?}"));
    assert_eq!(io_err.kind(), io::ErrorKind::HostUnreachable, "{err:?}");
    assert_eq!(default_error_class(&err), ErrorClass::Transport);
    println!("the established connection failed with: {err:?}");
}
