//! A store's entries in its sled tree as pages ([`Page`]): each sled key is a page's lower
//! bound (under the prefix [`PAGE`]), each value the entries from that bound up to the next
//! page's. The page whose bound is the empty key exists whenever any page does, so every key
//! has exactly one page that would hold it: the one with the greatest bound at or below it.
//!
//! A batch of writes is applied page by page: each page it touches is read, merged with its
//! writes, cut into pages of about [`PageSize::target`] bytes when it outgrows
//! [`PageSize::max`], and joined with the pages after it while it is under
//! [`PageSize::min`]. Only the thread applying a batch writes pages; a read of one key finds
//! its page's bound in memory ([`TreeShare`](super::bounds::TreeShare)) and the page held
//! beside it, or reads the page with one sled lookup, atomic against a batch, and holds it;
//! a scan holds off batches while it runs, so it sees every page as one batch left it.

use std::ops::Bound;

use eddy_core::streams::store::{BatchWrite, SharedWrites, Visit};
use sled::IVec;

use super::bounds::{BoundChange, PageWrite, SharedTree};
use super::page::{DamagedPage, Page, Run, TooLarge};

/// The prefix of the entries of stores written before pages (one sled entry each).
pub(crate) const LEGACY_ENTRY: u8 = 0;
/// The key of the changelog offset the entries reach (8 bytes, big-endian).
pub(crate) const CHANGELOG_OFFSET: &[u8] = &[1];
/// The prefix of the pages.
pub(crate) const PAGE: u8 = 2;

/// How many entries of a store written before pages are rewritten into pages at a time.
const MIGRATION_CHUNK: usize = 64 << 10;

/// How large pages grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageSize {
    /// About the size of a page cut from a larger run.
    pub(crate) target: usize,
    /// A page larger than this is cut.
    pub(crate) max: usize,
    /// A page smaller than this is joined with the next.
    pub(crate) min: usize,
    /// The most bytes of pages written to sled in one sled batch: a checkpoint touching more
    /// is applied in several, its changelog offset with the last (a store ahead of the
    /// offset it records restores the same writes again, to the same values). sled frees
    /// the IO buffers a batch fills only once the batch is done: batches of 16 MiB held
    /// 31 MiB of them at 10M keys of count state, batches of 4 MiB hold 2.
    pub(crate) most_batch_bytes: usize,
}

impl Default for PageSize {
    fn default() -> Self {
        Self {
            target: 4 << 10,
            max: 8 << 10,
            min: 1 << 10,
            most_batch_bytes: 4 << 20,
        }
    }
}

/// What can go wrong reading or writing pages.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PagesError {
    /// sled failed.
    #[error(transparent)]
    Sled(#[from] sled::Error),
    /// A page does not decode.
    #[error(transparent)]
    Damaged(#[from] DamagedPage),
    /// An entry is too large for a page.
    #[error(transparent)]
    TooLarge(#[from] TooLarge),
}

type Result<T> = std::result::Result<T, PagesError>;

/// The pages of one store.
#[derive(Debug, Clone)]
pub(crate) struct Pages {
    tree: sled::Tree,
    size: PageSize,
    share: SharedTree,
}

/// Calls `f` with `key` under `prefix`, built on the stack when it is short.
pub(crate) fn with_prefixed<R>(prefix: u8, key: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
    const STACK: usize = 64;
    if key.len() < STACK {
        let mut buffer = [prefix; STACK];
        buffer[1..=key.len()].copy_from_slice(key);
        f(&buffer[..=key.len()])
    } else {
        f(&[&[prefix][..], key].concat())
    }
}

fn page_key(bound: &[u8]) -> Vec<u8> {
    [&[PAGE][..], bound].concat()
}

/// The writes a checkpoint hands over, as [`Pages::apply`] takes them (a map's are in key
/// order already, one a key).
pub(crate) fn checkpoint_writes(writes: &SharedWrites) -> Vec<BatchWrite<'_>> {
    writes.iter().map(|(k, v)| (&k[..], v.as_deref())).collect()
}

/// The writes of `writes` sorted by key, the last write of each key kept.
pub(crate) fn sorted<'a>(writes: &mut dyn Iterator<Item = BatchWrite<'a>>) -> Vec<BatchWrite<'a>> {
    let mut all: Vec<BatchWrite<'a>> = writes.collect();
    all.sort_by(|a, b| a.0.cmp(b.0));
    let mut unique: Vec<BatchWrite<'a>> = Vec::with_capacity(all.len());
    for write in all {
        match unique.last_mut() {
            Some(last) if last.0 == write.0 => *last = write,
            _ => unique.push(write),
        }
    }
    unique
}

impl Pages {
    /// The pages in `tree`; `share` is shared by every `Pages` of the tree.
    pub(crate) fn new(tree: sled::Tree, size: PageSize, share: SharedTree) -> Self {
        Self { tree, size, share }
    }

    /// The tree the pages are in.
    pub(crate) fn tree(&self) -> &sled::Tree {
        &self.tree
    }

    /// The page that holds `key` (or would): its sled key and bytes; held in memory from
    /// then on when `hold` (a read of one key, not a batch's or a scan's walk).
    fn page_at(&self, key: &[u8], hold: bool) -> Result<Option<(IVec, IVec)>> {
        with_prefixed(PAGE, key, |upper| {
            if let Some(found) = self.page_by_bounds(upper, false, hold)? {
                return Ok(found);
            }
            let found = self.tree.range(&[PAGE][..]..=upper).next_back();
            Ok(found.transpose()?)
        })
    }

    /// The page after the one at `page_key` (or the first page, after `[PAGE]`).
    fn page_after(&self, page_key: &[u8]) -> Result<Option<(IVec, IVec)>> {
        if let Some(found) = self.page_by_bounds(page_key, true, false)? {
            return Ok(found);
        }
        let range = (Bound::Excluded(page_key), Bound::Excluded(&[PAGE + 1][..]));
        Ok(self.tree.range::<&[u8], _>(range).next().transpose()?)
    }

    /// The page at or before `page_key` (after it when `after`) found through the bounds in
    /// memory, held beside them from then on when `hold`; `None` when they cannot say (not
    /// read yet, or a batch changed the pages meanwhile).
    fn page_by_bounds(
        &self,
        page_key: &[u8],
        after: bool,
        hold: bool,
    ) -> Result<Option<Option<(IVec, IVec)>>> {
        let Some(ticket) = self.share.ticket() else {
            return Ok(None);
        };
        let Some(found) = self.share.find(page_key, after) else {
            return Ok(None);
        };
        let page = match found {
            Some((key, Some(bytes))) => Some((key, bytes)),
            Some((key, None)) => match self.tree.get(&key)? {
                Some(bytes) => {
                    if hold {
                        self.share.hold(&key, &bytes, ticket);
                    }
                    Some((key, bytes))
                }
                None => return Ok(None),
            },
            None => None,
        };
        Ok(self.share.still(ticket).then_some(page))
    }

    /// The page with the lowest bound.
    fn first_page(&self) -> Result<Option<(IVec, IVec)>> {
        let range = &[PAGE][..]..&[PAGE + 1][..];
        Ok(self.tree.range(range).next().transpose()?)
    }

    /// Appends the value of `key` to `out`; `false` when there is none.
    pub(crate) fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let Some((_, bytes)) = self.page_at(key, true)? else {
            return Ok(false);
        };
        let page = Page::parse(&bytes)?;
        match page.find(key)? {
            Ok(index) => {
                out.extend_from_slice(page.entry(index)?.1);
                Ok(true)
            }
            Err(_) => Ok(false),
        }
    }

    /// Calls `visit` with the entries within the bounds, in key order, until it returns
    /// `false`.
    pub(crate) fn scan(
        &self,
        from: Bound<&[u8]>,
        to: Bound<&[u8]>,
        visit: &mut Visit<'_>,
    ) -> Result<()> {
        let _batches_wait = self.share.hold_batches();
        let mut current = match from {
            Bound::Included(key) | Bound::Excluded(key) => self.page_at(key, false)?,
            Bound::Unbounded => None,
        };
        if current.is_none() {
            current = self.first_page()?;
        }
        let past = |key: &[u8]| match to {
            Bound::Included(to) => key > to,
            Bound::Excluded(to) => key >= to,
            Bound::Unbounded => false,
        };
        while let Some((key, bytes)) = current {
            let page = Page::parse(&bytes)?;
            let start = match from {
                Bound::Included(from) => page.find(from)?.unwrap_or_else(|i| i),
                Bound::Excluded(from) => page.find(from)?.map_or_else(|i| i, |i| i + 1),
                Bound::Unbounded => 0,
            };
            for index in start..page.len() {
                let (key, value) = page.entry(index)?;
                if past(key) || !visit(key, value) {
                    return Ok(());
                }
            }
            current = self.page_after(&key)?;
        }
        Ok(())
    }

    /// Applies `writes` (sorted by key, one write a key); `finish` adds what the last sled
    /// batch carries besides pages.
    pub(crate) fn apply(
        &self,
        writes: &[BatchWrite<'_>],
        finish: impl FnOnce(&mut sled::Batch),
    ) -> Result<()> {
        self.share.read_bounds(|| self.page_keys())?;
        let mut batch = sled::Batch::default();
        let mut changes: Vec<BoundChange> = Vec::new();
        let mut written: Vec<PageWrite> = Vec::new();
        let mut batch_bytes = 0;
        let (mut run, mut out) = (Run::default(), Vec::new());
        let mut next_write = 0;
        while let Some(&(first, _)) = writes.get(next_write) {
            let (key, bytes) = match self.page_at(first, false)? {
                Some((key, bytes)) => (key, Some(bytes)),
                None => (IVec::from(&[PAGE]), None),
            };
            let existed = bytes.is_some();
            run.clear();
            let mut next = self.page_after(&key)?;
            let upper = next.as_ref().map(|(k, _)| &k[1..]);
            next_write = merge(&mut run, bytes.as_deref(), writes, next_write, upper)?;
            // A small page takes in the pages after it.
            while run.bytes() < self.size.min {
                let Some((next_key, next_bytes)) = next.take() else {
                    break;
                };
                next = self.page_after(&next_key)?;
                let upper = next.as_ref().map(|(k, _)| &k[1..]);
                next_write = merge(&mut run, Some(&next_bytes), writes, next_write, upper)?;
                batch.remove(next_key.clone());
                changes.push((next_key, false));
            }
            if run.is_empty() {
                // The page before covers its keys (or, for the first page, no page is left).
                batch.remove(key.clone());
                changes.push((key, false));
            } else {
                if !existed {
                    changes.push((key.clone(), true));
                }
                run.pages(self.size.target, self.size.max, &mut out, |first, page| {
                    let key = first.map_or_else(
                        || key.clone(),
                        |first| {
                            let added = IVec::from(page_key(first));
                            changes.push((added.clone(), true));
                            added
                        },
                    );
                    let page = IVec::from(page);
                    batch_bytes += page.len();
                    batch.insert(key.clone(), page.clone());
                    written.push((key, page));
                })?;
            }
            if batch_bytes >= self.size.most_batch_bytes && next_write < writes.len() {
                self.write(std::mem::take(&mut batch), &mut changes, &mut written)?;
                batch_bytes = 0;
            }
        }
        finish(&mut batch);
        self.write(batch, &mut changes, &mut written)
    }

    /// Applies one sled batch, with the changes it makes to which pages exist and the pages
    /// it writes.
    fn write(
        &self,
        batch: sled::Batch,
        changes: &mut Vec<BoundChange>,
        written: &mut Vec<PageWrite>,
    ) -> Result<()> {
        let applied = self
            .share
            .apply_batch(changes, written, || self.tree.apply_batch(batch));
        changes.clear();
        written.clear();
        Ok(applied?)
    }

    /// The keys of every page, read from the tree.
    fn page_keys(&self) -> sled::Result<Vec<IVec>> {
        self.tree
            .scan_prefix([PAGE])
            .map(|entry| entry.map(|(key, _)| key))
            .collect()
    }

    /// Whether the pages are laid out as they must be: the first page's bound the empty key,
    /// every page decoding, no page empty, and each page's keys in order, from its bound to
    /// below the next page's.
    #[cfg(test)]
    pub(crate) fn check(&self) -> std::result::Result<(), String> {
        let pages: Vec<(IVec, IVec)> = self
            .tree
            .scan_prefix([PAGE])
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| e.to_string())?;
        if pages.first().is_some_and(|(key, _)| key[..] != [PAGE]) {
            return Err("no page has the empty bound".into());
        }
        let mut last: Option<Vec<u8>> = None;
        for (index, (key, bytes)) in pages.iter().enumerate() {
            let page = Page::parse(bytes).map_err(|e| e.to_string())?;
            if page.len() == 0 {
                return Err(format!("page {key:?} is empty"));
            }
            let upper = pages.get(index + 1).map(|(k, _)| &k[1..]);
            for i in 0..page.len() {
                let (entry, _) = page.entry(i).map_err(|e| e.to_string())?;
                let in_page = entry >= &key[1..] && upper.is_none_or(|u| entry < u);
                if !in_page || last.as_deref().is_some_and(|l| l >= entry) {
                    return Err(format!("{entry:?} is out of place in page {key:?}"));
                }
                last = Some(entry.to_vec());
            }
        }
        Ok(())
    }

    /// Rewrites the entries of a store written before pages into pages; `false` when it had
    /// none. Each chunk's old entries are removed with the last sled batch of its pages, so a
    /// crash between leaves entries that the next start rewrites again, to the same pages.
    pub(crate) fn migrate_legacy_entries(&self) -> Result<bool> {
        let mut migrated = false;
        loop {
            let legacy = self
                .tree
                .scan_prefix([LEGACY_ENTRY])
                .take(MIGRATION_CHUNK)
                .collect::<std::result::Result<Vec<_>, _>>()?;
            if legacy.is_empty() {
                return Ok(migrated);
            }
            migrated = true;
            let writes: Vec<BatchWrite<'_>> = legacy
                .iter()
                .map(|(key, value)| (&key[1..], Some(&value[..])))
                .collect();
            self.apply(&writes, |batch| {
                for (key, _) in &legacy {
                    batch.remove(key);
                }
            })?;
        }
    }
}

/// Appends a write to `run`, unless it is a deletion.
fn write_out(run: &mut Run, key: &[u8], value: Option<&[u8]>) -> std::result::Result<(), TooLarge> {
    match value {
        Some(value) => run.push(key, value),
        None => Ok(()),
    }
}

/// Appends to `run`, in key order, the entries of `page` with the writes from
/// `writes[next..]` below `upper` applied; returns the index of the first write left.
fn merge(
    run: &mut Run,
    page: Option<&[u8]>,
    writes: &[BatchWrite<'_>],
    mut next: usize,
    upper: Option<&[u8]>,
) -> Result<usize> {
    let page = page.map(Page::parse).transpose()?;
    let entries = page.map_or(0, |p| p.len());
    let mut index = 0;
    loop {
        let write = writes
            .get(next)
            .filter(|(key, _)| upper.is_none_or(|upper| *key < upper));
        let entry = match page {
            Some(page) if index < entries => Some(page.entry(index)?),
            _ => None,
        };
        match (entry, write) {
            (None, None) => return Ok(next),
            (Some((key, value)), None) => {
                run.push(key, value)?;
                index += 1;
            }
            (None, Some(&(key, value))) => {
                write_out(run, key, value)?;
                next += 1;
            }
            (Some((entry_key, entry_value)), Some(&(key, value))) => match entry_key.cmp(key) {
                std::cmp::Ordering::Less => {
                    run.push(entry_key, entry_value)?;
                    index += 1;
                }
                std::cmp::Ordering::Greater => {
                    write_out(run, key, value)?;
                    next += 1;
                }
                std::cmp::Ordering::Equal => {
                    write_out(run, key, value)?;
                    next += 1;
                    index += 1;
                }
            },
        }
    }
}
