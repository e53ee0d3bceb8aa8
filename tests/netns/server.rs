//! A real hyper server that counts what it processed, for the real-network tests.

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// What the server has processed so far.
#[derive(Default)]
pub struct Counts {
    posts: AtomicUsize,
    processed: Notify,
}

impl Counts {
    /// POSTs read whole and processed.
    pub fn posts(&self) -> usize {
        self.posts.load(Ordering::SeqCst)
    }

    /// Resolves once the next POST is processed (or at once if one was, unobserved).
    pub async fn processed(&self) {
        self.processed.notified().await
    }
}

/// Serves on `super::SERVER`: answers GETs at once; reads each POST whole, counts it (the
/// side effect of processing it), then never answers.
pub async fn start() -> (SocketAddr, Arc<Counts>) {
    let listener = TcpListener::bind((super::SERVER, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let shared = counts.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let counts = shared.clone();
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let counts = counts.clone();
                async move {
                    if req.method() == Method::POST {
                        req.into_body().collect().await.unwrap();
                        counts.posts.fetch_add(1, Ordering::SeqCst);
                        counts.processed.notify_one();
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    (addr, counts)
}

/// A request to the server, with a small JSON body.
pub fn request(method: Method, addr: SocketAddr) -> Request<Full<Bytes>> {
    Request::builder()
        .method(method)
        .uri(format!("http://{addr}/orders"))
        .body(Full::new(Bytes::from_static(b"{\"item\":42}")))
        .unwrap()
}
