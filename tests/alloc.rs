//! The success path of `RetryLayer` allocates nothing beyond what tower's `Retry` with a
//! trivial always-clone policy allocates (the request clone), except the `RetryStats`
//! extension inserted into the response — counted exactly here — which
//! `RetryLayer::without_stats` removes.
//!
//! This file is its own test binary, so its counting `#[global_allocator]` affects only it
//! (the library itself stays `#![forbid(unsafe_code)]`).

use http::Response;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use tower::retry::Retry;
use tower::{Layer, Service};
use tower_backoff::{ExponentialBackOff, RetryLayer, RetryStats};

#[path = "support/success_path.rs"]
mod support;
use support::{AlwaysClone, Ok200, Req, Res, clone_request, request, send};

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

/// Allocations of one request through `svc`, after a warm-up request (lazy statics,
/// thread-locals and the like are not per-request costs). The request itself is built
/// before counting starts.
fn per_request<S>(svc: &mut S) -> (u64, Res)
where
    S: Service<Req, Response = Res>,
    S::Error: std::fmt::Debug,
{
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
fn success_path_allocates_only_the_request_clone() {
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

    // With the defaults: a first-attempt success carries no stats (nothing to say), so it
    // costs what `without_stats` costs.
    for (name, layer) in [
        ("default", RetryLayer::new(ExponentialBackOff::default())),
        (
            "without retry budget",
            RetryLayer::new(ExponentialBackOff::default()).without_retry_budget(),
        ),
    ] {
        let (ours, res) = per_request(&mut layer.layer(Ok200));
        assert!(res.extensions().get::<RetryStats>().is_none(), "{name}");
        assert_eq!(
            ours, clone_allocs,
            "RetryLayer ({name}): the request clone ({clone_allocs}), nothing else"
        );
    }
}
