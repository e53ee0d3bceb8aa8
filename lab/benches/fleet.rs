//! What sharing pacing in Redis costs a request: one controller call on loopback, against a
//! Redis `PING` (one round trip), a script call that does nothing, and in-process pacing,
//! over 1,000 destinations in turn and over one, paced or open, and as a script (a Redis
//! without `FCALL`, as before Redis 7). Prints each path's p50 and p99 first (criterion
//! reports means and medians, not tails), and the controller's calls and the time Redis
//! spent per request (`INFO commandstats`).
//! Needs `redis-server` (Debian package `redis-server`).
//!
//! ```text
//! cargo bench -p tower-backoff-lab --bench fleet
//! ```

use criterion::{Criterion, criterion_group, criterion_main};
use http::Request;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt};
use tower_backoff::PacingLayer;
use tower_backoff::pacing::RedisPacing;

#[path = "../../tests/support/redis.rs"]
mod redis_server;
#[path = "../../tests/support/success_path.rs"]
mod support;
use support::{Ok200, Req, Res};

/// Destinations the requests rotate over.
const DESTINATIONS: usize = 1000;

type Client = BoxCloneService<Req, Res, Box<dyn std::error::Error + Send + Sync>>;

fn request(i: usize) -> Req {
    to("d", i)
}

/// A request to the `i`th destination named `prefix`, of [`DESTINATIONS`].
fn to(prefix: &str, i: usize) -> Req {
    let uri = format!("http://{prefix}{}.example/", i % DESTINATIONS);
    Request::get(uri).body(Default::default()).unwrap()
}

/// Takes the destinations named `prefix` past their slow start: it opens at 64 in flight,
/// its cap doubling per 100 ms from 4. Requests to an open destination wait for no call.
fn open(runtime: &Runtime, client: &Client, prefix: &str) {
    runtime.block_on(async {
        for round in 0..70 {
            let mut sends = tokio::task::JoinSet::new();
            for i in 0..DESTINATIONS {
                sends.spawn(client.clone().oneshot(to(prefix, i)));
            }
            while let Some(sent) = sends.join_next().await {
                sent.unwrap().unwrap();
            }
            if round == 0 {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    });
}

/// Sends request `i` (to destination `i` of [`DESTINATIONS`]) through `client`.
fn send(client: &Client) -> impl AsyncFnMut(usize) + use<> {
    let client = client.clone();
    async move |i| {
        client.clone().oneshot(request(i)).await.unwrap();
    }
}

/// A client paced in-process, or in Redis when `redis` is given.
fn client(redis: Option<&redis_server::RedisServer>) -> Client {
    paced_client(redis, 0)
}

/// The same, each of the destinations named `p` told a rate of `rate` requests a second
/// (0: none): paced, at a rate no request waits for here.
fn paced_client(redis: Option<&redis_server::RedisServer>, rate: u32) -> Client {
    let told = (0..DESTINATIONS)
        .filter(|_| rate > 0)
        .map(|i| format!("p{i}.example"));
    let builder = told.fold(PacingLayer::builder(), |builder, authority| {
        builder.with_known_rate(authority, rate, Duration::from_secs(1))
    });
    let builder = match redis {
        Some(server) => builder.with_redis(RedisPacing::new(server.client()).with_prefix("bench:")),
        None => builder,
    };
    BoxCloneService::new(builder.build().unwrap().layer(Ok200))
}

/// The time of each of `n` calls of `call`, sorted.
fn timings(runtime: &Runtime, n: usize, mut call: impl AsyncFnMut(usize)) -> Vec<Duration> {
    runtime.block_on(async {
        let mut times = Vec::with_capacity(n);
        for i in 0..n {
            let start = Instant::now();
            call(i).await;
            times.push(start.elapsed());
        }
        times.sort();
        times
    })
}

fn percentiles(name: &str, times: &[Duration]) {
    let at = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    eprintln!("{name}: p50 {:?}, p99 {:?}", at(0.5), at(0.99));
}

fn fleet(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = runtime.block_on(redis_server::RedisServer::start());
    let redis = server.client();
    let connection = runtime
        .block_on(redis.get_multiplexed_async_connection())
        .unwrap();
    let ping = async |_| {
        let mut connection = connection.clone();
        let _: String = redis::cmd("PING")
            .query_async(&mut connection)
            .await
            .unwrap();
    };
    // A script that does nothing, called as pacing calls its own: four keys, the operation,
    // the settings in one text, then six values.
    let noop = redis::Script::new("return {0, 0, 0, 0, 0, 0, 0, 0, 0}");
    let settings = "0.7 0.4 0.5 100 10000 1000 64 100 100 2000 60000 0 4 60000 1";
    let empty_script = async |_| {
        let mut connection = connection.clone();
        let mut invocation = noop.prepare_invoke();
        for part in ["", ":sent", ":line", ":seen"] {
            invocation.key(format!("bench:{{d}}{part}"));
        }
        invocation.arg("reserve").arg(settings);
        for value in [-1.0, 30_000.0, 0.0, 0.0, 0.0, 1.0] {
            invocation.arg(value);
        }
        let _: Vec<i64> = invocation.invoke_async(&mut connection).await.unwrap();
    };
    let (local, shared) = (client(None), client(Some(&server)));
    // Every destination once, then the tails.
    timings(&runtime, DESTINATIONS, send(&shared));
    percentiles("Redis PING", &timings(&runtime, 20_000, ping));
    percentiles(
        "a script doing nothing",
        &timings(&runtime, 20_000, empty_script),
    );
    percentiles(
        "in-process pacing",
        &timings(&runtime, 20_000, send(&local)),
    );
    let spent = || redis_spent(&runtime, &server, 20_000);
    spent();
    percentiles(
        "pacing in Redis, 1,000 destinations in their slow start",
        &timings(&runtime, 20_000, send(&shared)),
    );
    spent();
    let one = async |_| {
        shared.clone().oneshot(request(0)).await.unwrap();
    };
    percentiles(
        "pacing in Redis, one destination (open once past its slow start)",
        &timings(&runtime, 20_000, one),
    );
    spent();
    let paced = paced_client(Some(&server), 1_000_000);
    let told = || {
        let paced = paced.clone();
        async move |i| {
            paced.clone().oneshot(to("p", i)).await.unwrap();
        }
    };
    timings(&runtime, DESTINATIONS, told());
    spent();
    percentiles(
        "pacing in Redis, 1,000 paced destinations",
        &timings(&runtime, 20_000, told()),
    );
    spent();
    // A fleet's usual case: one API. Each reservation carries the answers before it.
    let one_paced = async |_| {
        paced.clone().oneshot(to("p", 0)).await.unwrap();
    };
    percentiles(
        "pacing in Redis, one paced destination",
        &timings(&runtime, 20_000, one_paced),
    );
    spent();
    open(&runtime, &shared, "open");
    spent();
    let opened = async |i| {
        shared.clone().oneshot(to("open", i)).await.unwrap();
    };
    percentiles(
        "pacing in Redis, 1,000 open destinations",
        &timings(&runtime, 20_000, opened),
    );
    // The last answers go within 100 ms.
    runtime.block_on(async { tokio::time::sleep(Duration::from_millis(300)).await });
    spent();
    as_function_and_as_script(&runtime);

    let mut group = c.benchmark_group("fleet");
    let mut i = 0;
    group.bench_function("Redis PING", |b| b.iter(|| runtime.block_on(ping(0))));
    group.bench_function("in-process pacing, 1000 destinations", |b| {
        b.iter(|| runtime.block_on(send(&local)(next(&mut i))))
    });
    group.bench_function("pacing in Redis, 1000 destinations", |b| {
        b.iter(|| runtime.block_on(send(&shared)(next(&mut i))))
    });
    group.finish();
}

/// The controller as a function and as a script (before Redis 7; here `FCALL` renamed
/// away), each on a fresh Redis, 1,000 destinations in their slow start, in alternate
/// blocks: a busy machine slows both alike.
fn as_function_and_as_script(runtime: &Runtime) {
    let old = ["--rename-command", "FCALL", ""];
    let mut servers = [&[][..], &old[..]].map(|options| {
        let server = runtime.block_on(redis_server::RedisServer::start_with(options));
        let client = client(Some(&server));
        timings(runtime, DESTINATIONS, send(&client));
        runtime.block_on(server.reset_stats());
        (server, client, Vec::new())
    });
    for _ in 0..10 {
        for (_, client, times) in &mut servers {
            times.extend(timings(runtime, 2_000, send(client)));
        }
    }
    for ((server, _, mut times), name) in servers.into_iter().zip(["a function", "a script"]) {
        times.sort();
        let path = format!("pacing in Redis as {name}, 1,000 destinations in their slow start");
        percentiles(&path, &times);
        redis_spent(runtime, &server, 20_000);
    }
}

/// Prints the controller's calls Redis ran since the last look (as a function, or as a
/// script), and the time it spent on them, per request of `requests`; then counts from zero
/// again.
fn redis_spent(runtime: &Runtime, server: &redis_server::RedisServer, requests: u32) {
    let spent = runtime.block_on(server.controller_stats());
    let per = f64::from(requests);
    eprintln!(
        "  in Redis: {:.2} calls and {:.1} µs per request",
        spent.calls as f64 / per,
        spent.usec as f64 / per
    );
    runtime.block_on(server.reset_stats());
}

fn next(i: &mut usize) -> usize {
    *i += 1;
    *i
}

criterion_group!(benches, fleet);
criterion_main!(benches);
