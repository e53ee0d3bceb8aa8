// The `RetryClient` cases both reqwest versions run: included by `tests/reqwest.rs` and
// `tests/reqwest_0_12.rs` into a module that names the version's `reqwest`, `ClientExt`
// and `RetryClient`.

use super::{BACKOFF, client, layer, reply, upstream};
use http::{Method, StatusCode};
use std::time::Duration;
use tower_backoff::RetryStats;

/// A GET answered 503 is retried after `Retry-After`; the caller gets reqwest's own
/// response, with the URL it asked for, its body as `.text()`, and the retry statistics.
#[tokio::test(start_paused = true)]
async fn returns_reqwests_response_after_a_503() {
    let (addr, arrivals) = upstream::serve(|n, _| match n {
        0 => reply(503, &[("retry-after", "1")], "busy"),
        _ => reply(200, &[], "ok"),
    })
    .await;
    let client = client().with_retry(layer());
    let url = format!("http://{addr}/items?page=2");

    let res: reqwest::Response = client.get(&url).send().await.unwrap();

    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(res.url().as_str(), url);
    assert_eq!(res.extensions().get::<RetryStats>().unwrap().attempts, 2);
    assert_eq!(res.text().await.unwrap(), "ok");
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 2);
    let gap = arrivals[1].at - arrivals[0].at;
    // The server's second, not the backoff's.
    assert!(gap >= Duration::from_secs(1) && gap < BACKOFF, "{gap:?}");
}

/// The response's URL is where reqwest ended up, after redirects, not the one asked for.
#[tokio::test(start_paused = true)]
async fn response_url_follows_redirects() {
    let (addr, _) = upstream::serve(|n, _| match n {
        0 => reply(302, &[("location", "/moved")], ""),
        _ => reply(200, &[], "here"),
    })
    .await;
    let client = RetryClient::new(client(), layer());
    let res = client
        .get(format!("http://{addr}/old"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.url().as_str(), format!("http://{addr}/moved"));
    assert_eq!(res.text().await.unwrap(), "here");
}

/// A POST redirected by a 307 is sent again, method and body kept (RFC 9110 § 15.4.8):
/// reqwest follows such a redirect itself when it holds the body whole, as it does behind
/// the layer too.
#[tokio::test(start_paused = true)]
async fn follows_a_307_with_the_post_body() {
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
    assert_eq!(res.url().as_str(), format!("http://{addr}/moved"));
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 2);
    assert_eq!(arrivals[1].method, Method::POST);
    assert_eq!(arrivals[1].path, "/moved");
    assert_eq!(arrivals[1].body, "order 42".as_bytes());
}

/// A POST with an `Idempotency-Key` answered 429 is retried and its body is sent again
/// whole — an in-memory body is replayed whatever the streaming cap.
#[tokio::test(start_paused = true)]
async fn replays_a_post_body_after_a_429() {
    let (addr, arrivals) = upstream::serve(|n, _| match n {
        0 => reply(429, &[("retry-after", "0")], "slow down"),
        _ => reply(201, &[], "created"),
    })
    .await;
    let client = client().with_retry(layer()).with_max_replay_bytes(16);
    let order = format!(r#"{{"item":42,"note":"{}"}}"#, "x".repeat(4096));

    let res = client
        .post(format!("http://{addr}/orders"))
        .header("content-type", "application/json")
        .header("idempotency-key", "order-42")
        .body(order.clone())
        .send()
        .await
        .unwrap();

    assert_eq!(res.status(), StatusCode::CREATED);
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 2);
    for arrival in arrivals.iter() {
        assert_eq!(arrival.method, Method::POST);
        assert_eq!(arrival.body, order.as_bytes());
        assert_eq!(arrival.headers["content-type"], "application/json");
    }
}

/// A 429 may come from a proxy after the server acted on the request: a POST without an
/// `Idempotency-Key` is sent once, and its 429 returned.
#[tokio::test(start_paused = true)]
async fn a_post_answered_429_is_sent_once() {
    let (addr, arrivals) = upstream::serve(|n, _| match n {
        0 => reply(429, &[("retry-after", "1")], "slow down"),
        _ => reply(201, &[], "created"),
    })
    .await;
    let client = client().with_retry(layer());
    let res = client
        .post(format!("http://{addr}/charges"))
        .body("amount=100")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(arrivals.lock().unwrap().len(), 1);
}
