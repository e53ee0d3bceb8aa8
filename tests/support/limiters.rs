//! In-process rate limiters for the pacing tests: each counts what it passed and refused,
//! answers after 1 ms and reports its quota as a real one's headers would.

use super::time::{ms, secs};
use http::{Request, Response};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tower::Service;

/// What the limiter saw: answers by status.
#[derive(Clone, Default)]
pub struct Seen {
    pub ok: Arc<AtomicUsize>,
    pub refused: Arc<AtomicUsize>,
}

/// A fixed-window limiter as express-rate-limit runs one: `limit` requests per window of
/// 1 s, opened by the first request after the previous one ended, every answer carrying
/// `RateLimit: "w";r=<left>;t=<seconds to the window's end, rounded up>`; a refusal is a
/// 429 with `Retry-After`. Answers after 1 ms.
pub fn fixed_window(limit: usize, seen: &Seen) -> impl Limiter {
    limiter(seen, move |window: &mut Option<(Instant, usize)>, now| {
        let (start, hits) = match *window {
            Some((start, hits)) if now < start + secs(1) => (start, hits + 1),
            _ => (now, 1),
        };
        *window = Some((start, hits));
        let reset = (start + secs(1) - now).as_secs_f64().ceil() as u64;
        let left = limit.saturating_sub(hits);
        let mut headers = vec![("ratelimit", format!("\"w\";r={left};t={reset}"))];
        if hits > limit {
            headers.push(("retry-after", reset.to_string()));
        }
        (hits <= limit, headers)
    })
}

/// The services the limiters are.
pub trait Limiter:
    Service<Request<()>, Response = Response<()>, Error = Infallible, Future: Send>
    + Clone
    + Send
    + 'static
{
}

impl<S> Limiter for S where
    S: Service<Request<()>, Response = Response<()>, Error = Infallible, Future: Send>
        + Clone
        + Send
        + 'static
{
}

/// A limiter that answers after 1 ms: `decide` counts a request arriving `now` in its
/// state and says whether it passes (`200`, else `429`) and with what headers.
pub fn limiter<T, D>(seen: &Seen, decide: D) -> impl Limiter
where
    T: Default + Send + 'static,
    D: Fn(&mut T, Instant) -> (bool, Vec<(&'static str, String)>) + Clone + Send + 'static,
{
    limiter_away((ms(1), Duration::ZERO), seen, decide)
}

/// [`limiter`] with a request reaching it `there` after it is sent, and its answer coming
/// back `back` after.
pub fn limiter_away<T, D>(
    (there, back): (Duration, Duration),
    seen: &Seen,
    decide: D,
) -> impl Limiter
where
    T: Default + Send + 'static,
    D: Fn(&mut T, Instant) -> (bool, Vec<(&'static str, String)>) + Clone + Send + 'static,
{
    let state: Arc<Mutex<T>> = Arc::default();
    let seen = seen.clone();
    tower::service_fn(move |_: Request<()>| {
        let (state, seen, decide) = (state.clone(), seen.clone(), decide.clone());
        async move {
            tokio::time::sleep(there).await;
            let (passes, headers) = decide(&mut state.lock().unwrap(), Instant::now());
            let (count, status) = match passes {
                true => (&seen.ok, 200),
                false => (&seen.refused, 429),
            };
            count.fetch_add(1, Ordering::SeqCst);
            if !back.is_zero() {
                tokio::time::sleep(back).await;
            }
            let mut response = Response::builder().status(status);
            for (name, value) in headers {
                response = response.header(name, value);
            }
            Ok::<_, Infallible>(response.body(()).unwrap())
        }
    })
}
