//! The targets for the pacing stack, per case, checked in every run.

use super::destinations::Other;
use super::limiters::Algorithm;
use super::tables::{Results, references};
use super::{Case, Figures, LIBS};
use crate::clients::Lib;

/// Which side of its limit a figure must be on.
#[derive(Clone, Copy)]
pub enum Bound {
    AtMost(f64),
    Below(f64),
    AtLeast(f64),
}

impl Bound {
    fn holds(self, value: f64) -> bool {
        match self {
            Bound::AtMost(limit) => value <= limit,
            Bound::Below(limit) => value < limit,
            Bound::AtLeast(limit) => value >= limit,
        }
    }

    /// The worse of two figures.
    fn worse(self, a: f64, b: f64) -> f64 {
        match self {
            Bound::AtLeast(_) => a.min(b),
            _ => a.max(b),
        }
    }

    fn show(self) -> String {
        match self {
            Bound::AtMost(limit) => format!("≤ {limit}"),
            Bound::Below(limit) => format!("< {limit}"),
            Bound::AtLeast(limit) => format!("≥ {limit}"),
        }
    }
}

/// One target: a figure of the pacing stack's run (with the retry layer alone's of the
/// same run) and its bound.
pub struct Target {
    pub what: &'static str,
    pub bound: Bound,
    pub value: fn(&Figures, &Figures) -> f64,
}

/// The targets of every row: "never worse than no pacing".
fn never_worse() -> [Target; 2] {
    [
        Target {
            what: "completed / retry-alone's",
            bound: Bound::AtLeast(1.0),
            value: |paced, alone| paced.completed as f64 / alone.completed.max(1) as f64,
        },
        Target {
            what: "time / retry-alone's",
            bound: Bound::AtMost(1.1),
            value: |paced, alone| paced.time / alone.time,
        },
    ]
}

fn refused_below_5() -> Target {
    Target {
        what: "refused %",
        bound: Bound::Below(5.0),
        value: |paced, _| paced.refused_percent(),
    }
}

/// The targets of `case`, its own first.
pub fn targets(case: Case) -> Vec<Target> {
    let mut own = match case {
        Case::Limiter(_) => vec![
            Target {
                what: "completed / sent",
                bound: Bound::AtLeast(1.0),
                value: |paced, _| paced.completed as f64 / paced.requests.max(1) as f64,
            },
            Target {
                what: "time / ideal",
                bound: Bound::AtMost(1.15),
                value: |paced, _| paced.specific[0],
            },
            refused_below_5(),
        ],
        Case::Failures => vec![],
        Case::Outage => vec![Target {
            what: "recovery s",
            bound: Bound::AtMost(1.0),
            value: |paced, _| paced.specific[0],
        }],
        Case::ChangingLimit => vec![
            Target {
                what: "follows each change, s (the slower)",
                bound: Bound::AtMost(2.0),
                value: |paced, _| paced.specific[0].max(paced.specific[1]),
            },
            refused_below_5(),
        ],
        Case::TwoDestinations(_) => vec![Target {
            what: "healthy p99 growth ms",
            bound: Bound::Below(10.0),
            value: |paced, _| paced.specific[2],
        }],
        Case::Slow => vec![
            Target {
                what: "requests failed",
                bound: Bound::AtMost(0.0),
                value: |paced, _| paced.specific[0],
            },
            Target {
                what: "PacingErrors",
                bound: Bound::AtMost(0.0),
                value: |paced, _| paced.specific[1],
            },
        ],
    };
    own.extend(never_worse());
    own
}

/// A short name of `case` for the targets' list.
pub fn label(case: Case) -> String {
    let what = match case {
        Case::Limiter(Algorithm::Gcra) => "GCRA (tower_governor)",
        Case::Limiter(Algorithm::FixedWindow) => "fixed window (express-rate-limit)",
        Case::Limiter(Algorithm::SlidingWindow) => "sliding window (HAProxy)",
        Case::Limiter(Algorithm::LeakyBucket) => "leaky bucket",
        Case::Limiter(Algorithm::Nginx) => "leaky bucket (nginx)",
        Case::Limiter(Algorithm::Flexible) => "fixed window (rate-limiter-flexible)",
        Case::Failures => "random failures",
        Case::Outage => "outage",
        Case::ChangingLimit => "a limit that changes",
        Case::TwoDestinations(Other::Limited) => "two destinations, one limited",
        Case::TwoDestinations(Other::Down) => "two destinations, one down",
        Case::Slow => "slow server and long-polls",
    };
    format!("row {}, {what}", case.row())
}

/// The targets' line of `case`: met or missed overall, then each target. Each shows its
/// worst figure over the runs, and how many runs missed it.
pub fn report(case: Case, results: &Results) -> String {
    let paced = LIBS
        .iter()
        .position(|&l| l == Lib::TowerBackoffPaced)
        .expect("the pacing stack is measured");
    let Some(runs) = results.get(&(case, paced)) else {
        return format!("- {}: not measured", label(case));
    };
    let alone = references(results, case);
    let checks: Vec<(bool, String)> = targets(case)
        .into_iter()
        .map(|target| check(&target, runs, alone))
        .collect();
    let verdict = if checks.iter().all(|(met, _)| *met) {
        "met"
    } else {
        "**missed**"
    };
    let details: Vec<String> = checks.into_iter().map(|(_, text)| text).collect();
    format!("- {}: {verdict}. {}", label(case), details.join("; "))
}

/// One target over the runs: whether every run met it, and its text.
fn check(target: &Target, runs: &[Figures], alone: &[Figures]) -> (bool, String) {
    let values: Vec<f64> = runs
        .iter()
        .zip(alone)
        .map(|(p, a)| (target.value)(p, a))
        .collect();
    let missed = values.iter().filter(|&&v| !target.bound.holds(v)).count();
    let worst = values
        .iter()
        .copied()
        .reduce(|a, b| target.bound.worse(a, b))
        .unwrap_or(f64::NAN);
    let verdict = if missed == 0 {
        "met".to_owned()
    } else {
        format!("missed in {missed}/{} runs", values.len())
    };
    let worst = if worst.is_infinite() {
        "never".to_owned()
    } else {
        format!("{worst:.3}")
    };
    let text = format!(
        "{} {}: {verdict} (worst {worst})",
        target.what,
        target.bound.show()
    );
    (missed == 0, text)
}
