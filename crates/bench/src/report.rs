//! Figures: percentiles of samples, medians over runs, and the table printed at the end.

use std::fmt::Write as _;

/// The `p`-th percentile (0–100) of `samples`, nearest rank; 0 for no samples.
pub fn percentile(samples: &mut [u64], p: f64) -> u64 {
    if samples.is_empty() {
        return 0;
    }
    samples.sort_unstable();
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

/// The median of a few run values (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    }
}

/// What a figure has to reach.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// The median must be at least this.
    AtLeast(f64),
    /// The median must be at most this.
    AtMost(f64),
    /// The median divided by its baseline's median must be at least this.
    RatioAtLeast(f64),
}

/// One figure: its value in each run, and optionally the baseline it is compared with.
#[derive(Debug, Clone)]
pub struct Row {
    /// What was measured.
    pub name: String,
    /// Its unit.
    pub unit: &'static str,
    /// One value per run.
    pub values: Vec<f64>,
    /// The name of the baseline row it is divided by.
    pub baseline: Option<String>,
    /// What it has to reach.
    pub target: Option<Target>,
}

/// Every figure of a benchmark invocation, in the order first recorded.
#[derive(Debug, Default)]
pub struct Report {
    rows: Vec<Row>,
}

impl Report {
    fn row(&mut self, name: &str, unit: &'static str) -> &mut Row {
        if let Some(i) = self.rows.iter().position(|r| r.name == name) {
            return &mut self.rows[i];
        }
        self.rows.push(Row {
            name: name.to_owned(),
            unit,
            values: Vec::new(),
            baseline: None,
            target: None,
        });
        self.rows.last_mut().expect("just pushed")
    }

    /// Records one run's value of a figure, and prints it at once so a long run shows progress.
    pub fn add(&mut self, name: &str, unit: &'static str, value: f64) {
        println!("  {name}: {} {unit}", fmt_value(value));
        self.row(name, unit).values.push(value);
    }

    /// Compares a figure with a baseline figure (its ratio is printed).
    pub fn compare(&mut self, name: &str, unit: &'static str, baseline: &str) {
        self.row(name, unit).baseline = Some(baseline.to_owned());
    }

    /// Sets the target of a figure.
    pub fn target(&mut self, name: &str, unit: &'static str, target: Target) {
        self.row(name, unit).target = Some(target);
    }

    fn median_of(&self, name: &str) -> Option<f64> {
        self.rows
            .iter()
            .find(|r| r.name == name)
            .map(|r| median(&r.values))
    }

    /// The table: median, every run, ratio to the baseline, and the target with its verdict.
    pub fn table(&self) -> String {
        let mut out = String::new();
        out.push_str("| figure | median | runs | baseline ratio | target |\n");
        out.push_str("|---|---:|---|---:|---|\n");
        for row in &self.rows {
            let m = median(&row.values);
            let runs: Vec<String> = row.values.iter().map(|v| fmt_value(*v)).collect();
            let base = row
                .baseline
                .as_ref()
                .and_then(|b| self.median_of(b).map(|bm| (b, bm)));
            let ratio = match base {
                Some((b, bm)) if bm > 0.0 => format!("{:.2}× of {b}", m / bm),
                _ => "–".to_owned(),
            };
            let target = match (row.target, base) {
                (None, _) => "–".to_owned(),
                (Some(Target::AtLeast(t)), _) => {
                    verdict(m >= t, &format!("≥ {} {}", fmt_value(t), row.unit))
                }
                (Some(Target::AtMost(t)), _) => {
                    verdict(m <= t, &format!("≤ {} {}", fmt_value(t), row.unit))
                }
                (Some(Target::RatioAtLeast(t)), Some((_, bm))) if bm > 0.0 => {
                    verdict(m / bm >= t, &format!("≥ {:.0} % of baseline", t * 100.0))
                }
                (Some(Target::RatioAtLeast(t)), _) => {
                    format!("≥ {:.0} % of baseline (no baseline)", t * 100.0)
                }
            };
            let _ = writeln!(
                out,
                "| {} | {} {} | {} | {} | {} |",
                row.name,
                fmt_value(m),
                row.unit,
                runs.join(" / "),
                ratio,
                target
            );
        }
        out
    }
}

fn verdict(ok: bool, what: &str) -> String {
    format!("{what}: {}", if ok { "met" } else { "MISSED" })
}

/// A value with a sensible number of digits and thousands separators.
pub fn fmt_value(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".to_owned();
    }
    if v.abs() >= 1000.0 {
        let n = v.round() as i64;
        let s = n.unsigned_abs().to_string();
        let mut grouped = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                grouped.push(',');
            }
            grouped.push(c);
        }
        if n < 0 {
            grouped.insert(0, '-');
        }
        grouped
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_medians() {
        let mut s: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&mut s, 50.0), 50);
        assert_eq!(percentile(&mut s, 99.0), 99);
        assert_eq!(percentile(&mut [], 99.0), 0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(fmt_value(1234567.0), "1,234,567");
        assert_eq!(fmt_value(1.234), "1.23");
    }
}
