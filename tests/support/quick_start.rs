//! The README's quick start (the retry layer over pacing, or alone) on hyper-util's client,
//! and workers that send GETs through it to a real server.

#![allow(dead_code)]

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::time::Instant;
use tower::util::BoxCloneSyncService;
use tower::{Layer, ServiceExt};
use tower_backoff::{ExponentialBackOff, PacingLayer, RetryLayer};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A client stack.
pub type Stack = BoxCloneSyncService<Request<Empty<Bytes>>, Response<Incoming>, BoxError>;

/// The quick start's stack, or with `paced` false the retry layer alone.
pub fn stack(paced: bool) -> Stack {
    let http = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let retry = RetryLayer::new(ExponentialBackOff::default());
    if paced {
        Stack::new(
            retry
                .paced(PacingLayer::new())
                .layer(http)
                .map_err(Into::into),
        )
    } else {
        Stack::new(retry.layer(http).map_err(Into::into))
    }
}

/// Whether a GET of `url` through `client` got a 200.
pub async fn get_ok(client: &Stack, url: &str) -> bool {
    let request = Request::get(url).body(Empty::new()).unwrap();
    let res = client.clone().oneshot(request).await;
    res.is_ok_and(|res| res.status() == StatusCode::OK)
}

/// `n` GETs of `url` through `client`, 20 at a time: how many got a 200, and how long
/// they all took.
pub async fn burst(client: &Stack, url: &str, n: usize) -> (usize, Duration) {
    let start = Instant::now();
    let (next, ok) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let workers: Vec<_> = (0..20)
        .map(|_| {
            let (client, url) = (client.clone(), url.to_owned());
            let (next, ok) = (Arc::clone(&next), Arc::clone(&ok));
            tokio::spawn(async move {
                while next.fetch_add(1, Ordering::SeqCst) < n {
                    if get_ok(&client, &url).await {
                        ok.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    (ok.load(Ordering::SeqCst), start.elapsed())
}
