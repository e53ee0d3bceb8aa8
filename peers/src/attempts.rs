//! Every attempt a client sends, logged under its retries: when it left, where it went and
//! what came back. The matrix reads refusals and send rates from it, for any limiter.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// At most this many attempts are kept (a bound on memory; about 32 MB).
const MAX_ATTEMPTS: usize = 2_000_000;

/// One attempt: sent `at` after the log's origin, to `port`, answered `status` (0: no answer).
#[derive(Clone, Copy, Debug)]
pub struct Attempt {
    pub at: Duration,
    pub port: u16,
    pub status: u16,
}

impl Attempt {
    /// A 429 or a 503: the server refused it.
    pub fn refused(&self) -> bool {
        self.status == 429 || self.status == 503
    }
}

/// The attempts of one client, from an origin.
pub struct AttemptLog {
    origin: Instant,
    attempts: Mutex<Vec<Attempt>>,
}

impl AttemptLog {
    pub fn new(origin: Instant) -> Arc<AttemptLog> {
        Arc::new(AttemptLog {
            origin,
            attempts: Mutex::new(Vec::new()),
        })
    }

    /// Logs an attempt sent at `sent`.
    pub fn record(&self, sent: Instant, port: u16, status: u16) {
        let at = sent.saturating_duration_since(self.origin);
        let mut attempts = self.attempts.lock().unwrap();
        if attempts.len() < MAX_ATTEMPTS {
            attempts.push(Attempt { at, port, status });
        }
    }

    /// The attempts so far, in the order they were sent.
    pub fn snapshot(&self) -> Vec<Attempt> {
        let mut attempts = self.attempts.lock().unwrap().clone();
        attempts.sort_by_key(|a| a.at);
        attempts
    }
}
