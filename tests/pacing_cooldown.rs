mod support;

use http::{Request, Response, StatusCode};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::pacing::*;
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};
use tower_backoff::pacing::PacingDeadline;
use tower_backoff::{PacingError, PacingLayer};

#[tokio::test(start_paused = true)]
async fn retry_after_cools_down_its_destination_only() {
    let log = Log::default();
    let pacing = layer();
    let client = pacing.layer(scripted(&log));
    let start = Instant::now();

    let refused = client
        .clone()
        .oneshot(get_ra("http://a.example/429", "5"))
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let a: http::uri::Authority = "a.example".parse().unwrap();
    let b: http::uri::Authority = "b.example".parse().unwrap();
    assert_eq!(pacing.cooldown(&a), Some(secs(5)));
    assert_eq!(pacing.cooldown(&b), None);

    // B goes at once; A waits for its cool-down, whichever is sent first.
    tokio::time::advance(secs(1)).await;
    let to_a = tokio::spawn(client.clone().oneshot(get("http://a.example/200")));
    tokio::task::yield_now().await;
    let to_b = tokio::spawn(client.clone().oneshot(get("http://b.example/200")));
    to_b.await.unwrap().unwrap();
    assert_eq!(log.offsets(start), [secs(0), secs(1)]);
    assert_eq!(log.uris()[1], "http://b.example/200");
    to_a.await.unwrap().unwrap();
    assert_eq!(log.offsets(start), [secs(0), secs(1), secs(5)]);
    assert_eq!(log.uris()[2], "http://a.example/200");
    // The cool-down is over.
    assert_eq!(pacing.cooldown(&a), None);
}

#[tokio::test(start_paused = true)]
async fn requests_held_by_a_cool_down_leave_at_the_pace_not_in_a_burst() {
    let log = Log::default();
    let pacing = layer();
    let client = pacing.layer(scripted(&log));
    let start = Instant::now();
    client
        .clone()
        .oneshot(get_ra("http://a/429", "2"))
        .await
        .unwrap();
    let queued: Vec<_> = (0..3)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/200"))))
        .collect();
    for task in queued {
        task.await.unwrap().unwrap();
    }
    // Not a burst of three at 2 s: the cool-down's end, then the client's pace.
    let offsets = log.offsets(start);
    assert_eq!(offsets[..2], [ms(0), ms(2000)]);
    assert!(
        gaps(&offsets[1..]).iter().all(|gap| *gap >= ms(30)),
        "{offsets:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lone_retry_after_among_successes_does_not_close_the_destination() {
    let log = Log::default();
    let pacing = layer();
    let mut client = pacing.layer(scripted(&log));
    for _ in 0..20 {
        send(&mut client, get("http://a/200")).await.unwrap();
    }
    // A server shedding one request of many: the client slows down, but the
    // destination does not close for everyone for the Retry-After.
    send(&mut client, get_ra("http://a/429", "5"))
        .await
        .unwrap();
    assert!(pacing.current_delay() > Duration::ZERO);
    assert_eq!(pacing.cooldown(&"a".parse().unwrap()), None);
    let before = Instant::now();
    send(&mut client, get("http://a/200")).await.unwrap();
    assert!(before.elapsed() <= ms(100), "{:?}", before.elapsed());

    // One that serves nothing for a whole window is probed, then cools down as asked.
    let a = "a".parse().unwrap();
    let refusing = Instant::now();
    let mut probes = 0;
    while pacing.cooldown(&a) != Some(secs(5)) {
        send(&mut client, get_ra("http://a/429", "5"))
            .await
            .unwrap();
        probes += 1;
        assert!(probes <= 8, "{probes} probes and no cool-down");
    }
    assert!(refusing.elapsed() >= secs(1), "{:?}", refusing.elapsed());
}

#[tokio::test(start_paused = true)]
async fn a_wait_beyond_max_wait_or_the_deadline_fails_fast() {
    let log = Log::default();
    let pacing = builder().with_max_wait(secs(3)).build().unwrap();
    let mut client = pacing.layer(scripted(&log));
    send(&mut client, get_ra("http://a/429", "5"))
        .await
        .unwrap();

    // max_wait: 3 s < 5 s.
    let before = Instant::now();
    let err = send(&mut client, get("http://a/200")).await.unwrap_err();
    assert!(matches!(
        pacing_error(&err),
        PacingError::WaitTooLong { wait, .. } if wait == secs(5)
    ));
    assert_eq!(
        (pacing_error(&err).wait(), pacing_error(&err).max_wait()),
        (Some(secs(5)), Some(secs(3)))
    );
    assert_eq!(Instant::now(), before, "failing fast does not wait");
    assert_eq!(log.len(), 1, "the inner service was not called");

    // The request's own deadline is shorter still.
    let mut request = get("http://a/200");
    request
        .extensions_mut()
        .insert(PacingDeadline(Instant::now() + secs(1)));
    let err = send(&mut client, request).await.unwrap_err();
    assert_eq!(
        (pacing_error(&err).wait(), pacing_error(&err).max_wait()),
        (Some(secs(5)), Some(secs(1)))
    );
    assert_eq!((Instant::now(), log.len()), (before, 1));

    // Neither failure reserved anything: once within its max wait, the request goes.
    tokio::time::advance(secs(2)).await;
    send(&mut client, get("http://a/200")).await.unwrap();
    assert_eq!(Instant::now(), before + secs(5));
    assert_eq!(log.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_deadline_later_than_the_wait_lets_the_request_wait() {
    let log = Log::default();
    let pacing = layer();
    let mut client = pacing.layer(scripted(&log));
    send(&mut client, get_ra("http://a/429", "5"))
        .await
        .unwrap();
    let start = Instant::now();
    let mut request = get("http://a/200");
    request
        .extensions_mut()
        .insert(PacingDeadline(start + secs(6)));
    send(&mut client, request).await.unwrap();
    assert_eq!(start.elapsed(), secs(5));
}

#[tokio::test(start_paused = true)]
async fn a_hostile_retry_after_is_capped() {
    let log = Log::default();
    let pacing = builder().with_max_wait(secs(3600)).build().unwrap();
    let mut client = pacing.layer(scripted(&log));
    let start = Instant::now();
    send(&mut client, get_ra("http://a/429", "100000000000000000000"))
        .await
        .unwrap();
    let a = "a".parse().unwrap();
    assert_eq!(pacing.cooldown(&a), Some(PacingLayer::DEFAULT_MAX_COOLDOWN));

    let mut hurried = get("http://a/200");
    hurried
        .extensions_mut()
        .insert(PacingDeadline(start + secs(1)));
    let err = send(&mut client, hurried).await.unwrap_err();
    assert_eq!(pacing_error(&err).wait(), Some(secs(300)));

    send(&mut client, get("http://a/200")).await.unwrap();
    assert_eq!(log.offsets(start), [secs(0), secs(300)]);

    // A smaller cap applies the same way; zero ignores the header entirely.
    for (cap, expected) in [(secs(7), Some(secs(7))), (Duration::ZERO, None)] {
        let pacing = PacingLayer::builder()
            .with_max_cooldown(cap)
            .build()
            .unwrap();
        let mut client = pacing.layer(scripted(&log));
        send(&mut client, get_ra("http://a/429", "60"))
            .await
            .unwrap();
        assert_eq!(pacing.cooldown(&a), expected);
    }
}

#[tokio::test(start_paused = true)]
async fn the_ratelimit_header_cools_down_too() {
    let log = Log::default();
    let pacing = layer();
    let inner = tower::service_fn(|_: Request<()>| async {
        let response = Response::builder()
            .status(429)
            .header("ratelimit", r#""burst";r=0;t=4"#);
        Ok::<_, Infallible>(response.body(()).unwrap())
    });
    let mut client = pacing.layer(inner);
    send(&mut client, get("http://a/")).await.unwrap();
    assert_eq!(pacing.cooldown(&"a".parse().unwrap()), Some(secs(4)));
    drop(log);
}

/// A real hyper server on loopback and hyper-util's legacy client: a 429 with
/// `Retry-After: 1` holds the next request to that server for 1 s.
#[tokio::test(start_paused = true)]
async fn hyper_client_waits_out_a_real_servers_retry_after() {
    use bytes::Bytes;
    use http_body_util::Empty;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::{TokioExecutor, TokioIo};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hits = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let server_hits = Arc::clone(&hits);
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let hits = Arc::clone(&server_hits);
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |_: Request<hyper::body::Incoming>| {
                        let hits = Arc::clone(&hits);
                        async move {
                            let mut hits = hits.lock().unwrap();
                            hits.push(Instant::now());
                            let response = if hits.len() == 1 {
                                Response::builder().status(429).header("retry-after", "1")
                            } else {
                                Response::builder().status(200)
                            };
                            Ok::<_, Infallible>(response.body(Empty::<Bytes>::new()).unwrap())
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });

    let pacing = PacingLayer::new();
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut client = pacing.layer(client);
    let uri = format!("http://{addr}/");
    let request = || Request::get(&uri).body(Empty::<Bytes>::new()).unwrap();

    let first = client.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(first.status(), StatusCode::TOO_MANY_REQUESTS);
    let authority = addr.to_string().parse().unwrap();
    assert!(pacing.cooldown(&authority).is_some());
    let second = client.ready().await.unwrap().call(request()).await.unwrap();
    assert_eq!(second.status(), StatusCode::OK);

    let hits = hits.lock().unwrap();
    assert_eq!(hits.len(), 2);
    let gap = hits[1] - hits[0];
    assert!(gap >= secs(1) && gap < ms(1100), "{gap:?}");
}

/// A refusal with `Retry-After` that arrives while requests wait for the same
/// destination holds them too: none is sent before the cool-down ends.
#[tokio::test(start_paused = true)]
async fn a_cool_down_that_starts_while_requests_wait_holds_them_too() {
    let log = Log::default();
    let pacing = builder().with_initial_window(1).build().unwrap();
    let client = pacing.layer(scripted(&log));
    let start = Instant::now();
    // One request in flight fills the window; three wait behind it.
    let first = tokio::spawn(
        client
            .clone()
            .oneshot(get_ra("http://a/429?sleep=100", "2")),
    );
    tokio::time::sleep(ms(1)).await;
    let waiting: Vec<_> = (0..3)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/200"))))
        .collect();
    assert_eq!(first.await.unwrap().unwrap().status(), 429);
    for task in waiting {
        task.await.unwrap().unwrap();
    }
    // The refusal came at 100 ms and asked for 2 s.
    let offsets = log.offsets(start);
    assert_eq!(offsets.len(), 4);
    assert!(offsets[1..].iter().all(|at| *at >= ms(2100)), "{offsets:?}");
}

/// Waiting requests that cannot wait out a cool-down that starts fail at once, unsent.
#[tokio::test(start_paused = true)]
async fn waiting_requests_that_cannot_wait_out_a_new_cool_down_fail_at_once() {
    let log = Log::default();
    let pacing = builder()
        .with_initial_window(1)
        .with_max_wait(secs(1))
        .build()
        .unwrap();
    let client = pacing.layer(scripted(&log));
    let start = Instant::now();
    let first = tokio::spawn(
        client
            .clone()
            .oneshot(get_ra("http://a/429?sleep=100", "2")),
    );
    tokio::time::sleep(ms(1)).await;
    let waiting: Vec<_> = (0..3)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                let result = client.oneshot(get("http://a/200")).await;
                (result, start.elapsed())
            })
        })
        .collect();
    first.await.unwrap().unwrap();
    for task in waiting {
        let (result, at) = task.await.unwrap();
        let err = result.unwrap_err();
        assert!(pacing_error(&err).wait().unwrap() >= secs(2), "{err}");
        assert_eq!(at, ms(100), "failed when the cool-down started");
    }
    assert_eq!(log.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn pacing_reads_retry_after_dates_with_the_retry_layers_wall_clock() {
    use tower_backoff::RetryLayer;
    use tower_backoff::backoff::StopBackOff;

    let log = Log::default();
    let pacing = layer();
    let now = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let retry = RetryLayer::new(StopBackOff).with_wall_clock(move || now);
    let client = retry.paced(pacing.clone()).layer(scripted(&log));
    let date = httpdate::fmt_http_date(now + secs(5));
    let refused = client
        .oneshot(get_ra("http://a.example/429", &date))
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    // By the system's clock the date is long past: only the retry layer's clock, lent to
    // the attempt, makes it 5 s away.
    assert_eq!(pacing.cooldown(&authority("a.example")), Some(secs(5)));
}
