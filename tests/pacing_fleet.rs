//! Pacing state shared in Redis (feature `redis`): layers built apart, as processes would
//! be, pace one destination as one client, and go on alone while Redis is down. Each test
//! starts its own `redis-server` on 127.0.0.1 and runs in real time.
#![cfg(feature = "redis")]

mod support;

use support::events;
use support::limiters::{Seen, fixed_window};
use support::pacing::*;
use support::redis::RedisServer;
use tokio::time::Instant;
use tower::Layer;
use tower_backoff::PacingError;
use tower_backoff::pacing::{PacingBuilder, RedisPacing};

/// A pacing layer sharing its state through `redis`, under this test's own prefix, once a
/// request went through Redis: the first call connects and loads the script, which a busy
/// machine can take longer than a call's 100 ms for, leaving the layer alone meanwhile.
async fn fleet_member(
    redis: &RedisServer,
    test: &str,
    builder: PacingBuilder,
) -> tower_backoff::PacingLayer {
    // 500 ms per call, not 100: a loaded CI machine pushed some calls past 100 ms, and a
    // layer that paces alone meanwhile is not what these tests look at (the silent
    // Redis's test keeps the default).
    let shared = RedisPacing::new(redis.client())
        .with_prefix(format!("{test}:"))
        .with_timeout(ms(500));
    let layer = builder.with_redis(shared).build().unwrap();
    let mut warm = layer.layer(scripted(&Log::default()));
    for _ in 0..5 {
        send(&mut warm, get("http://warm.test/200")).await.unwrap();
        if field(&state(redis, test, "warm.test").await, "born").is_some() {
            return layer;
        }
        tokio::time::sleep(ms(1100)).await;
    }
    panic!("no request went through Redis");
}

/// The state Redis keeps for `authority`, under `test`'s prefix: field, value, field, …
async fn state(redis: &RedisServer, test: &str, authority: &str) -> Vec<String> {
    let read = "local s = redis.call('GET', KEYS[1]); local out = {}; \
        if s then for k, v in pairs(cmsgpack.unpack(s)) do \
        out[#out + 1] = k; out[#out + 1] = tostring(v) end end; return out";
    let key = format!("{test}:{{{authority}}}");
    redis.query(&["EVAL", read, "1", &key]).await.unwrap()
}

/// The value of `field` in `state`.
fn field<'a>(state: &'a [String], field: &str) -> Option<&'a str> {
    let mut pairs = state.chunks(2);
    pairs
        .find(|pair| pair[0] == field)
        .map(|pair| pair[1].as_str())
}

/// Waits until the state of `authority` has `field` (answers are told in the background).
async fn until_state_has(redis: &RedisServer, test: &str, authority: &str, field: &str) {
    for _ in 0..100 {
        if self::field(&state(redis, test, authority).await, field).is_some() {
            return;
        }
        tokio::time::sleep(ms(10)).await;
    }
    panic!("the state of {authority} never had {field}");
}

/// Waits until `field` of the state of `authority` is `value`.
async fn until_state_is(
    redis: &RedisServer,
    test: &str,
    authority: &str,
    field: &str,
    value: &str,
) {
    let mut last = Vec::new();
    for _ in 0..100 {
        last = state(redis, test, authority).await;
        if self::field(&last, field) == Some(value) {
            return;
        }
        tokio::time::sleep(ms(10)).await;
    }
    panic!("{field} of {authority} never was {value}: {last:?}");
}

/// Sends `n` GETs to `uri` at once, one in two through `a`, the others through `b`;
/// each must succeed.
async fn alternately<S: Client>(a: &S, b: &S, n: usize, uri: &'static str) {
    let sends: Vec<_> = (0..n)
        .map(|i| {
            let mut client = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move { send(&mut client, get(uri)).await })
        })
        .collect();
    for sent in sends {
        assert_eq!(sent.await.unwrap().unwrap().status(), 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn a_refusal_seen_by_one_process_holds_the_others() {
    let redis = RedisServer::start().await;
    let test = "refusal";
    let log = Log::default();
    let mut a = fleet_member(&redis, test, builder())
        .await
        .layer(scripted(&log));
    let b_builder = builder().with_max_wait(ms(500));
    let mut b = fleet_member(&redis, test, b_builder)
        .await
        .layer(scripted(&log));
    let mut alone = builder()
        .with_max_wait(ms(500))
        .build()
        .unwrap()
        .layer(scripted(&log));

    let refused = send(&mut a, get_ra("http://api.test/429", "2"))
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    until_state_has(&redis, test, "api.test", "cl").await;

    // B never saw the 429, but the fleet's cool-down (2 s) is past its longest wait.
    let error = send(&mut b, get("http://api.test/200")).await.unwrap_err();
    assert!(
        matches!(pacing_error(&error), PacingError::WaitTooLong { .. }),
        "{error}"
    );
    // A layer of its own goes on.
    assert_eq!(
        send(&mut alone, get("http://api.test/200"))
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(log.count("/200"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn a_known_rate_is_the_whole_fleets() {
    let redis = RedisServer::start().await;
    let log = Log::default();
    let told = || builder().with_known_rate("api.test", 20, secs(1));
    let a_layer = fleet_member(&redis, "known", told()).await;
    let a = a_layer.layer(scripted(&log));
    let b = fleet_member(&redis, "known", told())
        .await
        .layer(scripted(&log));

    let start = Instant::now();
    alternately(&a, &b, 20, "http://api.test/200").await;
    // The layer reports the fleet's pace, as Redis gave it.
    assert_eq!(a_layer.current_rate_to(&authority("api.test")), Some(20.0));
    assert_eq!(a_layer.current_rate(), Some(20.0));
    // 20 sends at 20 r/s between both: one every 50 ms, 0.95 s from first to last.
    let offsets = log.offsets(start);
    let span = offsets[19] - offsets[0];
    assert!(
        span >= ms(900),
        "20 sends in {span:?}: each process paced alone"
    );
    assert!(
        gaps(&offsets).iter().all(|gap| *gap >= ms(40)),
        "{offsets:?}"
    );
}

/// Requests held by the fleet's pace wait in one line in Redis; one that stops waiting (its
/// future dropped) leaves it at once, so that no other waits behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn a_request_that_stops_waiting_leaves_the_fleets_line() {
    let redis = RedisServer::start().await;
    let told = || builder().with_known_rate("api.test", 1, secs(1));
    let a = fleet_member(&redis, "line", told())
        .await
        .layer(scripted(&Log::default()));
    let b = fleet_member(&redis, "line", told())
        .await
        .layer(scripted(&Log::default()));
    let in_line = async || {
        let line: Vec<String> = redis
            .query(&["ZRANGE", "line:{api.test}:line", "0", "-1"])
            .await
            .unwrap();
        line.len()
    };
    send(&mut a.clone(), get("http://api.test/200"))
        .await
        .unwrap();
    // The next slot is a second away: b's request waits in line.
    let mut waiting = b.clone();
    let waiter = tokio::spawn(async move { send(&mut waiting, get("http://api.test/200")).await });
    tokio::time::sleep(ms(100)).await;
    assert_eq!(in_line().await, 1);
    waiter.abort();
    let _ = waiter.await;
    tokio::time::sleep(ms(100)).await;
    assert_eq!(in_line().await, 0, "a dropped request still in line");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn a_new_destinations_slow_start_is_the_whole_fleets() {
    let redis = RedisServer::start().await;
    let log = Log::default();
    let a = fleet_member(&redis, "window", builder())
        .await
        .layer(scripted(&log));
    let b = fleet_member(&redis, "window", builder())
        .await
        .layer(scripted(&log));

    let start = Instant::now();
    alternately(&a, &b, 12, "http://api.test/?sleep=300").await;
    // The first 4 go at once (the initial window, for both); the next once they have been
    // unanswered for 100 ms (the window doubled), not before.
    let offsets = log.offsets(start);
    let first = offsets.iter().filter(|at| **at < ms(100)).count();
    assert_eq!(first, 4, "{offsets:?}");
    assert_eq!(offsets.len(), 12);
}

/// The slow start's window has one line across the fleet: room goes to the request that
/// waited longest, not to the process whose answer made it (it asks again first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn the_slow_starts_room_goes_to_the_request_that_waited_longest() {
    let redis = RedisServer::start().await;
    let (log_a, log_b) = (Log::default(), Log::default());
    let a = fleet_member(&redis, "window-line", builder())
        .await
        .layer(scripted(&log_a));
    let b = fleet_member(&redis, "window-line", builder())
        .await
        .layer(scripted(&log_b));

    // A fills the initial window (4) and sends again as each answer comes, 10 ms apart.
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let mut a = a.clone();
            tokio::spawn(async move {
                for _ in 0..20 {
                    send(&mut a, get("http://api.test/200?sleep=10"))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    while log_a.len() < 4 {
        tokio::time::sleep(ms(1)).await;
    }
    let asked = Instant::now();
    alternately(&b, &b, 4, "http://api.test/200").await;
    for worker in workers {
        worker.await.unwrap();
    }
    // B's 4 go before A's next requests (2 let through for a slow machine). Without the
    // line, A's kept the window until it doubled at 100 ms: some 40 sends.
    let b_last = *log_b.offsets(asked).last().unwrap();
    let a_between = log_a
        .offsets(asked)
        .into_iter()
        .filter(|at| !at.is_zero() && *at < b_last);
    assert!(a_between.count() <= 2, "{:?}", log_a.offsets(asked));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn requests_go_on_while_redis_is_down_and_rejoin_when_it_is_back() {
    let mut redis = RedisServer::start().await;
    let test = "fault";
    let log = Log::default();
    let client = fleet_member(&redis, test, builder())
        .await
        .layer(scripted(&log));
    let burst = async |n: usize| all_at_once(&client, n, "http://api.test/200").await;
    burst(5).await;
    until_state_has(&redis, test, "api.test", "born").await;

    redis.kill();
    let start = Instant::now();
    burst(20).await;
    // One call to Redis times out or fails (100 ms); the others do not ask it.
    assert!(start.elapsed() < secs(1), "{:?}", start.elapsed());

    // Back empty: a ping in the background finds it within 100 ms, and the process asks
    // Redis again, as a new destination.
    redis.restart().await;
    tokio::time::sleep(ms(300)).await;
    burst(1).await;
    // A slow start from 4, one success in (its answer is told within 2 ms).
    until_state_is(&redis, test, "api.test", "w", "5").await;
    assert_eq!(log.count("/200"), 26);
}

/// Each outage is said once, by a warning, and its end by an info event; each call that
/// failed is counted (feature `metrics`). Two outages: two of each.
#[test]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
fn each_outage_is_said_once_and_its_failed_calls_counted() {
    let runtime = current_thread();
    let test = "said";
    let (mut redis, client) = runtime.block_on(async {
        let redis = RedisServer::start().await;
        let layer = fleet_member(&redis, test, builder()).await;
        (redis, layer.layer(scripted(&Log::default())))
    });
    let recording = events::Recording::start();
    let said = |start: &str| recording.count(start);
    let outages = async {
        for round in 0..2 {
            redis.kill();
            all_at_once(&client, 5, &format!("http://down{round}.test/200")).await;
            redis.restart().await;
            // A call in the background finds it back, within 100 ms on an idle machine.
            until_said(&recording, "INFO pacing: Redis is back", round + 1).await;
            all_at_once(&client, 1, "http://api.test/200").await;
        }
    };
    #[cfg(feature = "metrics")]
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    #[cfg(feature = "metrics")]
    metrics::with_local_recorder(&recorder, || runtime.block_on(outages));
    #[cfg(not(feature = "metrics"))]
    runtime.block_on(outages);
    let events = recording.seen();
    assert_eq!(said("WARN pacing: Redis unavailable"), 2, "{events:?}");
    assert_eq!(said("INFO pacing: Redis is back"), 2, "{events:?}");
    #[cfg(feature = "metrics")]
    {
        let name = tower_backoff::metrics::names::PACING_STORE_FAILURES;
        let counted = recorder.snapshotter().snapshot().into_vec().into_iter();
        let mut failures = counted.filter(|(key, ..)| key.key().name() == name);
        let failures = failures.next().map(|(.., value)| value);
        use metrics_util::debugging::DebugValue::Counter;
        assert!(matches!(failures, Some(Counter(2..))), "{failures:?}");
    }
}

/// Server options that have the controller run as a function (Redis 7), then as a script.
const CONTROLLER_MODES: [&[&str]; 2] = [&[], &["--rename-command", "FCALL", ""]];

/// A read-only replica (a reader endpoint, say) cannot hold the fleet's state: requests go
/// on paced alone, one warning says so, and answering a ping does not make it usable. So
/// too where the controller runs as a script (`FCALL` renamed away).
#[test]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
fn a_read_only_replica_is_said_once_and_never_taken_for_back() {
    in_each_mode(async |mode, recording| {
        let primary = RedisServer::start().await;
        let port = primary.port.to_string();
        let options = [&["--replicaof", "127.0.0.1", &port][..], mode].concat();
        let replica = RedisServer::start_with(&options).await;
        go_on_alone(&replica, "replica:").await;
        said_once_never_back(recording);
    });
}

/// A Redis full under `noeviction` (a cache at its `maxmemory`) refuses every write that
/// may grow it: requests go on paced alone, one warning says so, and a call that frees
/// memory succeeding does not make it usable. So too with the controller as a script. Once
/// it has room again, it is back.
#[test]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
fn a_full_redis_is_said_once_and_never_taken_for_back() {
    in_each_mode(async |mode, recording| {
        let options = [&["--maxmemory-policy", "noeviction"][..], mode].concat();
        let full = RedisServer::start_with(&options).await;
        // Less than it already uses: full from the start.
        let maxmemory = async |bytes| {
            let set = ["CONFIG", "SET", "maxmemory", bytes];
            full.query::<()>(&set).await.unwrap()
        };
        maxmemory("1").await;
        // Kept: the background calls end with the layer.
        let _client = go_on_alone(&full, "full:").await;
        said_once_never_back(recording);
        // Room again: back.
        maxmemory("0").await;
        until_said(recording, "INFO pacing: Redis is back", 1).await;
    });
}

/// Runs `test` on this thread once per controller mode, given the mode's server options and
/// a recording of what it says.
fn in_each_mode(test: impl AsyncFn(&[&str], &events::Recording)) {
    let runtime = current_thread();
    for mode in CONTROLLER_MODES {
        let recording = events::Recording::start();
        runtime.block_on(test(mode, &recording));
    }
}

/// Waits until `recording` has `times` events beginning with `start`, 10 s at most.
async fn until_said(recording: &events::Recording, start: &str, times: usize) {
    let began = Instant::now();
    while recording.count(start) < times {
        assert!(began.elapsed() < secs(10), "{:?}", recording.seen());
        tokio::time::sleep(ms(20)).await;
    }
}

/// 40 requests through a layer sharing its state on `redis`, which refuses the calls on
/// their keys: each goes, paced in-process. The layer's client is returned.
async fn go_on_alone(redis: &RedisServer, prefix: &str) -> impl Client + use<> {
    let log = Log::default();
    let shared = RedisPacing::new(redis.client()).with_prefix(prefix);
    let client = builder().with_redis(shared).build().unwrap();
    let client = client.layer(scripted(&log));
    // Over ten of the background calls' periods.
    for _ in 0..20 {
        all_at_once(&client, 2, "http://api.test/200").await;
        tokio::time::sleep(ms(60)).await;
    }
    assert_eq!(log.count("/200"), 40);
    client
}

/// One warning said the outage; none said its end.
fn said_once_never_back(recording: &events::Recording) {
    let seen = recording.seen();
    assert_eq!(
        recording.count("WARN pacing: Redis unavailable"),
        1,
        "{seen:?}"
    );
    assert_eq!(recording.count("INFO pacing: Redis is back"), 0, "{seen:?}");
}

/// A runtime on this thread alone, whose tasks' events this thread's recording sees.
fn current_thread() -> tokio::runtime::Runtime {
    let mut runtime = tokio::runtime::Builder::new_current_thread();
    runtime.enable_all().build().unwrap()
}

/// A Redis Cluster's node that does not serve a destination's slot answers pings, and calls
/// on other slots, but not that destination's: one warning, never taken for back.
#[test]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
fn a_cluster_node_not_serving_the_destination_is_said_once() {
    let runtime = current_thread();
    let dir = std::env::temp_dir().join(format!("tower-backoff-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let recording = events::Recording::start();
    runtime.block_on(async {
        let dir = dir.to_str().unwrap();
        let cluster = [
            "--cluster-enabled",
            "yes",
            "--cluster-require-full-coverage",
            "no",
        ];
        let node = RedisServer::start_with(&[&cluster[..], &["--dir", dir]].concat()).await;
        let slot = node.query::<u16>(&["CLUSTER", "KEYSLOT", "api.test"]).await;
        let slot = slot.unwrap();
        let [below, above] = [slot - 1, slot + 1].map(|s| s.to_string());
        let ranges = ["CLUSTER", "ADDSLOTSRANGE", "0", &below, &above, "16383"];
        let _: () = node.query(&ranges).await.unwrap();
        // The node serves its slots once its cluster's state is ok, within a second or two.
        let ok = async || {
            let info = node.query::<String>(&["CLUSTER", "INFO"]).await;
            info.unwrap().contains("state:ok")
        };
        let start = Instant::now();
        while !ok().await {
            assert!(start.elapsed() < secs(10), "the node's cluster is not ok");
            tokio::time::sleep(ms(100)).await;
        }
        go_on_alone(&node, "cluster:").await;
    });
    std::fs::remove_dir_all(&dir).unwrap();
    said_once_never_back(&recording);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn a_silent_redis_costs_one_timeout_then_none() {
    // A server that accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = received.clone();
    tokio::spawn(async move {
        use tokio::io::AsyncReadExt;
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let counted = counted.clone();
            tokio::spawn(async move {
                let mut buffer = [0; 4096];
                while let Ok(n @ 1..) = socket.read(&mut buffer).await {
                    counted.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
                }
            });
        }
    });
    let silent = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let log = Log::default();
    let pacing = builder()
        .with_redis(RedisPacing::new(silent))
        .build()
        .unwrap();
    let mut client = pacing.layer(scripted(&log));

    let start = Instant::now();
    assert_eq!(
        send(&mut client, get("http://api.test/200"))
            .await
            .unwrap()
            .status(),
        200
    );
    let first = start.elapsed();
    assert!(first >= ms(90) && first < ms(600), "{first:?}");
    let asked = received.load(std::sync::atomic::Ordering::SeqCst);
    assert!(asked > 0, "the script was sent");
    // The next requests do not ask Redis (only a ping in the background does): no timeout.
    let start = Instant::now();
    for _ in 0..10 {
        assert_eq!(
            send(&mut client, get("http://api.test/200"))
                .await
                .unwrap()
                .status(),
            200
        );
    }
    assert!(start.elapsed() < ms(90), "{:?}", start.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn idle_destinations_expire_and_keys_hold_no_credentials() {
    let redis = RedisServer::start().await;
    let log = Log::default();
    let idle = builder().with_idle_timeout(ms(300));
    let mut client = fleet_member(&redis, "idle", idle)
        .await
        .layer(scripted(&log));

    let request = get("http://user:secret@api.test/200");
    assert_eq!(send(&mut client, request).await.unwrap().status(), 200);
    until_state_has(&redis, "idle", "api.test", "sc").await;
    let keys: Vec<String> = redis.query(&["KEYS", "idle:*"]).await.unwrap();
    assert!(keys.iter().any(|k| k.contains("{api.test}")), "{keys:?}");
    assert!(
        keys.iter()
            .all(|k| !k.contains("secret") && !k.contains("user"))
    );
    let ttl: i64 = redis.query(&["PTTL", "idle:{api.test}"]).await.unwrap();
    assert!((1..=300).contains(&ttl), "{ttl}");

    tokio::time::sleep(ms(400)).await;
    let keys: Vec<String> = redis.query(&["KEYS", "idle:*"]).await.unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn alone_a_process_keeps_its_share_of_the_fleets_pace() {
    let mut redis = RedisServer::start().await;
    let log = Log::default();
    let told = || builder().with_known_rate("api.test", 20, secs(1));
    let a_layer = fleet_member(&redis, "share", told()).await;
    let a = a_layer.layer(scripted(&log));
    let b = fleet_member(&redis, "share", told())
        .await
        .layer(scripted(&log));
    // A and B each send one request after the other for 1.5 s: each takes half of the
    // fleet's 20 r/s. (Requests sent all at once race for the slots: no even share.)
    let one_by_one = |mut client: _| async move {
        for _ in 0..15 {
            let response = send(&mut client, get("http://api.test/200")).await;
            assert_eq!(response.unwrap().status(), 200);
        }
    };
    tokio::join!(one_by_one(a.clone()), one_by_one(b.clone()));

    redis.kill();
    let mut a = a.clone();
    // Another destination finds Redis down first: api.test's next request is paced
    // in-process without asking Redis, and still at its share.
    send(&mut a, get("http://other.test/200")).await.unwrap();
    assert_eq!(
        send(&mut a, get("http://api.test/200"))
            .await
            .unwrap()
            .status(),
        200
    );
    let rate = a_layer.current_rate_to(&authority("api.test")).unwrap();
    // The share is counted over the last second's 20 sends: a slow scheduler moves it by a
    // few sends either way. The whole fleet's 20 r/s is the failure this catches.
    assert!(
        (6.0..=14.0).contains(&rate),
        "alone at {rate} r/s, not about half of 20"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn a_paced_fleet_goes_on_at_its_pace_when_redis_restarts_empty() {
    let mut redis = RedisServer::start().await;
    let test = "lost";
    let log = Log::default();
    let layer = fleet_member(&redis, test, builder()).await;
    let mut client = layer.layer(scripted(&log));
    // Served, then refused: the fleet paces api.test from now on.
    for _ in 0..10 {
        send(&mut client, get("http://api.test/200")).await.unwrap();
    }
    let refused = send(&mut client, get("http://api.test/429")).await.unwrap();
    assert_eq!(refused.status(), 429);
    until_state_has(&redis, test, "api.test", "cs").await;
    send(&mut client, get("http://api.test/200")).await.unwrap();
    let pace = layer.current_rate_to(&authority("api.test")).unwrap();

    redis.kill();
    send(&mut client, get("http://api.test/200")).await.unwrap();
    redis.restart().await;
    tokio::time::sleep(ms(1100)).await;
    send(&mut client, get("http://api.test/200")).await.unwrap();
    until_state_has(&redis, test, "api.test", "born").await;
    // Back empty, the state starts at the pace last seen, not at a slow start's burst.
    let state = state(&redis, test, "api.test").await;
    assert_eq!(field(&state, "w"), None, "a slow start: {state:?}");
    let base: f64 = field(&state, "cb").unwrap().parse().unwrap();
    assert!((base - pace).abs() < 0.01, "{base} r/s, last seen {pace}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn processes_rejoining_a_state_redis_lost_each_bring_back_their_pace() {
    let mut redis = RedisServer::start().await;
    let test = "rejoin";
    let log = Log::default();
    let layers = [
        fleet_member(&redis, test, builder()).await,
        fleet_member(&redis, test, builder()).await,
    ];
    let [a, b] = layers.each_ref().map(|layer| layer.layer(scripted(&log)));
    // Served, then refused: the fleet paces api.test, and A and B send alike.
    alternately(&a, &b, 10, "http://api.test/200").await;
    let refused = send(&mut a.clone(), get("http://api.test/429")).await;
    assert_eq!(refused.unwrap().status(), 429);
    until_state_has(&redis, test, "api.test", "cs").await;
    alternately(&a, &b, 10, "http://api.test/200").await;

    redis.kill();
    // Alone, each paces at its share.
    for client in [&a, &b] {
        send(&mut client.clone(), get("http://api.test/200"))
            .await
            .unwrap();
    }
    let api = authority("api.test");
    let alone = layers
        .each_ref()
        .map(|layer| layer.current_rate_to(&api).unwrap());
    redis.restart().await;
    tokio::time::sleep(ms(300)).await;
    // Back empty: A rebuilds the state at its own pace (B still sends at its own), and B
    // adds its pace when it comes back.
    let base = |state: Vec<String>| -> f64 { field(&state, "cb").unwrap().parse().unwrap() };
    send(&mut a.clone(), get("http://api.test/200"))
        .await
        .unwrap();
    let rebuilt = base(state(&redis, test, "api.test").await);
    assert!(
        (rebuilt - alone[0]).abs() < 0.01,
        "{rebuilt} r/s, A alone at {alone:?}"
    );
    send(&mut b.clone(), get("http://api.test/200"))
        .await
        .unwrap();
    let whole = base(state(&redis, test, "api.test").await);
    let sum = alone[0] + alone[1];
    assert!(
        (whole - sum).abs() < 0.01,
        "{whole} r/s, alone at {alone:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn a_request_after_another_to_its_destination_costs_one_call() {
    let redis = RedisServer::start().await;
    let test = "calls";
    let mut client = fleet_member(&redis, test, builder())
        .await
        .layer(scripted(&Log::default()));
    redis.reset_stats().await;
    for _ in 0..20 {
        send(&mut client, get("http://api.test/200")).await.unwrap();
    }
    // Each reservation carries the answers since the last: 20 calls and the last answer's,
    // not 40. (A busy machine may let an answer wait past 2 ms and go alone.)
    until_state_is(&redis, test, "api.test", "sc", "20").await;
    let calls = controller_calls(&redis).await;
    assert!((21..=25).contains(&calls), "{calls} calls");
}

/// A plain success from a destination paced at a known rate changes no send: its answer
/// waits up to 100 ms for a reservation to carry it, as an open destination's does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn a_told_destinations_successes_wait_for_a_call_to_carry_them() {
    let redis = RedisServer::start().await;
    let test = "told-calls";
    let told = builder().with_known_rate("api.test", 1000, secs(1));
    let mut client = fleet_member(&redis, test, told)
        .await
        .layer(scripted(&Log::default()));
    redis.reset_stats().await;
    for _ in 0..20 {
        send(&mut client, get("http://api.test/200")).await.unwrap();
        tokio::time::sleep(ms(10)).await;
    }
    // 20 reservations and the last answer's call; each answer alone after 2 ms: 40.
    until_state_is(&redis, test, "api.test", "sc", "20").await;
    let calls = controller_calls(&redis).await;
    assert!((21..=24).contains(&calls), "{calls} calls");
}

/// Sends GETs of `uri` through `client` until `api.test` is open here: past its slow start
/// (64 in flight, its cap doubling per 100 ms from 4), and told so by Redis.
async fn until_open<S: Client>(client: &mut S) {
    for _ in 0..70 {
        send(client, get("http://api.test/200")).await.unwrap();
    }
    tokio::time::sleep(ms(500)).await;
    send(client, get("http://api.test/200")).await.unwrap();
}

/// A fleet member under `test`'s prefix to which `api.test` is open, its last answers told;
/// Redis's call counts start from zero.
async fn opened(redis: &RedisServer, test: &str) -> impl Client + use<> {
    let layer = fleet_member(redis, test, builder()).await;
    let mut client = layer.layer(scripted(&Log::default()));
    until_open(&mut client).await;
    tokio::time::sleep(ms(150)).await;
    redis.reset_stats().await;
    client
}

/// Requests to an open destination (neither paced nor in its slow start) wait for no call:
/// they go while Redis is paused, and their answers, told in batches, count them there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn requests_to_an_open_destination_wait_for_no_call() {
    let redis = RedisServer::start().await;
    let test = "open";
    let mut client = opened(&redis, test).await;
    // Redis answers nothing for 450 ms: within a call's timeout (500 ms), so it is not
    // taken as down.
    let _: () = redis.query(&["CLIENT", "PAUSE", "450"]).await.unwrap();
    let paused = Instant::now();
    for _ in 0..10 {
        send(&mut client, get("http://api.test/200")).await.unwrap();
        tokio::time::sleep(ms(10)).await;
    }
    assert!(paused.elapsed() < ms(400), "requests waited for Redis");
    tokio::time::sleep(ms(600)).await;
    // The answers went in batches of up to 100 ms, and Redis counted every send.
    let calls = controller_calls(&redis).await;
    assert!((1..=3).contains(&calls), "{calls} calls");
    until_state_is(&redis, test, "api.test", "sends", "81").await;
}

/// Redis's word that a destination is open holds 200 ms: a process idle for longer asks
/// for a slot again, and its next request, told open once more, asks for none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn an_idle_process_asks_again_whether_a_destination_is_open() {
    let redis = RedisServer::start().await;
    let mut client = opened(&redis, "idle").await;
    tokio::time::sleep(ms(400)).await;
    redis.reset_stats().await;
    send(&mut client, get("http://api.test/200")).await.unwrap();
    assert_eq!(controller_calls(&redis).await, 1, "a reservation");
    send(&mut client, get("http://api.test/200")).await.unwrap();
    // The answers wait up to 100 ms for a call of their own.
    assert_eq!(controller_calls(&redis).await, 1, "no reservation");
}

/// A burst to an open destination tells its answers in calls of 64, the most a call carries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn a_burst_to_an_open_destination_tells_its_answers_in_calls_of_64() {
    let redis = RedisServer::start().await;
    let test = "burst";
    let client = opened(&redis, test).await;
    all_at_once(&client, 500, "http://api.test/200").await;
    tokio::time::sleep(ms(300)).await;
    // 7 full calls and the rest's.
    let calls = controller_calls(&redis).await;
    assert!((8..=10).contains(&calls), "{calls} calls");
    until_state_is(&redis, test, "api.test", "sends", "571").await;
}

/// A refusal seen by another process reaches a process sending to an open destination
/// within a batch's wait: its requests ask Redis again, and go at the fleet's pace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn a_refusal_elsewhere_ends_requests_without_a_reservation_within_a_batch() {
    let redis = RedisServer::start().await;
    let (test, log) = ("closes", Log::default());
    let mut a = fleet_member(&redis, test, builder())
        .await
        .layer(scripted(&log));
    let mut b = fleet_member(&redis, test, builder())
        .await
        .layer(scripted(&log));
    until_open(&mut a).await;
    send(&mut b, get("http://api.test/200")).await.unwrap();
    let every_10_ms = async |client: &mut _, n| {
        for _ in 0..n {
            send(client, get("http://api.test/200")).await.unwrap();
            tokio::time::sleep(ms(10)).await;
        }
    };
    // Open, 10 requests of A cost a batch of answers or two.
    redis.reset_stats().await;
    every_10_ms(&mut a, 10).await;
    tokio::time::sleep(ms(150)).await;
    assert!(controller_calls(&redis).await <= 3);
    // B is refused; 200 ms later, each request of A asks for a slot.
    let refused = send(&mut b, get("http://api.test/429")).await;
    assert_eq!(refused.unwrap().status(), 429);
    every_10_ms(&mut a, 20).await;
    redis.reset_stats().await;
    every_10_ms(&mut a, 10).await;
    let calls = controller_calls(&redis).await;
    assert!(calls >= 10, "{calls} calls for 10 requests");
}

/// `n` GETs of `uri` sent at once through `client`: each answered 200.
async fn all_at_once<S: Client>(client: &S, n: usize, uri: &str) {
    let sends: Vec<_> = (0..n)
        .map(|_| {
            let (mut client, request) = (client.clone(), get(uri));
            tokio::spawn(async move { send(&mut client, request).await })
        })
        .collect();
    for sent in sends {
        assert_eq!(sent.await.unwrap().unwrap().status(), 200);
    }
}

/// The controller's calls since Redis's statistics were last reset, less those that failed
/// (a function not loaded yet).
async fn controller_calls(redis: &RedisServer) -> usize {
    redis.controller_stats().await.done() as usize
}

/// A request in the fleet's line asks again half a spacing before its own slot, and at
/// least every 100 ms (else it is taken as gone): not at every slot given before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn a_long_line_costs_redis_calls_per_request_not_per_waiter() {
    let redis = RedisServer::start().await;
    let told = builder().with_known_rate("api.test", 100, secs(1));
    let client = fleet_member(&redis, "line", told)
        .await
        .layer(scripted(&Log::default()));
    redis.reset_stats().await;
    let waiters = 200;
    let start = Instant::now();
    all_at_once(&client, waiters, "http://api.test/200").await;
    // Only the oldest of the process's requests asks again: 3 to 4 calls per request. A
    // call per waiter each 100 ms would cost about 10; asking at every slot about 100.
    let per_request = controller_calls(&redis).await as f64 / waiters as f64;
    assert!(per_request < 6.0, "{per_request:.1} calls per request");
    // At the pace: the 200th leaves 1.99 s after the first.
    assert!(start.elapsed() < ms(2150), "{:?}", start.elapsed());
}

/// Requests held by a full slow-start window: the oldest asks again, at each answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn a_full_window_costs_redis_calls_per_request_not_per_waiter() {
    let redis = RedisServer::start().await;
    let client = fleet_member(&redis, "window", builder())
        .await
        .layer(scripted(&Log::default()));
    redis.reset_stats().await;
    let waiters = 500;
    all_at_once(&client, waiters, "http://api.test/?sleep=20").await;
    // Each asking every 10 ms cost 11 to 12 calls per request.
    let per_request = controller_calls(&redis).await as f64 / waiters as f64;
    assert!(per_request < 4.0, "{per_request:.1} calls per request");
}

/// A request whose future is no longer polled (a caller that stopped awaiting it) holds the
/// process's other requests a while only: about two doublings and a call's timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn a_held_request_no_longer_polled_holds_the_others_a_while_only() {
    let redis = RedisServer::start().await;
    let told = builder().with_known_rate("api.test", 2, secs(1));
    let mut client = fleet_member(&redis, "stalled", told)
        .await
        .layer(scripted(&Log::default()));
    send(&mut client, get("http://api.test/200")).await.unwrap();
    // The next slot is 500 ms away: polled for 50 ms, this one is held, and asks for the
    // process's others; then it is no longer polled.
    let mut other = client.clone();
    let mut stalled = Box::pin(send(&mut other, get("http://api.test/200")));
    assert!(tokio::time::timeout(ms(50), &mut stalled).await.is_err());
    let start = Instant::now();
    send(&mut client, get("http://api.test/200")).await.unwrap();
    // Taken as gone 200 ms and the test's 500 ms timeout after it last looked; else held
    // until the end of its wait, 30 s.
    let waited = start.elapsed();
    assert!((ms(500)..ms(1500)).contains(&waited), "{waited:?}");
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn alone_a_process_keeps_its_share_of_the_fleets_quota() {
    let mut redis = RedisServer::start().await;
    let roomy = fixed_window(1000, &Seen::default());
    let a_layer = fleet_member(&redis, "quota", builder()).await;
    let b_layer = fleet_member(&redis, "quota", builder()).await;
    let (a, b) = (a_layer.layer(roomy.clone()), b_layer.layer(roomy));
    // A and B send alike: each takes about half of the fleet's sends.
    for _ in 0..5 {
        alternately(&a, &b, 8, "http://api.test/").await;
    }

    redis.kill();
    // A new window of 20. Alone, each sends 4 at a time, B from 25 ms after A, and counts
    // its half of what is left as its own: A does not take it all before B comes.
    let quota = fixed_window(20, &Seen::default());
    let until = Instant::now() + ms(400);
    let alone = |layer: &tower_backoff::PacingLayer| {
        let senders = (0..4).map(|_| tokio::spawn(send_until(layer.layer(quota.clone()), until)));
        senders.collect::<Vec<_>>()
    };
    let a = alone(&a_layer);
    tokio::time::sleep(ms(25)).await;
    let b = alone(&b_layer);
    let mut statuses = [Vec::new(), Vec::new()];
    for (process, senders) in [a, b].into_iter().enumerate() {
        for sender in senders {
            statuses[process].extend(sender.await.unwrap());
        }
    }
    let served = statuses
        .each_ref()
        .map(|sent| sent.iter().filter(|&&s| s == 200).count());
    assert!(served[1] >= 4, "A took {}, B {}", served[0], served[1]);
    // Each counts the other's half, not its sends in flight: one may be refused at the end.
    let sent = statuses.iter().map(Vec::len).sum::<usize>();
    assert!(sent - served[0] - served[1] <= 1, "refused: {statuses:?}");
}

/// The statuses of GETs `client` sends one after the other, until `until`.
async fn send_until<S: Client>(mut client: S, until: Instant) -> Vec<u16> {
    let mut statuses = Vec::new();
    loop {
        let sent = send(&mut client, get("http://api.test/"));
        let Ok(sent) = tokio::time::timeout_at(until, sent).await else {
            return statuses;
        };
        statuses.push(sent.unwrap().status().as_u16());
    }
}

/// Under tower's `ConcurrencyLimit` above it, held requests keep their permits while they
/// wait in the process's line; the one asking Redis is among them, so they go at the pace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (Debian package redis-server); .ci/run runs it"]
async fn held_requests_under_a_concurrency_limit_go_at_the_pace() {
    let redis = RedisServer::start().await;
    let told = builder().with_known_rate("api.test", 20, secs(1));
    let paced = fleet_member(&redis, "limited", told)
        .await
        .layer(scripted(&Log::default()));
    let client = tower::limit::ConcurrencyLimit::new(paced, 3);
    let start = Instant::now();
    all_at_once(&client, 12, "http://api.test/200").await;
    // The 12th leaves 550 ms after the first.
    let took = start.elapsed();
    assert!((ms(500)..ms(900)).contains(&took), "{took:?}");
}
