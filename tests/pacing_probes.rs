//! A limiter whose window every request restarts, refused ones too (Flask-Limiter's
//! elastic expiry): only a request more than a window after the last one passes. Probes
//! that double past the window find it; probes at a fixed short delay would be refused for
//! good. The lab runs the real Flask-Limiter (`lab/tests/rate_limiters.rs`).

mod support;

use std::sync::Mutex;
use std::time::Duration;
use support::{quick_start, upstream};
use tokio::time::Instant;

const QUOTA: usize = 50;
const WINDOW: Duration = Duration::from_secs(1);

#[tokio::test(start_paused = true)]
async fn probes_outlast_a_window_that_each_refusal_restarts() {
    // A real server on loopback that lets 50 pass per window, a window each request
    // restarts; a bare 429 past that.
    let window = Mutex::new((0, None::<Instant>));
    let (addr, _) = upstream::serve(move |_, arrival| {
        let mut window = window.lock().unwrap();
        let (count, last) = &mut *window;
        if last.is_none_or(|last| arrival.at - last >= WINDOW) {
            *count = 0;
        }
        (*count, *last) = (*count + 1, Some(arrival.at));
        let status = if *count <= QUOTA { 200 } else { 429 };
        upstream::reply(status, &[], "")
    })
    .await;
    let client = quick_start::stack(true);
    let (ok, took) = quick_start::burst(&client, &format!("http://{addr}/"), 300).await;
    // 50 a window at most, then a second of silence: 11 s at best.
    assert_eq!(ok, 300, "{ok} of 300 succeeded in {took:?}");
    assert!(took < Duration::from_secs(30), "{took:?}");
}
