//! Issue #31: fleets of 8 processes sharing their pacing in one real `redis-server`,
//! against each limiter of [`Kind::ALGORITHMS`] (`limiters -- redis-fleet [LIMITER|all]
//! [--reps N] [--parts learning,told,phases,faults] [--rate R --burst B] [--processes N]
//! [--record FILE]`): the three of the targets and the leaky bucket. `--rate`, `--burst` and
//! `--processes` run the fleets away from the targets' 50 r/s and 8 processes (not the told
//! fleet). `--record` appends each Redis fleet's run of parts 1 and 2 to `FILE`, as
//! `limiters --record` does, for `simulate -- limiters --compare FILE`.
//!
//! Every process is this binary again (`fleet-member`), with its own client stack; all
//! start at one wall-clock instant (a second after they are spawned, so that none is
//! still starting) and report their successes and refusals per second since then, which
//! sets the fleet on one timeline. Each fleet run has a fresh limiter and a fresh key
//! prefix in Redis.
//!
//! 1. **learning**: `retry+pacing+redis`, 10 s: ≥ 95 % of the capacity used, < 3 %
//!    refused, Jain's index ≥ 0.95; beside it, `retry+pacing` (no Redis) as the baseline.
//! 2. **told**: `told-redis` (the fleet told 49 r/s once), 10 s: ≥ 98 % used, < 1 % refused.
//! 3. **phases**: 2 processes for 5 s, then 8 for 5 s, then 4 for 5 s: each phase's
//!    successes per second, its first second apart, within 5 % of the 50 r/s limit.
//! 4. **faults**: a learning fleet for 15 s; Redis killed at 5 s, started again (empty)
//!    at 10 s: no request fails, < 5 % of attempts refused.

use super::{BoxError, FLEET, FLEET_CONCURRENCY, LIMIT, Record, TIMEOUT, flag, pct};
use std::fmt::Write as _;
use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;
use tower_backoff_lab::limiters::client::{Count, Counts, SharedPacing, Stack, wall_clock_ms};
use tower_backoff_lab::limiters::drive::{self, jain};
use tower_backoff_lab::limiters::redis_server::RedisServer;
use tower_backoff_lab::limiters::{Kind, Limiter, RateLimit};

/// The processes' common start, after their spawn: time for 8 processes to be up.
const START_AFTER: Duration = Duration::from_secs(1);
const SECOND: Duration = Duration::from_secs(1);
const PARTS: [&str; 4] = ["learning", "told", "phases", "faults"];

/// The limit and the number of processes of the steady fleets: the targets' unless told.
#[derive(Clone, Copy, Debug)]
struct Setup {
    limit: RateLimit,
    processes: usize,
}

static SETUP: OnceLock<Setup> = OnceLock::new();

fn setup() -> Setup {
    *SETUP.get_or_init(|| Setup {
        limit: LIMIT,
        processes: FLEET,
    })
}

/// `--rate`, `--burst` and `--processes`, each at least 1.
fn setup_from(args: &[String]) -> Result<Setup, BoxError> {
    let number = |name: &str, default: u32| -> Result<u32, BoxError> {
        let n = flag(args, name).map_or(Ok(default), str::parse)?;
        (n >= 1)
            .then_some(n)
            .ok_or(format!("{name}: at least 1").into())
    };
    let limit = RateLimit::new(
        number("--rate", LIMIT.per_second)?,
        number("--burst", LIMIT.burst)?,
    );
    let processes = number("--processes", FLEET as u32)? as usize;
    Ok(Setup { limit, processes })
}

/// One process's part in a fleet: when it starts after the fleet, and for how long.
#[derive(Clone, Copy, Debug)]
struct Part {
    delay: Duration,
    time: Duration,
}

impl Part {
    fn new(delay_s: u64, time_s: u64) -> Self {
        let (delay, time) = (Duration::from_secs(delay_s), Duration::from_secs(time_s));
        Self { delay, time }
    }

    /// `n` processes for the same part.
    fn times(self, n: usize) -> impl Iterator<Item = Part> {
        std::iter::repeat_n(self, n)
    }
}

/// What one process reports.
#[derive(Clone, Debug, Default)]
struct Member {
    /// Successes within its time.
    ok: u64,
    requests: u64,
    /// Requests that ended in anything but a success, whenever they ended.
    failed: u64,
    count: Count,
    /// Successes, refusals and failed requests per second since the fleet's start
    /// (whenever they came).
    ok_per_second: Vec<u64>,
    refused_per_second: Vec<u64>,
    failed_per_second: Vec<u64>,
    failures: Vec<String>,
}

/// `redis-fleet [LIMITER|all] [--reps N] [--parts a,b]`.
pub async fn main(args: &[String]) -> Result<(), BoxError> {
    let began = std::time::Instant::now();
    let kinds = match args.first().filter(|a| !a.starts_with("--")) {
        None => Kind::ALGORITHMS.to_vec(),
        Some(all) if all == "all" => Kind::ALGORITHMS.to_vec(),
        Some(name) => vec![Kind::parse(name).ok_or(format!("unknown limiter {name}"))?],
    };
    let reps: usize = flag(args, "--reps").map_or(Ok(3), str::parse)?;
    let parts: Vec<&str> = flag(args, "--parts").map_or(PARTS.to_vec(), |p| p.split(',').collect());
    if let Some(part) = parts.iter().find(|p| !PARTS.contains(p)) {
        return Err(format!("unknown part {part}: {}", PARTS.join(", ")).into());
    }
    let asked = setup_from(args)?;
    SETUP
        .set(asked)
        .map_err(|_| "the fleets' setup is set once")?;
    if asked.limit != LIMIT && parts.contains(&"told") {
        return Err("--rate, --burst: the told fleet is told 49 r/s; leave out `told`".into());
    }
    let targets = asked.limit == LIMIT && asked.processes == FLEET;
    if !targets && flag(args, "--record").is_some() {
        return Err(
            "--record keeps the targets' fleets: leave out --rate, --burst, --processes".into(),
        );
    }
    let record = Record::open(flag(args, "--record"))?;
    let Some(mut redis) = RedisServer::start_unless_missing().await? else {
        println!("## redis-server: not available, no fleet run (see stderr)");
        return Ok(());
    };
    println!(
        "limit {} r/s (burst {}); fleets of {} processes, {FLEET_CONCURRENCY} requests in flight each, \
         sharing pacing in redis-server (127.0.0.1:{}); {} cores; {reps} runs per row\n",
        asked.limit.per_second,
        asked.limit.burst,
        asked.processes,
        redis.port,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for kind in kinds {
        let mut out = String::new();
        if let Err(why) = Limiter::start(kind, asked.limit).await {
            println!("## {}: not available ({why})\n", kind.name());
            continue;
        }
        let _ = writeln!(out, "## {} — {}\n", kind.name(), kind.model());
        for part in &parts {
            match *part {
                "learning" => learning(kind, reps, &redis, &record, &mut out).await?,
                "told" => told(kind, reps, &redis, &record, &mut out).await?,
                "phases" => phases(kind, reps, &redis, &mut out).await?,
                _ => faults(kind, reps, &mut redis, &mut out).await?,
            }
        }
        print!("{out}");
    }
    println!("run time: {:.0} s", began.elapsed().as_secs_f64());
    Ok(())
}

/// A fresh name per fleet run, for its keys in Redis.
fn run_id(kind: Kind) -> String {
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{}-{n}", kind.name(), std::process::id())
}

/// One fleet of `stack` on a fresh `kind` limiter, one process per part, while `during`
/// runs (given the fleet's start, wall clock ms).
async fn fleet<F, Fut>(
    kind: Kind,
    stack: Stack,
    parts: &[Part],
    redis: &str,
    during: F,
) -> Result<Vec<Member>, BoxError>
where
    F: FnOnce(f64) -> Fut,
    Fut: Future<Output = Result<(), BoxError>>,
{
    let limiter = Limiter::start(kind, setup().limit).await?;
    let shared = SharedPacing::new(redis.to_owned(), &run_id(kind));
    let start = wall_clock_ms() + START_AFTER.as_secs_f64() * 1000.0;
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for part in parts {
        let child = std::process::Command::new(&exe)
            .arg("fleet-member")
            .arg(limiter.url("/items"))
            .arg(stack.name())
            .arg(format!("{start:.0}"))
            .arg(part.delay.as_millis().to_string())
            .arg(part.time.as_millis().to_string())
            .arg(FLEET_CONCURRENCY.to_string())
            .env(SharedPacing::URL_VAR, &shared.url)
            .env(SharedPacing::PREFIX_VAR, &shared.prefix)
            .stdout(std::process::Stdio::piped())
            .spawn()?;
        children.push(tokio::task::spawn_blocking(move || {
            child.wait_with_output()
        }));
    }
    let (members, during) = tokio::join!(collect(children), during(start));
    during?;
    drop(limiter);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    members
}

type Waited = tokio::task::JoinHandle<std::io::Result<std::process::Output>>;

/// Each process's report, once it has exited.
async fn collect(children: Vec<Waited>) -> Result<Vec<Member>, BoxError> {
    let mut members = Vec::new();
    for child in children {
        let output = child.await??;
        if !output.status.success() {
            return Err(format!("a fleet member failed: {}", output.status).into());
        }
        members.push(parse(&String::from_utf8_lossy(&output.stdout)));
    }
    Ok(members)
}

/// A report: `key=value` on its first line, then `failure <n> <what>` lines.
fn parse(text: &str) -> Member {
    let field = |name: &str| {
        text.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .unwrap_or("")
    };
    let number = |name: &str| field(name).parse().unwrap_or(0);
    let list = |name: &str| {
        let values = field(name).split(',').filter(|v| !v.is_empty());
        values.map(|v| v.parse().unwrap_or(0)).collect()
    };
    Member {
        ok: number("ok"),
        requests: number("requests"),
        failed: number("failed"),
        count: Count {
            attempts: number("attempts"),
            refused: number("refused"),
            errors: number("errors"),
        },
        ok_per_second: list("ok_per_second"),
        refused_per_second: list("refused_per_second"),
        failed_per_second: list("failed_per_second"),
        failures: text
            .lines()
            .filter_map(|l| l.strip_prefix("failure "))
            .map(str::to_owned)
            .collect(),
    }
}

/// `fleet-member URL STACK START DELAY_MS TIME_MS CONCURRENCY`: one process of a fleet
/// (its Redis from the environment), from `START` (wall clock ms) + `DELAY_MS`.
pub async fn member(args: &[String]) -> Result<(), BoxError> {
    let [url, stack, start, delay, time, concurrency] = args else {
        return Err("fleet-member URL STACK START DELAY_MS TIME_MS CONCURRENCY".into());
    };
    let stack = Stack::parse(stack).ok_or(format!("unknown stack {stack}"))?;
    let (start, delay): (f64, f64) = (start.parse()?, delay.parse()?);
    let time = Duration::from_millis(time.parse()?);
    let counts = Counts::default();
    let client = stack.build_to(&counts, url);
    let late = wall_clock_ms() - (start + delay);
    if late > 0.0 {
        eprintln!(
            "fleet-member {}: started {late:.0} ms late",
            std::process::id()
        );
    }
    tokio::time::sleep(Duration::from_secs_f64((-late).max(0.0) / 1000.0)).await;
    let began = wall_clock_ms();
    let outcomes = drive::saturate(client, url, concurrency.parse()?, time, TIMEOUT).await;
    let second = |at_ms: f64| ((at_ms - start) / 1000.0).max(0.0) as usize;
    let ended = |ok: bool| {
        let outcomes = outcomes.iter().filter(move |o| o.ok() == ok);
        outcomes.map(|o| second(began + o.ended.as_secs_f64() * 1000.0))
    };
    let refused_at = counts.refused_at().into_iter().map(second);
    let summary = drive::Summary::of(&outcomes);
    let c = counts.total();
    println!(
        "ok={} requests={} failed={} attempts={} refused={} errors={} ok_per_second={} refused_per_second={} failed_per_second={}",
        drive::succeeded_within(&outcomes, time),
        summary.requests,
        summary.requests - summary.ok,
        c.attempts,
        c.refused,
        c.errors,
        histogram(ended(true)),
        histogram(refused_at),
        histogram(ended(false)),
    );
    for (what, n) in summary.failures {
        println!("failure {n} {what}");
    }
    Ok(())
}

/// Counts per second, comma-separated from second 0.
fn histogram(seconds: impl Iterator<Item = usize>) -> String {
    let mut counts: Vec<u64> = Vec::new();
    for s in seconds {
        if counts.len() <= s {
            counts.resize(s + 1, 0);
        }
        counts[s] += 1;
    }
    let counts: Vec<String> = counts.iter().map(u64::to_string).collect();
    counts.join(",")
}

/// The fleet's per-second counts, added up over its members.
fn per_second(members: &[Member], of: impl Fn(&Member) -> &[u64]) -> Vec<u64> {
    let mut sum: Vec<u64> = Vec::new();
    for member in members {
        let counts = of(member);
        if sum.len() < counts.len() {
            sum.resize(counts.len(), 0);
        }
        for (s, n) in counts.iter().enumerate() {
            sum[s] += n;
        }
    }
    sum
}

/// The fleet's counts of seconds `[from, to)`, added up.
fn within(counts: &[u64], from: usize, to: usize) -> u64 {
    counts.iter().skip(from).take(to.saturating_sub(from)).sum()
}

/// The seconds with refusals: `second: count`, or "none".
fn refusals_by_second(members: &[Member]) -> String {
    let refused = per_second(members, |m| &m.refused_per_second);
    let seconds: Vec<String> = refused
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(s, n)| format!("{s} s: {n}"))
        .collect();
    if seconds.is_empty() {
        "none".into()
    } else {
        seconds.join(", ")
    }
}

/// The fleet's figures over its members.
struct Totals {
    ok: u64,
    attempts: u64,
    refused: u64,
    failed: u64,
    requests: u64,
    jain: f64,
}

impl Totals {
    fn of(members: &[Member]) -> Self {
        let shares: Vec<f64> = members.iter().map(|m| m.ok as f64).collect();
        Self {
            ok: members.iter().map(|m| m.ok).sum(),
            attempts: members.iter().map(|m| m.count.attempts).sum(),
            refused: members.iter().map(|m| m.count.refused).sum(),
            failed: members.iter().map(|m| m.failed).sum(),
            requests: members.iter().map(|m| m.requests).sum(),
            jain: jain(&shares),
        }
    }

    fn refused_pct(&self) -> f64 {
        pct(self.refused, self.attempts)
    }

    /// The share of the limiter's capacity over `seconds` used, in %.
    fn used(&self, seconds: u64) -> f64 {
        self.ok as f64 * 100.0 / (setup().limit.per_second as u64 * seconds) as f64
    }
}

/// Every failure any member saw, on stderr.
fn log_failures(kind: Kind, stack: Stack, members: &[Member]) {
    let failures: Vec<&String> = members.iter().flat_map(|m| &m.failures).collect();
    if !failures.is_empty() {
        eprintln!(
            "  {} / {}: failures {failures:?}",
            kind.name(),
            stack.name()
        );
    }
}

// ---------------------------------------------------------------------------------------
// 1 and 2: a fleet learning the limit, and one told it
// ---------------------------------------------------------------------------------------

const SECONDS: u64 = 10;

/// What a row is held to: the least capacity used, the most refused (%, not reached),
/// the least Jain's index.
type Targets = (f64, f64, f64);

async fn learning(
    kind: Kind,
    reps: usize,
    redis: &RedisServer,
    record: &Record,
    out: &mut String,
) -> Result<(), BoxError> {
    let _ = writeln!(
        out,
        "### Learning the limit: {} processes, {SECONDS} s (met: ≥ 95 % used, < 3 % refused, Jain ≥ 0.95)\n",
        setup().processes
    );
    let stacks = [Stack::RetryPacing, Stack::RetryPacingRedis];
    let targets = (95.0, 3.0, 0.95);
    steady(kind, &stacks, reps, redis, targets, record, out).await
}

async fn told(
    kind: Kind,
    reps: usize,
    redis: &RedisServer,
    record: &Record,
    out: &mut String,
) -> Result<(), BoxError> {
    let _ = writeln!(
        out,
        "### Told the fleet's rate once ({} r/s): {FLEET} processes, {SECONDS} s (met: ≥ 98 % used, < 1 % refused)\n",
        tower_backoff_lab::limiters::told::FLEET_RATE
    );
    let targets = (98.0, 1.0, 0.0);
    steady(kind, &[Stack::ToldRedis], reps, redis, targets, record, out).await
}

/// `reps` fleets of each stack, all processes for [`SECONDS`], one row each; those sharing
/// their pacing in Redis also to `record`.
async fn steady(
    kind: Kind,
    stacks: &[Stack],
    reps: usize,
    redis: &RedisServer,
    (least_used, most_refused, least_jain): Targets,
    record: &Record,
    out: &mut String,
) -> Result<(), BoxError> {
    let _ = writeln!(
        out,
        "| client | run | succeeded within the time | capacity used | attempts | refused / attempts | requests failed | Jain | met |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut notes = Vec::new();
    let parts: Vec<Part> = Part::new(0, SECONDS).times(setup().processes).collect();
    for &stack in stacks {
        for run in 1..=reps {
            let members = fleet(kind, stack, &parts, &redis.url(), no_fault).await?;
            log_failures(kind, stack, &members);
            let t = Totals::of(&members);
            let used = t.used(SECONDS);
            if stack.needs_redis() {
                let figures = [
                    ("used", used),
                    ("refused", t.refused_pct()),
                    ("jain", t.jain),
                ];
                record.run("t3", kind, stack, &figures);
            }
            let met = used >= least_used
                && t.refused_pct() < most_refused
                && t.jain >= least_jain
                && t.failed == 0;
            let _ = writeln!(
                out,
                "| {} | {run} | {} | {used:.1} % | {} | {:.1} % | {} of {} | {:.3} | {} |",
                stack.name(),
                t.ok,
                t.attempts,
                t.refused_pct(),
                t.failed,
                t.requests,
                t.jain,
                yes(met)
            );
            let ok = per_second(&members, |m| &m.ok_per_second);
            notes.push(format!(
                "{} run {run}: refused {}; successes per second {ok:?}",
                stack.name(),
                refusals_by_second(&members)
            ));
        }
    }
    write_notes(out, "By second since the start", &notes);
    Ok(())
}

async fn no_fault(_: f64) -> Result<(), BoxError> {
    Ok(())
}

fn yes(met: bool) -> &'static str {
    if met { "yes" } else { "no" }
}

fn write_notes(out: &mut String, title: &str, notes: &[String]) {
    let _ = writeln!(out, "\n{title}:\n");
    for note in notes {
        let _ = writeln!(out, "- {note}");
    }
    let _ = writeln!(out);
}

// ---------------------------------------------------------------------------------------
// 3: processes joining and leaving
// ---------------------------------------------------------------------------------------

/// The phases: (from second, to second, processes).
const PHASES: [(usize, usize, usize); 3] = [(0, 5, 2), (5, 10, 8), (10, 15, 4)];

/// 2 processes all along, 2 from 5 s on, 4 from 5 s to 10 s.
fn phase_parts() -> Vec<Part> {
    let parts = Part::new(0, 15).times(2).chain(Part::new(5, 10).times(2));
    parts.chain(Part::new(5, 5).times(4)).collect()
}

async fn phases(
    kind: Kind,
    reps: usize,
    redis: &RedisServer,
    out: &mut String,
) -> Result<(), BoxError> {
    let _ = writeln!(
        out,
        "### Joining and leaving: 2 processes for 5 s, 8 for 5 s, 4 for 5 s (retry+pacing+redis)\n\n\
         The fleet's successes per second, by when each ended: each phase's first second apart, then the mean of its \
         other 4 seconds. Met: that mean within 5 % of {} r/s.\n",
        setup().limit.per_second
    );
    let _ = writeln!(
        out,
        "| run | phase | processes | first second | seconds 2–5, mean | vs the limit | refused in the phase | met |"
    );
    let _ = writeln!(out, "|---:|---|---:|---:|---:|---:|---:|---|");
    let mut notes = Vec::new();
    let stack = Stack::RetryPacingRedis;
    for run in 1..=reps {
        let members = fleet(kind, stack, &phase_parts(), &redis.url(), no_fault).await?;
        log_failures(kind, stack, &members);
        let ok = per_second(&members, |m| &m.ok_per_second);
        let refused = per_second(&members, |m| &m.refused_per_second);
        for (from, to, processes) in PHASES {
            let first = within(&ok, from, from + 1);
            let rest = within(&ok, from + 1, to) as f64 / (to - from - 1) as f64;
            let off = (rest / setup().limit.per_second as f64 - 1.0) * 100.0;
            let _ = writeln!(
                out,
                "| {run} | {from}–{to} s | {processes} | {first} | {rest:.1} r/s | {off:+.1} % | {} | {} |",
                within(&refused, from, to),
                yes(off.abs() <= 5.0)
            );
        }
        let t = Totals::of(&members);
        notes.push(format!(
            "run {run}: successes per second {ok:?}; refused per second {refused:?}; {} of {} attempts refused, {} requests failed",
            t.refused, t.attempts, t.failed
        ));
    }
    write_notes(out, "Per second since the start", &notes);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 4: Redis killed and started again
// ---------------------------------------------------------------------------------------

const FAULT_SECONDS: u64 = 15;
/// Redis is killed this long after the start, and started again (empty) at the second.
const KILL_AT: u64 = 5;
const RESTART_AT: u64 = 10;

async fn faults(
    kind: Kind,
    reps: usize,
    redis: &mut RedisServer,
    out: &mut String,
) -> Result<(), BoxError> {
    let _ = writeln!(
        out,
        "### Redis killed at {KILL_AT} s, started again empty at {RESTART_AT} s: retry+pacing+redis, {} processes, {FAULT_SECONDS} s \
         (met: no request failed, < 5 % refused)\n",
        setup().processes
    );
    let _ = writeln!(
        out,
        "| run | succeeded within the time | capacity used | attempts | refused / attempts | refused 0–5 / 5–10 / 10 s–end | requests failed | failed 0–5 / 5–10 / 10 s–end | met |"
    );
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---|---:|---|---|");
    let mut notes = Vec::new();
    let stack = Stack::RetryPacingRedis;
    let parts: Vec<Part> = Part::new(0, FAULT_SECONDS)
        .times(setup().processes)
        .collect();
    for run in 1..=reps {
        let url = redis.url();
        let members = fleet(kind, stack, &parts, &url, |start| {
            kill_and_restart(redis, start)
        })
        .await?;
        log_failures(kind, stack, &members);
        let t = Totals::of(&members);
        let refused = per_second(&members, |m| &m.refused_per_second);
        let failed = per_second(&members, |m| &m.failed_per_second);
        let met = t.failed == 0 && t.refused_pct() < 5.0;
        let _ = writeln!(
            out,
            "| {run} | {} | {:.1} % | {} | {:.1} % | {} | {} of {} | {} | {} |",
            t.ok,
            t.used(FAULT_SECONDS),
            t.attempts,
            t.refused_pct(),
            by_phase(&refused),
            t.failed,
            t.requests,
            by_phase(&failed),
            yes(met)
        );
        let ok = per_second(&members, |m| &m.ok_per_second);
        notes.push(format!(
            "run {run}: successes per second {ok:?}; refused per second {refused:?}"
        ));
    }
    write_notes(out, "Per second since the start", &notes);
    Ok(())
}

/// Counts before the kill, while Redis is down, and after its restart (the tail with it).
fn by_phase(counts: &[u64]) -> String {
    let before = within(counts, 0, KILL_AT as usize);
    let down = within(counts, KILL_AT as usize, RESTART_AT as usize);
    let after = within(counts, RESTART_AT as usize, usize::MAX);
    format!("{before} / {down} / {after}")
}

/// Kills Redis at [`KILL_AT`] and starts it again at [`RESTART_AT`] after `start`.
async fn kill_and_restart(redis: &mut RedisServer, start: f64) -> Result<(), BoxError> {
    sleep_until(start, KILL_AT).await;
    redis.kill();
    sleep_until(start, RESTART_AT).await;
    redis.restart_or_unavailable().await?;
    Ok(())
}

/// Sleeps until `seconds` after `start` (wall clock ms).
async fn sleep_until(start: f64, seconds: u64) {
    let at = start + (seconds * 1000) as f64;
    let wait = ((at - wall_clock_ms()) / 1000.0).max(0.0);
    tokio::time::sleep(SECOND.mul_f64(wait)).await;
}
