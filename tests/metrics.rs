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

#[test]
fn attempts_retries_waits_and_give_ups_are_recorded() {
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            // Two 503s, then the attempts run out.
            let svc = tower::service_fn(|_: Request<String>| async {
                Ok::<_, Infallible>(Response::builder().status(503).body(String::new()).unwrap())
            });
            let layer = RetryLayer::new(ConstantBackOff::new(Duration::from_millis(250)).unwrap());
            let res = layer.layer(svc).oneshot(Request::new(String::new())).await;
            assert_eq!(res.unwrap().status(), 503);
        });
    });
    let metrics = snapshot(&recorder);
    assert_eq!(metrics[names::ATTEMPTS], DebugValue::Counter(3));
    let retries = format!("{}{{reason=status_503}}", names::RETRIES);
    assert_eq!(metrics[&retries], DebugValue::Counter(2));
    let waits = format!("{}{{reason=status_503}}", names::RETRY_WAIT);
    match &metrics[&waits] {
        DebugValue::Histogram(values) => {
            let secs: Vec<f64> = values.iter().map(|v| v.into_inner()).collect();
            assert_eq!(secs, [0.25, 0.25]);
        }
        other => panic!("not a histogram: {other:?}"),
    }
    let give_ups = format!("{}{{why=limits}}", names::GIVE_UPS);
    assert_eq!(metrics[&give_ups], DebugValue::Counter(1));
}

#[test]
fn budget_refusals_are_counted() {
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
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
    });
    let metrics = snapshot(&recorder);
    assert_eq!(metrics[names::BUDGET_REFUSALS], DebugValue::Counter(1));
    let give_ups = format!("{}{{why=retry_budget}}", names::GIVE_UPS);
    assert_eq!(metrics[&give_ups], DebugValue::Counter(1));
    assert_eq!(metrics[names::ATTEMPTS], DebugValue::Counter(1));
}

#[test]
fn pacing_reports_queue_and_rate_per_destination_without_credentials() {
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
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
        });
    });
    let metrics = snapshot(&recorder);
    let rate = format!("{}{{server.address=api.example:8080}}", names::PACING_RATE);
    match &metrics[&rate] {
        DebugValue::Gauge(rate) => assert!(rate.into_inner() > 0.0, "paced at {rate}"),
        other => panic!("not a gauge: {other:?}"),
    }
    let queue = format!("{}{{server.address=api.example:8080}}", names::PACING_QUEUE);
    assert!(metrics.contains_key(&queue), "{metrics:?}");
    assert!(metrics.keys().all(|k| !k.contains("secret")));
}
