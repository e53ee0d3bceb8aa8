//! Issue #29's matrix: the pacing stack (`RetryLayer` defaults over `PacingLayer::new()`)
//! against the retry layer alone and its peers, on six rows of conditions.
//!
//! Each row is a [`Case`] (row 1 has one per limiter, row 5 one per state of the other
//! destination). A case runs one library once and returns its [`Figures`].

pub mod changing;
pub mod destinations;
pub mod failures;
pub mod limiters;
pub mod measure;
pub mod outage;
pub mod slow;
pub mod tables;
pub mod targets;

use crate::clients::Lib;
pub use tower_backoff_lab::limiters::Unavailable;
pub use tower_backoff_lab::matrix::{CONCURRENCY, FULL, SHORT, Sizes};

/// The libraries of every row, in their order in the tables.
pub const LIBS: [Lib; 5] = [
    Lib::ReqwestRetry,
    Lib::Backon,
    Lib::TowerRetryBudget,
    Lib::TowerBackoff,
    Lib::TowerBackoffPaced,
];

/// The libraries of `--short`: the two stacks every target compares (the peers' fixed
/// waits of 1 to 7 s would not fit its time).
pub const SHORT_LIBS: [Lib; 2] = [Lib::TowerBackoff, Lib::TowerBackoffPaced];

/// One library's figures in one run of one case.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    /// Requests answered 200 in the end.
    pub completed: u64,
    /// Requests sent (0: not known, the load was cut at its window).
    pub requests: u64,
    /// Seconds from the load's start until its last request ended.
    pub time: f64,
    /// Attempts that reached the network, and those refused (429 or 503).
    pub attempts: u64,
    pub refused: u64,
    /// The case's own columns ([`Case::columns`]).
    pub specific: Vec<f64>,
}

impl Figures {
    /// The share of attempts refused, in percent.
    pub fn refused_percent(&self) -> f64 {
        100.0 * self.refused as f64 / self.attempts.max(1) as f64
    }
}

/// One table of the matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Case {
    Limiter(limiters::Algorithm),
    Failures,
    Outage,
    ChangingLimit,
    TwoDestinations(destinations::Other),
    Slow,
}

impl Case {
    /// Every case, in row order.
    pub fn all() -> Vec<Case> {
        let mut cases: Vec<Case> = limiters::Algorithm::ALL.map(Case::Limiter).to_vec();
        cases.extend([Case::Failures, Case::Outage, Case::ChangingLimit]);
        cases.extend(destinations::Other::ALL.map(Case::TwoDestinations));
        cases.push(Case::Slow);
        cases
    }

    /// The row number.
    pub fn row(self) -> u8 {
        match self {
            Case::Limiter(_) => 1,
            Case::Failures => 2,
            Case::Outage => 3,
            Case::ChangingLimit => 4,
            Case::TwoDestinations(_) => 5,
            Case::Slow => 6,
        }
    }

    /// The case's own columns: name and decimals.
    pub fn columns(self) -> &'static [(&'static str, usize)] {
        match self {
            Case::Limiter(_) => limiters::COLUMNS,
            Case::Failures => &[],
            Case::Outage => outage::COLUMNS,
            Case::ChangingLimit => changing::COLUMNS,
            Case::TwoDestinations(_) => destinations::COLUMNS,
            Case::Slow => slow::COLUMNS,
        }
    }

    /// The case's conditions, as the table's title.
    pub fn title(self, sizes: &Sizes) -> String {
        match self {
            Case::Limiter(algorithm) => limiters::title(algorithm, sizes),
            Case::Failures => failures::title(sizes),
            Case::Outage => outage::title(sizes),
            Case::ChangingLimit => changing::title(sizes),
            Case::TwoDestinations(other) => destinations::title(other, sizes),
            Case::Slow => slow::title(sizes),
        }
    }

    /// Runs `lib` once; `run` seeds what is random. `Unavailable`: a server did not start.
    pub async fn run(self, lib: Lib, sizes: &Sizes, run: u64) -> Result<Figures, Unavailable> {
        match self {
            Case::Limiter(algorithm) => limiters::run(algorithm, lib, sizes).await,
            Case::Failures => failures::run(lib, sizes, run).await,
            Case::Outage => outage::run(lib, sizes).await,
            Case::ChangingLimit => changing::run(lib, sizes).await,
            Case::TwoDestinations(other) => destinations::run(other, lib, sizes).await,
            Case::Slow => slow::run(lib, sizes, run).await,
        }
    }
}

/// A loopback server that could not start, as [`Unavailable`].
pub fn unavailable(what: &str, error: std::io::Error) -> Unavailable {
    Unavailable(format!("{what}: {error}"))
}
