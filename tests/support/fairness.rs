//! Jain's fairness index, shared by the pacing tests and the real-limiter harness.

/// Jain's fairness index of shares: 1 when all are equal, 1/n when one gets everything.
pub fn jain(shares: &[f64]) -> f64 {
    let sum: f64 = shares.iter().sum();
    let squares: f64 = shares.iter().map(|x| x * x).sum();
    if squares == 0.0 {
        return 0.0;
    }
    sum * sum / (shares.len() as f64 * squares)
}
