//! Issue #29's rows 2 to 4 on virtual time, as `tower-backoff-peers`' `matrix` runs them on
//! real servers: the same answers (`tower_backoff_lab::matrix`), loads and measures, on the
//! loopback model's delays, for its two tower-backoff stacks. `matrix --record FILE` writes
//! the real runs they are compared with.

use super::calibration::Figure;
use super::limiter_models::loopback;
use super::{BoxError, Client, Req, Res, virtual_time};
use http::{Request, Response, StatusCode};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::{Instant, sleep};
use tower::{Layer, ServiceExt};
use tower_backoff::{ExponentialBackOff, PacingLayer, RetryLayer};
use tower_backoff_lab::limiters::client::Stack;
use tower_backoff_lab::limiters::leaky::{Level, Rate};
use tower_backoff_lab::matrix::{
    self, BURST, CONCURRENCY, FAILURE_SHARE, FULL, ID_HEADER, RATES, RECORDED_ROWS, RECORDED_STACKS,
};

/// Longest a request may take, as the matrix's loads allow.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// A row's server: each attempt's answer from its request number and the time since the
/// start; each attempt is logged (when it arrived, whether refused).
type Answer = Box<dyn FnMut(u64, Duration) -> Res + Send>;

/// What a row's load leaves: each request's end and whether it succeeded, and each
/// attempt's arrival and whether it was refused.
struct Run {
    done: Vec<(Duration, bool)>,
    attempts: Vec<(Duration, bool)>,
}

/// Rows 2 to 4, each stack on `seeds` seeds from `first`: their figures, named as
/// `matrix --record` names them.
pub fn run(first: u64, seeds: u64, out: &mut String) -> Vec<Figure> {
    let mut figures = Vec::new();
    let [row2, row3, row4] = RECORDED_ROWS;
    for stack in RECORDED_STACKS {
        let runs: Vec<[f64; 7]> = (first..first + seeds)
            .map(|seed| virtual_time(async move { rows(stack, seed).await }))
            .collect();
        let cell = |k: usize| runs.iter().map(|r| r[k]).collect::<Vec<f64>>();
        let named = [
            (row2.0, row2.1, "ok", "row 2 completed"),
            (row2.0, row2.1, "time", "row 2 time (s)"),
            (row3.0, row3.1, "recovery", "row 3 recovery (s)"),
            (row4.0, row4.1, "fall", "row 4 follows 100→25 (s)"),
            (row4.0, row4.1, "rise", "row 4 follows 25→100 (s)"),
            (row4.0, row4.1, "refused", "row 4 refused (%)"),
            (row4.0, row4.1, "ok", "row 4 completed"),
        ];
        for (k, (target, limiter, name, what)) in named.into_iter().enumerate() {
            figures.push(Figure {
                target,
                limiter,
                stack: stack.name(),
                name,
                what,
                values: cell(k),
            });
        }
    }
    out.push_str("### Issue #29's rows 2 to 4, modelled (the matrix's full sizes)\n\n");
    out.push_str("| stack | figure | min–max over the seeds |\n|---|---|---|\n");
    for f in &figures {
        let lo = f.values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = f.values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        out.push_str(&format!("| {} | {} | {lo:.2}–{hi:.2} |\n", f.stack, f.what));
    }
    out.push('\n');
    figures
}

/// One seed of rows 2 to 4 for `stack`: completed, time, recovery, fall, rise, refused,
/// completed in row 4.
async fn rows(stack: Stack, seed: u64) -> [f64; 7] {
    let (ok, time) = random_failures(stack, seed).await;
    let recovery = outage(stack, seed).await;
    let [fall, rise, refused, done] = changing_limit(stack, seed).await;
    [ok, time, recovery, fall, rise, refused, done]
}

/// Row 2: completed, and the time the last request ended.
async fn random_failures(stack: Stack, seed: u64) -> (f64, f64) {
    let mut tries: HashMap<u64, u32> = HashMap::new();
    let answer = move |id: u64, _: Duration| {
        let attempt = tries.entry(id).or_default();
        *attempt += 1;
        match matrix::fails(FAILURE_SHARE, seed, id, *attempt) {
            true => reply(StatusCode::SERVICE_UNAVAILABLE),
            false => reply(StatusCode::OK),
        }
    };
    let load = Load::Fixed(FULL.failure_requests);
    let run = load_on(stack, seed, Box::new(answer), load).await;
    let ok = run.done.iter().filter(|d| d.1).count() as f64;
    let time = run.done.iter().map(|d| d.0.as_secs_f64());
    (ok, time.fold(0.0, f64::max))
}

/// Row 3: seconds from the outage's end until the full rate.
async fn outage(stack: Stack, seed: u64) -> f64 {
    let outage = FULL.outage;
    let answer = move |_: u64, t: Duration| match t < outage {
        true => reply(StatusCode::SERVICE_UNAVAILABLE),
        false => reply(StatusCode::OK),
    };
    let load = Load::Timed(FULL.outage_window);
    let run = load_on(stack, seed, Box::new(answer), load).await;
    let ok_ends: Vec<Duration> = run.done.iter().filter(|d| d.1).map(|d| d.0).collect();
    matrix::recovery(&ok_ends, &FULL).0
}

/// Row 4 on the lab's leaky bucket: seconds to follow the fall and the rise, the share
/// refused (%), and the requests completed.
async fn changing_limit(stack: Stack, seed: u64) -> [f64; 4] {
    let phase = FULL.phase;
    let rate: Rate = Arc::new(move |t: Duration| matrix::rate_at(t, phase));
    let origin = Instant::now().into_std();
    let mut level = Level::new(BURST, origin);
    let answer = move |_: u64, _: Duration| {
        if level.admit(Instant::now().into_std(), origin, &rate, BURST) {
            return reply(StatusCode::OK);
        }
        let mut res = reply(StatusCode::TOO_MANY_REQUESTS);
        let after = http::HeaderValue::from_static("1");
        res.headers_mut().insert(http::header::RETRY_AFTER, after);
        res
    };
    let run = load_on(stack, seed, Box::new(answer), Load::Timed(phase * 3)).await;
    let sends: Vec<Duration> = run.attempts.iter().map(|a| a.0).collect();
    let fall = matrix::follows(&sends, (phase, phase), RATES[0], RATES[1]);
    let rise = matrix::follows(&sends, (phase * 2, phase), RATES[1], RATES[2]);
    let refused = run.attempts.iter().filter(|a| a.1).count() as f64;
    let refused = 100.0 * refused / run.attempts.len().max(1) as f64;
    let done = run.done.iter().filter(|d| d.1).count() as f64;
    [fall, rise, refused, done]
}

/// A row's load: `n` requests, or requests back to back until a window has passed.
#[derive(Clone, Copy)]
enum Load {
    Fixed(u64),
    Timed(Duration),
}

/// `CONCURRENCY` workers sending GETs through `stack` to a server answering `answer`, on
/// the loopback model's delays, as the matrix's `fixed_load` and `timed_load` do.
async fn load_on(stack: Stack, seed: u64, answer: Answer, load: Load) -> Run {
    let start = Instant::now();
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let server = server(answer, attempts.clone(), start, seed);
    let retry = RetryLayer::new(ExponentialBackOff::default().with_seed(seed)).with_seed(seed);
    let client: Client = if stack == Stack::Retry {
        tower::util::BoxCloneService::new(retry.layer(server).map_err(BoxError::from))
    } else {
        let paced = retry.paced(PacingLayer::new());
        tower::util::BoxCloneService::new(paced.layer(server).map_err(BoxError::from))
    };
    let next = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (client, next) = (client.clone(), next.clone());
            tokio::spawn(async move {
                let mut done = Vec::new();
                loop {
                    let id = next.fetch_add(1, Ordering::Relaxed);
                    let more = match load {
                        Load::Fixed(n) => id < n,
                        Load::Timed(window) => start.elapsed() < window,
                    };
                    if !more {
                        return done;
                    }
                    let req = Request::get("http://matrix.example/")
                        .header(ID_HEADER, id)
                        .body(())
                        .expect("request");
                    let res = tokio::time::timeout(REQUEST_TIMEOUT, client.clone().oneshot(req));
                    let ok = matches!(res.await, Ok(Ok(r)) if r.status() == StatusCode::OK);
                    done.push((start.elapsed(), ok));
                }
            })
        })
        .collect();
    let mut done = Vec::new();
    for worker in workers {
        done.extend(worker.await.expect("a worker"));
    }
    let attempts = std::mem::take(&mut *attempts.lock().unwrap());
    Run { done, attempts }
}

/// The server: one loopback delay each way around `answer`, every attempt logged.
fn server(
    answer: Answer,
    log: Arc<Mutex<Vec<(Duration, bool)>>>,
    start: Instant,
    seed: u64,
) -> tower::util::BoxCloneService<Req, Res, BoxError> {
    let net = Arc::new(Mutex::new(loopback(seed)));
    let answer = Arc::new(Mutex::new(answer));
    tower::util::BoxCloneService::new(tower::service_fn(move |req: Req| {
        let (net, answer, log) = (net.clone(), answer.clone(), log.clone());
        async move {
            let there = net.lock().unwrap().delay();
            sleep(there).await;
            let id = req
                .headers()
                .get(ID_HEADER)
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(0);
            let res = (answer.lock().unwrap())(id, start.elapsed());
            let refused = res.status() != StatusCode::OK;
            log.lock().unwrap().push((start.elapsed(), refused));
            let back = net.lock().unwrap().delay();
            sleep(back).await;
            Ok::<_, BoxError>(res)
        }
    }))
}

fn reply(status: StatusCode) -> Res {
    let mut res = Response::new(());
    *res.status_mut() = status;
    res
}

/// Issue #29's rows 2 to 4, every seed, for `--check`: the quick start completes as many
/// requests as the retry layer alone in at most 1.1× its time (row 2), is back to its full
/// rate within 1 s of the recovery (row 3), and follows a fall within 2 s with under 5 %
/// refused (row 4). A rise takes longer (`docs/BENCHMARKS.md` says why).
pub fn check(figures: &[Figure], missed: &mut Vec<String>) {
    let values = |stack: &str, target: &str, name: &str| -> Vec<f64> {
        let found = figures
            .iter()
            .find(|f| (f.stack, f.target, f.name) == (stack, target, name));
        found.map_or_else(Vec::new, |f| f.values.clone())
    };
    let [(row2, _), (row3, _), (row4, _)] = RECORDED_ROWS;
    let (quick_start, alone) = (Stack::RetryPacing.name(), Stack::Retry.name());
    let paced = |target, name| values(quick_start, target, name);
    let pairs = |name| paced(row2, name).into_iter().zip(values(alone, row2, name));
    let mut miss = |what: &str, worst: f64| {
        missed.push(format!(
            "matrix model / {quick_start}: {what} (worst seed: {worst:.2})"
        ));
    };
    if let Some((p, a)) = pairs("ok").find(|(p, a)| p < a) {
        miss(&format!("row 2: as many done as alone ({a})"), p);
    }
    if let Some((p, a)) = pairs("time").find(|(p, a)| *p > 1.1 * a) {
        miss(&format!("row 2: within 1.1× alone's time ({a:.2} s)"), p);
    }
    let bounds = [
        (row3, "recovery", 1.0, "row 3: full rate within 1 s"),
        (row4, "fall", 2.0, "row 4: follows a fall within 2 s"),
        (row4, "refused", 5.0, "row 4: at most 5 % refused"),
    ];
    for (target, name, bound, what) in bounds {
        let worst = paced(target, name).into_iter().fold(0.0, f64::max);
        if worst > bound {
            miss(what, worst);
        }
    }
}
