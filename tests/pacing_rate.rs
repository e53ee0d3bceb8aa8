mod support;

use http::{Request, Response, StatusCode};
use std::convert::Infallible;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::limiters::{Seen, limiter_away};
use support::pacing::*;
use tokio::time::Instant;
use tower::{Layer, ServiceExt};
use tower_backoff::PacingLayer;

#[tokio::test(start_paused = true)]
async fn a_slow_down_makes_the_next_requests_to_its_destination_wait() {
    let log = Log::default();
    let pacing = layer();
    let mut client = pacing.layer(scripted(&log));
    let start = Instant::now();

    let busy = send(&mut client, get_ra("http://a/503", "0"))
        .await
        .unwrap();
    assert_eq!(busy.status(), StatusCode::SERVICE_UNAVAILABLE);
    // Nothing measured yet: the destination is probed, one request per probing delay.
    assert_eq!(pacing.current_delay_to(&authority("a")), ms(100));
    assert_eq!(pacing.current_rate_to(&authority("a")), Some(10.0));
    assert_eq!(pacing.current_delay(), ms(100), "the slowest destination");
    // Another destination is not held at all.
    send(&mut client, get("http://b/200")).await.unwrap();
    assert_eq!(pacing.current_delay_to(&authority("b")), Duration::ZERO);
    // New requests (not retries) to the refusing destination wait for its pace.
    send(&mut client, get("http://a/200")).await.unwrap();
    assert_eq!(log.offsets(start), [ms(0), ms(0), ms(100)]);

    // A second refusal, of a request sent at the new pace: the pace goes down again.
    send(&mut client, get_ra("http://a/503", "0"))
        .await
        .unwrap();
    let slower = pacing.current_delay_to(&authority("a"));
    assert!(slower > ms(55), "{slower:?}");
    let before = Instant::now();
    send(&mut client, get("http://a/200")).await.unwrap();
    // Within a timer tick: timers fire on whole milliseconds, and a send late by a whole
    // spacing (the start-up grew the pace since its wait began) counts a tick early.
    let waited = before.elapsed();
    assert!(waited.abs_diff(slower) < ms(1), "{waited:?} for {slower:?}");
}

#[tokio::test(start_paused = true)]
async fn successes_speed_the_client_up_and_it_opens_after_a_quiet_period() {
    let log = Log::default();
    let pacing = layer();
    let mut client = pacing.layer(scripted(&log));
    let start = Instant::now();
    send(&mut client, get_ra("http://a/503", "0"))
        .await
        .unwrap();
    for _ in 0..12 {
        send(&mut client, get("http://a/200")).await.unwrap();
    }
    // After the probe, the pace doubles every 100 ms, up to twice what the last 100 ms
    // delivered: the sends per 100 ms never fall, and the gaps shrink to a quarter.
    let offsets = log.offsets(start);
    let rounds = per_period(&offsets, ms(100), ms(100));
    assert!(rounds.windows(2).all(|w| w[1] >= w[0]), "{rounds:?}");
    let gaps = gaps(&offsets);
    assert_eq!(gaps[..2], [ms(100), ms(100)]);
    assert!(gaps[11] < ms(30), "{gaps:?}");
    assert!(log.offsets(start)[12] < ms(600));

    // Ten seconds without a refusal: pacing stops, requests no longer wait at all.
    tokio::time::advance(secs(10)).await;
    send(&mut client, get("http://a/200")).await.unwrap();
    assert_eq!(pacing.current_delay(), Duration::ZERO);
    assert_eq!(pacing.current_rate(), None);
    let before = Instant::now();
    let burst: Vec<_> = (0..5)
        .map(|_| tokio::spawn(client.clone().oneshot(get("http://a/200"))))
        .collect();
    for task in burst {
        task.await.unwrap().unwrap();
    }
    assert_eq!(before.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn zero_max_wait_sheds_every_request_that_would_wait() {
    let log = Log::default();
    let pacing = builder().with_max_wait(Duration::ZERO).build().unwrap();
    let mut client = pacing.layer(scripted(&log));
    send(&mut client, get("http://a/200")).await.unwrap();
    send(&mut client, get_ra("http://a/503", "0"))
        .await
        .unwrap();
    let err = send(&mut client, get("http://a/200")).await.unwrap_err();
    assert_eq!(pacing_error(&err).wait(), Some(ms(100)));
    tokio::time::advance(ms(100)).await;
    send(&mut client, get("http://a/200")).await.unwrap();
    assert_eq!(log.len(), 3);
}

#[tokio::test(start_paused = true)]
async fn only_slow_down_statuses_slow_down() {
    let log = Log::default();
    let pacing = layer();
    let mut client = pacing.layer(scripted(&log));
    let start = Instant::now();
    // A 500 with Retry-After is a failure of the request, not a request to slow down.
    for status in [200, 404, 500, 502] {
        send(&mut client, get_ra(&format!("http://a/{status}"), "5"))
            .await
            .unwrap();
    }
    assert_eq!(pacing.current_delay(), Duration::ZERO);
    assert_eq!(pacing.cooldown(&"a".parse().unwrap()), None);
    assert_eq!(log.offsets(start), [Duration::ZERO; 4]);

    // Unless configured so.
    let pacing = builder()
        .with_slow_down_on([StatusCode::BAD_GATEWAY])
        .build()
        .unwrap();
    let mut client = pacing.layer(scripted(&log));
    send(&mut client, get_ra("http://a/503", "0"))
        .await
        .unwrap();
    assert_eq!(pacing.current_delay(), Duration::ZERO);
    send(&mut client, get_ra("http://c/502", "5"))
        .await
        .unwrap();
    assert_eq!(pacing.current_delay(), ms(100));
    assert_eq!(pacing.cooldown(&"c".parse().unwrap()), Some(secs(5)));
}

#[tokio::test(start_paused = true)]
async fn transport_errors_leave_the_pace_alone() {
    let log = Log::default();
    let pacing = layer();
    let mut client = pacing.layer(scripted(&log));
    for _ in 0..3 {
        let err = send(&mut client, get("http://a/err")).await.unwrap_err();
        assert!(err.downcast_ref::<std::io::Error>().is_some(), "{err}");
    }
    assert_eq!(pacing.current_delay(), Duration::ZERO);
    assert_eq!(pacing.probe_delay_to(&authority("a")), Duration::ZERO);

    // Nor do they count as successes: only a real response ends the probing.
    send(&mut client, get_ra("http://a/503", "0"))
        .await
        .unwrap();
    send(&mut client, get("http://a/err")).await.unwrap_err();
    assert_eq!(pacing.current_delay(), ms(100));
    assert_eq!(pacing.probe_delay_to(&authority("a")), ms(100));
}

#[tokio::test(start_paused = true)]
async fn concurrent_requests_sharing_a_layer_are_spaced() {
    let log = Log::default();
    let pacing = layer();
    let client = pacing.layer(scripted(&log));
    let start = Instant::now();
    client
        .clone()
        .oneshot(get_ra("http://a/503", "0"))
        .await
        .unwrap();
    // Each task its own service, from the layer or a clone: one shared pace.
    let tasks: Vec<_> = (0..10)
        .map(|i| {
            let service = if i % 2 == 0 {
                client.clone()
            } else {
                pacing.clone().layer(scripted(&log))
            };
            tokio::spawn(service.oneshot(get("http://a/200")))
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let offsets = log.offsets(start);
    assert_eq!(offsets[..2], [ms(0), ms(100)]);
    // One at a time, never a herd: every gap is positive, and the sends per 100 ms never
    // fall as the successes raise the rate.
    let gaps = gaps(&offsets);
    assert!(gaps.iter().all(|gap| !gap.is_zero()), "{gaps:?}");
    let rounds = per_period(&offsets, ms(100), ms(100));
    assert!(rounds.windows(2).all(|w| w[1] >= w[0]), "{rounds:?}");
}

/// A token bucket of 50 requests per second (holding `burst`) behind a round trip of
/// twice `one_way`, answering 429 + Retry-After: 1 over the limit, sent `requests`,
/// `workers` at a time, each retried a second after a refusal until it succeeds: how long
/// they take, and how many 429s.
async fn token_bucket_burst(
    one_way: Duration,
    burst: f64,
    (requests, workers): (usize, usize),
) -> (Duration, u32) {
    let seen = Seen::default();
    let bucket = move |level: &mut Option<(f64, Instant)>, now: Instant| {
        let (room, at) = level.unwrap_or((burst, now));
        let room = (room + (now - at).as_secs_f64() * 50.0).min(burst);
        let passes = room >= 1.0;
        *level = Some((room - f64::from(u8::from(passes)), now));
        (passes, vec![("retry-after", "1".to_string())])
    };
    let server = limiter_away((one_way, one_way), &seen, bucket);
    let client = layer().layer(server);
    let start = Instant::now();
    let left = Arc::new(AtomicUsize::new(requests));
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            let (client, left) = (client.clone(), Arc::clone(&left));
            tokio::spawn(async move {
                while left
                    .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
                    .is_ok()
                {
                    loop {
                        let response = client.clone().oneshot(get("http://api/")).await;
                        if response.unwrap().status() == 200 {
                            break;
                        }
                        tokio::time::sleep(secs(1)).await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let refused = seen.refused.load(SeqCst) as u32;
    (start.elapsed(), refused)
}

#[tokio::test(start_paused = true)]
async fn a_rate_limited_burst_completes_near_the_limit_with_few_429s() {
    // Ideal: 200 / 50 = 4 s, plus the 1 s Retry-After of the requests refused last.
    // Without pacing, the first round alone gets 195 429s.
    let (elapsed, refused) = token_bucket_burst(ms(10), 5.0, (200, 200)).await;
    assert!(elapsed < secs(5), "{elapsed:?}, {refused} 429s");
    assert!(refused < 30, "{refused} 429s");
}

#[tokio::test(start_paused = true)]
async fn a_limiter_a_round_trip_away_refuses_few_after_the_first_burst() {
    // 50 ms away, 20 at a time, a refusal comes when the start-up's pace has grown well
    // past the limit: the cut is of what was served, so the next round trip is not refused.
    let (elapsed, refused) = token_bucket_burst(ms(25), 10.0, (300, 20)).await;
    assert!(elapsed < secs(7), "{elapsed:?}, {refused} 429s");
    assert!(refused < 15, "{refused} 429s, 5 % of 300");
}

#[tokio::test(start_paused = true)]
async fn refusals_of_requests_already_in_flight_raise_the_delay_once() {
    let log = Log::default();
    let pacing = builder().with_initial_window(0).build().unwrap();
    let client = pacing.layer(scripted(&log));
    let burst: Vec<_> = (0..8)
        .map(|_| {
            tokio::spawn(
                client
                    .clone()
                    .oneshot(get_ra("http://a/503?sleep=1000", "0")),
            )
        })
        .collect();
    for task in burst {
        assert_eq!(task.await.unwrap().unwrap().status(), 503);
    }
    // Eight refusals of one round: one step down, not 100 ms × 2⁷.
    assert_eq!(pacing.current_delay(), ms(100));
    assert_eq!(pacing.probe_delay_to(&authority("a")), ms(100));
    // A request sent at the new pace and refused again: the next step.
    client
        .clone()
        .oneshot(get_ra("http://a/503", "0"))
        .await
        .unwrap();
    assert_eq!(pacing.current_delay(), ms(200));
}

#[tokio::test(start_paused = true)]
async fn a_destination_that_refuses_everything_is_probed_and_its_requests_succeed_after() {
    // Bare 429s for the first second, then all well; 10 ms each way.
    let start = Instant::now();
    let attempts = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let server = {
        let attempts = Arc::clone(&attempts);
        tower::service_fn(move |_: Request<()>| {
            let attempts = Arc::clone(&attempts);
            async move {
                tokio::time::sleep(ms(10)).await;
                attempts.lock().unwrap().push(Instant::now());
                let status = if start.elapsed() < secs(1) { 429 } else { 200 };
                tokio::time::sleep(ms(10)).await;
                Ok::<_, Infallible>(Response::builder().status(status).body(()).unwrap())
            }
        })
    };
    let pacing = builder().with_initial_window(0).build().unwrap();
    let client = pacing.layer(server);
    // One request every 10 ms for 1.5 s, none retried.
    let mut tasks = Vec::new();
    for _ in 0..150 {
        tasks.push(tokio::spawn(client.clone().oneshot(get("http://api/"))));
        tokio::time::sleep(ms(10)).await;
    }
    let mut ok = 0;
    for task in tasks {
        if task.await.unwrap().unwrap().status() == 200 {
            ok += 1;
        }
    }
    let attempts = attempts.lock().unwrap();
    let during = attempts.iter().filter(|at| **at - start < secs(1)).count();
    // While it refuses, the client only probes: a handful of the 100 requests issued
    // then reach the server. The others wait, and succeed once it is back.
    assert!(during <= 10, "{during} attempts during the outage");
    assert!(ok >= 140, "{ok} of 150 succeeded");
}

#[tokio::test(start_paused = true)]
async fn huge_delays_do_not_overflow() {
    let log = Log::default();
    let pacing = PacingLayer::builder()
        .with_probe(Duration::MAX, Duration::MAX)
        .with_max_cooldown(Duration::MAX)
        .build()
        .unwrap();
    let mut client = pacing.layer(scripted(&log));
    send(&mut client, get_ra("http://a/503", "100000000000000000000"))
        .await
        .unwrap();
    let err = send(&mut client, get_ra("http://a/503", "0"))
        .await
        .unwrap_err();
    assert!(pacing_error(&err).wait().unwrap() > secs(86_400 * 365));
    assert_eq!(log.len(), 1);
    // Another destination is not held.
    send(&mut client, get("http://b/200")).await.unwrap();
    assert_eq!(log.len(), 2);
}

/// HAProxy's `http_req_rate(1s)` in front of a backend, 50 r/s, counted as HAProxy does
/// ([`support::sliding_count::SlidingCount`]): every request is counted, refused ones
/// too, and a refusal says only `Retry-After: 1`.
#[derive(Default)]
struct CountingWindow {
    origin: Option<Instant>,
    count: support::sliding_count::SlidingCount,
}

impl CountingWindow {
    fn admit(&mut self, now: Instant) -> bool {
        let origin = *self.origin.get_or_insert(now);
        self.count.hit((now - origin).as_secs_f64()) <= 50
    }
}

/// What a fleet on a [`CountingWindow`] made of it: the share of the capacity it used,
/// the share of its attempts refused, Jain's index of the clients' successes.
struct FleetFigures {
    used: f64,
    refused: f64,
    jain: f64,
    shares: Vec<f64>,
}

impl std::fmt::Display for FleetFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "used {:.3}, refused {:.3}, Jain {:.3}, {:?}",
            self.used, self.refused, self.jain, self.shares
        )
    }
}

/// 8 clients, each its own pacing layer (seeded from `seed`) with 4 requests in flight,
/// for `seconds` on one [`CountingWindow`]; a refused request waits its `Retry-After`, as
/// in the retry layer.
async fn fleet_on_a_counting_window(seconds: u64, seed: u64) -> FleetFigures {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    let limiter = Arc::new(Mutex::new(CountingWindow::default()));
    let refused = Arc::new(Mutex::new(0_u32));
    let start = Instant::now();
    let end = start + secs(seconds);
    let mut clients = Vec::new();
    for client_seed in (0..8_u64).map(|i| seed * 8 + i) {
        let (limiter, refused) = (Arc::clone(&limiter), Arc::clone(&refused));
        // Loopback: 1–2 ms each way, so that the clients' requests do not arrive in
        // lockstep.
        let rng = Arc::new(Mutex::new(SmallRng::seed_from_u64(client_seed)));
        let server = tower::service_fn(move |_: Request<()>| {
            let (limiter, refused, rng) = (limiter.clone(), refused.clone(), rng.clone());
            async move {
                let hop = ms(rng.lock().unwrap().random_range(1..=2));
                tokio::time::sleep(hop).await;
                let served = limiter.lock().unwrap().admit(Instant::now());
                let mut response = Response::builder();
                if served {
                    // The backend's hop.
                    tokio::time::sleep(ms(1)).await;
                } else {
                    *refused.lock().unwrap() += 1;
                    response = response
                        .status(StatusCode::TOO_MANY_REQUESTS)
                        .header("retry-after", "1");
                }
                tokio::time::sleep(hop).await;
                Ok::<_, Infallible>(response.body(()).unwrap())
            }
        });
        let client = PacingLayer::new().layer(server);
        let delay = ms(client_seed % 8 * 3 / 2);
        clients.push(tokio::spawn(async move {
            // The clients start a few milliseconds apart, as processes do.
            tokio::time::sleep(delay).await;
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    let client = client.clone();
                    tokio::spawn(async move {
                        let mut ok = 0_u32;
                        while Instant::now() < end {
                            match client.clone().oneshot(get("http://limited/")).await {
                                Ok(r) if r.status() == StatusCode::OK => ok += 1,
                                // As the retry layer does: the refused request waits its
                                // `Retry-After`.
                                Ok(_) => tokio::time::sleep(secs(1)).await,
                                Err(_) => tokio::time::sleep(ms(100)).await,
                            }
                        }
                        ok
                    })
                })
                .collect();
            let mut ok = 0;
            for worker in workers {
                ok += worker.await.unwrap();
            }
            f64::from(ok)
        }));
    }
    let mut shares = Vec::new();
    for client in clients {
        shares.push(client.await.unwrap());
    }
    let served: f64 = shares.iter().sum();
    let refused = f64::from(*refused.lock().unwrap());
    FleetFigures {
        used: served / (50.0 * seconds as f64),
        refused: refused / (served + refused),
        jain: support::fairness::jain(&shares),
        shares,
    }
}

/// 8 clients, each its own pacing layer with 4 requests in flight, sharing a limiter that
/// counts its refusals and says nothing of its count: a client over it is refused until
/// the whole fleet sends less. Over a minute they share it evenly and use most of it
/// (84 % used, 11 % refused, Jain's index 0.99). Each client's pace grows on the same clock
/// whatever its rate: one that probed slower for being slower would fall further behind.
#[tokio::test(start_paused = true)]
async fn a_fleet_shares_a_limiter_that_counts_its_refusals() {
    let figures = fleet_on_a_counting_window(60, 0).await;
    assert!(figures.jain >= 0.9, "{figures}");
    assert!(figures.used >= 0.75, "{figures}");
    assert!(figures.refused < 0.16, "{figures}");
}

/// Only explicit rate signals slow a destination: an outage's bare 503s (no `Retry-After`)
/// leave the pace alone, so requests go out as they come and the first after the recovery
/// succeeds at once. A 503 that says when to come back is a signal.
#[tokio::test(start_paused = true)]
async fn bare_503s_never_slow_a_destination_but_a_503_with_retry_after_does() {
    let log = Log::default();
    let pacing = builder().build().unwrap();
    let client = pacing.layer(scripted(&log));
    for _ in 0..20 {
        let res = client.clone().oneshot(get("http://a/503")).await.unwrap();
        assert_eq!(res.status(), 503);
    }
    assert_eq!(pacing.current_delay(), Duration::ZERO);
    let start = Instant::now();
    client.clone().oneshot(get("http://a/200")).await.unwrap();
    assert_eq!(start.elapsed(), Duration::ZERO);

    let mut asked = get("http://b/503");
    asked
        .headers_mut()
        .insert("x-retry-after", "1".parse().unwrap());
    client.clone().oneshot(asked).await.unwrap();
    let start = Instant::now();
    client.clone().oneshot(get("http://b/200")).await.unwrap();
    assert!(
        start.elapsed() > Duration::ZERO,
        "a 503 with Retry-After slows its destination"
    );
}
