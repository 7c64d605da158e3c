//! Fuzzes the log line recogniser and record assembly: arbitrary lines (Flink-like or not) never
//! panic, and every event points inside the input.
#![no_main]

use std::sync::{Arc, OnceLock};

use checkpoint_sentinel::sources::logs::parse::{Patterns, RecordParser};
use libfuzzer_sys::fuzz_target;

/// Compiling the patterns is the expensive part; do it once.
fn patterns() -> Arc<Patterns> {
    static PATTERNS: OnceLock<Arc<Patterns>> = OnceLock::new();
    PATTERNS.get_or_init(Patterns::builtin).clone()
}

fuzz_target!(|data: &[u8]| {
    let mut parser = RecordParser::new(patterns());
    let mut events = Vec::new();
    let mut offset = 0u64;
    for line in data.split(|&b| b == b'\n') {
        parser.push_line(line, offset, &mut events);
        offset += line.len() as u64 + 1;
    }
    parser.flush(&mut events);
    if let Ok(text) = std::str::from_utf8(data) {
        for line in text.lines() {
            let _ = patterns().recognise(line);
        }
    }
});
