//! The thread vocabulary: a sample of one subtask's task thread (its stack, from a TaskManager's
//! thread dump or Flink's flame-graph sampler) and the frame where the user's code sits.

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

/// Frames kept of one stack (Flink's own default depth is 50; a deeper stack is cut here and
/// marked `stopped_early`).
pub(crate) const MAX_FRAMES: usize = 64;

/// Characters kept of a class or method name (a generated lambda class can be long).
pub(crate) const MAX_NAME_CHARS: usize = 200;

/// A Java thread's state (`java.lang.Thread.State`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ThreadState {
    /// Running, or in native code.
    Runnable,
    /// Waiting for a monitor (a `synchronized` block another thread holds).
    Blocked,
    /// Waiting without a timeout (`Object.wait`, `LockSupport.park`).
    Waiting,
    /// Waiting with a timeout (`Thread.sleep`, `parkNanos`).
    TimedWaiting,
    /// Not started.
    New,
    /// Ended.
    Terminated,
}

impl ThreadState {
    /// Java's name of the state.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ThreadState::Runnable => "RUNNABLE",
            ThreadState::Blocked => "BLOCKED",
            ThreadState::Waiting => "WAITING",
            ThreadState::TimedWaiting => "TIMED_WAITING",
            ThreadState::New => "NEW",
            ThreadState::Terminated => "TERMINATED",
        }
    }

    /// From Java's name; `None` for anything else.
    pub(crate) fn parse(text: &str) -> Option<ThreadState> {
        Some(match text {
            "RUNNABLE" => ThreadState::Runnable,
            "BLOCKED" => ThreadState::Blocked,
            "WAITING" => ThreadState::Waiting,
            "TIMED_WAITING" => ThreadState::TimedWaiting,
            "NEW" => ThreadState::New,
            "TERMINATED" => ThreadState::Terminated,
            _ => return None,
        })
    }
}

/// One stack frame, innermost first in a stack.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    /// The fully qualified class (`sentinel.e2e.ScenarioJob$BlockingMap`).
    pub(crate) class: String,
    /// The method.
    pub(crate) method: String,
    /// The source file, when the class was compiled with it (`ScenarioJob.java`).
    pub(crate) file: Option<String>,
    /// The line; `None` for a native method or when unknown.
    pub line: Option<u32>,
}

impl Frame {
    /// `class.method`, how the alert names a frame.
    pub fn method_text(&self) -> String {
        format!("{}.{}", self.class, self.method)
    }

    /// `class.method(File.java:42)`, as Java prints a frame (`Native Method`, `Unknown Source`
    /// when it does not know).
    pub fn text(&self) -> String {
        let place = match (&self.file, self.line) {
            (Some(f), Some(l)) => format!("{f}:{l}"),
            (Some(f), None) => f.clone(),
            (None, Some(l)) => format!("line {l}"),
            (None, None) => "Unknown Source".to_string(),
        };
        format!("{}.{}({place})", self.class, self.method)
    }

    /// Whether the frame is Flink's, the JDK's or a library Flink ships (not the user's code).
    pub(crate) fn is_framework(&self) -> bool {
        is_framework_class(&self.class)
    }
}

/// Packages of Flink, the JDK, Scala and what Flink shades or runs on: a frame in one of them is
/// not the user's code. A user class in a package of its own is everything else.
pub(crate) const FRAMEWORK_PACKAGES: &[&str] = &[
    "org.apache.flink.",
    "java.",
    "javax.",
    "jdk.",
    "sun.",
    "com.sun.",
    "scala.",
    "akka.",
    "org.apache.pekko.",
    "org.slf4j.",
    "org.apache.logging.log4j.",
    "io.netty.",
    "com.esotericsoftware.kryo.",
    "org.rocksdb.",
];

/// Whether `class` belongs to Flink, the JDK or a library Flink ships ([`FRAMEWORK_PACKAGES`]).
/// Flink's shaded copies (`org.apache.flink.shaded.…`) are Flink's.
pub(crate) fn is_framework_class(class: &str) -> bool {
    FRAMEWORK_PACKAGES.iter().any(|p| class.starts_with(p))
}

/// The first frame (innermost) outside Flink and the JDK: where the user's code holds the thread.
pub fn first_user_frame(frames: &[Frame]) -> Option<usize> {
    frames.iter().position(|f| !f.is_framework())
}

/// Where a sample came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SampleSource {
    /// `/taskmanagers/:tm/thread-dump`: one stack of every thread of the TaskManager.
    ThreadDump,
    /// `/jobs/:jid/vertices/:vid/flamegraph`: Flink's sampler, many stacks of the vertex's task
    /// threads merged into a tree; the sample is its heaviest path.
    FlameGraph,
}

impl SampleSource {
    /// As the API and the metrics name it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SampleSource::ThreadDump => "thread_dump",
            SampleSource::FlameGraph => "flame_graph",
        }
    }
}

/// The stack of one subtask's task thread at one moment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadSample {
    /// The checkpoint it was taken for (one in progress that this subtask had not acknowledged).
    pub(crate) checkpoint_id: u64,
    /// The operator chain (job vertex) name.
    pub(crate) operator: String,
    /// The subtask index (0-based).
    pub(crate) subtask: u32,
    /// The TaskManager's id.
    pub(crate) taskmanager: String,
    /// The thread's name (`Map -> Sink (1/2)#0`); the flame graph names none.
    pub(crate) thread: Option<String>,
    /// When it was taken (the daemon's clock when the answer came).
    pub(crate) taken_at: Timestamp,
    /// Its state; the flame graph tells none.
    pub(crate) state: Option<ThreadState>,
    /// Its frames, innermost first, at most [`MAX_FRAMES`].
    pub(crate) frames: Vec<Frame>,
    /// The index in `frames` of the first frame outside Flink and the JDK (the user's code).
    pub(crate) user_frame: Option<usize>,
    /// Whether the stack was cut before its end (`cluster.thread-dump.stacktrace-max-depth`,
    /// 8 frames before Flink 1.17, or [`MAX_FRAMES`]): the user's frame may lie below.
    pub(crate) stopped_early: bool,
    /// Where it came from.
    pub(crate) source: SampleSource,
    /// Of the flame graph's samples of this vertex, those on this stack and all: (hits, of).
    #[serde(default)]
    pub(crate) hits: Option<(u32, u32)>,
}

impl ThreadSample {
    /// The user's frame, when one was found.
    pub(crate) fn user(&self) -> Option<&Frame> {
        self.frames.get(self.user_frame?)
    }

    /// One line: `blocked in: class.method(File.java:42) on tm-1 (thread Map (1/2)#0)`; without
    /// a user frame, the innermost frame and why no user frame is named.
    pub(crate) fn text(&self) -> String {
        let thread = self.thread.as_deref().map_or(String::new(), |t| format!(" (thread {t})"));
        let state = self.state.map_or(String::new(), |s| format!(", {}", s.as_str()));
        match (self.user(), self.frames.first()) {
            (Some(user), _) => format!("blocked in: {} on {}{thread}{state}", user.text(), self.taskmanager),
            (None, Some(top)) => {
                let why = if self.stopped_early {
                    "no frame of the user's code among the frames Flink returned (the stack was cut)"
                } else {
                    "only Flink and JDK frames"
                };
                format!("in: {} on {}{thread}{state}: {why}", top.text(), self.taskmanager)
            }
            (None, None) => format!("no stack of the thread on {}{thread}", self.taskmanager),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(class: &str) -> Frame {
        Frame { class: class.into(), method: "run".into(), file: None, line: None }
    }

    #[test]
    fn the_first_frame_outside_flink_and_the_jdk_is_the_users() {
        let frames = [
            frame("java.lang.Thread"),
            frame("org.apache.flink.shaded.guava31.com.google.common.util.concurrent.Uninterruptibles"),
            frame("sentinel.e2e.ScenarioJob$BlockingMap"),
            frame("org.apache.flink.streaming.runtime.tasks.StreamTask"),
        ];
        assert_eq!(first_user_frame(&frames), Some(2));
        assert_eq!(first_user_frame(&frames[..2]), None);
        assert!(!is_framework_class("javaish.Foo"), "a package only named like java is the user's");
    }

    #[test]
    fn a_frame_reads_as_java_prints_it() {
        let f = Frame { class: "a.B".into(), method: "m".into(), file: Some("B.java".into()), line: Some(7) };
        assert_eq!((f.text().as_str(), f.method_text().as_str()), ("a.B.m(B.java:7)", "a.B.m"));
        assert_eq!(ThreadState::parse("TIMED_WAITING").map(ThreadState::as_str), Some("TIMED_WAITING"));
    }
}
