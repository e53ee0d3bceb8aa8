//! A scripted HTTP/1 upstream on 127.0.0.1 (hyper), recording what it receives.

#![allow(dead_code)]

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::time::Instant;

/// One request as the upstream received it (`at` on tokio's clock, paused or not).
#[derive(Clone, Debug)]
pub struct Arrival {
    pub at: Instant,
    pub method: Method,
    pub path: String,
    /// The URI's query string, if it has one.
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The body's trailers, if it sent any.
    pub trailers: Option<HeaderMap>,
}

/// What the upstream saw, shared with the test.
pub type Arrivals = Arc<Mutex<Vec<Arrival>>>;

/// Answers the `n`-th request (from 0) it receives.
pub type Script = Arc<dyn Fn(usize, &Arrival) -> Response<Full<Bytes>> + Send + Sync>;

/// Serves `script` on a free loopback port; returns its address and its arrivals.
pub async fn serve(
    script: impl Fn(usize, &Arrival) -> Response<Full<Bytes>> + Send + Sync + 'static,
) -> (SocketAddr, Arrivals) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let arrivals: Arrivals = Arc::default();
    let log = arrivals.clone();
    let script: Script = Arc::new(script);
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let log = log.clone();
            let script = script.clone();
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let log = log.clone();
                let script = script.clone();
                async move {
                    let (parts, body) = req.into_parts();
                    let collected = body.collect().await.ok();
                    let trailers = collected.as_ref().and_then(|c| c.trailers().cloned());
                    let body = collected.map(|c| c.to_bytes()).unwrap_or_default();
                    let arrival = Arrival {
                        at: Instant::now(),
                        method: parts.method,
                        path: parts.uri.path().to_owned(),
                        query: parts.uri.query().map(str::to_owned),
                        headers: parts.headers,
                        body,
                        trailers,
                    };
                    let n = {
                        let mut log = log.lock().unwrap();
                        log.push(arrival.clone());
                        log.len() - 1
                    };
                    Ok::<_, Infallible>(script(n, &arrival))
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    (addr, arrivals)
}

/// A response with `status`, the given headers and a short body.
pub fn reply(status: u16, headers: &[(&'static str, &str)], body: &str) -> Response<Full<Bytes>> {
    let mut res = Response::builder().status(status);
    for (name, value) in headers {
        res = res.header(*name, *value);
    }
    res.body(Full::new(Bytes::from(body.to_owned()))).unwrap()
}

/// A socket bound to a port of its own, not listening: connections to it are refused
/// until it listens, and no other server can take its port meanwhile.
pub fn unlistened() -> (tokio::net::TcpSocket, SocketAddr) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    (socket, addr)
}

/// An address on which nothing listens, refusing every connection: an [`unlistened`]
/// socket's, kept for the whole test process.
pub fn refused_addr() -> SocketAddr {
    static DEAD: std::sync::OnceLock<(tokio::net::TcpSocket, SocketAddr)> =
        std::sync::OnceLock::new();
    DEAD.get_or_init(unlistened).1
}
