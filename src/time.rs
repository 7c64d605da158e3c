//! Time as a value: epoch milliseconds, the unit Flink reports, passed into the pure core.

use std::fmt;
use std::time::{Duration, UNIX_EPOCH};

/// A point in time in milliseconds since the Unix epoch (UTC), as Flink reports timestamps.
///
/// The pure core never reads a clock: the daemon reads it once per step and passes the value
/// in, and the simulator fabricates it.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// Milliseconds since the epoch.
    pub fn millis(self) -> i64 {
        self.0
    }

    /// Seconds since the epoch, as Prometheus wants timestamps in metric values.
    pub(crate) fn seconds(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    /// Milliseconds from `earlier` to `self`, never negative.
    pub fn since(self, earlier: Timestamp) -> u64 {
        self.0.saturating_sub(earlier.0).max(0) as u64
    }

    /// The timestamp `ms` milliseconds later.
    pub fn plus_millis(self, ms: i64) -> Timestamp {
        Timestamp(self.0.saturating_add(ms))
    }

    /// Reads the system clock. Only the I/O edges (daemon, sources) call this.
    pub fn now() -> Timestamp {
        let since_epoch =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Timestamp(since_epoch.as_millis() as i64)
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

/// Bytes for people, in binary units: `812 B`, `1.5 KiB`, `512 MiB`, `12 GiB` (one decimal below
/// 10 of a unit unless whole). The one size formatter: the advisor, the evidence, the alert texts.
pub(crate) fn bytes(v: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = v;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 || v >= 10.0 || v.fract() < 0.05 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// `a`, `a and b`, `a, b and c`, or the first `at_most` and how many more; `none` for none (the
/// sentences of every surface that name several things).
pub(crate) fn some_of<S: AsRef<str>>(items: &[S], at_most: usize, none: &str) -> String {
    let names: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    match names.as_slice() {
        [] => none.to_string(),
        [one] => (*one).to_string(),
        [init @ .., last] if names.len() <= at_most => format!("{} and {last}", init.join(", ")),
        _ => format!("{} and {} more", names[..at_most].join(", "), names.len() - at_most),
    }
}

/// A duration for people: `40 ms`, `5.0 s`, `2.5 min`. The one duration formatter of every
/// surface but the alert texts' `duration` filter (`rules::format_duration`: `1m 15s`).
pub(crate) fn human_ms(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 120_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{:.1} min", ms as f64 / 60_000.0)
    }
}

/// Formats `at` like log4j's `%d{yyyy-MM-dd HH:mm:ss,SSS}` in UTC (times before 1970 as 1970).
pub(crate) fn log_time(at: Timestamp) -> String {
    let rfc = humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(at.0.max(0) as u64));
    let rfc = rfc.to_string(); // 2026-11-29T15:00:42.535Z
    format!("{} {},{}", &rfc[..10], &rfc[11..19], &rfc[20..23])
}

/// `2026-12-01 13:34:42,967` (log4j's `yyyy-MM-dd HH:mm:ss,SSS`, `T` and `.` accepted) read as
/// UTC → epoch ms. Only the first 23 bytes are read; a date the calendar does not have, or
/// one before 1970, is `None`.
///
/// Read by hand, without an allocation (it runs for every timeline event of `scan-logs --format
/// json` and every DEBUG barrier line): the language of `humantime::parse_rfc3339_weak` on
/// `yyyy-MM-ddTHH:mm:ss.SSS`, second 60 read as 59 as it does (a test holds both equal).
pub fn log_time_utc_ms(text: &str) -> Option<i64> {
    let b = text.as_bytes().get(..23)?;
    if b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b' ')
        || b[13] != b':'
        || b[16] != b':'
        || !matches!(b[19], b',' | b'.')
    {
        return None;
    }
    let num = |at: usize, len: usize| -> Option<i64> {
        b[at..at + len].iter().try_fold(0i64, |n, d| d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0')))
    };
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second, millis) = (num(11, 2)?, num(14, 2)?, num(17, 2)?.min(59), num(20, 3)?);
    if year < 1970 || hour > 23 || minute > 59 || num(17, 2)? > 60 {
        return None;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    const BEFORE: [i64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    const DAYS: [i64; 12] = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let m = usize::try_from(month).ok().filter(|m| (1..=12).contains(m))? - 1;
    let month_days = DAYS[m] + i64::from(leap && m == 1);
    if day == 0 || day > month_days {
        return None;
    }
    let year_day = BEFORE[m] + day - 1 + i64::from(leap && m > 1);
    let leap_days = (year - 1 - 1968) / 4 - (year - 1 - 1900) / 100 + (year - 1 - 1600) / 400;
    let days = (year - 1970) * 365 + leap_days + year_day;
    Some(((days * 86_400 + hour * 3_600 + minute * 60 + second) * 1_000) + millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log4j_times_read_and_written_as_utc() {
        assert_eq!(log_time_utc_ms("2026-12-01 13:34:42,967"), Some(1_796_132_082_967));
        assert_eq!(log_time_utc_ms("1970-01-01 00:00:00,000"), Some(0));
        assert_eq!(log_time_utc_ms("2024-02-29T23:59:59.999"), Some(1_709_251_199_999));
        assert_eq!(
            log_time_utc_ms("2026-12-01 13:34:42,967 INFO  org.apache.flink"),
            Some(1_796_132_082_967)
        );
        assert_eq!(log_time_utc_ms("2026-13-01 13:34:42,967"), None);
        assert_eq!(log_time_utc_ms("2026-12-01 13:34:42"), None);
        assert_eq!(log_time_utc_ms("2026-12-01 13:34:42Z967"), None);
        assert_eq!(log_time_utc_ms("yesterday"), None);
        for ms in [0, 1_795_964_442_535, 1_709_251_199_999, 4_102_444_799_999] {
            assert_eq!(log_time_utc_ms(&log_time(Timestamp(ms))), Some(ms));
        }
        assert_eq!(log_time(Timestamp(1_795_964_442_535)), "2026-11-29 15:00:42,535");
    }

    /// The reading before it was written by hand: humantime on the head with `.` for `,`.
    fn log_time_utc_ms_by_humantime(text: &str) -> Option<i64> {
        let head = text.get(..23)?;
        if !matches!(head.as_bytes()[19], b',' | b'.') {
            return None;
        }
        let at = humantime::parse_rfc3339_weak(&format!("{}.{}", &head[..19], &head[20..])).ok()?;
        Some(at.duration_since(UNIX_EPOCH).ok()?.as_millis() as i64)
    }

    #[test]
    fn log_time_utc_ms_reads_as_humantime_did() {
        let mut texts: Vec<String> = vec![
            "2026-12-01 13:34:42,967".into(),
            "2026-12-01 13:34:60,967".into(),
            "2026-12-01 13:34:61,967".into(),
            "2026-12-01 24:00:00,000".into(),
            "2026-12-01 23:60:00,000".into(),
            "1969-12-31 23:59:59,999".into(),
            "2100-02-29 00:00:00,000".into(),
            "2000-02-29 00:00:00,000".into(),
            "2024-02-30 00:00:00,000".into(),
            "2026-00-10 00:00:00,000".into(),
            "2026-04-31 00:00:00,000".into(),
            "2026-04-00 00:00:00,000".into(),
            "9999-12-31 23:59:59,999".into(),
            "2026-12-01 13:34:42,96".into(),
            "2026-12-01 13:34:42,9a7".into(),
            "2026-12-01 13:34:42;967".into(),
            "2026-12-01X13:34:42,967".into(),
            "2026/12/01 13:34:42,967".into(),
            "+026-12-01 13:34:42,967".into(),
            "2026-12-01 13:34:42,967 INFO x".into(),
            "2026-12-01 13:34:42,9é".into(),
            "é026-12-01 13:34:42,967".into(),
        ];
        // Every day of four years (a leap year, a century), at a few times of day.
        for days in (0..4 * 366).chain(47_000..48_500) {
            for ms in [0, 1, 43_199_999, 86_399_999] {
                texts.push(log_time(Timestamp(days * 86_400_000 + ms)));
            }
        }
        for t in &texts {
            assert_eq!(log_time_utc_ms(t), log_time_utc_ms_by_humantime(t), "{t}");
        }
    }
}
