//! The crate against real rate limiters nobody here wrote: tower_governor (in process),
//! express-rate-limit (Node) and HAProxy's stick tables, each limiting at 50 r/s (see
//! `tests/support/limiters` for what each limiter is).
//!
//! Real time is unavoidable with external limiters: each case is small (60 requests, about
//! a second of the limit) and bounded by timeouts. The full-size measurements of the
//! targets are `examples/limiters.rs`; their figures are in `docs/BENCHMARKS.md`.
//!
//! Under CI (`CI=true`) a missing limiter (no `haproxy`, `npm ci` not run) fails the test;
//! elsewhere the test prints why it skips.

#[path = "support/limiters/mod.rs"]
mod limiters;

use http::StatusCode;
use http::header::RETRY_AFTER;
use limiters::client::{Counts, Stack};
use limiters::drive::{self, Summary};
use limiters::{Kind, RateLimit, start_or_skip};
use std::time::{Duration, SystemTime};

/// A request that has not ended after this has hung: fail rather than wait.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The limiter really refuses: a burst of 60 requests with no retry layer, 20 at a time,
/// gets 429s, each with a `Retry-After` the crate can read, and the limiter lets through
/// about its limit (a burst takes well under a second here: one window or bucket).
async fn refuses_a_burst(kind: Kind) {
    let Some(limiter) = start_or_skip(kind, RateLimit::TARGET).await else {
        return;
    };
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
        let res = task.await.unwrap().expect("within the timeout").expect("an answer");
        match res.status() {
            StatusCode::OK => ok += 1,
            StatusCode::TOO_MANY_REQUESTS => {
                refused += 1;
                let after = res.headers().get(RETRY_AFTER).expect("Retry-After on a 429");
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
                }
            }
            other => panic!("{}: unexpected {other}", kind.name()),
        }
    }
    assert_eq!(ok + refused, 60);
    assert!(refused >= 5, "{}: only {refused} of 60 refused", kind.name());
    assert!(
        (5..=55).contains(&ok),
        "{}: {ok} of 60 served at once, for a limit of 50 r/s",
        kind.name()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn governor_refuses_a_burst_with_retry_after() {
    refuses_a_burst(Kind::Governor).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn express_refuses_a_burst_with_retry_after() {
    refuses_a_burst(Kind::Express).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_refuses_a_burst_with_retry_after() {
    refuses_a_burst(Kind::Haproxy).await;
}

/// With the recommended stack (`RetryLayer` with `PacingLayer` inside), 60 GETs, 20 at a
/// time, all succeed, within a bound far from the 1 s the limit allows but far below what
/// a hung client would take.
async fn recommended_stack_completes(kind: Kind) -> Option<(Summary, limiters::client::Count)> {
    let limiter = start_or_skip(kind, RateLimit::TARGET).await?;
    let counts = Counts::default();
    let client = Stack::RetryPacing.build(&counts);
    let outcomes = drive::burst(client.clone(), &limiter.url("/items"), 60, 20, TIMEOUT).await;
    let summary = Summary::of(&outcomes);
    let count = counts.total();
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
    Some((summary, count))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn governor_recommended_stack_completes_a_burst() {
    recommended_stack_completes(Kind::Governor).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn express_recommended_stack_completes_a_burst() {
    recommended_stack_completes(Kind::Express).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_recommended_stack_completes_a_burst() {
    recommended_stack_completes(Kind::Haproxy).await;
}
