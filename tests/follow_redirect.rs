//! tower-http's `FollowRedirectLayer` with the retry layer over a real hyper-util client,
//! against real hyper servers on loopback. Above the retry layer, each hop is a request of
//! its own: a POST answered 303 is never sent again, whatever the redirect's target does.
#![cfg(feature = "hyper")]

mod support;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;
use support::upstream::{self, reply};
use tower::util::BoxCloneService;
use tower::{ServiceBuilder, ServiceExt};
use tower_backoff::{ConstantBackOff, GiveUp, RetryError, RetryLayer};
use tower_http::follow_redirect::FollowRedirectLayer;

type Stack =
    BoxCloneService<Request<Full<Bytes>>, http::Response<hyper::body::Incoming>, RetryError>;

/// As README's "Stacking it with other layers" says: redirects followed above the retry
/// layer, over hyper-util's client.
fn client() -> Stack {
    let stack = ServiceBuilder::new()
        .layer(FollowRedirectLayer::new())
        .layer(retry())
        .service(hyper());
    BoxCloneService::new(stack)
}

fn retry() -> RetryLayer<ConstantBackOff> {
    RetryLayer::new(ConstantBackOff::new(Duration::from_millis(100)).unwrap())
}

fn hyper() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// A server that answers every POST 303, its `Location` a port where nothing listens, and
/// the POST sent to it.
async fn processed_then_redirected_to_a_dead_port() -> (upstream::Arrivals, Request<Full<Bytes>>) {
    let dead = format!("http://{}/orders/42", upstream::refused_addr());
    let (addr, arrivals) =
        upstream::serve(move |_, _| reply(303, &[("location", &dead)], "")).await;
    let post = Request::post(format!("http://{addr}/orders"))
        .body(Full::from("order 42"))
        .unwrap();
    (arrivals, post)
}

/// A POST the server processed and answered 303, its `Location` a port where nothing
/// listens: the GET to that port is retried, the POST is not sent again.
#[tokio::test(start_paused = true)]
async fn a_post_answered_303_is_sent_once_when_its_target_is_down() {
    let (arrivals, post) = processed_then_redirected_to_a_dead_port().await;
    let err = client().oneshot(post).await.unwrap_err();
    // The GET to the dead port: retried as the defaults allow.
    assert_eq!(err.stats().attempts, 4, "{err:?}");
    assert!(
        matches!(err.stats().gave_up, Some(GiveUp::Limit(_))),
        "{err:?}"
    );
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 1, "{arrivals:?}");
    assert_eq!(arrivals[0].method, Method::POST);
}

/// A GET redirected to a server that answers 503 once: the retry goes to the redirect's
/// target, not back to the first server.
#[tokio::test(start_paused = true)]
async fn a_redirect_target_that_fails_once_is_retried_there() {
    let (target, at_target) = upstream::serve(|n, _| match n {
        0 => reply(503, &[], ""),
        _ => reply(200, &[], "found"),
    })
    .await;
    let location = format!("http://{target}/items/7");
    let (first, at_first) =
        upstream::serve(move |_, _| reply(302, &[("location", &location)], "")).await;
    let get = Request::get(format!("http://{first}/items/7"))
        .body(Full::default())
        .unwrap();
    let res = client().oneshot(get).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(at_first.lock().unwrap().len(), 1);
    assert_eq!(at_target.lock().unwrap().len(), 2);
}

/// The order the README warns against, as it says: below the retry layer, the redirect
/// target's connect error reads as the POST's own (hyper-util's error names no URL), and
/// the processed POST is sent again, as often as the attempts allow.
#[tokio::test(start_paused = true)]
async fn below_the_retry_layer_a_post_answered_303_is_sent_again() {
    let (arrivals, post) = processed_then_redirected_to_a_dead_port().await;
    let below = ServiceBuilder::new()
        .layer(retry())
        .layer(FollowRedirectLayer::new())
        .service(hyper());
    let err = below.oneshot(post).await.unwrap_err();
    assert_eq!(err.stats().attempts, 4, "{err:?}");
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 4, "{arrivals:?}");
    assert!(arrivals.iter().all(|a| a.method == Method::POST));
}
