//! [`ReplayBody`]: a request body that buffers what it sends so a retry can send it again.

use std::error::Error as StdError;
use std::fmt;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

use super::ReplayGuard;

use crate::error::BoxError;

/// How many bytes of a request body [`ReplayBody`] buffers by default: 64 KiB.
///
/// Large enough for the JSON, form and protobuf payloads that make up most API calls, small
/// enough that a proxy holding thousands of in-flight requests does not hold gigabytes of
/// bodies. Bigger bodies are still sent, once: only their retries are given up.
pub const DEFAULT_MAX_BYTES: usize = 64 * 1024;

/// Data frames shorter than this are copied into shared blocks of at most this size.
///
/// A small frame kept whole would cost a slot and pin its own allocation, which may be much
/// larger than its data. Larger frames are kept as they are, without a copy.
const BLOCK: usize = 4 * 1024;

/// The size of the first block; later blocks double up to [`BLOCK`], so small bodies stay small.
const FIRST_BLOCK: usize = 64;

/// A request body that can be sent more than once, however it was produced.
///
/// Wraps any [`Body`] (a `hyper::body::Incoming`, an axum or tonic body, a streaming upload)
/// and buffers its data *as it is sent*, so that a clone can replay the same bytes, then the
/// same trailers, to a retry. Nothing is collected ahead of time: the first attempt streams
/// exactly as the original body would, which keeps long-lived and bidirectional streams
/// flowing.
///
/// # Clones
///
/// All clones share one state. The clone being polled owns it (and the original body) until
/// it is dropped, then hands it back, so the next clone to be polled first replays what was
/// buffered and then keeps reading the original body where the previous attempt stopped. A
/// clone polled while another one still owns the state waits (returns `Pending`) until that
/// one is dropped.
///
/// Its data is [`Bytes`]. A data frame of 4 KiB or more is kept by bumping a reference
/// count, not copied (a body whose data is some other [`Buf`] is copied into `Bytes` once, as
/// it is read). Smaller frames are copied into shared blocks of up to 4 KiB, so many tiny
/// frames do not cost a slot and an allocation each. A replay yields the kept frames and
/// blocks in order: the same bytes, possibly in fewer, larger frames.
///
/// # The cap
///
/// At most `max_bytes` bytes are buffered ([`DEFAULT_MAX_BYTES`] unless told otherwise).
/// The blocks never hold more than the cap, so the memory held is the cap plus a small
/// overhead per kept chunk. A frame kept whole may share a larger allocation (a slice of a
/// read buffer, say): that allocation stays alive while the frame is kept.
/// When the body grows past the cap, the buffer is dropped and the body's [`ReplayGuard`] is
/// marked capped: the attempt in flight goes on and still sends every byte, but a clone
/// polled afterwards fails at once with [`Capped`], and a retry policy that checks
/// [`is_capped`](Self::is_capped) never starts that attempt. If the original body fails, its
/// replays fail too (with [`Interrupted`]) and the guard is marked capped as well.
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::{BodyExt, Full};
/// use tower_backoff::body::ReplayBody;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let first = ReplayBody::try_new(Full::new(Bytes::from("hello")), 1024).unwrap();
/// let retry = first.clone();
///
/// assert_eq!(first.collect().await.unwrap().to_bytes(), "hello");
/// assert_eq!(retry.collect().await.unwrap().to_bytes(), "hello");
/// # }
/// ```
pub struct ReplayBody<B> {
    /// The shared state, while this clone owns it.
    state: Option<State<B>>,
    shared: Arc<Shared<B>>,
    /// How many buffered chunks this clone has yielded already.
    chunks_sent: usize,
    /// How many buffered bytes this clone has yielded already.
    bytes_sent: u64,
    /// Whether this clone has yielded the trailers already.
    trailers_sent: bool,
}

/// The error a replay of a body that outgrew its cap fails with.
///
/// Seeing it means a retry was started although the body's [`ReplayGuard`] said it was
/// capped: retry policies should check the guard before retrying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capped(());

/// The error a replay fails with when the original body failed while it was being read.
///
/// The original error went to the attempt that read it; a replay cannot know what the body
/// would have contained, so it refuses to send a truncated copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Interrupted(());

struct Shared<B> {
    slot: Mutex<Slot<B>>,
    guard: ReplayGuard,
    /// The original body's size hint, reported by clones that cannot look at the state.
    orig_size_hint: SizeHint,
    /// The original body was empty before it was ever polled, so every clone is too.
    was_empty: bool,
}

struct Slot<B> {
    /// The state, while no clone owns it.
    state: Option<State<B>>,
    /// Clones waiting for the owner of the state to drop it.
    waiters: Vec<Waker>,
}

struct State<B> {
    body: Pin<Box<B>>,
    /// Data read from `body` so far, while the body is under its cap, except `tail`.
    chunks: Vec<Bytes>,
    /// Small frames copied since the last chunk was sealed; its spare room takes the next.
    tail: BytesMut,
    /// The size of the last block allocated for `tail`.
    block: usize,
    /// Bytes read from `body` so far (kept counting after the cap).
    read: u64,
    max_bytes: u64,
    trailers: Option<HeaderMap>,
    /// `body` has ended (or failed): it is not polled again.
    done: bool,
    /// Nothing is buffered any more: past the cap, failed, or never replayable.
    capped: bool,
    /// `body` failed (implies `capped`).
    failed: bool,
}

impl<B: Body> ReplayBody<B> {
    /// Wraps `body`, buffering up to `max_bytes` of it for replays.
    ///
    /// Hands `body` back untouched if its size hint says it is bigger than `max_bytes`: it
    /// could never be replayed, so there is no point buffering any of it (see
    /// [`unreplayable`](Self::unreplayable) for a `ReplayBody` that just streams it).
    pub fn try_new(body: B, max_bytes: usize) -> Result<Self, B> {
        let hint = body.size_hint();
        if hint.lower() > max_bytes as u64 {
            tracing::trace!(
                size_hint = hint.lower(),
                max_bytes,
                "body too large to replay"
            );
            return Err(body);
        }
        Ok(Self::build(body, max_bytes as u64, false))
    }

    /// Wraps `body` without buffering any of it: it is streamed untouched, its guard is
    /// capped from the start and its clones fail with [`Capped`].
    ///
    /// Lets a service that expects a `ReplayBody` also carry the bodies
    /// [`try_new`](Self::try_new) refused.
    pub fn unreplayable(body: B) -> Self {
        Self::build(body, 0, true)
    }

    fn build(body: B, max_bytes: u64, capped: bool) -> Self {
        let guard = ReplayGuard::new();
        if capped {
            guard.set_capped();
        }
        let shared = Arc::new(Shared {
            slot: Mutex::new(Slot {
                state: None,
                waiters: Vec::new(),
            }),
            guard,
            orig_size_hint: body.size_hint(),
            was_empty: body.is_end_stream(),
        });
        Self {
            state: Some(State {
                body: Box::pin(body),
                chunks: Vec::new(),
                tail: BytesMut::new(),
                block: 0,
                read: 0,
                max_bytes,
                trailers: None,
                done: false,
                capped,
                failed: false,
            }),
            shared,
            chunks_sent: 0,
            bytes_sent: 0,
            trailers_sent: false,
        }
    }
}

impl<B> ReplayBody<B> {
    /// Whether the body went past its cap (or failed), so that it cannot be replayed.
    ///
    /// Once true, it stays true; the attempt in flight is not affected.
    pub fn is_capped(&self) -> bool {
        self.shared.guard.is_capped()
    }

    /// The guard shared by this body and all its clones, for the request's extensions.
    pub fn guard(&self) -> ReplayGuard {
        self.shared.guard.clone()
    }

    /// Runs `f` on the state as this clone sees it (owned, or waiting in the shared slot);
    /// `None` when another clone owns it.
    fn with_state<T>(&self, f: impl FnOnce(&State<B>) -> T) -> Option<T> {
        match &self.state {
            Some(state) => Some(f(state)),
            None => self.shared.lock().state.as_ref().map(f),
        }
    }
}

impl<B: Body> ReplayBody<B> {
    /// What is left for this clone to yield of the state: the buffered bytes it has not
    /// replayed yet, plus what the original body has not yielded yet.
    fn remaining_hint(&self, state: &State<B>) -> SizeHint {
        let buffered = if state.capped {
            0
        } else {
            state.read.saturating_sub(self.bytes_sent)
        };
        if state.done {
            return SizeHint::with_exact(buffered);
        }
        let rest = state.body.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower().saturating_add(buffered));
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper.saturating_add(buffered));
        }
        hint
    }

    fn is_end_stream_of(&self, state: &State<B>) -> bool {
        if state.capped && self.state.is_none() {
            // A replay that will fail still has its error to yield.
            return false;
        }
        if !state.capped && self.bytes_sent < state.read {
            return false;
        }
        if state.trailers.is_some() && !self.trailers_sent {
            return false;
        }
        state.done || state.body.is_end_stream()
    }
}

impl<B> Body for ReplayBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.shared.was_empty {
            return Poll::Ready(None);
        }
        let guard = this.shared.guard.clone();
        let (chunks_sent, bytes_sent, trailers_sent) = (
            &mut this.chunks_sent,
            &mut this.bytes_sent,
            &mut this.trailers_sent,
        );
        let state = match Self::poll_acquire(&mut this.state, &this.shared, cx) {
            Poll::Ready(Ok(state)) => state,
            Poll::Ready(Err(err)) => return Poll::Ready(Some(Err(err))),
            Poll::Pending => return Poll::Pending,
        };

        // First replay what earlier attempts buffered...
        if let Some(replayed) = state.replayed(chunks_sent, bytes_sent, trailers_sent) {
            return Poll::Ready(replayed);
        }

        // ...then go on reading the original body where they stopped.
        let frame = match state.body.as_mut().poll_frame(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(None) => {
                state.done = true;
                return Poll::Ready(None);
            }
            Poll::Ready(Some(Err(err))) => {
                tracing::debug!("original body failed; it cannot be replayed");
                state.done = true;
                state.failed = true;
                state.capped = true;
                state.drop_buffer();
                guard.set_capped();
                return Poll::Ready(Some(Err(err.into())));
            }
            Poll::Ready(Some(Ok(frame))) => frame.map_data(|mut data| {
                let len = data.remaining();
                data.copy_to_bytes(len)
            }),
        };
        state.record(&frame, &guard, chunks_sent, bytes_sent, trailers_sent);
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        if self.shared.was_empty {
            return true;
        }
        self.with_state(|state| self.is_end_stream_of(state))
            .unwrap_or(false)
    }

    fn size_hint(&self) -> SizeHint {
        if self.shared.was_empty {
            return SizeHint::with_exact(0);
        }
        self.with_state(|state| {
            if state.capped && self.state.is_none() {
                // Not replayable: this clone yields an error. Its hint must not say "empty",
                // or a client could send an empty body without polling for that error.
                self.shared.orig_size_hint
            } else {
                self.remaining_hint(state)
            }
        })
        .unwrap_or_else(|| self.shared.orig_size_hint)
    }
}

impl<B> ReplayBody<B> {
    /// The state this clone owns, taken from the shared slot if need be, unless the body can
    /// no longer be replayed. Takes split borrows so the caller keeps its other fields.
    fn poll_acquire<'a>(
        state: &'a mut Option<State<B>>,
        shared: &Arc<Shared<B>>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<&'a mut State<B>, BoxError>> {
        if state.is_none() {
            let mut slot = shared.lock();
            match slot.state.as_ref() {
                None => {
                    // Another clone (an attempt still in flight) owns the state; its drop
                    // wakes us.
                    if !slot.waiters.iter().any(|w| w.will_wake(cx.waker())) {
                        slot.waiters.push(cx.waker().clone());
                    }
                    return Poll::Pending;
                }
                Some(s) if s.failed => return Poll::Ready(Err(Interrupted(()).into())),
                Some(s) if s.capped => return Poll::Ready(Err(Capped(()).into())),
                Some(_) => {
                    *state = slot.state.take();
                    shared.guard.set_held(true);
                }
            }
        }
        match state.as_mut() {
            Some(state) => Poll::Ready(Ok(state)),
            None => Poll::Ready(Err(Interrupted(()).into())),
        }
    }
}

impl<B: Body> State<B> {
    /// The next frame a clone that has sent `chunks_sent` chunks, `bytes_sent` bytes and
    /// (`trailers_sent`) the trailers replays of what earlier attempts read: a buffered
    /// chunk, the trailers, or the end. `None`: the original body is to be read on.
    fn replayed(
        &mut self,
        chunks_sent: &mut usize,
        bytes_sent: &mut u64,
        trailers_sent: &mut bool,
    ) -> Option<Option<Result<Frame<Bytes>, BoxError>>> {
        if !self.capped && *bytes_sent < self.read {
            if *chunks_sent >= self.chunks.len() {
                // The rest is in the block being filled: make it a chunk to yield.
                self.seal();
            }
            let Some(chunk) = self.chunks.get(*chunks_sent).cloned() else {
                // Cannot happen; failing beats sending the body out of order.
                return Some(Some(Err(Interrupted(()).into())));
            };
            *chunks_sent = chunks_sent.saturating_add(1);
            *bytes_sent = bytes_sent.saturating_add(chunk.len() as u64);
            return Some(Some(Ok(Frame::data(chunk))));
        }
        if self.done || self.body.is_end_stream() {
            self.done = true;
            if let (Some(trailers), false) = (&self.trailers, *trailers_sent) {
                *trailers_sent = true;
                return Some(Some(Ok(Frame::trailers(trailers.clone()))));
            }
            return Some(None);
        }
        None
    }

    /// Keeps `frame`, just read from the original body and yielded by the clone that read
    /// it, for the replays: its data until the body outgrows its cap (`guard` is then
    /// capped), its trailers.
    fn record(
        &mut self,
        frame: &Frame<Bytes>,
        guard: &ReplayGuard,
        chunks_sent: &mut usize,
        bytes_sent: &mut u64,
        trailers_sent: &mut bool,
    ) {
        if let Some(data) = frame.data_ref() {
            let len = data.len() as u64;
            self.read = self.read.saturating_add(len);
            if !self.capped {
                if self.read > self.max_bytes {
                    tracing::debug!(
                        read = self.read,
                        max_bytes = self.max_bytes,
                        "body outgrew its replay cap; retries disabled"
                    );
                    self.capped = true;
                    self.drop_buffer();
                    guard.set_capped();
                } else if len > 0 {
                    // This clone replayed everything before reading, so it has sent this frame too.
                    self.buffer(data);
                    *chunks_sent = self.chunks.len();
                    *bytes_sent = bytes_sent.saturating_add(len);
                }
            }
        } else if let Some(trailers) = frame.trailers_ref() {
            // Trailers end the body: it is not polled again.
            self.trailers = Some(trailers.clone());
            self.done = true;
            *trailers_sent = true;
        }
    }
}

impl<B> State<B> {
    /// Buffers `data`, which `read` already counts: large frames as they are, small ones
    /// copied into the block being filled.
    fn buffer(&mut self, data: &Bytes) {
        if data.len() >= BLOCK {
            self.seal();
            self.chunks.push(data.clone());
            return;
        }
        let mut rest: &[u8] = data;
        while !rest.is_empty() {
            if self.tail.len() >= self.tail.capacity() {
                self.seal();
                // No block goes past the cap, so the blocks hold at most `max_bytes`.
                let buffered = self.read.saturating_sub(rest.len() as u64);
                let left = self.max_bytes.saturating_sub(buffered);
                let left = usize::try_from(left).unwrap_or(usize::MAX);
                self.block = self.block.saturating_mul(2).clamp(FIRST_BLOCK, BLOCK);
                self.tail = BytesMut::with_capacity(self.block.min(left).max(1));
            }
            let room = self.tail.capacity().saturating_sub(self.tail.len());
            let (now, later) = rest.split_at(rest.len().min(room));
            self.tail.extend_from_slice(now);
            rest = later;
        }
    }

    /// Moves the data of `tail` to a chunk of its own; its spare room stays in `tail`.
    fn seal(&mut self) {
        if !self.tail.is_empty() {
            self.chunks.push(self.tail.split().freeze());
        }
    }

    /// Frees everything buffered: the body can no longer be replayed.
    fn drop_buffer(&mut self) {
        self.chunks = Vec::new();
        self.tail = BytesMut::new();
    }
}

impl<B> Shared<B> {
    fn lock(&self) -> MutexGuard<'_, Slot<B>> {
        // The slot is only ever swapped whole, so a panic elsewhere cannot leave it torn.
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<B> Clone for ReplayBody<B> {
    /// A clone that replays the body from its start.
    fn clone(&self) -> Self {
        Self {
            state: None,
            shared: Arc::clone(&self.shared),
            chunks_sent: 0,
            bytes_sent: 0,
            trailers_sent: false,
        }
    }
}

impl<B> Drop for ReplayBody<B> {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            let waiters = {
                let mut slot = self.shared.lock();
                slot.state = Some(state);
                std::mem::take(&mut slot.waiters)
            };
            self.shared.guard.set_held(false);
            waiters.into_iter().for_each(Waker::wake);
        }
    }
}

impl<B> fmt::Debug for ReplayBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplayBody")
            .field("owns_state", &self.state.is_some())
            .field("capped", &self.is_capped())
            .field("chunks_sent", &self.chunks_sent)
            .field("bytes_sent", &self.bytes_sent)
            .field("trailers_sent", &self.trailers_sent)
            .finish()
    }
}

impl fmt::Display for Capped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("request body cannot be replayed: it outgrew its replay buffer cap")
    }
}

impl StdError for Capped {}

impl fmt::Display for Interrupted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("request body cannot be replayed: the original body failed")
    }
}

impl StdError for Interrupted {}

#[cfg(test)]
mod tests;
