//! `integrations::reqwest_0_12` (feature `reqwest-0_12`): the reqwest client types built
//! against reqwest 0.12, against a real hyper server on loopback.

mod support;

use http::{Method, StatusCode};
use reqwest012 as reqwest;
use std::time::Duration;
use support::upstream::{self, reply};
use tower_backoff::integrations::reqwest_0_12::ClientExt;
use tower_backoff::{ConstantBackOff, RetryLayer, RetrySettings, RetryStats};

/// Long enough that a retry made after it could not be mistaken for one after `Retry-After`.
const BACKOFF: Duration = Duration::from_secs(10);

fn layer() -> RetryLayer<ConstantBackOff> {
    RetryLayer::new(ConstantBackOff::new(BACKOFF).unwrap()).with_settings(
        RetrySettings::new()
            .with_max_elapsed(Duration::from_secs(60))
            .unwrap(),
    )
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_503_get_is_retried_and_the_response_is_reqwests_own() {
    let (addr, arrivals) = upstream::serve(|n, _| match n {
        0 => reply(503, &[("retry-after", "1")], "busy"),
        _ => reply(200, &[], "ok"),
    })
    .await;
    let client = client().with_retry(layer());
    let url = format!("http://{addr}/items");

    let res: reqwest::Response = client.get(&url).send().await.unwrap();

    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.url().as_str(), url);
    assert_eq!(res.extensions().get::<RetryStats>().unwrap().attempts, 2);
    assert_eq!(res.text().await.unwrap(), "ok");
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 2);
    let gap = arrivals[1].at - arrivals[0].at;
    // The server's second, not the backoff's ten.
    assert!(gap >= Duration::from_secs(1) && gap < BACKOFF, "{gap:?}");
}

#[tokio::test(start_paused = true)]
async fn a_post_body_is_replayed_after_a_429() {
    let (addr, arrivals) = upstream::serve(|n, _| match n {
        0 => reply(429, &[("retry-after", "0")], "slow down"),
        _ => reply(201, &[], "created"),
    })
    .await;
    let client = client().with_retry(layer());

    let res = client
        .post(format!("http://{addr}/orders"))
        .body(r#"{"item":42}"#)
        .send()
        .await
        .unwrap();

    assert_eq!(res.status(), StatusCode::CREATED);
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 2);
    for arrival in arrivals.iter() {
        assert_eq!(arrival.method, Method::POST);
        assert_eq!(arrival.body, r#"{"item":42}"#);
    }
}

#[tokio::test(start_paused = true)]
async fn the_response_url_follows_redirects() {
    let (addr, _) = upstream::serve(|n, _| match n {
        0 => reply(302, &[("location", "/moved")], ""),
        _ => reply(200, &[], "here"),
    })
    .await;
    let client = client().with_retry(layer());
    let res = client
        .get(format!("http://{addr}/old"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.url().as_str(), format!("http://{addr}/moved"));
}

/// As for 0.13: a POST redirected by a 307 keeps its method and body, reqwest following it.
#[tokio::test(start_paused = true)]
async fn a_307_is_followed_with_the_post_body() {
    let (addr, arrivals) = upstream::serve(|n, _| match n {
        0 => reply(307, &[("location", "/moved")], ""),
        _ => reply(201, &[], "created"),
    })
    .await;
    let client = client().with_retry(layer());
    let res = client
        .post(format!("http://{addr}/orders"))
        .body("order 42")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 2);
    assert_eq!(arrivals[1].path, "/moved");
    assert_eq!(arrivals[1].body, "order 42");
}

/// reqwest 0.12's own verdicts decide, as for 0.13: a request that cannot be built is
/// never retried, a refused connection is a connect error (resent for every method).
#[tokio::test]
async fn reqwest_0_12_errors_are_classified_by_reqwest_verdict() {
    use tower_backoff::classify::{ErrorClass, default_error_class};
    let unbuildable = client().get("http://").build().unwrap_err();
    assert!(unbuildable.is_builder());
    assert_eq!(default_error_class(&unbuildable), ErrorClass::Fatal);
    let refused = client()
        .get(format!("http://{}/", upstream::refused_addr()))
        .send()
        .await
        .unwrap_err();
    assert!(refused.is_connect());
    assert_eq!(default_error_class(&refused), ErrorClass::Connect);
}
