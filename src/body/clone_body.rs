//! [`CloneBody`]: the bound a request body meets to be retried.

/// A request body the retry layer can send again: any `Clone` body (`String`, `Bytes`,
/// `Full<Bytes>`, [`ReplayBody`](super::ReplayBody), …).
///
/// A retry sends a clone of the request, so the retry layer needs this of the body type.
/// Streaming bodies — hyper's `Incoming`, axum and tonic bodies, a `reqwest::Body` made
/// from a stream — are read once and are not `Clone`: wrap the layer with
/// [`RetryLayer::replay_bodies`](crate::RetryLayer::replay_bodies), which makes any body a
/// [`ReplayBody`](super::ReplayBody) that buffers what it sends, up to a cap.
///
/// Implemented for every `T: Clone` (and nothing else); the trait exists so that the
/// compiler's error names that fix when a body is not `Clone`.
///
/// ```
/// use bytes::Bytes;
/// use tower_backoff::body::CloneBody;
///
/// fn retryable<B: CloneBody>(_: &B) {}
/// retryable(&String::from("{}"));
/// retryable(&Bytes::from_static(b"{}"));
/// ```
#[diagnostic::on_unimplemented(
    message = "the request body `{Self}` cannot be sent again by the retry layer: it is not `Clone`",
    label = "this request's body is not `Clone`",
    note = "wrap the layer with `RetryLayer::replay_bodies(max_bytes)` (e.g. `.replay_bodies(tower_backoff::body::DEFAULT_MAX_BYTES)`): it buffers the body as it is sent so that a retry can send it again",
    note = "or send a `Clone` body (`String`, `Bytes`, `Full<Bytes>`, …)"
)]
pub trait CloneBody: Clone {}

// Not recommended so that a missing `Clone` is reported as a missing `CloneBody`, with the
// fix above, instead of as a bare `Clone` bound deep inside tower's `Retry`.
#[diagnostic::do_not_recommend]
impl<T: Clone> CloneBody for T {}
