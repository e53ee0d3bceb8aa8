//! Small test backoffs, each with a schedule a test can name exactly (the strategies of the
//! crate are tested on their own).

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower_backoff::BackOff;

use super::time::MS;

/// Waits `step`, `2 * step`, `3 * step`…, and gives up after `limit` delays.
#[derive(Clone, Debug)]
pub struct Steps {
    pub n: u32,
    pub step: Duration,
    pub limit: u32,
}

impl Steps {
    pub fn new() -> Self {
        Self {
            n: 0,
            step: 100 * MS,
            limit: u32::MAX,
        }
    }
}

impl BackOff for Steps {
    fn next_backoff(&mut self) -> Option<Duration> {
        self.n += 1;
        (self.n <= self.limit).then(|| self.step * self.n)
    }
    fn reset(&mut self) {
        self.n = 0;
    }
}

/// A fixed 100 ms backoff (the strategies of the crate are tested elsewhere).
#[derive(Clone, Debug)]
pub struct Fixed;

impl BackOff for Fixed {
    fn next_backoff(&mut self) -> Option<Duration> {
        Some(100 * MS)
    }
    fn reset(&mut self) {}
}

/// 100 ms, 200 ms, 300 ms, …; counts its resets.
#[derive(Clone, Default)]
pub struct Counting {
    pub n: u32,
    pub resets: Arc<Mutex<u32>>,
}

impl Counting {
    /// The first delay, and the step between two delays.
    pub const STEP: Duration = Duration::from_millis(100);
}

impl BackOff for Counting {
    fn next_backoff(&mut self) -> Option<Duration> {
        self.n += 1;
        Some(Self::STEP * self.n)
    }
    fn reset(&mut self) {
        self.n = 0;
        *self.resets.lock().unwrap() += 1;
    }
}

/// Hands out a fixed list of delays, then stops.
pub struct Replay(pub Vec<Duration>, pub usize);

impl BackOff for Replay {
    fn next_backoff(&mut self) -> Option<Duration> {
        let d = self.0.get(self.1).copied();
        self.1 += 1;
        d
    }

    fn reset(&mut self) {
        self.1 = 0;
    }
}
