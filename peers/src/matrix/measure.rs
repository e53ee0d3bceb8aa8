//! What the rows measure, from the requests' records and the client's attempt log.

use super::Figures;
use crate::attempts::Attempt;
use crate::load::Done;

/// The common figures of a load: completed, sent, time (until the last request ended),
/// attempts and refusals.
pub fn common(done: &[Done], attempts: &[Attempt]) -> Figures {
    Figures {
        completed: done.iter().filter(|d| d.ok()).count() as u64,
        requests: done.len() as u64,
        time: done.iter().map(|d| d.end.as_secs_f64()).fold(0.0, f64::max),
        attempts: attempts.len() as u64,
        refused: attempts.iter().filter(|a| a.refused()).count() as u64,
        specific: Vec::new(),
    }
}

/// The `p` quantile (0 to 1) of `values`, nearest rank; 0 if there are none.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
