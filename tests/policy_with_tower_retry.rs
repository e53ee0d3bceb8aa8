//! `RetryPolicy` used directly, as a `tower::retry::Policy`: cloning requests, a body capped
//! during the attempt, tower's own `Retry` layer; and the layer, the policy and its delay
//! crossing threads.

mod support;

use http::{Method, Request, Response, Version};
use std::io;
use std::time::Duration;
use support::backoffs::Steps;
use support::scripted::Reply::*;
use support::scripted::{Script, attempts_layer, exact, get, layer, stats};
use support::time::MS;
use tower::retry::Policy;
use tower::{Layer, ServiceExt};
use tower_backoff::body::ReplayBody;
use tower_backoff::body::ReplayGuard;
use tower_backoff::{GiveUp, RetryLayer, RetrySettings, Routes};

/// The guard of a body that can never be replayed.
fn capped_guard() -> ReplayGuard {
    ReplayBody::unreplayable(String::new()).guard()
}

// ---- the policy used directly ----

#[tokio::test(start_paused = true)]
async fn clone_request_copies_the_whole_request() {
    #[derive(Clone, Debug, PartialEq)]
    struct Tag(u8);
    let mut policy = layer().policy();
    let mut original = Request::builder()
        .method(Method::PUT)
        .uri("http://example.com/a?b=c")
        .version(Version::HTTP_2)
        .header("x-one", "1")
        .body("body".to_owned())
        .unwrap();
    original.extensions_mut().insert(Tag(7));
    let copy = <_ as Policy<_, Response<String>, io::Error>>::clone_request(&mut policy, &original)
        .unwrap();
    assert_eq!(copy.method(), Method::PUT);
    assert_eq!(copy.uri(), original.uri());
    assert_eq!(copy.version(), Version::HTTP_2);
    assert_eq!(copy.headers(), original.headers());
    assert_eq!(copy.extensions().get::<Tag>(), Some(&Tag(7)));
    assert_eq!(copy.body(), "body");
}

#[tokio::test(start_paused = true)]
async fn requests_that_can_never_be_retried_are_not_cloned() {
    let mut policy = layer().policy();
    let mut request = get();
    request.extensions_mut().insert(capped_guard());
    assert!(
        <_ as Policy<_, Response<String>, io::Error>>::clone_request(&mut policy, &request)
            .is_none()
    );
    let mut request = get();
    request.extensions_mut().insert(RetrySettings::disabled());
    assert!(
        <_ as Policy<_, Response<String>, io::Error>>::clone_request(&mut policy, &request)
            .is_none()
    );
}

#[tokio::test(start_paused = true)]
async fn a_body_capped_during_the_attempt_is_not_retried() {
    use http_body_util::BodyExt;
    // A streamed body with a 4-byte replay buffer.
    let (mut tx, stream) = http_body_util::channel::Channel::<bytes::Bytes>::new(4);
    let body = ReplayBody::try_new(stream, 4).unwrap();
    let guard = body.guard();
    let mut policy = layer().policy();
    let mut request = get();
    request.extensions_mut().insert(guard.clone());
    let mut copy =
        <_ as Policy<_, Response<String>, io::Error>>::clone_request(&mut policy, &request)
            .unwrap();
    // The attempt sends 6 bytes: the body outgrows its buffer while being sent.
    tx.send_data(bytes::Bytes::from("abcdef")).await.unwrap();
    drop(tx);
    assert_eq!(body.collect().await.unwrap().to_bytes(), "abcdef");
    assert!(guard.is_capped());
    let mut result: Result<Response<String>, io::Error> =
        Ok(Response::builder().status(503).body(String::new()).unwrap());
    assert!(policy.retry(&mut copy, &mut result).is_none());
    assert_eq!(stats(result.as_ref().unwrap()).attempts, 1);
    assert_eq!(
        stats(result.as_ref().unwrap()).gave_up,
        Some(GiveUp::BodyNotReplayable)
    );
}

#[tokio::test(start_paused = true)]
async fn the_policy_plugs_into_towers_own_retry_layer() {
    let script = Script::new(&[Status(503)]);
    let svc = tower::retry::RetryLayer::new(layer().policy()).layer(script.service());
    let res = svc.oneshot(get()).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(script.arrivals(), [Duration::ZERO, 100 * MS]);
}

/// Tower's service clones its policy after asking it to clone the request: what the
/// policy learnt there (the request's attempt count, settings and start) must survive.
#[tokio::test(start_paused = true)]
async fn towers_retry_layer_keeps_the_attempt_limit() {
    let script = Script::new(&[Status(503); 10]);
    let svc = tower::retry::RetryLayer::new(attempts_layer(3).policy()).layer(script.service());
    let res = svc.oneshot(get()).await.unwrap();
    assert_eq!(res.status(), 503);
    assert_eq!(script.arrivals().len(), 3);
    assert_eq!(stats(&res).attempts, 3);
}

#[tokio::test(start_paused = true)]
async fn towers_retry_layer_keeps_a_requests_own_settings() {
    let script = Script::new(&[Status(503); 10]);
    let svc = tower::retry::RetryLayer::new(attempts_layer(5).policy()).layer(script.service());
    let mut req = get();
    req.extensions_mut()
        .insert(exact().with_max_attempts(2).unwrap());
    let res = svc.oneshot(req).await.unwrap();
    assert_eq!(res.status(), 503);
    assert_eq!(script.arrivals().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn towers_retry_layer_counts_time_from_the_first_attempt() {
    // The first attempt takes 250 ms of a 300 ms limit: the retry, 100 ms later, would
    // start past it.
    let script = Script::new(&[Slow(250 * MS, 503)]);
    let settings = exact().with_max_elapsed(300 * MS).unwrap();
    let policy = layer().with_settings(settings).policy();
    let svc = tower::retry::RetryLayer::new(policy).layer(script.service());
    let res = svc.oneshot(get()).await.unwrap();
    assert_eq!(res.status(), 503);
    assert_eq!(script.arrivals(), [Duration::ZERO]);
    assert_eq!(
        stats(&res).gave_up,
        Some(GiveUp::Limit(
            tower_backoff::limits::LimitReached::MaxElapsed
        ))
    );
}

// ---- thread safety ----

#[test]
fn the_layer_policy_and_delay_can_cross_threads() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<RetryLayer<Steps>>();
    send_sync::<tower_backoff::layer::RetryPolicy<Steps>>();
    send_sync::<tower_backoff::layer::RetryDelay>();
    send_sync::<RetrySettings>();
    send_sync::<Routes>();
}
