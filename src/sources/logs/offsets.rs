//! File identity and read positions. A file is known by its device and inode plus a fingerprint
//! of its first bytes (an inode number is reused after a delete; a name moves on rotation).
//! Positions are plain data ([`TailerPositions`]) kept in `State` and persisted with the events
//! they account for; the separate offsets files of earlier versions are only read, once, when a
//! state file has no positions for a tailer yet.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;

pub(crate) use crate::observe::{FileId, FilePosition, TailerPositions};

/// How many leading bytes identify a file's content.
pub const FINGERPRINT_BYTES: usize = 1024;

impl FileId {
    /// The id of a file from its metadata.
    #[cfg(unix)]
    pub fn of(meta: &std::fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId { dev: meta.dev(), ino: meta.ino() }
    }

    /// Without inodes, only the fingerprint tells files apart.
    #[cfg(not(unix))]
    pub(crate) fn of(_meta: &std::fs::Metadata) -> FileId {
        FileId { dev: 0, ino: 0 }
    }
}

/// FNV-1a, 64 bit (the `fnv` crate): stable across Rust releases, unlike `DefaultHasher`, so a
/// fingerprint in the state file still matches after an upgrade.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

/// Reads up to [`FINGERPRINT_BYTES`] from the start of `file` without moving its position.
pub(crate) fn read_head(file: &File) -> io::Result<Vec<u8>> {
    let mut head = vec![0u8; FINGERPRINT_BYTES];
    let mut filled = 0;
    while filled < head.len() {
        let n = read_at(file, &mut head[filled..], filled as u64)?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    head.truncate(filled);
    Ok(head)
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(not(unix))]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

impl FilePosition {
    /// Whether a live file with this id and these leading bytes is the saved one.
    pub fn matches(&self, id: FileId, head: &[u8]) -> bool {
        self.id == id && self.same_content(head)
    }

    /// Whether `head` starts with the bytes this position's fingerprint covers (a copy of the
    /// file has them too). An empty fingerprint says nothing.
    pub(crate) fn same_content(&self, head: &[u8]) -> bool {
        self.head_len > 0 && head.len() >= self.head_len && fnv1a(&head[..self.head_len]) == self.head_hash
    }
}

/// The format version of the offsets files written by earlier versions.
const LEGACY_VERSION: u32 = 1;

/// An offsets file of an earlier version: the positions plus a format version.
#[derive(Deserialize)]
struct LegacyOffsets {
    version: u32,
    #[serde(flatten)]
    positions: TailerPositions,
}

/// Where earlier versions kept the positions of tailer `id`.
pub(crate) fn legacy_path(state_dir: &Path, id: &str) -> PathBuf {
    let safe: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    state_dir.join("log-offsets").join(format!("{safe}.json"))
}

/// Reads the positions an earlier version saved; `Ok(None)` when there are none.
pub(crate) fn load_legacy(path: &Path) -> io::Result<Option<TailerPositions>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let saved: LegacyOffsets =
        serde_json::from_slice(&bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    if saved.version != LEGACY_VERSION {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unknown offsets version {}", saved.version),
        ));
    }
    Ok(Some(saved.positions))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fingerprint_is_fnv1a_as_the_state_files_of_earlier_versions_hold_it() {
        // The published FNV-1a 64-bit test vectors; the hand-written hash before the crate gave these.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn the_fingerprint_decides() {
        let id = FileId { dev: 1, ino: 2 };
        let p = FilePosition { id, head_len: 3, head_hash: fnv1a(b"abc"), offset: 9, path: "x".into() };
        assert!(p.matches(id, b"abcdef"));
        assert!(!p.matches(id, b"abX"), "same inode, other content: a new file");
        assert!(!p.matches(FileId { dev: 1, ino: 3 }, b"abc"));
        assert!(p.same_content(b"abcdef"), "a copy has the same first bytes");
        let empty = FilePosition { head_len: 0, head_hash: fnv1a(b""), ..p };
        assert!(!empty.same_content(b"anything"));
    }

    #[test]
    fn offsets_files_of_earlier_versions_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = legacy_path(dir.path(), "local/1");
        assert!(path.ends_with("log-offsets/local_1.json"));
        assert_eq!(load_legacy(&path).unwrap(), None);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        // Exactly what the previous version wrote.
        std::fs::write(
            &path,
            r#"{"version": 1, "written_at_ms": 5, "files": [{"id": {"dev": 1, "ino": 2}, "head_len": 3,
                "head_hash": 16654208175385433931, "offset": 9, "path": "x"}]}"#,
        )
        .unwrap();
        let back = load_legacy(&path).unwrap().unwrap();
        assert_eq!(back.written_at_ms, 5);
        assert_eq!(back.files[0].offset, 9);
        assert!(back.files[0].matches(FileId { dev: 1, ino: 2 }, b"abc"));
    }

    #[test]
    fn a_corrupt_file_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = legacy_path(dir.path(), "a");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"{not json").unwrap();
        assert!(load_legacy(&path).is_err());
    }
}
