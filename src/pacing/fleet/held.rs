//! A process's requests held by a destination's shared pace or slow-start window. Only the
//! oldest asks Redis again; the others wait in the process until it takes its slot. Redis's
//! line, ordered by first ask as this one is, then holds one request per process, and a
//! long line costs calls per request, not per waiter and per heartbeat.

use crate::pacing::destinations::{Key, lock};
use crate::time::instant_after;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::task::Waker;
use std::time::Duration;
use tokio::time::Instant;

/// Each destination's held requests in this process.
#[derive(Debug)]
pub(crate) struct Held {
    lines: Mutex<HashMap<Key, Line>>,
    /// A head that did not look for this long is taken as gone (its future no longer
    /// polled): the next takes over, as Redis's line drops a request unseen.
    gone: Duration,
}

/// One destination's held requests: the oldest, asking Redis, then the others, oldest first.
#[derive(Debug, Default)]
struct Line {
    head: Option<Head>,
    behind: VecDeque<Waiting>,
}

/// A held request: its id, when it first asked, and how to wake it.
#[derive(Debug)]
struct Waiting {
    id: u64,
    since: Instant,
    waker: Waker,
}

#[derive(Debug)]
struct Head {
    waiting: Waiting,
    /// When it last looked.
    seen: Instant,
    /// Took over from a head that left: the requests behind it waited, so it asks at once.
    promoted: bool,
    /// An answer of this process came since it last looked: a window may have room.
    answered: bool,
}

/// Where a held request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// It asks Redis: at once if `promoted`, or if `answered` freed room it waits for.
    Head { promoted: bool, answered: bool },
    /// It waits to be woken as the head, or until the given instant: the head may be gone.
    Behind(Instant),
}

impl Held {
    pub(crate) fn new(gone: Duration) -> Self {
        Self {
            lines: Mutex::default(),
            gone,
        }
    }

    /// Whether a request of this process is held at `key`: a new one waits behind it.
    pub(crate) fn any(&self, key: &Key) -> bool {
        lock(&self.lines).contains_key(key)
    }

    /// Where request `id`, waiting `since`, stands at `key` at `now`; in line from now on.
    /// `waker` wakes it when that changes. An older request takes over as the head (answers
    /// may come back out of order), and so does any request from a head gone.
    pub(crate) fn place(&self, key: &Key, id: u64, since: Instant, waker: &Waker) -> Place {
        let now = Instant::now();
        let mut lines = lock(&self.lines);
        let line = lines.entry(key.clone()).or_default();
        if let Some(head) = line.head.as_mut().filter(|head| head.waiting.id == id) {
            head.seen = now;
            head.waiting.waker.clone_from(waker);
            let (promoted, answered) = (head.promoted, head.answered);
            (head.promoted, head.answered) = (false, false);
            return Place::Head { promoted, answered };
        }
        line.behind.retain(|waiting| waiting.id != id);
        let waiting = Waiting {
            id,
            since,
            waker: waker.clone(),
        };
        let gone = |head: &Head| instant_after(head.seen, self.gone);
        match line.head.take() {
            Some(head) if head.waiting.since <= since && now < gone(&head) => {
                let look_by = gone(&head);
                line.head = Some(head);
                let at = line.behind.partition_point(|other| other.since <= since);
                line.behind.insert(at, waiting);
                Place::Behind(look_by)
            }
            head => {
                // An older head is the oldest behind; it learns so on its next look. One
                // gone is forgotten: polled again, it finds its place.
                if let Some(head) = head.filter(|head| now < gone(head)) {
                    line.behind.push_front(head.waiting);
                }
                line.head = Some(Head::new(waiting, false, now));
                Place::Head {
                    promoted: false,
                    answered: false,
                }
            }
        }
    }

    /// Request `id` is no longer held at `key`: if it was the head, the next takes over.
    pub(crate) fn leave(&self, key: &Key, id: u64) {
        let mut lines = lock(&self.lines);
        let Some(line) = lines.get_mut(key) else {
            return;
        };
        if line.head.as_ref().is_some_and(|head| head.waiting.id == id) {
            line.head = line.behind.pop_front().map(|waiting| {
                waiting.waker.wake_by_ref();
                Head::new(waiting, true, Instant::now())
            });
        } else {
            line.behind.retain(|waiting| waiting.id != id);
        }
        if line.head.is_none() {
            lines.remove(key);
        }
    }

    /// An answer came from `key`: its head may find room in a window.
    pub(crate) fn answered(&self, key: &Key) {
        if let Some(head) = lock(&self.lines).get_mut(key).and_then(|l| l.head.as_mut()) {
            head.answered = true;
            head.waiting.waker.wake_by_ref();
        }
    }
}

impl Head {
    fn new(waiting: Waiting, promoted: bool, now: Instant) -> Self {
        Self {
            waiting,
            seen: now,
            promoted,
            answered: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    /// A waker counting its wakes.
    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl Count {
        fn wakes(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    fn key() -> Key {
        Key::of(&http::Request::get("http://api.test/").body(()).unwrap())
    }

    /// Three requests that first asked 0, 1 and 2 ms after `start`, and their wakers.
    fn three() -> (Vec<Instant>, Vec<Arc<Count>>, Vec<Waker>) {
        let start = Instant::now();
        let since = (0..3).map(|ms| start + Duration::from_millis(ms)).collect();
        let counts: Vec<Arc<Count>> = (0..3).map(|_| Arc::default()).collect();
        let wakers = counts.iter().map(|c| Waker::from(c.clone())).collect();
        (since, counts, wakers)
    }

    const GONE: Duration = Duration::from_millis(300);

    const HEAD: Place = Place::Head {
        promoted: false,
        answered: false,
    };

    #[test]
    fn the_oldest_asks_and_the_next_takes_over_at_once_when_it_leaves() {
        let (held, key) = (Held::new(GONE), key());
        let (since, counts, wakers) = three();
        assert!(!held.any(&key));
        for id in 0..3 {
            let place = held.place(&key, id as u64, since[id], &wakers[id]);
            assert_eq!(matches!(place, Place::Behind(_)), id > 0, "{id}");
        }
        assert!(held.any(&key));
        // One behind gives up: it is not woken, nor does it take over later.
        held.leave(&key, 1);
        held.leave(&key, 0);
        assert_eq!((counts[1].wakes(), counts[2].wakes()), (0, 1));
        let promoted = Place::Head {
            promoted: true,
            answered: false,
        };
        assert_eq!(held.place(&key, 2, since[2], &wakers[2]), promoted);
        assert_eq!(held.place(&key, 2, since[2], &wakers[2]), HEAD, "told once");
        held.leave(&key, 2);
        assert!(!held.any(&key), "an empty line is forgotten");
    }

    /// Answers come back out of order: an older request placed later still goes first, as
    /// in Redis's line, else the head would wait behind one that never asks.
    #[test]
    fn an_older_request_placed_later_takes_over() {
        let (held, key) = (Held::new(GONE), key());
        let (since, _, wakers) = three();
        assert_eq!(held.place(&key, 2, since[2], &wakers[2]), HEAD);
        assert_eq!(held.place(&key, 0, since[0], &wakers[0]), HEAD);
        assert!(matches!(
            held.place(&key, 1, since[1], &wakers[1]),
            Place::Behind(_)
        ));
        assert!(matches!(
            held.place(&key, 2, since[2], &wakers[2]),
            Place::Behind(_)
        ));
        held.leave(&key, 0);
        assert!(matches!(
            held.place(&key, 2, since[2], &wakers[2]),
            Place::Behind(_)
        ));
        assert!(matches!(
            held.place(&key, 1, since[1], &wakers[1]),
            Place::Head { .. }
        ));
    }

    /// A head whose future is no longer polled holds the others a while only.
    #[tokio::test(start_paused = true)]
    async fn a_head_that_stops_looking_is_passed_over() {
        let (held, key) = (Held::new(GONE), key());
        let (since, _, wakers) = three();
        held.place(&key, 0, since[0], &wakers[0]);
        let Place::Behind(by) = held.place(&key, 1, since[1], &wakers[1]) else {
            panic!("the head is live");
        };
        assert_eq!(by, Instant::now() + GONE);
        tokio::time::advance(GONE).await;
        assert!(matches!(
            held.place(&key, 1, since[1], &wakers[1]),
            Place::Head { .. }
        ));
        // Polled again, the old head finds its place: first, as the oldest.
        assert_eq!(held.place(&key, 0, since[0], &wakers[0]), HEAD);
    }

    #[test]
    fn an_answer_wakes_the_head_only() {
        let (held, key) = (Held::new(GONE), key());
        let (since, counts, wakers) = three();
        held.place(&key, 0, since[0], &wakers[0]);
        held.place(&key, 1, since[1], &wakers[1]);
        held.answered(&key);
        assert_eq!((counts[0].wakes(), counts[1].wakes()), (1, 0));
        let answered = Place::Head {
            promoted: false,
            answered: true,
        };
        assert_eq!(held.place(&key, 0, since[0], &wakers[0]), answered);
    }
}
