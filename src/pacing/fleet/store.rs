//! The calls to Redis: one script, its arguments, and the store's health.

use super::RedisPacing;
use super::code::Runner;
use super::held::Held;
use crate::pacing::control::{
    Answer, BETA, CUBIC_C, MIN_RATE, OPEN_WINDOW, REOPEN_AFTER, SERVED_WINDOW, STARTUP_DOUBLING,
    Seen, Sent,
};
use crate::pacing::destination::Alone;
use crate::pacing::destinations::{Key, lock};
use crate::pacing::layer::Settings;
use crate::retry_after::QuotaLeft;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::time::Instant;

/// After a failed call, the controller is called this often in the background, and the
/// process paces alone until it answers: it rejoins the fleet within this of Redis's return.
pub(super) const PROBE_EVERY: Duration = Duration::from_millis(100);

/// A line's name: a process's number in its first bits, its request's in the last
/// (`PROCESS` in `controller.lua` is 2^`REQUEST_BITS`).
const PROCESS_BITS: u32 = 31;
pub(super) const REQUEST_BITS: u32 = 21;

/// A call carries at most this many answers: Redis runs one script at a time, and a long
/// call holds every process's.
const MAX_CARRIED: usize = 64;

/// What became of an answer kept for the next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deferred {
    /// The first of batch `n`: if no call carries the batch, it goes alone.
    First(u64),
    /// Behind the first of its batch.
    Behind,
    /// Its batch is as large as a call carries: it goes now.
    Full,
}

/// The number of a send that went without a reservation, to an open destination: the
/// script numbers it when told its answer.
pub(crate) const UNRESERVED: u64 = 0;

/// The script's time argument that makes it read Redis's clock.
const REDIS_CLOCK: f64 = -1.0;

/// What a reservation says.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reserved {
    /// The slot is taken.
    At(Slot),
    /// The slow start's window is full: ask again within `wait`.
    Later(Duration),
    /// A paced send would wait `wait`, past the longest wait.
    TooLong(Duration),
    /// Another send is next: ask again after `wait`, when this one may be.
    NotNext(Duration),
}

/// A send's slot: the send (leaving at `Sent::at`), the fleet's pace if paced, and
/// whether the destination is open (neither paced nor in its slow start, no room reported).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Slot {
    pub(crate) sent: Sent,
    pub(crate) pace: Option<FleetPace>,
    pub(crate) open: bool,
}

/// A paced fleet's pace, and the rate it was served at over the last window.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FleetPace {
    pub(crate) pace: f64,
    pub(crate) served: f64,
}

impl FleetPace {
    /// The pace it held up at: its delivery rate, if lower (CUBIC may be probing past it).
    fn held(self) -> f64 {
        self.pace.min(self.served.max(MIN_RATE))
    }
}

/// What a process brings to a state Redis lost.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Seed {
    /// The pace the fleet was served at, if this process saw it paced within the idle
    /// timeout: a lost state starts there.
    pace: Option<f64>,
    /// This process's pace alone, on its first reservation after: processes rejoining a
    /// state Redis lost meanwhile each add theirs. Those still alone keep sending at
    /// theirs, so the fleet's rate stays whole as they come back one by one.
    rejoin: Option<f64>,
}

/// What one process knows of the shared state: how to reach it, whether it lately could,
/// and each destination's pace and this process's share of it.
pub(crate) struct Store {
    config: RedisPacing,
    connection: OnceLock<Result<ConnectionManager, String>>,
    runner: Arc<Runner>,
    /// Whether a call failed and no call in the background was answered since: requests
    /// do not ask Redis.
    down: Arc<AtomicBool>,
    views: Mutex<HashMap<Key, View>>,
    /// The most views kept, as many as the layer's destinations.
    max_views: usize,
    /// Answers not yet told, by destination: the next reservation carries them.
    /// Each kept with the number of its batch (the answers since the last call).
    pending: Mutex<HashMap<Key, (u64, Vec<Answered>)>>,
    batches: AtomicU64,
    /// The requests held by each destination's pace or window: the oldest asks for all.
    pub(crate) held: Held,
    /// This process's number in the fleet (random), and the count of its requests named.
    process: u64,
    named: AtomicU64,
}

/// An answer as the script reads it: the send's round and number, the answer, the delay
/// asked, the quota's remaining count, reset and whether that was in whole Unix seconds,
/// and the room the send left in.
pub(crate) type Answered = [f64; 9];

/// The keys of one destination: its state, its sends in flight, its waiting line by first
/// ask and by last ask.
pub(crate) type Keys = [String; 4];

/// The keys of the destination `name` under `prefix`: see [`Store::keys`].
pub(super) fn keys_of(prefix: &str, name: impl std::fmt::Display) -> Keys {
    let state = format!("{prefix}{{{name}}}");
    let [sent, line, seen] = ["sent", "line", "seen"].map(|part| format!("{state}:{part}"));
    [state, sent, line, seen]
}

/// A request asking for a slot.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asking {
    /// The longest it may wait if paced.
    pub(crate) max_wait: Duration,
    /// How long it has waited since it first asked: its place in the line.
    pub(crate) waited: Duration,
    /// Its name in the line, unique in the fleet: see [`Store::name`].
    pub(crate) name: f64,
}

/// The answer to `sent`, with the quota it reported, as the script reads it (-1: none).
pub(crate) fn answered(sent: Sent, answer: Answer, quota: Option<QuotaLeft>) -> Answered {
    let (kind, asked) = match answer {
        Answer::Served => (0.0, -1.0),
        Answer::Refused(asked) => (1.0, asked.map_or(-1.0, millis)),
        Answer::Other => (2.0, -1.0),
    };
    let remaining = quota.map_or(-1.0, |left| left.remaining as f64);
    let reset = quota.and_then(|left| left.reset).map_or(-1.0, millis);
    let coarse = f64::from(u8::from(quota.is_some_and(|left| left.coarse)));
    let [window, room] = sent.seen.map_or([-1.0; 2], |seen| {
        [seen.window, seen.remaining].map(|value| value as f64)
    });
    let [round, number] = [sent.round, sent.number].map(|value| value as f64);
    [
        round, number, kind, asked, remaining, reset, coarse, window, room,
    ]
}

/// The room a reservation's send left in, from the script's reply (`-1`: none).
pub(crate) fn seen(window: i64, remaining: i64) -> Option<Seen> {
    (window >= 0).then(|| Seen {
        window: window.unsigned_abs(),
        remaining: remaining.max(0).unsigned_abs(),
    })
}

/// A destination as this process last saw it in the shared state.
#[derive(Debug, Clone, Copy)]
struct View {
    /// The fleet's pace, if paced.
    pace: Option<FleetPace>,
    /// This process's share of the fleet's sends over the last whole window, if one passed.
    share: Option<f64>,
    /// The current window: its start, the fleet's first and latest send numbers in it,
    /// and this process's sends.
    start: Instant,
    first: u64,
    last: u64,
    own: u64,
    /// Whether the in-process pacing was told this pace since Redis last answered.
    told: bool,
    /// The pace it was told alone, until its first reservation after: the part of the
    /// fleet's pace it brings back to a state Redis lost meanwhile.
    rejoin: Option<f64>,
    /// The time of the last slot Redis gave this process.
    seen: Instant,
    /// Until when, and in which round, requests may go without a reservation: Redis
    /// lately said the destination was open.
    open: Option<(Instant, u64)>,
}

impl View {
    /// This process's share of the fleet's sends in the current window (so far).
    fn window_share(&self) -> f64 {
        let fleet = self.last.saturating_sub(self.first) + 1;
        (self.own as f64 / fleet as f64).min(1.0)
    }

    fn new(first: u64, now: Instant) -> Self {
        Self {
            pace: None,
            share: None,
            start: now,
            first,
            last: first,
            own: 0,
            told: false,
            rejoin: None,
            seen: now,
            open: None,
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Store {
    pub(crate) fn new(config: RedisPacing, max_views: usize) -> Self {
        // A live head asks again within a doubling, and waits a call's timeout at most.
        let gone = STARTUP_DOUBLING
            .saturating_mul(2)
            .saturating_add(config.timeout);
        Self {
            config,
            connection: OnceLock::new(),
            runner: Arc::default(),
            down: Arc::new(AtomicBool::new(false)),
            views: Mutex::new(HashMap::new()),
            max_views,
            pending: Mutex::new(HashMap::new()),
            batches: AtomicU64::new(0),
            held: Held::new(gone),
            process: rand::random::<u64>() >> (64 - PROCESS_BITS),
            named: AtomicU64::new(0),
        }
    }

    /// A request's name in the fleet's line: this process's number, then the request's
    /// (the script reads the process from it). Exactly an f64: under 2^52.
    pub(crate) fn name(&self) -> f64 {
        let request = self.named.fetch_add(1, Ordering::Relaxed) & ((1 << REQUEST_BITS) - 1);
        ((self.process << REQUEST_BITS) | request) as f64
    }

    /// This process took send `number` of `key`, in a slot at `now`, the fleet paced at `pace`.
    pub(crate) fn took(&self, key: &Key, number: u64, pace: Option<FleetPace>, now: Instant) {
        let mut views = lock(&self.views);
        if views.len() >= self.max_views && !views.contains_key(key) {
            views.clear();
        }
        let view = views.entry(key.clone()).or_insert(View::new(number, now));
        (view.pace, view.told, view.seen) = (pace, false, now);
        view.own += 1;
        view.last = view.last.max(number);
        if now.saturating_duration_since(view.start) >= SERVED_WINDOW {
            *view = View {
                pace,
                share: Some(view.window_share()),
                open: view.open,
                ..View::new(number + 1, now)
            };
        }
    }

    /// Redis said whether `key` is open, in `round`: if so, this process's requests go
    /// without a reservation until `until`, or until Redis says otherwise.
    pub(crate) fn saw_open(&self, key: &Key, round: u64, open: bool, until: Instant) {
        if let Some(view) = lock(&self.views).get_mut(key) {
            view.open = open.then_some((until, round));
        }
    }

    /// The round a request to `key` goes in without a reservation; `None`: it asks for one.
    pub(crate) fn open_round(&self, key: &Key, now: Instant) -> Option<u64> {
        let (until, round) = lock(&self.views).get(key)?.open?;
        (now < until).then_some(round)
    }

    /// What this process keeps for `key` while Redis is away: its share of the fleet's
    /// sends, and that share of the pace the fleet last held up at, if paced. `None`:
    /// unseen, or the in-process pacing was told it already since Redis last answered.
    pub(crate) fn take_alone(&self, key: &Key) -> Option<Alone> {
        let mut views = lock(&self.views);
        let view = views.get_mut(key).filter(|view| !view.told)?;
        view.told = true;
        let share = view.share.unwrap_or_else(|| view.window_share());
        let pace = view.pace.map(|pace| pace.held() * share);
        view.rejoin = pace;
        let last_send = view.seen;
        Some(Alone {
            share,
            pace,
            last_send,
        })
    }

    /// What a lost state of `key` starts at. An older state may have expired idle; a
    /// younger one was lost (Redis restarted empty, or evicted it), and the fleet goes on at
    /// its pace rather than burst. See [`Seed`].
    pub(crate) fn seed(&self, key: &Key, idle: Duration, now: Instant) -> Seed {
        let mut views = lock(&self.views);
        let Some(view) = views.get_mut(key) else {
            return Seed::default();
        };
        let recent = now.saturating_duration_since(view.seen) < idle;
        let pace = view.pace.map(FleetPace::held).filter(|_| recent);
        Seed {
            pace,
            rejoin: view.rejoin.take(),
        }
    }

    /// The fleet's pace of `key` as this process last saw it; `None`: not paced, or unseen.
    pub(crate) fn pace(&self, key: &Key) -> Option<f64> {
        lock(&self.views).get(key)?.pace.map(|pace| pace.pace)
    }

    /// The lowest of the fleet's paces this process last saw.
    pub(crate) fn lowest_pace(&self) -> Option<f64> {
        let views = lock(&self.views);
        let paces = views.values().filter_map(|view| view.pace);
        paces.map(|pace| pace.pace).reduce(f64::min)
    }

    /// Whether Redis may be asked (no call failed since it last answered).
    pub(crate) fn usable(&self) -> bool {
        !self.down.load(Ordering::Acquire)
    }

    /// The keys of `key`'s state, of its sends and of its waiting line, in one Redis
    /// Cluster slot.
    pub(crate) fn keys(&self, key: &Key) -> Keys {
        keys_of(&self.config.prefix, key)
    }

    /// Takes request `name` out of the waiting line: it no longer waits.
    pub(crate) async fn leave(&self, keys: &Keys, args: &Args, name: f64) {
        if self.usable() {
            let _ = self.call(keys, args, "leave", &[&[name]]).await;
        }
    }

    /// Reserves a send for `asking`, after telling `answers`; a lost state starts at `seed`.
    pub(crate) async fn reserve(
        &self,
        keys: &Keys,
        args: &Args,
        asking: Asking,
        seed: Seed,
        answers: &[Answered],
    ) -> Result<Reserved, ()> {
        let [pace, rejoin] = [seed.pace, seed.rejoin].map(|pace| pace.unwrap_or(0.0));
        let (max_wait, waited) = (millis(asking.max_wait), millis(asking.waited));
        let head = [max_wait, pace, rejoin, waited, asking.name];
        let reply = self
            .call(keys, args, "reserve", &[&head, answers.as_flattened()])
            .await?;
        let wait = Duration::from_micros(reply[1].max(0).unsigned_abs());
        let sent = Sent {
            round: reply[2].max(0).unsigned_abs(),
            number: reply[3].max(0).unsigned_abs(),
            // The slot: when the send leaves.
            at: crate::time::instant_after(Instant::now(), wait),
            seen: seen(reply[6], reply[7]),
        };
        let pace = (reply[4] > 0).then(|| FleetPace {
            pace: reply[4] as f64 / 1000.0,
            served: reply[5] as f64 / 1000.0,
        });
        Ok(match reply[0] {
            0 => Reserved::At(Slot {
                sent,
                pace,
                open: reply[8] == 1,
            }),
            1 => Reserved::Later(wait),
            3 => Reserved::NotNext(wait),
            _ => Reserved::TooLong(wait),
        })
    }

    /// Keeps `answer` for the next call on `key`.
    pub(crate) fn defer(&self, key: &Key, answer: Answered) -> Deferred {
        let mut pending = lock(&self.pending);
        let (batch, answers) = pending
            .entry(key.clone())
            .or_insert_with(|| (self.batches.fetch_add(1, Ordering::Relaxed), Vec::new()));
        answers.push(answer);
        match answers.len() {
            1 => Deferred::First(*batch),
            MAX_CARRIED.. => Deferred::Full,
            _ => Deferred::Behind,
        }
    }

    /// The answers waiting for `key`, taken.
    pub(crate) fn take_pending(&self, key: &Key) -> Vec<Answered> {
        lock(&self.pending).remove(key).unwrap_or_default().1
    }

    /// The answers waiting for `key`, taken if they are still batch `batch`: a call since
    /// carried that one, and the next one waits for a call of its own.
    pub(crate) fn take_batch(&self, key: &Key, batch: u64) -> Vec<Answered> {
        let mut pending = lock(&self.pending);
        match pending.get(key) {
            Some((current, _)) if *current == batch => pending.remove(key).unwrap_or_default().1,
            _ => Vec::new(),
        }
    }

    /// Tells the shared controller `answers` (the values `controller.lua` reads). Returns
    /// the destination's round, and whether it is open.
    pub(crate) async fn answer(
        &self,
        keys: &Keys,
        args: &Args,
        answers: &[Answered],
    ) -> Option<(u64, bool)> {
        let reply = self
            .call(keys, args, "answer", &[answers.as_flattened()])
            .await
            .ok()?;
        Some((reply[2].max(0).unsigned_abs(), reply[8] == 1))
    }

    /// Takes `sent` out of the sends in flight: it was dropped unanswered.
    pub(crate) async fn release(&self, keys: &Keys, args: &Args, sent: Sent) {
        let _ = self
            .call(keys, args, "release", &[&[sent.number as f64]])
            .await;
    }

    async fn call(
        &self,
        keys: &Keys,
        args: &Args,
        op: &str,
        extra: &[&[f64]],
    ) -> Result<[i64; 9], ()> {
        let result = match self.connection() {
            Ok(mut connection) => {
                let extra = extra.iter().flat_map(|part| part.iter());
                let values: Vec<f64> = [REDIS_CLOCK].iter().chain(extra).copied().collect();
                let call = self.runner.run(&mut connection, keys, op, args, &values);
                match tokio::time::timeout(self.config.timeout, call).await {
                    Ok(Ok(reply)) => reply
                        .try_into()
                        .map_err(|reply| format!("unexpected reply {reply:?}")),
                    Ok(Err(error)) => Err(error.to_string()),
                    Err(_) => Err(format!("no reply within {:?}", self.config.timeout)),
                }
            }
            Err(error) => Err(error),
        };
        result.map_err(|error| self.failed(&error, keys))
    }

    /// The connection, made on first use (inside a runtime).
    fn connection(&self) -> Result<ConnectionManager, String> {
        let made = self.connection.get_or_init(|| {
            // One attempt per reconnection: the calls in the background are the retries,
            // so a process rejoins at the first call after Redis is back, not after a backoff.
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(self.config.timeout))
                .set_response_timeout(Some(self.config.timeout))
                .set_number_of_retries(0);
            ConnectionManager::new_lazy_with_config(self.config.client.clone(), config)
                .map_err(|error| error.to_string())
        });
        made.clone()
    }

    /// Records a failed call on `keys`: requests pace alone until a call in the background
    /// on the same keys is answered. Said once per outage; each failed call is counted.
    fn failed(&self, error: &str, keys: &Keys) {
        crate::metrics::pacing_store_failure();
        if self.down.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::warn!(%error, "pacing: Redis unavailable, each process paces alone");
        let down = Arc::downgrade(&self.down);
        let probe = Probe {
            runner: self.runner.clone(),
            keys: keys.clone(),
            timeout: self.config.timeout,
        };
        // Without a connection (an invalid address), no call could be answered.
        if let (Ok(connection), Ok(runtime)) = (self.connection(), Handle::try_current()) {
            runtime.spawn(probe.until_back(connection, down));
        }
    }
}

/// Calls the controller in the background, not only Redis, on the keys a call failed on: a
/// server that answers a ping may still refuse them (a read-only replica, a cluster's node
/// that does not serve their slot).
struct Probe {
    runner: Arc<Runner>,
    keys: Keys,
    timeout: Duration,
}

impl Probe {
    /// Calls every [`PROBE_EVERY`] until a call is answered, then lets requests use Redis
    /// again. Ends early if the layer is dropped.
    async fn until_back(self, mut connection: ConnectionManager, down: Weak<AtomicBool>) {
        loop {
            tokio::time::sleep(PROBE_EVERY).await;
            // A request no process has leaves the line: a write that changes nothing,
            // which a read-only replica refuses.
            let leave = [REDIS_CLOCK, -1.0];
            let call = self
                .runner
                .run(&mut connection, &self.keys, "leave", &Args::NONE, &leave);
            let answered = matches!(tokio::time::timeout(self.timeout, call).await, Ok(Ok(_)));
            let Some(down) = down.upgrade() else { return };
            if answered {
                tracing::info!("pacing: Redis is back, the fleet's pacing is shared again");
                down.store(false, Ordering::Release);
                return;
            }
        }
    }
}

/// The controller's constants and settings (`ARGV[2]`, as one text), one destination's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Args(pub(super) [f64; 15]);

impl Args {
    /// For a call that reads no setting.
    const NONE: Self = Self([0.0; 15]);

    pub(crate) fn new(settings: &Settings, known: Option<f64>) -> Self {
        Self([
            BETA,
            CUBIC_C,
            MIN_RATE,
            millis(STARTUP_DOUBLING),
            millis(REOPEN_AFTER),
            millis(SERVED_WINDOW),
            f64::from(OPEN_WINDOW),
            millis(STARTUP_DOUBLING),
            millis(settings.first_probe),
            millis(settings.max_probe),
            millis(settings.max_cooldown),
            known.unwrap_or(0.0),
            f64::from(settings.initial_window),
            millis(settings.idle_timeout).max(1.0),
            // A fleet spreads a room once one ran out: see `room_rate` in the script.
            1.0,
        ])
    }

    /// The values as `controller.lua` reads them: in one argument, separated by spaces.
    pub(crate) fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut text = String::with_capacity(128);
        for value in self.0 {
            let _ = write!(text, "{value} ");
        }
        text
    }

    /// Whether the destination is paced at a rate the user knows.
    pub(crate) fn told(&self) -> bool {
        self.0[11] > 0.0
    }

    /// The same, but a room that ran out leads to no spreading: the in-process rules
    /// alone, which the script's tests compare it with.
    #[cfg(test)]
    pub(crate) fn in_process_rules(mut self) -> Self {
        self.0[14] = 0.0;
        self
    }
}

/// `duration` in milliseconds, as the script counts time.
pub(crate) fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alone_a_process_paces_at_its_share_of_the_delivery_rate_from_its_last_slot() {
        // No connection is made: the views are this process's own.
        let client = redis::Client::open("redis://127.0.0.1:1/").unwrap();
        let store = Store::new(RedisPacing::new(client), 16);
        let key = Key::from_authority(&"api.example".parse().unwrap());
        let t0 = Instant::now();
        // CUBIC probes at 80 r/s; the fleet was served 50. This process took sends 1, 5,
        // 9 and 13 in the first window, and 17 as the next began: 5 of the fleet's 17.
        let pace = Some(FleetPace {
            pace: 80.0,
            served: 50.0,
        });
        for (i, number) in [1, 5, 9, 13, 17].into_iter().enumerate() {
            let at = t0 + Duration::from_millis(250) * u32::try_from(i).unwrap();
            store.took(&key, number, pace, at);
        }
        let alone = store.take_alone(&key).expect("seen, not told yet");
        assert!((alone.share - 5.0 / 17.0).abs() < 1e-9);
        assert!((alone.pace.unwrap() - 50.0 * 5.0 / 17.0).abs() < 1e-9);
        assert_eq!(alone.last_send, t0 + Duration::from_secs(1));
        assert!(store.take_alone(&key).is_none(), "told once per outage");
        // Back, its first reservation brings that pace to a state Redis lost; the state
        // starts at the delivery rate, not at the pace probed past it.
        let later = t0 + Duration::from_secs(2);
        let seed = store.seed(&key, Duration::from_secs(60), later);
        assert_eq!(seed.pace, Some(50.0));
        assert_eq!(seed.rejoin, alone.pace);
        assert_eq!(
            store.seed(&key, Duration::from_secs(60), later).rejoin,
            None
        );
    }
}
