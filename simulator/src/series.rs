//! Time series with bounded memory: time-weighted averages over buckets of equal width.
//! When the run outgrows the buckets, neighbours merge and the width doubles, so a run of
//! any length ends with between `n` and `2n` buckets, each value exact.

/// Running time integrals of several signals, bucketed.
#[derive(Clone, Debug)]
pub struct Series {
    width_ms: u64,
    /// Per bucket: time-integral of each signal (value × ms), and the ms covered.
    sums: Vec<Vec<f64>>,
    covered: Vec<u64>,
    signals: usize,
    max: usize,
}

impl Series {
    /// `signals` values per point; at most `2 * n` buckets, starting 1 s wide.
    pub fn new(signals: usize, n: usize) -> Series {
        Series { width_ms: 1000, sums: Vec::new(), covered: Vec::new(), signals, max: 2 * n.max(1) }
    }

    /// Adds `values`, held constant over [from, to).
    pub fn add(&mut self, from_ms: u64, to_ms: u64, values: &[f64]) {
        let mut t = from_ms;
        while t < to_ms {
            let b = (t / self.width_ms) as usize;
            if b >= self.max {
                self.merge();
                continue;
            }
            while self.sums.len() <= b {
                self.sums.push(vec![0.0; self.signals]);
                self.covered.push(0);
            }
            let end = ((b as u64 + 1) * self.width_ms).min(to_ms);
            let dt = (end - t) as f64;
            for (s, v) in self.sums[b].iter_mut().zip(values) {
                *s += v * dt;
            }
            self.covered[b] += end - t;
            t = end;
        }
    }

    /// Counts one event of signal `i` at `at_ms`: the bucket's value is then the events
    /// per second over the time it covers, as exact under merges as the averages are.
    pub fn count(&mut self, at_ms: u64, i: usize) {
        let mut b = (at_ms / self.width_ms) as usize;
        while b >= self.max {
            self.merge();
            b = (at_ms / self.width_ms) as usize;
        }
        while self.sums.len() <= b {
            self.sums.push(vec![0.0; self.signals]);
            self.covered.push(0);
        }
        if let Some(v) = self.sums[b].get_mut(i) {
            *v += 1000.0;
        }
    }

    /// Halves the resolution: bucket pairs merge.
    fn merge(&mut self) {
        let sums = std::mem::take(&mut self.sums);
        let covered = std::mem::take(&mut self.covered);
        for (pair, c) in sums.chunks(2).zip(covered.chunks(2)) {
            let mut merged = pair[0].clone();
            if let Some(second) = pair.get(1) {
                for (m, v) in merged.iter_mut().zip(second) {
                    *m += v;
                }
            }
            self.sums.push(merged);
            self.covered.push(c.iter().sum());
        }
        self.width_ms *= 2;
    }

    pub fn width_ms(&self) -> u64 {
        self.width_ms
    }

    /// Each bucket's start (seconds) and time-averaged values; buckets the run never
    /// covered are left out.
    pub fn points(&self) -> Vec<(f64, Vec<f64>)> {
        self.sums
            .iter()
            .zip(&self.covered)
            .enumerate()
            .filter(|(_, (_, c))| **c > 0)
            .map(|(i, (s, c))| {
                let t = (i as u64 * self.width_ms) as f64 / 1000.0;
                (t, s.iter().map(|v| v / *c as f64).collect())
            })
            .collect()
    }

    /// The time-integral of signal `i` over everything added.
    pub fn integral(&self, i: usize) -> f64 {
        self.sums.iter().map(|s| s[i]).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn averages_are_time_weighted_and_survive_merges() {
        let mut s = Series::new(1, 2);
        s.add(0, 1500, &[2.0]);
        s.add(1500, 2000, &[4.0]);
        assert_eq!(s.points(), vec![(0.0, vec![2.0]), (1.0, vec![3.0])]);
        // Past four 1 s buckets the width doubles, keeping the averages exact.
        s.add(2000, 8000, &[1.0]);
        assert_eq!(s.width_ms(), 2000);
        assert_eq!(s.points(), vec![(0.0, vec![2.5]), (2.0, vec![1.0]), (4.0, vec![1.0]), (6.0, vec![1.0])]);
        assert_eq!(s.integral(0), 2.0 * 1500.0 + 4.0 * 500.0 + 6000.0);
        s.add(8000, 1_000_000, &[0.0]);
        assert!(s.points().len() <= 4);
        assert_eq!(s.integral(0), 11_000.0);
    }

    #[test]
    fn counted_events_are_a_rate_per_second_of_the_bucket() {
        let mut s = Series::new(2, 2);
        s.add(0, 2000, &[1.0, 0.0]);
        s.count(500, 1);
        s.count(1500, 1);
        s.count(1600, 1);
        assert_eq!(s.points(), vec![(0.0, vec![1.0, 1.0]), (1.0, vec![1.0, 2.0])]);
        // An event past the last bucket merges as time does; the rate stays exact.
        s.count(7000, 1);
        s.add(2000, 8000, &[1.0, 0.0]);
        assert_eq!(s.width_ms(), 2000);
        assert_eq!(s.points()[0], (0.0, vec![1.0, 1.5]));
        assert_eq!(s.points()[3], (6.0, vec![1.0, 0.5]));
    }
}
