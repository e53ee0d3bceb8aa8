//! The markdown table of a case: one line per library, min–max over the runs per column.

use super::{Case, Figures, LIBS, Sizes};
use crate::clients::Lib;
use crate::report::{markdown, range};
use std::collections::BTreeMap;

/// Every library's figures per case, in run order: `(case, index in LIBS)`.
pub type Results = BTreeMap<(Case, usize), Vec<Figures>>;

/// The index of the retry layer alone in [`LIBS`]: the reference of "never worse".
pub fn retry_alone() -> usize {
    LIBS.iter()
        .position(|&l| l == Lib::TowerBackoff)
        .expect("the retry layer is measured")
}

/// The retry layer alone's figures of the same runs as `lib`'s in `case`.
pub fn references(results: &Results, case: Case) -> &[Figures] {
    results
        .get(&(case, retry_alone()))
        .map_or(&[], Vec::as_slice)
}

pub fn table(case: Case, sizes: &Sizes, results: &Results) -> String {
    let mut header: Vec<String> = [
        "library",
        "completed / sent",
        "time s",
        "× retry-alone time",
        "attempts",
        "refused %",
    ]
    .map(String::from)
    .to_vec();
    header.extend(case.columns().iter().map(|(name, _)| name.to_string()));
    let rows: Vec<Vec<String>> = LIBS
        .iter()
        .enumerate()
        .filter_map(|(i, lib)| Some(line(case, *lib, results.get(&(case, i))?, results)))
        .collect();
    format!("#### {}\n\n{}", case.title(sizes), markdown(&header, &rows))
}

/// One library's line.
fn line(case: Case, lib: Lib, runs: &[Figures], results: &Results) -> Vec<String> {
    let column = |f: &dyn Fn(&Figures) -> f64| runs.iter().map(f).collect::<Vec<_>>();
    let sent = column(&|f| f.requests as f64);
    let completed = range(&column(&|f| f.completed as f64), 0);
    let completed = if sent.iter().all(|&s| s > 0.0) {
        format!("{completed} / {}", range(&sent, 0))
    } else {
        completed
    };
    let alone = references(results, case);
    let ratios: Vec<f64> = runs
        .iter()
        .zip(alone)
        .map(|(f, a)| f.time / a.time)
        .collect();
    let mut cells = vec![
        lib.name().to_owned(),
        completed,
        range(&column(&|f| f.time), 2),
        range(&ratios, 2),
        range(&column(&|f| f.attempts as f64), 0),
        range(&column(&|f| f.refused_percent()), 1),
    ];
    for (c, (_, decimals)) in case.columns().iter().enumerate() {
        cells.push(range(&column(&|f| f.specific[c]), *decimals));
    }
    cells
}
