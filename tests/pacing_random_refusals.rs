//! A server that refuses a share of requests with a 429 at random, whatever the rate (a
//! flaky upstream, not a limiter): pacing must cost no more than the retry layer alone,
//! as #29's "never worse than no pacing" asks of row 2 (there with 503s, which pacing
//! ignores).

mod support;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Mutex;
use std::time::Duration;
use support::{quick_start, upstream};

/// 1000 GETs, 20 at a time, through the quick start's stack (or the retry layer alone) to a
/// real server on loopback that answers a share `p` of them 429 (seeded): how many
/// succeeded, and how long they took.
async fn burst(paced: bool, p: f64) -> (usize, Duration) {
    let rng = Mutex::new(SmallRng::seed_from_u64(7));
    let (addr, _) = upstream::serve(move |_, _| {
        let status = match rng.lock().unwrap().random_bool(p) {
            true => 429,
            false => 200,
        };
        upstream::reply(status, &[], "")
    })
    .await;
    let client = quick_start::stack(paced);
    quick_start::burst(&client, &format!("http://{addr}/"), 1000).await
}

/// Not met: each round's random refusal cuts the pace to 70 % of a delivery that the last
/// cut lowered, so the pace collapses. 5 % of 429s: 46.0 s against 1.9 s for the retry
/// layer alone; 20 %: 319 of 1000 succeed, in 85.9 s (waits past the longest fail), against
/// 998 in 7.9 s. One client cannot tell such refusals from a limit shared with others,
/// where slowing down is the fair answer; rules that let a random share pass raised the
/// refusals of a lone client at a token bucket.
#[tokio::test(start_paused = true)]
#[ignore = "not met: random 429s collapse the pace, as a limit shared with others would"]
async fn random_429s_cost_no_more_than_the_retry_layer_alone() {
    for p in [0.05, 0.2] {
        let (alone, alone_took) = burst(false, p).await;
        let (paced, paced_took) = burst(true, p).await;
        assert!(paced >= alone, "{p}: {paced} succeeded, {alone} alone");
        let limit = alone_took.mul_f64(1.1);
        assert!(
            paced_took <= limit,
            "{p}: {paced_took:?}, alone {alone_took:?}"
        );
    }
}
