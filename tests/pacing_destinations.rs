mod support;

use http::{Request, Response, StatusCode};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use support::pacing::*;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};
use tower_backoff::pacing::Pacing;
use tower_backoff::{ConfigError, PacingError, PacingLayer};

#[tokio::test(start_paused = true)]
async fn clones_share_one_state() {
    let log = Log::default();
    let pacing = layer();
    let copy = pacing.clone();
    let mut first = copy.layer(scripted(&log));
    let mut second: Pacing<_> = pacing.clone().layer(scripted(&log));
    let mut third = second.clone();

    send(&mut first, get_ra("http://a/429", "3")).await.unwrap();
    assert_eq!(pacing.current_delay(), ms(100));
    assert_eq!(pacing.cooldown(&"a".parse().unwrap()), Some(secs(3)));

    assert_eq!(pacing.probe_delay_to(&authority("a")), ms(100));

    let start = Instant::now();
    send(&mut second, get("http://a/200")).await.unwrap();
    assert_eq!(start.elapsed(), secs(3));
    send(&mut third, get("http://a/200")).await.unwrap();
    assert!(start.elapsed() > secs(3), "the pace holds every clone");
}

#[tokio::test(start_paused = true)]
async fn the_host_header_names_the_destination_of_a_relative_uri() {
    let log = Log::default();
    let pacing = layer();
    let mut client = pacing.layer(scripted(&log));
    let request = Request::get("/429")
        .header("host", "h.example")
        .header("x-retry-after", "2")
        .body(())
        .unwrap();
    send(&mut client, request).await.unwrap();
    assert_eq!(
        pacing.cooldown(&"h.example".parse().unwrap()),
        Some(secs(2))
    );
    let start = Instant::now();
    send(&mut client, get("http://h.example/200"))
        .await
        .unwrap();
    assert_eq!(start.elapsed(), secs(2));
}

#[test]
fn invalid_settings_are_config_errors() {
    let status = |code| StatusCode::from_u16(code).unwrap();
    let cases: Vec<(Vec<StatusCode>, &str)> = vec![
        (vec![], "[]"),
        (vec![status(200)], "200"),
        (vec![status(429), status(302)], "302"),
        (vec![status(399)], "399"),
        (vec![status(600)], "600"),
        (vec![status(101)], "101"),
    ];
    for (statuses, value) in cases {
        let err: ConfigError = PacingLayer::builder()
            .with_slow_down_on(statuses)
            .build()
            .unwrap_err();
        assert_eq!((err.field(), err.value()), ("slow_down_on", value));
    }
    let invalid = [
        (
            PacingLayer::builder().with_max_queue(0).build(),
            "max_queue",
            "0",
        ),
        (
            PacingLayer::builder().with_max_destinations(0).build(),
            "max_destinations",
            "0",
        ),
        (
            PacingLayer::builder()
                .with_idle_timeout(Duration::ZERO)
                .build(),
            "idle_timeout",
            "0ns",
        ),
        (
            PacingLayer::builder()
                .with_known_rate("a b", 1, Duration::from_secs(1))
                .build(),
            "known_rate",
            "\"a b\"",
        ),
        (
            PacingLayer::builder()
                .with_known_rate("api.example", 0, Duration::from_secs(1))
                .build(),
            "known_rate",
            "(\"api.example\", 0, 1s)",
        ),
        (
            PacingLayer::builder()
                .with_known_rate("api.example", 5, Duration::ZERO)
                .build(),
            "known_rate",
            "(\"api.example\", 5, 0ns)",
        ),
        (
            // One destination, named twice.
            PacingLayer::builder()
                .with_known_rate("api.example", 1, Duration::from_secs(1))
                .with_known_rate("user@api.example", 2, Duration::from_secs(1))
                .build(),
            "known_rate",
            "\"user@api.example\"",
        ),
        (
            // Slower than one request a day.
            PacingLayer::builder()
                .with_known_rate("api.example:8080", 1, Duration::from_secs(2 * 86_400))
                .build(),
            "known_rate",
            "(\"api.example:8080\", 1, 172800s)",
        ),
    ];
    for (result, field, value) in invalid {
        let err = result.unwrap_err();
        assert_eq!((err.field(), err.value()), (field, value));
    }
    assert!(
        PacingLayer::builder()
            .with_max_queue(1)
            .with_max_destinations(1)
            .with_idle_timeout(Duration::from_nanos(1))
            .with_slow_down_on([status(400), status(599)])
            .with_known_rate("api.example:8080", 1, Duration::from_secs(86_400))
            .with_known_rate("[::1]:9000", u32::MAX, Duration::from_nanos(1))
            .with_max_wait(Duration::MAX)
            .with_max_cooldown(Duration::MAX)
            .build()
            .is_ok()
    );
}

#[test]
fn the_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    fn assert_sync<T: Send + Sync>() {}
    let log = Log::default();
    let mut client = PacingLayer::new().layer(scripted(&log));
    assert_send(&client.call(get("http://a/")));
    assert_sync::<PacingLayer>();
    assert_sync::<PacingError>();
}

/// One destination answering 503 forever, one healthy, each sent 50 requests per second
/// for 10 s: the healthy one sees no failure and no wait.
#[tokio::test(start_paused = true)]
async fn a_failing_destination_does_not_slow_down_a_healthy_one() {
    let bad_calls = Arc::new(AtomicUsize::new(0));
    let server = {
        let bad_calls = Arc::clone(&bad_calls);
        tower::service_fn(move |request: Request<()>| {
            let bad = request.uri().host() == Some("bad.example");
            if bad {
                bad_calls.fetch_add(1, Ordering::Relaxed);
            }
            async move {
                tokio::time::sleep(ms(10)).await;
                let status = if bad { 503 } else { 200 };
                let response = Response::builder()
                    .status(status)
                    .header("retry-after", "1");
                Ok::<_, Infallible>(response.body(()).unwrap())
            }
        })
    };
    let pacing = PacingLayer::new();
    let client = pacing.layer(server);
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    for _ in 0..500 {
        for (host, tasks) in [("bad.example", &mut bad), ("good.example", &mut good)] {
            let request = get(&format!("http://{host}/"));
            let client = client.clone();
            tasks.push(tokio::spawn(async move {
                let start = Instant::now();
                let result = client.oneshot(request).await;
                (result.map(|r| r.status()), start.elapsed())
            }));
        }
        tokio::time::sleep(ms(20)).await;
    }
    for task in good {
        let (status, latency) = task.await.unwrap();
        assert_eq!(status.unwrap(), StatusCode::OK);
        assert_eq!(latency, ms(10), "only the server's own latency");
    }
    for task in bad {
        task.await.unwrap().0.ok();
    }
    assert_eq!(pacing.current_rate_to(&authority("good.example")), None);
    assert!(pacing.current_delay_to(&authority("bad.example")) > Duration::ZERO);
    // The failing one was probed, not flooded.
    let calls = bad_calls.load(Ordering::Relaxed);
    assert!(calls < 50, "{calls} calls to the failing destination");
}

/// The same against two real servers on loopback, through hyper-util's client: one
/// refusing with `Retry-After` longer than the client's max wait, one healthy.
#[tokio::test(start_paused = true)]
async fn a_real_refusing_server_does_not_hold_requests_to_a_healthy_one() {
    use bytes::Bytes;
    use http_body_util::Empty;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    use support::upstream;

    let (bad, bad_hits) =
        upstream::serve(|_, _| upstream::reply(503, &[("retry-after", "5")], "")).await;
    let (good, good_hits) = upstream::serve(|_, _| upstream::reply(200, &[], "ok")).await;
    let pacing = PacingLayer::builder()
        .with_max_wait(secs(1))
        .build()
        .unwrap();
    let client = pacing.layer(Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>());
    let request = |addr: std::net::SocketAddr| {
        Request::get(format!("http://{addr}/"))
            .body(Empty::<Bytes>::new())
            .unwrap()
    };
    let refused = client.clone().oneshot(request(bad)).await.unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    let start = Instant::now();
    for _ in 0..10 {
        let err = client.clone().oneshot(request(bad)).await.unwrap_err();
        assert!(err.is::<PacingError>(), "{err}");
        let ok = client.clone().oneshot(request(good)).await.unwrap();
        assert_eq!(ok.status(), StatusCode::OK);
    }
    assert!(start.elapsed() < ms(500), "{:?}", start.elapsed());
    assert_eq!(bad_hits.lock().unwrap().len(), 1);
    assert_eq!(good_hits.lock().unwrap().len(), 10);
}

#[tokio::test(start_paused = true)]
async fn idle_destinations_are_forgotten_and_their_number_is_bounded() {
    let log = Log::default();
    let pacing = builder()
        .with_max_destinations(100)
        .with_idle_timeout(secs(10))
        .build()
        .unwrap();
    let mut client = pacing.layer(scripted(&log));
    // One destination cools down for a minute: it is not idle, and stays.
    send(&mut client, get_ra("http://cool.example/429", "60"))
        .await
        .unwrap();
    for i in 0..99 {
        send(&mut client, get(&format!("http://h{i}.example/200")))
            .await
            .unwrap();
    }
    assert_eq!(pacing.destinations(), 100);
    // Full, none idle: a new destination is served unpaced, and not remembered.
    send(&mut client, get("http://new.example/429"))
        .await
        .unwrap();
    assert_eq!(pacing.destinations(), 100);
    assert_eq!(
        pacing.current_delay_to(&authority("new.example")),
        Duration::ZERO
    );
    // Ten seconds later the others are idle: forgotten when a new destination comes.
    tokio::time::advance(secs(10)).await;
    send(&mut client, get("http://new.example/200"))
        .await
        .unwrap();
    assert_eq!(pacing.destinations(), 2);
    assert!(pacing.cooldown(&authority("cool.example")).is_some());

    // A client calling ten thousand hosts, a hundred new ones per second.
    let mut most = 0;
    for i in 0..10_000 {
        send(&mut client, get(&format!("http://m{i}.example/200")))
            .await
            .unwrap();
        most = most.max(pacing.destinations());
        if i % 100 == 99 {
            tokio::time::advance(secs(1)).await;
        }
    }
    assert!(most <= 100, "{most}");
    assert_eq!(log.len(), 10_102, "every request was served");
}

#[tokio::test(start_paused = true)]
async fn userinfo_is_not_part_of_the_destination() {
    let log = Log::default();
    let pacing = layer();
    let mut client = pacing.layer(scripted(&log));
    send(&mut client, get_ra("http://user:secret@a.example/429", "2"))
        .await
        .unwrap();
    assert_eq!(pacing.cooldown(&authority("a.example")), Some(secs(2)));
    assert_eq!(
        pacing.cooldown(&authority("other:password@a.example")),
        Some(secs(2))
    );
    let start = Instant::now();
    send(&mut client, get("http://a.example/200"))
        .await
        .unwrap();
    assert_eq!(start.elapsed(), secs(2));
}
