//! An outage that pacing reads as refusals (429, or 503 with `Retry-After`): while it
//! lasts, only probes reach the server, at each `Retry-After` or at most 2 s apart; once
//! one is served, the client is back to its full rate within 1 s, as #29 asks.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{quick_start, upstream};
use tokio::time::Instant;

const OUTAGE: Duration = Duration::from_secs(5);
/// After the outage: time to probe and recover, and a second to measure the full rate.
const AFTER: Duration = Duration::from_secs(4);
const BUCKET: Duration = Duration::from_millis(100);
/// Each worker's pause between requests: the full rate is 2,000 r/s.
const THINK: Duration = Duration::from_millis(10);

/// 20 workers send GETs, 10 ms apart, through the quick start's stack to a real server on
/// loopback answering `status` (and `retry_after`) for 5 s from `from` on, else 200: the
/// attempts during the outage, and the successes per 100 ms in the 3 s after it.
async fn outage(
    from: Duration,
    status: u16,
    retry_after: Option<(&'static str, &'static str)>,
) -> (usize, Vec<usize>) {
    let start = Instant::now();
    let end = from + OUTAGE;
    let down = move |at: Duration| from <= at && at < end;
    let (addr, arrivals) = upstream::serve(move |_, _| match down(start.elapsed()) {
        true => upstream::reply(status, retry_after.as_slice(), ""),
        false => upstream::reply(200, &[], ""),
    })
    .await;
    let client = quick_start::stack(true);
    let url = format!("http://{addr}/");
    let stop = Arc::new(AtomicBool::new(false));
    let done: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let workers: Vec<_> = (0..20)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            let (stop, done) = (stop.clone(), done.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    if quick_start::get_ok(&client, &url).await {
                        done.lock().unwrap().push(start.elapsed());
                    }
                    tokio::time::sleep(THINK).await;
                }
            })
        })
        .collect();
    tokio::time::sleep(end + AFTER).await;
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.abort();
    }
    let arrivals = arrivals.lock().unwrap();
    let during = arrivals.iter().filter(|arrival| down(arrival.at - start));
    let during = during.count();
    let mut buckets = vec![0; (AFTER.as_millis() / BUCKET.as_millis()) as usize];
    for at in done.lock().unwrap().iter().filter(|at| **at >= end) {
        let bucket = ((*at - end).as_millis() / BUCKET.as_millis()) as usize;
        if let Some(count) = buckets.get_mut(bucket) {
            *count += 1;
        }
    }
    (during, buckets)
}

#[tokio::test(start_paused = true)]
async fn after_an_outage_of_refusals_the_full_rate_is_back_within_a_second() {
    let asked = Some(("retry-after", "1"));
    let answers = [(429, asked), (429, None), (503, asked)];
    // From the first request (it starts over), and after a second served (it resumes).
    let cases = [0, 1].map(|from| answers.map(|answer| (from, answer)));
    for (from, (status, retry_after)) in cases.into_iter().flatten() {
        let (during, buckets) = outage(Duration::from_secs(from), status, retry_after).await;
        let case = format!("from {from} s: {status}, Retry-After {retry_after:?}");
        // Probes only, after the requests in flight as it began (the slow start's first
        // window, or the 20 workers'): a few a second.
        let in_flight = if from == 0 { 5 } else { 20 };
        assert!(
            during <= in_flight + 4 * 5,
            "{case}: {during} attempts during the outage"
        );
        // The last second's mean is the full rate; 90 % of it within 1 s of the end, or
        // of the next probe (at most 2 s apart) where no delay was asked.
        let full = buckets[buckets.len() - 10..].iter().sum::<usize>() / 10;
        let back = buckets.iter().position(|&n| n * 10 >= full * 9).unwrap();
        let probe = if retry_after.is_some() { 0 } else { 20 };
        assert!(full > 0 && back < 10 + probe, "{case}: {buckets:?}");
    }
}
