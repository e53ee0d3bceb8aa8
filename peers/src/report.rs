//! Markdown output: min–max ranges and tables.

/// `min–max` of `values` with `decimals` decimals (one value when they agree); an infinite
/// value prints as `never`.
pub fn range(values: &[f64], decimals: usize) -> String {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let show = |v: f64| {
        if v.is_infinite() {
            "never".to_owned()
        } else {
            format!("{v:.decimals$}")
        }
    };
    if values.is_empty() || min.is_nan() {
        return "–".into();
    }
    let (a, b) = (show(min), show(max));
    if a == b { a } else { format!("{a}–{b}") }
}

/// A markdown table: a header row, its separator, then `rows`.
pub fn markdown(header: &[String], rows: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n|", header.join(" | "));
    out.push_str(&"---|".repeat(header.len()));
    out.push('\n');
    for row in rows {
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out
}
