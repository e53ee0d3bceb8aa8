//! What sharing pacing in Redis costs a request: one script call on loopback, against a
//! Redis `PING` (one round trip), a script call that does nothing, and in-process pacing,
//! over 1,000 destinations in turn and over one. Prints
//! each path's p50 and p99 first (criterion reports means and medians, not tails), then
//! what Redis spent per script call and per `PING` (`INFO commandstats`).
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
    let uri = format!("http://d{}.example/", i % DESTINATIONS);
    Request::get(uri).body(Default::default()).unwrap()
}

/// A client paced in-process, or in Redis when `redis` is given.
fn client(redis: Option<&redis_server::RedisServer>) -> Client {
    let builder = PacingLayer::builder();
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
    // A script that does nothing, called as pacing calls its own: two keys, 20 arguments.
    let noop = redis::Script::new("return {0, 0, 0, 0, 0, 0}");
    let empty_script = async |_| {
        let mut connection = connection.clone();
        let mut invocation = noop.prepare_invoke();
        invocation
            .key("bench:{d}")
            .key("bench:{d}:sent")
            .arg("reserve");
        for value in 0..19 {
            invocation.arg(f64::from(value) * 1.5);
        }
        let _: Vec<i64> = invocation.invoke_async(&mut connection).await.unwrap();
    };
    let (local, shared) = (client(None), client(Some(&server)));
    let send = |client: &Client| {
        let client = client.clone();
        async move |i| {
            client.clone().oneshot(request(i)).await.unwrap();
        }
    };
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
    percentiles("pacing in Redis", &timings(&runtime, 20_000, send(&shared)));
    let one = async |_| {
        shared.clone().oneshot(request(0)).await.unwrap();
    };
    percentiles(
        "pacing in Redis, one destination",
        &timings(&runtime, 20_000, one),
    );
    // What Redis itself spent per call: the scripts against a PING.
    let stats: String = runtime
        .block_on(server.query(&["INFO", "commandstats"]))
        .unwrap();
    for line in stats
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha") || l.starts_with("cmdstat_ping"))
    {
        eprintln!("in Redis: {line}");
    }

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

fn next(i: &mut usize) -> usize {
    *i += 1;
    *i
}

criterion_group!(benches, fleet);
criterion_main!(benches);
