//! The state directory's lock: one daemon per directory, taken at start and looked at again
//! before each persist round.

use std::path::{Path, PathBuf};

use super::error::StartError;

/// The lock file in the state directory: one daemon per directory (two wrote the same state
/// file, 47 rename errors in 30 s).
pub(crate) const LOCK_FILE: &str = "checkpoint-sentinel.lock";

/// Takes the state directory's lock, held as long as the returned file is open.
fn lock_state_dir(dir: &Path) -> Result<std::fs::File, StartError> {
    let fail = |message: String| StartError::StateDir { dir: dir.to_path_buf(), message };
    std::fs::create_dir_all(dir).map_err(|e| fail(format!("cannot create it: {e}")))?;
    let path = dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| fail(format!("cannot open {}: {e}", path.display())))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(file),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Err(fail(format!(
            "another checkpoint-sentinel is using this directory (it holds {}); give each daemon a state \
             directory of its own",
            path.display()
        ))),
        Err(e) => Err(fail(format!("cannot lock {}: {e}", path.display()))),
    }
}

/// The state directory's lock, held, with the (device, inode) of the directory and of the lock
/// file when it was taken: a directory removed or replaced under the daemon (its lock file
/// with it) would let a second daemon start on it, so each persist round looks again.
pub(super) struct StateDirLock {
    dir: PathBuf,
    /// Held while open.
    _file: std::fs::File,
    ids: [Option<(u64, u64)>; 2],
}

/// The (device, inode) of `path`, `None` if there is none.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl StateDirLock {
    pub(super) fn take(dir: &Path) -> Result<StateDirLock, StartError> {
        let file = lock_state_dir(dir)?;
        let ids = [identity(dir), identity(&dir.join(LOCK_FILE))];
        Ok(StateDirLock { dir: dir.to_path_buf(), _file: file, ids })
    }

    /// Whether the directory or its lock file is not the one locked any more: then, loudly,
    /// the directory is made again and the lock taken again (the caller writes everything it
    /// holds). A second daemon that got there first is logged; this one keeps the old lock.
    pub(super) fn retake_if_replaced(&mut self) -> bool {
        let now = [identity(&self.dir), identity(&self.dir.join(LOCK_FILE))];
        if now == self.ids {
            return false;
        }
        tracing::error!(
            dir = %self.dir.display(),
            "THE STATE DIRECTORY WAS REMOVED OR REPLACED while running: making it again, taking its lock \
             again and writing the state and the checkpoint store anew"
        );
        match StateDirLock::take(&self.dir) {
            Ok(fresh) => *self = fresh,
            Err(e) => tracing::error!("cannot lock the state directory again: {e}"),
        }
        true
    }
}
