//! A POST the server processed is never sent again when the connection then fails with a
//! route error: the real hyper-util client, a real hyper server that counts requests, and
//! a real `EHOSTUNREACH` on the established connection (see `netns` for how).
#![cfg(feature = "hyper")]

mod netns;

use http::Method;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use netns::server::{self, request};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::timeout;
use tower::{ServiceBuilder, ServiceExt};
use tower_backoff::classify::{ErrorClass, default_error_class};
use tower_backoff::{ConstantBackOff, RetryEvent, RetryLayer, RetryReason};

/// How long the client's kernel keeps retransmitting unacknowledged data. The route to the
/// server must be lost before its last retransmission (the first comes after 200 ms): a
/// second leaves room for a slow `ip` command.
const USER_TIMEOUT: Duration = Duration::from_secs(1);
/// Bound on every wait of the test: the failure comes after about `USER_TIMEOUT`.
const PATIENCE: Duration = Duration::from_secs(5);

#[test]
#[ignore = "needs a network namespace: unshare -rn and ip (iproute2); run with --include-ignored, as .ci/run does"]
fn a_post_processed_before_the_route_was_lost_is_sent_once() {
    netns::run(
        "a_post_processed_before_the_route_was_lost_is_sent_once",
        || {
            tokio::runtime::Runtime::new()
                .unwrap()
                .block_on(post_processed_before_the_route_was_lost())
        },
    );
}

async fn post_processed_before_the_route_was_lost() {
    let (addr, server) = server::start().await;
    let mut connector = HttpConnector::new();
    connector.set_local_address(Some(netns::CLIENT));
    connector.set_tcp_user_timeout(Some(USER_TIMEOUT));
    let client = Client::builder(TokioExecutor::new()).build(connector);
    // A retry needs the network back: the hook restores it, so that a wrongful retry
    // reaches the server and is counted.
    let retries: Arc<Mutex<Vec<RetryReason>>> = Arc::default();
    let seen = retries.clone();
    let layer = RetryLayer::new(ConstantBackOff::new(Duration::from_millis(10)).unwrap()).on_retry(
        move |e: &RetryEvent<'_>| {
            netns::restore();
            seen.lock().unwrap().push(e.reason());
        },
    );
    let service = ServiceBuilder::new().layer(layer).service(client);

    // An established, pooled connection.
    let res = service
        .clone()
        .oneshot(request(Method::GET, addr))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);

    // The server stops acknowledging: the POST reaches it but stays unacknowledged.
    netns::unreachable(netns::CLIENT);
    let post = tokio::spawn(service.oneshot(request(Method::POST, addr)));
    timeout(PATIENCE, server.processed())
        .await
        .expect("the server processed the POST");
    // Then the route to the server is lost too: the retransmission fails.
    netns::unreachable(netns::SERVER);

    let res = timeout(PATIENCE, post).await;
    assert_eq!(
        server.posts(),
        1,
        "the processed POST was sent again (retries: {:?})",
        retries.lock().unwrap()
    );
    let err = res
        .expect("the POST failed in time")
        .unwrap()
        .expect_err("the server never answered the POST");
    assert!(retries.lock().unwrap().is_empty());

    // The failure is the one of the issue: not a connect error, over EHOSTUNREACH.
    let client_err =
        netns::find::<hyper_util::client::legacy::Error>(&err).expect("a hyper-util error");
    assert!(!client_err.is_connect(), "{err:?}");
    let io_err = netns::find::<io::Error>(&err).unwrap_or_else(|| panic!("no io::Error: {err:?}"));
    assert_eq!(io_err.kind(), io::ErrorKind::HostUnreachable, "{err:?}");
    assert_eq!(default_error_class(&err), ErrorClass::Transport);
    println!("the established connection failed with: {err:?}");
}
