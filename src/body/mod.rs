//! Request bodies that can be sent more than once.
//!
//! A retry must send the request again, body included, but most request bodies cannot be
//! cloned: `hyper::body::Incoming`, axum and tonic bodies and streaming uploads are read
//! once. [`ReplayBody`] fixes that without giving up streaming:
//!
//! - The first attempt streams the original body as it arrives; every chunk it sends is also
//!   kept (a reference-counted [`Bytes`](bytes::Bytes), so data is not copied). Nothing is
//!   collected ahead of time, so a bidirectional gRPC stream keeps flowing.
//! - A retry is a clone of the body. It replays the kept chunks, then goes on reading the
//!   original body where the previous attempt stopped (the server may have answered before
//!   the whole body was sent), then replays the trailers. Its `size_hint` and
//!   `is_end_stream` stay exact, so a retry carries the same `content-length`.
//! - Buffering is capped ([`DEFAULT_MAX_BYTES`], 64 KiB, unless told otherwise). A body that
//!   outgrows the cap is still sent whole by the attempt in flight, but its buffer is dropped
//!   and its [`ReplayGuard`] is marked capped, so a retry policy gives up on retrying it
//!   rather than holding an unbounded upload in memory. A body whose size hint is over the
//!   cap from the start is not buffered at all.
//!
//! [`ReplayBodyLayer`] wraps the body of every request this way and puts the body's
//! [`ReplayGuard`] in the request's extensions, for the retry policy to check.
//!
//! ```
//! use bytes::Bytes;
//! use http_body_util::{BodyExt, Full};
//! use tower_backoff::body::ReplayBody;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! // A boxed body, like the ones axum and tonic hand out: it cannot be cloned.
//! let body = Full::new(Bytes::from("hello world")).boxed();
//!
//! let first = ReplayBody::try_new(body, 1024).expect("11 bytes fit under the cap");
//! let retry = first.clone();
//! assert_eq!(first.collect().await.unwrap().to_bytes(), "hello world");
//! assert!(!retry.is_capped());
//! assert_eq!(retry.collect().await.unwrap().to_bytes(), "hello world");
//!
//! // A body known to be over the cap is handed back untouched.
//! let big = Full::new(Bytes::from("hello world")).boxed();
//! let big = ReplayBody::try_new(big, 5).unwrap_err();
//! assert_eq!(big.collect().await.unwrap().to_bytes(), "hello world");
//! # }
//! ```

mod clone_body;
pub(crate) mod layer;
mod replay;

pub use clone_body::CloneBody;
pub use layer::{ReplayBodyLayer, ReplayBodyService};
pub use replay::{Capped, DEFAULT_MAX_BYTES, Interrupted, ReplayBody};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

/// Tells a retry policy whether a request's body can still be replayed, and when the
/// attempt that holds it lets it go.
///
/// A [`ReplayBody`] puts this in its request's extensions (clones of a request share it):
/// once it reports capped, no retry is started, because the next attempt could not send
/// the whole body again. Only the body itself changes it.
#[derive(Debug, Clone)]
pub struct ReplayGuard(Arc<GuardState>);

#[derive(Debug)]
struct GuardState {
    capped: AtomicBool,
    /// An attempt (a clone of the body) holds the body's stream.
    held: AtomicBool,
    /// Tasks waiting for the holder to let go.
    waiters: Mutex<Vec<Waker>>,
}

impl ReplayGuard {
    /// A guard for a body not capped yet, held by its original.
    pub(crate) fn new() -> Self {
        Self(Arc::new(GuardState {
            capped: AtomicBool::new(false),
            held: AtomicBool::new(true),
            waiters: Mutex::new(Vec::new()),
        }))
    }

    /// Whether the body went past its cap (or failed), so that it cannot be replayed.
    pub fn is_capped(&self) -> bool {
        self.0.capped.load(Ordering::Acquire)
    }

    /// Records that the body went past its cap.
    pub(crate) fn set_capped(&self) {
        self.0.capped.store(true, Ordering::Release);
    }

    /// Records whether an attempt holds the body; letting go wakes the waiting retries.
    pub(crate) fn set_held(&self, held: bool) {
        self.0.held.store(held, Ordering::Release);
        if !held {
            let waiters = std::mem::take(&mut *self.waiters());
            waiters.into_iter().for_each(Waker::wake);
        }
    }

    /// Ready once no attempt holds the body, so a retry can send it.
    pub(crate) fn poll_released(&self, cx: &mut Context<'_>) -> Poll<()> {
        if !self.0.held.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        let mut waiters = self.waiters();
        if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
            waiters.push(cx.waker().clone());
        }
        drop(waiters);
        // Let go between the first look and the registration: do not sleep on it.
        if self.0.held.load(Ordering::Acquire) {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }

    fn waiters(&self) -> std::sync::MutexGuard<'_, Vec<Waker>> {
        self.0
            .waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}
