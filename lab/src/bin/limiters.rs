//! The crate's client stacks against real rate limiters nobody here wrote: tower_governor
//! (in process), express-rate-limit (Node, `npm ci` in `lab/fixtures/express-limiter`
//! first) and HAProxy (`apt-get install haproxy`), each limiting at 50 r/s. The leaky
//! bucket (`leaky-bucket`, the lab's own server, in process) runs when named, and in
//! `redis-fleet` with the others. `nginx` (`limit_req`, `apt-get install nginx-light`), a
//! limiter nothing was tuned on, runs when named; `LIMITERS_NGINX_BURST=1` makes it strict;
//! `LIMITERS_NGINX_MODE=delay` holds its burst to the rate, `default` also refuses with
//! nginx's own bare 503 (its documentation's setup). `flask-moving-window` and
//! `flask-elastic-expiry` (Flask-Limiter, `apt-get install python3-flask-limiter`) run when
//! named; `LIMITERS_FLASK_HEADERS=on` adds their quota headers.
//!
//! ```text
//! cargo run --release -p tower-backoff-lab --bin limiters -- all        # every target, every limiter
//! cargo run --release -p tower-backoff-lab --bin limiters -- burst      # target 1 (or: two, fleet)
//! cargo run --release -p tower-backoff-lab --bin limiters -- burst nginx --paced --rate 10 --burst 2 --concurrency 50
//! cargo run --release -p tower-backoff-lab --bin limiters -- fleet governor --in-process
//! cargo run --release -p tower-backoff-lab --bin limiters -- all --reps 1
//! cargo run --release -p tower-backoff-lab --bin limiters -- fleet governor --paced
//! cargo run --release -p tower-backoff-lab --bin limiters -- fleet haproxy --paced --seconds 30
//! cargo run --release -p tower-backoff-lab --bin limiters -- fleet haproxy --stack told
//! cargo run --release -p tower-backoff-lab --bin limiters -- all --reps 5 --record real.txt
//! cargo run --release -p tower-backoff-lab --bin simulate -- limiters --seeds 8 --compare real.txt
//! cargo run --release -p tower-backoff-lab --bin limiters -- redis-fleet all --reps 3
//! cargo run --release -p tower-backoff-lab --bin limiters -- redis-fleet haproxy --parts learning,faults
//! ```
//!
//! `redis-fleet` (issue #31, needs `redis-server`): fleets of 8 processes sharing their
//! pacing in Redis, learning the limit, told it once, joining and leaving, and losing
//! Redis for 5 s; see `limiters/redis_fleet.rs` for the targets.
//!
//! `--record FILE` appends one line per run of targets 1 and 3 to `FILE` (limiter, stack
//! and figures; `redis-fleet`'s, of its fleets learning and told); `simulate -- limiters
//! --compare FILE` sets the model's figures beside their means (the calibration of target
//! 4). CI compares against the runs in `docs/real-runs/`.
//!
//! Targets, per limiter (figures in `docs/BENCHMARKS.md`, "Real rate limiters"):
//!
//! 1. **burst**: 300 GETs, 20 at a time: 300/300 succeed, within 1.1× the ideal 6 s, under
//!    5 % of attempts refused. `--rate R --burst B --requests N --concurrency C` run it
//!    away from the point the harness was tuned at; `LIMITERS_WINDOW=S` gives the window
//!    limiters (express, fastify, HAProxy, rate-limiter-flexible) windows of S seconds.
//!    `LIMITERS_LATENCY_MS=50` adds a 50 ms round trip to every attempt, half each way:
//!    a server far away, as a public API is; `LIMITERS_JITTER_MS=40` varies each way by up
//!    to 20 ms either side, so answers overtake each other (neither with `--record`).
//! 2. **two**: one client sends a burst to a limited (or down) destination and a steady
//!    stream to a healthy one: the healthy one sees no failure, its p99 grows by < 10 ms.
//! 3. **fleet**: 8 independent clients (8 processes: this example re-spawns itself) share
//!    one limiter for 10 s: ≥ 95 % of its capacity used, < 10 % refused, Jain's index ≥ 0.9.
//!    `--seconds N` runs the fleet longer, past what its first seconds cost (not with
//!    `--record`: the calibration compares 10 s fleets).
//!
//! `--stack NAME[,NAME]` runs those stacks only (`--paced`: the two with `PacingLayer`). `told` is a
//! reference beside the crate's stacks, never among them: each client of the fleet is told
//! its share of the limit (one request per 160 ms, tower's own `RateLimit`, from a random
//! phase) and need not learn it. What it reaches is what the limiter allows a fleet that
//! knows the limit; the model reproduces it (`simulate -- limiters`), which calibrates
//! the limiters' models with clients that do not adapt. `LIMITERS_TOLD_SHARE=0.97` tells
//! each client 97 % of its share instead (not with `--record`); `simulate -- limiters`
//! reads the same variable. `told-pacing` is told the same rate by the crate's own means:
//! `PacingLayer`'s `with_known_rate` for the limiter's address, inside `RetryLayer` (not
//! with `--record`: the models have no such client).
//!
//! Experiments run only when named (`limiters -- burst NAME`): `haproxy-ratelimit` is
//! HAProxy sending the IETF `RateLimit` field as well, as a naive configuration writes it
//! (`r` = the limit minus its count, `t=1`); `express-draft-6`, `express-draft-7` and
//! `express-legacy`, express-rate-limit's other headers; `nginx`; `rate-limiter-flexible`.
//!
//! With `LIMITERS_TRACE=1` every attempt is printed on stderr as `attempt <sent ms>
//! <answered ms> <status> <pid> <wall clock ms> [<quota>]` (the first two since the
//! process's first attempt; pid and wall clock tell a fleet's processes apart and put them
//! on one clock; the quota reported, if any), for a timeline of a run.
//!
//! Real time, real sockets: a run takes a few minutes. Every figure is measured, none is
//! asserted: the fast properties are asserted by `lab/tests/rate_limiters.rs`.

#[path = "limiters/redis_fleet.rs"]
mod redis_fleet;

use tower_backoff_lab::limiters;

use limiters::client::{Count, Counts, Stack};
use limiters::drive::{self, Summary, jain};
use limiters::{Kind, Limiter, RateLimit, backend};
use std::fmt::Write as _;
use std::time::Duration;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const LIMIT: RateLimit = RateLimit::TARGET;
/// Longer than any stack can take on one request (30 s of retry budget, 30 s of pacing).
const TIMEOUT: Duration = Duration::from_secs(70);

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("fleet-client") {
        return fleet_client(&args[1..]).await;
    }
    if args.first().map(String::as_str) == Some("fleet-member") {
        return redis_fleet::member(&args[1..]).await;
    }
    if args.first().map(String::as_str) == Some("redis-fleet") {
        return redis_fleet::main(&args[1..]).await;
    }
    let what = args.first().map_or("all", String::as_str);
    let kinds: Vec<Kind> = match args.get(1).filter(|a| !a.starts_with("--")) {
        Some(name) => vec![Kind::parse(name).ok_or(format!("unknown limiter {name}"))?],
        None => Kind::ALL.to_vec(),
    };
    let reps: usize = flag(&args, "--reps").map_or(Ok(3), str::parse)?;
    let in_process = args.iter().any(|a| a == "--in-process");
    let seconds: u64 = flag(&args, "--seconds").map_or(Ok(FLEET_SECONDS), str::parse)?;
    if seconds != FLEET_SECONDS && flag(&args, "--record").is_some() {
        return Err(format!("--record keeps fleets of {FLEET_SECONDS} s, not {seconds}").into());
    }
    let told_share = limiters::told::told_share()?;
    if limiters::client::Distance::from_env().far() && flag(&args, "--record").is_some() {
        return Err(
            "--record keeps runs on loopback, not LIMITERS_LATENCY_MS or _JITTER_MS".into(),
        );
    }
    if told_share != 1.0 && flag(&args, "--record").is_some() {
        return Err(format!(
            "--record keeps the told fleet at its whole share, not LIMITERS_TOLD_SHARE={told_share}"
        )
        .into());
    }
    if kinds.contains(&Kind::LeakyBucket) && flag(&args, "--record").is_some() {
        return Err("--record: the models have no leaky bucket to compare it with".into());
    }
    let work = Workload::from_args(&args)?;
    if work != Workload::TARGET && (what != "burst" || flag(&args, "--record").is_some()) {
        return Err(
            "--rate, --burst, --requests and --concurrency: `burst` only, not with --record".into(),
        );
    }
    let record = Record::open(flag(&args, "--record"))?;
    let stacks = match flag(&args, "--stack") {
        Some(names) => names
            .split(',')
            .map(|name| Stack::parse(name).ok_or(format!("unknown stack {name}")))
            .collect::<Result<_, _>>()?,
        None if args.iter().any(|a| a == "--paced") => Stack::MEASURED
            .into_iter()
            .filter(|stack| matches!(stack, Stack::RetryPacing | Stack::RetryNoBudgetPacing))
            .collect(),
        None => Stack::MEASURED.to_vec(),
    };
    if let Some(stack) = stacks.iter().find(|s| s.needs_redis()) {
        return Err(format!("{} runs in `limiters -- redis-fleet`", stack.name()).into());
    }
    if stacks.contains(&Stack::ToldPacing) && flag(&args, "--record").is_some() {
        return Err("--record: the models have no told-pacing client to compare it with".into());
    }
    let _ = STACKS.set(stacks);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "limit {} r/s, burst {} (token bucket); {} cores; {reps} runs per cell\n",
        LIMIT.per_second,
        LIMIT.burst,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    if told_share != 1.0 {
        let _ = writeln!(out, "the told fleet at {told_share} of its share\n");
    }
    if !matches!(what, "all" | "burst" | "two" | "fleet") {
        return Err(
            format!("unknown experiment {what}: all, burst, two, fleet, redis-fleet").into(),
        );
    }
    for kind in kinds {
        if let Err(why) = Limiter::start(kind, work.limit).await {
            let _ = writeln!(out, "## {}: not available ({why})\n", kind.name());
            continue;
        }
        let _ = writeln!(out, "## {} — {}\n", kind.name(), kind.model());
        if what == "all" || what == "burst" {
            burst(kind, work, reps, &record, &mut out).await?;
        }
        if what == "all" || what == "two" {
            two_destinations(kind, &mut out).await?;
        }
        if what == "all" || what == "fleet" {
            fleet(kind, reps, seconds, in_process, &record, &mut out).await?;
        }
        print!("{out}");
        out.clear();
    }
    print!("{out}");
    Ok(())
}

/// `--record FILE`: where each run's figures are appended, one line per run, for
/// `simulate -- limiters --compare FILE`. Format: `t1 LIMITER STACK time=… refused=…
/// ok=…` (time as a multiple of the ideal, refused in % of attempts) and `t3 LIMITER STACK
/// used=… refused=… jain=…` (used in % of the capacity).
struct Record(Option<std::fs::File>);

impl Record {
    /// Opened once, before any run: a path that cannot be written fails at once, not after
    /// the minutes of runs whose figures it was to keep.
    fn open(path: Option<&str>) -> Result<Self, BoxError> {
        let file = path
            .map(|path| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|e| format!("--record {path}: {e}"))
            })
            .transpose()?;
        Ok(Self(file))
    }

    fn run(&self, target: &str, kind: Kind, stack: Stack, figures: &[(&str, f64)]) {
        let Some(mut file) = self.0.as_ref() else {
            return;
        };
        let mut line = format!("{target} {} {}", kind.name(), stack.name());
        for (name, value) in figures {
            let _ = write!(line, " {name}={value:.4}");
        }
        line.push('\n');
        if let Err(e) = std::io::Write::write_all(&mut file, line.as_bytes()) {
            eprintln!("--record: {e}");
        }
    }
}

/// The stacks to measure: every measured one, those with `PacingLayer` inside
/// (`--paced`), or one (`--stack NAME`).
static STACKS: std::sync::OnceLock<Vec<Stack>> = std::sync::OnceLock::new();

fn measured() -> Vec<Stack> {
    STACKS
        .get()
        .cloned()
        .unwrap_or_else(|| Stack::MEASURED.to_vec())
}

fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// min–max of a few runs, or the one value.
fn range(values: &[f64], fmt: impl Fn(f64) -> String) -> String {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if values.len() < 2 || fmt(min) == fmt(max) {
        fmt(min)
    } else {
        format!("{}–{}", fmt(min), fmt(max))
    }
}

// ---------------------------------------------------------------------------------------
// Target 1: a burst
// ---------------------------------------------------------------------------------------

/// Target 1's workload, or another one away from the point the harness was tuned at:
/// `--rate R --burst B --requests N --concurrency C` (not with `--record`).
#[derive(Clone, Copy, PartialEq)]
struct Workload {
    limit: RateLimit,
    requests: usize,
    concurrency: usize,
}

impl Workload {
    const TARGET: Self = Self {
        limit: LIMIT,
        requests: 300,
        concurrency: 20,
    };

    fn from_args(args: &[String]) -> Result<Self, BoxError> {
        let t = Self::TARGET;
        let number = |name: &str, default: usize| -> Result<usize, BoxError> {
            let Some(text) = flag(args, name) else {
                return Ok(default);
            };
            let n: usize = text.parse().map_err(|e| format!("{name} {text}: {e}"))?;
            (n >= 1)
                .then_some(n)
                .ok_or_else(|| format!("{name} {text}: at least 1").into())
        };
        let whole = |n: usize| u32::try_from(n).map_err(|e| format!("{n}: {e}"));
        Ok(Self {
            limit: RateLimit::new(
                whole(number("--rate", t.limit.per_second as usize)?)?,
                whole(number("--burst", t.limit.burst as usize)?)?,
            ),
            requests: number("--requests", t.requests)?,
            concurrency: number("--concurrency", t.concurrency)?,
        })
    }
}

async fn burst(
    kind: Kind,
    work: Workload,
    reps: usize,
    record: &Record,
    out: &mut String,
) -> Result<(), BoxError> {
    let Workload {
        limit,
        requests: n,
        concurrency,
    } = work;
    let ideal = n as f64 / limit.per_second as f64;
    let _ = writeln!(
        out,
        "### Target 1: {n} GETs, {concurrency} at a time, {} r/s, burst {} (ideal {ideal:.1} s; met: {n}/{n}, ≤ 1.1×, < 5 % refused)\n",
        limit.per_second, limit.burst
    );
    let _ = writeln!(
        out,
        "| client | succeeded | time | × ideal | attempts | refused / attempts | met |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---|");
    for stack in measured() {
        let (mut oks, mut times, mut attempts, mut refused) = (vec![], vec![], vec![], vec![]);
        let mut failures = Vec::new();
        for _ in 0..reps {
            let limiter = Limiter::start(kind, limit).await?;
            let counts = Counts::default();
            let client = stack.build_to(&counts, &limiter.url("/items"));
            let url = limiter.url("/items");
            let outcomes = drive::burst(client.clone(), &url, n, concurrency, TIMEOUT).await;
            let s = Summary::of(&outcomes);
            let c = counts.total();
            record.run(
                "t1",
                kind,
                stack,
                &[
                    ("time", s.elapsed.as_secs_f64() / ideal),
                    ("refused", pct(c.refused, c.attempts)),
                    ("ok", s.ok as f64),
                ],
            );
            oks.push(s.ok as f64);
            times.push(s.elapsed.as_secs_f64());
            attempts.push(c.attempts as f64);
            refused.push(pct(c.refused, c.attempts));
            failures.extend(s.failures);
            drop(limiter);
            tokio::time::sleep(Duration::from_millis(1100)).await;
        }
        let met = oks.iter().all(|&ok| ok == n as f64)
            && times.iter().all(|&t| t <= 1.1 * ideal)
            && refused.iter().all(|&r| r < 5.0);
        let _ = writeln!(
            out,
            "| {} | {} / {n} | {} s | {} | {} | {} % | {} |",
            stack.describe(),
            range(&oks, |v| format!("{v:.0}")),
            range(&times, |v| format!("{v:.2}")),
            range(&times, |v| format!("{:.2}×", v / ideal)),
            range(&attempts, |v| format!("{v:.0}")),
            range(&refused, |v| format!("{v:.1}")),
            if met { "yes" } else { "no" },
        );
        if !failures.is_empty() {
            let mut seen: Vec<(String, usize)> = Vec::new();
            for (what, n) in failures {
                match seen.iter_mut().find(|(w, _)| *w == what) {
                    Some((_, m)) => *m += n,
                    None => seen.push((what, n)),
                }
            }
            eprintln!("  {} / {}: failures {seen:?}", kind.name(), stack.name());
        }
    }
    let _ = writeln!(out);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Target 2: two destinations
// ---------------------------------------------------------------------------------------

/// The healthy destination's stream: 200 GETs, one every 25 ms (5 s, overlapping the
/// 300-request burst to the other destination).
const HEALTHY_N: usize = 200;
const HEALTHY_EVERY: Duration = Duration::from_millis(25);

const N: usize = Workload::TARGET.requests;
const CONCURRENCY: usize = Workload::TARGET.concurrency;

async fn two_destinations(kind: Kind, out: &mut String) -> Result<(), BoxError> {
    let _ = writeln!(
        out,
        "### Target 2: a burst to a limited (or down) destination and a stream to a healthy one, one client\n\n\
         {HEALTHY_N} GETs to the healthy server, one every {} ms; meanwhile {} GETs, {} at a time, to the other destination. \
         Met: no failure at the healthy one, its p99 grows by < 10 ms over the same stream alone.\n",
        HEALTHY_EVERY.as_millis(),
        N,
        CONCURRENCY,
    );
    let _ = writeln!(
        out,
        "| client | other destination | healthy ok | healthy p50 alone → with | healthy p99 alone → with | Δ p99 | other ok | met |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|---|");
    let (healthy, _healthy_task) = backend::serve().await;
    let healthy_url = format!("http://{healthy}/ok");
    for stack in measured() {
        // The stream alone, on a fresh client of the stack.
        let alone = {
            let client = stack.build(&Counts::default());
            Summary::of(
                &drive::stream(
                    client.clone(),
                    &healthy_url,
                    HEALTHY_N,
                    HEALTHY_EVERY,
                    TIMEOUT,
                )
                .await,
            )
        };
        for down in [false, true] {
            let limiter = if down {
                None
            } else {
                Some(Limiter::start(kind, LIMIT).await?)
            };
            // A port bound, never listening, for the case: connection refused.
            let unlistened = tokio::net::TcpSocket::new_v4()?;
            unlistened.bind(([127, 0, 0, 1], 0).into())?;
            let dead = unlistened.local_addr()?;
            let other_url = match &limiter {
                Some(l) => l.url("/items"),
                None => format!("http://{dead}/items"),
            };
            let client = stack.build_to(&Counts::default(), &other_url);
            let (with, other) = tokio::join!(
                drive::stream(
                    client.clone(),
                    &healthy_url,
                    HEALTHY_N,
                    HEALTHY_EVERY,
                    TIMEOUT
                ),
                drive::burst(client.clone(), &other_url, N, CONCURRENCY, TIMEOUT),
            );
            let with = Summary::of(&with);
            let other = Summary::of(&other);
            let grow = ms(with.p99) - ms(alone.p99);
            let met = with.ok == HEALTHY_N && grow < 10.0;
            let _ = writeln!(
                out,
                "| {} | {} | {} / {HEALTHY_N} | {:.1} → {:.1} ms | {:.1} → {:.1} ms | {grow:+.1} ms | {} / {N} | {} |",
                stack.describe(),
                if down {
                    "down (refused connections)"
                } else {
                    "limited"
                },
                with.ok,
                ms(alone.p50),
                ms(with.p50),
                ms(alone.p99),
                ms(with.p99),
                other.ok,
                if met { "yes" } else { "no" },
            );
            if with.ok < HEALTHY_N {
                eprintln!(
                    "  {} / {} / healthy failures: {:?}",
                    kind.name(),
                    stack.name(),
                    with.failures
                );
            }
            drop(limiter);
            tokio::time::sleep(Duration::from_millis(1100)).await;
        }
    }
    let _ = writeln!(out);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Target 3: a fleet
// ---------------------------------------------------------------------------------------

const FLEET: usize = 8;
const FLEET_CONCURRENCY: usize = 4;
const FLEET_SECONDS: u64 = 10;

/// What one client of the fleet reports.
#[derive(Clone, Copy, Default)]
struct ClientFigures {
    ok: u64,
    requests: u64,
    count: Count,
    /// When the client started, in milliseconds since the Unix epoch.
    started: u64,
}

async fn fleet(
    kind: Kind,
    reps: usize,
    seconds: u64,
    in_process: bool,
    record: &Record,
    out: &mut String,
) -> Result<(), BoxError> {
    let capacity = (LIMIT.per_second as u64 * seconds) as f64;
    let _ = writeln!(
        out,
        "### Target 3: {FLEET} independent clients ({}), {FLEET_CONCURRENCY} requests in flight each, {seconds} s on one limiter\n\n\
         Capacity: {capacity:.0} successes in {seconds} s. Met: ≥ 95 % of it used, < 10 % of attempts refused, Jain's index ≥ 0.9.\n",
        if in_process {
            "8 layers in one process"
        } else {
            "8 processes"
        }
    );
    let _ = writeln!(
        out,
        "| client | succeeded within the time | capacity used | attempts | refused / attempts | requests not succeeded within the time | Jain | met |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---|");
    // One row per fleet: a fleet's figures vary far more from run to run than a burst's.
    for stack in measured()
        .into_iter()
        .flat_map(|s| std::iter::repeat_n(s, reps))
    {
        let limiter = Limiter::start(kind, LIMIT).await?;
        let url = limiter.url("/items");
        let figures: Vec<ClientFigures> = if in_process {
            let runs = (0..FLEET).map(|_| {
                let url = url.clone();
                async move { run_client(&url, stack, seconds, FLEET_CONCURRENCY).await }
            });
            futures_join_all(runs).await
        } else {
            spawn_fleet(&url, stack, seconds).await?
        };
        let ok: u64 = figures.iter().map(|f| f.ok).sum();
        let requests: u64 = figures.iter().map(|f| f.requests).sum();
        let attempts: u64 = figures.iter().map(|f| f.count.attempts).sum();
        let refused: u64 = figures.iter().map(|f| f.count.refused).sum();
        let shares: Vec<f64> = figures.iter().map(|f| f.ok as f64).collect();
        let used = ok as f64 * 100.0 / capacity;
        let fairness = jain(&shares);
        let first = figures.iter().map(|f| f.started).min().unwrap_or(0);
        eprintln!(
            "{}: per client ok/refused/ms started after the first {:?}",
            stack.describe(),
            figures
                .iter()
                .map(|f| (f.ok, f.count.refused, f.started - first))
                .collect::<Vec<_>>()
        );
        record.run(
            "t3",
            kind,
            stack,
            &[
                ("used", used),
                ("refused", pct(refused, attempts)),
                ("jain", fairness),
            ],
        );
        let met = used >= 95.0 && pct(refused, attempts) < 10.0 && fairness >= 0.9;
        let _ = writeln!(
            out,
            "| {} | {ok} | {used:.1} % | {attempts} | {:.1} % | {} of {requests} | {fairness:.3} | {} |",
            stack.describe(),
            pct(refused, attempts),
            requests - ok,
            if met { "yes" } else { "no" },
        );
        drop(limiter);
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    let _ = writeln!(out);
    Ok(())
}

async fn futures_join_all<F: std::future::Future<Output = ClientFigures> + Send + 'static>(
    runs: impl Iterator<Item = F>,
) -> Vec<ClientFigures> {
    let tasks: Vec<_> = runs.map(tokio::spawn).collect();
    let mut all = Vec::new();
    for t in tasks {
        all.push(t.await.expect("client task"));
    }
    all
}

/// One client of the fleet: its own stack, saturating `url` for `seconds`.
async fn run_client(url: &str, stack: Stack, seconds: u64, concurrency: usize) -> ClientFigures {
    let started = limiters::client::wall_clock_ms() as u64;
    let counts = Counts::default();
    let client = stack.build_to(&counts, url);
    // The told client's first request waits its phase, within the client's time.
    let (outcomes, time) = drive::saturate_after(
        stack.told_phase(),
        client,
        url,
        concurrency,
        Duration::from_secs(seconds),
        TIMEOUT,
    )
    .await;
    let s = Summary::of(&outcomes);
    ClientFigures {
        ok: drive::succeeded_within(&outcomes, time) as u64,
        requests: s.requests as u64,
        count: counts.total(),
        started,
    }
}

/// Re-spawns this example `FLEET` times as `fleet-client`, each its own process.
async fn spawn_fleet(
    url: &str,
    stack: Stack,
    seconds: u64,
) -> Result<Vec<ClientFigures>, BoxError> {
    let exe = std::env::current_exe()?;
    let children: Vec<_> = (0..FLEET)
        .map(|_| {
            std::process::Command::new(&exe)
                .args([
                    "fleet-client",
                    url,
                    stack.name(),
                    &seconds.to_string(),
                    &FLEET_CONCURRENCY.to_string(),
                ])
                .stdout(std::process::Stdio::piped())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    let mut figures = Vec::new();
    for child in children {
        let output = tokio::task::spawn_blocking(move || child.wait_with_output()).await??;
        let text = String::from_utf8_lossy(&output.stdout);
        let field = |name: &str| -> u64 {
            text.split_whitespace()
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
                .unwrap_or(0)
        };
        if !output.status.success() {
            return Err(format!("a fleet client failed: {}", output.status).into());
        }
        figures.push(ClientFigures {
            ok: field("ok"),
            requests: field("requests"),
            count: Count {
                attempts: field("attempts"),
                refused: field("refused"),
                errors: field("errors"),
            },
            started: field("started"),
        });
    }
    Ok(figures)
}

/// `fleet-client URL STACK SECONDS CONCURRENCY`: one client of the fleet, in its own
/// process; prints its figures on one line.
async fn fleet_client(args: &[String]) -> Result<(), BoxError> {
    let [url, stack, seconds, concurrency] = args else {
        return Err("fleet-client URL STACK SECONDS CONCURRENCY".into());
    };
    let stack = Stack::parse(stack).ok_or(format!("unknown stack {stack}"))?;
    limiters::told::told_share()?;
    let f = run_client(url, stack, seconds.parse()?, concurrency.parse()?).await;
    println!(
        "ok={} requests={} attempts={} refused={} errors={} started={}",
        f.ok, f.requests, f.count.attempts, f.count.refused, f.count.errors, f.started
    );
    Ok(())
}
