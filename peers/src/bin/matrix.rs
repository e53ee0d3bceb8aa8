//! Issue #29's matrix: the pacing stack against the retry layer alone and its peers.
//!
//! `cargo run -p tower-backoff-peers --release --bin matrix -- --runs 10` runs six rows on
//! real servers on 127.0.0.1. They are four rate limiters, random failures, an outage, a
//! changing limit, two destinations and a slow server. `--short` is one run of the two
//! tower-backoff stacks at small sizes (CI, under 90 s). `--row N` runs one row.
//!
//! Libraries alternate within a run, in an order rotated each run. Each row prints a
//! markdown table, min–max over the runs. The targets list then says, per row, whether the
//! pacing stack met them. `--case TEXT` runs the cases whose label holds `TEXT` (`--case
//! nginx`: row 1 on nginx). Missed targets still exit 0. A limiter that cannot start (no
//! haproxy, no node) is skipped with its reason. Under `CI=true` that is an error (exit 1).
//!
//! `--record FILE` runs rows 2 to 4 for the two tower-backoff stacks, at full size, and
//! appends a line per run to `FILE`: what `simulate -- limiters --compare FILE` sets the
//! models beside (`row2 random-503 retry+pacing ok=998 time=7.4`).

use std::time::Instant;
use tower_backoff_lab::limiters::client::Stack;
use tower_backoff_lab::matrix::RECORDED_ROWS;
use tower_backoff_peers::clients::Lib;
use tower_backoff_peers::matrix::tables::{Results, table};
use tower_backoff_peers::matrix::{Case, FULL, LIBS, SHORT, SHORT_LIBS, Sizes, targets};

/// The command line.
struct Args {
    runs: u64,
    short: bool,
    row: Option<u8>,
    case: Option<String>,
    record: Option<String>,
}

fn usage() -> ! {
    eprintln!(
        "usage: matrix [--runs N (1 to 20)] [--short] [--row N (1 to 6)] [--case TEXT] [--record FILE]"
    );
    std::process::exit(2);
}

fn parse_args() -> Args {
    let mut parsed = Args {
        runs: 3,
        short: false,
        row: None,
        case: None,
        record: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |range: std::ops::RangeInclusive<u64>| {
            args.next()
                .and_then(|n| n.parse().ok())
                .filter(|n| range.contains(n))
                .unwrap_or_else(|| usage())
        };
        match arg.as_str() {
            "--runs" => parsed.runs = number(1..=20),
            "--row" => parsed.row = Some(number(1..=6) as u8),
            "--short" => parsed.short = true,
            "--case" => parsed.case = Some(args.next().unwrap_or_else(|| usage())),
            "--record" => parsed.record = Some(args.next().unwrap_or_else(|| usage())),
            _ => usage(),
        }
    }
    if parsed.short {
        parsed.runs = 1;
    }
    if parsed.record.is_some() && (parsed.short || parsed.row.is_some() || parsed.case.is_some()) {
        eprintln!("--record runs rows 2 to 4 at full size: not with --short, --row or --case");
        std::process::exit(2);
    }
    if parsed.record.is_some() && std::env::var_os("MATRIX_OUTAGE_ANSWER").is_some() {
        eprintln!("--record keeps row 3's outage of bare 503s, not MATRIX_OUTAGE_ANSWER");
        std::process::exit(2);
    }
    parsed
}

/// What one run measures, and where its figures go.
struct Plan<'a> {
    sizes: &'a Sizes,
    libs: &'a [Lib],
}

/// Runs every library on `case` once, in an order rotated by `run`; `Err`: a server did
/// not start (the case is then skipped).
async fn run_case(
    case: Case,
    plan: &Plan<'_>,
    run: u64,
    results: &mut Results,
) -> Result<(), String> {
    for k in 0..plan.libs.len() {
        let lib = plan.libs[(k + run as usize) % plan.libs.len()];
        let i = LIBS
            .iter()
            .position(|&l| l == lib)
            .expect("a measured library");
        let figures = case
            .run(lib, plan.sizes, run + 1)
            .await
            .map_err(|why| why.0)?;
        eprintln!(
            "run {} {:<45} {:<48} ok {} / {} in {:.2} s, {} attempts, {:.1} % refused, {:?}",
            run + 1,
            targets::label(case),
            LIBS[i].name(),
            figures.completed,
            figures.requests,
            figures.time,
            figures.attempts,
            figures.refused_percent(),
            figures
                .specific
                .iter()
                .map(|f| (f * 100.0).round() / 100.0)
                .collect::<Vec<_>>()
        );
        results.entry((case, i)).or_default().push(figures);
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    let args = parse_args();
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    let (sizes, libs) = match (args.short, &args.record) {
        (true, _) => (SHORT, &SHORT_LIBS[..]),
        (false, Some(_)) => (FULL, &SHORT_LIBS[..]),
        (false, None) => (FULL, &LIBS[..]),
    };
    let plan = Plan {
        sizes: &sizes,
        libs,
    };
    let cases: Vec<Case> = Case::all()
        .into_iter()
        .filter(|c| args.row.is_none_or(|r| r == c.row()))
        .filter(|c| args.record.is_none() || RECORDED.contains(c))
        .filter(|&c| {
            args.case
                .as_ref()
                .is_none_or(|t| targets::label(c).contains(t))
        })
        .collect();
    let started = Instant::now();
    let mut results = Results::new();
    let mut skipped: Vec<(Case, String)> = Vec::new();
    for run in 0..args.runs {
        for &case in &cases {
            if skipped.iter().any(|(c, _)| *c == case) {
                continue;
            }
            if let Err(why) = run_case(case, &plan, run, &mut results).await {
                if ci {
                    eprintln!(
                        "{}: a server could not start under CI=true: {why}",
                        targets::label(case)
                    );
                    std::process::exit(1);
                }
                results.retain(|(c, _), _| *c != case);
                skipped.push((case, why));
            }
        }
    }
    print_report(&args, &sizes, &cases, &results, &skipped, started);
    if let Some(path) = &args.record
        && let Err(e) = record(path, &results)
    {
        eprintln!("--record {path}: {e}");
        std::process::exit(1);
    }
}

/// The rows `--record` runs, as the models have them (named by `RECORDED_ROWS`).
const RECORDED: [Case; 3] = [Case::Failures, Case::Outage, Case::ChangingLimit];

/// Appends each run's figures of the recorded rows to `path`, a line per run and stack.
fn record(path: &str, results: &Results) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut lines = String::new();
    for (case, (target, server)) in RECORDED.into_iter().zip(RECORDED_ROWS) {
        for lib in SHORT_LIBS {
            let i = LIBS
                .iter()
                .position(|&l| l == lib)
                .expect("a measured library");
            let stack = match lib {
                Lib::TowerBackoffPaced => Stack::RetryPacing,
                _ => Stack::Retry,
            };
            for f in results.get(&(case, i)).into_iter().flatten() {
                let figures = match case {
                    Case::Failures => format!("ok={} time={:.4}", f.completed, f.time),
                    Case::Outage => format!("recovery={:.4}", f.specific[0]),
                    _ => format!(
                        "fall={:.4} rise={:.4} refused={:.4} ok={}",
                        f.specific[0],
                        f.specific[1],
                        f.refused_percent(),
                        f.completed
                    ),
                };
                lines.push_str(&format!("{target} {server} {} {figures}\n", stack.name()));
            }
        }
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(lines.as_bytes())
}

fn print_report(
    args: &Args,
    sizes: &Sizes,
    cases: &[Case],
    results: &Results,
    skipped: &[(Case, String)],
    started: Instant,
) {
    println!(
        "{} run(s){}, {:.0} s in all; min–max over the runs; refused: 429 or 503 attempts.\n",
        args.runs,
        if args.short { " (--short sizes)" } else { "" },
        started.elapsed().as_secs_f64()
    );
    for &case in cases {
        match skipped.iter().find(|(c, _)| *c == case) {
            Some((_, why)) => println!("#### {}\n\nskipped: {why}\n", case.title(sizes)),
            None => println!("{}", table(case, sizes, results)),
        }
    }
    println!(
        "#### Targets of the pacing stack (`RetryLayer` defaults + `PacingLayer::new()`), every run\n"
    );
    for &case in cases {
        match skipped.iter().find(|(c, _)| *c == case) {
            Some((_, why)) => println!("- {}: skipped ({why})", targets::label(case)),
            None => println!("{}", targets::report(case, results)),
        }
    }
}
