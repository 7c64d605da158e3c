//! Flink's thread-dump and flame-graph answers (wire models and their reading), pure: the task
//! thread of one subtask found by Flink's naming, its frames, and the user's frame among them.
//!
//! `/taskmanagers/:tm/thread-dump` (1.13+) answers `{"threadInfos": [{"threadName",
//! "stringifiedThreadInfo"}]}`; the text is Java's `ThreadInfo.toString()` (8 frames at most
//! before 1.17) or Flink's copy of it bounded by `cluster.thread-dump.stacktrace-max-depth`
//! (1.17+, 50 by default), both ending a cut stack with a `\t...` line.
//! `/jobs/:jid/vertices/:vid/flamegraph` answers `{"endTimestamp", "data": {name, value,
//! children}}`, the names `class.method:line`, outermost frame first; `endTimestamp` -1 when
//! the task ended, -2 when `rest.flamegraph.enabled` is off, -3 while the first samples are taken.

use serde::Deserialize;

use crate::observe::{
    Frame, MAX_FRAMES, MAX_NAME_CHARS, SampleSource, ThreadSample, ThreadState, first_user_frame,
};
use crate::time::Timestamp;

/// `GET /taskmanagers/:tm/thread-dump`.
#[derive(Debug, Clone, Deserialize)]
pub struct ThreadDump {
    /// Every thread of the TaskManager's JVM.
    #[serde(rename = "threadInfos", default)]
    pub(crate) thread_infos: Vec<ThreadInfo>,
}

/// One thread of a [`ThreadDump`].
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ThreadInfo {
    /// The thread's name.
    #[serde(rename = "threadName")]
    pub(crate) thread_name: Option<String>,
    /// Its state and stack as Java prints them.
    #[serde(rename = "stringifiedThreadInfo")]
    pub(crate) stringified: Option<String>,
}

/// `GET /jobs/:jid/vertices/:vid/flamegraph`.
#[derive(Debug, Clone, Deserialize)]
pub struct FlameGraph {
    /// When the samples ended (epoch ms), or -1, -2, -3 (see the module's text).
    #[serde(rename = "endTimestamp")]
    pub(crate) end_timestamp: Option<i64>,
    /// The merged stacks; `null` unless samples were taken.
    pub(crate) data: Option<FlameNode>,
}

/// One node of a [`FlameGraph`]: a frame and how many samples passed through it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct FlameNode {
    /// `class.method:line` (`root` at the top).
    #[serde(default)]
    pub(crate) name: String,
    /// Samples through this frame.
    #[serde(default)]
    pub(crate) value: u32,
    /// The frames it called.
    #[serde(default)]
    pub(crate) children: Vec<FlameNode>,
}

/// One thread's stack read from a dump.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedThread {
    /// Its state, when the first line names one.
    pub state: Option<ThreadState>,
    /// Innermost first, at most [`MAX_FRAMES`].
    pub frames: Vec<Frame>,
    /// Whether the stack was cut (`\t...`, or more than [`MAX_FRAMES`]).
    pub stopped_early: bool,
}

/// What a flame-graph request said.
#[derive(Clone, Debug, PartialEq)]
pub enum FlameAnswer {
    /// `rest.flamegraph.enabled` is off on this cluster.
    Disabled,
    /// Flink is taking the first samples: ask again in a few seconds.
    Waiting,
    /// The task ended, or no sample was in the states asked for.
    Nothing,
    /// The heaviest stack.
    Stack {
        /// Its frames, innermost first.
        frames: Vec<Frame>,
        /// Whether it does not reach the thread's start (the sampler's depth cut it).
        stopped_early: bool,
        /// The samples through its user frame (its innermost frame when it has none).
        hits: u32,
        /// All samples.
        of: u32,
    },
}

/// Whether `thread` is the task thread of subtask `subtask` (0-based) of the vertex named
/// `vertex`: Flink names it `<task name> (<subtask+1>/<parallelism>)#<attempt>` (no `#attempt`
/// before 1.12); a legacy source runs its loop in `Legacy Source Thread - <the same>`.
pub(crate) fn is_task_thread(thread: &str, vertex: &str, subtask: u32, parallelism: Option<u32>) -> bool {
    let name = thread.strip_prefix("Legacy Source Thread - ").unwrap_or(thread);
    let Some(rest) = name.strip_prefix(vertex).and_then(|r| r.strip_prefix(" (")) else { return false };
    let Some((counts, attempt)) = rest.split_once(')') else { return false };
    let Some((index, of)) = counts.split_once('/') else { return false };
    let attempt_ok = attempt.is_empty()
        || attempt.strip_prefix('#').is_some_and(|a| !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit()));
    attempt_ok
        && index.parse::<u32>().ok() == Some(subtask + 1)
        && parallelism.is_none_or(|p| of.parse::<u32>().ok() == Some(p))
}

/// The task thread of the subtask in `dump` ([`is_task_thread`]) and its stack. Of a legacy
/// source's two threads the one in the user's code, else the task thread.
pub fn find_task_thread<'a>(
    dump: &'a ThreadDump,
    vertex: &str,
    subtask: u32,
    parallelism: Option<u32>,
) -> Option<(&'a str, ParsedThread)> {
    let mut found: Vec<(&str, ParsedThread)> = dump
        .thread_infos
        .iter()
        .filter_map(|t| {
            let name = t.thread_name.as_deref()?;
            let text =
                t.stringified.as_deref().filter(|_| is_task_thread(name, vertex, subtask, parallelism))?;
            Some((name, parse_thread(text)))
        })
        .collect();
    let in_user_code = found.iter().position(|(_, t)| first_user_frame(&t.frames).is_some());
    let pick =
        in_user_code.or_else(|| found.iter().position(|(n, _)| !n.starts_with("Legacy Source Thread")));
    Some(found.swap_remove(pick.unwrap_or(0).min(found.len().checked_sub(1)?)))
}

/// The task thread of `operator`'s `subtask` in `dump` ([`find_task_thread`]), as the sample of
/// a thread dump of `taskmanager` taken at `taken_at` while `checkpoint_id` waited for it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn task_thread_sample(
    dump: &ThreadDump,
    checkpoint_id: u64,
    operator: &str,
    subtask: u32,
    parallelism: Option<u32>,
    taskmanager: &str,
    taken_at: Timestamp,
) -> Option<ThreadSample> {
    let (name, thread) = find_task_thread(dump, operator, subtask, parallelism)?;
    Some(ThreadSample {
        checkpoint_id,
        operator: operator.to_string(),
        subtask,
        taskmanager: taskmanager.to_string(),
        thread: Some(name.to_string()),
        taken_at,
        state: thread.state,
        user_frame: first_user_frame(&thread.frames),
        frames: thread.frames,
        stopped_early: thread.stopped_early,
        source: SampleSource::ThreadDump,
        hits: None,
    })
}

/// Reads Java's printing of one thread: `"name" [daemon] [prio=5] Id=N STATE [on …] …`, then `\tat frame` lines,
/// `\t- locked …` lines (skipped) and a `\t...` line when the stack was cut.
pub(crate) fn parse_thread(text: &str) -> ParsedThread {
    let mut lines = text.lines();
    // `"name" Id=7 STATE …` (Flink 1.17+); Java's own text before that has `daemon prio=5`
    // between the name and the id.
    let state = lines.next().and_then(|first| {
        let after_id = &first[first.rfind(" Id=")? + 4..];
        let (_, rest) = after_id.split_once(' ')?;
        ThreadState::parse(rest.split_whitespace().next()?)
    });
    let mut frames = Vec::new();
    let mut stopped_early = false;
    for line in lines {
        let line = line.trim_start();
        if let Some(frame) = line.strip_prefix("at ") {
            if frames.len() == MAX_FRAMES {
                stopped_early = true;
                break;
            }
            frames.extend(parse_frame(frame));
        } else if line == "..." {
            stopped_early = true;
        }
    }
    ParsedThread { state, frames, stopped_early }
}

/// One `StackTraceElement.toString()`: `[loader/][module@version/]class.method(File.java:42)`,
/// `(Native Method)` or `(Unknown Source)`.
pub(crate) fn parse_frame(text: &str) -> Option<Frame> {
    let (head, place) = text.trim().split_once('(')?;
    let place = place.strip_suffix(')').unwrap_or(place);
    let (file, line) = match place {
        "Native Method" | "Unknown Source" | "" => (None, None),
        _ => match place.rsplit_once(':') {
            Some((f, l)) => (Some(f), l.parse().ok()),
            None => (Some(place), None),
        },
    };
    let (class, method) = strip_loader(head).rsplit_once('.')?;
    Some(Frame {
        class: bounded(class),
        method: bounded(method),
        file: file.filter(|f| *f != "Unknown Source").map(bounded),
        line,
    })
}

/// Drops the class loader (`app/`, `app//`) and module (`java.base@17.0.9/`) of a frame; a
/// lambda class keeps its own `/0x…` (`Foo$$Lambda$7/0x0000000800c4b000`).
fn strip_loader(mut head: &str) -> &str {
    while let Some((first, rest)) = head.split_once('/') {
        // A class name holds a `/` only in a lambda's hidden-class suffix, after a `$`.
        if first.contains('$') {
            break;
        }
        head = rest;
    }
    head
}

fn bounded(text: &str) -> String {
    text.chars().take(MAX_NAME_CHARS).collect()
}

/// Reads a flame graph: its status, else its heaviest stack (from the root, the child with the
/// most samples each time).
pub fn read_flame_graph(graph: &FlameGraph) -> FlameAnswer {
    match graph.end_timestamp {
        Some(-2) => return FlameAnswer::Disabled,
        Some(-3) => return FlameAnswer::Waiting,
        _ => {}
    }
    let Some(root) = graph.data.as_ref().filter(|r| r.value > 0 && !r.children.is_empty()) else {
        return FlameAnswer::Nothing;
    };
    let mut path: Vec<&FlameNode> = Vec::new();
    let mut node = root;
    while let Some(next) = node.children.iter().max_by_key(|c| c.value) {
        path.push(next);
        node = next;
    }
    // Innermost first, as a dump prints it.
    path.reverse();
    let stopped_early =
        path.len() > MAX_FRAMES || path.last().is_none_or(|outer| !is_thread_start(&outer.name));
    path.truncate(MAX_FRAMES);
    let frames: Vec<Frame> = path.iter().filter_map(|n| flame_frame(&n.name)).collect();
    let hits = first_user_frame(&frames).map_or(path.first().map_or(0, |n| n.value), |i| path[i].value);
    FlameAnswer::Stack { frames, stopped_early, hits, of: root.value }
}

/// Whether a flame-graph frame is where a thread starts (its stack was not cut).
fn is_thread_start(name: &str) -> bool {
    name.starts_with("java.lang.Thread.run:") || name.starts_with("java.lang.Thread.runWith:")
}

/// A flame-graph node name, `class.method:line` (`-1` unknown, `-2` native), as a frame.
fn flame_frame(name: &str) -> Option<Frame> {
    let (head, line) = name.rsplit_once(':').unwrap_or((name, ""));
    let (class, method) = head.rsplit_once('.')?;
    let line = line.parse::<i64>().ok().filter(|l| *l > 0).and_then(|l| u32::try_from(l).ok());
    Some(Frame { class: bounded(class), method: bounded(method), file: None, line })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As Flink ≥ 1.17 prints a task thread sleeping in a user's map function (JDK 17).
    const BLOCKED: &str = "\"Map -> Sink: out (1/2)#0\" Id=91 TIMED_WAITING\n\
        \tat java.base@17.0.9/java.lang.Thread.sleep(Native Method)\n\
        \tat app//sentinel.e2e.ScenarioJob$BlockingMap.map(ScenarioJob.java:87)\n\
        \tat app//sentinel.e2e.ScenarioJob$BlockingMap.map(ScenarioJob.java:80)\n\
        \tat app//org.apache.flink.streaming.api.operators.StreamMap.processElement(StreamMap.java:38)\n\
        \t...\n\n";

    #[test]
    fn a_dumped_thread_reads_into_state_frames_and_a_cut() {
        let t = parse_thread(BLOCKED);
        assert_eq!(t.state, Some(ThreadState::TimedWaiting));
        assert!(t.stopped_early);
        assert_eq!(t.frames.len(), 4);
        assert_eq!(t.frames[0].text(), "java.lang.Thread.sleep(Unknown Source)");
        assert_eq!(t.frames[1].text(), "sentinel.e2e.ScenarioJob$BlockingMap.map(ScenarioJob.java:87)");
        assert_eq!(first_user_frame(&t.frames), Some(1));
    }

    #[test]
    fn frames_keep_lambda_classes_and_lose_loaders_and_modules() {
        let f =
            parse_frame("org.apache.flink.X$$Lambda$773/0x00000001007f84a0.accept(Unknown Source)").unwrap();
        assert_eq!(
            (f.class.as_str(), f.method.as_str(), f.file),
            ("org.apache.flink.X$$Lambda$773/0x00000001007f84a0", "accept", None)
        );
        let f = parse_frame("app//Top$$Lambda$1/0x1.run(Top.java)").unwrap();
        assert_eq!(
            (f.class.as_str(), f.file.as_deref(), f.line),
            ("Top$$Lambda$1/0x1", Some("Top.java"), None)
        );
        let f = parse_frame("java.base/java.lang.Object.wait(Object.java:338)").unwrap();
        assert_eq!((f.class.as_str(), f.line), ("java.lang.Object", Some(338)));
        assert_eq!(parse_frame("garbage"), None);
    }

    #[test]
    fn the_task_thread_is_found_by_flinks_naming() {
        assert!(is_task_thread("Map -> Sink: out (1/2)#0", "Map -> Sink: out", 0, Some(2)));
        assert!(is_task_thread("Map -> Sink: out (2/2)", "Map -> Sink: out", 1, None), "before 1.12");
        assert!(is_task_thread("Legacy Source Thread - Source: s (1/1)#3", "Source: s", 0, Some(1)));
        assert!(!is_task_thread("Map -> Sink: out (1/2)#0", "Map -> Sink: out", 1, Some(2)));
        assert!(!is_task_thread("Map -> Sink: out (1/2)#0", "Map", 0, Some(2)));
        assert!(!is_task_thread("Map (1/2)#x", "Map", 0, Some(2)));
        let dump: ThreadDump = serde_json::from_value(serde_json::json!({"threadInfos": [
            {"threadName": "main", "stringifiedThreadInfo": "\"main\" Id=1 WAITING\n"},
            {"threadName": "Map -> Sink: out (1/2)#0", "stringifiedThreadInfo": BLOCKED},
            {"threadName": "Map -> Sink: out (2/2)#0", "stringifiedThreadInfo": "\"x\" Id=2 RUNNABLE\n"},
        ]}))
        .unwrap();
        let (name, t) = find_task_thread(&dump, "Map -> Sink: out", 0, Some(2)).unwrap();
        assert_eq!((name, t.frames.len()), ("Map -> Sink: out (1/2)#0", 4));
        assert!(find_task_thread(&dump, "Map -> Sink: out", 2, Some(2)).is_none());
    }

    #[test]
    fn a_flame_graph_gives_its_heaviest_stack_or_says_why_not() {
        let graph =
            |v: serde_json::Value| read_flame_graph(&serde_json::from_value::<FlameGraph>(v).unwrap());
        assert_eq!(graph(serde_json::json!({"endTimestamp": -2, "data": null})), FlameAnswer::Disabled);
        assert_eq!(graph(serde_json::json!({"endTimestamp": -3})), FlameAnswer::Waiting);
        assert_eq!(graph(serde_json::json!({"endTimestamp": -1, "data": null})), FlameAnswer::Nothing);
        let answer =
            graph(serde_json::json!({"endTimestamp": 1, "data": {"name": "root", "value": 10, "children": [
            {"name": "java.lang.Thread.run:840", "value": 10, "children": [
                {"name": "sentinel.e2e.ScenarioJob$BlockingMap.map:87", "value": 9, "children": [
                    {"name": "java.lang.Thread.sleep:-2", "value": 9, "children": []}]},
                {"name": "org.apache.flink.Other.idle:1", "value": 1, "children": []}]}]}}));
        let FlameAnswer::Stack { frames, stopped_early, hits, of } = answer else { panic!("{answer:?}") };
        assert_eq!(
            frames.iter().map(Frame::method_text).collect::<Vec<_>>(),
            ["java.lang.Thread.sleep", "sentinel.e2e.ScenarioJob$BlockingMap.map", "java.lang.Thread.run"]
        );
        assert_eq!((frames[0].line, frames[1].line), (None, Some(87)));
        assert_eq!((stopped_early, hits, of), (false, 9, 10));
    }
}
