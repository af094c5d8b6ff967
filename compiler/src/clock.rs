//! The cluster clock in a policy's time zone: where the clock's 0 falls in real time, and
//! the local time of day and weekday of any moment on it (`cluster.time_of_day`,
//! `cluster.weekday`). Time zones are IANA names (`Europe/Berlin`) read from the tz
//! database bundled with the binary, so a policy means the same on every machine; the
//! default is UTC.

use jiff::civil::{self, DateTime};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

/// Where the clock of a run that does not say starts: Monday 1 January 2024, 00:00 local
/// time, so a test's `advance 22h` or a trace's arrival at 79,200 s is Monday 22:00.
pub const DEFAULT_START: DateTime = civil::date(2024, 1, 1).at(0, 0, 0, 0);

/// A policy's clock: its zone, and the real time of clock 0.
#[derive(Clone, Debug, PartialEq)]
pub struct Clock {
    zone: TimeZone,
    /// Milliseconds since the Unix epoch at clock 0.
    origin_ms: i64,
}

/// A moment in local time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Local {
    /// Seconds since local midnight.
    pub seconds_of_day: f64,
    /// ISO 8601: 1 is Monday, 7 is Sunday.
    pub weekday: u8,
}

/// A time zone or a starting time the clock cannot take, with the text as written.
#[derive(Clone, Debug)]
pub enum ClockError {
    /// A name the tz database does not have.
    UnknownZone(String),
    /// Not a local date, or a date and time.
    NotLocalTime(String),
    /// A local time the zone cannot place on the timeline, and jiff's reason.
    OutOfRange { text: String, reason: jiff::Error },
}

impl std::fmt::Display for ClockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClockError::UnknownZone(name) => write!(
                f,
                "`{name}` is not a time zone of the tz database: write an IANA name such as `Europe/Berlin` or `UTC`"
            ),
            ClockError::NotLocalTime(text) => {
                write!(f, "expected a local date and time such as 2026-11-23T08:00, found `{text}`")
            }
            ClockError::OutOfRange { text, reason } => write!(f, "`{text}`: {reason}"),
        }
    }
}

impl std::error::Error for ClockError {}

/// The time zone named `name` (an IANA name, or `UTC`).
pub(crate) fn zone(name: &str) -> Result<TimeZone, ClockError> {
    TimeZone::get(name).map_err(|_| ClockError::UnknownZone(name.to_string()))
}

/// Whether `unix_ms` (milliseconds since the Unix epoch) is a time the clock can start
/// at: between the years 1 and 9999, as the tz database has them.
pub fn is_real_time(unix_ms: i64) -> bool {
    Timestamp::from_millisecond(unix_ms).is_ok_and(|t| t.to_zoned(TimeZone::UTC).year() >= 1)
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::new(TimeZone::UTC)
    }
}

impl Clock {
    /// The clock in `zone`, 0 at [`DEFAULT_START`] local time.
    pub(crate) fn new(zone: TimeZone) -> Clock {
        let origin_ms = zone.to_timestamp(DEFAULT_START).map_or(0, Timestamp::as_millisecond);
        Clock { zone, origin_ms }
    }

    /// The clock of a policy whose `timezone` setting is `name` (UTC when `None`; a name
    /// the tz database lacks was refused when the policy was checked, and reads as UTC).
    pub fn of_zone(name: Option<&str>) -> Clock {
        Clock::new(name.and_then(|n| zone(n).ok()).unwrap_or(TimeZone::UTC))
    }

    /// Sets clock 0 to `unix_ms` (adapters, whose clock is real time).
    pub fn start_at_unix_ms(&mut self, unix_ms: i64) {
        self.origin_ms = unix_ms;
    }

    /// Sets clock 0 to a local date and time, `2026-11-23T08:00` or `2026-11-23`.
    pub fn start_at_local(&mut self, text: &str) -> Result<(), ClockError> {
        let when: DateTime = text
            .parse()
            .or_else(|_| text.parse::<civil::Date>().map(|d| d.at(0, 0, 0, 0)))
            .map_err(|_| ClockError::NotLocalTime(text.to_string()))?;
        let at =
            self.zone.to_timestamp(when).map_err(|reason| ClockError::OutOfRange { text: text.to_string(), reason })?;
        self.origin_ms = at.as_millisecond();
        Ok(())
    }

    /// The local time at `now_ms` on the clock.
    pub fn local(&self, now_ms: u64) -> Local {
        let ms = self.origin_ms.saturating_add(i64::try_from(now_ms).unwrap_or(i64::MAX));
        let at = Timestamp::from_millisecond(ms).unwrap_or(Timestamp::MAX);
        let dt = self.zone.to_datetime(at);
        let seconds_of_day = f64::from(dt.hour()) * 3600.0
            + f64::from(dt.minute()) * 60.0
            + f64::from(dt.second())
            + f64::from(dt.subsec_nanosecond()) / 1e9;
        let weekday = u8::try_from(dt.weekday().to_monday_one_offset()).unwrap_or(1);
        Local { seconds_of_day, weekday }
    }

    /// The minute of the local week at `now_ms` (0 is Monday 00:00): what quota windows
    /// are open then.
    pub fn minute_of_week(&self, now_ms: u64) -> u16 {
        let local = self.local(now_ms);
        let minute = (local.seconds_of_day / 60.0) as u16;
        (u16::from(local.weekday.clamp(1, 7)) - 1) * crate::window::MINUTES_PER_DAY + minute
    }

    /// The clock reading `minutes` of local time after the start of the minute `now_ms`
    /// is in — a window's edge; later than `now_ms` even where a change of the clocks
    /// (daylight saving) skips or repeats local times.
    pub fn after_local_minutes(&self, now_ms: u64, minutes: u16) -> Option<u64> {
        let ms = self.origin_ms.checked_add(i64::try_from(now_ms).ok()?)?;
        let dt = self.zone.to_datetime(Timestamp::from_millisecond(ms).ok()?);
        let start = dt.date().at(dt.hour(), dt.minute(), 0, 0);
        let then = start.checked_add(i64::from(minutes).minutes()).ok()?;
        let at = self.zone.to_timestamp(then).ok()?.as_millisecond();
        let reading = u64::try_from(at.checked_sub(self.origin_ms)?).ok()?;
        Some(reading.max(now_ms.saturating_add(1)))
    }

    /// Whether `minute` of the local week (0: Monday 00:00) falls, on some week from 2024 to
    /// 2039, in an hour the clocks skip (a jump forward for daylight saving): a scheduler
    /// that runs at local times, such as Kubernetes' CronJobs, skips it then.
    pub fn skips(&self, minute: u16) -> bool {
        use jiff::tz::AmbiguousOffset;
        let (day, of_day) = (minute / crate::window::MINUTES_PER_DAY, minute % crate::window::MINUTES_PER_DAY);
        let (h, m) = (i8::try_from(of_day / 60).unwrap_or(0), i8::try_from(of_day % 60).unwrap_or(0));
        // 2024-01-01 was a Monday.
        let first = civil::date(2024, 1, 1);
        (0..16 * 53).any(|week: i64| {
            let Ok(date) = first.checked_add((week * 7 + i64::from(day)).days()) else { return false };
            let dt = date.at(h, m, 0, 0);
            matches!(self.zone.to_ambiguous_timestamp(dt).offset(), AmbiguousOffset::Gap { .. })
        })
    }

    /// The clock reading of the next local midnight after `now_ms` (where a day-long
    /// window can change), for callers that wake at boundaries.
    pub fn next_midnight_ms(&self, now_ms: u64) -> Option<u64> {
        let ms = self.origin_ms.checked_add(i64::try_from(now_ms).ok()?)?;
        let dt = self.zone.to_datetime(Timestamp::from_millisecond(ms).ok()?);
        let next = dt.date().checked_add(1.day()).ok()?.at(0, 0, 0, 0);
        let at = self.zone.to_timestamp(next).ok()?.as_millisecond();
        u64::try_from(at.checked_sub(self.origin_ms)?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edges_in_the_hour_the_clocks_skip_are_found() {
        let berlin = Clock::of_zone(Some("Europe/Berlin"));
        // Sunday 02:30: the last Sunday of March skips 02:00–03:00.
        assert!(berlin.skips(6 * 1440 + 150));
        assert!(!berlin.skips(6 * 1440 + 180) && !berlin.skips(150));
        assert!(!Clock::of_zone(None).skips(6 * 1440 + 150));
    }

    #[test]
    fn clock_zero_is_monday_midnight_local_unless_set() {
        let utc = Clock::default();
        assert_eq!(utc.local(0), Local { seconds_of_day: 0.0, weekday: 1 });
        assert_eq!(utc.local(22 * 3_600_000 + 1500), Local { seconds_of_day: 79_201.5, weekday: 1 });
        assert_eq!(utc.local(6 * 86_400_000 + 60_000).weekday, 7);
        assert_eq!(utc.local(7 * 86_400_000).weekday, 1);
        let mut berlin = Clock::of_zone(Some("Europe/Berlin"));
        assert_eq!(berlin.local(0), Local { seconds_of_day: 0.0, weekday: 1 });
        // 2026-03-29 is the spring change in Berlin: clocks go from 02:00 to 03:00, so
        // three hours after midnight it is 04:00.
        berlin.start_at_local("2026-03-29").expect("a date");
        assert_eq!(berlin.local(90 * 60_000).seconds_of_day, 1.5 * 3600.0);
        assert_eq!(berlin.local(3 * 3_600_000).seconds_of_day, 4.0 * 3600.0);
        assert_eq!(berlin.local(0).weekday, 7);
        assert!(berlin.start_at_local("tomorrow").is_err());
        // The next midnight is 23 hours on: the day lost its 02:00–03:00.
        assert_eq!(berlin.next_midnight_ms(0), Some(23 * 3_600_000));
        // Window edges are local times: 04:00 is two hours after midnight that day.
        assert_eq!(berlin.minute_of_week(3 * 3_600_000), 6 * 1440 + 4 * 60);
        assert_eq!(berlin.after_local_minutes(0, 4 * 60), Some(3 * 3_600_000));
        assert_eq!(berlin.after_local_minutes(30_000, 1), Some(60_000), "from the start of the minute");
    }

    #[test]
    fn minutes_of_the_week_in_utc() {
        let utc = Clock::default();
        assert_eq!(utc.minute_of_week(0), 0);
        assert_eq!(utc.minute_of_week(5 * 86_400_000 + 22 * 3_600_000 + 59_999), 5 * 1440 + 22 * 60);
        assert_eq!(utc.minute_of_week(7 * 86_400_000), 0, "a week on, the week starts again");
        assert_eq!(utc.after_local_minutes(90_000, 10), Some(60_000 + 600_000));
    }

    #[test]
    fn zones_are_iana_names() {
        assert!(zone("Europe/Berlin").is_ok() && zone("UTC").is_ok());
        assert!(zone("Mars/Olympus").unwrap_err().to_string().contains("not a time zone"));
    }
}
