//! The daemon's own process figures for the standard `process_*` metrics (CPU, memory, file
//! descriptors, threads, start time), read from Linux's `/proc/self`; `None` elsewhere.
//!
//! The same names and meanings as the Prometheus client libraries' process collectors, so
//! dashboards made for node_exporter-style targets work unchanged.

/// Linux reports CPU times and the start time in clock ticks of `USER_HZ`, which is 100 on
/// every architecture's user ABI.
const TICKS_PER_SECOND: f64 = 100.0;

/// One reading of the process's figures.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct ProcessStats {
    /// User and system CPU time, seconds.
    pub(crate) cpu_seconds: f64,
    /// Resident memory, bytes.
    pub(crate) resident_memory_bytes: f64,
    /// Virtual memory, bytes.
    pub(crate) virtual_memory_bytes: f64,
    /// Open file descriptors.
    pub(crate) open_fds: f64,
    /// The soft limit of open file descriptors.
    pub(crate) max_fds: f64,
    /// Start of the process, seconds since the Unix epoch.
    pub(crate) start_time_seconds: f64,
    /// Threads.
    pub(crate) threads: f64,
}

/// Reads `/proc/self`; `None` when it cannot (not Linux, or `/proc` not mounted).
pub(crate) fn read() -> Option<ProcessStats> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count();
    parse(&stat, &status, &limits, &boot, open_fds)
}

/// The figures from the texts of `/proc/self/stat`, `/proc/self/status`, `/proc/self/limits`
/// and `/proc/stat`, and the number of entries of `/proc/self/fd`.
pub(crate) fn parse(
    stat: &str,
    status: &str,
    limits: &str,
    boot: &str,
    open_fds: usize,
) -> Option<ProcessStats> {
    // The command name in parentheses may hold spaces: fields count from after its last ')'.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect();
    // Field n of proc(5) (1-based, pid = 1, comm = 2, state = 3) is fields[n - 3].
    let field = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
    let (utime, stime, threads, start_ticks, vsize) =
        (field(14)?, field(15)?, field(20)?, field(22)?, field(23)?);
    let kib = |key: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(key))?;
        Some(line[key.len()..].trim().trim_end_matches("kB").trim().parse::<f64>().ok()? * 1024.0)
    };
    let max_fds = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l["Max open files".len()..].split_whitespace().next())
        .and_then(|soft| soft.parse::<f64>().ok())
        .unwrap_or(f64::INFINITY);
    let btime: f64 = boot.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse().ok()?;
    Some(ProcessStats {
        cpu_seconds: (utime + stime) / TICKS_PER_SECOND,
        resident_memory_bytes: kib("VmRSS:").unwrap_or(0.0),
        virtual_memory_bytes: vsize,
        open_fds: open_fds as f64,
        max_fds,
        start_time_seconds: btime + start_ticks / TICKS_PER_SECOND,
        threads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_texts_are_read_field_by_field() {
        let stat = "28254 (a (b) c) R 28252 28252 26186 0 -1 4194304 101 0 0 0 250 50 0 0 20 0 7 0 273577 3133440 408 18446744073709551615 0";
        let status = "Name:\tcat\nVmSize:\t    3060 kB\nVmRSS:\t    1632 kB\nThreads:\t7\n";
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 4096                 files\n";
        let boot = "cpu  1 2 3\nbtime 1796138054\n";
        let p = parse(stat, status, limits, boot, 9).unwrap();
        assert_eq!(p.cpu_seconds, 3.0);
        assert_eq!(p.threads, 7.0);
        assert_eq!(p.virtual_memory_bytes, 3_133_440.0);
        assert_eq!(p.resident_memory_bytes, 1632.0 * 1024.0);
        assert_eq!(p.max_fds, 1024.0);
        assert_eq!(p.open_fds, 9.0);
        assert_eq!(p.start_time_seconds, 1_796_138_054.0 + 2735.77);
    }

    #[test]
    fn this_process_is_read() {
        let p = read().expect("/proc on Linux");
        assert!(p.resident_memory_bytes > 0.0 && p.threads >= 1.0 && p.open_fds >= 3.0, "{p:?}");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        assert!(p.start_time_seconds <= now + 1.0 && p.start_time_seconds > now - 86_400.0 * 365.0, "{p:?}");
    }
}
