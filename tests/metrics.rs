//! The `metrics` feature: what a recorder receives while requests are retried.

use http::{Request, Response};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;
use tower::{Layer, ServiceExt};
use tower_backoff::metrics::names;
use tower_backoff::{ConstantBackOff, RetryLayer};

/// Counters and histograms by `name{label=value}`.
fn snapshot(recorder: &DebuggingRecorder) -> HashMap<String, DebugValue> {
    recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            let name = if labels.is_empty() {
                key.name().to_owned()
            } else {
                format!("{}{{{}}}", key.name(), labels.join(","))
            };
            (name, value)
        })
        .collect()
}

/// Runs `scenario` on a paused current-thread runtime with a debugging recorder installed
/// for this thread; the metrics it recorded, read once it has ended.
fn recorded<F>(scenario: impl FnOnce() -> F) -> HashMap<String, DebugValue>
where
    F: std::future::Future<Output = ()>,
{
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || runtime().block_on(scenario()));
    snapshot(&recorder)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

#[test]
fn attempts_retries_waits_and_give_ups_are_recorded() {
    let metrics = recorded(|| async {
        // Three 503s, then the attempts run out.
        let svc = tower::service_fn(|_: Request<String>| async {
            Ok::<_, Infallible>(Response::builder().status(503).body(String::new()).unwrap())
        });
        let layer = RetryLayer::new(ConstantBackOff::new(Duration::from_millis(250)).unwrap());
        let res = layer.layer(svc).oneshot(Request::new(String::new())).await;
        assert_eq!(res.unwrap().status(), 503);
    });
    assert_eq!(metrics[names::ATTEMPTS], DebugValue::Counter(4));
    let retries = format!("{}{{reason=status_503}}", names::RETRIES);
    assert_eq!(metrics[&retries], DebugValue::Counter(3));
    let waits = format!("{}{{reason=status_503}}", names::RETRY_WAIT);
    match &metrics[&waits] {
        DebugValue::Histogram(values) => {
            let secs: Vec<f64> = values.iter().map(|v| v.into_inner()).collect();
            assert_eq!(secs, [0.25, 0.25, 0.25]);
        }
        other => panic!("not a histogram: {other:?}"),
    }
    let give_ups = format!("{}{{why=limits}}", names::GIVE_UPS);
    assert_eq!(metrics[&give_ups], DebugValue::Counter(1));
}

#[test]
fn budget_refusals_are_counted() {
    let metrics = recorded(|| async {
        let svc = tower::service_fn(|_: Request<String>| async {
            Ok::<_, Infallible>(Response::builder().status(503).body(String::new()).unwrap())
        });
        // A budget that allows no retry at all.
        let budget =
            tower_backoff::budget::RetryBudget::new(Duration::from_secs(10), 0, 0.0).unwrap();
        let layer = RetryLayer::new(ConstantBackOff::new(Duration::from_millis(250)).unwrap())
            .with_retry_budget(budget);
        let res = layer.layer(svc).oneshot(Request::new(String::new())).await;
        assert_eq!(res.unwrap().status(), 503);
    });
    assert_eq!(metrics[names::BUDGET_REFUSALS], DebugValue::Counter(1));
    let give_ups = format!("{}{{why=retry_budget}}", names::GIVE_UPS);
    assert_eq!(metrics[&give_ups], DebugValue::Counter(1));
    assert_eq!(metrics[names::ATTEMPTS], DebugValue::Counter(1));
}

#[test]
fn pacing_reports_queue_and_rate_per_destination_without_credentials() {
    let recorder = DebuggingRecorder::new();
    let metrics = metrics::with_local_recorder(&recorder, || {
        runtime().block_on(async {
            // Refuses every request: the destination gets paced.
            let svc = tower::service_fn(|_: Request<String>| async {
                Ok::<_, Infallible>(Response::builder().status(429).body(String::new()).unwrap())
            });
            let pacing = tower_backoff::PacingLayer::builder().build().unwrap();
            let client = pacing.layer(svc);
            for _ in 0..3 {
                let req = Request::get("http://user:secret@api.example:8080/x")
                    .body(String::new())
                    .unwrap();
                let _ = client.clone().oneshot(req).await;
            }
            // While the client lives: dropped, its destinations read zero.
            snapshot(&recorder)
        })
    });
    let rate = format!("{}{{server.address=api.example:8080}}", names::PACING_RATE);
    match &metrics[&rate] {
        DebugValue::Gauge(rate) => assert!(rate.into_inner() > 0.0, "paced at {rate}"),
        other => panic!("not a gauge: {other:?}"),
    }
    let queue = format!("{}{{server.address=api.example:8080}}", names::PACING_QUEUE);
    assert!(metrics.contains_key(&queue), "{metrics:?}");
    assert!(metrics.keys().all(|k| !k.contains("secret")));
}

#[test]
fn pacing_series_are_bounded_by_the_destination_table() {
    let recorder = DebuggingRecorder::new();
    let metrics = metrics::with_local_recorder(&recorder, || {
        runtime().block_on(async {
            // Refuses every request: each destination gets paced, its rate above zero.
            let svc = tower::service_fn(|_: Request<String>| async {
                Ok::<_, Infallible>(Response::builder().status(429).body(String::new()).unwrap())
            });
            let pacing = tower_backoff::PacingLayer::builder()
                .with_max_destinations(4)
                .with_idle_timeout(Duration::from_secs(1))
                .build()
                .unwrap();
            let client = pacing.layer(svc);
            // 50 destinations, one after the other: each new one finds the last idle,
            // and the table forgets it.
            for i in 0..50 {
                for _ in 0..3 {
                    let uri = format!("http://h{i}.example/");
                    let req = Request::get(uri).body(String::new()).unwrap();
                    let _ = client.clone().oneshot(req).await;
                }
                tokio::time::sleep(Duration::from_secs(120)).await;
            }
            // While the client lives: the last destination is still paced.
            snapshot(&recorder)
        })
    });
    for name in [names::PACING_QUEUE, names::PACING_RATE] {
        let series: Vec<&String> = metrics.keys().filter(|k| k.starts_with(name)).collect();
        // One per place in the table, and one for the destinations past it.
        assert!(series.len() <= 4 + 1, "{} series: {series:?}", series.len());
    }
    let rate = |address: &str| match &metrics
        [&format!("{}{{server.address={address}}}", names::PACING_RATE)]
    {
        DebugValue::Gauge(rate) => rate.into_inner(),
        other => panic!("not a gauge: {other:?}"),
    };
    // The first four are named; forgotten, they read zero, not their last rate.
    for i in 0..4 {
        assert_eq!(rate(&format!("h{i}.example")), 0.0, "{metrics:?}");
    }
    // The others share one series: the last one's rate, the forgotten ones' taken back.
    assert!(rate("(other)") > 0.0, "{metrics:?}");
}

/// A timeout above the retry layer that cuts a retry's wait: the retry was never sent, so
/// it is not counted; the request counts as given up, cancelled.
#[test]
fn a_retry_cut_short_by_a_timeout_above_is_not_counted() {
    let metrics = recorded(|| async {
        let svc = tower::service_fn(|_: Request<String>| async {
            let res = Response::builder().status(503).header("retry-after", "5");
            Ok::<_, Infallible>(res.body(String::new()).unwrap())
        });
        let layer = RetryLayer::new(ConstantBackOff::new(Duration::from_millis(250)).unwrap());
        let client = tower::ServiceBuilder::new()
            .timeout(Duration::from_secs(1))
            .layer(layer)
            .service(svc);
        let err = client
            .oneshot(Request::new(String::new()))
            .await
            .unwrap_err();
        assert!(err.is::<tower::timeout::error::Elapsed>());
    });
    assert_eq!(metrics[names::ATTEMPTS], DebugValue::Counter(1));
    let retries = format!("{}{{reason=status_503}}", names::RETRIES);
    assert!(!metrics.contains_key(&retries), "{metrics:?}");
    let cancelled = format!("{}{{why=cancelled}}", names::GIVE_UPS);
    assert_eq!(metrics[&cancelled], DebugValue::Counter(1));
}

/// A Redis that refuses connections: requests go on in-process, and the failure is
/// counted once, not once per request (requests leave Redis alone until a ping in the
/// background is answered).
#[cfg(feature = "redis")]
#[test]
fn a_failing_redis_is_counted_and_requests_go_on() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}/", closed.local_addr().unwrap());
    drop(closed);
    let recorder = DebuggingRecorder::new();
    let statuses = metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let redis = redis::Client::open(url).unwrap();
            let shared = tower_backoff::pacing::RedisPacing::new(redis);
            let pacing = tower_backoff::PacingLayer::builder()
                .with_redis(shared)
                .build()
                .unwrap();
            let client = pacing.layer(tower::service_fn(|_: Request<String>| async {
                Ok::<_, Infallible>(Response::new(String::new()))
            }));
            let mut statuses = Vec::new();
            for _ in 0..5 {
                let request = Request::get("http://api.example/")
                    .body(String::new())
                    .unwrap();
                statuses.push(client.clone().oneshot(request).await.unwrap().status());
            }
            statuses
        })
    });
    assert!(statuses.iter().all(|status| *status == 200), "{statuses:?}");
    match &snapshot(&recorder)[names::PACING_STORE_FAILURES] {
        DebugValue::Counter(failures) => assert_eq!(*failures, 1),
        other => panic!("not a counter: {other:?}"),
    }
}
