//! The axum gateway of `examples/axum_gateway.rs`, against a real scripted upstream: each
//! route's retry settings show in what the upstream receives.

mod support;

#[allow(dead_code)]
#[path = "../examples/axum_gateway.rs"]
mod gateway;

use bytes::Bytes;
use gateway::{ATTEMPTS, Gateway, HANDLER_ATTEMPTS};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::net::SocketAddr;
use support::upstream::{self, Arrivals, reply};

/// The first `failures` upstream calls answer 503, the others `ok`.
async fn upstream_failing(failures: usize, ok: u16) -> (SocketAddr, Arrivals) {
    upstream::serve(move |n, arrival| {
        if n < failures {
            reply(503, &[], "busy")
        } else {
            reply(ok, &[], &format!("{} ok", arrival.path))
        }
    })
    .await
}

struct Answer {
    status: StatusCode,
    attempts: Option<String>,
    handler_runs: Option<String>,
    body: Bytes,
}

/// Calls the gateway with a plain client (no retries of its own).
async fn call(gateway: SocketAddr, method: Method, path: &str, key: Option<&str>) -> Answer {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut req = Request::builder()
        .method(method)
        .uri(format!("http://{gateway}{path}"));
    if let Some(key) = key {
        req = req.header("idempotency-key", key);
    }
    let res: Response<_> = client
        .request(req.body(Full::new(Bytes::from("{\"cart\":7}"))).unwrap())
        .await
        .unwrap();
    let header = |name: &str| {
        res.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    Answer {
        status: res.status(),
        attempts: header(ATTEMPTS),
        handler_runs: header(HANDLER_ATTEMPTS),
        body: res.into_body().collect().await.unwrap().to_bytes(),
    }
}

async fn gateway_for(upstream: SocketAddr) -> SocketAddr {
    gateway::serve(Gateway::new(upstream).router()).await
}

#[tokio::test]
async fn search_succeeds_after_three_upstream_failures() {
    let (upstream, arrivals) = upstream_failing(3, 200).await;
    let gateway = gateway_for(upstream).await;
    let answer = call(gateway, Method::GET, "/search?q=tower", None).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, "/search ok");
    assert_eq!(answer.attempts.as_deref(), Some("4"));
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 4);
    assert!(arrivals.iter().all(|a| a.path == "/search"));
}

#[tokio::test]
async fn search_gives_up_after_five_attempts() {
    let (upstream, arrivals) = upstream_failing(usize::MAX, 200).await;
    let gateway = gateway_for(upstream).await;
    let answer = call(gateway, Method::GET, "/search?q=tower", None).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.attempts.as_deref(), Some("5"));
    assert_eq!(arrivals.lock().unwrap().len(), 5);
}

#[tokio::test]
async fn checkout_without_idempotency_key_is_sent_once() {
    let (upstream, arrivals) = upstream_failing(1, 201).await;
    let gateway = gateway_for(upstream).await;
    let answer = call(gateway, Method::POST, "/checkout", None).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.attempts.as_deref(), Some("1"));
    assert_eq!(arrivals.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn checkout_with_idempotency_key_is_retried_with_the_same_key_and_body() {
    let (upstream, arrivals) = upstream_failing(1, 201).await;
    let gateway = gateway_for(upstream).await;
    let answer = call(gateway, Method::POST, "/checkout", Some("order-42")).await;
    assert_eq!(answer.status, StatusCode::CREATED);
    assert_eq!(answer.attempts.as_deref(), Some("2"));
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 2);
    for arrival in arrivals.iter() {
        assert_eq!(arrival.method, Method::POST);
        assert_eq!(arrival.headers["idempotency-key"], "order-42");
        assert_eq!(arrival.body, "{\"cart\":7}");
    }
}

/// `route_layer` retries the whole handler: each run calls the upstream once.
#[tokio::test]
async fn inventory_handler_is_retried_by_the_route_layer() {
    let (upstream, arrivals) = upstream_failing(2, 200).await;
    let gateway = gateway_for(upstream).await;
    let answer = call(gateway, Method::GET, "/inventory/widget", None).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, "/inventory/widget ok");
    assert_eq!(answer.handler_runs.as_deref(), Some("3"));
    assert_eq!(answer.attempts.as_deref(), Some("1"));
    assert_eq!(arrivals.lock().unwrap().len(), 3);
}

/// The other routes are not under the route layer.
#[tokio::test]
async fn route_layer_does_not_apply_to_other_routes() {
    let (upstream, _) = upstream_failing(1, 201).await;
    let gateway = gateway_for(upstream).await;
    let answer = call(gateway, Method::POST, "/checkout", None).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.handler_runs, None);
}
