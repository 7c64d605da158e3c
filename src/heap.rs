//! What the daemon asks of the system allocator so that its RSS follows the live heap.
//!
//! glibc's malloc keeps freed memory inside its arenas: a poll round, a `/metrics` render or a
//! state snapshot frees tens of MB at once, and the pages stay resident until something reuses
//! them. At 10,000 jobs that retention was more than half of the RSS (docs/performance.md,
//! issue 31). The default build uses jemalloc (`src/main.rs`) and needs none of this; in a build on
//! glibc's malloc (`--no-default-features`, as heap profilers need) two measures:
//!
//! * at most two arenas ([`limit_arenas`]; glibc's default is eight per core), unless the
//!   operator set `MALLOC_ARENA_MAX` themselves;
//! * a trimmer thread ([`spawn_trimmer`]) that hands free pages back with `malloc_trim(0)` at a
//!   fixed period. `malloc_trim` walks the free lists under each arena's lock, which costs
//!   milliseconds against a heap of hundreds of MB; the thread runs it apart from the runtime's
//!   workers, and its duration goes to the debug log.

// The library's only unsafe code: two calls into glibc that take and return plain integers (the
// binary's other is jemalloc's options, a static exported under the name jemalloc reads).
#![allow(unsafe_code)]

use std::time::Duration;

/// How often the trimmer runs.
pub const TRIM_PERIOD: Duration = Duration::from_secs(5);

/// Whether this build can limit arenas and trim (glibc, the system allocator: neither the
/// `jemalloc` nor the `mimalloc` feature).
pub(crate) const fn trims() -> bool {
    cfg!(all(target_os = "linux", target_env = "gnu", not(feature = "mimalloc"), not(feature = "jemalloc")))
}

/// Limits glibc to two arenas, unless `MALLOC_ARENA_MAX` is set (then glibc read it already).
/// Call before the runtime's threads start: arenas are handed out as threads first allocate.
pub fn limit_arenas() {
    #[cfg(all(
        target_os = "linux",
        target_env = "gnu",
        not(feature = "mimalloc"),
        not(feature = "jemalloc")
    ))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt only sets a parameter of the allocator; M_ARENA_MAX takes any positive int.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

/// Starts the trimmer thread (nothing when [`trims`] is false). It runs until the process ends.
pub fn spawn_trimmer(period: Duration) {
    if !trims() {
        return;
    }
    let spawned = std::thread::Builder::new().name("heap-trim".into()).spawn(move || {
        loop {
            std::thread::sleep(period);
            let started = std::time::Instant::now();
            let released = trim();
            tracing::debug!(released, took_ms = started.elapsed().as_secs_f64() * 1e3, "malloc_trim");
        }
    });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "could not start the heap trimmer thread; freed memory may stay resident");
    }
}

/// Hands free heap pages back to the system; whether any were.
fn trim() -> bool {
    #[cfg(all(
        target_os = "linux",
        target_env = "gnu",
        not(feature = "mimalloc"),
        not(feature = "jemalloc")
    ))]
    {
        // SAFETY: malloc_trim takes the arenas' locks itself and touches only free chunks.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(
        target_os = "linux",
        target_env = "gnu",
        not(feature = "mimalloc"),
        not(feature = "jemalloc")
    )))]
    {
        false
    }
}
