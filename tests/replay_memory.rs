//! The memory a `ReplayBody` holds for its replays, measured by a counting allocator: the
//! cap bounds the real memory held, not just the payload, whatever the framing of the body.
//!
//! This file is its own test binary, so its counting `#[global_allocator]` affects only it
//! (the library itself stays `#![forbid(unsafe_code)]`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tower_backoff::body::{DEFAULT_MAX_BYTES, ReplayBody};

/// Counts the bytes the current thread has allocated and not freed yet, then defers to the
/// system allocator. Only the counting is ours; the memory management is `System`'s.
struct Counting;

thread_local! {
    // `const` initialisation: reading it never allocates, so the allocator cannot recurse.
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

fn add(delta: i64) {
    // `try_with`: during thread teardown the slot may be gone; such allocations don't matter.
    let _ = LIVE.try_with(|n| n.set(n.get().saturating_add(delta)));
}

fn size(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

// SAFETY: every method forwards its arguments unchanged to `System`, which upholds the
// `GlobalAlloc` contract; the counter is a thread-local `Cell` that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add(size(layout.size()));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        add(size(layout.size()));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        add(size(new_size) - size(layout.size()));
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        add(-size(layout.size()));
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn live() -> i64 {
    LIVE.with(Cell::get)
}

/// A body of `len` one-byte data frames, each in its own allocation (as a client writing a
/// byte at a time produces), then trailers. Frames are made as they are polled.
#[derive(Debug)]
struct OneByteFrames {
    sent: usize,
    len: usize,
    trailers_sent: bool,
}

fn byte_at(i: usize) -> u8 {
    b'a' + u8::try_from(i % 26).unwrap_or(0)
}

fn trailers() -> HeaderMap {
    let mut trailers = HeaderMap::new();
    trailers.insert("x-checksum", HeaderValue::from_static("abc"));
    trailers
}

impl Body for OneByteFrames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.sent < self.len {
            let byte = byte_at(self.sent);
            self.sent += 1;
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![byte])))));
        }
        if !self.trailers_sent {
            self.trailers_sent = true;
            return Poll::Ready(Some(Ok(Frame::trailers(trailers()))));
        }
        Poll::Ready(None)
    }
}

/// All the data of `body`, and its trailers.
async fn collect<B>(body: B) -> (Vec<u8>, Option<HeaderMap>)
where
    B: Body,
    B::Error: std::fmt::Debug,
{
    let collected = body.collect().await.expect("body does not fail");
    let trailers = collected.trailers().cloned();
    (collected.to_bytes().to_vec(), trailers)
}

#[test]
fn one_byte_frames_hold_about_the_cap_and_replay_identically() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let cap = DEFAULT_MAX_BYTES;
    let expected: Vec<u8> = (0..cap).map(byte_at).collect();

    rt.block_on(async {
        let before = live();
        let initial = ReplayBody::try_new(
            OneByteFrames {
                sent: 0,
                len: cap,
                trailers_sent: false,
            },
            cap,
        )
        .expect("no size hint: accepted");
        let replay = initial.clone();

        // The first attempt streams the body; each frame it yields is dropped as it is read.
        let mut initial = initial;
        let mut first = Vec::with_capacity(cap);
        let counted = live();
        while let Some(frame) = initial.frame().await {
            if let Ok(data) = frame.expect("body does not fail").into_data() {
                first.extend_from_slice(&data);
            }
        }
        let held = live() - counted;
        assert_eq!(first, expected);
        assert!(!initial.is_capped(), "exactly at the cap is replayable");
        drop(initial);

        // The blocks hold the payload; the chunk slots and block headers are a few percent.
        let limit = size(cap + cap / 8);
        assert!(
            held <= limit,
            "holds {held} bytes for a {cap}-byte cap (limit {limit}); before: {}",
            counted - before
        );

        let (data, trailers_seen) = collect(replay).await;
        assert!(data == expected, "the replay sends the same bytes");
        assert_eq!(trailers_seen, Some(trailers()));
    });
}
