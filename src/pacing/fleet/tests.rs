//! The script against the in-process controller: the same sends and answers at the same
//! times give the same send times, on a real `redis-server`.

use super::code::Runner;
use super::store::{Args, REQUEST_BITS, answered, keys_of, seen};
use crate::pacing::control::{Answer, Config, Controller, Sent, interval};
use crate::pacing::layer::Settings;
use crate::pacing::{PacingBuilder, PacingLayer};
use crate::retry_after::QuotaLeft;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;
use tokio::time::Instant;

/// A line's name for a process's first request: the process's number, shifted.
const PROCESS: f64 = (1u64 << REQUEST_BITS) as f64;

#[path = "../../../tests/support/events.rs"]
mod events;
#[path = "../../../tests/support/redis.rs"]
pub(super) mod redis_server;

/// What a reservation gave: (status, wait in µs, round, number, the room's window and
/// remaining count, open), as the script returns it (less the pace and delivery rate).
type Reply = [i64; 7];

/// The script on its own keys, on a clock the test sets (ms since the start).
struct Script {
    connection: redis::aio::MultiplexedConnection,
    runner: Runner,
    args: Args,
}

impl Script {
    /// The script on `server`, with the default settings.
    async fn on(server: &redis_server::RedisServer) -> Self {
        let connection = server.client().get_multiplexed_async_connection().await;
        Self {
            connection: connection.unwrap(),
            runner: Runner::default(),
            args: Args::new(&settings(), None).in_process_rules(),
        }
    }

    /// Forgets every state: a new destination.
    async fn flush(&mut self) {
        let flushed: redis::RedisResult<()> = redis::cmd("FLUSHALL")
            .query_async(&mut self.connection)
            .await;
        flushed.unwrap();
    }

    /// The value of field `name` of the state, as Lua writes it.
    async fn state(&mut self, name: &str) -> Option<String> {
        let fields = self.fields().await;
        let prefix = format!("{name}=");
        let value = fields.iter().find_map(|field| field.strip_prefix(&prefix));
        value.map(str::to_owned)
    }

    /// Every field of the state, with its value as Lua writes it.
    async fn fields(&mut self) -> Vec<String> {
        let read = "local s = redis.call('GET', KEYS[1]); local out = {}; \
            if s then for k, v in pairs(cmsgpack.unpack(s)) do \
            out[#out + 1] = k .. '=' .. tostring(v) end end; return out";
        let fields: redis::RedisResult<Vec<String>> = redis::cmd("EVAL")
            .arg(read)
            .arg(1)
            .arg("t:{a}")
            .query_async(&mut self.connection)
            .await;
        fields.unwrap()
    }

    /// How many requests wait in line.
    async fn in_line(&mut self) -> usize {
        let [_, _, line, _] = keys_of("t:", "a");
        self.members(&line).await
    }

    /// The sends Redis holds in flight.
    async fn in_flight(&mut self) -> usize {
        let [_, sent, _, _] = keys_of("t:", "a");
        self.members(&sent).await
    }

    /// The members of the sorted set at `key`.
    async fn members(&mut self, key: &str) -> usize {
        let count: redis::RedisResult<usize> = redis::cmd("ZCARD")
            .arg(key)
            .query_async(&mut self.connection)
            .await;
        count.unwrap()
    }

    async fn call(&mut self, now: f64, op: &str, extra: &[f64]) -> Reply {
        let keys = keys_of("t:", "a");
        let values: Vec<f64> = [now].iter().chain(extra).copied().collect();
        let run = self
            .runner
            .run(&mut self.connection, &keys, op, &self.args, &values);
        let reply = run.await.unwrap();
        [
            reply[0], reply[1], reply[2], reply[3], reply[6], reply[7], reply[8],
        ]
    }

    /// Request `name`, in line since `since`, asks for a slot at `t` (ms): what it is told
    /// (0 a slot, 3 not next) and the wait in ms.
    async fn ask(&mut self, t: f64, name: f64, since: f64) -> [i64; 2] {
        let reserve = [30_000.0, 0.0, 0.0, t - since, name];
        let got = self.call(t, "reserve", &reserve).await;
        [got[0], got[1] / 1000]
    }

    /// Tells the script that the send `got` reserved was served at `t`, reporting
    /// `remaining` until a reset a second away (-1: no report).
    async fn served(&mut self, t: f64, got: Reply, remaining: f64) {
        let [round, number, window, room] = [got[2], got[3], got[4], got[5]].map(|v| v as f64);
        let answer = [
            round, number, 0.0, -1.0, remaining, 1000.0, 0.0, window, room,
        ];
        self.call(t, "answer", &answer).await;
    }

    /// Sends at `t`, answered at once with `kind` (0 served, 1 refused) and `remaining`
    /// until the whole second `reset` (ms; `remaining` -1: no report).
    async fn sent_at(&mut self, t: f64, kind: f64, remaining: f64, reset: f64) {
        let got = self.call(t, "reserve", &[30_000.0]).await;
        assert_eq!(got[..2], [0, 0], "a send at {t} ms");
        let [round, number, window, room] = [got[2], got[3], got[4], got[5]].map(|v| v as f64);
        let (reset, coarse) = match remaining < 0.0 {
            true => (-1.0, 0.0),
            false => (reset - t, 1.0),
        };
        let values = [
            round, number, kind, -1.0, remaining, reset, coarse, window, room,
        ];
        self.call(t, "answer", &values).await;
    }
}

/// What the in-process destination says of a request at `now`, first in its queue: go
/// after a wait (status 0), ask again (1: the slow start's window is full), or fail (2).
/// The script gives only the next slot, in the half spacing before it: a request whose
/// slot is further asks again (3) then.
fn turn(control: &mut Controller, now: Instant, max_wait: Duration) -> (i64, Duration) {
    let throttled = control.is_throttled(now);
    let wait = control.ready_at(now).map_or(Duration::ZERO, |at| at - now);
    let spacing = control.rate(now).map_or(Duration::ZERO, interval);
    match () {
        _ if throttled && wait > max_wait => (2, wait),
        _ if !throttled && !wait.is_zero() => (1, wait),
        _ if wait > spacing / 2 => (3, wait - spacing / 2),
        _ => (0, wait),
    }
}

fn settings() -> Settings {
    let layer: PacingLayer = PacingBuilder::default().build().unwrap();
    layer.shared.settings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_script_sends_when_the_controller_would() {
    let server = redis_server::RedisServer::start().await;
    let settings = settings();
    let mut script = Script::on(&server).await;
    for seed in 0..20 {
        script.flush().await;
        // Half the seeds, of each kind below, run the code as a script: Redis before 7.
        script.runner = match seed % 4 {
            0 | 1 => Runner::default(),
            _ => Runner::scripts_only(),
        };
        let start = Instant::now();
        let config = Config {
            known: None,
            max_cooldown: settings.max_cooldown,
            first_probe: settings.first_probe,
            max_probe: settings.max_probe,
            fleet: false,
        };
        let mut control = Controller::new(settings.initial_window, config, start);
        let mut rng = SmallRng::seed_from_u64(seed);
        // Sends made, with the time they leave (ms).
        let mut in_flight: Vec<(Sent, u64, u64)> = Vec::new();
        let mut t = 0u64;
        // The latest slot taken (ms): a request reserving before it is behind others, and
        // the queue in-process gives it no slot until they left.
        let mut latest = 0.0f64;
        // Half the seeds report a quota: a fixed 1 s window of 30 counted at each send, its
        // reset rounded up to a whole second, as express-rate-limit says it: (window, sends).
        // A third of those say it as a Unix time: the window's end from every report.
        let quota = seed >= 10;
        let coarse = quota && seed % 3 == 0;
        let mut window = (0u64, 0u64);
        for step in 0..400 {
            // Both are born at the first reservation, at 0 ms.
            t += if step == 0 {
                0
            } else {
                rng.random_range(0..=120)
            };
            let now = start + Duration::from_millis(t);
            let at = |what: &str| format!("seed {seed}, step {step}, {t} ms: {what}");
            match if step == 0 {
                0
            } else {
                rng.random_range(0..10)
            } {
                0..5 => {
                    let max_wait = settings.max_wait;
                    let (status, wait) = turn(&mut control, now, max_wait);
                    let got = script
                        .call(t as f64, "reserve", &[max_wait.as_millis() as f64])
                        .await;
                    // Behind a slot given out: the in-process queue would look again at
                    // that slot, not now. The script's answer drives both then.
                    let queued = latest > t as f64;
                    let micros = i64::try_from(wait.as_micros()).unwrap();
                    let same = got[0] == status && (got[1] - micros).abs() <= 5;
                    assert!(
                        queued || same,
                        "{}",
                        at(&format!("{got:?} for {status}, {wait:?}"))
                    );
                    if got[0] == 0 {
                        let slot = Duration::from_micros(got[1] as u64);
                        let sent = control.send(now + slot);
                        assert_eq!(
                            (sent.round as i64, sent.number as i64, sent.seen),
                            (got[2], got[3], seen(got[4], got[5])),
                            "{}",
                            at("sent")
                        );
                        latest = t as f64 + got[1] as f64 / 1000.0;
                        let leaves = t + (got[1] as u64).div_ceil(1000);
                        if window.0 != leaves / 1000 {
                            window = (leaves / 1000, 0);
                        }
                        window.1 += 1;
                        // Five seeds lower the quota to 20 from the sixth window on.
                        let limit: u64 = if seed >= 15 && window.0 >= 6 { 20 } else { 30 };
                        in_flight.push((sent, leaves, limit.saturating_sub(window.1)));
                    }
                }
                kind => {
                    let answerable: Vec<usize> = (0..in_flight.len())
                        .filter(|&i| in_flight[i].1 <= t)
                        .collect();
                    if answerable.is_empty() {
                        continue;
                    }
                    let (sent, _, remaining) =
                        in_flight.swap_remove(answerable[rng.random_range(0..answerable.len())]);
                    if kind == 9 {
                        control.release(sent);
                        script
                            .call(t as f64, "release", &[sent.number as f64])
                            .await;
                        continue;
                    }
                    let asked = rng.random_bool(0.5).then_some(Duration::from_secs(1));
                    // Half the runs never refuse: their slow start's window grows and stalls.
                    let refusals = if seed % 2 == 0 { 20 } else { 14 };
                    // A stretch of refusals in the runs that refuse: a window spent, probed.
                    let spent = refusals < 20 && (200..260).contains(&step);
                    let answer = match rng.random_range(0..20) {
                        _ if spent => Answer::Refused(asked),
                        _ if refusals == 20 && rng.random_bool(0.7) => continue,
                        n if n >= refusals && n < 19 => Answer::Refused(asked),
                        0..19 => Answer::Served,
                        _ => Answer::Other,
                    };
                    let reset = match coarse {
                        true => Duration::from_millis(1000 - t % 1000),
                        false => Duration::from_secs(1),
                    };
                    let left = quota.then_some(QuotaLeft {
                        remaining,
                        reset: Some(reset),
                        coarse,
                    });
                    control.answered(sent, answer, left, now);
                    control.release(sent);
                    let values = answered(sent, answer, left);
                    script.call(t as f64, "answer", &values).await;
                }
            }
        }
    }
}

/// The code is loaded once as a library of functions, and again once Redis lost it.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_controller_runs_as_a_function_loaded_again_once_redis_lost_it() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    let libraries = async || -> Vec<redis::Value> {
        let listed = server.query(&["FUNCTION", "LIST", "LIBRARYNAME", "tower_backoff_*"]);
        listed.await.unwrap()
    };
    let reserve = [30_000.0];
    for round in 0..2 {
        assert_eq!(script.call(0.0, "reserve", &reserve).await[..2], [0, 0]);
        server.reset_stats().await;
        assert_eq!(script.call(1.0, "reserve", &reserve).await[..2], [0, 0]);
        assert_eq!(libraries().await.len(), 1, "round {round}");
        let done = done_calls(&server, ["fcall", "evalsha"]).await;
        assert_eq!(done, [1, 0], "round {round}");
        let _: () = server.query(&["FUNCTION", "FLUSH"]).await.unwrap();
        assert!(libraries().await.is_empty());
    }
}

/// Calls that find the library missing at once load it once: the others wait for that load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn calls_that_find_the_controller_missing_at_once_load_it_once() {
    let server = redis_server::RedisServer::start().await;
    let connection = server.client().get_multiplexed_async_connection().await;
    let connection = connection.unwrap();
    let runner = std::sync::Arc::new(Runner::default());
    let args = Args::new(&settings(), None);
    let mut calls = tokio::task::JoinSet::new();
    for destination in 0..50 {
        let (runner, mut connection) = (runner.clone(), connection.clone());
        calls.spawn(async move {
            let keys = keys_of("t:", destination);
            let values = [-1.0, 30_000.0];
            runner
                .run(&mut connection, &keys, "reserve", &args, &values)
                .await
        });
    }
    while let Some(reply) = calls.join_next().await {
        assert_eq!(reply.unwrap().unwrap()[..2], [0, 0]);
    }
    let loads = server.command_stats("function|load").await.calls;
    let [called] = done_calls(&server, ["fcall"]).await;
    assert_eq!([loads, called], [1, 50]);
}

/// Each call is paced by its own settings, past the 64 texts the library keeps parsed:
/// destinations told 70 rates, twice over, each get their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn each_call_is_paced_by_its_own_settings() {
    let server = redis_server::RedisServer::start().await;
    let connection = server.client().get_multiplexed_async_connection().await;
    let mut connection = connection.unwrap();
    let (runner, settings) = (Runner::default(), settings());
    for round in 0..2 {
        for rate in 1..=70 {
            let args = Args::new(&settings, Some(f64::from(rate)));
            let keys = keys_of("t:", format!("{round}-{rate}"));
            let run = runner.run(&mut connection, &keys, "reserve", &args, &[-1.0, 30_000.0]);
            let reply = run.await.unwrap();
            // The pace, in thousandths of a request per second.
            let pace = reply[4] - i64::from(rate) * 1000;
            assert!(pace.abs() <= 1, "round {round}, rate {rate}: {reply:?}");
        }
    }
}

/// A send unanswered for a minute belongs to a process that is gone: it leaves the sends in
/// flight, at the first call a minute on (the sweep runs once a second).
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn a_send_unanswered_for_a_minute_leaves_the_sends_in_flight() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    for _ in 0..4 {
        assert_eq!(script.call(0.0, "reserve", &[30_000.0]).await[0], 0);
    }
    assert_eq!(script.call(59_000.0, "reserve", &[30_000.0]).await[0], 0);
    assert_eq!(script.in_flight().await, 5, "under a minute: in flight");
    assert_eq!(script.call(61_000.0, "reserve", &[30_000.0]).await[0], 0);
    assert_eq!(script.in_flight().await, 2, "the four from 0 ms are gone");
}

/// The fleet's own rules (seeds, rejoining paces, the line, sends without a reservation, a
/// state Redis lost) on random runs: every value stays a number, the sends in flight are
/// those reserved and neither answered nor released, and every reply is one the store reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_fleets_own_rules_keep_the_state_sound() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    for seed in 0..12 {
        script.flush().await;
        script.args = Args::new(&settings(), (seed % 3 == 0).then_some(40.0));
        let mut rng = SmallRng::seed_from_u64(seed);
        let (mut t, mut round) = (0.0, 0.0);
        // The sends reserved, neither answered nor released: (round, number).
        let mut flying: Vec<(f64, f64)> = Vec::new();
        for step in 0..300 {
            t += f64::from(rng.random_range(0..40));
            let at = format!("seed {seed}, step {step}, {t} ms");
            match rng.random_range(0..100) {
                0..40 => {
                    // Right after Redis lost the state, a process may bring a seed or its pace.
                    let mut pace = || match rng.random_bool(0.3) {
                        true => f64::from(rng.random_range(1..60)),
                        false => 0.0,
                    };
                    let (pace, rejoin) = (pace(), pace());
                    let name = PROCESS * f64::from(rng.random_range(1..4)) + f64::from(step);
                    let head = [
                        30_000.0,
                        pace,
                        rejoin,
                        f64::from(rng.random_range(0..50)),
                        name,
                    ];
                    let got = script.call(t, "reserve", &head).await;
                    assert!((0..=3).contains(&got[0]) && got[1] >= 0, "{at}: {got:?}");
                    if got[0] == 0 {
                        round = got[2] as f64;
                        flying.push((round, got[3] as f64));
                    } else {
                        script.call(t, "leave", &[name]).await;
                    }
                }
                40..85 if !flying.is_empty() => {
                    let (round, number) = flying.swap_remove(rng.random_range(0..flying.len()));
                    let kind = f64::from(rng.random_range(0..3));
                    let asked = if rng.random_bool(0.3) { 1000.0 } else { -1.0 };
                    let (remaining, reset) = match rng.random_bool(0.3) {
                        true => (f64::from(rng.random_range(0..30)), 1000.0 - t % 1000.0),
                        false => (-1.0, -1.0),
                    };
                    let answer = [
                        round, number, kind, asked, remaining, reset, 0.0, -1.0, -1.0,
                    ];
                    script.call(t, "answer", &answer).await;
                }
                85..93 => {
                    // A send without a reservation, told in the round last seen.
                    let kind = f64::from(rng.random_range(0..3));
                    let answer = [round, 0.0, kind, -1.0, -1.0, -1.0, 0.0, -1.0, -1.0];
                    script.call(t, "answer", &answer).await;
                }
                93..98 if !flying.is_empty() => {
                    let (_, number) = flying.swap_remove(rng.random_range(0..flying.len()));
                    script.call(t, "release", &[number]).await;
                }
                98.. => {
                    // Redis loses the state: the sends in flight are forgotten with it.
                    script.flush().await;
                    flying.clear();
                }
                _ => continue,
            }
            let fields = script.fields().await;
            let unsound = fields
                .iter()
                .find(|f| f.contains("nan") || f.contains("inf"));
            assert!(unsound.is_none(), "{at}: {unsound:?} in {fields:?}");
            assert_eq!(script.in_flight().await, flying.len(), "{at}");
        }
    }
}

/// A pace brought back by a rejoining process is added to by rejoining reservations only:
/// an answer's values in the same places are not a pace.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn only_a_reservation_brings_back_a_rejoining_processs_pace() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    // A state Redis lost, rebuilt by a process that paced alone at 20 r/s.
    let got = script.call(0.0, "reserve", &[30_000.0, 0.0, 20.0]).await;
    assert_eq!(got[..2], [0, 0]);
    assert_eq!(script.state("cb").await.as_deref(), Some("20"));
    // Its answer, "other" (2), sits where a reservation says a rejoining pace.
    let [round, number] = [got[2], got[3]].map(|v| v as f64);
    let other = [round, number, 2.0, -1.0, -1.0, -1.0, 0.0, -1.0, -1.0];
    script.call(10.0, "answer", &other).await;
    assert_eq!(script.state("cb").await.as_deref(), Some("20"));
    // A second process rejoining adds its own.
    script.call(20.0, "reserve", &[30_000.0, 0.0, 15.0]).await;
    assert_eq!(script.state("cb").await.as_deref(), Some("35"));
}

/// Where functions cannot load, the code runs as a script: a Redis before 7 (no `FCALL`),
/// or a user not allowed `FUNCTION LOAD`.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_controller_runs_as_a_script_where_functions_cannot_load() {
    let without_fcall = ["--rename-command", "FCALL", ""];
    let no_loading = [
        "--user",
        "default",
        "on",
        "nopass",
        "~*",
        "&*",
        "+@all",
        "-function",
    ];
    for options in [&without_fcall[..], &no_loading[..]] {
        let server = redis_server::RedisServer::start_with(options).await;
        let mut script = Script::on(&server).await;
        server.reset_stats().await;
        let recording = events::Recording::start();
        for t in [0.0, 1.0] {
            let got = script.call(t, "reserve", &[30_000.0]).await;
            assert_eq!(got[..2], [0, 0], "{options:?}");
        }
        let done = done_calls(&server, ["evalsha", "fcall"]).await;
        assert_eq!(done, [2, 0], "{options:?}");
        // Said once per runner.
        let said = recording.count("INFO pacing: Redis cannot run functions here");
        assert_eq!(said, 1, "{:?}", recording.seen());
    }
}

/// The calls of each of `commands` Redis ran since its statistics were reset, less those
/// that failed.
async fn done_calls<const N: usize>(
    server: &redis_server::RedisServer,
    commands: [&str; N],
) -> [u64; N] {
    let mut done = [0; N];
    for (done, command) in done.iter_mut().zip(commands) {
        *done = server.command_stats(command).await.done();
    }
    done
}

/// A quota lowered from 50 to 30: the window after the next reset is guessed from the
/// first report of the one before, not from the old quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_script_guesses_a_window_from_the_last_ones_first_report() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    // A reservation's status; then its answer: served, with `remaining` until a reset a
    // second away (-1: no report).
    let mut send = async |t: f64, remaining: f64| {
        let got = script.call(t, "reserve", &[30_000.0]).await;
        if got[0] == 0 {
            script.served(t, got, remaining).await;
        }
        got[0]
    };
    assert_eq!(send(0.0, 49.0).await, 0);
    // The guessed window (49) takes a first report: the quota is 30 now.
    assert_eq!(send(1000.0, 29.0).await, 0);
    // The reset is at 2 s; the window after it is guessed at 29, its sends unreported.
    let mut sent = 0;
    while sent < 100 && send(2000.0, -1.0).await == 0 {
        sent += 1;
    }
    assert_eq!(sent, 29);
}

/// As in-process: a count that does not start over at its reset is a sliding window's,
/// whose reports are not read from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_script_does_not_read_a_count_that_does_not_start_over() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    // Ten sends spend a room of ten; after its reset, `first` is reported, then none left.
    // Whether a send may leave at once then.
    let mut after_reset = async |first: f64| {
        script.flush().await;
        for remaining in (0..10).rev() {
            let got = script.call(0.0, "reserve", &[30_000.0]).await;
            script.served(0.0, got, f64::from(remaining)).await;
        }
        for remaining in [first, 0.0] {
            let got = script.call(1000.0, "reserve", &[30_000.0]).await;
            script.served(1000.0, got, remaining).await;
        }
        let got = script.call(1000.0, "reserve", &[30_000.0]).await;
        (got[0], got[1])
    };
    // A fixed window starts over: 8 left after one send, then none: held to its reset.
    assert_eq!(after_reset(8.0).await, (3, 1_000_000));
    // A sliding window still counts 6 of the sends before the reset: paced at its quota
    // over its length, 9 a second (asked again half a spacing before its slot).
    assert_eq!(after_reset(3.0).await, (3, 1_000_000 / 18));
    // Sends leaving together are counted in any order: the first answer read may tell the
    // count after all of them. Still a window that started over: held to its reset.
    script.flush().await;
    for remaining in (0..10).rev() {
        let got = script.call(0.0, "reserve", &[30_000.0]).await;
        script.served(0.0, got, f64::from(remaining)).await;
    }
    let mut together = Vec::new();
    for _ in 0..4 {
        together.push(script.call(1000.0, "reserve", &[30_000.0]).await);
    }
    for (got, remaining) in together.into_iter().zip([5.0, 6.0, 7.0, 8.0]) {
        script.served(1000.0, got, remaining).await;
    }
    let got = script.call(1000.0, "reserve", &[30_000.0]).await;
    script.served(1000.0, got, 0.0).await;
    let got = script.call(1000.0, "reserve", &[30_000.0]).await;
    assert_eq!((got[0], got[1]), (3, 1_000_000));
}

/// As in-process: the slow start at most doubles per period however fast the answers,
/// unless a reported room bounds the sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_scripts_slow_start_doubles_per_period_unless_a_room_is_reported() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    // Flushes between the closure's calls, which hold the script.
    let mut flusher = Script::on(&server).await;
    // How many reserve at `t` (at most 100), then served at once, each answer reporting
    // `remaining` until a reset a second away (-1: no report).
    let mut served_now = async |t: f64, remaining: f64| {
        let mut sent = Vec::new();
        while sent.len() < 100 {
            let got = script.call(t, "reserve", &[30_000.0]).await;
            if got[0] != 0 {
                break;
            }
            sent.push(got);
        }
        for &got in &sent {
            script.served(t, got, remaining).await;
        }
        sent.len()
    };
    for (period, limit) in [4, 8, 16, 32].into_iter().enumerate() {
        let t = 100.0 * period as f64;
        assert_eq!(served_now(t, -1.0).await, limit, "period {period}");
        assert_eq!(served_now(t, -1.0).await, limit, "period {period}, again");
    }
    assert_eq!(served_now(400.0, -1.0).await, 100, "open");
    flusher.flush().await;
    assert_eq!(served_now(0.0, 100.0).await, 4);
    assert_eq!(served_now(0.0, -1.0).await, 8, "a room, no cap");
}

/// A send to an open destination goes without a reservation: the script numbers it as it
/// is told its answer, and says whether the destination is still open.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_script_numbers_a_send_told_without_a_reservation() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    // Past the slow start: its window filled each period, then served.
    let mut t = 0.0;
    let got = loop {
        let mut sent = Vec::new();
        while let got @ [0, ..] = script.call(t, "reserve", &[30_000.0]).await {
            sent.push(got);
            if got[6] == 1 || sent.len() == 100 {
                break;
            }
        }
        for &got in &sent {
            script.served(t, got, -1.0).await;
        }
        match sent.last() {
            Some(&got) if got[6] == 1 => break got,
            _ => t += 100.0,
        }
        assert!(t < 1000.0, "never open");
    };
    // Two sends without a reservation, served: numbered after the last reserved one.
    let unreserved = |kind| [got[2] as f64, 0.0, kind, -1.0, -1.0, -1.0, 0.0, -1.0, -1.0];
    let both = [unreserved(0.0), unreserved(0.0)].concat();
    let told = script.call(t + 1.0, "answer", &both).await;
    assert_eq!([told[2], told[6]], [got[2], 1], "the round, open");
    let next = script.call(t + 2.0, "reserve", &[30_000.0]).await;
    assert_eq!(next[3], got[3] + 3, "the next send's number");
    // A refusal of one: a new round, paced.
    let told = script.call(t + 3.0, "answer", &unreserved(1.0)).await;
    assert_eq!([told[2], told[6]], [got[2] + 1, 0], "the round, open");
}

/// As in-process: at a new destination, a refusal with others of its burst pending is
/// probed after 100 ms; one with nothing else pending, or a window after the first send,
/// closes the destination for the second asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_script_closes_for_the_delay_asked_only_with_nothing_else_pending() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    for (burst, at, probed) in [(4, 1.0, true), (1, 1.0, false), (4, 1000.0, false)] {
        script.flush().await;
        let mut sent = Vec::new();
        for _ in 0..burst {
            sent.push(script.call(0.0, "reserve", &[30_000.0]).await);
        }
        let last = sent[burst - 1];
        // Refused, a second asked: (round, number, refused, 1000 ms, no quota, its room).
        let answer = [last[2], last[3], 1, 1000, -1, -1, 0, last[4], last[5]].map(|v| v as f64);
        script.call(at, "answer", &answer).await;
        let next = script.call(at, "reserve", &[30_000.0]).await;
        // Probed: the slot after 100 ms, given from 50 ms on. Closed: ask again 950 ms on,
        // half a spacing before it.
        let expected = if probed { [3, 50_000] } else { [3, 950_000] };
        assert_eq!(
            [next[0], next[1]],
            expected,
            "{burst} sent, refused at {at} ms"
        );
    }
}

/// As in-process: a known rate is not spread by a reported room, but a spent room holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_script_does_not_spread_a_room_at_a_known_rate() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    script.args = Args::new(&settings(), Some(20.0));
    let first = script.call(0.0, "reserve", &[30_000.0]).await;
    // Two left until a reset a second away: spread, 2 r/s; known, 20 r/s.
    script.served(0.0, first, 2.0).await;
    for t in [50.0, 100.0] {
        let got = script.call(t, "reserve", &[30_000.0]).await;
        assert_eq!([got[0], got[1]], [0, 0], "at {t} ms");
    }
    // Spent: held until the reset; asked again half a spacing before it.
    let held = script.call(150.0, "reserve", &[30_000.0]).await;
    assert_eq!([held[0], held[1]], [3, 825_000]);
}

/// As in-process: a spent room whose reset came in whole Unix seconds is probed halfway to
/// it, one probe at a time, each refusal halving what is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_script_probes_a_spent_room_known_only_to_the_second() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    let reserve = async |script: &mut Script, t: f64| {
        let got = script.call(t, "reserve", &[30_000.0]).await;
        (got, [got[0], got[1] / 1000])
    };
    // Served, no room left until a reset 1.5 s away, in whole Unix seconds.
    let answer = |got: Reply, kind: f64, reset: f64| {
        [
            got[2] as f64,
            got[3] as f64,
            kind,
            -1.0,
            0.0,
            reset,
            1.0,
            got[4] as f64,
            got[5] as f64,
        ]
    };
    let (first, _) = reserve(&mut script, 0.0).await;
    script
        .call(0.0, "answer", &answer(first, 0.0, 1500.0))
        .await;
    // Held until the first probe, at 1 s: (status 3, ask again in ms).
    assert_eq!(reserve(&mut script, 0.0).await.1, [3, 1000]);
    let (probe, status) = reserve(&mut script, 1000.0).await;
    assert_eq!(status, [0, 0]);
    // In flight, it holds the others until the reset.
    assert_eq!(reserve(&mut script, 1000.0).await.1, [3, 500]);
    script
        .call(1000.0, "answer", &answer(probe, 1.0, 500.0))
        .await;
    assert_eq!(reserve(&mut script, 1000.0).await.1, [3, 250]);
    // Refused with no report: its send time alone bounds the reset.
    let (probe, _) = reserve(&mut script, 1250.0).await;
    let mut refused = answer(probe, 1.0, -1.0);
    (refused[4], refused[6]) = (-1.0, 0.0);
    script.call(1250.0, "answer", &refused).await;
    assert_eq!(reserve(&mut script, 1250.0).await.1, [3, 125]);
}

/// As in-process: a refused probe's delay asked, ending within a second of a reset known
/// only to the second, bounds that reset; one asking longer is waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_scripts_probes_take_a_delay_asked_near_a_coarse_reset_as_its_bound() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    for (asked, next) in [(400.0, [3, 200]), (1000.0, [3, 250]), (5000.0, [3, 5000])] {
        script.flush().await;
        script.sent_at(0.0, 0.0, 0.0, 1500.0).await;
        let probe = script.call(1000.0, "reserve", &[30_000.0]).await;
        assert_eq!(probe[..2], [0, 0]);
        let [round, number, window, room] = [probe[2], probe[3], probe[4], probe[5]];
        let values = [round, number, 1, asked as i64, 0, 500, 1, window, room].map(|v| v as f64);
        script.call(1000.0, "answer", &values).await;
        let held = script.call(1000.0, "reserve", &[30_000.0]).await;
        assert_eq!([held[0], held[1] / 1000], next, "asked {asked} ms");
    }
}

/// As in-process: the length of windows opened by a request is learned from their openers
/// and refused probes, and bounds what is bisected.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_script_learns_the_length_of_windows_opened_by_a_request() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    // Sends at `t`, answered at once with `remaining` until the whole second `reset`; then
    // when the next may leave, if the room is spent (ms; the script says "ask again then").
    let mut answer = async |t: f64, kind: f64, remaining: f64, reset: f64| {
        script.sent_at(t, kind, remaining, reset).await;
        if remaining > 0.0 {
            return 0;
        }
        let next = script.call(t, "reserve", &[30_000.0]).await;
        assert_eq!(next[0], 3, "held at {t} ms");
        (t + next[1] as f64 / 1000.0).floor() as i64
    };
    answer(0.0, 0.0, 1.0, 1300.0).await;
    assert_eq!(answer(0.0, 0.0, 0.0, 1300.0).await, 800);
    assert_eq!(answer(800.0, 1.0, 0.0, 1300.0).await, 1050);
    answer(1050.0, 0.0, 1.0, 2300.0).await;
    assert_eq!(answer(1050.0, 0.0, 0.0, 2300.0).await, 1975);
    assert_eq!(answer(1975.0, 1.0, 0.0, 2300.0).await, 2037);
    assert_eq!(answer(2037.5, 1.0, 0.0, 2300.0).await, 2100);
    assert_eq!(answer(2100.0, 1.0, 0.0, 2300.0).await, 2200);
}

/// Requests held by a pace take its slots in the order they first asked, whichever process
/// they are in: an older one waiting holds a newer one back, though the newer asks first.
/// A slot due and not taken goes to whoever asks; a request that left, or was not seen
/// for two doublings, holds no one.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_script_gives_paced_slots_in_the_order_requests_first_asked() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    // Told 2 r/s: a slot every 500 ms, each given in the 250 ms before it.
    script.args = Args::new(&settings(), Some(2.0));
    // Each request of another process (a line's name starts with its process's number).
    let ask = async |script: &mut Script, t: f64, process: f64, since: f64| {
        script.ask(t, process * PROCESS, since).await
    };
    assert_eq!(ask(&mut script, 0.0, 1.0, 0.0).await, [0, 0]);
    // The next slot, at 500 ms, is given from 250 ms on.
    assert_eq!(ask(&mut script, 200.0, 2.0, 200.0).await, [3, 50]);
    // 3 is behind 2: it asks again 250 ms before its own slot, at 1000 ms.
    assert_eq!(ask(&mut script, 210.0, 3.0, 210.0).await, [3, 540]);
    // 3 asks first, but 2 waited longer: 3 asks again when the slot after is given.
    assert_eq!(ask(&mut script, 260.0, 3.0, 210.0).await, [3, 490]);
    assert_eq!(ask(&mut script, 261.0, 2.0, 200.0).await, [0, 239]);
    // 3 leaves the line: 4, newer, is first.
    assert_eq!(ask(&mut script, 600.0, 3.0, 210.0).await, [3, 150]);
    script.call(610.0, "leave", &[3.0 * PROCESS]).await;
    assert_eq!(ask(&mut script, 760.0, 4.0, 760.0).await, [0, 240]);
    // 5 waits for the slot at 1500 ms, and is not seen again for 210 ms: 6 is first.
    assert_eq!(ask(&mut script, 1050.0, 5.0, 1050.0).await, [3, 200]);
    assert_eq!(ask(&mut script, 1260.0, 6.0, 1260.0).await, [0, 240]);
    // Told 10 r/s: the slot at 100 ms is due, and 7, first in line, has not taken it: 8 does.
    script.flush().await;
    script.args = Args::new(&settings(), Some(10.0));
    assert_eq!(ask(&mut script, 0.0, 1.0, 0.0).await, [0, 0]);
    assert_eq!(ask(&mut script, 10.0, 7.0, 10.0).await, [3, 40]);
    assert_eq!(ask(&mut script, 60.0, 8.0, 60.0).await, [3, 90]);
    assert_eq!(ask(&mut script, 101.0, 8.0, 60.0).await, [0, 0]);
}

/// The slow start's room goes in the order requests first asked, whichever process they
/// are in. A request held by a closed destination (a spent room) leaves the line: it would
/// not ask before the destination opens, and comes back at its first place then.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_script_gives_the_slow_starts_room_in_the_order_requests_first_asked() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    let reserve = async |script: &mut Script, t: f64, name: f64| {
        script
            .call(t, "reserve", &[30_000.0, 0.0, 0.0, 0.0, name])
            .await
    };
    let (a, b) = (PROCESS, 2.0 * PROCESS);
    let mut sent = vec![];
    for i in 0..4 {
        sent.push(reserve(&mut script, 0.0, a + f64::from(i)).await);
    }
    // The initial window (4) is full: b waits in line.
    assert_eq!(script.ask(5.0, b, 5.0).await[0], 1);
    assert_eq!(script.in_line().await, 1);
    // A send is served: the window has room. A's next request asks first, but b waited longer.
    script.served(10.0, sent[0], -1.0).await;
    assert_eq!(script.ask(11.0, a + 4.0, 11.0).await, [1, 100]);
    assert_eq!(script.ask(12.0, b, 5.0).await, [0, 0]);
    assert_eq!(script.in_line().await, 1);
    // Another spends the reported room until a reset at 1020 ms: a + 4 leaves the line.
    script.served(20.0, sent[1], 0.0).await;
    assert_eq!(script.ask(30.0, a + 4.0, 11.0).await, [3, 990]);
    assert_eq!(script.in_line().await, 0);
}

/// A process asks for its held requests through the one it holds longest, which stands
/// for its first in Redis's line: its own requests ahead there do not hold it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn a_process_asks_for_its_held_requests_from_its_first_place_in_line() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    // Told 10 r/s: a slot every 100 ms, each given in the 50 ms before it.
    script.args = Args::new(&settings(), Some(10.0));
    let (a, b) = (PROCESS, 2.0 * PROCESS);
    assert_eq!(script.ask(0.0, a, 0.0).await, [0, 0]);
    // In line: a+1, then b, then a+2. b counts one ahead; a+2 none, as its process's a+1
    // is first.
    assert_eq!(script.ask(10.0, a + 1.0, 10.0).await, [3, 40]);
    assert_eq!(script.ask(11.0, b, 11.0).await, [3, 139]);
    assert_eq!(script.ask(12.0, a + 2.0, 12.0).await, [3, 38]);
    // a+2 asks for both: the slot at 100 ms is its process's.
    assert_eq!(script.ask(60.0, b, 11.0).await, [3, 90]);
    assert_eq!(script.ask(62.0, a + 2.0, 12.0).await, [0, 38]);
}

/// A fleet spreads a reported room over what is left of it once a room ran out, so that
/// the process whose answers come first does not take it all; the in-process rules send it
/// at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_script_spreads_a_room_once_one_ran_out() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    for (args, spread) in [
        (Args::new(&settings(), None), true),
        (Args::new(&settings(), None).in_process_rules(), false),
    ] {
        script.flush().await;
        script.args = args;
        let first = script.call(0.0, "reserve", &[30_000.0]).await;
        // No room left until the reset, a second away: held.
        script.served(0.0, first, 0.0).await;
        assert_eq!(script.call(10.0, "reserve", &[30_000.0]).await[0], 3);
        // A later window (past the one guessed as full as that) reports 9 left of its
        // second: spread, one send every 111 ms.
        let opener = script.call(2001.0, "reserve", &[30_000.0]).await;
        assert_eq!(opener[..2], [0, 0]);
        script.served(2001.0, opener, 9.0).await;
        let next = script.call(2001.0, "reserve", &[30_000.0]).await;
        if spread {
            assert_eq!(next[0], 3, "{next:?}");
            assert!((55_000..=57_000).contains(&next[1]), "{next:?}");
        } else {
            assert_eq!(next[..2], [0, 0]);
        }
    }
}

/// As in-process: paced, a room whose reset is known only to the second is spread until
/// its window's latest end as learned, not until the reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_script_spreads_a_paced_room_until_its_windows_learned_end() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    // Windows opened at 0 and 1050 ms: they last over 800 ms and at most 1050 ms.
    script.sent_at(0.0, 0.0, 1.0, 1300.0).await;
    script.sent_at(0.0, 0.0, 0.0, 1300.0).await;
    script.sent_at(800.0, 1.0, 0.0, 1300.0).await;
    script.sent_at(1050.0, 0.0, 10.0, 2300.0).await;
    // A refusal the room does not explain: paced. 9 left until 2100 ms: one every 116 ms,
    // given from half that on (until 2300 ms: 138 ms).
    script.sent_at(1060.0, 1.0, -1.0, 0.0).await;
    let next = script.call(1060.0, "reserve", &[30_000.0]).await;
    assert_eq!(next[0], 3, "{next:?}");
    assert!((57_000..=58_500).contains(&next[1]), "{next:?}");
}

/// As in-process: a refusal of the first send after a cut, at a limiter that served within
/// the window, closes for the probing delay or one spacing of the pace, the longer.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_scripts_probe_keeps_the_paces_spacing() {
    let server = redis_server::RedisServer::start().await;
    let mut script = Script::on(&server).await;
    // At 950 ms, 50 ms into the curve, the slow pace is 1.494 r/s: a 669.5 ms spacing.
    for (pace, closed) in [(1.4, 669.5), (35.0, 100.0)] {
        script.flush().await;
        script.sent_at(0.0, 0.0, -1.0, 0.0).await;
        script.sent_at(500.0, 0.0, -1.0, 0.0).await;
        script.sent_at(900.0, 1.0, -1.0, 0.0).await;
        // CUBIC's curve from the cut at 900 ms, at `pace`, as after one; the next send free.
        let set = "local s = cmsgpack.unpack(redis.call('GET', KEYS[1])); \
            s.cs, s.cb, s.cc, s.cu, s.ls = 900, tonumber(ARGV[1]), tonumber(ARGV[1]) / 0.7, 0, nil; \
            redis.call('SET', KEYS[1], cmsgpack.pack(s))";
        let done: redis::RedisResult<()> = redis::cmd("EVAL")
            .arg(set)
            .arg(1)
            .arg("t:{a}")
            .arg(pace)
            .query_async(&mut script.connection)
            .await;
        done.unwrap();
        script.sent_at(950.0, 1.0, -1.0, 0.0).await;
        let until: f64 = script.state("cl").await.unwrap().parse().unwrap();
        assert!(
            (until - 950.0 - closed).abs() < 1.0,
            "{pace} r/s: closed until {until}"
        );
    }
}
