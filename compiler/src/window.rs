//! Quota windows: when a quota statement's amounts apply, in the cluster clock's local
//! time — `lend_limit 24 gpu from 22:00 to 07:00 on sat, sun`. A window is a set of
//! minutes of the week. Its edges cut the week into phases, in each of which the same
//! windows are open; the amounts in force in a phase are the queue's written ones with
//! every open window's laid over them, per quota kind and resource
//! ([`crate::hir::Policy::quotas_at`]).

use std::fmt;

/// Minutes in a day and in a week: windows are set to the minute.
pub(crate) const MINUTES_PER_DAY: u16 = 24 * 60;
pub(crate) const MINUTES_PER_WEEK: u16 = 7 * MINUTES_PER_DAY;

/// Day names as written after `on`, Monday first (ISO 8601's order, as `cluster.weekday`).
pub(crate) const DAYS: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
const DAY_LONG: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const EVERY_DAY: u8 = 0b111_1111;
const WEEKDAYS: u8 = 0b001_1111;
const WEEKENDS: u8 = 0b110_0000;

/// The days a name after `on` stands for, as bits (Monday is bit 0): `mon` … `sun`,
/// `weekdays` (Monday to Friday), `weekends`.
pub(crate) fn days_named(name: &str) -> Option<u8> {
    match name {
        "weekdays" => Some(WEEKDAYS),
        "weekends" => Some(WEEKENDS),
        _ => DAYS.iter().position(|d| *d == name).map(|i| 1 << i),
    }
}

/// Every name [`days_named`] knows, for suggestions.
pub(crate) fn day_names() -> impl Iterator<Item = &'static str> {
    DAYS.iter().copied().chain(["weekdays", "weekends"])
}

/// When amounts apply: from `from` to `to` (minutes of the local day) on each of `days`;
/// a window that ends at or before it starts runs past midnight into the next day, which
/// `days` need not hold (`from 22:00 to 07:00 on fri` holds Saturday morning).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Window {
    days: u8,
    from: u16,
    to: u16,
}

/// Why a window as written is no window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowError {
    /// No day: cannot happen from the grammar, which wants a day after `on`.
    NoDays,
    /// `from` and `to` are the same time: the window would be empty (or the whole day).
    Empty,
}

impl Window {
    /// All day on `days`.
    pub fn days(days: u8) -> Result<Window, WindowError> {
        Window::new(days, 0, MINUTES_PER_DAY)
    }

    /// From `from` to `to` (minutes since local midnight; `to` may be 24:00) on `days`.
    pub(crate) fn new(days: u8, from: u16, to: u16) -> Result<Window, WindowError> {
        let days = days & EVERY_DAY;
        if days == 0 {
            return Err(WindowError::NoDays);
        }
        let (from, to) = (from % MINUTES_PER_DAY, to.min(MINUTES_PER_DAY));
        if from == to {
            return Err(WindowError::Empty);
        }
        Ok(Window { days, from, to })
    }

    fn has_day(self, day: u16) -> bool {
        self.days & (1 << (day % 7)) != 0
    }

    /// Whether the window is open at `minute` of the week (0 is Monday 00:00 local).
    pub fn contains(self, minute: u16) -> bool {
        let minute = minute % MINUTES_PER_WEEK;
        let (day, t) = (minute / MINUTES_PER_DAY, minute % MINUTES_PER_DAY);
        if self.from < self.to {
            self.has_day(day) && (self.from..self.to).contains(&t)
        } else {
            (self.has_day(day) && t >= self.from) || (self.has_day(day + 6) && t < self.to)
        }
    }

    /// The stretches of the week the window is open, `[start, end)` in minutes of the
    /// week; one that runs past Sunday midnight is cut in two.
    pub(crate) fn spans(self) -> Vec<(u16, u16)> {
        let mut out = Vec::new();
        for day in 0..7u16 {
            if !self.has_day(day) {
                continue;
            }
            let start = day * MINUTES_PER_DAY + self.from;
            let end = if self.from < self.to {
                day * MINUTES_PER_DAY + self.to
            } else {
                (day + 1) * MINUTES_PER_DAY + self.to
            };
            if end > MINUTES_PER_WEEK {
                out.push((start, MINUTES_PER_WEEK));
                out.push((0, end - MINUTES_PER_WEEK));
            } else {
                out.push((start, end));
            }
        }
        out
    }

    /// Whether some minute of the week is in both windows.
    pub fn overlaps(self, other: Window) -> bool {
        let theirs = other.spans();
        self.spans().iter().any(|&(a, b)| theirs.iter().any(|&(c, d)| a < d && c < b))
    }

    /// The minutes of the week at which the window opens or closes.
    pub(crate) fn edges(self) -> impl Iterator<Item = u16> {
        self.spans().into_iter().flat_map(|(a, b)| [a, b % MINUTES_PER_WEEK])
    }
}

/// The minutes of the week at which some window opens or closes, sorted, each once: the
/// starts of the week's phases (none without windows).
pub(crate) fn edges(windows: impl IntoIterator<Item = Window>) -> Vec<u16> {
    let mut out: Vec<u16> = windows.into_iter().flat_map(Window::edges).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// How many minutes after `minute` of the week the next edge comes (wrapping into next
/// week; an edge at `minute` itself is this week's past).
pub fn next_edge(edges: &[u16], minute: u16) -> Option<u16> {
    let i = edges.partition_point(|&e| e <= minute);
    let next = edges.get(i).or(edges.first())?;
    Some((next + MINUTES_PER_WEEK - minute - 1) % MINUTES_PER_WEEK + 1)
}

/// The stretches of the week the phases starting at `marked` (some of `edges`) make
/// when adjacent ones are joined, `[start, end)`, in the order of the week; one that
/// runs past Sunday midnight into Monday is one stretch.
pub(crate) fn stretches(edges: &[u16], marked: &[u16]) -> Vec<(u16, u16)> {
    let n = edges.len();
    let on: Vec<bool> = edges.iter().map(|e| marked.contains(e)).collect();
    if n == 0 || on.iter().all(|&x| x) {
        return Vec::new();
    }
    // Start from a phase that is off, so every stretch is seen whole.
    let first_off = on.iter().position(|&x| !x).unwrap_or(0);
    let mut out = Vec::new();
    let mut start = None;
    for k in 1..=n {
        let i = (first_off + k) % n;
        match (on[i], start) {
            (true, None) => start = Some(edges[i]),
            (false, Some(s)) => {
                out.push((s, edges[i]));
                start = None;
            }
            _ => {}
        }
    }
    out.sort_unstable();
    out
}

/// A minute of the week for people: `Saturday 22:00`.
pub fn weekday_time(minute: u16) -> String {
    let minute = minute % MINUTES_PER_WEEK;
    let (day, t) = (minute / MINUTES_PER_DAY, minute % MINUTES_PER_DAY);
    format!("{} {:02}:{:02}", DAY_LONG[usize::from(day)], t / 60, t % 60)
}

/// A stretch of the week for people: `Tuesday 08:00–20:00`, `Friday 22:00–Saturday 07:00`.
pub(crate) fn span_text(start: u16, end: u16) -> String {
    let (start, end) = (start % MINUTES_PER_WEEK, end % MINUTES_PER_WEEK);
    let to = weekday_time(end);
    if start / MINUTES_PER_DAY == end / MINUTES_PER_DAY && end > start {
        let time = to.rsplit(' ').next().unwrap_or_default();
        format!("{}–{time}", weekday_time(start))
    } else {
        format!("{}–{to}", weekday_time(start))
    }
}

impl fmt::Display for Window {
    /// As a policy would write it: `from 22:00 to 07:00 on sat, sun`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole_day = self.from == 0 && self.to == MINUTES_PER_DAY;
        if !whole_day {
            let t = |m: u16| format!("{:02}:{:02}", m / 60, m % 60);
            write!(f, "from {} to {}", t(self.from), t(self.to))?;
        }
        if self.days != EVERY_DAY {
            if !whole_day {
                f.write_str(" ")?;
            }
            let names: Vec<&str> = match self.days {
                WEEKDAYS => vec!["weekdays"],
                WEEKENDS => vec!["weekends"],
                d => (0..7).filter(|i| d & (1 << i) != 0).map(|i| DAYS[i]).collect(),
            };
            write!(f, "on {}", names.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u16 = 60;
    const DAY: u16 = MINUTES_PER_DAY;

    #[test]
    fn a_window_past_midnight_holds_the_next_morning() {
        let sat = days_named("sat").expect("a day");
        let w = Window::new(sat, 22 * H, 7 * H).expect("a window");
        assert!(!w.contains(5 * DAY + 21 * H + 59), "Saturday 21:59");
        assert!(w.contains(5 * DAY + 22 * H), "Saturday 22:00");
        assert!(w.contains(6 * DAY + 6 * H + 59), "Sunday 06:59");
        assert!(!w.contains(6 * DAY + 7 * H), "Sunday 07:00");
        assert!(!w.contains(6 * DAY + 23 * H), "Sunday night is not Saturday's");
        assert_eq!(w.spans(), vec![(5 * DAY + 22 * H, 6 * DAY + 7 * H)]);
        assert_eq!(w.to_string(), "from 22:00 to 07:00 on sat");
    }

    #[test]
    fn sunday_night_runs_into_monday_across_the_week_end() {
        let w = Window::new(days_named("sun").expect("a day"), 22 * H, 7 * H).expect("a window");
        assert!(w.contains(6 * DAY + 23 * H));
        assert!(w.contains(3 * H), "Monday 03:00, the start of the week");
        assert_eq!(w.spans(), vec![(6 * DAY + 22 * H, MINUTES_PER_WEEK), (0, 7 * H)]);
        assert_eq!(edges([w]), vec![0, 7 * H, 6 * DAY + 22 * H]);
    }

    #[test]
    fn whole_days_and_every_day() {
        let weekends = Window::days(days_named("weekends").expect("a name")).expect("a window");
        assert!(weekends.contains(5 * DAY) && weekends.contains(7 * DAY - 1) && !weekends.contains(5 * DAY - 1));
        assert_eq!(weekends.to_string(), "on weekends");
        let nightly = Window::new(EVERY_DAY, 22 * H, 7 * H).expect("a window");
        assert_eq!(nightly.spans().len(), 8, "seven nights, Sunday's cut at the week's end");
        assert_eq!(nightly.to_string(), "from 22:00 to 07:00");
        assert!(weekends.overlaps(nightly));
        let weekdays = Window::days(days_named("weekdays").expect("a name")).expect("a window");
        assert!(!weekdays.overlaps(weekends));
        assert_eq!(Window::new(EVERY_DAY, 8 * H, 8 * H), Err(WindowError::Empty));
        assert_eq!(Window::new(EVERY_DAY, 0, DAY), Window::days(EVERY_DAY));
        assert_eq!(Window::new(0, 0, H), Err(WindowError::NoDays));
        // Ending at midnight: the same day's last stretch, not a crossing.
        let evening = Window::new(1, 20 * H, 0).expect("a window");
        assert!(evening.contains(23 * H) && !evening.contains(DAY));
    }

    #[test]
    fn the_next_edge_wraps_into_next_week() {
        let e = [7 * H, 22 * H];
        assert_eq!(next_edge(&e, 0), Some(7 * H));
        assert_eq!(next_edge(&e, 7 * H), Some(15 * H), "an edge now is not the next one");
        assert_eq!(next_edge(&e, 23 * H), Some(MINUTES_PER_WEEK - 23 * H + 7 * H));
        assert_eq!(next_edge(&[], 5), None);
        assert_eq!(weekday_time(5 * DAY + 22 * H), "Saturday 22:00");
        assert_eq!(span_text(DAY + 8 * H, DAY + 20 * H), "Tuesday 08:00–20:00");
        assert_eq!(span_text(4 * DAY + 22 * H, 5 * DAY + 7 * H), "Friday 22:00–Saturday 07:00");
        assert_eq!(span_text(6 * DAY + 22 * H, 7 * H), "Sunday 22:00–Monday 07:00");
    }

    #[test]
    fn adjacent_phases_join_into_stretches() {
        let edges = [7 * H, 8 * H, 12 * H, 20 * H, 6 * DAY + 22 * H];
        assert_eq!(stretches(&edges, &[8 * H, 12 * H]), vec![(8 * H, 20 * H)]);
        // Sunday 22:00 to Monday 07:00 is one stretch across the week's end.
        assert_eq!(stretches(&edges, &[6 * DAY + 22 * H]), vec![(6 * DAY + 22 * H, 7 * H)]);
        assert_eq!(stretches(&edges, &[7 * H, 20 * H]), vec![(7 * H, 8 * H), (20 * H, 6 * DAY + 22 * H)]);
        assert!(stretches(&edges, &edges).is_empty(), "all week is no stretch to name");
    }
}
