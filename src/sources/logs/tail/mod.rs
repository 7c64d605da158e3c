//! The follower: one task per `[[logs]]` entry reads new bytes of every file its globs match and
//! applies the recognised events to the shared state.
//!
//! File metadata is polled every `poll_interval`; `notify` events only wake the task up early
//! (events get lost on network filesystems and in containers) and count files that were created
//! and gone again before the tailer looked. Rotation styles:
//! * rename + create: the renamed file is followed by its inode to its end (and a grace
//!   period) before it is closed; the new file at the old name is read from its beginning;
//! * copytruncate: the file shrinks below our position or its first bytes change: read it
//!   again from the start. If the glob also matches the copy, the copy is known by its first
//!   bytes and read on from where the tailer was in the original: neither counted twice nor,
//!   for what the copy holds, lost;
//! * delete + recreate: the open handle keeps the old inode readable to its end.
//!
//! Older content is read first (each file's content has a sequence number), so events keep
//! their order across rotations. A file's identity and size come from its open handle, and bytes
//! read are kept only while the file still starts with its fingerprint: in a storm a name moves
//! on, or a file is truncated and rewritten, between two system calls. A file created and rotated away before the tailer looked at it
//! is never read: with file events, it is counted in `rotation_gaps`.
//!
//! The read position reported for a file is the start of the record still being assembled, so
//! a restart reads that record again and emits it once (see `parse`). Positions travel with the
//! events in one `Observation::LogRead` and are persisted with the state, never on their own.
//!
//! * `cycle`: [`TailCore`], one synchronous look at the files; time is an argument.
//! * `follow`: one followed file (reads, fingerprint, truncation, position).
//! * `list`: glob listing.
//! * `task`: the tokio task (the clock, `notify` events, applying to the state) and [`Tailers`].

mod cycle;
mod follow;
mod list;
mod task;

pub use cycle::{TailCore, TailOptions};
pub use follow::feed_searched;
pub use task::{TailerHandle, Tailers, spawn, user_patterns};
