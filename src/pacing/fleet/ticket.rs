//! A request paced by the fleet's shared state: its reservation, then its send.

use super::held::Place as Held;
use super::store::{
    Args, Asking, Deferred, Keys, PROBE_EVERY, Reserved, Slot, Store, UNRESERVED, answered,
};
use crate::error::pacing::PacingError;
use crate::pacing::control::{Answer, STARTUP_DOUBLING, Sent};
use crate::pacing::destination::{Admit, Grant, Limits, Ticket, Turn, read_answer};
use crate::pacing::destinations::Key;
use crate::pacing::layer::Shared;
use crate::retry_after::ServerSaid;
use crate::time::{ClockFn, instant_after};
use http::{HeaderMap, StatusCode};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::time::Instant;

/// A request whose slow-start window is full asks Redis again at least this often.
const ASK_AGAIN: Duration = Duration::from_millis(10);

/// An answer waits this long for this process's next reservation to carry it, then is
/// told alone. A worker's next request usually asks within microseconds of the answer.
const CARRY_FOR: Duration = Duration::from_millis(2);
/// The same for a plain success (no quota reported) from an open destination (neither
/// paced nor in its slow start) or one paced at a known rate: it changes no send, and such
/// answers go in one call per doubling at most.
const CARRY_OPEN_FOR: Duration = STARTUP_DOUBLING;
/// Requests to a destination Redis said was open go without a reservation for this long
/// after: the process tells its answers within [`CARRY_OPEN_FOR`], and the reply says
/// whether it still is. A refusal anywhere in the fleet reaches the process as soon.
const OPEN_FOR: Duration = CARRY_OPEN_FOR.saturating_mul(2);

type Reply = Pin<Box<dyn Future<Output = Result<Reserved, ()>> + Send>>;

/// What a waiting request does now.
pub(crate) enum FleetTurn {
    Go(FleetGrant),
    /// Sent by the in-process pacing (`None`: a destination not paced, too many are).
    Local(Option<Grant>),
    At(Instant),
    Fail(PacingError),
}

/// One destination's place in the shared state: its key and script arguments.
#[derive(Debug, Clone)]
struct Place {
    shared: Arc<Shared>,
    key: Key,
    args: Args,
}

impl Place {
    fn store(&self) -> &Store {
        self.shared
            .fleet
            .as_ref()
            .expect("a fleet ticket has a store")
    }

    /// Its keys in Redis, built for a call: a request that makes none builds none.
    fn keys(&self) -> Keys {
        self.store().keys(&self.key)
    }
}

/// A request waiting for the slot Redis gives it, or, while Redis is away, for in-process
/// pacing (until Redis is back).
pub(crate) struct FleetTicket {
    place: Place,
    reply: Option<Reply>,
    slot: Option<Slot>,
    /// When it first asked, its name in the fleet's waiting line, and whether it may be in
    /// the line (it asked, and took no slot since).
    since: Instant,
    name: f64,
    lined: bool,
    ask_at: Instant,
    /// Held by the pace or the slow-start window: in this process's line for the
    /// destination, where only the oldest asks Redis. `window`: held by the window.
    held: bool,
    window: bool,
    local: Option<Ticket>,
}

impl std::fmt::Debug for FleetTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetTicket")
            .field("to", &self.place.key.to_string())
            .field("slot", &self.slot.map(|slot| slot.sent.at))
            .finish_non_exhaustive()
    }
}

impl FleetTicket {
    pub(crate) fn new(shared: Arc<Shared>, key: Key, known: Option<f64>, now: Instant) -> Self {
        let store = shared.fleet.as_ref().expect("a fleet ticket has a store");
        // Behind a request of this process already held there, it waits without asking.
        let (held, name) = (store.held.any(&key), store.name());
        let args = Args::new(&shared.settings, known);
        let place = Place { shared, key, args };
        Self {
            place,
            reply: None,
            slot: None,
            since: now,
            name,
            lined: false,
            ask_at: now,
            held,
            window: false,
            local: None,
        }
    }

    /// Its id in this process's line: its name, an integer.
    fn id(&self) -> u64 {
        self.name as u64
    }

    /// Held: `Some` while it waits behind another request of this process, which asks
    /// for both. Past the end of its wait, a request asks for itself: a pace fails it.
    fn behind(&mut self, limits: &Limits, waker: &Waker, now: Instant) -> Option<FleetTurn> {
        if !self.held || now >= limits.end {
            return None;
        }
        let (held, key) = (&self.place.store().held, &self.place.key);
        match held.place(key, self.id(), self.since, waker) {
            Held::Behind(by) => Some(FleetTurn::At(by.min(limits.wake_by(now)))),
            Held::Head { promoted, answered } => {
                if promoted || (answered && self.window) {
                    self.ask_at = now;
                }
                None
            }
        }
    }

    /// Out of this process's line, if in it: the next request held there asks at once.
    fn release(&mut self) {
        if std::mem::take(&mut self.held) {
            self.place.store().held.leave(&self.place.key, self.id());
        }
    }

    /// Whether the request may go now; otherwise `waker` is woken when that may change.
    pub(crate) fn turn(&mut self, limits: &Limits, waker: &Waker) -> FleetTurn {
        let now = Instant::now();
        if let Some(local) = &self.local {
            if !self.place.store().usable() {
                return match local.turn(limits, waker) {
                    Turn::Go(grant) => FleetTurn::Local(Some(grant)),
                    // Redis may be back sooner: look again after a probe's period.
                    Turn::At(at) => FleetTurn::At(at.min(instant_after(now, PROBE_EVERY))),
                    Turn::Fail(error) => FleetTurn::Fail(error),
                };
            }
            // Redis is back: a request still waiting asks it, which knows the whole fleet.
            self.local = None;
        }
        if let Some(slot) = self.slot {
            if slot.sent.at > now {
                return FleetTurn::At(slot.sent.at);
            }
            self.slot = None;
            return FleetTurn::Go(FleetGrant::new(self.place.clone(), slot));
        }
        if limits.deadline.is_some_and(|deadline| now >= deadline) {
            return FleetTurn::Fail(PacingError::DeadlinePassed);
        }
        if self.reply.is_none()
            && let Some(turn) = self.ask(limits, waker, now)
        {
            return turn;
        }
        let reply = self.reply.as_mut().expect("asked above");
        let Poll::Ready(reply) = reply.as_mut().poll(&mut Context::from_waker(waker)) else {
            return FleetTurn::At(limits.wake_by(now));
        };
        self.reply = None;
        self.read(reply, limits, waker)
    }

    /// Asks Redis for a slot, unless the request may go or wait without a call: `Some`.
    fn ask(&mut self, limits: &Limits, waker: &Waker, now: Instant) -> Option<FleetTurn> {
        if let Some(behind) = self.behind(limits, waker, now) {
            return Some(behind);
        }
        if now < self.ask_at {
            return Some(FleetTurn::At(self.ask_at));
        }
        if !self.place.store().usable() {
            return Some(self.alone(limits, waker, now));
        }
        // Open lately: nothing to wait for. Its answer tells Redis of the send.
        if let Some(round) = self.place.store().open_round(&self.place.key, now) {
            let place = self.place.clone();
            return Some(FleetTurn::Go(FleetGrant::unreserved(place, round, now)));
        }
        let place = self.place.clone();
        let asking = Asking {
            max_wait: limits.end.saturating_duration_since(now),
            waited: now.saturating_duration_since(self.since),
            name: self.name,
        };
        let idle = place.shared.settings.idle_timeout;
        let seed = place.store().seed(&place.key, idle, now);
        // The answers since this process's last call go with it: one call per request.
        let answers = place.store().take_pending(&place.key);
        self.lined = true;
        self.reply = Some(Box::pin(async move {
            let (keys, store) = (place.keys(), place.store());
            store
                .reserve(&keys, &place.args, asking, seed, &answers)
                .await
        }));
        None
    }

    /// What Redis's reply means for the request: its slot, another ask, or a failure.
    fn read(&mut self, reply: Result<Reserved, ()>, limits: &Limits, waker: &Waker) -> FleetTurn {
        let now = Instant::now();
        match reply {
            Ok(Reserved::At(slot)) => {
                self.lined = false;
                self.release();
                let Slot { sent, pace, open } = slot;
                let (store, key) = (self.place.store(), &self.place.key);
                store.took(key, sent.number, pace, sent.at);
                store.saw_open(key, sent.round, open, instant_after(now, OPEN_FOR));
                self.slot = Some(slot);
                self.turn(limits, waker)
            }
            Ok(Reserved::Later(wait)) => {
                // In line for the slow start's window; an answer to this process wakes the
                // one asking for it here.
                (self.lined, self.held, self.window) = (true, true, true);
                self.ask_at = instant_after(now, wait.min(ASK_AGAIN));
                self.turn(limits, waker)
            }
            // Within a doubling at the latest: the pace may double meanwhile (the start-up),
            // and the script takes a request unseen for two as gone.
            Ok(Reserved::NotNext(wait)) => {
                (self.held, self.window) = (true, false);
                self.ask_at = instant_after(now, wait.min(STARTUP_DOUBLING));
                self.turn(limits, waker)
            }
            Ok(Reserved::TooLong(wait)) => {
                // The script took it out of the line.
                self.lined = false;
                self.release();
                FleetTurn::Fail(limits.too_long(wait, now))
            }
            Err(()) => {
                // Unseen, it leaves the line by itself.
                self.lined = false;
                self.alone(limits, waker, now)
            }
        }
    }

    /// Redis failed: the request is paced in-process from now on (at this process's share
    /// of the fleet's last pace, see [`Shared::destination`]).
    fn alone(&mut self, limits: &Limits, waker: &Waker, now: Instant) -> FleetTurn {
        self.release();
        let Some(destination) = self.place.shared.destination(&self.place.key, now) else {
            return FleetTurn::Local(None);
        };
        match destination.admit(limits, now) {
            Admit::Go(grant) => FleetTurn::Local(Some(grant)),
            Admit::Queue(ticket) => {
                self.local = Some(ticket);
                self.turn(limits, waker)
            }
            Admit::Fail(error) => FleetTurn::Fail(error),
        }
    }
}

impl Drop for FleetTicket {
    fn drop(&mut self) {
        self.release();
        // A slot taken but never used leaves the sends in flight.
        if let Some(slot) = self.slot.take() {
            drop(FleetGrant::new(self.place.clone(), slot));
        }
        // A request that gave up waiting leaves the line: the next one need not wait for
        // it to be taken as gone.
        if self.lined {
            let (place, name) = (self.place.clone(), self.name);
            spawn(async move { place.store().leave(&place.keys(), &place.args, name).await });
        }
    }
}

/// A request sent on a slot of the shared state, in flight until finished or dropped.
#[derive(Debug)]
pub(crate) struct FleetGrant {
    place: Place,
    sent: Option<Sent>,
    /// The send has a slot among the sends in flight (not so to an open destination).
    reserved: bool,
    /// The destination was open when the slot was given.
    open: bool,
}

impl FleetGrant {
    fn new(place: Place, slot: Slot) -> Self {
        Self {
            place,
            sent: Some(slot.sent),
            reserved: true,
            open: slot.open,
        }
    }

    /// A send to an open destination, in `round`, without a reservation.
    fn unreserved(place: Place, round: u64, now: Instant) -> Self {
        let sent = Sent {
            round,
            number: UNRESERVED,
            at: now,
            seen: None,
        };
        Self {
            place,
            sent: Some(sent),
            reserved: false,
            open: true,
        }
    }

    /// Tells the shared state the answer: with this process's next reservation for the
    /// destination, or alone after [`CARRY_FOR`] ([`CARRY_OPEN_FOR`] for a plain success
    /// from an open or told one) if none comes; a refusal, or a batch as large as a call carries,
    /// at once. Returns what the response said, read with `clock`.
    pub(crate) fn finish(
        mut self,
        status: StatusCode,
        headers: &HeaderMap,
        clock: Option<&ClockFn>,
    ) -> ServerSaid {
        let (said, answer) = read_answer(&self.place.shared.settings, status, headers, clock);
        let sent = self.sent.take().expect("a grant is finished once");
        let values = answered(sent, answer, said.quota());
        let place = self.place.clone();
        let deferred = place.store().defer(&place.key, values);
        place.store().held.answered(&place.key);
        let refused = matches!(answer, Answer::Refused(_));
        let plain = answer == Answer::Served && said.quota().is_none();
        let carry = match plain && (self.open || self.place.args.told()) {
            true => CARRY_OPEN_FOR,
            false => CARRY_FOR,
        };
        // `None`: the answers waiting go now.
        let batch = match deferred {
            _ if refused => None,
            Deferred::Full => None,
            Deferred::First(batch) => Some(batch),
            Deferred::Behind => return said,
        };
        spawn(async move {
            let answers = match batch {
                Some(batch) => {
                    tokio::time::sleep(carry).await;
                    place.store().take_batch(&place.key, batch)
                }
                None => place.store().take_pending(&place.key),
            };
            if answers.is_empty() {
                return;
            }
            let store = place.store();
            let reply = store.answer(&place.keys(), &place.args, &answers).await;
            if let Some((round, open)) = reply {
                let until = instant_after(Instant::now(), OPEN_FOR);
                store.saw_open(&place.key, round, open, until);
            }
        });
        said
    }
}

impl Drop for FleetGrant {
    fn drop(&mut self) {
        // A send without a reservation is not among the sends in flight.
        let reserved = self.sent.take().filter(|_| self.reserved);
        if let Some(sent) = reserved {
            let place = self.place.clone();
            spawn(async move {
                place
                    .store()
                    .release(&place.keys(), &place.args, sent)
                    .await
            });
        }
    }
}

/// Runs `task` on the current runtime, if there is one (a drop may happen outside any).
fn spawn(task: impl Future<Output = ()> + Send + 'static) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(task);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pacing::{PacingLayer, RedisPacing};
    use http::uri::Authority;

    use crate::pacing::fleet::store::keys_of;
    use crate::pacing::fleet::tests::redis_server;

    /// A request to `authority` in `layer`'s fleet.
    fn ticket(layer: &PacingLayer, authority: &str) -> FleetTicket {
        let key = Key::from_authority(&authority.parse::<Authority>().unwrap());
        let known = layer.shared.known.get(&key).copied();
        FleetTicket::new(Arc::clone(&layer.shared), key, known, Instant::now())
    }

    /// Turns `ticket` until Redis answered its call.
    async fn answered(ticket: &mut FleetTicket) -> FleetTurn {
        let limits = Limits::new(Instant::now(), Duration::from_secs(30), None);
        loop {
            let turn = ticket.turn(&limits, Waker::noop());
            if ticket.reply.is_none() {
                return turn;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// How many `leave` calls Redis ran (its slow log logs every command).
    async fn leaves(redis: &redis_server::RedisServer) -> usize {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let log: Vec<redis::Value> = redis.query(&["SLOWLOG", "GET", "-1"]).await.unwrap();
        let leave = redis::Value::BulkString(b"leave".to_vec());
        let calls = log.iter().filter_map(|entry| match entry {
            redis::Value::Array(fields) => fields.get(3),
            _ => None,
        });
        let calls =
            calls.filter(|args| matches!(args, redis::Value::Array(args) if args.contains(&leave)));
        calls.count()
    }

    /// How many requests wait in the fleet's line for `authority`.
    async fn in_line(redis: &redis_server::RedisServer, authority: &str) -> usize {
        let [_, _, line, _] = keys_of(RedisPacing::DEFAULT_PREFIX, authority);
        redis.query(&["ZCARD", &line]).await.unwrap()
    }

    /// A request held by the fleet's pace or by its slow start's window is in its line, and
    /// leaves it when dropped; one that took its slot is out of it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    #[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
    async fn a_held_request_leaves_the_fleets_line_when_dropped() {
        let redis = redis_server::RedisServer::start().await;
        let _: () = redis
            .query(&["CONFIG", "SET", "slowlog-log-slower-than", "0"])
            .await
            .unwrap();
        let fleet = RedisPacing::new(redis.client()).with_timeout(Duration::from_millis(500));
        let builder =
            PacingLayer::builder().with_known_rate("paced.test", 1, Duration::from_secs(1));
        let layer = builder.with_redis(fleet).build().unwrap();
        // The first calls connect and load the script.
        let mut warm = 0;
        while !matches!(
            answered(&mut ticket(&layer, "warm.test")).await,
            FleetTurn::Go(_)
        ) {
            warm += 1;
            assert!(warm < 20, "no request went through Redis");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        // 4 sends fill a new destination's window, out of the line; a fifth waits in it.
        let mut sent = vec![];
        for _ in 0..4 {
            let mut first = ticket(&layer, "window.test");
            match answered(&mut first).await {
                FleetTurn::Go(grant) => sent.push(grant),
                _ => panic!("a send within the initial window waited"),
            }
            assert!(!first.lined, "a request that took its slot is in the line");
        }
        let mut held = ticket(&layer, "window.test");
        assert!(matches!(answered(&mut held).await, FleetTurn::At(_)));
        assert!(
            held.lined,
            "a request held by the window is not in the line"
        );
        assert_eq!(in_line(&redis, "window.test").await, 1);
        let before = leaves(&redis).await;
        drop(held);
        assert_eq!(leaves(&redis).await, before + 1);
        assert_eq!(in_line(&redis, "window.test").await, 0);

        // Told 1 r/s, a first send takes the slot; the second waits in line, and leaves it.
        assert!(matches!(
            answered(&mut ticket(&layer, "paced.test")).await,
            FleetTurn::Go(_)
        ));
        let mut paced = ticket(&layer, "paced.test");
        assert!(matches!(answered(&mut paced).await, FleetTurn::At(_)));
        assert!(paced.lined, "a request held by the pace is not in the line");
        drop(paced);
        assert_eq!(leaves(&redis).await, before + 2);
    }
}
