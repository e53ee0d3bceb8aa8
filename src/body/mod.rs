//! Request bodies that can be sent more than once.

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
