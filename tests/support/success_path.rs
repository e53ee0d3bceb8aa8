//! Fixtures shared by the benchmarks and the allocation test, so that both measure the
//! same request through the same services.
#![allow(dead_code)] // each binary uses a subset

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use tower::Service;
use tower::retry::Policy;

pub type Req = Request<Full<Bytes>>;
pub type Res = Response<Full<Bytes>>;

/// The inner service: always ready, answers `200 OK` with an empty body at once.
#[derive(Clone, Copy)]
pub struct Ok200;

impl Service<Req> for Ok200 {
    type Response = Res;
    type Error = Infallible;
    type Future = Ready<Result<Res, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        std::hint::black_box(&req);
        ready(Ok(Response::new(Full::new(Bytes::new()))))
    }
}

/// The cheapest tower policy that can retry at all: it clones every request (as any
/// retrying policy must) and never retries.
#[derive(Clone, Copy)]
pub struct AlwaysClone;

impl<B: Clone, R, E> Policy<Request<B>, R, E> for AlwaysClone {
    type Future = Ready<()>;

    fn retry(&mut self, _: &mut Request<B>, _: &mut Result<R, E>) -> Option<Self::Future> {
        None
    }

    fn clone_request(&mut self, req: &Request<B>) -> Option<Request<B>> {
        Some(clone_request(req))
    }
}

/// [`AlwaysClone`] with shared state, as any policy with a budget has: an `Arc`, cloned
/// with the policy into every response future; `count`: each request also adds one to
/// a shared counter, the least a retry budget's deposit costs.
#[derive(Clone)]
pub struct SharedState {
    requests: Arc<AtomicU64>,
    count: bool,
}

impl SharedState {
    pub fn new(count: bool) -> Self {
        Self {
            requests: Arc::new(AtomicU64::new(0)),
            count,
        }
    }
}

impl<B: Clone, R, E> Policy<Request<B>, R, E> for SharedState {
    type Future = Ready<()>;

    fn retry(&mut self, _: &mut Request<B>, _: &mut Result<R, E>) -> Option<Self::Future> {
        if self.count {
            self.requests.fetch_add(1, Ordering::Relaxed);
        }
        None
    }

    fn clone_request(&mut self, req: &Request<B>) -> Option<Request<B>> {
        Some(clone_request(req))
    }
}

/// A full copy of `req`: what a retrying policy clones (as a trivial policy would write
/// it, with `Request::clone`).
pub fn clone_request<B: Clone>(req: &Request<B>) -> Request<B> {
    req.clone()
}

/// A GET with ten typical client headers and a small body.
pub fn request() -> Req {
    request_to("http://api.example.com/v1/orders/12345?expand=items")
}

/// The same request, to `uri`.
pub fn request_to(uri: &str) -> Req {
    Request::get(uri)
        .header("host", "api.example.com")
        .header("user-agent", "tower-backoff-bench/0.1")
        .header("accept", "application/json")
        .header("accept-encoding", "identity")
        .header("authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc")
        .header("x-request-id", "6f1c2f8e-8a55-4c1b-9d0e-2b7f1a3c9d44")
        .header(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .header("cache-control", "no-cache")
        .header("x-client-version", "1.2.3")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(b"{\"query\":\"orders\"}")))
        .unwrap()
}

/// Sends `req` through `svc`, which must be ready and answer on the first poll.
pub fn send<S: Service<Req, Response = Res>>(svc: &mut S, req: Req) -> Res
where
    S::Error: std::fmt::Debug,
{
    let mut cx = Context::from_waker(Waker::noop());
    let Poll::Ready(Ok(())) = svc.poll_ready(&mut cx) else {
        panic!("service not ready")
    };
    match pin!(svc.call(req)).poll(&mut cx) {
        Poll::Ready(res) => res.unwrap(),
        Poll::Pending => panic!("the success path must complete on the first poll"),
    }
}
