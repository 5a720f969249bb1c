//! The writes of an in-memory store since its changelog was last taken, their bytes kept in
//! one buffer: recording a write allocates nothing, and taking the changelog makes one
//! shared buffer that every record's key and value are slices of.

use bytes::Bytes;

use super::ChangelogRecord;

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

    /// The writes, in the order they were made.
    pub(crate) fn take(&mut self) -> Vec<ChangelogRecord> {
        let mut out = Vec::with_capacity(self.writes.len());
        self.take_into(&mut out);
        out
    }

    /// Appends the writes to `out`, in the order they were made. Their bytes are copied out
    /// once, into one shared buffer; this buffer is kept for the next writes.
    pub(crate) fn take_into(&mut self, out: &mut Vec<ChangelogRecord>) {
        if self.writes.is_empty() {
            return;
        }
        let data = Bytes::copy_from_slice(&self.data);
        self.data.clear();
        let slice = |(from, len): Span| data.slice(from..from + len);
        out.extend(self.writes.drain(..).map(|(k, v)| ChangelogRecord {
            key: slice(k),
            value: v.map(slice),
        }));
    }
}
