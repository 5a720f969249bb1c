//! Producer ids for idempotent and transactional producers.
//!
//! Ids are handed out from blocks: the end of the current block is written to
//! `DATA_DIR/producer-ids` (fsynced) before any id of it is given, so after a crash the next
//! start continues after the block and no id is ever given twice.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::storage::write_synced;

/// Ids reserved at a time.
const BLOCK: i64 = 1000;

/// Hands out producer ids that are never reused.
#[derive(Debug)]
pub(crate) struct ProducerIds {
    file: PathBuf,
    /// (next id to give, end of the reserved block).
    next: Mutex<(i64, i64)>,
}

impl ProducerIds {
    /// The allocator of the data directory `dir`.
    pub(crate) fn open(dir: &Path) -> io::Result<Self> {
        let file = dir.join("producer-ids");
        let reserved_end = match std::fs::read_to_string(&file) {
            Ok(text) => text.trim().parse::<i64>().map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is not a producer id", file.display()),
                )
            })?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        Ok(Self {
            file,
            next: Mutex::new((reserved_end, reserved_end)),
        })
    }

    /// A producer id no one had before.
    pub(crate) fn next_id(&self) -> io::Result<i64> {
        let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
        if next.0 == next.1 {
            let end = next.1 + BLOCK;
            write_synced(&self.file, end.to_string().as_bytes())?;
            next.1 = end;
        }
        let id = next.0;
        next.0 += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_never_given_twice_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let ids = ProducerIds::open(dir.path()).unwrap();
        let first: Vec<i64> = (0..3).map(|_| ids.next_id().unwrap()).collect();
        assert_eq!(first, vec![0, 1, 2]);
        drop(ids);
        // A restart (or a crash) moves on past the whole reserved block.
        let again = ProducerIds::open(dir.path()).unwrap();
        assert_eq!(again.next_id().unwrap(), BLOCK);
        std::fs::write(dir.path().join("producer-ids"), "nonsense").unwrap();
        assert!(ProducerIds::open(dir.path()).is_err());
    }
}
