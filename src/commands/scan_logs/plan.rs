//! The plan of a scan: its files cut into units, a small file whole, a large one into ranges
//! that start at a record start.

use std::io::{self, Read, Seek};
use std::path::PathBuf;

use crate::sources::logs::parse::is_record_start;

/// Files at least this large are cut into ranges scanned in parallel.
pub(super) const PARALLEL_MIN_BYTES: u64 = 32 << 20;
/// The size of a range of a cut file: small enough that the threads share out a large file
/// evenly (a thread slowed by something else on the machine takes fewer ranges) and that the
/// events of the ranges waiting to be folded in stay small.
pub(super) const RANGE_BYTES: u64 = 16 << 20;

/// A piece of a scan: a whole file, or a range of one starting at a record start.
pub(super) struct Unit {
    /// Index of its file in the paths.
    pub(super) path: usize,
    pub(super) from: u64,
    /// Offset after its last byte; `None` to the end of the file.
    pub(super) to: Option<u64>,
    /// The first (last) range of its file.
    pub(super) first: bool,
    pub(super) last: bool,
}

/// The units of `paths`: a file below `min_bytes` is one unit, a larger one is cut into
/// `ranges` ranges at record starts (`None`: one per [`RANGE_BYTES`], at least one per thread).
pub(super) fn plan(paths: &[PathBuf], min_bytes: u64, ranges: Option<usize>, threads: usize) -> Vec<Unit> {
    let mut units = Vec::new();
    for (path, p) in paths.iter().enumerate() {
        let whole = Unit { path, from: 0, to: None, first: true, last: true };
        // Only a regular file can be cut (a pipe or a device is read as one unit).
        let len = std::fs::metadata(p).ok().filter(|m| m.is_file()).map_or(0, |m| m.len());
        let ranges = ranges.unwrap_or_else(|| (len.div_ceil(RANGE_BYTES) as usize).max(threads));
        if len == 0 || len < min_bytes || ranges < 2 {
            units.push(whole);
            continue;
        }
        // A file that cannot be opened or read here is scanned whole: the scan meets the
        // error in its place, after the files before it, as a serial scan would.
        let starts = std::fs::File::open(p)
            .and_then(|mut file| split_points(&mut file, len, ranges))
            .unwrap_or_default();
        if starts.is_empty() {
            units.push(whole);
            continue;
        }
        for (k, &from) in starts.iter().enumerate() {
            // The last range reads to the end, as a single pass would.
            let to = starts.get(k + 1).copied();
            units.push(Unit { path, from, to, first: k == 0, last: to.is_none() });
        }
    }
    units
}

/// Where to cut a file of `len` bytes into `n` ranges: offsets of record starts (a timestamped
/// line) near each `len * i / n`, beginning with 0. Empty if no cut was found.
fn split_points(file: &mut std::fs::File, len: u64, n: usize) -> io::Result<Vec<u64>> {
    // Most records are a line or a short stack trace: a record start is usually in the first
    // few KiB; a window of 1 MiB is read only for a record longer than that.
    const FIRST_WINDOW: usize = 64 << 10;
    const MAX_WINDOW: usize = 1 << 20;
    let mut starts = vec![0u64];
    let mut window = vec![0u8; MAX_WINDOW];
    for i in 1..n as u64 {
        let target = len * i / n as u64;
        file.seek(io::SeekFrom::Start(target))?;
        let mut filled = 0;
        let mut want = FIRST_WINDOW;
        let cut = loop {
            while filled < want {
                match file.read(&mut window[filled..want]) {
                    Ok(0) => break,
                    Ok(k) => filled += k,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            let data = &window[..filled];
            // A line start is a byte after a newline; the line must be complete in the window.
            let cut = memchr::memchr_iter(b'\n', data).map(|nl| nl + 1).find(|&at| {
                let line_end = memchr::memchr(b'\n', &data[at..]).map(|e| at + e);
                line_end.is_some_and(|e| is_record_start(&data[at..e]))
            });
            if cut.is_some() || filled < want || want == MAX_WINDOW {
                break cut;
            }
            want = MAX_WINDOW;
        };
        match cut {
            Some(at) if target + at as u64 > *starts.last().unwrap_or(&0) => starts.push(target + at as u64),
            _ => {}
        }
    }
    Ok(if starts.len() > 1 { starts } else { Vec::new() })
}
