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
mod layer;
mod replay;

pub use clone_body::CloneBody;
pub use layer::{ReplayBodyLayer, ReplayBodyService};
pub use replay::{Capped, DEFAULT_MAX_BYTES, Interrupted, ReplayBody};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Tells a retry policy whether a request's body can still be replayed.
///
/// A replayable body that outgrew its buffer cap puts this in the request's extensions
/// (clones of a request share it): once it reports capped, no retry is started, because
/// the next attempt could not send the whole body again.
#[derive(Debug, Clone, Default)]
pub struct ReplayGuard(Arc<AtomicBool>);

impl ReplayGuard {
    /// A guard for a body that is not capped (yet).
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the body went past its cap, so that it cannot be replayed.
    pub fn is_capped(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    /// Records that the body went past its cap.
    pub fn set_capped(&self) {
        self.0.store(true, Ordering::Release);
    }
}
