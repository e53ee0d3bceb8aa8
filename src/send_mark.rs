//! When an attempt really left: shared by the retry layer and a pacing layer below it.
//!
//! An attempt's timeout measures the server's answer, not a wait in pacing's queue. The
//! retry layer puts a [`SendMark`] into each attempt that has a timeout; pacing marks it
//! held when it queues the request and sent when it lets it go.

use std::sync::{Arc, Mutex, PoisonError};
use tokio::time::Instant;

/// A request extension: whether its attempt was held back before it was sent, and when.
#[derive(Debug, Clone, Default)]
pub(crate) struct SendMark(Arc<Mutex<Sent>>);

/// What a [`SendMark`] says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Nothing held it: it left when it was called.
    #[default]
    AtCall,
    /// Held back, not sent yet.
    Held,
    /// Held back, then sent at this instant.
    At(Instant),
}

impl SendMark {
    /// The attempt waits before it is sent.
    pub(crate) fn hold(&self) {
        *self.lock() = Sent::Held;
    }

    /// The attempt leaves now, if it was held.
    pub(crate) fn send(&self, now: Instant) {
        let mut sent = self.lock();
        if *sent == Sent::Held {
            *sent = Sent::At(now);
        }
    }

    pub(crate) fn get(&self) -> Sent {
        *self.lock()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sent> {
        // A plain value: a panic elsewhere cannot leave it half-written.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Marks the request in `extensions` held, when it carries a mark.
pub(crate) fn hold(extensions: &http::Extensions) {
    if let Some(mark) = extensions.get::<SendMark>() {
        mark.hold();
    }
}

/// Marks the request in `extensions` sent at `now`, when it carries a mark.
pub(crate) fn send(extensions: &http::Extensions, now: Instant) {
    if let Some(mark) = extensions.get::<SendMark>() {
        mark.send(now);
    }
}

/// A request extension pacing puts on every request it lets through. A retry layer that
/// finds it sits below pacing, where its retries go unpaced: it says so once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PacedAbove;

/// Warns, once per process, when `extensions` show a pacing layer above the retry layer.
pub(crate) fn warn_if_paced_above(extensions: &http::Extensions) {
    use std::sync::atomic::{AtomicBool, Ordering};
    static WARNED: AtomicBool = AtomicBool::new(false);
    if extensions.get::<PacedAbove>().is_some() && !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "PacingLayer sits above RetryLayer: retries bypass pacing. \
             Put the retry layer outside, as `retry_layer.paced(pacing_layer)` does"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_held_attempt_gets_a_send_time() {
        let mark = SendMark::default();
        let now = Instant::now();
        mark.send(now);
        assert_eq!(mark.get(), Sent::AtCall);
        mark.hold();
        assert_eq!(mark.clone().get(), Sent::Held);
        mark.send(now);
        assert_eq!(mark.get(), Sent::At(now));
        mark.send(now + std::time::Duration::from_secs(1));
        assert_eq!(mark.get(), Sent::At(now));
    }
}
