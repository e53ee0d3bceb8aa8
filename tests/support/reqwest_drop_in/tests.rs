// The drop-in tests both reqwest versions run: included by `tests/reqwest_drop_in.rs` and
// `tests/reqwest_0_12_drop_in.rs`, which name the version's `reqwest`, its `Error`, and the
// modules `plain` and `retried` (the application of `app.rs` with each client).

use std::time::Duration;
use support::upstream::{self, reply};
use tower_backoff::{ConstantBackOff, GiveUp, RetryLayer, RetrySettings};

/// The retry layer of `retried::client()`: three attempts, 10 ms apart.
fn layer() -> RetryLayer<ConstantBackOff> {
    RetryLayer::new(ConstantBackOff::new(Duration::from_millis(10)).unwrap())
        .with_settings(RetrySettings::new().with_max_attempts(3).unwrap())
}

/// A server answering every request by its path.
async fn shop() -> (std::net::SocketAddr, upstream::Arrivals) {
    upstream::serve(|_, arrival| match arrival.path.as_str() {
        "/orders" if arrival.method == http::Method::POST => reply(201, &[], "created"),
        "/orders/41" => reply(204, &[], ""),
        _ => reply(200, &[], "ok"),
    })
    .await
}

/// What the server saw of a request, without the `Host` header (its port differs).
fn seen(arrival: &upstream::Arrival) -> String {
    let mut headers = arrival.headers.clone();
    headers.remove(http::header::HOST);
    format!(
        "{} {}?{:?} {headers:?} {:?}",
        arrival.method, arrival.path, arrival.query, arrival.body
    )
}

/// A server that accepts connections and never answers; its base URL.
async fn silent() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    format!("http://{addr}")
}

/// Every builder method, with reqwest's client and with the `RetryClient`: the same
/// results, and the server receives the same requests.
#[tokio::test]
async fn the_application_runs_the_same_with_either_client() {
    let (addr, theirs) = shop().await;
    let base = format!("http://{addr}");
    let plain = (
        plain::create_order(&base).await.unwrap(),
        plain::sign_in(&base).await.unwrap(),
        plain::tidy_up(&base).await.unwrap(),
    );
    let (addr, ours) = shop().await;
    let base = format!("http://{addr}");
    let retried = (
        retried::create_order(&base).await.unwrap(),
        retried::sign_in(&base).await.unwrap(),
        retried::tidy_up(&base).await.unwrap(),
    );

    assert_eq!(plain, retried);
    assert_eq!(retried.0, "created");
    let mut theirs: Vec<_> = theirs.lock().unwrap().iter().map(seen).collect();
    let mut ours: Vec<_> = ours.lock().unwrap().iter().map(seen).collect();
    // The spawned GET races the others.
    theirs.sort();
    ours.sort();
    assert_eq!(theirs, ours);
    assert_eq!(ours.len(), 7);
    let order = ours.iter().find(|a| a.starts_with("POST")).unwrap();
    for part in [
        r#"Some("dry_run=false")"#,
        r#""content-type": "application/json""#,
        r#""authorization": "Bearer s3cret""#,
        r#""x-tenant": "acme""#,
        r#""idempotency-key": "order-42""#,
        r#"{\"item\":\"42\",\"note\":\"fragile\"}"#,
    ] {
        assert!(order.contains(part), "{part} not in {order}");
    }
    let session = ours.iter().find(|a| a.starts_with("PUT")).unwrap();
    assert!(session.contains("remember=yes"), "{session}");
    assert!(session.contains("application/x-www-form-urlencoded"), "{session}");
}

/// A refused connection and a timeout: the application's checks of the error see the same
/// with either client.
#[tokio::test]
async fn errors_answer_as_reqwests_do() {
    let refused = format!("http://{}/items", upstream::refused_addr());
    let expected = plain::Inspected {
        connect: true,
        timeout: false,
        status: None,
        url: Some(refused.clone()),
    };
    let wait = Duration::from_millis(200);
    assert_eq!(plain::inspect(&refused, wait).await, expected);
    let ours = retried::inspect(&refused, wait).await;
    assert_eq!(format!("{ours:?}"), format!("{expected:?}"));

    let slow = format!("{}/items", silent().await);
    let expected = plain::Inspected {
        connect: false,
        timeout: true,
        status: None,
        url: Some(slow.clone()),
    };
    assert_eq!(plain::inspect(&slow, wait).await, expected);
    let ours = retried::inspect(&slow, wait).await;
    assert_eq!(format!("{ours:?}"), format!("{expected:?}"));
}

/// Through `?`, the error is still there to downcast, with what the retries cost.
#[tokio::test]
async fn the_error_through_question_mark_carries_the_stats() {
    let refused = format!("http://{}/items", upstream::refused_addr());

    let err: anyhow::Error = plain::fetch(&refused).await.unwrap_err();
    assert!(err.downcast_ref::<reqwest::Error>().unwrap().is_connect());

    let err: anyhow::Error = retried::fetch(&refused).await.unwrap_err();
    let ours = err.downcast_ref::<Error>().unwrap();
    assert!(ours.is_connect());
    let stats = ours.stats().unwrap();
    assert_eq!(stats.attempts, 3);
    assert!(matches!(stats.gave_up, Some(GiveUp::Limit(_))), "{stats:?}");
    assert!(ours.reqwest().is_some());
    // The chain names the cause, as reqwest's own does.
    assert!(format!("{err:#}").contains("error sending request"), "{err:#}");

    let err = plain::fetch_boxed(&refused).await.unwrap_err();
    assert!(err.downcast_ref::<reqwest::Error>().unwrap().is_connect());

    let err = retried::fetch_boxed(&refused).await.unwrap_err();
    let ours = err.downcast_ref::<Error>().unwrap();
    assert_eq!(ours.stats().unwrap().attempts, 3);
    assert!(ours.is_connect());
}

/// The point of the change: where reqwest's client returns the 503, the `RetryClient`
/// waits for `Retry-After` and returns the order created.
#[tokio::test]
async fn the_retry_client_gets_past_a_503() {
    let flaky = || {
        upstream::serve(|n, _| match n {
            0 => reply(503, &[("retry-after", "0")], "busy"),
            _ => reply(201, &[], "created"),
        })
    };
    let (addr, _) = flaky().await;
    let err = plain::create_order(&format!("http://{addr}")).await.unwrap_err();
    let status = err.downcast_ref::<reqwest::Error>().unwrap().status();
    assert_eq!(status, Some(reqwest::StatusCode::SERVICE_UNAVAILABLE));

    let (addr, arrivals) = flaky().await;
    let created = retried::create_order(&format!("http://{addr}")).await.unwrap();
    assert_eq!(created, "created");
    assert_eq!(arrivals.lock().unwrap().len(), 2);
}
