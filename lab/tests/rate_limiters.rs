//! The crate against real rate limiters nobody here wrote: tower_governor (in process),
//! express-rate-limit and rate-limiter-flexible (Node), nginx and HAProxy's stick tables,
//! and against the lab's own leaky bucket (in process), each limiting at 50 r/s (see
//! `lab/src/limiters` for what each limiter is).
//!
//! Real time is unavoidable with external limiters: each case is small (60 requests, about
//! a second of the limit; row 1's 300 for a server far away) and bounded by timeouts. The
//! full-size measurements of the targets are `lab/src/bin/limiters.rs`; their figures are
//! in `docs/BENCHMARKS.md`.
//!
//! The cases against tower_governor and the leaky bucket need nothing outside and always
//! run. Those against the Node limiters (`npm ci` in their `lab/fixtures` folder), nginx
//! and HAProxy, and those sharing pacing in `redis-server`, are `#[ignore = "needs ..."]`:
//! `.ci/run` installs them and runs them with `--ignored`; run that way without them, a
//! case fails saying what is missing.

use tower_backoff_lab::limiters;

use http::StatusCode;
use http::header::RETRY_AFTER;
use limiters::client::{Counts, Distance, HttpClient, SharedPacing, Stack};
use limiters::drive::{self, Summary};
use limiters::redis_server::RedisServer;
use limiters::{Kind, RateLimit, express, flask, start_for_test};
use std::time::{Duration, SystemTime};

/// A request that has not ended after this has hung: fail rather than wait.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The cases run one at a time: each measures real time and real refusals, which two cases
/// sharing the machine's two cores would disturb.
async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static REAL_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    REAL_TIME.lock().await
}

/// The limiter really refuses: a burst of 60 requests with no retry layer, 20 at a time,
/// gets 429s, each with a `Retry-After` the crate can read, and the limiter lets through
/// about its limit (a burst takes well under a second here: one window or bucket).
async fn refuses_a_burst(kind: Kind) {
    let limiter = start_for_test(kind, RateLimit::TARGET).await;
    let client = Stack::Bare.build(&Counts::default());
    let url = limiter.url("/items");
    let mut refused = 0;
    let mut ok = 0;
    let mut tasks = Vec::new();
    for _ in 0..60 {
        let (client, url) = (client.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            use tower::ServiceExt;
            let req = http::Request::get(url).body(Default::default()).unwrap();
            tokio::time::timeout(TIMEOUT, client.oneshot(req)).await
        }));
    }
    for task in tasks {
        let res = task
            .await
            .unwrap()
            .expect("within the timeout")
            .expect("an answer");
        match res.status() {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                refused += 1;
                let after = res
                    .headers()
                    .get(RETRY_AFTER)
                    .expect("Retry-After on a 429");
                let read = tower_backoff::retry_after::parse(after, SystemTime::now());
                assert!(
                    read.is_some_and(|d| d <= Duration::from_secs(1)),
                    "{}: Retry-After {after:?} read as {read:?}",
                    kind.name()
                );
                if kind == Kind::Express {
                    // The IETF draft's headers, which the crate reads too.
                    assert!(res.headers().contains_key("ratelimit"));
                    assert!(res.headers().contains_key("ratelimit-policy"));
                }
                if kind == Kind::Governor {
                    assert!(res.headers().contains_key("x-ratelimit-after"));
                    // A quota on its refusals too: they never take the cut for a limiter
                    // that reports nothing (`Rate::refused_by_limit`).
                    assert!(res.headers().contains_key("x-ratelimit-remaining"));
                }
                if matches!(kind, Kind::Haproxy | Kind::LeakyBucket | Kind::Nginx) {
                    // Nothing of its count: its refusals take that cut.
                    for quota in ["ratelimit", "ratelimit-remaining", "x-ratelimit-remaining"] {
                        assert!(!res.headers().contains_key(quota), "{quota}");
                    }
                    assert_eq!(after, "1");
                }
            }
            other => panic!("{}: unexpected {other}", kind.name()),
        }
    }
    assert_eq!(ok + refused, 60);
    assert!(
        refused >= 5,
        "{}: only {refused} of 60 refused",
        kind.name()
    );
    assert!(
        (5..=55).contains(&ok),
        "{}: {ok} of 60 served at once, for a limit of 50 r/s",
        kind.name()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn governor_refuses_a_burst_with_retry_after() {
    let _alone = one_at_a_time().await;
    refuses_a_burst(Kind::Governor).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs node and `npm ci` in lab/fixtures/express-limiter: .ci/run, or see CONTRIBUTING.md"]
async fn express_refuses_a_burst_with_retry_after() {
    let _alone = one_at_a_time().await;
    refuses_a_burst(Kind::Express).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs haproxy: .ci/run, or see CONTRIBUTING.md"]
async fn haproxy_refuses_a_burst_with_retry_after() {
    let _alone = one_at_a_time().await;
    refuses_a_burst(Kind::Haproxy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaky_bucket_refuses_a_burst_with_retry_after() {
    let _alone = one_at_a_time().await;
    refuses_a_burst(Kind::LeakyBucket).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nginx (nginx-light): .ci/run, or see CONTRIBUTING.md"]
async fn nginx_refuses_a_burst_with_retry_after() {
    let _alone = one_at_a_time().await;
    refuses_a_burst(Kind::Nginx).await;
}

/// `n` GETs, `at_once` at a time, from `stack` to a new `kind` limiter at the target rate:
/// what they got, and what the limiter counted.
async fn burst(
    kind: Kind,
    stack: Stack,
    n: usize,
    at_once: usize,
) -> (Summary, limiters::client::Count) {
    burst_at(kind, RateLimit::TARGET, stack, (n, at_once)).await
}

/// [`burst`] at `limit`.
async fn burst_at(
    kind: Kind,
    limit: RateLimit,
    stack: Stack,
    (n, at_once): (usize, usize),
) -> (Summary, limiters::client::Count) {
    let limiter = start_for_test(kind, limit).await;
    let counts = Counts::default();
    let client = stack.build(&counts);
    let outcomes = drive::burst(client, &limiter.url("/items"), n, at_once, TIMEOUT).await;
    (Summary::of(&outcomes), counts.total())
}

/// With the recommended stack (`RetryLayer` with `PacingLayer` inside), 60 GETs, 20 at a
/// time, all succeed, within a bound far from the 1 s the limit allows but far below what
/// a hung client would take.
async fn recommended_stack_completes(kind: Kind) -> (Summary, limiters::client::Count) {
    let (summary, count) = burst(kind, Stack::RetryPacing, 60, 20).await;
    assert_eq!(
        summary.ok,
        60,
        "{}: {:?} ({count:?})",
        kind.name(),
        summary.failures
    );
    assert!(
        summary.elapsed < Duration::from_secs(8),
        "{}: 60 requests took {:?}",
        kind.name(),
        summary.elapsed
    );
    assert_eq!(count.attempts, 60 + count.refused, "{}", kind.name());
    (summary, count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn governor_recommended_stack_completes_a_burst() {
    let _alone = one_at_a_time().await;
    recommended_stack_completes(Kind::Governor).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs node and `npm ci` in lab/fixtures/express-limiter: .ci/run, or see CONTRIBUTING.md"]
async fn express_recommended_stack_completes_a_burst() {
    let _alone = one_at_a_time().await;
    // express-rate-limit reports its quota (`RateLimit: ...; r=<left>; t=<reset>`) on
    // every answer: pacing holds what would overrun it; only requests that reach it late
    // are refused.
    let (_, count) = recommended_stack_completes(Kind::Express).await;
    assert!(count.refused * 10 < count.attempts, "{count:?}");
}

/// 200 requests waiting on express-rate-limit's spent one-second window (50 a window): at
/// each reset about 50 leave, not all 200, as the window after a reset is guessed as full
/// as the last until it reports. Under 2 % of attempts refused (0-2 of 250 here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs node and `npm ci` in lab/fixtures/express-limiter: .ci/run, or see CONTRIBUTING.md"]
async fn express_paces_more_waiters_than_a_window_holds() {
    let _alone = one_at_a_time().await;
    let (summary, count) = burst(Kind::Express, Stack::RetryPacing, 250, 200).await;
    assert_eq!(summary.ok, 250, "{:?} ({count:?})", summary.failures);
    assert!(count.refused * 50 < count.attempts, "{count:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs haproxy: .ci/run, or see CONTRIBUTING.md"]
async fn haproxy_recommended_stack_completes_a_burst() {
    let _alone = one_at_a_time().await;
    recommended_stack_completes(Kind::Haproxy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaky_bucket_recommended_stack_completes_a_burst() {
    let _alone = one_at_a_time().await;
    recommended_stack_completes(Kind::LeakyBucket).await;
}

/// The quick start against a limiter 50 ms away (a public API's round trip): row 1's 300
/// GETs, 20 at a time, at 50 r/s (ideal 6 s). The slow start's last round trip in flight
/// is refused, a few requests where the limiter lets a burst through a little at a time,
/// a window's whole flight where it counts refusals. At least `done` succeed, under
/// `refused` of the attempts refused, in at most `time` times the ideal.
async fn quick_start_far_away(kind: Kind, done: usize, refused: f64, time: f64) {
    let _alone = one_at_a_time().await;
    let limiter = start_for_test(kind, RateLimit::TARGET).await;
    let counts = Counts::away(Distance::round_trip(Duration::from_millis(50)));
    let client = Stack::RetryPacing.build(&counts);
    let outcomes = drive::burst(client, &limiter.url("/items"), 300, 20, TIMEOUT).await;
    let (summary, count) = (Summary::of(&outcomes), counts.total());
    let (name, took) = (kind.name(), summary.elapsed.as_secs_f64() / 6.0);
    let share = count.refused as f64 / count.attempts as f64;
    let figures = format!(
        "{name}: {} done, {share:.3} refused, {took:.2}x",
        summary.ok
    );
    assert!(summary.ok >= done, "{figures}: {:?}", summary.failures);
    assert!(share < refused && took <= time, "{figures}");
}

/// README: "50 ms away, 0-7 %" of attempts refused; BENCHMARKS' figures are 4.2-5.1 %,
/// 0.98-1.06x the ideal time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn governor_far_away_refuses_few_of_the_quick_starts_attempts() {
    quick_start_far_away(Kind::Governor, 300, 0.08, 1.2).await;
}

/// As for tower_governor: 4.5-5.1 % refused, 0.98-1.17x.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaky_bucket_far_away_refuses_few_of_the_quick_starts_attempts() {
    quick_start_far_away(Kind::LeakyBucket, 300, 0.08, 1.25).await;
}

/// As for tower_governor: 6.5 % refused, 1.09-1.11x.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nginx (nginx-light): .ci/run, or see CONTRIBUTING.md"]
async fn nginx_far_away_refuses_few_of_the_quick_starts_attempts() {
    quick_start_far_away(Kind::Nginx, 300, 0.08, 1.2).await;
}

/// README: "13-17 % where a window lets its whole count through at once". HAProxy refuses
/// the 20 in flight, and counting refusals, stays shut a second: 13.3-13.5 %, 1.23-1.24x.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs haproxy: .ci/run, or see CONTRIBUTING.md"]
async fn haproxy_far_away_refuses_the_quick_starts_last_flight() {
    quick_start_far_away(Kind::Haproxy, 300, 0.17, 1.35).await;
}

/// As for HAProxy: Flask-Limiter's moving window lets its whole count through at once, and
/// the flight after it is refused: 298-300 done, 16-17 %, 1.11-1.13x.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs python3-flask-limiter (Debian): .ci/run, or see CONTRIBUTING.md"]
async fn flask_far_away_refuses_the_quick_starts_last_flight() {
    quick_start_far_away(Kind::Flask(flask::Strategy::MovingWindow), 298, 0.2, 1.25).await;
}

/// The README's first snippet (`RetryLayer::new(ExponentialBackOff::default())`, no pacing)
/// against tower_governor, which says `Retry-After: 0` for "under a second": the backoff
/// spaces the retries, and the retries of 429s do not spend the shared retry budget, so
/// nearly every request of a burst gets through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_first_snippet_gets_a_burst_through_tower_governor() {
    let _alone = one_at_a_time().await;
    let (summary, count) = burst(Kind::Governor, Stack::Retry, 60, 20).await;
    assert!(summary.ok >= 57, "{} of 60 ({count:?})", summary.ok);
    assert!(count.refused > 0, "the limiter limited: {count:?}");
}

/// A client sending to a limited destination and to a healthy one (another port, so
/// another authority) at once: the healthy one's requests all succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_destination_sees_no_failure_beside_a_limited_one() {
    let _alone = one_at_a_time().await;
    let limiter = start_for_test(Kind::Governor, RateLimit::TARGET).await;
    let (healthy, _server) = limiters::backend::serve().await;
    let counts = Counts::default();
    let client = Stack::RetryPacing.build(&counts);
    let (healthy_url, limited_url) = (format!("http://{healthy}/ok"), limiter.url("/items"));
    let every = Duration::from_millis(25);
    let (healthy_outcomes, limited_outcomes) = tokio::join!(
        drive::stream(client.clone(), &healthy_url, 40, every, TIMEOUT),
        drive::burst(client.clone(), &limited_url, 60, 20, TIMEOUT),
    );
    let healthy_summary = Summary::of(&healthy_outcomes);
    assert_eq!(healthy_summary.ok, 40, "{:?}", healthy_summary.failures);
    assert_eq!(counts.of(&healthy.to_string()).attempts, 40);
    // The limited destination was really limited while the healthy one was served.
    assert!(counts.of(&limiter.addr.to_string()).refused > 0);
    assert!(Summary::of(&limited_outcomes).ok > 0);
}

// ---- The targets of issue #10 at full size. Those not met today are ignored, and
// ---- measured by `lab/src/bin/limiters.rs`, their figures in docs/BENCHMARKS.md ("Real rate
// ---- limiters"). Run one with `cargo test -p tower-backoff-lab --test rate_limiters -- --ignored --exact NAME`.

/// Issue #29's row 1 at full size: 300 GETs, 20 at a time, 50 r/s, the README's stack
/// for rate-limited APIs. Every request succeeds, within `max_time` of the ideal 6 s
/// (a second run may make up for one stretched by a busy machine), under `max_refused`
/// of the attempts refused.
async fn target_1(kind: Kind, max_time: f64, max_refused: f64) {
    target_1_at(kind, RateLimit::TARGET, 300, max_time, max_refused).await;
}

/// [`target_1`] at `limit`, with `n` GETs (the ideal time is `n` at its rate), one test at a time.
async fn target_1_at(kind: Kind, limit: RateLimit, n: usize, max_time: f64, max_refused: f64) {
    let _alone = one_at_a_time().await;
    let ideal = n as f64 / f64::from(limit.per_second);
    // The matrix holds every one of 10 runs to the bounds; this short form, one of two.
    for run in 1..=2 {
        let (s, c) = burst_at(kind, limit, Stack::RetryPacing, (n, 20)).await;
        assert_eq!(s.ok, n, "{}: {:?}", kind.name(), s.failures);
        let refused = c.refused as f64 / c.attempts as f64;
        let time = s.elapsed.as_secs_f64() / ideal;
        if refused < max_refused && time <= max_time {
            return;
        }
        let what = format!("{}: {time:.2}x the ideal, {c:?}", kind.name());
        assert!(run < 2, "{what}, in two runs");
        eprintln!("{what}, over {max_time}x or {max_refused} refused; once more");
    }
}

/// Row 1 is met against express-rate-limit, tower_governor and the leaky bucket: the
/// slow start doubles at most every 100 ms, so the first refusal meets few requests in
/// flight (0 %, 2.9–3.8 % and 2.9–3.8 % refused in the matrix's 10 runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs node and `npm ci` in lab/fixtures/express-limiter: .ci/run, or see CONTRIBUTING.md"]
async fn target_1_express_recommended_stack_completes_a_burst_near_the_limit() {
    target_1(Kind::Express, 1.15, 0.05).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_1_governor_recommended_stack_completes_a_burst_near_the_limit() {
    target_1(Kind::Governor, 1.15, 0.05).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_1_leaky_bucket_recommended_stack_completes_a_burst_near_the_limit() {
    target_1(Kind::LeakyBucket, 1.15, 0.05).await;
}

/// nginx's `limit_req`, a leaky bucket the controller was never tuned on, held to row 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nginx (nginx-light): .ci/run, or see CONTRIBUTING.md"]
async fn target_1_nginx_recommended_stack_completes_a_burst_near_the_limit() {
    target_1(Kind::Nginx, 1.15, 0.05).await;
}

/// nginx with a burst of 1: of a new destination's first 4 requests, 2 are refused before
/// the other 2 are served. It waits for those answers and probes after 100 ms, rather than
/// closing for the second asked: 1.24-1.26x the ideal time here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nginx (nginx-light): .ci/run, or see CONTRIBUTING.md"]
async fn nginx_strict_first_refusals_before_successes_do_not_close_for_a_second() {
    target_1_at(Kind::Nginx, RateLimit::new(50, 1), 300, 1.4, 0.05).await;
}

/// Away from 50 r/s, on nginx (nothing was tuned on it). At 200 r/s the start-up reaches
/// the limit in a few hundred milliseconds: 1200 GETs in 1.00x the ideal, 0.6 % refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nginx (nginx-light): .ci/run, or see CONTRIBUTING.md"]
async fn nginx_fast_a_high_limit_is_reached_without_slowing_the_run() {
    target_1_at(Kind::Nginx, RateLimit::new(200, 20), 1200, 1.1, 0.05).await;
}

/// At 10 r/s every request completes in time, but a steady limit costs about one refusal
/// a second at any rate: 10-13 % of attempts here (row 1 asks < 5 % at 50 r/s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs nginx (nginx-light): .ci/run, or see CONTRIBUTING.md"]
async fn nginx_slow_a_low_limit_completes_in_time_with_a_refusal_a_second() {
    target_1_at(Kind::Nginx, RateLimit::new(10, 2), 100, 1.15, 0.15).await;
}

/// rate-limiter-flexible with its README's headers (it showed the defect): a fixed window
/// opened by its first request, its reset a Unix time rounded up to the second. A spent
/// room bisects that second within the windows' learned length: 0.84-0.99x the ideal,
/// 0.3-1.3 % refused in 10 runs (held to the reset, 1.57-1.95x).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs node and `npm ci` in lab/fixtures/flexible-limiter: .ci/run, or see CONTRIBUTING.md"]
async fn target_1_rate_limiter_flexible_recommended_stack_completes_a_burst_near_the_limit() {
    target_1(Kind::Flexible, 1.15, 0.05).await;
}

/// @fastify/rate-limit, nothing tuned on it: a window opened by its first hit, the reset
/// in whole seconds to its end. 0.85-1.02x the ideal, 0 % refused in 3 runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs node and `npm ci` in lab/fixtures/fastify-limiter: .ci/run, or see CONTRIBUTING.md"]
async fn target_1_fastify_recommended_stack_completes_a_burst_near_the_limit() {
    target_1(Kind::Fastify, 1.15, 0.05).await;
}

/// Flask-Limiter's moving window, nothing tuned on it: a log of the last second's passed
/// requests, refused with a bare 429. 1.04-1.07x the ideal, 5.1-6.0 % refused in 9 runs:
/// over row 1's 5 %, held under 8 %.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs python3-flask-limiter (Debian): .ci/run, or see CONTRIBUTING.md"]
async fn flask_moving_window_recommended_stack_completes_a_burst() {
    target_1(Kind::Flask(flask::Strategy::MovingWindow), 1.15, 0.08).await;
}

/// Flask-Limiter's elastic expiry: every request, refused or not, restarts the window, so
/// only a probe more than a second after the last request passes. Probes doubling up to
/// 2 s find it: 2.9x the ideal, 10-15 % refused in 5 runs (capped at 500 ms, 50 of 300 in
/// 166 s; the retry layer alone, 50 of 300).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs python3-flask-limiter (Debian): .ci/run, or see CONTRIBUTING.md"]
async fn flask_elastic_expiry_recommended_stack_completes_a_burst_by_probing() {
    target_1(Kind::Flask(flask::Strategy::ElasticExpiry), 3.5, 0.2).await;
}

/// HAProxy reports nothing and counts its refusals: every overshoot costs a probe of its
/// memory. Row 1 holds: 1.05-1.12x the ideal, 3.5-4.5 % refused in the matrix's 10 runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs haproxy: .ci/run, or see CONTRIBUTING.md"]
async fn target_1_haproxy_recommended_stack_completes_a_burst_near_the_limit() {
    target_1(Kind::Haproxy, 1.15, 0.05).await;
}

/// HAProxy sending a naive `RateLimit` field: `t=1` for a sliding window, a reset it does
/// not keep. The first request after that reset goes alone; its count did not start over,
/// so the reports are set aside and the pace is the quota over its length: 1.03-1.07x the
/// ideal, 1.0 % refused in 15 runs (a burst at the first reset: 1.35-1.55x, 9.1-9.9 %).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs haproxy: .ci/run, or see CONTRIBUTING.md"]
async fn target_1_haproxy_sending_a_naive_rate_limit_completes_a_burst_near_the_limit() {
    target_1(Kind::HaproxyRateLimit, 1.15, 0.05).await;
}

/// express-rate-limit's draft 7 `RateLimit` Dictionary, one policy: 0.85-0.86x, 0 % refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs node and `npm ci` in lab/fixtures/express-limiter: .ci/run, or see CONTRIBUTING.md"]
async fn target_1_express_draft_7_recommended_stack_completes_a_burst_near_the_limit() {
    target_1(Kind::ExpressWith(express::Headers::Draft7), 1.15, 0.05).await;
}

/// express-rate-limit's legacy `X-RateLimit-*`, the reset in Unix seconds: a refused
/// probe's `Retry-After: 1` bounds that reset (0.87-0.98x, 0.3-1.0 %; 1.15-1.40x before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs node and `npm ci` in lab/fixtures/express-limiter: .ci/run, or see CONTRIBUTING.md"]
async fn target_1_express_legacy_recommended_stack_completes_a_burst_near_the_limit() {
    target_1(Kind::ExpressWith(express::Headers::Legacy), 1.15, 0.05).await;
}

/// Target 2: a limited destination does not slow a healthy one down: the healthy one's
/// p99 latency, beside a burst to the limited one through the same client, grows by less
/// than 10 ms over the same stream alone (pacing is per destination).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_2_limited_destination_does_not_slow_a_healthy_one() {
    let _alone = one_at_a_time().await;
    let limiter = start_for_test(Kind::Governor, RateLimit::TARGET).await;
    let (healthy, _server) = limiters::backend::serve().await;
    let url = format!("http://{healthy}/ok");
    let every = Duration::from_millis(10);
    let alone = Summary::of(
        &drive::stream(
            Stack::RetryPacing.build(&Counts::default()),
            &url,
            100,
            every,
            TIMEOUT,
        )
        .await,
    );
    let counts = Counts::default();
    let client = Stack::RetryPacing.build(&counts);
    let limited_url = limiter.url("/items");
    let (with, _) = tokio::join!(
        drive::stream(client.clone(), &url, 100, every, TIMEOUT),
        drive::burst(client.clone(), &limited_url, 150, 20, TIMEOUT),
    );
    let with = Summary::of(&with);
    assert_eq!(with.ok, 100, "{:?}", with.failures);
    assert!(
        with.p99 < alone.p99 + Duration::from_millis(10),
        "p99 {:?} alone, {:?} beside the limited destination",
        alone.p99,
        with.p99
    );
    // The other destination was really limited meanwhile.
    assert!(counts.of(&limiter.addr.to_string()).refused > 0);
}

/// Target 3, with 8 independent layers in one process (the example runs 8 processes):
/// ≥ 95 % of the limiter's capacity used, < 10 % refused, Jain's index ≥ 0.9.
async fn target_3(kind: Kind, seconds: u64) {
    fleet_within(kind, seconds, Bounds::TARGET_3).await;
}

/// What a fleet is held to.
struct Bounds {
    /// The least share of the limiter's capacity used.
    used: f64,
    /// The share of attempts refused, at most (not reached).
    refused: f64,
    /// The least Jain's index of the clients' successes.
    jain: f64,
}

impl Bounds {
    const TARGET_3: Bounds = Bounds {
        used: 0.95,
        refused: 0.1,
        jain: 0.9,
    };
}

/// Target 3's fleet for `seconds`, held to `bounds` by the median of up to three fleets:
/// two that meet them pass, two that miss fail. A real fleet's figures spread (HAProxy
/// sending `RateLimit`: Jain's index 0.938–0.999 over 12 runs alone on the machine, 0.864
/// in one CI run), and a bound meant for the usual fleet failed CI on one tail run. A
/// change that makes the usual fleet miss still fails, and every fleet's figures are
/// printed.
async fn fleet_within(kind: Kind, seconds: u64, bounds: Bounds) {
    let paced = |counts: &Counts, _: &str| Stack::RetryPacing.build(counts);
    fleets_within(kind, seconds, bounds, paced, Duration::ZERO).await;
}

/// [`fleet_within`] for fleets of any `client` (made for the limiter's URL), each client
/// from a phase drawn in `[0, phase)`.
async fn fleets_within(
    kind: Kind,
    seconds: u64,
    bounds: Bounds,
    client: impl Fn(&Counts, &str) -> limiters::client::HttpClient,
    phase: Duration,
) {
    let (mut met, mut missed) = (0, Vec::new());
    for seed in 1.. {
        if met == 2 || missed.len() == 2 {
            break;
        }
        let fleet = fleet(kind, seconds, &client, phase, seed).await;
        match fleet.check(&bounds) {
            Ok(()) => met += 1,
            Err(why) => missed.push(why),
        }
    }
    assert!(met == 2, "{}: {}", kind.name(), missed.join("; "));
}

/// What one fleet got.
struct Fleet {
    /// Each client's successes.
    shares: Vec<f64>,
    /// The share of the limiter's capacity the fleet used.
    used: f64,
    attempts: u64,
    refused: u64,
    /// Requests that did not succeed, whenever they ended.
    failed: usize,
    /// Those of them that ended in an error, not in an answer of the limiter (a pacing
    /// error, a timeout, a transport error).
    errors: usize,
}

impl Fleet {
    /// Why the fleet misses `bounds`, if it does.
    fn check(&self, bounds: &Bounds) -> Result<(), String> {
        let jain = drive::jain(&self.shares);
        let (used, refused, attempts) = (self.used, self.refused, self.attempts);
        if used < bounds.used {
            Err(format!("capacity used {used:.3}"))
        } else if refused as f64 >= bounds.refused * attempts as f64 {
            Err(format!("{refused} of {attempts} refused"))
        } else if jain < bounds.jain {
            Err(format!("Jain {jain:.3}, shares {:?}", self.shares))
        } else {
            Ok(())
        }
    }
}

/// 8 clients made by `client`, each its own layer, saturating one fresh limiter of `kind`
/// for `seconds`, each from a phase drawn in `[0, phase)` by an RNG seeded with `seed`,
/// within its time.
async fn fleet(
    kind: Kind,
    seconds: u64,
    client: impl Fn(&Counts, &str) -> limiters::client::HttpClient,
    phase: Duration,
    seed: u64,
) -> Fleet {
    use rand::{Rng, SeedableRng};
    let limiter = start_for_test(kind, RateLimit::TARGET).await;
    let mut phases = rand::rngs::SmallRng::seed_from_u64(seed);
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let counts = Counts::default();
            let url = limiter.url("/items");
            let client = client(&counts, &url);
            let phase = if phase.is_zero() {
                phase
            } else {
                phases.random_range(Duration::ZERO..phase)
            };
            tokio::spawn(async move {
                let time = Duration::from_secs(seconds);
                let (outcomes, time) =
                    drive::saturate_after(phase, client, &url, 4, time, TIMEOUT).await;
                // Only what succeeded within the time counts, as in the real runs.
                let in_time = drive::succeeded_within(&outcomes, time);
                let summary = Summary::of(&outcomes);
                let failed = summary.requests - summary.ok;
                if failed > 0 {
                    eprintln!("{}: failed {:?}", kind.name(), summary.failures);
                }
                let errors = outcomes.iter().filter(|o| o.status.is_none()).count();
                let late = summary.ok - in_time;
                (in_time as f64, late, [failed, errors], counts.total())
            })
        })
        .collect();
    let mut fleet = Fleet {
        shares: Vec::new(),
        used: 0.0,
        attempts: 0,
        refused: 0,
        failed: 0,
        errors: 0,
    };
    let mut late = 0;
    for client in clients {
        let (ok, after, [failed, errors], count) = client.await.unwrap();
        fleet.shares.push(ok);
        late += after;
        fleet.failed += failed;
        fleet.errors += errors;
        fleet.attempts += count.attempts;
        fleet.refused += count.refused;
    }
    fleet.used = fleet.shares.iter().sum::<f64>() / (50.0 * seconds as f64);
    // In CI's log, beside the real runs the docs give.
    eprintln!(
        "{}: {seconds} s, {:.3} of the capacity used ({late} more succeeded after the time), {} of {} refused, {} failed, Jain {:.3}",
        kind.name(),
        fleet.used,
        fleet.refused,
        fleet.attempts,
        fleet.failed,
        drive::jain(&fleet.shares)
    );
    fleet
}

/// Target 3: 8 processes, each its own layer, share one limit for 10 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "issue #31: fleets share their pacing in Redis; independent controllers, 8 processes: 18-21 % refused (docs/real-runs/2026-11-27.txt)"]
async fn target_3_express_fleet_shares_a_limit_fully_and_fairly() {
    let _alone = one_at_a_time().await;
    target_3(Kind::Express, 10).await;
}

/// Target 3: 8 processes, each its own layer, share one limit for 10 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "issue #31: fleets share their pacing in Redis; independent controllers, 8 processes: 17-20 % refused (docs/real-runs/2026-11-27.txt)"]
async fn target_3_governor_fleet_shares_a_limit_fully_and_fairly() {
    let _alone = one_at_a_time().await;
    target_3(Kind::Governor, 10).await;
}

/// Target 3: 8 processes, each its own layer, share one limit for 10 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "issue #31: fleets share their pacing in Redis; independent controllers, 8 processes: 21-27 % refused (docs/real-runs/2026-11-27.txt)"]
async fn target_3_haproxy_fleet_shares_a_limit_fully_and_fairly() {
    let _alone = one_at_a_time().await;
    target_3(Kind::Haproxy, 10).await;
}

/// HAProxy sending a naive `RateLimit` field, shared by a fleet of 8 processes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "issue #31: fleets share their pacing in Redis"]
async fn haproxy_sending_rate_limit_is_shared_by_a_fleet() {
    let _alone = one_at_a_time().await;
    let bounds = Bounds {
        used: 0.8,
        ..Bounds::TARGET_3
    };
    fleet_within(Kind::HaproxyRateLimit, 10, bounds).await;
}

/// HAProxy counts its refusals and reports nothing: a fleet of 8 processes over 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "issue #31: fleets share their pacing in Redis"]
async fn haproxy_fleet_settles_under_a_limit_that_counts_its_refusals() {
    let _alone = one_at_a_time().await;
    let bounds = Bounds {
        used: 0.72,
        refused: 0.16,
        jain: 0.9,
    };
    fleet_within(Kind::Haproxy, 30, bounds).await;
}

/// 8 clients told 97 % of their share of HAProxy's limit, each made by `client` for the
/// limiter's URL and the spacing, in one process, each from a random phase of its
/// spacing: ≥ 90 % used, < 5 % refused, Jain's index ≥ 0.95, by the median of three.
async fn told_its_share_within(
    client: impl Fn(&Counts, &str, Duration) -> limiters::client::HttpClient,
) {
    let _alone = one_at_a_time().await;
    let spacing = limiters::told::TOLD_SPACING.div_f64(0.97);
    let bounds = Bounds {
        used: 0.9,
        refused: 0.05,
        jain: 0.95,
    };
    let client = |counts: &Counts, url: &str| client(counts, url, spacing);
    fleets_within(Kind::Haproxy, 10, bounds, client, spacing).await;
}

/// A client that knows its share of a limit, by tower's means: tower's `RateLimit` inside
/// the retry layer at 97 % of the share, which needs no refusal to find it (the README's
/// alternative to `with_known_rate` for a limit on the whole service), on HAProxy (a
/// limiter that reports nothing and counts its refusals). 8 processes used 94.4–96.6 %
/// (`LIMITERS_TOLD_SHARE=0.97 limiters -- fleet haproxy --stack told`); this test's
/// fleets 92.4–96.4 %, 0–12 refused, Jain's index ≥ 0.995 (10 fleets). At 110 % of the
/// share it fails: 50–56 % used, a third of the attempts refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs haproxy: .ci/run, or see CONTRIBUTING.md"]
async fn tower_rate_limit_told_its_share_uses_haproxy_without_learning_it() {
    told_its_share_within(|counts, _, spacing| limiters::client::at_known_share(counts, spacing))
        .await;
}

/// The same advice by the crate's own means: `PacingLayer` told the destination's rate
/// (`with_known_rate`, at 97 % of the share) inside `RetryLayer`, which paces that
/// destination only. 8 such layers in one process on HAProxy, from random phases, held
/// to the bounds of the test above: 95.2–96.8 % used, 0–7 refused, Jain's index 1.000
/// here. Told 110 % of the share this test failed (85.6–90.0 % used, 44–50 refused; 8
/// processes: 87.8–90.0 %, `LIMITERS_TOLD_SHARE=1.1 limiters -- fleet haproxy --stack
/// told-pacing`): the pace still eases off after refusals, where tower's `RateLimit`
/// used 49.0–49.6 % (`--stack told`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs haproxy: .ci/run, or see CONTRIBUTING.md"]
async fn pacing_told_its_share_uses_haproxy_without_learning_it() {
    told_its_share_within(limiters::client::at_known_rate).await;
}

// ---- Issue #31: fleets sharing their pacing in a real redis-server, in short form: 8
// ---- layers in one process, each its own `PacingLayer` and Redis client, so that they
// ---- share nothing but Redis (`limiters -- redis-fleet` runs 8 processes). The names
// ---- avoid "fleet": `.ci/run` skips that word, and runs these. The targets not met today
// ---- have it, and are run by hand.

/// Clients of `stack` keeping their pacing in `redis`, under a prefix of the limiter's URL:
/// the 8 clients of one fleet share it, the next fleet (a new limiter) starts afresh.
fn in_redis(redis: &RedisServer, stack: Stack) -> impl Fn(&Counts, &str) -> HttpClient + use<> {
    let server = redis.url();
    move |counts, url| {
        let run = format!("test-{}-{url}", std::process::id());
        stack.build_shared(counts, url, &SharedPacing::new(server.clone(), &run))
    }
}

/// 8 layers of `stack` sharing their pacing in Redis on `kind` for `seconds`, held to
/// `bounds` by the median of up to three fleets.
async fn shared_in_redis_within(kind: Kind, stack: Stack, seconds: u64, bounds: Bounds) {
    let _alone = one_at_a_time().await;
    let redis = RedisServer::start().await;
    let client = in_redis(&redis, stack);
    fleets_within(kind, seconds, bounds, client, Duration::ZERO).await;
}

/// tower_governor, learned by one controller in Redis: issue #31's targets (the test
/// below) were met by the median of three fleets here, 8 processes used 101 % with
/// 1.8–2.4 % refused, Jain's index 0.999. Held with margin for CI; Jain's index checks the
/// sharing itself: 8 independent layers score 0.74–0.88, and refuse 16–19 %.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: .ci/run, or see CONTRIBUTING.md"]
async fn shared_pacing_in_redis_learns_the_governor_limit() {
    shared_in_redis_within(Kind::Governor, Stack::RetryPacingRedis, 10, LEARNED_IN_CI).await;
}

/// HAProxy (it counts refusals and reports nothing), learned by one controller in Redis:
/// 94.4–96.2 % used, 2.5–3.6 % refused, Jain's index 0.997–0.999 here (8 independent
/// layers: 74–79 %, 21–23 %). Held with margin for CI; issue #31's targets below.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and haproxy: .ci/run, or see CONTRIBUTING.md"]
async fn shared_pacing_in_redis_learns_the_haproxy_limit() {
    shared_in_redis_within(Kind::Haproxy, Stack::RetryPacingRedis, 10, LEARNED_IN_CI).await;
}

/// rate-limiter-flexible (a window opened by a request, its reset in whole Unix seconds),
/// learned by one controller in Redis: 85–99 % used, 0–0.6 % refused, Jain's index
/// 0.999 here. Without spreading a room once one ran out, one process took each window
/// whole (Jain 0.5–0.6). Held with margin for CI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and node: .ci/run, or see CONTRIBUTING.md"]
async fn shared_pacing_in_redis_learns_the_rate_limiter_flexible_limit() {
    let bounds = Bounds {
        used: 0.85,
        refused: 0.05,
        jain: 0.85,
    };
    shared_in_redis_within(Kind::Flexible, Stack::RetryPacingRedis, 10, bounds).await;
}

/// A fleet learning a limit in Redis, held with margin for CI (8 independent layers
/// refuse 16–19 %, Jain's index 0.74–0.88).
const LEARNED_IN_CI: Bounds = Bounds {
    used: 0.9,
    refused: 0.08,
    jain: 0.95,
};

/// A fleet told the limit once: issue #31's ≥ 98 % used and < 1 % refused, held at 95 %
/// used; it sets no fairness target, but the fleet's waiting line is held to learning's.
const TOLD_ONCE: Bounds = Bounds {
    used: 0.95,
    refused: 0.01,
    jain: 0.95,
};

/// Issue #31's targets for a fleet learning a limit in Redis: ≥ 95 % used, < 3 % refused,
/// Jain's index ≥ 0.95.
const LEARNED_IN_REDIS: Bounds = Bounds {
    used: 0.95,
    refused: 0.03,
    jain: 0.95,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server; issue #31's targets near the edge: 8 processes 1.8-2.4 % refused for < 3 % (limiters -- redis-fleet)"]
async fn redis_fleet_learns_the_governor_limit_to_the_targets() {
    let (kind, stack) = (Kind::Governor, Stack::RetryPacingRedis);
    shared_in_redis_within(kind, stack, 10, LEARNED_IN_REDIS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and haproxy; issue #31's targets at the edge: 8 layers 94.4-96.2 % used for >= 95 %, 2.5-3.6 % refused for < 3 % (limiters -- redis-fleet)"]
async fn redis_fleet_learns_the_haproxy_limit_to_the_targets() {
    let (kind, stack) = (Kind::Haproxy, Stack::RetryPacingRedis);
    shared_in_redis_within(kind, stack, 10, LEARNED_IN_REDIS).await;
}

/// The leaky bucket (it reports nothing, and counts no refusal), learned by one controller
/// in Redis: 8 processes used 101 % with 2.4–2.5 % refused, most in the first second
/// (`limiters -- redis-fleet leaky-bucket`). Held with margin for CI; issue #31's targets
/// below.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: .ci/run, or see CONTRIBUTING.md"]
async fn shared_pacing_in_redis_learns_the_leaky_bucket_limit() {
    shared_in_redis_within(
        Kind::LeakyBucket,
        Stack::RetryPacingRedis,
        10,
        LEARNED_IN_CI,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server; issue #31's targets near the edge: 8 processes 2.4-2.5 % refused for < 3 %, most refusals in the first second (limiters -- redis-fleet)"]
async fn redis_fleet_learns_the_leaky_bucket_limit_to_the_targets() {
    let (kind, stack) = (Kind::LeakyBucket, Stack::RetryPacingRedis);
    shared_in_redis_within(kind, stack, 10, LEARNED_IN_REDIS).await;
}

/// express-rate-limit counts requests as they arrive, in any order: a fleet learning its
/// limit in Redis meets issue #31's targets only if a report with more room is read as a
/// new window only when its send left after a report of the window. 100 % used, none
/// refused, Jain's index 0.977-0.994 here (8 independent layers: Jain 0.5-0.75, 19-22 %
/// refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and node: .ci/run, or see CONTRIBUTING.md"]
async fn shared_pacing_in_redis_learns_the_express_limit() {
    shared_in_redis_within(Kind::Express, Stack::RetryPacingRedis, 10, LEARNED_IN_REDIS).await;
}

/// express-rate-limit reports its quota (`RateLimit: r=...; t=1` all through its
/// one-second window): told 49 r/s once, the fleet uses it as on the other limiters, each
/// report bounding the window's end. Bounds as on HAProxy's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and node: .ci/run, or see CONTRIBUTING.md"]
async fn shared_pacing_in_redis_told_once_uses_the_express_limit() {
    shared_in_redis_within(Kind::Express, Stack::ToldRedis, 5, TOLD_ONCE).await;
}

/// The fleet told HAProxy's rate once (49 r/s for all 8 layers) uses it without a
/// refusal: 98.0 % used, none refused, Jain's index 0.997–0.998 here, as by 8 processes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server and haproxy: .ci/run, or see CONTRIBUTING.md"]
async fn shared_pacing_in_redis_told_once_uses_the_haproxy_limit() {
    shared_in_redis_within(Kind::Haproxy, Stack::ToldRedis, 5, TOLD_ONCE).await;
}

/// The fleet told the leaky bucket's rate once uses it without a refusal: 98.0 % used,
/// Jain's index 0.997–0.999 in 5 s fleets of 8 layers here; 8 processes 97.8–98.0 % in 10 s
/// (`limiters -- redis-fleet leaky-bucket --parts told`). Bounds as on HAProxy's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: .ci/run, or see CONTRIBUTING.md"]
async fn shared_pacing_in_redis_told_once_uses_the_leaky_bucket_limit() {
    shared_in_redis_within(Kind::LeakyBucket, Stack::ToldRedis, 5, TOLD_ONCE).await;
}

/// 8 layers learning tower_governor's limit in Redis for 6 s; Redis killed 2 s in and
/// started again (empty) 2 s later: each layer paces alone meanwhile, then rejoins.
async fn through_a_redis_restart() -> Fleet {
    let mut redis = RedisServer::start().await;
    let client = in_redis(&redis, Stack::RetryPacingRedis);
    let outage = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        redis.kill();
        tokio::time::sleep(Duration::from_secs(2)).await;
        redis.restart().await;
    };
    let (fleet, ()) = tokio::join!(fleet(Kind::Governor, 6, &client, Duration::ZERO, 1), outage);
    fleet
}

/// Issue #31's target, short form: through a Redis restart no request fails, neither with
/// an error (a pacing error, a timeout) nor with a final 429. 60 runs here: none failed,
/// 2.0-5.8 % of the attempts refused (the full form, `redis-fleet --parts faults`, over
/// 15 s: under 5 %), held under 10 %.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: .ci/run, or see CONTRIBUTING.md"]
async fn shared_pacing_in_redis_requests_outlive_a_redis_restart() {
    let _alone = one_at_a_time().await;
    let fleet = through_a_redis_restart().await;
    assert_eq!(fleet.errors, 0, "requests failed with an error");
    assert_eq!(fleet.failed, 0, "requests failed");
    assert!(
        (fleet.refused as f64) < 0.1 * fleet.attempts as f64,
        "{} of {} refused",
        fleet.refused,
        fleet.attempts
    );
}
