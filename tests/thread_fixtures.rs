//! The thread-dump and flame-graph answers of the live `blocked` scenario (`blocking-map` #0
//! sleeping in `sentinel.e2e.ScenarioJob$BlockingMap.holdTheThread` past the checkpoint
//! timeout), captured on every version: the task thread is found by Flink's naming, its user
//! frame is that method, and the stack says where it was cut (8 frames before 1.17).

use std::path::PathBuf;

use checkpoint_sentinel::observe::{ThreadState, first_user_frame};
use checkpoint_sentinel::sources::flink::threads::{self, FlameAnswer, FlameGraph, ThreadDump};

use crate::common;

const VERSIONS: [&str; 4] = ["1.14.6", "1.17.2", "1.20.5", "2.3.0"];

fn file(version: &str, name: &str) -> PathBuf {
    common::fixtures().join("threads").join(format!("flink-{version}")).join(name)
}

fn read<T: serde::de::DeserializeOwned>(version: &str, name: &str) -> T {
    let path = file(version, name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_blocked_task_thread_is_found_in_every_versions_dump_with_its_user_frame() {
    for version in VERSIONS {
        for dump in ["thread-dump-000.json", "thread-dump-001.json"] {
            let parsed: ThreadDump = read(version, dump);
            let (name, thread) = threads::find_task_thread(&parsed, "blocking-map", 0, Some(2))
                .unwrap_or_else(|| panic!("{version} {dump}: no blocking-map (1/2) thread"));
            assert_eq!(name, "blocking-map (1/2)#0", "{version}");
            assert_eq!(thread.state, Some(ThreadState::TimedWaiting), "{version}");
            let user = first_user_frame(&thread.frames).map(|i| &thread.frames[i]).expect(version);
            assert_eq!(
                user.text(),
                "sentinel.e2e.ScenarioJob$BlockingMap.holdTheThread(ScenarioJob.java:366)"
            );
            assert_eq!(thread.frames[0].method_text(), "java.lang.Thread.sleep", "{version}");
            // Java's own text (before 1.17) stops at 8 frames; Flink's copy at
            // cluster.thread-dump.stacktrace-max-depth (50), deeper than this stack.
            let cut_at_8 = version == "1.14.6";
            assert_eq!((thread.frames.len() == 8, thread.stopped_early), (cut_at_8, cut_at_8), "{version}");
            // Its sibling waits in Flink's mailbox: no user frame.
            let (_, idle) = threads::find_task_thread(&parsed, "blocking-map", 1, Some(2)).expect(version);
            assert_eq!(first_user_frame(&idle.frames), None, "{version}");
            // Threads named after the task but not it (OutputFlusher, System Time Trigger).
            assert!(threads::find_task_thread(&parsed, "blocking-map", 0, Some(4)).is_none());
        }
    }
}

#[test]
fn every_versions_flame_graph_first_waits_then_gives_the_blocked_stack() {
    for version in VERSIONS {
        let trigger: FlameGraph = read(version, "flamegraph-blocking-map-trigger.json");
        assert_eq!(threads::read_flame_graph(&trigger), FlameAnswer::Waiting, "{version}");
        let graph: FlameGraph = read(version, "flamegraph-blocking-map-full-subtask-0.json");
        let FlameAnswer::Stack { frames, stopped_early, hits, of } = threads::read_flame_graph(&graph) else {
            panic!("{version}: no stack");
        };
        let user = first_user_frame(&frames).map(|i| &frames[i]).expect(version);
        assert_eq!(user.method_text(), "sentinel.e2e.ScenarioJob$BlockingMap.holdTheThread", "{version}");
        assert_eq!((user.line, stopped_early), (Some(366), false), "{version}");
        // 1.14 has no per-subtask flame graph: `subtaskindex` is ignored and both subtasks'
        // samples are merged (why the looker asks for it only from 1.17 on).
        let expected = if version == "1.14.6" { (100, 200) } else { (100, 100) };
        assert_eq!((hits, of), expected, "{version}");
    }
}
