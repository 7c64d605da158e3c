//! Log-event kinds stay what they were on the outside: a state file written before the kinds
//! were typed reads back and writes out byte for byte, and the `kind` label values are the
//! same strings.

use checkpoint_sentinel::app::DaemonStats;
use checkpoint_sentinel::observe::{EventSeverity, LogEvent, Observation};
use checkpoint_sentinel::outputs::export;
use checkpoint_sentinel::state::{State, persist};
use checkpoint_sentinel::stats::WindowSpec;
use checkpoint_sentinel::time::Timestamp;

const WINDOW: WindowSpec = WindowSpec { window_ms: 3_600_000, slots: 6 };

/// A state file with log events of every built-in kind that reaches the recent ring, some
/// routine ones, and a `[[logs.patterns]]` kind, written by the build before the change.
const FIXTURE: &str = "tests/fixtures/state/log_kinds.json";

/// Every built-in kind, as the matcher names them, then a user pattern's.
const KINDS: &[&str] = &[
    "triggered",
    "completed",
    "expired",
    "declined",
    "failed",
    "trigger_failed",
    "tolerable_exceeded",
    "late_message",
    "barrier_overtaken",
    "end_of_partition",
    "execution_delay",
    "async_snapshot_failed",
    "sync_snapshot_failed",
    "restored",
    "barrier_received",
    "barrier_missing",
    "my_slow_flush",
];

fn state_with_every_kind() -> State {
    let events = KINDS
        .iter()
        .enumerate()
        .map(|(i, kind)| {
            let mut e = LogEvent::new(kind.parse().unwrap(), EventSeverity::Warning, format!("line {i}"));
            e.cluster = "c".into();
            e.file = "/log/jm.log".into();
            e.job_id = Some(format!("{:032x}", 7));
            e.checkpoint_id = Some(i as u64 + 1);
            e
        })
        .collect();
    let mut state = State::new(WINDOW);
    state.apply(&Observation::LogEvents(events), Timestamp(1_000));
    state
}

#[test]
fn a_state_file_from_before_typed_kinds_reads_back_and_writes_the_same_bytes() {
    let written = persist::to_bytes(&persist::snapshot(&state_with_every_kind()));
    let fixture = std::fs::read(FIXTURE).unwrap();
    assert_eq!(String::from_utf8_lossy(&written), String::from_utf8_lossy(&fixture));

    let restored = persist::restore(WINDOW, serde_json::from_slice(&fixture).unwrap());
    let rewritten = persist::to_bytes(&persist::snapshot(&restored));
    assert_eq!(String::from_utf8_lossy(&rewritten), String::from_utf8_lossy(&fixture));
    let recent: Vec<String> =
        restored.clusters()["c"].logs.recent.iter().map(|e| e.kind.to_string()).collect();
    let routine = ["triggered", "completed", "barrier_received"];
    let expected: Vec<&str> = KINDS.iter().copied().filter(|k| !routine.contains(k)).collect();
    assert_eq!(recent, expected);
}

#[test]
fn the_kind_label_values_are_the_kind_names() {
    let state = state_with_every_kind();
    let families = export::render(&state, &DaemonStats::default(), Timestamp(1_000));
    let text = export::encode_text(&families);
    let labels: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("flink_checkpoint_log_events_total{"))
        .filter_map(|l| l.split("kind=\"").nth(1)?.split('"').next())
        .collect();
    let mut expected = KINDS.to_vec();
    expected.sort_unstable();
    assert_eq!(labels, expected);
}
