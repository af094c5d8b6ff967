//! How adapters that replay work already running (Slurm's loop, the kube-scheduler
//! extender, libgpol) read wall times on the runtime's clock, so that all of them agree:
//! clock 0 is a Unix time, a wall time before it reads as clock 0, and a job that
//! started at wall time `T` has run `now − T` at clock `now`, or nothing when `T` lies
//! later (the machines' clocks disagree, or the record is wrong).

/// The runtime's clock tied to wall time: clock reading 0 was `origin_unix_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WallClock {
    origin_unix_ms: i64,
}

/// Milliseconds since the Unix epoch of `secs` seconds since it, saturating (Slurm's
/// times are whole seconds).
pub fn unix_ms_of_secs(secs: u64) -> i64 {
    i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)
}

impl WallClock {
    /// Clock 0 at `origin_unix_ms` milliseconds after the Unix epoch.
    pub const fn at_unix_ms(origin_unix_ms: i64) -> WallClock {
        WallClock { origin_unix_ms }
    }

    /// Clock 0 at `secs` seconds after the Unix epoch.
    pub fn at_unix_secs(secs: u64) -> WallClock {
        WallClock::at_unix_ms(unix_ms_of_secs(secs))
    }

    /// The Unix time (ms) of clock 0.
    pub(crate) const fn origin_unix_ms(self) -> i64 {
        self.origin_unix_ms
    }

    /// The Unix time (ms) at clock reading `clock_ms`, saturating.
    pub(crate) fn unix_ms(self, clock_ms: u64) -> i64 {
        self.origin_unix_ms.saturating_add(i64::try_from(clock_ms).unwrap_or(i64::MAX))
    }

    /// The clock reading at Unix time `unix_ms`: 0 for a time before clock 0.
    pub fn reading(self, unix_ms: i64) -> u64 {
        u64::try_from(unix_ms.saturating_sub(self.origin_unix_ms)).unwrap_or(0)
    }

    /// How long before clock reading `now_ms` the Unix time `started_unix_ms` was (what a
    /// job started then has run, or a pod created then has waited): 0 when it lies later.
    pub fn elapsed_ms(self, now_ms: u64, started_unix_ms: i64) -> u64 {
        u64::try_from(self.unix_ms(now_ms).saturating_sub(started_unix_ms)).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIGIN: i64 = 1_767_225_600_000; // 2026-01-01T00:00Z

    #[test]
    fn elapsed_is_wall_time_between_start_and_now() {
        let c = WallClock::at_unix_ms(ORIGIN);
        // Started before clock 0: it has run since, not only since clock 0.
        assert_eq!(c.elapsed_ms(5_000, ORIGIN - 60_000), 65_000);
        assert_eq!(c.elapsed_ms(5_000, ORIGIN + 2_000), 3_000);
        assert_eq!(c.elapsed_ms(5_000, ORIGIN + 5_000), 0);
    }

    #[test]
    fn a_start_in_the_future_has_run_nothing() {
        let c = WallClock::at_unix_ms(ORIGIN);
        assert_eq!(c.elapsed_ms(5_000, ORIGIN + 5_001), 0);
        assert_eq!(c.elapsed_ms(0, i64::MAX), 0);
    }

    #[test]
    fn readings_saturate() {
        let c = WallClock::at_unix_ms(ORIGIN);
        assert_eq!(c.reading(ORIGIN - 1), 0);
        assert_eq!(c.reading(i64::MIN), 0);
        assert_eq!(c.reading(ORIGIN + 1_500), 1_500);
        assert_eq!(c.unix_ms(u64::MAX), i64::MAX);
        assert_eq!(WallClock::at_unix_ms(i64::MIN).elapsed_ms(0, i64::MAX), 0);
        assert_eq!(WallClock::at_unix_ms(i64::MAX).elapsed_ms(u64::MAX, i64::MIN), i64::MAX.unsigned_abs());
    }

    #[test]
    fn seconds_read_as_milliseconds() {
        let c = WallClock::at_unix_secs(1_000);
        assert_eq!(c.origin_unix_ms(), 1_000_000);
        assert_eq!(c.reading(unix_ms_of_secs(1_030)), 30_000);
        assert_eq!(unix_ms_of_secs(u64::MAX), i64::MAX);
    }
}
