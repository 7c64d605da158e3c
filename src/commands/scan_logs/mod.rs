//! The offline analysis behind `checkpoint-sentinel scan-logs`: the answer first (per job that
//! failed: what, the failovers, the root cause, where, what to do), then the subtasks that held
//! checkpoints up, root causes, alignment from DEBUG barrier lines, events per kind and a
//! timeline per checkpoint, as text or JSON.
//!
//! The scan streams: each file is read in large buffers, one SIMD multi-literal search over the
//! whole buffer finds the built-in needles ([`Patterns::find_needles`]), and only the lines
//! that carry one (plus the stack trace of a line that produced an event) reach the record
//! parser. Lines that match nothing cost the newline search and a comparison. Events are folded
//! into an aggregate (`aggregate.rs`) as they come, in a compact form (interned strings, no
//! stack traces), so memory grows with the number of checkpoint events, not with the size of
//! the input, and every per-checkpoint collection is capped.
//!
//! Several files, or a large one cut into ranges at record starts, are scanned on one thread
//! per core ([`Scanner::scan_paths`]); the events are folded in in file order, so the report is
//! the one of a serial pass. Tasks named by a vertex id get the operator name the same logs
//! give it, from lines found in the same pass (`names.rs`).

mod aggregate;
mod json;
mod json_bytes;
mod lines;
mod names;
mod pack;
mod plan;
mod report;
mod scan;
mod summary;
mod text;

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use crate::sources::logs::parse::Patterns;

pub use report::{FileSummary, ScanReport};
pub use scan::Scanner;

/// Reads `paths` with the given line limit and keeps every event in [`ScanReport::events`]
/// besides the aggregate: for tests and small inputs. `scan-logs` uses [`scan_paths_streaming`].
pub fn scan_paths(
    paths: &[PathBuf],
    patterns: &Arc<Patterns>,
    max_line_bytes: usize,
) -> io::Result<ScanReport> {
    let mut scanner = Scanner::new(patterns.clone(), max_line_bytes).keep_events(true);
    scanner.scan_paths(paths)?;
    Ok(scanner.finish())
}

/// Reads `paths` with the given line limit into the aggregate only: memory bounded by the
/// number of checkpoint events, whatever the size of the files.
pub fn scan_paths_streaming(
    paths: &[PathBuf],
    patterns: &Arc<Patterns>,
    max_line_bytes: usize,
) -> io::Result<ScanReport> {
    let mut scanner = Scanner::new(patterns.clone(), max_line_bytes);
    scanner.scan_paths(paths)?;
    Ok(scanner.finish())
}
