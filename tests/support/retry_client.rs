// The `RetryClient` cases both reqwest versions run: included by `tests/reqwest.rs` and
// `tests/reqwest_0_12.rs` into a module that names the version's `reqwest`, `ClientExt`
// and `RetryClient`.

use super::{BACKOFF, client, layer, reply, upstream};
use http::{Method, StatusCode};
use std::time::Duration;
use std::sync::{Arc, Mutex};
use tower_backoff::{
    ExponentialBackOff, GiveUp, RetryEvent, RetryLayer, RetryReason, RetrySettings, RetryStats,
};

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

/// A server that answers every request with `status`, its `Location` a port where nothing
/// listens; returns its address and its arrivals.
async fn redirecting_to_a_dead_port(status: u16) -> (std::net::SocketAddr, upstream::Arrivals) {
    let dead = format!("http://{}/done", upstream::refused_addr());
    upstream::serve(move |_, _| reply(status, &[("location", &dead)], "")).await
}

/// The bodies a POST reaches reqwest with: none, in memory, and streamed (no known length).
fn post_bodies() -> [(&'static str, Option<reqwest::Body>); 3] {
    let frames = ["order", " 42"].map(|chunk| {
        Ok::<_, std::convert::Infallible>(http_body::Frame::data(bytes::Bytes::from(chunk)))
    });
    let stream = http_body_util::StreamBody::new(tokio_stream::iter(frames));
    [
        ("empty", None),
        ("in memory", Some(reqwest::Body::from("order 42"))),
        ("streamed", Some(reqwest::Body::wrap(stream))),
    ]
}

/// The errors of the attempts of a request, as the retry layer classed them.
fn layer_recording(reasons: &Arc<Mutex<Vec<RetryReason>>>) -> RetryLayer<ExponentialBackOff> {
    let seen = reasons.clone();
    RetryLayer::new(ExponentialBackOff::default())
        .on_retry(move |e: &RetryEvent<'_>| seen.lock().unwrap().push(e.reason()))
}

/// A POST the server processed, then redirected to a dead port, is not sent again: the
/// connect error is the redirect target's, not the POST's, so it loses reqwest's URL.
#[tokio::test(start_paused = true)]
async fn a_post_redirected_to_a_dead_port_is_sent_once() {
    for status in [303, 302, 301] {
        for (kind, body) in post_bodies() {
            let (addr, arrivals) = redirecting_to_a_dead_port(status).await;
            let reasons = Arc::default();
            let client = client().with_retry(layer_recording(&reasons));
            let mut post = client.post(format!("http://{addr}/orders"));
            if let Some(body) = body {
                post = post.body(body);
            }
            let err = post.send().await.unwrap_err();
            assert!(err.is_connect(), "{status} {kind}: {err:?}");
            assert_eq!(err.reqwest().unwrap().url(), None, "{status} {kind}");
            let arrivals = arrivals.lock().unwrap();
            assert_eq!(arrivals.len(), 1, "{status} {kind}: {arrivals:?}");
            assert_eq!(arrivals[0].method, Method::POST);
            assert!(reasons.lock().unwrap().is_empty(), "{status} {kind}");
        }
    }
}

/// A GET in the same case is retried: it is idempotent, and the connect error of the
/// redirect target is an ordinary transport error.
#[tokio::test(start_paused = true)]
async fn a_get_redirected_to_a_dead_port_is_retried() {
    for status in [303, 302] {
        let (addr, arrivals) = redirecting_to_a_dead_port(status).await;
        let reasons = Arc::default();
        let client = client().with_retry(layer_recording(&reasons));
        let err = client
            .get(format!("http://{addr}/items"))
            .send()
            .await
            .unwrap_err();
        assert!(err.is_connect(), "{status}: {err:?}");
        let arrivals = arrivals.lock().unwrap();
        assert!(arrivals.len() > 1, "{status}: {arrivals:?}");
        assert!(arrivals.iter().all(|a| a.method == Method::GET));
        let reasons = reasons.lock().unwrap();
        assert_eq!(reasons.len(), arrivals.len() - 1);
        assert!(reasons.iter().all(|r| *r == RetryReason::Transport), "{reasons:?}");
    }
}

/// A POST whose own connect fails is still resent, whatever its body, and its error
/// keeps its URL: it never reached a server.
#[tokio::test(start_paused = true)]
async fn a_post_whose_own_connect_fails_is_retried() {
    for (kind, body) in post_bodies() {
        let url = format!("http://{}/orders", upstream::refused_addr());
        let reasons = Arc::default();
        let client = client().with_retry(layer_recording(&reasons));
        let mut post = client.post(&url);
        if let Some(body) = body {
            post = post.body(body);
        }
        let err = post.send().await.unwrap_err();
        assert!(err.is_connect(), "{kind}: {err:?}");
        assert_eq!(err.reqwest().unwrap().url().unwrap().as_str(), url);
        let reasons = reasons.lock().unwrap();
        assert!(!reasons.is_empty(), "{kind}");
        assert!(reasons.iter().all(|r| *r == RetryReason::Connect), "{kind}: {reasons:?}");
    }
}

/// A 307 or 308 target that cannot be reached is a connect error still: the server asked
/// for the POST to be sent there, so it did not act on it, and the POST is resent.
#[tokio::test(start_paused = true)]
async fn a_post_redirected_by_a_307_to_a_dead_port_is_resent() {
    for status in [307, 308] {
        let (addr, arrivals) = redirecting_to_a_dead_port(status).await;
        let reasons = Arc::default();
        let client = client().with_retry(layer_recording(&reasons));
        let url = format!("http://{addr}/orders");
        let err = client.post(&url).body("order 42").send().await.unwrap_err();
        assert!(err.is_connect(), "{status}: {err:?}");
        assert_eq!(err.reqwest().unwrap().url().unwrap().as_str(), url);
        assert!(arrivals.lock().unwrap().len() > 1, "{status}");
        let reasons = reasons.lock().unwrap();
        assert!(reasons.iter().all(|r| *r == RetryReason::Connect), "{reasons:?}");
    }
}

/// A POST with a small JSON body redirected by a 307 reaches the new path with its body
/// exactly, on the first attempt as on a retry (after a 429; its `Idempotency-Key` allows
/// the retry).
#[tokio::test(start_paused = true)]
async fn a_307_gets_the_json_body_on_every_attempt() {
    let order = r#"{"item":42,"note":"fragile"}"#;
    for refusals in [0, 1, 2] {
        let (addr, arrivals) = upstream::serve(move |n, arrival| match arrival.path.as_str() {
            "/moved" => reply(201, &[], "created"),
            _ if n < refusals => reply(429, &[("retry-after", "0")], "slow down"),
            _ => reply(307, &[("location", "/moved")], ""),
        })
        .await;
        let client = client().with_retry(layer());
        let res = client
            .post(format!("http://{addr}/orders"))
            .header("content-type", "application/json")
            .header("idempotency-key", "order-42")
            .body(order)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::CREATED, "{refusals}");
        assert_eq!(res.url().as_str(), format!("http://{addr}/moved"));
        let arrivals = arrivals.lock().unwrap();
        assert_eq!(arrivals.len(), refusals + 2, "{refusals}: {arrivals:?}");
        let moved = arrivals.last().unwrap();
        assert_eq!(moved.path, "/moved");
        assert_eq!(moved.method, Method::POST);
        assert_eq!(moved.body, order.as_bytes());
        assert_eq!(moved.headers["content-type"], "application/json");
    }
}

/// A streamed body reaches reqwest as a stream, which reqwest cannot send twice: the 307
/// comes back as the response, and the new path is not asked.
#[tokio::test(start_paused = true)]
async fn a_307_of_a_streamed_body_is_the_response() {
    let (addr, arrivals) = upstream::serve(|_, _| reply(307, &[("location", "/moved")], "")).await;
    let client = client().with_retry(layer());
    let [.., (_, Some(streamed))] = post_bodies() else {
        unreachable!("the last body streams")
    };
    let res = client
        .post(format!("http://{addr}/orders"))
        .body(streamed)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::TEMPORARY_REDIRECT);
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 1, "{arrivals:?}");
    assert_eq!(arrivals[0].body, "order 42".as_bytes());
}

/// `retry_settings` on one request replace the layer's for that request alone: limited to
/// one attempt, it gets the 503; the next request, without them, is retried.
#[tokio::test(start_paused = true)]
async fn retry_settings_apply_to_one_request() {
    let (addr, arrivals) = upstream::serve(|_, _| reply(503, &[("retry-after", "0")], "busy")).await;
    let client = client().with_retry(layer().with_settings(
        RetrySettings::new().with_max_attempts(3).unwrap(),
    ));

    let once = client
        .get(format!("http://{addr}/once"))
        .retry_settings(RetrySettings::new().with_max_attempts(1).unwrap())
        .send()
        .await
        .unwrap();
    let retried = client.get(format!("http://{addr}/retried")).send().await.unwrap();

    assert_eq!(once.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(retried.status(), StatusCode::SERVICE_UNAVAILABLE);
    let stats = retried.extensions().get::<RetryStats>().unwrap();
    assert_eq!(stats.attempts, 3);
    assert!(matches!(stats.gave_up, Some(GiveUp::Limit(_))), "{stats:?}");
    let paths: Vec<_> = arrivals.lock().unwrap().iter().map(|a| a.path.clone()).collect();
    assert_eq!(paths, ["/once", "/retried", "/retried", "/retried"]);
}

/// A builder copied with `try_clone` keeps its retry settings.
#[tokio::test(start_paused = true)]
async fn try_clone_keeps_the_retry_settings() {
    let (addr, arrivals) = upstream::serve(|_, _| reply(503, &[("retry-after", "0")], "busy")).await;
    let client = client().with_retry(layer());
    let once = client
        .post(format!("http://{addr}/orders"))
        .header("idempotency-key", "order-42")
        .body("order 42")
        .retry_settings(RetrySettings::new().with_max_attempts(1).unwrap());
    let again = once.try_clone().expect("an in-memory body can be cloned");
    for builder in [once, again] {
        let res = builder.send().await.unwrap();
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    let arrivals = arrivals.lock().unwrap();
    assert_eq!(arrivals.len(), 2);
    assert!(arrivals.iter().all(|a| a.body == "order 42".as_bytes()));
}
