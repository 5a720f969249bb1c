//! The writes of an in-memory store since its changelog was last cleared, their bytes kept in
//! one buffer: recording a write allocates nothing, and the task hands them to the producer
//! as a borrowed [`ChangelogBatch`], without a copy or a reference count per write.

use bytes::Bytes;

use super::ChangelogRecord;
use crate::streams::reuse::clear_keeping_room;

/// The bytes of keys and values a cleared buffer keeps room for.
const KEPT_BYTES: usize = 8 << 10;

/// The writes a cleared buffer keeps room for.
const KEPT_WRITES: usize = 256;

/// Where a write's bytes are in the buffer: offset and length.
type Span = (usize, usize);

/// Writes waiting to be taken.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChangelogBuffer {
    data: Vec<u8>,
    /// Key range and value range (`None` for a deletion) of each write.
    writes: Vec<(Span, Option<Span>)>,
}

impl ChangelogBuffer {
    /// Records a write whose changelog key is the concatenation of `key_parts`.
    pub(crate) fn push(&mut self, key_parts: &[&[u8]], value: Option<&[u8]>) {
        let start = self.data.len();
        for part in key_parts {
            self.data.extend_from_slice(part);
        }
        let key = (start, self.data.len() - start);
        let value = value.map(|v| {
            let range = (self.data.len(), v.len());
            self.data.extend_from_slice(v);
            range
        });
        self.writes.push((key, value));
    }

    /// The writes, borrowed, in the order they were made.
    pub(crate) fn batch(&self) -> ChangelogBatch<'_> {
        ChangelogBatch {
            data: &self.data,
            writes: &self.writes,
        }
    }

    /// Forgets the writes, keeping room for as many as were made since the last clear (at
    /// least [`KEPT_BYTES`] and [`KEPT_WRITES`], 64 KiB at most: see
    /// [`clear_keeping_room`]): a store of many that once wrote a large batch does not hold
    /// its room while the others run, and one that writes as much at every run does not
    /// grow its buffers again each time.
    pub(crate) fn clear(&mut self) {
        clear_keeping_room(&mut self.data, KEPT_BYTES);
        clear_keeping_room(&mut self.writes, KEPT_WRITES);
    }
}

/// A store's writes since its changelog was last cleared, borrowed from the store: each a
/// changelog key and a value (`None` for a deletion).
#[derive(Debug, Clone, Copy)]
pub struct ChangelogBatch<'a> {
    data: &'a [u8],
    writes: &'a [(Span, Option<Span>)],
}

/// The writes of a [`ChangelogBatch`], in the order they were made: key and value (`None`
/// for a deletion). An iterator of a type of its own (no closure), so that an async caller
/// may hold it across an await.
#[derive(Debug, Clone)]
pub struct ChangelogWrites<'a> {
    data: &'a [u8],
    writes: std::slice::Iter<'a, (Span, Option<Span>)>,
}

impl<'a> Iterator for ChangelogWrites<'a> {
    type Item = (&'a [u8], Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        let &(key, value) = self.writes.next()?;
        let data = self.data;
        let slice = |(from, len): Span| &data[from..from + len];
        Some((slice(key), value.map(slice)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.writes.size_hint()
    }
}

impl ExactSizeIterator for ChangelogWrites<'_> {}

impl<'a> ChangelogBatch<'a> {
    /// No writes.
    pub const EMPTY: ChangelogBatch<'static> = ChangelogBatch {
        data: &[],
        writes: &[],
    };

    /// The number of writes.
    pub fn len(&self) -> usize {
        self.writes.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// Roughly how many bytes the writes take: their keys and values and a write's
    /// bookkeeping each.
    pub fn bytes(&self) -> usize {
        self.data.len() + std::mem::size_of_val(self.writes)
    }

    /// The writes, in the order they were made: key and value.
    pub fn iter(&self) -> ChangelogWrites<'a> {
        ChangelogWrites {
            data: self.data,
            writes: self.writes.iter(),
        }
    }

    /// The writes as records that own their bytes (one shared buffer for all of them).
    pub fn to_records(&self) -> Vec<ChangelogRecord> {
        let data = Bytes::copy_from_slice(self.data);
        let slice = |(from, len): Span| data.slice(from..from + len);
        self.writes
            .iter()
            .map(|&(k, v)| ChangelogRecord {
                key: slice(k),
                value: v.map(slice),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_shows_the_writes_in_order_until_cleared() {
        let mut log = ChangelogBuffer::default();
        log.push(&[b"k", b"1"], Some(b"v1"));
        log.push(&[b"k2"], None);
        let batch = log.batch();
        assert_eq!(batch.len(), 2);
        let writes: Vec<_> = batch.iter().collect();
        assert_eq!(writes, [(&b"k1"[..], Some(&b"v1"[..])), (&b"k2"[..], None)]);
        let records = batch.to_records();
        assert_eq!(records[0].key, Bytes::from("k1"));
        assert_eq!(records[0].value, Some(Bytes::from("v1")));
        assert_eq!(records[1].value, None);
        log.clear();
        assert!(log.batch().is_empty());
        log.push(&[b"k3"], Some(b""));
        assert_eq!(
            log.batch().iter().next(),
            Some((&b"k3"[..], Some(&b""[..])))
        );
    }
}
