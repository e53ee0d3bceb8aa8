//! The queue of requests waiting for their turn at one destination.

use crate::time::instant_after;
use std::collections::{BTreeMap, HashMap};
use std::task::Waker;
use std::time::Duration;
use tokio::time::Instant;

/// How long a waiter due to poll may keep others waiting: an unpolled future never holds them.
pub(crate) const GRACE: Duration = Duration::from_millis(20);
/// How far [`Queue::wake`] and [`Queue::watch`] look along the queue.
const WAKE_WALK: usize = 64;
/// Waiters that watch the first in line (two: one may be stalled itself).
const WATCHERS: usize = 2;
/// A waiter asleep until woken looks again this often, in case its wakers stalled.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);

/// What a waiter does about the first in line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Watch {
    First,
    /// The first in line stalled: pass it over.
    SkipFront,
    /// Look again then, to see whether the first in line took its turn.
    At(Instant),
    /// Others watch: sleep until woken.
    Wait,
}

#[derive(Debug)]
struct Waiter {
    waker: Option<Waker>,
    /// When it should poll next (woken, or its slot), until it does.
    expected_at: Option<Instant>,
}

impl Waiter {
    /// Due to poll more than [`GRACE`] ago.
    fn stalled(&self, now: Instant) -> bool {
        self.expected_at
            .is_some_and(|at| instant_after(at, GRACE) <= now)
    }
}

/// Waiters in line by id (arrival order), and those passed over for stalling until they poll.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    line: BTreeMap<u64, Waiter>,
    skipped: HashMap<u64, Waiter>,
    next_id: u64,
    /// Waiters visited by the walks, to check that the work is linear.
    #[cfg(test)]
    steps: usize,
}

impl Queue {
    /// Waiters held, skipped ones included.
    pub(crate) fn len(&self) -> usize {
        self.line.len() + self.skipped.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A new waiter at the back, due to poll now.
    pub(crate) fn push(&mut self, now: Instant) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let waiter = Waiter {
            waker: None,
            expected_at: Some(now),
        };
        self.line.insert(id, waiter);
        id
    }

    pub(crate) fn front(&self) -> Option<u64> {
        self.line.keys().next().copied()
    }

    /// Waiter `id` polls: no longer due, and back in line if skipped. `false` if it is
    /// not in the queue.
    pub(crate) fn polled(&mut self, id: u64, waker: &Waker) -> bool {
        if let Some(waiter) = self.skipped.remove(&id) {
            self.line.insert(id, waiter);
        }
        let Some(w) = self.line.get_mut(&id) else {
            return false;
        };
        if !w.waker.as_ref().is_some_and(|old| old.will_wake(waker)) {
            w.waker = Some(waker.clone());
        }
        w.expected_at = None;
        true
    }

    /// Waiter `id` will poll again at `at` (its slot).
    pub(crate) fn expect(&mut self, id: u64, at: Instant) {
        if let Some(w) = self.line.get_mut(&id) {
            w.expected_at = Some(at);
        }
    }

    /// What waiter `id` does: the next [`WATCHERS`] due to poll watch the first, until
    /// its turn plus [`GRACE`]; the others sleep until woken.
    pub(crate) fn watch(&mut self, id: u64, now: Instant) -> Watch {
        let mut line = self.line.iter();
        let Some((&front, first)) = line.next() else {
            return Watch::Wait;
        };
        if front == id {
            return Watch::First;
        } else if first.stalled(now) {
            return Watch::SkipFront;
        }
        let (mut earliest, mut watchers) = (first.expected_at, 0);
        for (&other, w) in line.take(WAKE_WALK) {
            #[cfg(test)]
            {
                self.steps += 1;
            }
            if other == id {
                return earliest.map_or(Watch::Wait, |at| Watch::At(instant_after(at, GRACE)));
            }
            if let Some(at) = w.expected_at.filter(|_| !w.stalled(now)) {
                earliest = Some(earliest.map_or(at, |e| e.min(at)));
                watchers += 1;
                if watchers >= WATCHERS {
                    break;
                }
            }
        }
        Watch::Wait
    }

    /// The first in line goes, or (`skip`) is passed over until it polls again.
    pub(crate) fn pop_front(&mut self, skip: bool) {
        if let Some((id, waiter)) = self.line.pop_first()
            && skip
        {
            self.skipped.insert(id, waiter);
        }
    }

    /// Waiter `id` leaves (dropped, or failed); the next in line is woken if it was first.
    pub(crate) fn remove(&mut self, id: u64, now: Instant) {
        if self.front() == Some(id) {
            self.line.remove(&id);
            self.wake(now, false);
        } else if self.line.remove(&id).is_none() {
            self.skipped.remove(&id);
        }
    }

    /// Wakes the first in line (unless `behind_front`) and the [`WATCHERS`] behind it,
    /// with any stalled waiters between.
    pub(crate) fn wake(&mut self, now: Instant, behind_front: bool) {
        let mut live = usize::from(behind_front);
        for w in self.line.values_mut().skip(live).take(WAKE_WALK) {
            #[cfg(test)]
            {
                self.steps += 1;
            }
            let stalled = w.stalled(now);
            if let Some(waker) = &w.waker {
                waker.wake_by_ref();
            }
            if w.expected_at.is_none_or(|at| at > now) {
                w.expected_at = Some(now);
            }
            if !stalled {
                live += 1;
                if live == 1 + WATCHERS {
                    break;
                }
            }
        }
    }

    /// Wakes every waiter, to check whether it can wait out a cool-down.
    pub(crate) fn wake_all(&mut self) {
        let waiters = self.line.values().chain(self.skipped.values());
        for waker in waiters.filter_map(|w| w.waker.as_ref()) {
            waker.wake_by_ref();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    #[tokio::test(start_paused = true)]
    async fn waiters_leave_in_order_and_from_anywhere() {
        let now = Instant::now();
        let mut queue = Queue::default();
        let ids: Vec<u64> = (0..5).map(|_| queue.push(now)).collect();
        assert_eq!(queue.front(), Some(ids[0]));
        queue.remove(ids[2], now);
        queue.remove(ids[0], now);
        assert_eq!(queue.front(), Some(ids[1]));
        queue.pop_front(true);
        assert_eq!(queue.front(), Some(ids[3]));
        assert_eq!(queue.len(), 3, "a skipped waiter keeps its entry");
        assert!(queue.polled(ids[1], Waker::noop()));
        assert_eq!(
            queue.front(),
            Some(ids[1]),
            "back at the front once it polls"
        );
        queue.pop_front(false);
        queue.pop_front(false);
        assert_eq!(queue.front(), Some(ids[4]));
        queue.pop_front(false);
        assert!(queue.is_empty());
        assert_eq!(queue.front(), None);
    }

    /// Operations, not time: pushing, cancelling from the middle, skipping and serving
    /// `n` waiters visits O(n) entries in all, not O(n²).
    #[tokio::test(start_paused = true)]
    async fn the_queue_does_linear_work() {
        for n in [1_000_usize, 10_000, 100_000] {
            let now = Instant::now();
            let mut queue = Queue::default();
            let ids: Vec<u64> = (0..n).map(|_| queue.push(now)).collect();
            for id in &ids {
                queue.polled(*id, Waker::noop());
            }
            // Every other waiter cancels, from the middle of the queue.
            for id in ids.iter().skip(1).step_by(2) {
                queue.remove(*id, now);
            }
            let mut served = 0;
            while queue.front().is_some() {
                queue.wake(now, false);
                if served % 3 == 0 {
                    queue.pop_front(true);
                    let skipped = ids[served * 2 % n];
                    queue.polled(skipped, Waker::noop());
                }
                queue.pop_front(false);
                served += 1;
            }
            assert!(queue.is_empty());
            assert!(queue.steps <= 12 * n, "{n} waiters: {} steps", queue.steps);
        }
    }
}
