//! File identity and persisted read positions. A file is known by its device and inode plus a
//! fingerprint of its first bytes (an inode number is reused after a delete; a name moves on
//! rotation). Positions are written atomically: temp file, fsync, rename, fsync of the directory.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// How many leading bytes identify a file's content.
pub const FINGERPRINT_BYTES: usize = 1024;

/// The version of the offsets file format.
const VERSION: u32 = 1;

/// Device and inode of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FileId {
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
}

impl FileId {
    /// The id of a file from its metadata.
    #[cfg(unix)]
    pub fn of(meta: &std::fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId { dev: meta.dev(), ino: meta.ino() }
    }

    /// Without inodes, only the fingerprint tells files apart.
    #[cfg(not(unix))]
    pub fn of(_meta: &std::fs::Metadata) -> FileId {
        FileId { dev: 0, ino: 0 }
    }
}

/// FNV-1a, 64 bit: stable across Rust releases, unlike `DefaultHasher`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Reads up to [`FINGERPRINT_BYTES`] from the start of `file` without moving its position.
pub fn read_head(file: &File) -> io::Result<Vec<u8>> {
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

/// One file's persisted position.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedFile {
    /// Device and inode.
    pub id: FileId,
    /// How many leading bytes the fingerprint covers.
    pub head_len: usize,
    /// FNV-1a of those bytes.
    pub head_hash: u64,
    /// Every byte before this was turned into events.
    pub offset: u64,
    /// Where the file was last seen (for people reading the file).
    pub path: String,
}

impl SavedFile {
    /// Whether a live file with this id and these leading bytes is the saved one.
    pub fn matches(&self, id: FileId, head: &[u8]) -> bool {
        self.id == id && head.len() >= self.head_len && fnv1a(&head[..self.head_len]) == self.head_hash
    }
}

/// The persisted positions of one tailer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedOffsets {
    /// Format version.
    pub version: u32,
    /// When this was written, Unix ms: files modified later appeared while the daemon was down.
    pub written_at_ms: i64,
    /// The files.
    pub files: Vec<SavedFile>,
}

impl SavedOffsets {
    /// Positions written at `written_at_ms`.
    pub fn new(written_at_ms: i64, files: Vec<SavedFile>) -> Self {
        SavedOffsets { version: VERSION, written_at_ms, files }
    }
}

/// Where the tailer `id` keeps its positions.
pub fn path_for(state_dir: &Path, id: &str) -> PathBuf {
    let safe: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    state_dir.join("log-offsets").join(format!("{safe}.json"))
}

/// Reads saved positions; `Ok(None)` when there are none yet.
pub fn load(path: &Path) -> io::Result<Option<SavedOffsets>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let saved: SavedOffsets =
        serde_json::from_slice(&bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    if saved.version != VERSION {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unknown offsets version {}", saved.version),
        ));
    }
    Ok(Some(saved))
}

/// Writes positions so that a crash leaves either the old or the new file, never a mix.
pub fn save(path: &Path, saved: &SavedOffsets) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = path.with_extension("json.tmp");
    let bytes =
        serde_json::to_vec_pretty(saved).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    {
        let mut f = File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    // The rename itself is durable only once the directory is synced.
    #[cfg(unix)]
    File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_and_the_fingerprint_decides() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_for(dir.path(), "local/1");
        assert!(path.ends_with("log-offsets/local_1.json"));
        assert_eq!(load(&path).unwrap(), None);
        let id = FileId { dev: 1, ino: 2 };
        let saved = SavedOffsets::new(
            5,
            vec![SavedFile { id, head_len: 3, head_hash: fnv1a(b"abc"), offset: 9, path: "x".into() }],
        );
        save(&path, &saved).unwrap();
        let back = load(&path).unwrap().unwrap();
        assert_eq!(back, saved);
        assert!(back.files[0].matches(id, b"abcdef"));
        assert!(!back.files[0].matches(id, b"abX"), "same inode, other content: a new file");
        assert!(!back.files[0].matches(FileId { dev: 1, ino: 3 }, b"abc"));
        assert!(!dir.path().join("log-offsets/local_1.json.tmp").exists());
    }

    #[test]
    fn a_corrupt_file_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_for(dir.path(), "a");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"{not json").unwrap();
        assert!(load(&path).is_err());
    }
}
