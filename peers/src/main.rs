//! tower-backoff against its peers on real loopback servers (issue #30).
//!
//! `cargo run -p tower-backoff-peers --release -- --runs 3` runs four scenarios (rate
//! limiter, random failures, outage, POST then hang-up) against six rows (reqwest-retry,
//! backon, tower's `Retry` with and without `TpsBudget`, tower-backoff with and without
//! pacing), each with its README's defaults. Libraries alternate within a run, scenario by
//! scenario, in an order rotated each run; each table gives min–max over the runs.
//! `--scenario NAME` runs one scenario, `--short` one run at smaller sizes (CI, < 60 s).
//! Only 127.0.0.1 is used; every loop is bounded in count and time.

use http::Method;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tower_backoff_lab::limiters::leaky;
use tower_backoff_peers::clients::Lib;
use tower_backoff_peers::load::{Done, fixed_load, timed_load};
use tower_backoff_peers::report::range;
use tower_backoff_peers::servers;

/// The four scenarios, by their command-line names.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Scenario {
    RateLimiter,
    RandomFailures,
    Outage,
    PostHangUp,
}

impl Scenario {
    const ALL: [Scenario; 4] = [
        Scenario::RateLimiter,
        Scenario::RandomFailures,
        Scenario::Outage,
        Scenario::PostHangUp,
    ];

    fn name(self) -> &'static str {
        match self {
            Scenario::RateLimiter => "rate-limiter",
            Scenario::RandomFailures => "random-failures",
            Scenario::Outage => "outage",
            Scenario::PostHangUp => "post-hang-up",
        }
    }
}

/// Sizes of the scenarios: the issue's, or smaller for `--short`.
#[derive(Clone, Copy)]
struct Sizes {
    rate_requests: u64,
    random_requests: u64,
    outage: Duration,
    outage_window: Duration,
    posts: u64,
}

const FULL: Sizes = Sizes {
    rate_requests: 300,
    random_requests: 1000,
    outage: Duration::from_secs(5),
    outage_window: Duration::from_secs(10),
    posts: 20,
};

const SHORT: Sizes = Sizes {
    rate_requests: 60,
    random_requests: 100,
    outage: Duration::from_secs(1),
    outage_window: Duration::from_millis(1500),
    posts: 3,
};

/// Requests in flight at once in the fixed-size scenarios, and workers in the outage.
const CONCURRENCY: u64 = 20;
/// The rate limiter's rate (per second) and burst: the lab's leaky bucket.
const RATE: f64 = 50.0;
const BURST: f64 = 10.0;
/// The share of answers that are 503 in the random-failures scenario.
const FAILURE_SHARE: f64 = 0.2;

/// The figures of one scenario for one library in one run, by column.
type Figures = Vec<f64>;

async fn run_one(scenario: Scenario, lib: Lib, sizes: Sizes, run: u64) -> std::io::Result<Figures> {
    let client = lib.client();
    Ok(match scenario {
        Scenario::RateLimiter => {
            let limiter = leaky::serve(Instant::now(), leaky::steady(RATE), BURST).await?;
            let url = format!("http://{}/", limiter.addr);
            let origin = Instant::now();
            let done = fixed_load(
                &client,
                Method::GET,
                &url,
                (sizes.rate_requests, CONCURRENCY),
                origin,
            )
            .await;
            let time = origin.elapsed().as_secs_f64();
            let ideal = sizes.rate_requests as f64 / RATE;
            let ok = done.iter().filter(|d| d.ok()).count();
            vec![
                ok as f64,
                time,
                time / ideal,
                limiter.tally.attempts() as f64,
                limiter.tally.refused() as f64,
            ]
        }
        Scenario::RandomFailures => {
            let (server, counts) = servers::random_failures(FAILURE_SHARE, run).await?;
            let url = format!("http://{}/", server.addr);
            let origin = Instant::now();
            let done = fixed_load(
                &client,
                Method::GET,
                &url,
                (sizes.random_requests, CONCURRENCY),
                origin,
            )
            .await;
            let time = origin.elapsed().as_secs_f64();
            let ok = done.iter().filter(|d| d.ok()).count();
            vec![ok as f64, time, counts.attempts() as f64]
        }
        Scenario::Outage => {
            let origin = Instant::now();
            let (server, counts) = servers::outage(origin, sizes.outage, servers::BARE_503).await?;
            let url = format!("http://{}/", server.addr);
            let done = timed_load(&client, &url, (sizes.outage_window, CONCURRENCY), origin).await;
            let per_id = counts.per_id();
            let in_outage: Vec<&Done> = done.iter().filter(|d| d.start < sizes.outage).collect();
            let attempts: u64 = in_outage
                .iter()
                .map(|d| u64::from(per_id.get(&d.id).copied().unwrap_or(0)))
                .sum();
            let amplification = attempts as f64 / in_outage.len().max(1) as f64;
            let recovery = done
                .iter()
                .filter(|d| d.ok())
                .map(|d| d.end.saturating_sub(sizes.outage).as_secs_f64())
                .fold(f64::INFINITY, f64::min);
            let ok = done.iter().filter(|d| d.ok()).count();
            vec![
                amplification,
                recovery,
                ok as f64,
                done.len() as f64,
                in_outage.len() as f64,
                counts.refused() as f64,
            ]
        }
        Scenario::PostHangUp => {
            let (server, counts) = servers::post_hang_up().await?;
            let url = format!("http://{}/orders", server.addr);
            let origin = Instant::now();
            let done = fixed_load(
                &client,
                Method::POST,
                &url,
                (sizes.posts, CONCURRENCY),
                origin,
            )
            .await;
            let per_id = counts.per_id();
            let processed: u64 = per_id.values().map(|&n| u64::from(n)).sum();
            let most = per_id.values().copied().max().unwrap_or(0);
            let answered = done.iter().filter(|d| d.status().is_some()).count();
            vec![
                processed as f64,
                f64::from(most),
                processed.saturating_sub(per_id.len() as u64) as f64,
                answered as f64,
                origin.elapsed().as_secs_f64(),
            ]
        }
    })
}

/// The markdown table of one scenario: one row per library, min–max over runs per column.
fn table(
    scenario: Scenario,
    sizes: Sizes,
    results: &BTreeMap<(Scenario, usize), Vec<Figures>>,
) -> String {
    let (title, header) = match scenario {
        Scenario::RateLimiter => (
            format!(
                "Rate limiter: {RATE} r/s, burst {BURST}, 429 + `Retry-After: 1`; {} GETs, {CONCURRENCY} at a time (ideal {:.1} s)",
                sizes.rate_requests,
                sizes.rate_requests as f64 / RATE
            ),
            format!("| library | succeeded /{} | time s | × ideal | attempts | 429s |", sizes.rate_requests),
        ),
        Scenario::RandomFailures => (
            format!(
                "Random failures: {:.0} % 503 (seeded, no `Retry-After`); {} GETs, {CONCURRENCY} at a time",
                FAILURE_SHARE * 100.0,
                sizes.random_requests
            ),
            format!("| library | succeeded /{} | time s | attempts |", sizes.random_requests),
        ),
        Scenario::Outage => (
            format!(
                "Outage: 503 to everything for {} s, then 200; {CONCURRENCY} workers, GETs back to back for {} s",
                sizes.outage.as_secs_f64(),
                sizes.outage_window.as_secs_f64()
            ),
            "| library | attempts per request started in the outage | requests started in the outage | attempts the server got in the outage | recovery s | succeeded / requests |".into(),
        ),
        Scenario::PostHangUp => (
            format!(
                "POST then hang-up: {} POSTs, {CONCURRENCY} at a time; the server reads each, counts it processed, closes unanswered",
                sizes.posts
            ),
            format!(
                "| library | times processed /{} | most times one POST was processed | duplicates | answered | time s |",
                sizes.posts
            ),
        ),
    };
    let decimals: &[usize] = match scenario {
        Scenario::RateLimiter => &[0, 2, 2, 0, 0],
        Scenario::RandomFailures => &[0, 2, 0],
        Scenario::Outage => &[],
        Scenario::PostHangUp => &[0, 0, 0, 0, 1],
    };
    let mut out = format!("#### {title}\n\n{header}\n|");
    out.push_str(&"---|".repeat(header.matches('|').count() - 1));
    out.push('\n');
    for (i, lib) in Lib::ALL.iter().enumerate() {
        let Some(runs) = results.get(&(scenario, i)) else {
            continue;
        };
        let column = |c: usize| runs.iter().map(|f| f[c]).collect::<Vec<_>>();
        let cells: Vec<String> = match scenario {
            Scenario::Outage => vec![
                range(&column(0), 2),
                range(&column(4), 0),
                range(&column(5), 0),
                range(&column(1), 2),
                format!("{} / {}", range(&column(2), 0), range(&column(3), 0)),
            ],
            _ => (0..decimals.len())
                .map(|c| range(&column(c), decimals[c]))
                .collect(),
        };
        out.push_str(&format!("| {} | {} |\n", lib.name(), cells.join(" | ")));
    }
    out
}

fn usage() -> ! {
    eprintln!(
        "usage: peers [--runs N] [--scenario rate-limiter|random-failures|outage|post-hang-up] [--short]"
    );
    std::process::exit(2);
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut runs = 3u64;
    let mut short = false;
    let mut only = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => {
                runs = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|&n| (1..=20).contains(&n))
                    .unwrap_or_else(|| usage())
            }
            "--short" => short = true,
            "--scenario" => {
                let name = args.next().unwrap_or_else(|| usage());
                only = Some(
                    Scenario::ALL
                        .into_iter()
                        .find(|s| s.name() == name)
                        .unwrap_or_else(|| usage()),
                );
            }
            _ => usage(),
        }
    }
    if short {
        runs = 1;
    }
    let sizes = if short { SHORT } else { FULL };
    let scenarios: Vec<Scenario> = Scenario::ALL
        .into_iter()
        .filter(|s| only.is_none_or(|o| o == *s))
        .collect();

    let started = Instant::now();
    let mut results: BTreeMap<(Scenario, usize), Vec<Figures>> = BTreeMap::new();
    for run in 0..runs {
        for &scenario in &scenarios {
            // Rotated each run, so that no library always goes first after another.
            for k in 0..Lib::ALL.len() {
                let i = (k + run as usize) % Lib::ALL.len();
                let figures = run_one(scenario, Lib::ALL[i], sizes, run + 1).await?;
                eprintln!(
                    "run {} {:<16} {:<48} {:?}",
                    run + 1,
                    scenario.name(),
                    Lib::ALL[i].name(),
                    figures
                        .iter()
                        .map(|f| (f * 100.0).round() / 100.0)
                        .collect::<Vec<_>>()
                );
                results.entry((scenario, i)).or_default().push(figures);
            }
        }
    }
    println!(
        "{runs} run(s){}, {:.0} s in all; min–max over runs.\n",
        if short { " (--short sizes)" } else { "" },
        started.elapsed().as_secs_f64()
    );
    for &scenario in &scenarios {
        println!("{}", table(scenario, sizes, &results));
    }
    Ok(())
}
