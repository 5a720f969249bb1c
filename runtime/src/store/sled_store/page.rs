//! A page: a run of a store's entries in key order, kept as one sled value, so that sled
//! holds a few thousand large values instead of millions of small ones (sled's memory and
//! time per entry are many times an entry's size). Encoded as the entry count (`u32`), the
//! offset of each entry in the data that follows (`u32` each, ascending), and the entries,
//! each its key's length (`u32`), its key and its value (to the next entry's offset): a read
//! finds a key by binary search without decoding the page. Every length is checked against
//! the page, so a damaged page is an error, never a panic.

use std::cmp::Ordering;

/// A page that does not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a state page is damaged: {0}")]
pub(crate) struct DamagedPage(&'static str);

const U32: usize = std::mem::size_of::<u32>();

fn read_u32(bytes: &[u8], at: usize) -> Option<usize> {
    let end = at.checked_add(U32)?;
    let raw: [u8; U32] = bytes.get(at..end)?.try_into().ok()?;
    usize::try_from(u32::from_le_bytes(raw)).ok()
}

/// A page read from sled.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Page<'a> {
    count: usize,
    offsets: &'a [u8],
    data: &'a [u8],
}

impl<'a> Page<'a> {
    /// The page in `bytes`.
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<Self, DamagedPage> {
        let count = read_u32(bytes, 0).ok_or(DamagedPage("shorter than its header"))?;
        let table = count
            .checked_mul(U32)
            .and_then(|n| n.checked_add(U32))
            .filter(|&end| end <= bytes.len())
            .ok_or(DamagedPage("its offsets run past its end"))?;
        Ok(Self {
            count,
            offsets: &bytes[U32..table],
            data: &bytes[table..],
        })
    }

    /// The number of entries.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// The entry at `index` (below [`len`](Self::len)).
    pub(crate) fn entry(&self, index: usize) -> Result<(&'a [u8], &'a [u8]), DamagedPage> {
        let start = read_u32(self.offsets, index * U32).ok_or(DamagedPage("no such entry"))?;
        let end = if index + 1 == self.count {
            self.data.len()
        } else {
            read_u32(self.offsets, (index + 1) * U32).ok_or(DamagedPage("no such entry"))?
        };
        let entry = self
            .data
            .get(start..end)
            .ok_or(DamagedPage("an entry runs past the page"))?;
        let key_len = read_u32(entry, 0).ok_or(DamagedPage("an entry has no key length"))?;
        let key_end = key_len
            .checked_add(U32)
            .filter(|&e| e <= entry.len())
            .ok_or(DamagedPage("a key runs past its entry"))?;
        Ok((&entry[U32..key_end], &entry[key_end..]))
    }

    /// Where `key` is: `Ok(index)` when the page holds it, `Err(index)` where it would go.
    pub(crate) fn find(&self, key: &[u8]) -> Result<Result<usize, usize>, DamagedPage> {
        let (mut low, mut high) = (0, self.count);
        while low < high {
            let middle = low + (high - low) / 2;
            match self.entry(middle)?.0.cmp(key) {
                Ordering::Less => low = middle + 1,
                Ordering::Greater => high = middle,
                Ordering::Equal => return Ok(Ok(middle)),
            }
        }
        Ok(Err(low))
    }
}

/// Entries laid out one after another as a page's data, gathered in key order from pages
/// and writes, then cut into pages.
#[derive(Debug, Default)]
pub(crate) struct Run {
    data: Vec<u8>,
    /// Where each entry starts in `data`.
    starts: Vec<usize>,
}

impl Run {
    /// Empties the run, keeping its memory.
    pub(crate) fn clear(&mut self) {
        self.data.clear();
        self.starts.clear();
    }

    /// The bytes the entries take.
    pub(crate) fn bytes(&self) -> usize {
        self.data.len() + self.starts.len() * U32
    }

    /// Whether the run holds no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Appends an entry, after every entry already in the run.
    pub(crate) fn push(&mut self, key: &[u8], value: &[u8]) -> Result<(), TooLarge> {
        let key_len = u32::try_from(key.len()).map_err(|_| TooLarge)?;
        self.starts.push(self.data.len());
        self.data.extend_from_slice(&key_len.to_le_bytes());
        self.data.extend_from_slice(key);
        self.data.extend_from_slice(value);
        Ok(())
    }

    /// The key of the entry at `index`.
    fn key(&self, index: usize) -> &[u8] {
        let start = self.starts[index] + U32;
        // The run wrote the length itself, from a key's length.
        let len = read_u32(&self.data, self.starts[index]).unwrap_or_default();
        &self.data[start..start + len]
    }

    /// Cuts the run into pages of about `target` bytes (one page when it is at most `max`),
    /// calling `page` with each page's first key (`None` for the first page) and its bytes.
    pub(crate) fn pages(
        &self,
        target: usize,
        max: usize,
        out: &mut Vec<u8>,
        mut page: impl FnMut(Option<&[u8]>, &[u8]),
    ) -> Result<(), TooLarge> {
        let n = self.starts.len();
        let mut first = 0;
        while first < n {
            let mut last = n;
            if self.bytes() - self.bytes_before(first) > max {
                last = first + 1;
                while last < n && self.bytes_before(last) - self.bytes_before(first) < target {
                    last += 1;
                }
            }
            self.encode(first, last, out)?;
            page((first > 0).then(|| self.key(first)), out);
            first = last;
        }
        Ok(())
    }

    /// The bytes the entries before `index` take.
    fn bytes_before(&self, index: usize) -> usize {
        self.starts.get(index).copied().unwrap_or(self.data.len()) + index * U32
    }

    /// Entries `first..last` as a page, in `out`.
    fn encode(&self, first: usize, last: usize, out: &mut Vec<u8>) -> Result<(), TooLarge> {
        out.clear();
        let base = self.starts[first];
        let end = self.starts.get(last).copied().unwrap_or(self.data.len());
        let count = u32::try_from(last - first).map_err(|_| TooLarge)?;
        out.reserve(U32 * (last - first + 1) + end - base);
        out.extend_from_slice(&count.to_le_bytes());
        for &start in &self.starts[first..last] {
            let offset = u32::try_from(start - base).map_err(|_| TooLarge)?;
            out.extend_from_slice(&offset.to_le_bytes());
        }
        out.extend_from_slice(&self.data[base..end]);
        Ok(())
    }
}

/// A page that would be larger than 4 GiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an entry of more than 4 GiB cannot be stored")]
pub(crate) struct TooLarge;

#[cfg(test)]
mod tests {
    use super::*;

    fn pages_of(entries: &[(&[u8], &[u8])], target: usize, max: usize) -> Vec<Vec<u8>> {
        let mut run = Run::default();
        for (k, v) in entries {
            run.push(k, v).unwrap();
        }
        let mut out = Vec::new();
        let mut pages = Vec::new();
        run.pages(target, max, &mut out, |first, page| {
            let parsed = Page::parse(page).unwrap();
            assert_eq!(first.is_none(), pages.is_empty());
            if let Some(first) = first {
                assert_eq!(parsed.entry(0).unwrap().0, first);
            }
            pages.push(page.to_vec());
        })
        .unwrap();
        pages
    }

    #[test]
    fn a_page_finds_its_keys_and_where_others_would_go() {
        let entries: [(&[u8], &[u8]); 3] = [(b"", b"empty"), (b"b", b""), (b"d", b"4")];
        let pages = pages_of(&entries, 1 << 10, 1 << 12);
        assert_eq!(pages.len(), 1);
        let page = Page::parse(&pages[0]).unwrap();
        assert_eq!(page.len(), 3);
        assert_eq!(page.entry(0).unwrap(), (&b""[..], &b"empty"[..]));
        assert_eq!(page.entry(1).unwrap(), (&b"b"[..], &b""[..]));
        assert_eq!(page.entry(2).unwrap(), (&b"d"[..], &b"4"[..]));
        assert_eq!(page.find(b"").unwrap(), Ok(0));
        assert_eq!(page.find(b"d").unwrap(), Ok(2));
        assert_eq!(page.find(b"a").unwrap(), Err(1));
        assert_eq!(page.find(b"c").unwrap(), Err(2));
        assert_eq!(page.find(b"e").unwrap(), Err(3));
        assert!(page.entry(3).is_err());
    }

    #[test]
    fn a_long_run_is_cut_into_pages_of_about_the_target() {
        let keys: Vec<Vec<u8>> = (0..100u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let entries: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (&k[..], &b"value"[..])).collect();
        // 17 bytes an entry: 100 entries, 1,700 bytes, in pages of at least 170.
        let pages = pages_of(&entries, 170, 300);
        assert_eq!(pages.len(), 10);
        let mut all = Vec::new();
        for page in &pages {
            let page = Page::parse(page).unwrap();
            assert_eq!(page.len(), 10);
            for i in 0..page.len() {
                all.push(page.entry(i).unwrap().0.to_vec());
            }
        }
        assert_eq!(all, keys);
        // Under the maximum, one page.
        assert_eq!(pages_of(&entries, 170, 1_700).len(), 1);
    }

    #[test]
    fn a_damaged_page_is_an_error_not_a_panic() {
        let entries: [(&[u8], &[u8]); 2] = [(b"a", b"1"), (b"bb", b"22")];
        let good = pages_of(&entries, 1 << 10, 1 << 12).remove(0);
        for cut in 0..good.len() {
            if let Ok(page) = Page::parse(&good[..cut]) {
                for i in 0..page.len() {
                    let _ = page.entry(i);
                }
                let _ = page.find(b"bb");
            }
        }
        let mut huge_count = good.clone();
        huge_count[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Page::parse(&huge_count).is_err());
        let mut bad_key = good.clone();
        let data = 4 + 2 * 4;
        bad_key[data..data + 4].copy_from_slice(&1_000u32.to_le_bytes());
        let page = Page::parse(&bad_key).unwrap();
        assert_eq!(page.entry(0), Err(DamagedPage("a key runs past its entry")));
        assert!(page.find(b"a").is_err());
    }
}
