//! Simulations of the real retry layer against simulated servers, on virtual time.
//!
//! ```text
//! cargo run --release -p tower-backoff-lab --bin simulate -- all            # every experiment, charts into docs/
//! cargo run --release -p tower-backoff-lab --bin simulate -- all --short    # a quick run for CI (no charts)
//! cargo run --release -p tower-backoff-lab --bin simulate -- contention     # or: overload, ratelimit, limiters, delays
//! cargo run --release -p tower-backoff-lab --bin simulate -- overload --timeline   # + when each client sends
//! cargo run --release -p tower-backoff-lab --bin simulate -- limiters --seeds 8      # ranges over 8 seeds
//! cargo run --release -p tower-backoff-lab --bin simulate -- limiters --timeline     # + each fleet, client by client
//! cargo run --release -p tower-backoff-lab --bin simulate -- limiters --seconds 60   # target 3's fleets for 60 s
//! LIMITERS_LATENCY_MS=50 cargo run --release -p tower-backoff-lab --bin simulate -- limiters  # a server 50 ms away
//! cargo run -p tower-backoff-lab --bin simulate -- all --check --seeds 8   # CI: fails if a target met today is missed
//! ```
//!
//! Every experiment runs the crate's real `RetryLayer` (tower's `Retry` with the crate's
//! `RetryPolicy`) over a `tower::service_fn` server, on a current-thread tokio runtime
//! whose clock is paused: sleeps end as soon as every task waits, so hours of simulated
//! traffic take seconds, and the results do not depend on the machine. Network delays and
//! arrivals come from `SmallRng`s seeded with the run's seed, and every randomized strategy
//! is seeded with `with_seed`, so a run is reproducible (the short mode checks it).
//!
//! The experiments, their models and their results are described in `docs/BENCHMARKS.md`.

use http::{Request, Response, StatusCode};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::error::Error;
use std::fmt::Write as _;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::{Instant, sleep};
use tower::util::BoxCloneService;
use tower::{Layer, ServiceExt};
use tower_backoff::backoff::{
    DecorrelatedJitter, EqualJitter, FullJitter, Schedule, Table, ZeroBackOff, aws,
};
use tower_backoff::budget::{RetryBudget, RetryThrottle};
use tower_backoff::{BackOff, ExponentialBackOff, PacingLayer, RetryLayer, RetrySettings};

type BoxError = Box<dyn Error + Send + Sync>;
type Req = Request<()>;
type Res = Response<()>;
type Client = BoxCloneService<Req, Res, BoxError>;

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

/// `--timeline`: print, for every overload run, the server's attempts and successes per
/// half second, and for every fleet of the recommended stack on a modelled limiter its
/// served/refused per 250 ms, client by client (to stderr), to see *when* a client sends.
pub static TIMELINE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

// ---------------------------------------------------------------------------------------
// Shared machinery
// ---------------------------------------------------------------------------------------

/// Runs `f` on a current-thread runtime with a paused clock (virtual time).
fn virtual_time<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime")
        .block_on(f)
}

/// One-way network delay: |N(mean, sd)|, from a seeded generator.
struct Net {
    rng: SmallRng,
    mean: f64,
    sd: f64,
}

impl Net {
    /// |N(10 ms, σ 2 ms)|, the delay of the AWS blog's simulation.
    fn blog(seed: u64) -> Self {
        Self {
            rng: SmallRng::seed_from_u64(seed),
            mean: 0.010,
            sd: 0.002,
        }
    }

    fn delay(&mut self) -> Duration {
        // Box–Muller: one standard normal draw from two uniforms.
        let u1: f64 = self.rng.random::<f64>().max(f64::MIN_POSITIVE);
        let u2: f64 = self.rng.random();
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        Duration::from_secs_f64((self.mean + self.sd * z).abs())
    }
}

fn response(status: StatusCode, retry_after: Option<u64>) -> Res {
    let mut b = Response::builder().status(status);
    if let Some(secs) = retry_after {
        b = b.header(http::header::RETRY_AFTER, secs);
    }
    b.body(()).expect("response")
}

/// A server's answers, `(seconds from the start, served)`, in bins of `bin` seconds:
/// "served/refused" per bin, for `--timeline`.
fn timeline(log: &[(f64, bool)], bin: f64) -> String {
    let end = log.iter().map(|l| l.0).fold(0.0, f64::max);
    let mut bins = vec![(0, 0); (end / bin) as usize + 1];
    for &(t, served) in log {
        let b = &mut bins[(t / bin) as usize];
        if served {
            b.0 += 1;
        } else {
            b.1 += 1;
        }
    }
    let bins: Vec<String> = bins.iter().map(|(s, r)| format!("{s}/{r}")).collect();
    bins.join(" ")
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn secs(t: Instant, start: Instant) -> f64 {
    t.saturating_duration_since(start).as_secs_f64()
}

/// Wraps `server` in the real retry layer and boxes it.
fn layered<B, S>(layer: RetryLayer<B>, server: S) -> Client
where
    B: BackOff + Clone + Send + Sync + 'static,
    S: tower::Service<Req, Response = Res, Error = BoxError> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    BoxCloneService::new(layer.layer(server).map_err(BoxError::from))
}

// ---------------------------------------------------------------------------------------
// 1. Contention (AWS Architecture Blog, "Exponential Backoff And Jitter", 2015)
// ---------------------------------------------------------------------------------------

/// Optimistic concurrency on one record. An attempt is a read followed by a conditional
/// write: the read reaches the server after one network delay and returns the record's
/// version; the write, sent when the read's answer is back, commits only if the version
/// is still the same and otherwise answers 409 Conflict. The simulated service does the
/// whole read-then-write exchange (four network delays) in one call, so that the real
/// layer, with 409 added to its retried statuses, drives the experiment unchanged: a
/// retry is a fresh read and write, as in the blog's simulation.
#[derive(Default)]
struct Record {
    version: u64,
    /// Conditional writes received (the blog's "calls"; every one follows a read).
    calls: u64,
}

struct ContentionRun {
    calls: u64,
    completion: f64,
}

const BLOG_BASE: Duration = Duration::from_millis(5);
const BLOG_CAP: Duration = Duration::from_secs(2);

/// The strategies of the blog post, plus the crate's default exponential.
const CONTENTION_STRATEGIES: [&str; 7] = [
    "no backoff",
    "exponential, no jitter",
    "full jitter",
    "equal jitter",
    "decorrelated jitter",
    "ExponentialBackOff 5 ms / 2 s",
    "ExponentialBackOff::default()",
];

fn contention(strategy: &str, clients: u32, seed: u64) -> ContentionRun {
    match strategy {
        "no backoff" => contention_with(ZeroBackOff, clients, seed),
        "exponential, no jitter" => contention_with(
            aws::Exponential::new(BLOG_BASE, BLOG_CAP)
                .unwrap()
                .into_backoff(),
            clients,
            seed,
        ),
        "full jitter" => contention_with(
            FullJitter::new(BLOG_BASE, BLOG_CAP)
                .unwrap()
                .into_backoff()
                .with_seed(seed),
            clients,
            seed,
        ),
        "equal jitter" => contention_with(
            EqualJitter::new(BLOG_BASE, BLOG_CAP)
                .unwrap()
                .into_backoff()
                .with_seed(seed),
            clients,
            seed,
        ),
        "decorrelated jitter" => contention_with(
            DecorrelatedJitter::new(BLOG_BASE, BLOG_CAP)
                .unwrap()
                .with_seed(seed),
            clients,
            seed,
        ),
        "ExponentialBackOff 5 ms / 2 s" => contention_with(
            ExponentialBackOff::builder()
                .with_initial_interval(BLOG_BASE)
                .with_max_interval(BLOG_CAP)
                .with_max_elapsed(None)
                .with_seed(seed)
                .build()
                .unwrap(),
            clients,
            seed,
        ),
        "ExponentialBackOff::default()" => {
            contention_with(ExponentialBackOff::default().with_seed(seed), clients, seed)
        }
        other => unreachable!("unknown strategy {other}"),
    }
}

fn contention_with<B>(backoff: B, clients: u32, seed: u64) -> ContentionRun
where
    B: BackOff + Clone + Send + Sync + 'static,
{
    virtual_time(async move {
        let start = Instant::now();
        let record = Arc::new(Mutex::new(Record::default()));
        let net = Arc::new(Mutex::new(Net::blog(seed)));
        let server = {
            let (record, net) = (record.clone(), net.clone());
            tower::service_fn(move |_: Req| {
                let (record, net) = (record.clone(), net.clone());
                async move {
                    // The read: there, read, back.
                    let there = net.lock().unwrap().delay();
                    sleep(there).await;
                    let read = record.lock().unwrap().version;
                    let (back, there) = {
                        let mut net = net.lock().unwrap();
                        (net.delay(), net.delay())
                    };
                    sleep(back + there).await;
                    // The conditional write.
                    let status = {
                        let mut r = record.lock().unwrap();
                        r.calls += 1;
                        if r.version == read {
                            r.version += 1;
                            StatusCode::OK
                        } else {
                            StatusCode::CONFLICT
                        }
                    };
                    let back = net.lock().unwrap().delay();
                    sleep(back).await;
                    Ok::<_, BoxError>(response(status, None))
                }
            })
        };
        // Every client completes its write: no attempt limit, no shared budget (the
        // experiment compares backoff strategies alone).
        let settings = RetrySettings::new()
            .with_status(StatusCode::CONFLICT)
            .unwrap()
            .with_max_attempts(u32::MAX)
            .unwrap()
            .with_max_elapsed(Duration::from_secs(24 * 3600))
            .unwrap();
        let client = layered(
            RetryLayer::new(backoff)
                .with_seed(seed)
                .with_settings(settings)
                .without_retry_budget(),
            server,
        );
        let tasks: Vec<_> = (0..clients)
            .map(|id| {
                let client = client.clone();
                let req = Request::put(format!("http://db.example/record?client={id}"))
                    .body(())
                    .unwrap();
                tokio::spawn(async move {
                    let res = client.oneshot(req).await.expect("no transport errors");
                    assert_eq!(
                        res.status(),
                        StatusCode::OK,
                        "every client commits ({:?})",
                        res.extensions().get::<tower_backoff::RetryStats>()
                    );
                    Instant::now()
                })
            })
            .collect();
        let mut last = start;
        for t in tasks {
            last = last.max(t.await.unwrap());
        }
        let calls = record.lock().unwrap().calls;
        assert_eq!(record.lock().unwrap().version, u64::from(clients));
        ContentionRun {
            calls,
            completion: secs(last, start),
        }
    })
}

struct ContentionTable {
    ns: Vec<u32>,
    /// [strategy][n] → (mean calls, mean completion in seconds)
    cells: Vec<Vec<(f64, f64)>>,
}

fn run_contention(short: bool, seeds: u64, out: &mut String) -> ContentionTable {
    let ns: Vec<u32> = if short {
        vec![10, 50, 100]
    } else {
        (1..=10).map(|k| k * 10).collect()
    };
    let mut cells = Vec::new();
    for strategy in CONTENTION_STRATEGIES {
        let mut row = Vec::new();
        for &n in &ns {
            let (mut calls, mut time) = (0.0, 0.0);
            for seed in 0..seeds {
                let r = contention(strategy, n, seed);
                calls += r.calls as f64;
                time += r.completion;
            }
            row.push((calls / seeds as f64, time / seeds as f64));
        }
        cells.push(row);
    }
    let table = ContentionTable { ns, cells };

    let _ = writeln!(
        out,
        "### Contention: total calls (mean of {seeds} seed{})\n",
        if seeds == 1 { "" } else { "s" }
    );
    contention_markdown(&table, out, |c| format!("{:.0}", c.0));
    let _ = writeln!(
        out,
        "\n### Contention: completion time, ms (mean of {seeds} seed{})\n",
        if seeds == 1 { "" } else { "s" }
    );
    contention_markdown(&table, out, |c| format!("{:.0}", c.1 * 1000.0));
    let _ = writeln!(out);
    contention_findings(&table, out);
    table
}

fn contention_markdown(
    t: &ContentionTable,
    out: &mut String,
    cell: impl Fn(&(f64, f64)) -> String,
) {
    let _ = write!(out, "| strategy |");
    for n in &t.ns {
        let _ = write!(out, " N={n} |");
    }
    let _ = write!(out, "\n|---|");
    for _ in &t.ns {
        let _ = write!(out, "---:|");
    }
    let _ = writeln!(out);
    for (s, row) in CONTENTION_STRATEGIES.iter().zip(&t.cells) {
        let _ = write!(out, "| {s} |");
        for c in row {
            let _ = write!(out, " {} |", cell(c));
        }
        let _ = writeln!(out);
    }
}

/// Checks the blog's three findings against the data and says which hold.
fn contention_findings(t: &ContentionTable, out: &mut String) {
    let last = t.ns.len() - 1;
    let idx = |name: &str| {
        CONTENTION_STRATEGIES
            .iter()
            .position(|s| *s == name)
            .unwrap()
    };
    // 1. Work and completion time grow with N, for every strategy (first vs last N).
    let grows = t
        .cells
        .iter()
        .all(|row| row[last].0 > row[0].0 && row[last].1 > row[0].1);
    // 2. Exponential without jitter is the clear loser among backoff strategies: the
    //    longest completion time and the most calls at the largest N.
    let no_jitter = idx("exponential, no jitter");
    let backoffs = [
        no_jitter,
        idx("full jitter"),
        idx("equal jitter"),
        idx("decorrelated jitter"),
    ];
    let loser = backoffs.iter().all(|&i| {
        i == no_jitter
            || (t.cells[no_jitter][last].0 > t.cells[i][last].0
                && t.cells[no_jitter][last].1 > t.cells[i][last].1)
    });
    // 3. Full jitter does the least work: fewest calls of the blog's five strategies (same
    //    base and cap) at the largest N.
    let full = idx("full jitter");
    let least: Vec<&str> = {
        let blog = &t.cells[..5];
        let min = blog.iter().map(|r| r[last].0).fold(f64::INFINITY, f64::min);
        CONTENTION_STRATEGIES[..5]
            .iter()
            .zip(blog)
            .filter(|(_, r)| r[last].0 == min)
            .map(|(s, _)| *s)
            .collect()
    };
    let verdict = |b: bool| if b { "holds" } else { "does NOT hold" };
    let n = t.ns[last];
    let _ = writeln!(
        out,
        "Findings of the blog post, checked on this data (N={} vs N={n}):\n",
        t.ns[0]
    );
    let _ = writeln!(
        out,
        "- completion time and work grow with N, for every strategy: {}",
        verdict(grows)
    );
    let _ = writeln!(
        out,
        "- exponential without jitter is the clear loser (most calls and longest completion \
         among the backoff strategies at N={n}): {}",
        verdict(loser)
    );
    let _ = writeln!(
        out,
        "- full jitter does the least work (fewest calls of the blog's five strategies at N={n}): {} (fewest: {})",
        verdict(least.contains(&CONTENTION_STRATEGIES[full])),
        least.join(", ")
    );
}

// ---------------------------------------------------------------------------------------
// 2. Overload and outage
// ---------------------------------------------------------------------------------------

/// A server with fixed capacity: a token bucket of `capacity` work units per second
/// (burst: 50 ms worth). Serving a request costs one unit; shedding one with
/// `503 + Retry-After: 1` costs [`SHED_COST`] of a unit (parsing and refusing is not free),
/// which may put the bucket in debt (down to one second's worth). During the outage every
/// request gets a bare 503 (nothing behind the load balancer) at no cost.
struct Capacity {
    capacity: f64,
    burst: f64,
    tokens: f64,
    refilled: Instant,
    outage: Option<(Instant, Instant)>,
    /// (arrival time in s, served?)
    log: Vec<(f64, bool)>,
    start: Instant,
}

/// What shedding one request costs, as a fraction of serving one.
const SHED_COST: f64 = 0.1;

impl Capacity {
    fn admit(&mut self) -> Res {
        let now = Instant::now();
        let t = secs(now, self.start);
        if let Some((from, to)) = self.outage
            && now >= from
            && now < to
        {
            self.log.push((t, false));
            return response(StatusCode::SERVICE_UNAVAILABLE, None);
        }
        let dt = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.refilled = now;
        self.tokens = (self.tokens + dt * self.capacity).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            self.log.push((t, true));
            response(StatusCode::OK, None)
        } else {
            self.tokens = (self.tokens - SHED_COST).max(-self.capacity);
            self.log.push((t, false));
            response(StatusCode::SERVICE_UNAVAILABLE, Some(1))
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Variant {
    NoRetry,
    Naive,
    Budget,
    BudgetFinagle,
    BudgetThrottle,
    BudgetPacing,
    BudgetPacingFine,
    Patient,
    PatientPacing,
    /// No shared budget, pacing inside (a stack of the real-limiter runs).
    NaivePacing,
    /// A reference of the real-limiter runs, not the crate's pacing: the README's stack for
    /// a known share, tower's `RateLimit` inside at a fleet client's share of the limit
    /// (`told`).
    Told,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::NoRetry => "no retry",
            Variant::Naive => "naive retry (3 attempts, no budget)",
            Variant::Budget => "RetryLayer, 3 attempts, default retry quota",
            Variant::BudgetFinagle => "RetryLayer, Finagle's budget (10 s / 10/s / 20 %)",
            Variant::BudgetThrottle => "RetryLayer default + RetryThrottle (10 tokens, 0.1)",
            Variant::BudgetPacing => "RetryLayer default + PacingLayer::new() inside",
            Variant::BudgetPacingFine => "RetryLayer default + PacingLayer, first probe 1 ms",
            Variant::Patient => "RetryLayer, 50 attempts within 60 s, no budget",
            Variant::PatientPacing => {
                "RetryLayer, 50 attempts within 60 s, no budget + PacingLayer::new() inside"
            }
            Variant::NaivePacing => {
                "naive retry (3 attempts, no budget) + PacingLayer::new() inside"
            }
            Variant::Told => "retry (3 attempts, budget) + tower's RateLimit inside",
        }
    }
}

const VARIANTS: [Variant; 7] = [
    Variant::NoRetry,
    Variant::Naive,
    Variant::Budget,
    Variant::BudgetFinagle,
    Variant::BudgetThrottle,
    Variant::BudgetPacing,
    Variant::BudgetPacingFine,
];

/// The default pacing layer but for its first probing delay.
fn pacing(first_probe: Duration) -> PacingLayer {
    PacingLayer::builder()
        .with_probe(first_probe, PacingLayer::DEFAULT_MAX_PROBE.max(first_probe))
        .build()
        .unwrap()
}

/// The client under test, in front of `server`.
fn client<S>(variant: Variant, server: S, seed: u64) -> (Client, Option<PacingLayer>)
where
    S: tower::Service<Req, Response = Res, Error = BoxError> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    // Seeded, the spread of server delays included: a run is reproducible.
    let retry = RetryLayer::new(ExponentialBackOff::default().with_seed(seed)).with_seed(seed);
    let three = RetrySettings::new().with_max_attempts(3).unwrap();
    let patient = RetrySettings::new()
        .with_max_attempts(50)
        .unwrap()
        .with_max_elapsed(60 * SEC)
        .unwrap();
    let paced = pacing(PacingLayer::DEFAULT_FIRST_PROBE);
    let fine = pacing(MS);
    let client = match variant {
        Variant::NoRetry => BoxCloneService::new(server),
        Variant::Naive => layered(retry.with_settings(three).without_retry_budget(), server),
        Variant::Budget => layered(retry.with_settings(three), server),
        Variant::BudgetFinagle => layered(
            retry
                .with_settings(three)
                .with_retry_budget(RetryBudget::new(10 * SEC, 10, 0.2).unwrap()),
            server,
        ),
        Variant::BudgetThrottle => layered(
            retry
                .with_settings(three)
                .with_retry_throttle(RetryThrottle::default()),
            server,
        ),
        // Pacing inside the retry layer (the recommended place): every attempt is paced.
        Variant::BudgetPacing => BoxCloneService::new(
            tower::ServiceBuilder::new()
                .map_err(BoxError::from)
                .layer(retry.with_settings(three))
                .layer(paced.clone())
                .service(server),
        ),
        Variant::BudgetPacingFine => BoxCloneService::new(
            tower::ServiceBuilder::new()
                .map_err(BoxError::from)
                .layer(retry.with_settings(three))
                .layer(fine.clone())
                .service(server),
        ),
        Variant::Patient => layered(retry.with_settings(patient).without_retry_budget(), server),
        Variant::NaivePacing => BoxCloneService::new(
            tower::ServiceBuilder::new()
                .map_err(BoxError::from)
                .layer(retry.with_settings(three).without_retry_budget())
                .layer(paced.clone())
                .service(server),
        ),
        Variant::PatientPacing => BoxCloneService::new(
            tower::ServiceBuilder::new()
                .map_err(BoxError::from)
                .layer(retry.with_settings(patient).without_retry_budget())
                .layer(paced.clone())
                .service(server),
        ),
        // `RateLimit` is not `Clone`: a `Buffer` shares it between the requests.
        Variant::Told => layered(
            retry.with_settings(three),
            tower::buffer::Buffer::new(
                tower::limit::RateLimit::new(
                    server,
                    tower::limit::rate::Rate::new(1, limiter_models::told_real_spacing()),
                ),
                64,
            ),
        ),
    };
    let pacing = match variant {
        Variant::BudgetPacing | Variant::PatientPacing | Variant::NaivePacing => Some(paced),
        Variant::BudgetPacingFine => Some(fine),
        _ => None,
    };
    (client, pacing)
}

struct Scenario {
    name: &'static str,
    capacity: f64,
    /// (from, to, requests per second) phases of Poisson arrivals.
    load: Vec<(f64, f64, f64)>,
    outage: Option<(f64, f64)>,
    /// The window the amplification and goodput are measured over.
    window: (f64, f64),
}

impl OverloadRow {
    /// Attempts per request issued in the window.
    fn amplification(&self) -> f64 {
        self.window_attempts as f64 / self.window_requests as f64
    }
}

struct OverloadRow {
    variant: Variant,
    requests: usize,
    attempts: usize,
    window_requests: usize,
    window_attempts: usize,
    window_served: usize,
    /// What was served in the window, over the capacity it had.
    goodput: f64,
    ok: usize,
    /// Requests issued after the window, and how many of them succeeded.
    after: (usize, usize),
    p50: f64,
    p99: f64,
}

fn overload(scenario: &Scenario, variant: Variant, seed: u64) -> OverloadRow {
    virtual_time(async move {
        let start = Instant::now();
        let at = |s: f64| start + Duration::from_secs_f64(s);
        let state = Arc::new(Mutex::new(Capacity {
            capacity: scenario.capacity,
            burst: scenario.capacity * 0.05,
            tokens: scenario.capacity * 0.05,
            refilled: start,
            outage: scenario.outage.map(|(a, b)| (at(a), at(b))),
            log: Vec::new(),
            start,
        }));
        let net = Arc::new(Mutex::new(Net::blog(seed)));
        let server = {
            let (state, net) = (state.clone(), net.clone());
            tower::service_fn(move |_: Req| {
                let (state, net) = (state.clone(), net.clone());
                async move {
                    let there = net.lock().unwrap().delay();
                    sleep(there).await;
                    let res = state.lock().unwrap().admit();
                    let back = net.lock().unwrap().delay();
                    sleep(back).await;
                    Ok::<_, BoxError>(res)
                }
            })
        };
        let (client, pacing) = client(variant, server, seed);
        // With `--timeline`, the pacing layer's learned delay, sampled every half second.
        let delays = Arc::new(Mutex::new(Vec::new()));
        let sampler = pacing
            .filter(|_| TIMELINE.load(std::sync::atomic::Ordering::Relaxed))
            .map(|pacing| {
                let delays = delays.clone();
                tokio::spawn(async move {
                    loop {
                        delays.lock().unwrap().push(pacing.current_delay());
                        sleep(SEC / 2).await;
                    }
                })
            });
        let mut arrivals = SmallRng::seed_from_u64(seed ^ 0xA11CE);
        let mut tasks = Vec::new();
        for &(from, to, rate) in &scenario.load {
            let mut t = from;
            loop {
                // Exponential inter-arrival times: a Poisson process.
                t += -(1.0 - arrivals.random::<f64>()).ln() / rate;
                if t >= to {
                    break;
                }
                tokio::time::sleep_until(at(t)).await;
                let client = client.clone();
                tasks.push(tokio::spawn(async move {
                    let issued = Instant::now();
                    let req = Request::get("http://api.example/items").body(()).unwrap();
                    let res = client.oneshot(req).await;
                    let ok = matches!(&res, Ok(r) if r.status() == StatusCode::OK);
                    (t, secs(Instant::now(), issued), ok)
                }));
            }
        }
        let mut outcomes = Vec::with_capacity(tasks.len());
        for task in tasks {
            outcomes.push(task.await.unwrap());
        }
        if let Some(sampler) = sampler {
            sampler.abort();
        }
        let state = state.lock().unwrap();
        if TIMELINE.load(std::sync::atomic::Ordering::Relaxed) {
            eprintln!(
                "{} / {}: served/refused per 0.5 s:",
                scenario.name,
                variant.name()
            );
            eprintln!("  {}", timeline(&state.log, 0.5));
            let delays = delays.lock().unwrap();
            if !delays.is_empty() {
                let line: Vec<String> = delays
                    .iter()
                    .map(|d| format!("{}", d.as_millis()))
                    .collect();
                eprintln!("  pacing delay (ms) every 0.5 s: {}", line.join(" "));
            }
        }
        let (w0, w1) = scenario.window;
        let inside = |t: f64| t >= w0 && t < w1;
        let mut latencies: Vec<f64> = outcomes.iter().map(|o| o.1).collect();
        latencies.sort_by(f64::total_cmp);
        let window_served = state.log.iter().filter(|l| inside(l.0) && l.1).count();
        OverloadRow {
            variant,
            requests: outcomes.len(),
            attempts: state.log.len(),
            window_requests: outcomes.iter().filter(|o| inside(o.0)).count(),
            window_attempts: state.log.iter().filter(|l| inside(l.0)).count(),
            window_served,
            goodput: window_served as f64 / ((w1 - w0) * scenario.capacity),
            ok: outcomes.iter().filter(|o| o.2).count(),
            after: (
                outcomes.iter().filter(|o| o.0 >= w1).count(),
                outcomes.iter().filter(|o| o.0 >= w1 && o.2).count(),
            ),
            p50: percentile(&latencies, 50.0),
            p99: percentile(&latencies, 99.0),
        }
    })
}

fn run_overload(short: bool, seed: u64, out: &mut String) -> Vec<(Scenario, Vec<OverloadRow>)> {
    let capacity = if short { 200.0 } else { 500.0 };
    let scenarios = [
        Scenario {
            name: "Outage: 3 s of 503 at half load",
            capacity,
            load: vec![(0.0, 20.0, capacity / 2.0)],
            outage: Some((8.0, 11.0)),
            window: (8.0, 11.0),
        },
        Scenario {
            name: "Overload: 2× capacity for 10 s",
            capacity,
            load: vec![(0.0, 10.0, capacity * 2.0)],
            outage: None,
            window: (0.0, 10.0),
        },
    ];
    let mut all = Vec::new();
    for scenario in scenarios {
        let sc = &scenario;
        let rows: Vec<_> = VARIANTS.iter().map(|&v| overload(sc, v, seed)).collect();
        let (w0, w1) = sc.window;
        let _ = writeln!(
            out,
            "### {} (capacity {} req/s, window {w0}–{w1} s, seed {seed})\n",
            sc.name, sc.capacity
        );
        let outage = sc.outage.is_some();
        let _ = writeln!(
            out,
            "| client | requests | attempts | amplification (attempts / requests, window) | {} | succeeded | p50 | p99 |",
            if outage {
                "succeeded, issued after the outage"
            } else {
                "goodput (served / capacity, window)"
            }
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
        for r in &rows {
            let fourth = if outage {
                r.after.1 as f64 / r.after.0 as f64
            } else {
                r.goodput
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.2}× | {:.1} % | {:.1} % | {:.0} ms | {:.0} ms |",
                r.variant.name(),
                r.requests,
                r.attempts,
                r.amplification(),
                fourth * 100.0,
                r.ok as f64 * 100.0 / r.requests as f64,
                r.p50 * 1000.0,
                r.p99 * 1000.0,
            );
        }
        let _ = writeln!(out);
        if short {
            // Reproducibility, with the most stateful client: the same seed, the same run.
            let again = overload(sc, Variant::BudgetPacing, seed);
            let first = rows
                .iter()
                .find(|r| r.variant == Variant::BudgetPacing)
                .expect("pacing row");
            let key = |r: &OverloadRow| (r.attempts, r.window_served, r.ok, r.after, r.p50, r.p99);
            assert!(
                key(first) == key(&again),
                "{}: the same seed gave two runs",
                sc.name
            );
            let _ = writeln!(
                out,
                "Determinism check ({}, pacing client, twice): identical.\n",
                sc.name
            );
        }
        all.push((scenario, rows));
    }
    all
}

// ---------------------------------------------------------------------------------------
// 3. Rate limit
// ---------------------------------------------------------------------------------------

/// A token-bucket rate limiter: `rate` requests per second, bursts of `burst`; a request
/// over the limit gets `429` with `Retry-After` in whole seconds (as HTTP requires,
/// rounded up) until the next token.
struct Limiter {
    rate: f64,
    burst: f64,
    tokens: f64,
    refilled: Instant,
    ok: usize,
    limited: usize,
}

impl Limiter {
    fn admit(&mut self) -> Res {
        let now = Instant::now();
        let dt = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.refilled = now;
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            self.ok += 1;
            response(StatusCode::OK, None)
        } else {
            self.limited += 1;
            let wait = ((1.0 - self.tokens) / self.rate).ceil().max(1.0) as u64;
            response(StatusCode::TOO_MANY_REQUESTS, Some(wait))
        }
    }
}

struct RateRow {
    variant: Variant,
    /// The burst's size, and its ideal time N/R in seconds.
    n: usize,
    ideal: f64,
    ok: usize,
    limited: usize,
    /// When the last request ended (success or not), and the last success, in seconds.
    done: f64,
    last_success: f64,
}

fn rate_limit(n: usize, rate: f64, variant: Variant, seed: u64) -> RateRow {
    virtual_time(async move {
        let start = Instant::now();
        let limiter = Arc::new(Mutex::new(Limiter {
            rate,
            burst: (rate / 10.0).max(1.0),
            tokens: (rate / 10.0).max(1.0),
            refilled: start,
            ok: 0,
            limited: 0,
        }));
        let net = Arc::new(Mutex::new(Net::blog(seed)));
        let server = {
            let (limiter, net) = (limiter.clone(), net.clone());
            tower::service_fn(move |_: Req| {
                let (limiter, net) = (limiter.clone(), net.clone());
                async move {
                    let there = net.lock().unwrap().delay();
                    sleep(there).await;
                    let res = limiter.lock().unwrap().admit();
                    let back = net.lock().unwrap().delay();
                    sleep(back).await;
                    Ok::<_, BoxError>(res)
                }
            })
        };
        let (client, _) = client(variant, server, seed);
        let tasks: Vec<_> = (0..n)
            .map(|_| {
                let client = client.clone();
                tokio::spawn(async move {
                    let req = Request::get("http://api.example/items").body(()).unwrap();
                    let res = client.oneshot(req).await;
                    let ok = matches!(&res, Ok(r) if r.status() == StatusCode::OK);
                    (ok, secs(Instant::now(), start))
                })
            })
            .collect();
        let mut last_success: f64 = 0.0;
        for t in tasks {
            let (ok, at) = t.await.unwrap();
            if ok {
                last_success = last_success.max(at);
            }
        }
        let l = limiter.lock().unwrap();
        RateRow {
            variant,
            n,
            ideal: n as f64 / rate,
            ok: l.ok,
            limited: l.limited,
            done: secs(Instant::now(), start),
            last_success,
        }
    })
}

fn run_rate_limit(short: bool, seed: u64, out: &mut String) -> Vec<RateRow> {
    let (n, rate) = if short { (200, 50.0) } else { (1000, 100.0) };
    let ideal = n as f64 / rate;
    // Two more clients, whose attempt limit does not end the burst before pacing can act.
    let rows: Vec<_> = VARIANTS
        .iter()
        .chain(&[Variant::Patient, Variant::PatientPacing])
        .map(|&v| rate_limit(n, rate, v, seed))
        .collect();
    let _ = writeln!(
        out,
        "### Rate limit: a burst of N={n} requests against R={rate} req/s (ideal N/R = {ideal:.1} s, seed {seed})\n"
    );
    let _ = writeln!(
        out,
        "| client | succeeded | 429s | 429s / N | last request ended | last success | completion / (N/R) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        // Completion means every request succeeded; a client that gave up on some did not
        // complete the burst, however early it stopped.
        let ratio = if r.ok == n {
            format!("{:.2}×", r.last_success / ideal)
        } else {
            format!("– ({} gave up)", n - r.ok)
        };
        let _ = writeln!(
            out,
            "| {} | {} / {n} | {} | {:.1} % | {:.2} s | {:.2} s | {ratio} |",
            r.variant.name(),
            r.ok,
            r.limited,
            r.limited as f64 * 100.0 / n as f64,
            r.done,
            r.last_success,
        );
    }
    let _ = writeln!(out);
    rows
}

/// The outage and overload targets, for `--check` (full experiments): with the default
/// budget, amplification within 1.2× in the window; with pacing, every request issued after
/// the outage succeeds, the median request is not held (p50 within 100 ms: a pacing change
/// that closed a recovering destination once made it 5.2 s), and an overload is served at
/// 95 % of capacity.
fn check_overload(scenarios: &[(Scenario, Vec<OverloadRow>)], missed: &mut Vec<String>) {
    for (scenario, rows) in scenarios {
        let name = scenario.name;
        let row = |v: Variant| {
            rows.iter()
                .find(|r| r.variant == v)
                .expect("every variant runs")
        };
        let budget = row(Variant::Budget);
        let amplification = budget.amplification();
        if amplification > 1.2 {
            missed.push(format!(
                "{name}: default budget amplification {amplification:.2}× > 1.2×"
            ));
        }
        let paced = row(Variant::BudgetPacing);
        if scenario.outage.is_some() {
            if paced.after.1 < paced.after.0 {
                missed.push(format!(
                    "{name}: with pacing, {} of {} requests issued after the outage failed",
                    paced.after.0 - paced.after.1,
                    paced.after.0
                ));
            }
            if paced.p50 > 0.1 {
                missed.push(format!(
                    "{name}: with pacing, p50 {:.0} ms > 100 ms",
                    paced.p50 * 1e3
                ));
            }
        } else if paced.goodput < budget.goodput {
            // Never worse than no pacing.
            missed.push(format!(
                "{name}: with pacing, goodput {:.1} % < {:.1} % without",
                paced.goodput * 100.0,
                budget.goodput * 100.0
            ));
        }
    }
}

/// The rate-limit target, for `--check` (issue #29's row 1 on a token bucket with a
/// small burst): with pacing, every request succeeds within 1.15× N/R and under 5 % of N
/// are refused.
fn check_rate_limit(rows: &[RateRow], missed: &mut Vec<String>) {
    let paced = rows
        .iter()
        .find(|r| r.variant == Variant::BudgetPacing)
        .expect("the pacing client runs");
    let n = paced.n;
    let time = paced.last_success / paced.ideal;
    let refused = paced.limited as f64 / n as f64;
    if paced.ok < n || time > 1.15 || refused >= 0.05 {
        missed.push(format!(
            "rate limit with pacing: {} of {n} in {time:.2}× N/R with {:.1} % refused (needs all, ≤ 1.15×, < 5 %)",
            paced.ok,
            refused * 100.0
        ));
    }
}

// ---------------------------------------------------------------------------------------
// 3b. Models of the real rate limiters of `lab/src/bin/limiters.rs`
// ---------------------------------------------------------------------------------------

#[path = "models/limiters.rs"]
mod limiter_models;

#[path = "models/matrix.rs"]
mod matrix_models;

#[path = "models/calibration.rs"]
mod calibration;

// ---------------------------------------------------------------------------------------
// 4. Delay distributions and charts
// ---------------------------------------------------------------------------------------

const RETRIES: u32 = 10;
const SEQUENCES: u64 = 200;

/// `SEQUENCES` seeded sequences of `RETRIES` delays (seconds) per strategy, base 100 ms,
/// cap 10 s (the stateless `Table` with its own default delays, 0 ms to 5 s).
fn delay_samples() -> Vec<(&'static str, Vec<Vec<f64>>)> {
    let base = 100 * MS;
    let cap = 10 * SEC;
    fn draw<B: BackOff>(mut make: impl FnMut(u64) -> B) -> Vec<Vec<f64>> {
        (0..SEQUENCES)
            .map(|seed| {
                let mut b = make(seed);
                (0..RETRIES)
                    .map(|_| b.next_backoff().map_or(f64::NAN, |d| d.as_secs_f64()))
                    .collect()
            })
            .collect()
    }
    vec![
        (
            "exponential, no jitter (aws::Exponential)",
            draw(|_| aws::Exponential::new(base, cap).unwrap().into_backoff()),
        ),
        (
            "full jitter",
            draw(|s| {
                FullJitter::new(base, cap)
                    .unwrap()
                    .into_backoff()
                    .with_seed(s)
            }),
        ),
        (
            "equal jitter",
            draw(|s| {
                EqualJitter::new(base, cap)
                    .unwrap()
                    .into_backoff()
                    .with_seed(s)
            }),
        ),
        (
            "decorrelated jitter",
            draw(|s| DecorrelatedJitter::new(base, cap).unwrap().with_seed(s)),
        ),
        (
            "ExponentialBackOff (×1.5, ±50 %)",
            draw(|s| {
                ExponentialBackOff::builder()
                    .with_initial_interval(base)
                    .with_max_interval(cap)
                    .with_max_elapsed(None)
                    .with_seed(s)
                    .build()
                    .unwrap()
            }),
        ),
        (
            "Table::default() (its own delays, ±50 %)",
            draw(|s| Table::default().into_backoff().with_seed(s)),
        ),
    ]
}

fn delays_table(samples: &[(&'static str, Vec<Vec<f64>>)], out: &mut String) {
    let _ = writeln!(
        out,
        "### Delay distributions (base 100 ms, cap 10 s; Table: its defaults; {SEQUENCES} seeded sequences): p5 / p50 / p95 in ms\n"
    );
    let _ = write!(out, "| strategy |");
    for r in 1..=RETRIES {
        let _ = write!(out, " retry {r} |");
    }
    let _ = write!(out, "\n|---|");
    for _ in 1..=RETRIES {
        let _ = write!(out, "---:|");
    }
    let _ = writeln!(out);
    for (name, seqs) in samples {
        let _ = write!(out, "| {name} |");
        for r in 0..RETRIES as usize {
            let mut col: Vec<f64> = seqs.iter().map(|s| s[r]).collect();
            col.sort_by(f64::total_cmp);
            let _ = write!(
                out,
                " {:.0} / {:.0} / {:.0} |",
                percentile(&col, 5.0) * 1e3,
                percentile(&col, 50.0) * 1e3,
                percentile(&col, 95.0) * 1e3
            );
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out);
}

mod charts {
    use super::{CONTENTION_STRATEGIES, ContentionTable, RETRIES};
    use plotters::prelude::*;
    use std::path::Path;

    const COLORS: [RGBColor; 7] = [
        RGBColor(0x44, 0x44, 0x44),
        RGBColor(0xd6, 0x27, 0x28),
        RGBColor(0x1f, 0x77, 0xb4),
        RGBColor(0x2c, 0xa0, 0x2c),
        RGBColor(0xff, 0x7f, 0x0e),
        RGBColor(0x94, 0x67, 0xbd),
        RGBColor(0x8c, 0x56, 0x4b),
    ];

    type Result = std::result::Result<(), Box<dyn std::error::Error>>;
    /// Picks the plotted value out of a (calls, completion) cell.
    type Metric = fn(&(f64, f64)) -> f64;

    pub fn contention(t: &ContentionTable, path: &Path) -> Result {
        let root = SVGBackend::new(path, (1100, 480)).into_drawing_area();
        root.fill(&WHITE)?;
        let (left, right) = root.split_horizontally(550);
        let panels: [(&DrawingArea<_, _>, &str, &str, Metric); 2] = [
            (&left, "Total calls (work)", "calls", |c| c.0),
            (&right, "Completion time", "ms", |c| c.1 * 1000.0),
        ];
        let x_max = *t.ns.last().unwrap() as f64;
        for (area, title, unit, value) in panels {
            let values = || t.cells.iter().flat_map(|r| r.iter().map(value));
            let y_max = values().fold(1.0, f64::max);
            // Room below the lowest curve for the legend.
            let y_min = (values().fold(f64::INFINITY, f64::min) / 8.0).max(1.0);
            let mut chart = ChartBuilder::on(area)
                .caption(title, ("sans-serif", 20))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..x_max * 1.02, (y_min..y_max * 1.5).log_scale())?;
            chart
                .configure_mesh()
                .x_desc("clients (N)")
                .y_desc(format!("{unit} (log scale)"))
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_label_formatter(&|y| format!("{y:.0}"))
                .draw()?;
            for (i, (name, row)) in CONTENTION_STRATEGIES.iter().zip(&t.cells).enumerate() {
                let color = COLORS[i % COLORS.len()];
                let points: Vec<(f64, f64)> =
                    t.ns.iter()
                        .zip(row)
                        .map(|(&n, c)| (n as f64, value(c).max(y_min)))
                        .collect();
                chart
                    .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
                    .label(*name)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                    });
                chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.3))
                .draw()?;
        }
        root.present()?;
        Ok(())
    }

    /// Sequences drawn as points in each panel.
    const SHOWN: usize = 40;

    pub fn delays(samples: &[(&'static str, Vec<Vec<f64>>)], path: &Path) -> Result {
        let cols = 3;
        let rows = samples.len().div_ceil(cols);
        let root = SVGBackend::new(path, (1200, 360 * rows as u32)).into_drawing_area();
        root.fill(&WHITE)?;
        let areas = root.split_evenly((rows, cols));
        let y_max = 10.5;
        for (i, ((name, seqs), area)) in samples.iter().zip(&areas).enumerate() {
            let color = COLORS[(i + 1) % COLORS.len()];
            let mut chart = ChartBuilder::on(area)
                .caption(*name, ("sans-serif", 16))
                .margin(10)
                .x_label_area_size(30)
                .y_label_area_size(44)
                .build_cartesian_2d(0.5..(RETRIES as f64 + 0.5), 0.0..y_max)?;
            chart
                .configure_mesh()
                .x_desc("retry")
                .y_desc("delay, s")
                .x_labels(RETRIES as usize)
                .x_label_formatter(&|x| format!("{x:.0}"))
                .draw()?;
            // The draws of the first sequences, spread a little horizontally by sequence
            // so their density shows (all sequences would make a megabyte of SVG)...
            chart.draw_series(seqs.iter().take(SHOWN).enumerate().flat_map(|(k, seq)| {
                let dx = (k as f64 / SHOWN as f64 - 0.5) * 0.5;
                seq.iter()
                    .enumerate()
                    .filter(|(_, d)| d.is_finite())
                    .map(move |(r, &d)| {
                        Circle::new((r as f64 + 1.0 + dx, d), 2, color.mix(0.4).filled())
                    })
            }))?;
            // ...and the percentiles of all of them.
            let line = |p: f64| -> Vec<(f64, f64)> {
                (0..RETRIES as usize)
                    .map(|r| {
                        let mut col: Vec<f64> = seqs.iter().map(|s| s[r]).collect();
                        col.sort_by(f64::total_cmp);
                        (r as f64 + 1.0, super::percentile(&col, p))
                    })
                    .collect()
            };
            chart
                .draw_series(LineSeries::new(line(50.0), BLACK.stroke_width(2)))?
                .label("median")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], BLACK.stroke_width(2))
                });
            let thin = BLACK.mix(0.6).stroke_width(1);
            chart
                .draw_series(LineSeries::new(line(5.0), thin))?
                .label("p5, p95")
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], thin));
            chart.draw_series(LineSeries::new(line(95.0), thin))?;
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .draw()?;
        }
        root.present()?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------------------

/// The value after `name` on the command line.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1).map(String::as_str)
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let short = args.iter().any(|a| a == "--short");
    TIMELINE.store(
        args.iter().any(|a| a == "--timeline"),
        std::sync::atomic::Ordering::Relaxed,
    );
    let what = args
        .iter()
        .enumerate()
        .find(|(i, a)| {
            !a.starts_with("--")
                && (*i == 0
                    || !matches!(args[i - 1].as_str(), "--seeds" | "--compare" | "--seconds"))
        })
        .map(|(_, a)| a)
        .map_or("all", String::as_str);
    let docs: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    std::fs::create_dir_all(&docs)?;
    // `--check`: the full experiments, and an error if a target they meet today is missed.
    let check = args.iter().any(|a| a == "--check");
    if check && short {
        return Err("--check runs the full experiments: leave out --short".into());
    }
    let charts = !short && !check;
    // Only these experiments draw charts.
    let charted = charts && matches!(what, "all" | "contention" | "delays");
    let mut missed = Vec::new();
    let real = std::time::Instant::now();
    let mut out = String::new();
    let all = what == "all";
    if !matches!(
        what,
        "all" | "contention" | "overload" | "ratelimit" | "limiters" | "delays"
    ) {
        return Err(format!(
            "unknown experiment {what:?}: all, contention, overload, ratelimit, limiters, delays"
        )
        .into());
    }

    if all || what == "contention" {
        let seeds = if short { 1 } else { 5 };
        let table = run_contention(short, seeds, &mut out);
        let _ = writeln!(out);
        if short {
            // Reproducibility: the same seed gives the same run, call for call.
            let a = contention("full jitter", 30, 7);
            let b = contention("full jitter", 30, 7);
            assert_eq!((a.calls, a.completion), (b.calls, b.completion));
            let _ = writeln!(
                out,
                "\nDeterminism check (full jitter, N=30, seed 7, twice): identical.\n"
            );
        }
        if charts {
            charts::contention(&table, &docs.join("contention.svg"))?;
        }
    }
    if all || what == "overload" {
        let scenarios = run_overload(short, 1, &mut out);
        if check {
            check_overload(&scenarios, &mut missed);
        }
    }
    if all || what == "ratelimit" {
        let rows = run_rate_limit(short, 1, &mut out);
        if check {
            check_rate_limit(&rows, &mut missed);
        }
    }
    if all || what == "limiters" {
        let seeds = flag(&args, "--seeds")
            .map_or(Ok(1), str::parse::<u64>)
            .map_err(|e| format!("--seeds: {e}"))?;
        // `--seconds N`: target 3's fleets run for N s instead of 10 (2 with `--short`), past
        // what their first seconds cost. The targets and the real runs are of 10 s.
        let seconds = flag(&args, "--seconds")
            .map(str::parse::<u64>)
            .transpose()
            .map_err(|e| format!("--seconds: {e}"))?;
        if seconds.is_some() && (check || flag(&args, "--compare").is_some()) {
            return Err("--seconds runs fleets that --check and --compare do not judge".into());
        }
        let seconds = seconds.unwrap_or(if short { 2 } else { 10 });
        // `LIMITERS_TOLD_SHARE`: the told fleet at that share of the limit, as in the real
        // runs; the recorded ones are at the whole share.
        let told_share = limiter_models::told::told_share()?;
        if told_share != 1.0 && (check || flag(&args, "--compare").is_some()) {
            return Err(format!(
                "LIMITERS_TOLD_SHARE={told_share}: --check and --compare judge the told fleet at its whole share"
            )
            .into());
        }
        // `LIMITERS_LATENCY_MS`: a round trip added to every request, as in the real runs;
        // the recorded ones are on loopback.
        let far = tower_backoff_lab::limiters::client::Distance::from_env().far();
        if far && (check || flag(&args, "--compare").is_some()) {
            return Err(
                "LIMITERS_LATENCY_MS, LIMITERS_JITTER_MS: --check and --compare judge runs on loopback".into(),
            );
        }
        let mut table = String::new();
        let rows = limiter_models::run(1, seeds, seconds, &mut table);
        if check {
            limiter_models::check(&rows, &mut missed);
        }
        // Issue #29's rows 2 to 4, whose real runs `matrix --record` writes.
        let mut figures = limiter_models::figures(&rows);
        let matrix = matrix_models::run(1, seeds, &mut table);
        if check {
            matrix_models::check(&matrix, &mut missed);
        }
        figures.extend(matrix);
        // `--compare FILE`: the real runs `limiters --record FILE` wrote, beside the models.
        if let Some(path) = flag(&args, "--compare") {
            let recorded = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
            let outside = calibration::compare(&figures, &recorded, &mut table)
                .map_err(|e| format!("{path}: {e}"))?;
            if check {
                // A model that drifted from the recorded real runs: a change to the pacing
                // (or to a model) that needs the real runs recorded again.
                missed.extend(
                    outside
                        .iter()
                        .map(|o| format!("calibration against {path}: {o}")),
                );
            } else if !outside.is_empty() {
                eprintln!(
                    "--compare: {} figures of the models are not within 10 % of the real runs:\n- {}",
                    outside.len(),
                    outside.join("\n- ")
                );
            }
        }
        if short {
            // Reproducibility: every stack here is seeded, the retry layer's
            // `Retry-After` jitter included.
            let mut again = String::new();
            limiter_models::run(1, seeds, seconds, &mut again);
            matrix_models::run(1, seeds, &mut again);
            assert_eq!(table, again, "the limiter models are not reproducible");
        }
        out.push_str(&table);
    }
    if all || what == "delays" {
        let samples = delay_samples();
        delays_table(&samples, &mut out);
        if charts {
            charts::delays(&samples, &docs.join("delays.svg"))?;
        }
    }
    print!("{out}");
    if !missed.is_empty() {
        eprintln!("--check: targets missed:\n- {}", missed.join("\n- "));
        return Err(format!("{} targets missed", missed.len()).into());
    }
    if check {
        eprintln!("--check: every target checked is met");
    }
    eprintln!(
        "simulated in {:.1} s of real time{}",
        real.elapsed().as_secs_f64(),
        if charted {
            "; charts written to docs/"
        } else {
            ""
        }
    );
    Ok(())
}
