//! The success path of `RetryLayer` allocates nothing beyond what tower's `Retry` with a
//! trivial always-clone policy allocates (the request clone), except the `RetryStats`
//! extension inserted into the response — counted exactly here — which
//! `RetryLayer::without_stats` removes.
//!
//! This file is its own test binary, so its counting `#[global_allocator]` affects only it
//! (the library itself stays `#![forbid(unsafe_code)]`).

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::convert::Infallible;
use std::future::{Future, Ready, ready};
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use tower::retry::{Policy, Retry};
use tower::{Layer, Service};
use tower_backoff::{ExponentialBackOff, RetryLayer, RetryStats};

/// Counts the allocations (and reallocations) made by the current thread, then defers to
/// the system allocator. Only the counting is ours; the memory management is `System`'s.
struct Counting;

thread_local! {
    // `const` initialisation: reading it never allocates, so the allocator cannot recurse.
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: during thread teardown the slot may be gone; such allocations don't matter.
    let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
}

// SAFETY: every method forwards its arguments unchanged to `System`, which upholds the
// `GlobalAlloc` contract; the counter is a thread-local `Cell` that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by the current thread while running `f`.
fn allocations<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let before = ALLOCS.with(Cell::get);
    let out = f();
    (ALLOCS.with(Cell::get) - before, out)
}

type Req = Request<Full<Bytes>>;
type Res = Response<Full<Bytes>>;

#[derive(Clone, Copy)]
struct Ok200;

impl Service<Req> for Ok200 {
    type Response = Res;
    type Error = Infallible;
    type Future = Ready<Result<Res, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Req) -> Self::Future {
        ready(Ok(Response::new(Full::new(Bytes::new()))))
    }
}

/// The cheapest tower policy that can retry at all: it must clone each request.
#[derive(Clone, Copy)]
struct AlwaysClone;

fn clone_request(req: &Req) -> Req {
    let mut copy = Request::new(req.body().clone());
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    *copy.extensions_mut() = req.extensions().clone();
    copy
}

impl Policy<Req, Res, Infallible> for AlwaysClone {
    type Future = Ready<()>;

    fn retry(&mut self, _: &mut Req, _: &mut Result<Res, Infallible>) -> Option<Self::Future> {
        None
    }

    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        Some(clone_request(req))
    }
}

/// A GET with ten headers and a small body, as in `benches/success_path.rs`.
fn request() -> Req {
    let mut b = Request::get("http://api.example.com/v1/orders/12345?expand=items");
    for (name, value) in [
        ("host", "api.example.com"),
        ("user-agent", "tower-backoff-bench/0.1"),
        ("accept", "application/json"),
        ("accept-encoding", "gzip, br"),
        ("authorization", "Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc"),
        ("x-request-id", "6f1c2f8e-8a55-4c1b-9d0e-2b7f1a3c9d44"),
        (
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ),
        ("cache-control", "no-cache"),
        ("x-client-version", "1.2.3"),
        ("content-type", "application/json"),
    ] {
        b = b.header(name, value);
    }
    b.body(Full::new(Bytes::from_static(b"{\"query\":\"orders\"}")))
        .unwrap()
}

fn send<S: Service<Req, Response = Res, Error = Infallible>>(svc: &mut S, req: Req) -> Res {
    let mut cx = Context::from_waker(Waker::noop());
    assert!(svc.poll_ready(&mut cx).is_ready());
    match pin!(svc.call(req)).poll(&mut cx) {
        Poll::Ready(Ok(res)) => res,
        _ => panic!("the success path completes on the first poll"),
    }
}

/// Allocations of one request through `svc`, after a warm-up request (lazy statics,
/// thread-locals and the like are not per-request costs). The request itself is built
/// before counting starts.
fn per_request<S: Service<Req, Response = Res, Error = Infallible>>(svc: &mut S) -> (u64, Res) {
    let template = request();
    drop(send(svc, clone_request(&template)));
    let req = clone_request(&template);
    allocations(|| send(svc, req))
}

/// Allocations of inserting the stats into a fresh response's (empty) extensions: the
/// `http::Extensions` map is created on first insert (a boxed `HashMap`), its table is
/// allocated, and the value is boxed as `Box<dyn Any>`.
const STATS_INSERT_ALLOCS: u64 = 3;

#[test]
fn success_path_allocates_only_the_request_clone_and_the_stats() {
    // Entered like a client would be (tokio's clock is read through the runtime handle).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _guard = rt.enter();

    // The first clone of a request promotes its `Bytes` (header values, URI) to shared
    // storage; from then on a clone copies only the header map's two vectors.
    let template = request();
    drop(clone_request(&template));
    let (clone_allocs, _) = allocations(|| clone_request(&template));
    assert_eq!(
        clone_allocs, 2,
        "a header map clone: its indices and its entries"
    );

    let (stats_allocs, _) = allocations(|| {
        let mut res = Response::new(());
        res.extensions_mut().insert(RetryStats::default());
        res
    });
    assert_eq!(stats_allocs, STATS_INSERT_ALLOCS);

    let (bare, _) = per_request(&mut Ok200);
    assert_eq!(bare, 0, "the bare service allocates nothing");

    let (trivial, _) = per_request(&mut Retry::new(AlwaysClone, Ok200));
    assert_eq!(
        trivial, clone_allocs,
        "tower's Retry: the request clone only"
    );

    // `without_stats`: the request clone and nothing else.
    let (lean, res) = per_request(
        &mut RetryLayer::new(ExponentialBackOff::default())
            .without_stats()
            .layer(Ok200),
    );
    assert!(res.extensions().get::<RetryStats>().is_none());
    assert_eq!(
        lean, clone_allocs,
        "RetryLayer without stats: the request clone only"
    );

    for (name, layer) in [
        ("default", RetryLayer::new(ExponentialBackOff::default())),
        (
            "without retry budget",
            RetryLayer::new(ExponentialBackOff::default()).without_retry_budget(),
        ),
    ] {
        let (ours, res) = per_request(&mut layer.layer(Ok200));
        assert_eq!(
            res.extensions().get::<RetryStats>(),
            Some(&RetryStats {
                attempts: 1,
                ..RetryStats::default()
            }),
            "{name}"
        );
        assert_eq!(
            ours,
            clone_allocs + STATS_INSERT_ALLOCS,
            "RetryLayer ({name}): request clone ({clone_allocs}) + RetryStats insert \
             ({STATS_INSERT_ALLOCS}), nothing else"
        );
    }
}
