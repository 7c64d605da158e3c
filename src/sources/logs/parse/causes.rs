//! Root causes: the exception a stack trace ends in, unwrapped, and its category (disk full,
//! out of memory, timeout, S3, …) from one multi-literal search.

use aho_corasick::AhoCorasick;

/// Flink's wrapper of an exception that crossed the network.
pub(super) const SERIALIZED: &str = "org.apache.flink.util.SerializedThrowable";

/// One exception line unwrapped: Flink wraps remote causes in `SerializedThrowable` and
/// futures wrap theirs in `ExecutionException`/`CompletionException`; the class that matters
/// is the innermost one named on the line.
pub fn exception_of(line: &str) -> (String, String) {
    const WRAPPERS: &[&str] =
        &[SERIALIZED, "java.util.concurrent.ExecutionException", "java.util.concurrent.CompletionException"];
    let mut text = line.trim().strip_prefix("Caused by: ").unwrap_or(line.trim());
    loop {
        let Some((class, message)) = split_class(text) else {
            return (String::new(), text.to_string());
        };
        match split_class(message) {
            Some(_) if WRAPPERS.contains(&class) => text = message,
            _ => return (class.to_string(), message.to_string()),
        }
    }
}

/// `java.io.IOException: msg` → (`java.io.IOException`, `msg`), if the text starts with a
/// fully qualified class name.
fn split_class(text: &str) -> Option<(&str, &str)> {
    static COLON: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b": "));
    let (class, message) = match COLON.find(text.as_bytes()) {
        Some(i) => (&text[..i], &text[i + 2..]),
        None => (text, ""),
    };
    let looks_like_class = class.contains('.')
        && !class.contains(' ')
        && class.split('.').all(|part| {
            part.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
                && part.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        });
    looks_like_class.then_some((class, message))
}

/// Root-cause categories, most specific first: (category, any of these substrings).
/// The starting table is the usual suspects of checkpoint failures (disk full behind a closed channel, OOM behind a
/// declined checkpoint, ClassCast for serializer changes, S3 socket timeouts, metadata store).
pub(super) const CAUSES: &[(&str, &[&str])] = &[
    // A task's acknowledgement larger than `pekko.framesize` (`akka.framesize` before 1.18):
    // Pekko/Akka remoting drops it (`OversizedPayloadException: Discarding oversized payload
    // sent to Actor[…]: max allowed size … bytes, actual size of encoded class … was … bytes.`)
    // and, before FLINK-39738, the checkpoint simply expires; since FLINK-39738 the task asks
    // instead of telling, and the acknowledgement fails as an RPC timeout that names it
    // (`Invocation of [RemoteRpcInvocation(CheckpointCoordinatorGateway.acknowledgeCheckpoint(…))]
    // at recipient […] timed out.`). Flink's own check: `The rpc invocation size … exceeds the
    // maximum akka framesize.`
    (
        "oversized_ack",
        &[
            "Discarding oversized payload",
            "OversizedPayloadException",
            "CheckpointCoordinatorGateway.acknowledgeCheckpoint",
            "exceeds the maximum akka framesize",
            "exceeds the maximum pekko framesize",
        ],
    ),
    // The checkpoint storage throttling its client: S3's `503 SlowDown` ("Please reduce your
    // request rate."), S3A's `AWSServiceThrottledException`, 429 from S3-compatible stores.
    (
        "storage_throttled",
        &[
            "SlowDown",
            "Slow Down",
            "reduce your request rate",
            "AWSServiceThrottledException",
            "ThrottlingException",
            "Status Code: 503",
            "Status Code: 429",
            "Too Many Requests",
            "RequestLimitExceeded",
        ],
    ),
    (
        "disk_full",
        &["No space left on device", "Disk quota exceeded", "DiskFullException", "not enough space"],
    ),
    (
        "out_of_memory",
        &[
            "OutOfMemoryError",
            "Java heap space",
            "GC overhead limit exceeded",
            "Direct buffer memory",
            "Metaspace",
            "Cannot allocate memory",
        ],
    ),
    (
        "permission",
        &[
            "AccessDeniedException",
            "Permission denied",
            "AccessControlException",
            "Access Denied",
            "403 Forbidden",
            "Operation not permitted",
        ],
    ),
    (
        "serialization",
        &[
            "ClassCastException",
            "NotSerializableException",
            "InvalidClassException",
            "SerializationException",
            "KryoException",
            "StateMigrationException",
            "serializer",
            "Serializer",
        ],
    ),
    (
        "closed_stream",
        &[
            "ClosedChannelException",
            "Stream is closed",
            "Stream closed",
            "stream closed",
            "Channel closed",
            "Broken pipe",
            "Connection reset",
            "closed before",
        ],
    ),
    // The checkpoint storage refusing a write for good: a bucket that is not there, a quota,
    // Flink's own "Could not flush to file and close the file system output stream to <path> in
    // order to obtain the stream state handle" over a cause no category above names.
    (
        "storage_error",
        &[
            "NoSuchBucket",
            "The specified bucket does not exist",
            "UnknownStoreException",
            "QuotaExceeded",
            "Quota exceeded",
            "quota exceeded",
            "Could not flush to file and close the file system output stream",
        ],
    ),
    ("expired", &["Checkpoint expired before completing"]),
    ("timeout", &["TimeoutException", "SocketTimeoutException", "timed out", "Timeout", "timeout"]),
    ("s3", &["AmazonS3Exception", "S3Exception", "com.amazonaws", "software.amazon.awssdk", "s3a:", "s3://"]),
    (
        "hdfs",
        &[
            "org.apache.hadoop.hdfs",
            "org.apache.hadoop.ipc.RemoteException",
            "BlockMissingException",
            "LeaseExpiredException",
            "hdfs://",
            "DataNode",
            "NameNode",
        ],
    ),
    ("file_not_found", &["FileNotFoundException", "NoSuchFileException"]),
    ("metadata_store", &["Failed to persist checkpoint metadata", "metadata store"]),
    (
        "task_failure",
        &[
            "Task has failed",
            "FailoverRegion is restarting",
            "Checkpoint Coordinator is suspending",
            "CheckpointCoordinator shutdown",
            "declined due to subtask failure",
        ],
    ),
    (
        "tasks_not_running",
        &["Not all required tasks are currently running", "not being executed at the moment"],
    ),
    ("declined", &["Checkpoint was declined", "Task received cancellation", "barrier from newer checkpoint"]),
    // The asynchronous part of a snapshot cancelled because its checkpoint was already aborted
    // (expired, declined elsewhere): what happened after, not why.
    ("cancelled", &["java.util.concurrent.CancellationException"]),
];

/// Categories that say what happened to a checkpoint rather than why: when a checkpoint has
/// another cause too (the exception a task threw), that is its root cause and these are
/// symptoms of it.
/// In this order, the first is the root cause of a checkpoint that has nothing else.
pub const SYMPTOM_CATEGORIES: &[&str] =
    &["expired", "tasks_not_running", "task_failure", "declined", "cancelled"];

/// Categories looked for in the whole chain before the deepest cause: the deepest cause of a
/// throttled write or a dropped acknowledgement is often the retry's last timeout.
pub(super) const CHAIN_FIRST: &[&str] = &["oversized_ack", "storage_throttled"];
/// Categories looked for in the whole chain when the deepest cause names none.
pub(super) const CHAIN_LATER: &[&str] = &["s3", "hdfs", "disk_full", "out_of_memory", "storage_error"];

/// The category of a root cause: first an oversized acknowledgement or a throttled storage
/// anywhere in the chain, then by the deepest cause alone, then by the whole chain (frames show
/// S3 or HDFS clients where the message does not), then by its class.
///
/// One overlapping multi-literal search per text instead of one substring search per needle:
/// the first category (in `CAUSES` order) any of whose needles occurs wins, as before
/// (`classify_by_needle` in the tests is the needle-by-needle reference).
pub fn classify(exception: &str, message: &str, chain: &[String]) -> &'static str {
    let mut text = String::with_capacity(chain.iter().map(|l| l.len() + 1).sum());
    for line in chain {
        text.push_str(line);
        text.push('\n');
    }
    classify_text(exception, message, &text)
}

/// [`classify`] with the chain as one text, its lines each followed by `\n`. No needle holds a
/// line break, so the first category found in the whole text is the first found in any line.
pub fn classify_text(exception: &str, message: &str, chain: &str) -> &'static str {
    static ROOT: std::sync::LazyLock<CauseSearch> = std::sync::LazyLock::new(|| CauseSearch::new(|_| true));
    static CHAIN: std::sync::LazyLock<CauseSearch> =
        std::sync::LazyLock::new(|| CauseSearch::new(|category| CHAIN_LATER.contains(&category)));
    static FIRST: std::sync::LazyLock<CauseSearch> =
        std::sync::LazyLock::new(|| CauseSearch::new(|category| CHAIN_FIRST.contains(&category)));
    let root = format!("{exception}: {message}");
    if FIRST.any_in(&root)
        && let Some(category) = FIRST.first(&root)
    {
        return category;
    }
    if FIRST.any_in(chain)
        && let Some(category) = FIRST.first(chain)
    {
        return category;
    }
    if let Some(category) = ROOT.first(&root) {
        return category;
    }
    if CHAIN.any_in(chain)
        && let Some(category) = CHAIN.first(chain)
    {
        return category;
    }
    if exception.ends_with("IOException") { "io_error" } else { "other" }
}

/// The needles of some `CAUSES` categories in one automaton, each needle standing for the first
/// category that lists it.
struct CauseSearch {
    automaton: AhoCorasick,
    /// The same needles for a SIMD (Teddy) search of a whole chain at once: most chains hold
    /// none of them, and a leftmost search finds something wherever any needle occurs.
    packed: Option<aho_corasick::packed::Searcher>,
    /// Pattern index → index into `CAUSES`.
    category: Vec<usize>,
}

impl CauseSearch {
    fn new(include: impl Fn(&str) -> bool) -> Self {
        let mut needles: Vec<&str> = Vec::new();
        let mut category = Vec::new();
        for (i, (name, list)) in CAUSES.iter().enumerate() {
            for needle in list.iter().filter(|_| include(name)) {
                if !needles.contains(needle) {
                    needles.push(needle);
                    category.push(i);
                }
            }
        }
        // A DFA: one table lookup per byte, the fastest overlapping search aho-corasick has.
        let automaton = AhoCorasick::builder()
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .build(&needles)
            .expect("cause needles build an automaton");
        let packed = aho_corasick::packed::Searcher::new(needles.iter());
        CauseSearch { automaton, category, packed }
    }

    /// Whether any needle occurs in `text` (true when that cannot be told cheaply): a SIMD
    /// search before the overlapping automaton.
    fn any_in(&self, text: &str) -> bool {
        self.packed.as_ref().is_none_or(|packed| packed.find(text).is_some())
    }

    /// The first category (in `CAUSES` order) with a needle in `text`.
    fn first(&self, text: &str) -> Option<&'static str> {
        self.automaton
            .find_overlapping_iter(text)
            .map(|m| self.category[m.pattern().as_usize()])
            .min()
            .map(|i| CAUSES[i].0)
    }
}
